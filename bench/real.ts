// Deploy on a real engine against raw dockerode at the same concurrency: a private dockerd
// (test/support/dockerd.ts: its own bridge, nothing leaves the machine) attached as a node; a
// service of N containers started through the API until its action ends, then N containers made
// and started with dockerode directly, as many at a time as Berth runs per action. Real engines
// run one at a time on this machine: the benchmark takes /tmp/berth-real.lock through flock(1).
import { spawnSync } from "node:child_process";
import Dockerode from "dockerode";
import { dockerdUnavailable, startPrivateDockerd, TEST_IMAGE } from "../test/support/dockerd.ts";
import { api, must, SERVICE_BODY, sleep, startBerth } from "./support.ts";

const PARALLEL = 4;

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
  const b = await startBerth({ start: true, env: { BERTH_CONTAINER_STOP_TIMEOUT_S: "1" } });
  try {
    await must(
      api(b, "POST", "/api/infra/v1/node/", { engine_url: `unix://${engine.socketPath}` }),
      "attach",
    );
    const s = await must(
      api<{ uuid: string }>(
        b,
        "POST",
        "/api/app/v1/service/",
        SERVICE_BODY("real", {
          image: TEST_IMAGE,
          target_num_containers: opts.containers,
          container_ports: [],
          // The attached engine carries no tags.
          tags: [],
        }),
      ),
      "create",
    );
    const t0 = performance.now();
    const r = await api(b, "POST", `/api/app/v1/service/${s.uuid}/start/`);
    const action = String(r.headers["x-platform-action-uri"]).split("/").filter(Boolean).at(-1)!;
    let state = "";
    for (;;) {
      state = (await b.platform.store.findAction(action))?.state ?? "";
      if (["Success", "Failed", "Canceled"].includes(state)) break;
      await sleep(5);
    }
    const berthMs = performance.now() - t0;
    if (state !== "Success") {
      const log = (await b.platform.store.actionLogTail(action, 5)).map((l) => l.line).join(" | ");
      out(`real deploy: the start action ended ${state}: ${log}`);
      return;
    }
    const t1 = performance.now();
    await must(api(b, "POST", `/api/app/v1/service/${s.uuid}/stop/`), "stop");
    await b.platform.actions.idle(120_000);
    const stopMs = performance.now() - t1;

    const docker = new Dockerode({ socketPath: engine.socketPath });
    const ids: string[] = [];
    const t2 = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: PARALLEL }, async () => {
        while (next < opts.containers) {
          const i = next++;
          const c = await docker.createContainer({
            Image: TEST_IMAGE,
            Cmd: ["sleep", "100000"],
            name: `raw-${i}`,
          });
          await c.start();
          ids.push(c.id);
        }
      }),
    );
    const rawMs = performance.now() - t2;
    const t3 = performance.now();
    next = 0;
    await Promise.all(
      Array.from({ length: PARALLEL }, async () => {
        while (next < ids.length) await docker.getContainer(ids[next++]!).stop({ t: 1 });
      }),
    );
    const rawStopMs = performance.now() - t3;
    out(`real deploy: ${opts.containers} containers on one private dockerd, ${PARALLEL} at a time`);
    out(
      `  Berth start until the action ended (${state}): ${berthMs.toFixed(0)} ms; raw dockerode create+start: ${rawMs.toFixed(0)} ms → ${(berthMs / rawMs).toFixed(2)}× raw`,
    );
    out(
      `  Berth stop: ${stopMs.toFixed(0)} ms; raw dockerode stop: ${rawStopMs.toFixed(0)} ms → ${(stopMs / rawStopMs).toFixed(2)}× raw`,
    );
    for (const id of ids)
      await docker
        .getContainer(id)
        .remove({ force: true })
        .catch(() => {});
  } finally {
    await b.close();
    await engine.stop();
  }
}
