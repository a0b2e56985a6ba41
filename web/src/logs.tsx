// A live log: tail, follow and pause over a log stream (container, service or action logs), with a
// search among the lines kept, their times on demand, and a download of them as text.
import { useEffect, useRef, useState } from "preact/hooks";
import { wsUrl } from "./live.ts";

interface LogFrame {
  type: string;
  log?: string;
  source?: string;
  streamType?: string;
  timestamp?: number;
  data?: { errorMessage?: string };
}

interface Line {
  n: number;
  text: string;
  source?: string;
  stderr: boolean;
  /** Seconds since the epoch, when the stream gave one. */
  ts?: number;
}

const stamp = (ts: number | undefined) =>
  ts === undefined ? "" : `${new Date(ts * 1000).toISOString().slice(0, 19).replace("T", " ")} `;

/** A line with the searched text marked. */
function Marked({ text, find }: { text: string; find: string }) {
  if (!find) return <>{text}</>;
  const i = text.toLowerCase().indexOf(find.toLowerCase());
  if (i < 0) return <>{text}</>;
  return (
    <>
      {text.slice(0, i)}
      <mark>{text.slice(i, i + find.length)}</mark>
      {text.slice(i + find.length)}
    </>
  );
}

const KEEP = 5000;

export function LogView(props: { streamPath: string; title?: string }) {
  const [tail, setTail] = useState(300);
  const [follow, setFollow] = useState(true);
  const [paused, setPaused] = useState(false);
  const [lines, setLines] = useState<Line[]>([]);
  const [status, setStatus] = useState("connecting");
  const held = useRef<Line[]>([]);
  const pausedRef = useRef(false);
  pausedRef.current = paused;
  const box = useRef<HTMLPreElement>(null);
  const [heldCount, setHeldCount] = useState(0);
  const [find, setFind] = useState("");
  const [times, setTimes] = useState(false);

  useEffect(() => {
    let n = 0;
    setLines([]);
    held.current = [];
    setHeldCount(0);
    setStatus("connecting");
    const ws = new WebSocket(wsUrl(`${props.streamPath}?tail=${tail}&follow=${follow}`));
    let pending: Line[] = [];
    let frame = 0;
    const flush = () => {
      frame = 0;
      const add = pending;
      pending = [];
      if (pausedRef.current) {
        held.current.push(...add);
        setHeldCount(held.current.length);
        return;
      }
      setLines((l) => [...l, ...add].slice(-KEEP));
    };
    ws.onopen = () => setStatus(follow ? "following" : "reading");
    ws.onmessage = (m) => {
      let f: LogFrame;
      try {
        f = JSON.parse(String(m.data)) as LogFrame;
      } catch {
        return;
      }
      const text =
        f.type === "error" ? `error: ${f.data?.errorMessage ?? ""}` : (f.log ?? "").replace(/\n$/, "");
      pending.push({
        n: n++,
        text,
        source: f.source,
        stderr: f.streamType === "stderr" || f.type === "error",
        ts: typeof f.timestamp === "number" ? f.timestamp : undefined,
      });
      if (!frame) frame = requestAnimationFrame(flush);
    };
    ws.onclose = (e) =>
      setStatus(
        e.code === 1000 || e.code === 1005 ? "ended" : `closed (${e.code}${e.reason ? `: ${e.reason}` : ""})`,
      );
    ws.onerror = () => setStatus("could not connect");
    return () => {
      cancelAnimationFrame(frame);
      ws.close();
    };
  }, [props.streamPath, tail, follow]);

  useEffect(() => {
    const el = box.current;
    if (el && !paused) el.scrollTop = el.scrollHeight;
  }, [lines, paused, find]);

  const shown = find
    ? lines.filter((l) => `${l.source ?? ""} ${l.text}`.toLowerCase().includes(find.toLowerCase()))
    : lines;
  const download = () => {
    const text = lines
      .map((l) => `${times ? stamp(l.ts) : ""}${l.source ? `${l.source} ` : ""}${l.text}`)
      .join("\n");
    const url = URL.createObjectURL(new Blob([`${text}\n`], { type: "text/plain" }));
    const a = document.createElement("a");
    a.href = url;
    a.download = `${(props.title ?? "logs").toLowerCase().replace(/[^a-z0-9]+/g, "-")}.log`;
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  };

  const resume = () => {
    setLines((l) => [...l, ...held.current].slice(-KEEP));
    held.current = [];
    setHeldCount(0);
    setPaused(false);
  };

  return (
    <section class="logs" aria-label={props.title ?? "Logs"}>
      <div class="log-bar">
        <h2>{props.title ?? "Logs"}</h2>
        <label>
          Tail{" "}
          <input
            type="number"
            min={0}
            max={10000}
            value={tail}
            onChange={(e) =>
              setTail(Math.max(0, Math.min(10000, Number((e.target as HTMLInputElement).value) || 0)))
            }
          />
        </label>
        <label>
          <input
            type="checkbox"
            checked={follow}
            onChange={(e) => setFollow((e.target as HTMLInputElement).checked)}
          />{" "}
          Follow
        </label>
        <button type="button" onClick={() => (paused ? resume() : setPaused(true))}>
          {paused ? `Resume${heldCount ? ` (${heldCount} new)` : ""}` : "Pause"}
        </button>
        <label>
          Find{" "}
          <input
            type="search"
            name="log-find"
            value={find}
            onInput={(e) => setFind((e.target as HTMLInputElement).value)}
          />
        </label>
        <label>
          <input
            type="checkbox"
            name="log-times"
            checked={times}
            onChange={(e) => setTimes((e.target as HTMLInputElement).checked)}
          />{" "}
          Timestamps
        </label>
        <button type="button" disabled={lines.length === 0} onClick={download}>
          Download
        </button>
        <span class="log-status">
          {status}
          {find && ` · ${shown.length} of ${lines.length} lines match`}
        </span>
      </div>
      {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard. */}
      <pre class="log-lines" ref={box} tabIndex={0} aria-live="off">
        {lines.length === 0 ? (
          <span class="hint">No lines yet.</span>
        ) : (
          shown.map((l) => (
            <div key={l.n} class={l.stderr ? "stderr" : undefined}>
              {times && <span class="ts">{stamp(l.ts)}</span>}
              {l.source && <span class="source">{l.source} </span>}
              <Marked text={l.text} find={find} />
            </div>
          ))
        )}
      </pre>
    </section>
  );
}
