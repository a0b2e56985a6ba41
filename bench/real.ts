// Deploy on a real engine against raw dockerode at the same concurrency: a private dockerd
// (test/support/dockerd.ts: its own bridge, nothing leaves the machine) attached as a node; a
// service of N containers started through the API until its action ends, and N containers made
// and started with dockerode directly, as many at a time as Berth runs per action; then both
// redeployed without volumes (raw: each removed, made and started again), with volumes (raw: each
// stopped, a new one made with its volumes and started, the old removed), stopped and removed.
// Berth's start counts a container once it has stayed up for its minimum time (done means
// healthy), so the raw side confirms the same: each container it started is looked at once that
// time has passed (the wait holds none of the engine slots). Five rounds, each side going first in
// turn; medians are printed (single rounds on this 2-core machine ranged from 0.73× to 1.43×).
// Real engines run one at a time on this machine: the benchmark takes /tmp/berth-real.lock
// through flock(1).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import Dockerode from "dockerode";
import { dockerdUnavailable, startPrivateDockerd, TEST_IMAGE } from "../test/support/dockerd.ts";
import { api, must, SERVICE_BODY, startBerth } from "./support.ts";

const PARALLEL = 4;

/** One side's figures for one operation. */
interface Cost {
  ms: number;
  /** CPU this process spent (Berth's, or raw dockerode's client). */
  cpuMs: number;
  /** CPU the engine's daemons spent (dockerd and its containerd). */
  engineCpuMs: number;
}

/** User and system CPU of a process (its own and its waited-for children's) in ms, from /proc. */
function cpuMsOf(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // Fields 14-17 of stat(5): utime, stime, cutime, cstime; f[0] is field 3.
    const ticks = [11, 12, 13, 14].reduce((n, i) => n + Number(f[i]), 0);
    return (ticks * 1000) / 100;
  } catch {
    return 0;
  }
}
const ROUNDS = 5;
/** Berth's minimum up time for a container without a health check (its default). */
const MIN_UP_MS = 3000;

export async function runRealDeploy(
  opts: { containers: number },
  out: (line: string) => void,
): Promise<void> {
  const unavailable = dockerdUnavailable();
  if (unavailable) {
    out(`real deploy: skipped (${unavailable})`);
    return;
  }
  if (process.env.BERTH_REAL_LOCK !== "held") {
    // Re-run this benchmark alone under the machine-wide lock of real engines.
    const r = spawnSync(
      "flock",
      ["/tmp/berth-real.lock", process.execPath, ...process.execArgv, process.argv[1]!, "real"],
      { env: { ...process.env, BERTH_REAL_LOCK: "held" }, encoding: "utf8", timeout: 600_000 },
    );
    const lines = (r.stdout ?? "").split("\n").filter((l) => l.startsWith("real") || l.startsWith("  "));
    for (const l of lines.filter((l) => !l.startsWith("  ("))) out(l);
    if (r.status !== 0) out(`real deploy: failed (${r.stderr?.split("\n").slice(-3).join(" ")})`);
    return;
  }
  const engine = await startPrivateDockerd();
  const b = await startBerth({
    start: true,
    env: { BERTH_CONTAINER_STOP_TIMEOUT_S: "1", BERTH_START_MIN_UP_MS: String(MIN_UP_MS) },
  });
  try {
    await must(
      api(b, "POST", "/api/infra/v1/node/", { engine_url: `unix://${engine.socketPath}` }),
      "attach",
    );
    const docker = new Dockerode({ socketPath: engine.socketPath });
    /** `work` over opts.containers items, PARALLEL at a time (as Berth runs one action's containers). */
    const parallel = async (work: (i: number) => Promise<void>) => {
      let next = 0;
      await Promise.all(
        Array.from({ length: PARALLEL }, async () => {
          while (next < opts.containers) await work(next++);
        }),
      );
    };
    const containerdPid = Number(
      fs.readFileSync(path.join(engine.dir, "exec/containerd/containerd.pid"), "utf8").trim() || 0,
    );
    /** CPU time of the engine's daemons (dockerd and its containerd) so far, in ms. */
    const engineCpuMs = () => cpuMsOf(engine.pid) + (containerdPid ? cpuMsOf(containerdPid) : 0);
    /** Wall-clock time of `fn`, with the CPU this process and the engine's daemons spent meanwhile. */
    const timed = async (fn: () => Promise<void>): Promise<Cost> => {
      const t0 = performance.now();
      const cpu0 = process.cpuUsage();
      const engine0 = engineCpuMs();
      await fn();
      const cpu = process.cpuUsage(cpu0);
      return {
        ms: performance.now() - t0,
        cpuMs: (cpu.user + cpu.system) / 1000,
        engineCpuMs: engineCpuMs() - engine0,
      };
    };
    /** Engine calls Berth has made so far, by operation (its metrics: every call through a node's engine client). */
    const engineCalls = async (): Promise<Map<string, number>> => {
      const counts = new Map<string, number>();
      for (const v of (await b.platform.metrics.engineCalls.get()).values) {
        if (v.metricName !== "berth_engine_call_duration_seconds_count") continue;
        const op = String(v.labels.operation);
        counts.set(op, (counts.get(op) ?? 0) + v.value);
      }
      return counts;
    };
    /** Calls per container made while `fn` ran, by operation (last round's figures are printed). */
    const callsDuring = async <T>(fn: () => Promise<T>): Promise<[T, string]> => {
      const before = await engineCalls();
      const value = await fn();
      const after = await engineCalls();
      const per = [...after]
        .map(([op, n]) => [op, (n - (before.get(op) ?? 0)) / opts.containers] as const)
        .filter(([, n]) => n > 0)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([op, n]) => `${op} ${Number(n.toFixed(2))}`);
      return [value, per.join(", ")];
    };
    type Op = "start" | "redeployFresh" | "redeployReuse" | "stop" | "terminate";
    const OPS: Op[] = ["start", "redeployFresh", "redeployReuse", "stop", "terminate"];
    const calls: Record<Op, string> = {
      start: "",
      redeployFresh: "",
      redeployReuse: "",
      stop: "",
      terminate: "",
    };
    /**
     * The state an action ends in, read when the store announces a change of actions (not by
     * polling: a poll loop would cost CPU the engine, on the same 2 cores, needs while Berth works).
     */
    const actionEnd = (uuid: string) =>
      new Promise<string>((resolve, reject) => {
        let reading = false;
        let again = false;
        const check = async (): Promise<void> => {
          if (reading) {
            again = true;
            return;
          }
          reading = true;
          try {
            const state = (await b.platform.store.actions.findAction(uuid))?.state ?? "";
            if (["Success", "Failed", "Canceled"].includes(state)) {
              unlisten();
              resolve(state);
              return;
            }
          } catch (err) {
            unlisten();
            reject(err);
            return;
          } finally {
            reading = false;
          }
          if (again) {
            again = false;
            await check();
          }
        };
        const unlisten = b.platform.store.onChange((type) => {
          if (type === "action" || type === "") void check();
        });
        void check();
      });
    /** Calls the operation and waits for its action to end Success; answers the time and engine calls. */
    const operation = (method: "POST" | "DELETE", url: string, what: string) =>
      callsDuring(() =>
        timed(async () => {
          const r = await api(b, method, url);
          if (r.status !== 202) throw new Error(`${what}: ${r.status} ${JSON.stringify(r.body)}`);
          const action = String(r.headers["x-platform-action-uri"]).split("/").filter(Boolean).at(-1)!;
          const state = await actionEnd(action);
          if (state !== "Success") {
            const log = (await b.platform.store.actions.actionLogTail(action, 5))
              .map((l) => l.line)
              .join(" | ");
            throw new Error(`the ${what} action ended ${state}: ${log}`);
          }
        }),
      );
    const berthRound = async (round: number): Promise<Record<Op, Cost>> => {
      const s = await must(
        api<{ uuid: string }>(
          b,
          "POST",
          "/api/app/v1/service/",
          SERVICE_BODY(`real-${round}`, {
            image: TEST_IMAGE,
            target_num_containers: opts.containers,
            container_ports: [],
            // The attached engine carries no tags.
            tags: [],
          }),
        ),
        "create",
      );
      const uri = `/api/app/v1/service/${s.uuid}/`;
      const out = {} as Record<Op, Cost>;
      const steps: [Op, "POST" | "DELETE", string][] = [
        ["start", "POST", `${uri}start/`],
        // Each container replaced by a new one of the same definition: its old one removed first
        // (reuse_volumes=false), or stopped to lend its volumes and removed once the new one counts.
        ["redeployFresh", "POST", `${uri}redeploy/?reuse_volumes=false`],
        ["redeployReuse", "POST", `${uri}redeploy/`],
        ["stop", "POST", `${uri}stop/`],
        ["terminate", "DELETE", uri],
      ];
      for (const [op, method, url] of steps) {
        const [ms, used] = await operation(method, url, op);
        out[op] = ms;
        calls[op] = used;
      }
      return out;
    };
    const rawRound = async (round: number): Promise<Record<Op, Cost>> => {
      const ids: string[] = [];
      const make = async (i: number, volumesFrom?: string) => {
        const c = await docker.createContainer({
          Image: TEST_IMAGE,
          Cmd: ["sleep", "100000"],
          name: `raw-${round}-${i}-${Date.now()}`,
          ...(volumesFrom ? { HostConfig: { VolumesFrom: [volumesFrom] } } : {}),
        });
        await c.start();
        ids[i] = c.id;
        return c.id;
      };
      // What Berth promises of a start (done means healthy): each container still runs MIN_UP_MS
      // after its start. The wait holds no engine slot; the look after it is one inspect.
      const confirmed: Promise<void>[] = [];
      const confirm = (id: string, then?: () => Promise<void>) => {
        confirmed.push(
          (async () => {
            await new Promise((r) => setTimeout(r, MIN_UP_MS));
            const v = await docker.getContainer(id).inspect();
            if (!v.State.Running) throw new Error(`raw container ${id} did not stay up`);
            await then?.();
          })(),
        );
      };
      const withConfirm = (work: (i: number) => Promise<void>) =>
        timed(async () => {
          confirmed.length = 0;
          await parallel(work);
          await Promise.all(confirmed);
        });
      const start = await withConfirm(async (i) => confirm(await make(i)));
      // Without volumes: each container removed, then made and started again.
      const redeployFresh = await withConfirm(async (i) => {
        await docker.getContainer(ids[i]!).remove({ force: true });
        confirm(await make(i));
      });
      // With volumes: each container stopped, a new one made with its volumes and started, the old
      // one removed once the new one stayed up.
      const redeployReuse = await withConfirm(async (i) => {
        const old = ids[i]!;
        await docker.getContainer(old).stop({ t: 1 });
        confirm(await make(i, old), () => docker.getContainer(old).remove({ force: true }));
      });
      const stop = await timed(() => parallel((i) => docker.getContainer(ids[i]!).stop({ t: 1 })));
      const terminate = await timed(() =>
        parallel((i) => docker.getContainer(ids[i]!).remove({ force: true })),
      );
      return { start, redeployFresh, redeployReuse, stop, terminate };
    };
    // Rounds alternate which side goes first, so that neither always meets a warmer engine.
    const rounds: { berth: Record<Op, Cost>; raw: Record<Op, Cost> }[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      if (round % 2 === 0) {
        const berth = await berthRound(round);
        rounds.push({ berth, raw: await rawRound(round) });
      } else {
        const raw = await rawRound(round);
        rounds.push({ berth: await berthRound(round), raw });
      }
    }
    const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
    out(
      `real deploy: ${opts.containers} containers on one private dockerd, ${PARALLEL} at a time, median of ${ROUNDS} alternating rounds; a start counts once up ${MIN_UP_MS} ms on both sides`,
    );
    const what: Record<Op, readonly [string, string]> = {
      start: ["start until the action ended (Success)", "create+start, up after the minimum"],
      redeployFresh: [
        "redeploy without volumes (reuse_volumes=false)",
        "remove+create+start, up after the minimum",
      ],
      redeployReuse: [
        "redeploy with volumes (default)",
        "stop+create(VolumesFrom)+start, up after the minimum, remove",
      ],
      stop: ["stop", "stop"],
      terminate: ["terminate", "remove"],
    };
    const rawCalls: Record<Op, string> = {
      start: "createContainer 1, startContainer 1, inspectContainer 1",
      redeployFresh: "removeContainer 1, createContainer 1, startContainer 1, inspectContainer 1",
      redeployReuse:
        "stopContainer 1, createContainer 1, startContainer 1, inspectContainer 1, removeContainer 1",
      stop: "stopContainer 1",
      terminate: "removeContainer 1",
    };
    for (const op of OPS) {
      const berth = median(rounds.map((r) => r.berth[op].ms));
      const raw = median(rounds.map((r) => r.raw[op].ms));
      const each = rounds.map((r) => `${(r.berth[op].ms / r.raw[op].ms).toFixed(2)}×`).join(", ");
      const cpu = (side: "berth" | "raw", k: "cpuMs" | "engineCpuMs") =>
        median(rounds.map((r) => r[side][op][k])).toFixed(0);
      out(
        `  Berth ${what[op][0]}: ${berth.toFixed(0)} ms; raw dockerode ${what[op][1]}: ${raw.toFixed(0)} ms → ${(berth / raw).toFixed(2)}× raw (rounds: ${each})`,
      );
      out(
        `  CPU (median ms): Berth's process ${cpu("berth", "cpuMs")}, its engine ${cpu("berth", "engineCpuMs")}; raw dockerode's process ${cpu("raw", "cpuMs")}, its engine ${cpu("raw", "engineCpuMs")}`,
      );
      out(`  Berth engine calls per container (${op}, last round): ${calls[op]}; raw: ${rawCalls[op]}`);
    }
  } finally {
    await b.close();
    await engine.stop();
  }
}
