// Live stats charts (issue 32): the series of the last hour from `<object>/stats/`, then a point
// per collection round from the live stream `<object>/stats/live/`. Small SVG line charts:
// CPU (percent of one core), memory (and its limit), network and block I/O per second.
import { useEffect, useState } from "preact/hooks";
import type { StatPointView, StatsView } from "../../src/contract/stats.ts";
import { get } from "./api.ts";
import { wsUrl } from "./live.ts";

const RANGES = ["15m", "1h", "6h", "24h"] as const;
const KEEP = 2000;

function bytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n.toFixed(n >= 10 || i === 0 ? 0 : 1)} ${units[i]}`;
}

interface Line {
  label: string;
  values: number[];
  css: string;
}

function Chart(props: { title: string; times: number[]; lines: Line[]; format: (n: number) => string }) {
  const w = 600;
  const h = 120;
  const { times, lines } = props;
  const max = Math.max(1e-9, ...lines.flatMap((l) => l.values));
  const t0 = times[0] ?? 0;
  const span = Math.max(1, (times.at(-1) ?? 0) - t0);
  const x = (t: number) => ((t - t0) / span) * w;
  const y = (v: number) => h - (v / max) * (h - 4) - 2;
  const latest = lines.map((l) => `${l.label} ${props.format(l.values.at(-1) ?? 0)}`).join(" · ");
  return (
    <figure class="chart">
      <figcaption>
        <strong>{props.title}</strong> <span>{times.length ? latest : "no points yet"}</span>
      </figcaption>
      <svg
        viewBox={`0 0 ${w} ${h}`}
        preserveAspectRatio="none"
        role="img"
        aria-label={`${props.title}: ${latest}`}
      >
        {lines.map((l) => (
          <polyline
            key={l.label}
            class={l.css}
            fill="none"
            points={l.values.map((v, i) => `${x(times[i]!).toFixed(1)},${y(v).toFixed(1)}`).join(" ")}
          />
        ))}
      </svg>
      <div class="chart-scale">
        <span>max {props.format(max)}</span>
        <span>{times.length ? new Date(t0 * 1000).toLocaleTimeString() : ""}</span>
      </div>
    </figure>
  );
}

export function StatsCharts(props: { path: string }) {
  const [range, setRange] = useState<(typeof RANGES)[number]>("1h");
  const [points, setPoints] = useState<StatPointView[]>([]);
  const [error, setError] = useState("");
  useEffect(() => {
    let closed = false;
    let ws: WebSocket | undefined;
    setPoints([]);
    get<StatsView>(`${props.path}stats/?range=${range}`)
      .then((v) => {
        if (closed) return;
        setPoints(v.points);
        // Live points only at the collection step (a minute series keeps its history).
        if (v.step > 60) return;
        ws = new WebSocket(wsUrl(`${props.path}stats/live/`));
        ws.onmessage = (m) => {
          try {
            const f = JSON.parse(String(m.data)) as { type: string; point?: StatPointView };
            if (f.type !== "stats" || !f.point) return;
            const p = f.point;
            setPoints((list) =>
              list.length && list[list.length - 1]!.timestamp >= p.timestamp
                ? list
                : [...list, p].slice(-KEEP),
            );
          } catch {
            // not a frame of ours
          }
        };
      })
      .catch((e: Error) => setError(e.message));
    return () => {
      closed = true;
      ws?.close();
    };
  }, [props.path, range]);
  const times = points.map((p) => p.timestamp);
  const last = points.at(-1);
  return (
    <div class="stats-charts">
      <div class="filters">
        <label>
          Range{" "}
          <select
            value={range}
            onChange={(e) => setRange((e.target as HTMLSelectElement).value as typeof range)}
          >
            {RANGES.map((r) => (
              <option key={r} value={r}>
                {r}
              </option>
            ))}
          </select>
        </label>
        {last ? (
          <span>
            {last.containers > 1 ? `${last.containers} containers · ` : ""}
            {last.pids} PIDs · {last.restart_count} restarts
          </span>
        ) : null}
      </div>
      {error ? <p class="error">{error}</p> : null}
      <Chart
        title="CPU"
        times={times}
        format={(n) => `${n.toFixed(1)} %`}
        lines={[{ label: "of a core", values: points.map((p) => p.cpu_percent), css: "l1" }]}
      />
      <Chart
        title="Memory"
        times={times}
        format={bytes}
        lines={[
          { label: "used", values: points.map((p) => p.memory_bytes), css: "l1" },
          { label: "limit", values: points.map((p) => p.memory_limit_bytes), css: "l2" },
        ]}
      />
      <Chart
        title="Network"
        times={times}
        format={(n) => `${bytes(n)}/s`}
        lines={[
          { label: "in", values: points.map((p) => p.net_rx_bytes_per_s), css: "l1" },
          { label: "out", values: points.map((p) => p.net_tx_bytes_per_s), css: "l2" },
        ]}
      />
      <Chart
        title="Block I/O"
        times={times}
        format={(n) => `${bytes(n)}/s`}
        lines={[
          { label: "read", values: points.map((p) => p.block_read_bytes_per_s), css: "l1" },
          { label: "write", values: points.map((p) => p.block_write_bytes_per_s), css: "l2" },
        ]}
      />
    </div>
  );
}
