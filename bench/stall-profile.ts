// What held the event loop (issue 34, item 3): a sampled CPU profile of a window, cut into busy
// stretches (consecutive samples that are not idle), and for each stretch longer than a threshold
// the callback it ran in and the functions it spent most time in. For benchmarks: V8's profiler
// samples wall time, so on a loaded machine a stretch can include time the thread waited for a
// core; the functions named are still those that ran.
import { Session } from "node:inspector/promises";

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

/** Starts a profile; `stop(minMs)` answers the busy stretches longer than minMs, longest first. */
export async function profileStalls(): Promise<{ stop(minMs: number): Promise<Stall[]> }> {
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 500 });
  await session.post("Profiler.start");
  return {
    async stop(minMs) {
      const { profile } = (await session.post("Profiler.stop")) as unknown as { profile: Profile };
      session.disconnect();
      return stallsOf(profile, minMs);
    },
  };
}

function stallsOf(p: Profile, minMs: number): Stall[] {
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
  const stalls: Stall[] = [];
  let stretch: { ms: number; self: Map<string, number>; own: Map<string, number> } | undefined;
  const top = (m: Map<string, number>, n: number) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([name, ms]) => ({ name, ms }));
  const close = () => {
    if (stretch && stretch.ms >= minMs) {
      stalls.push({ ms: stretch.ms, berth: top(stretch.own, 4), top: top(stretch.self, 4) });
    }
    stretch = undefined;
  };
  for (let i = 0; i < p.samples.length; i++) {
    const node = byId.get(p.samples[i]!)!;
    const ms = (p.timeDeltas[i + 1] ?? 0) / 1000;
    if (node.callFrame.functionName === "(idle)") {
      close();
      continue;
    }
    stretch ??= { ms: 0, self: new Map(), own: new Map() };
    stretch.ms += ms;
    const name = label(node);
    stretch.self.set(name, (stretch.self.get(name) ?? 0) + ms);
    for (const own of ownOf(node.id)) stretch.own.set(own, (stretch.own.get(own) ?? 0) + ms);
  }
  close();
  return stalls.sort((a, b) => b.ms - a.ms);
}

/** Lines for a report: each stall, its callback and where its time went. */
export function formatStalls(stalls: Stall[], max = 5): string[] {
  return stalls
    .slice(0, max)
    .map(
      (s) =>
        `${s.ms.toFixed(0)} ms: in ${s.berth.map((t) => `${t.name} ${t.ms.toFixed(0)}`).join(", ") || "none of Berth's"}; ` +
        `self ${s.top.map((t) => `${t.name} ${t.ms.toFixed(0)}`).join(", ")}`,
    );
}
