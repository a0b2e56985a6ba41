// Bulk operations on a list: tick rows (or all of the page), then start, stop, redeploy or
// terminate them together. Each object is asked only for what its state allows (the state table);
// the rest are counted as skipped, and the outcome is one notice.
import { useState } from "preact/hooks";
import { call } from "./api.ts";
import { errorText, notify } from "./ui.tsx";

export interface Selection {
  has(uri: string): boolean;
  toggle(uri: string): void;
  setAll(uris: string[], on: boolean): void;
  clear(): void;
  size: number;
  uris: string[];
}

export function useSelection(): Selection {
  const [chosen, setChosen] = useState<ReadonlySet<string>>(new Set());
  return {
    has: (uri) => chosen.has(uri),
    toggle(uri) {
      setChosen((was) => {
        const next = new Set(was);
        if (next.has(uri)) next.delete(uri);
        else next.add(uri);
        return next;
      });
    },
    setAll(uris, on) {
      setChosen((was) => {
        const next = new Set(was);
        for (const u of uris) on ? next.add(u) : next.delete(u);
        return next;
      });
    },
    clear: () => setChosen(new Set()),
    size: chosen.size,
    uris: [...chosen],
  };
}

const OPS = [
  { op: "start", label: "Start", done: "started" },
  { op: "stop", label: "Stop", done: "stopped" },
  { op: "redeploy", label: "Redeploy", done: "redeployed" },
  { op: "terminate", label: "Terminate", done: "terminated" },
] as const;

/** The bar over a list with ticked rows: its operations, each where the object's state allows it. */
export function BulkBar(props: {
  selection: Selection;
  /** The current state of a ticked object (from the page's rows), when known. */
  stateOf(uri: string): string | undefined;
  table: Record<string, string[]>;
  what: string;
}) {
  const [busy, setBusy] = useState(false);
  const n = props.selection.size;
  if (n === 0) return null;
  const run = async (op: (typeof OPS)[number]) => {
    const uris = props.selection.uris;
    const allowed = uris.filter((u) => (props.table[op.op] ?? []).includes(props.stateOf(u) ?? ""));
    if (
      op.op === "terminate" &&
      !window.confirm(`Terminate ${allowed.length} ${props.what}? Their data is deleted.`)
    )
      return;
    setBusy(true);
    const results = await Promise.allSettled(
      allowed.map((u) => (op.op === "terminate" ? call("DELETE", u) : call("POST", `${u}${op.op}/`))),
    );
    setBusy(false);
    const failed = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    const skipped = uris.length - allowed.length;
    const parts = [`${allowed.length - failed.length} ${op.done}`];
    if (skipped) parts.push(`${skipped} skipped (their state does not allow ${op.op})`);
    if (failed.length) parts.push(`${failed.length} refused: ${errorText(failed[0]!.reason)}`);
    notify({ kind: failed.length ? "error" : "ok", text: `${op.label}: ${parts.join("; ")}.` });
    props.selection.clear();
  };
  return (
    <div class="bulk-bar" role="toolbar" aria-label="Selected">
      <span>{n} selected</span>
      {OPS.map((op) => (
        <button
          key={op.op}
          type="button"
          class={op.op === "terminate" ? "danger" : undefined}
          disabled={busy}
          onClick={() => void run(op)}
        >
          {op.label}
        </button>
      ))}
      <button type="button" class="link" onClick={props.selection.clear}>
        Clear
      </button>
    </div>
  );
}
