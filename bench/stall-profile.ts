// What held the event loop (issue 34, item 3): a sampled CPU profile of a window, and for each of
// the longest turns of the loop (bench/loop-monitor.ts, by CPU time) Berth's functions it ran in
// and the functions it spent most time in. V8's profiler samples wall time, so on a loaded machine
// a turn's samples include time the thread waited for a core; the functions named are still those
// that ran, in proportion.
import { Session } from "node:inspector/promises";
import type { Turn } from "./loop-monitor.ts";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface Stall {
  /** CPU time of the turn. */
  ms: number;
  /** Berth's functions by time spent in them or in what they called, the largest first. */
  berth: { name: string; ms: number }[];
  /** Functions by time spent in them (self), the largest first. */
  top: { name: string; ms: number }[];
}

const label = (n: ProfileNode) => {
  const file = n.callFrame.url.split("/").slice(-2).join("/");
  return `${n.callFrame.functionName || "(anonymous)"}${file ? ` ${file}:${n.callFrame.lineNumber + 1}` : ""}`;
};

/**
 * Starts a profile; `stop(turns)` answers, for each of those turns (bench/loop-monitor.ts: when
 * they began and ended), what ran in it.
 */
export async function profileStalls(): Promise<{ stop(turns: readonly Turn[]): Promise<Stall[]> }> {
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 500 });
  await session.post("Profiler.start");
  return {
    async stop(turns) {
      const { profile } = (await session.post("Profiler.stop")) as unknown as { profile: Profile };
      session.disconnect();
      return stallsOf(profile, turns);
    },
  };
}

function stallsOf(p: Profile, turns: readonly Turn[]): Stall[] {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  // Berth's own frames of a sample's stack, without the store's driver (every read runs in it).
  const ownFrames = new Map<number, string[]>();
  const ownOf = (id: number): string[] => {
    let names = ownFrames.get(id);
    if (names) return names;
    const set = new Set<string>();
    for (let x: number | undefined = id; x !== undefined; x = parent.get(x)) {
      const n = byId.get(x)!;
      if (n.callFrame.url.includes("/src/") && !n.callFrame.url.endsWith("sqlite-driver.ts"))
        set.add(label(n));
    }
    names = [...set];
    ownFrames.set(id, names);
    return names;
  };
  const top = (m: Map<string, number>, n: number) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([name, ms]) => ({ name, ms }));
  // Each sample's time, in the clock of the turns (process.hrtime and V8's ticks are both monotonic).
  const at: number[] = [];
  let t = p.startTime;
  for (const d of p.timeDeltas) {
    t += d;
    at.push(t);
  }
  return turns.map((turn) => {
    const self = new Map<string, number>();
    const own = new Map<string, number>();
    for (let i = 0; i < p.samples.length; i++) {
      if (at[i]! < turn.startUs || at[i]! > turn.endUs) continue;
      const node = byId.get(p.samples[i]!)!;
      if (node.callFrame.functionName === "(idle)") continue;
      const ms = ((at[i + 1] ?? at[i]!) - at[i]!) / 1000;
      const name = label(node);
      self.set(name, (self.get(name) ?? 0) + ms);
      for (const o of ownOf(node.id)) own.set(o, (own.get(o) ?? 0) + ms);
    }
    return { ms: turn.cpuMs, berth: top(own, 4), top: top(self, 4) };
  });
}

/** Lines for a report: each stall, its callback and where its time went. */
export function formatStalls(stalls: Stall[], max = 5): string[] {
  return stalls
    .slice(0, max)
    .map(
      (s) =>
        `${s.ms.toFixed(0)} ms CPU: in ${s.berth.map((t) => `${t.name} ${t.ms.toFixed(0)}`).join(", ") || "none of Berth's"}; ` +
        `self ${s.top.map((t) => `${t.name} ${t.ms.toFixed(0)}`).join(", ")}`,
    );
}
