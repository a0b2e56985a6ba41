// The event loop's stalls as a benchmark prints them (issue 34, item 3): the longest delay
// (perf_hooks monitorEventLoopDelay, wall time), and the longest stretch the loop went without
// reaching its timers, both in wall time and in CPU time of the main thread. Wall time grows with
// the machine's load (the thread waits for a core); CPU time does not, so the CPU figure says what
// Berth's own code held the loop for, however many other processes share the machine. The main
// thread's CPU is read from /proc/thread-self/schedstat (Linux; nanoseconds); elsewhere from
// process.cpuUsage(), which counts every thread of the process.
import fs from "node:fs";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";

/** How often the loop is asked to reach its timers. */
const TICK_MS = 2;

export interface LoopFigures {
  /** monitorEventLoopDelay's max and p99 (wall ms). */
  maxDelayMs: number;
  p99DelayMs: number;
  /** The longest gap between two timer turns: wall ms, and the main thread's CPU ms in it. */
  longestTurnWallMs: number;
  longestTurnCpuMs: number;
  /** The main thread's CPU over the whole watch (ms), and how long the watch lasted (ms). */
  cpuMs: number;
  wallMs: number;
  /** The longest turns by CPU time (at most `keep` of watchLoop), with when they began and ended. */
  turns: Turn[];
}

/** One gap between timer turns: when (process.hrtime, in µs), its wall and CPU time (ms). */
export interface Turn {
  startUs: number;
  endUs: number;
  wallMs: number;
  cpuMs: number;
}

/** The main thread's CPU time in ms (or the process's where the thread's cannot be read). */
export function threadCpuMs(): number {
  return threadClock();
}

const threadClock: () => number = (() => {
  try {
    const fd = fs.openSync("/proc/thread-self/schedstat", "r");
    const buf = Buffer.alloc(96);
    const read = () => {
      const n = fs.readSync(fd, buf, 0, buf.length, 0);
      const text = buf.toString("latin1", 0, n);
      return Number(text.slice(0, text.indexOf(" "))) / 1e6;
    };
    if (!Number.isFinite(read())) throw new Error("schedstat unreadable");
    return read;
  } catch {
    return () => {
      const u = process.cpuUsage();
      return (u.user + u.system) / 1000;
    };
  }
})();

/** Starts watching the loop; `stop()` ends the watch and answers its figures (and its `keep` longest turns). */
export function watchLoop(keep = 0): { stop(): LoopFigures } {
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  const startWall = performance.now();
  const startCpu = threadClock();
  let lastWall = startWall;
  let lastCpu = startCpu;
  let longestWall = 0;
  let longestCpu = 0;
  let lastUs = Number(process.hrtime.bigint() / 1000n);
  const turns: Turn[] = [];
  const tick = () => {
    const wall = performance.now();
    const cpu = threadClock();
    longestWall = Math.max(longestWall, wall - lastWall);
    longestCpu = Math.max(longestCpu, cpu - lastCpu);
    if (keep > 0) {
      const us = Number(process.hrtime.bigint() / 1000n);
      const turn = { startUs: lastUs, endUs: us, wallMs: wall - lastWall, cpuMs: cpu - lastCpu };
      if (turns.length < keep || turn.cpuMs > turns.at(-1)!.cpuMs) {
        turns.push(turn);
        turns.sort((a, b) => b.cpuMs - a.cpuMs);
        if (turns.length > keep) turns.pop();
      }
      lastUs = us;
    }
    lastWall = wall;
    lastCpu = cpu;
  };
  const timer = setInterval(tick, TICK_MS);
  return {
    stop() {
      tick();
      clearInterval(timer);
      delay.disable();
      return {
        maxDelayMs: delay.max / 1e6,
        p99DelayMs: delay.percentile(99) / 1e6,
        longestTurnWallMs: longestWall,
        longestTurnCpuMs: longestCpu,
        cpuMs: threadClock() - startCpu,
        wallMs: performance.now() - startWall,
        turns,
      };
    },
  };
}

const ms = (v: number) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));

/** One line: "loop delay max … ms (p99 …), longest turn … ms wall / … ms CPU". */
export function formatLoop(f: LoopFigures): string {
  return `loop delay max ${ms(f.maxDelayMs)} ms (p99 ${ms(f.p99DelayMs)}), longest turn ${ms(f.longestTurnWallMs)} ms wall / ${ms(f.longestTurnCpuMs)} ms CPU (target < 50 ms)`;
}
