// Health checks of fake containers, with Docker's rules: the first check runs one interval after
// the start, a check that outlasts the timeout fails, failures in the start period do not count
// (a success does), `retries` failures in a row make the container unhealthy, and one success makes
// it healthy again. Every change of status is an event ("health_status"), as Docker emits.
import type { ContainerHealth, EngineHealthcheck, HealthReport } from "../../domain/health.ts";
import { FakeProcess, hasProgram } from "./shell.ts";

/** Docker's defaults for a check that names no timing. */
const DEFAULT_INTERVAL_MS = 30_000;
const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_RETRIES = 3;

export interface CheckResult {
  exitCode: number;
  output: string;
}

/** Runs one check; `signal` aborts it when it outlasts its timeout. */
export type RunCheck = (check: EngineHealthcheck, signal: AbortSignal) => Promise<CheckResult>;

/** The checks of one run of a container (a restart makes a new one, starting again). */
export class FakeHealthMonitor {
  private status: ContainerHealth = "starting";
  private failingStreak = 0;
  private last: CheckResult | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly startedAt: number;

  constructor(
    private readonly check: EngineHealthcheck,
    private readonly run: RunCheck,
    private readonly onChange: (status: ContainerHealth) => void,
    private readonly now: () => number,
  ) {
    this.startedAt = now();
    this.schedule();
  }

  report(): HealthReport {
    return {
      status: this.status,
      failingStreak: this.failingStreak,
      lastOutput: (this.last?.output ?? "").trim(),
      lastExitCode: this.last?.exitCode,
    };
  }

  /** The run ended: no more checks; the last status stays, as Docker keeps it. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.probe(), this.check.intervalMs || DEFAULT_INTERVAL_MS);
  }

  private async probe(): Promise<void> {
    this.timer = undefined;
    if (this.stopped) return;
    const timeoutMs = this.check.timeoutMs || DEFAULT_TIMEOUT_MS;
    const abort = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<CheckResult>((resolve) => {
      timer = setTimeout(() => {
        abort.abort();
        resolve({ exitCode: -1, output: `Health check exceeded timeout (${timeoutMs}ms)` });
      }, timeoutMs);
    });
    const result = await Promise.race([
      this.run(this.check, abort.signal).catch((err: unknown) => ({
        exitCode: -1,
        output: err instanceof Error ? err.message : String(err),
      })),
      timedOut,
    ]);
    clearTimeout(timer);
    if (this.stopped) return;
    this.last = result;
    const before = this.status;
    if (result.exitCode === 0) {
      this.failingStreak = 0;
      this.status = "healthy";
    } else {
      const inStartPeriod = this.now() - this.startedAt < (this.check.startPeriodMs ?? 0);
      if (!(inStartPeriod && this.status === "starting")) {
        this.failingStreak += 1;
        if (this.failingStreak >= (this.check.retries || DEFAULT_RETRIES)) this.status = "unhealthy";
      }
    }
    if (this.status !== before) this.onChange(this.status);
    this.schedule();
  }
}

/**
 * The ports a fake container's servers listen on and what they answer: busybox `httpd -p <port>`
 * (80 without -p) in its command answers 200 at / and 404 elsewhere; an image's own servers
 * (`serves`) answer their status at every path while its main process runs.
 */
export function listeningPorts(
  argv: readonly string[],
  serves: { ports: readonly number[]; status: number } | undefined,
): Map<number, (path: string) => number> {
  const out = new Map<number, (path: string) => number>();
  const text = argv.join(" ");
  for (const m of text.matchAll(/\bhttpd\b([^;&|]*)/g)) {
    const port = /-p\s*(?:\S*:)?(\d+)/.exec(m[1] ?? "")?.[1];
    out.set(Number(port ?? 80), (path) => (path === "/" || path === "/index.html" ? 200 : 404));
  }
  for (const port of serves?.ports ?? []) out.set(port, () => serves?.status ?? 200);
  return out;
}

/** What a check needs to know of a fake container. */
export interface CheckTarget {
  running: boolean;
  argv: readonly string[];
  serves: { ports: readonly number[]; status: number } | undefined;
  programs: ReadonlySet<string>;
  env: Record<string, string>;
  hostname: string;
}

/**
 * One check of a fake container: an http or tcp probe against its simulated servers (the fake has
 * no sockets), a command through the fake shell as an exec would run it.
 */
export async function runFakeCheck(
  target: CheckTarget,
  check: EngineHealthcheck,
  signal: AbortSignal,
): Promise<CheckResult> {
  if (!target.running) return { exitCode: -1, output: "container is not running" };
  if (check.probe) {
    const answer = listeningPorts(target.argv, target.serves).get(check.probe.port);
    const where = `127.0.0.1:${check.probe.port}`;
    if (!answer)
      return { exitCode: 1, output: `nothing accepts connections on ${where}: Connection refused` };
    if (check.probe.type === "tcp") return { exitCode: 0, output: "" };
    const path = check.probe.path ?? "/";
    const code = answer(path);
    return code === (check.probe.status ?? 200)
      ? { exitCode: 0, output: "" }
      : {
          exitCode: 1,
          output: `GET http://${where}${path} answered ${code}, expected ${check.probe.status}`,
        };
  }
  const argv = check.test[0] === "CMD-SHELL" ? ["sh", "-c", check.test[1] ?? ""] : check.test.slice(1);
  if (!hasProgram(argv, target.programs))
    return { exitCode: 127, output: `exec: "${argv[0]}": executable file not found in $PATH` };
  let output = "";
  const process = new FakeProcess(
    argv,
    {
      write: (_stream, text) => {
        output += text;
      },
      stdin: undefined,
      env: { ...target.env },
      hostname: target.hostname,
    },
    { pid1: false, programs: target.programs },
  );
  signal.addEventListener("abort", () => process.kill(137), { once: true });
  return { exitCode: await process.exited, output };
}
