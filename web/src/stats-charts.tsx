// Live stats charts (issue 32): the series of the last hour from `<object>/stats/`, then a point
// per collection round from the live stream `<object>/stats/live/`. Drawn with uPlot (canvas; this
// module and uPlot load as their own chunk, stats-panel.tsx): CPU (percent of one core), memory
// (and its limit), network and block I/O per second. Colours come from the theme's variables and
// the charts are drawn again when the theme changes.
import { useEffect, useRef, useState } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import type { StatPointView, StatsView } from "../../src/contract/stats.ts";
import { get } from "./api.ts";
import { wsUrl } from "./live.ts";
import { theme } from "./theme.tsx";

const RANGES = ["15m", "1h", "6h", "24h"] as const;
/** Each range in seconds: the time axis spans it whatever the number of points. */
const RANGE_S: Record<(typeof RANGES)[number], number> = {
  "15m": 900,
  "1h": 3600,
  "6h": 21_600,
  "24h": 86_400,
};
const KEEP = 2000;
const HEIGHT = 140;

function bytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n.toFixed(Math.abs(n) >= 10 || i === 0 ? 0 : 1)} ${units[i]}`;
}

/** Ticks of byte axes at powers of two (512 MiB, 1 GiB), not at decimal steps (477 MiB, 954 MiB). */
const BYTE_INCRS = [0, 1, 2, 3, 4].flatMap((k) =>
  [1, 2, 4, 8, 16, 32, 64, 128, 256, 512].map((m) => m * 1024 ** k),
);

interface Line {
  label: string;
  values: number[];
  /** The theme variable the line is drawn in. */
  colour: "--accent" | "--bad";
}

/** The theme's colours now (read from the stylesheet's variables). */
function colours(el: Element) {
  const style = getComputedStyle(el);
  const v = (name: string, fallback: string) => style.getPropertyValue(name).trim() || fallback;
  return {
    ink: v("--muted", "#5b6470"),
    grid: v("--line", "#d9dde3"),
    "--accent": v("--accent", "#1f5fbf"),
    "--bad": v("--bad", "#b3261e"),
  };
}

/** Bumps when the theme in effect changes (the toggle, or the system's setting under "system"). */
function useThemeVersion(): number {
  const [version, setVersion] = useState(0);
  const chosen = theme.value;
  useEffect(() => setVersion((n) => n + 1), [chosen]);
  useEffect(() => {
    const media = globalThis.matchMedia?.("(prefers-color-scheme: dark)");
    const changed = () => setVersion((n) => n + 1);
    media?.addEventListener("change", changed);
    return () => media?.removeEventListener("change", changed);
  }, []);
  return version;
}

function Chart(props: {
  title: string;
  /** The range shown, in seconds, ending at the newest point (or now). */
  spanS: number;
  times: number[];
  lines: Line[];
  format: (n: number) => string;
  bytes?: boolean;
}) {
  const { times, lines, format } = props;
  const holder = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | undefined>(undefined);
  const themeVersion = useThemeVersion();
  const data: uPlot.AlignedData = [times, ...lines.map((l) => l.values)];
  const shape = lines.map((l) => l.label).join("|");
  // Read by the x scale at each redraw: without it uPlot stretches one point over years.
  const span = useRef(props.spanS);
  span.current = props.spanS;
  const last = useRef<number | undefined>(undefined);
  last.current = times.at(-1);

  // Made again when the theme or the set of lines changes; otherwise only given new data.
  useEffect(() => {
    const el = holder.current;
    if (!el) return;
    const c = colours(el);
    const axis = { stroke: c.ink, grid: { stroke: c.grid, width: 1 }, ticks: { stroke: c.grid, width: 1 } };
    const u = new uPlot(
      {
        width: Math.max(200, el.clientWidth),
        height: HEIGHT,
        legend: { show: true, live: false },
        cursor: { drag: { x: false, y: false } },
        scales: {
          x: {
            time: true,
            // The newest point's time (uPlot widens a single point's min and max by itself).
            range: () => {
              const end = last.current ?? Date.now() / 1000;
              return [end - span.current, end];
            },
          },
          y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
        },
        axes: [
          axis,
          {
            ...axis,
            size: 70,
            values: (_u, ticks) => ticks.map(format),
            ...(props.bytes ? { incrs: BYTE_INCRS } : {}),
          },
        ],
        series: [
          {},
          ...lines.map((l) => ({
            label: l.label,
            stroke: c[l.colour],
            width: 1.5,
            value: (_u: uPlot, v: number) => format(v),
          })),
        ],
      },
      data,
      el,
    );
    plot.current = u;
    const resized = new ResizeObserver(() => {
      const w = Math.max(200, el.clientWidth);
      if (w !== u.width) u.setSize({ width: w, height: HEIGHT });
    });
    resized.observe(el);
    return () => {
      resized.disconnect();
      u.destroy();
      plot.current = undefined;
    };
  }, [themeVersion, shape]);

  useEffect(() => {
    plot.current?.setData(data);
  });

  const latest = lines.map((l) => `${l.label} ${format(l.values.at(-1) ?? 0)}`).join(" · ");
  return (
    <figure class="chart" data-points={times.length} data-series={lines.length}>
      <figcaption>
        <strong>{props.title}</strong> <span>{times.length ? latest : "no points yet"}</span>
      </figcaption>
      <div class="chart-plot" ref={holder} role="img" aria-label={`${props.title}: ${latest}`} />
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
        spanS={RANGE_S[range]}
        times={times}
        format={(n) => `${n.toFixed(1)} %`}
        lines={[{ label: "of a core", values: points.map((p) => p.cpu_percent), colour: "--accent" }]}
      />
      <Chart
        title="Memory"
        spanS={RANGE_S[range]}
        times={times}
        format={bytes}
        bytes
        lines={[
          { label: "used", values: points.map((p) => p.memory_bytes), colour: "--accent" },
          { label: "limit", values: points.map((p) => p.memory_limit_bytes), colour: "--bad" },
        ]}
      />
      <Chart
        title="Network"
        spanS={RANGE_S[range]}
        times={times}
        format={(n) => `${bytes(n)}/s`}
        bytes
        lines={[
          { label: "in", values: points.map((p) => p.net_rx_bytes_per_s), colour: "--accent" },
          { label: "out", values: points.map((p) => p.net_tx_bytes_per_s), colour: "--bad" },
        ]}
      />
      <Chart
        title="Block I/O"
        spanS={RANGE_S[range]}
        times={times}
        format={(n) => `${bytes(n)}/s`}
        bytes
        lines={[
          { label: "read", values: points.map((p) => p.block_read_bytes_per_s), colour: "--accent" },
          { label: "write", values: points.map((p) => p.block_write_bytes_per_s), colour: "--bad" },
        ]}
      />
    </div>
  );
}
