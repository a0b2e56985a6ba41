// A live log: tail, follow and pause over a log stream (container, service or action logs).
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
  }, [lines, paused]);

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
        <span class="log-status">{status}</span>
      </div>
      {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard. */}
      <pre class="log-lines" ref={box} tabIndex={0} aria-live="off">
        {lines.length === 0 ? (
          <span class="hint">No lines yet.</span>
        ) : (
          lines.map((l) => (
            <div key={l.n} class={l.stderr ? "stderr" : undefined}>
              {l.source && <span class="source">{l.source} </span>}
              {l.text}
            </div>
          ))
        )}
      </pre>
    </section>
  );
}
