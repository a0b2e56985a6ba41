// Containers on simulated nodes as the engines see them: the restart policy, autodestroy, the
// operations on one container, image pulls, and volumes on redeploy.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  call,
  containersOf,
  createService,
  deployCluster,
  engineContainer,
  engineContainersOfService,
  finished,
  operate,
  runningService,
  type Sim,
  startSim,
  until,
  uuidOf,
  waitFor,
} from "./sim.ts";

let s: Sim;

const PULLABLE = "registry.example.com/team/app:1.0";

before(async () => {
  s = await startSim({ registry: [{ ref: PULLABLE, cmd: ["sleep", "100000"] }] });
  await deployCluster(s, { name: "pool", target_num_nodes: 2 });
});
after(() => s.close());

/** Two full reconciler passes, settled: what a negative assertion waits on instead of a sleep. */
async function reconciled(): Promise<void> {
  for (let pass = 0; pass < 2; pass++) {
    await s.h.reconciler.resync();
    await s.h.reconciler.settle();
  }
}

async function container(uri: string) {
  return (await call(s.h, s.alice, "GET", uri)).body;
}

describe("autorestart and autodestroy", () => {
  test("ALWAYS: the engine's restart policy brings a container back after its process exits", async () => {
    const svc = await runningService(s, { name: "phoenix", autorestart: "ALWAYS" });
    const [c] = await containersOf(s, svc);
    const { engine, id, view } = await engineContainer(s, c.resource_uri);
    assert.deepEqual(view.restartPolicy, { name: "always" });
    engine.exitProcess(id, 1);
    const back = await waitFor("the engine restarts it", async () => {
      const v = await engine.inspectContainer(id);
      return v?.running && v.restartCount >= 1 ? v : undefined;
    });
    assert.equal(back.id, id, "the same engine container, restarted");
    const again = await until(s, c.resource_uri, "Running");
    assert.equal(again.exit_code, null);
    await until(s, svc.resource_uri, "Running");
  });

  test("ON_FAILURE maps to the engine's on-failure policy, OFF to none", async () => {
    const onFailure = await runningService(s, { name: "retrying", autorestart: "ON_FAILURE" });
    const [c] = await containersOf(s, onFailure);
    assert.equal((await engineContainer(s, c.resource_uri)).view.restartPolicy.name, "on-failure");
    const off = await runningService(s, { name: "plain" });
    const [d] = await containersOf(s, off);
    assert.equal((await engineContainer(s, d.resource_uri)).view.restartPolicy.name, "no");
  });

  test("autodestroy ON_SUCCESS: exit 0 terminates the container and lowers the target; exit 1 stays Stopped", async () => {
    const svc = await runningService(s, {
      name: "batch",
      autodestroy: "ON_SUCCESS",
      target_num_containers: 2,
    });
    const [one, two] = await containersOf(s, svc);
    const first = await engineContainer(s, one.resource_uri);
    first.engine.exitProcess(first.id, 0);
    const gone = await until(s, one.resource_uri, "Terminated");
    assert.notEqual(gone.destroyed_datetime, null);
    const after = await waitFor("the service follows", async () => {
      const r = (await call(s.h, s.alice, "GET", svc.resource_uri)).body;
      return r.state === "Running" && r.target_num_containers === 1 ? r : undefined;
    });
    assert.deepEqual(after.containers, [two.resource_uri]);
    assert.equal(await first.engine.inspectContainer(first.id), undefined, "its engine container is removed");

    const second = await engineContainer(s, two.resource_uri);
    second.engine.exitProcess(second.id, 1);
    const stopped = await until(s, two.resource_uri, "Stopped");
    assert.equal(stopped.exit_code, 1);
    assert.equal(stopped.exit_code_msg, "Exited with an error (code 1)");
    await until(s, svc.resource_uri, "Stopped");
    // After full reconciler passes, a failed container is still not destroyed under ON_SUCCESS.
    await reconciled();
    assert.equal((await container(two.resource_uri)).state, "Stopped");
    assert.ok(await second.engine.inspectContainer(second.id), "its engine container is kept");
  });

  test("autodestroy ALWAYS terminates a container whatever its exit code, but not one the user stopped", async () => {
    const svc = await runningService(s, { name: "oneshot", autodestroy: "ALWAYS", target_num_containers: 2 });
    const [c, kept] = await containersOf(s, svc);
    await operate(s, kept.resource_uri, "stop");
    const e = await engineContainer(s, c.resource_uri);
    e.engine.exitProcess(e.id, 3);
    await until(s, c.resource_uri, "Terminated");
    const after = await waitFor("the service follows", async () => {
      const r = (await call(s.h, s.alice, "GET", svc.resource_uri)).body;
      return r.state === "Stopped" && r.target_num_containers === 1 ? r : undefined;
    });
    assert.deepEqual(after.containers, [kept.resource_uri]);
    await reconciled();
    assert.equal(
      (await container(kept.resource_uri)).state,
      "Stopped",
      "a user's stop is not an exit to destroy",
    );
  });

  test("without autorestart or autodestroy an exited container stays Stopped with its exit code", async () => {
    const svc = await runningService(s, { name: "plain2", target_num_containers: 2 });
    const [c] = await containersOf(s, svc);
    const e = await engineContainer(s, c.resource_uri);
    e.engine.exitProcess(e.id, 2);
    const stopped = await until(s, c.resource_uri, "Stopped");
    assert.equal(stopped.exit_code, 2);
    assert.equal(stopped.exit_code_msg, "Exited with code 2");
    assert.notEqual(stopped.stopped_datetime, null);
    const partly = await until(s, svc.resource_uri, "Partly running");
    assert.equal(partly.running_num_containers, 1);
    assert.equal(partly.stopped_num_containers, 1);
  });
});

describe("operations on one container", () => {
  test("stop, start, redeploy and terminate each run as an action on the container", async () => {
    const svc = await runningService(s, { name: "single", target_num_containers: 2 });
    const [c] = await containersOf(s, svc);
    const before = await engineContainer(s, c.resource_uri);

    const stop = await operate(s, c.resource_uri, "stop");
    const stopped = await until(s, c.resource_uri, "Stopped");
    assert.equal((await before.engine.inspectContainer(before.id))?.running, false);
    assert.notEqual(stopped.stopped_datetime, null);
    await until(s, svc.resource_uri, "Partly running");

    await operate(s, c.resource_uri, "start");
    await until(s, c.resource_uri, "Running");
    assert.equal((await before.engine.inspectContainer(before.id))?.running, true);
    await until(s, svc.resource_uri, "Running");

    const deployedBefore = (await s.h.store.services.findContainer(c.uuid))!.deployed_at;
    await operate(s, c.resource_uri, "redeploy");
    const redeployed = await until(s, c.resource_uri, "Running");
    // deployed_datetime is the last deploy (the wire shows seconds; the record has milliseconds).
    assert.ok((await s.h.store.services.findContainer(c.uuid))!.deployed_at! > deployedBefore!);
    const after = await engineContainer(s, c.resource_uri);
    assert.notEqual(after.id, before.id, "a new engine container");
    assert.equal(await before.engine.inspectContainer(before.id), undefined, "the old one is removed");
    assert.equal(redeployed.name, c.name);

    await operate(s, c.resource_uri, "terminate");
    await until(s, c.resource_uri, "Terminated");
    assert.equal(await after.engine.inspectContainer(after.id), undefined);
    const svcAfter = await until(s, svc.resource_uri, "Running");
    assert.equal(svcAfter.target_num_containers, 1, "terminate lowers target_num_containers");
    assert.equal(svcAfter.current_num_containers, 1);

    // Each operation is an action whose object is the container.
    const actions = (
      await call(s.h, s.alice, "GET", `/api/audit/v1/action/?object=${encodeURIComponent(c.resource_uri)}`)
    ).body.objects as { action: string; state: string; uuid: string }[];
    assert.deepEqual(
      actions.map((a) => [a.action, a.state]),
      [
        ["Container Stop", "Success"],
        ["Container Start", "Success"],
        ["Container Redeploy", "Success"],
        ["Container Terminate", "Success"],
      ],
    );
    assert.equal(actions[0]!.uuid, stop.uuid);
  });
});

describe("images", () => {
  test("an image absent on the node is pulled, with the pull in the action log", async () => {
    const svc = await createService(s, { image: PULLABLE, name: "pulled" });
    const res = await call(s.h, s.alice, "POST", `${svc.resource_uri}start/`);
    const a = await finished(s, res);
    assert.equal(a.state, "Success", a.log.join("\n"));
    assert.ok(a.log.includes(`Pulling image ${PULLABLE}`), a.log.join("\n"));
    assert.ok(a.log.includes(`Pulled image ${PULLABLE}`), a.log.join("\n"));
    await until(s, svc.resource_uri, "Running");
  });

  test("a pull that fails fails the start with the engine's reason in the log", async () => {
    const svc = await createService(s, { image: "nowhere/nothing:9", name: "unpullable" });
    const res = await call(s.h, s.alice, "POST", `${svc.resource_uri}start/`);
    const a = await finished(s, res);
    assert.equal(a.state, "Failed");
    assert.ok(a.log.includes("Pulling image nowhere/nothing:9"), a.log.join("\n"));
    assert.ok(
      a.log.some((l) => l.includes("could not pull nowhere/nothing:9") && l.includes("manifest unknown")),
      a.log.join("\n"),
    );
    const after = await until(s, svc.resource_uri, "Not running");
    assert.equal(after.running_num_containers, 0);
    assert.deepEqual(await engineContainersOfService(s, svc.resource_uri), []);
  });
});

describe("volumes on redeploy", () => {
  test("reuse_volumes=true mounts the old container's volumes; false starts from fresh ones", async () => {
    const svc = await runningService(s, { name: "store", bindings: [{ container_path: "/data" }] });
    const [c] = await containersOf(s, svc);
    const first = await engineContainer(s, c.resource_uri);
    assert.deepEqual(first.spec.binds, ["/data"]);
    assert.equal(first.spec.volumesFrom, undefined);

    const reuse = await call(s.h, s.alice, "POST", `${svc.resource_uri}redeploy/`);
    assert.equal(reuse.status, 202, reuse.raw);
    const a = await finished(s, reuse);
    assert.equal(a.state, "Success", a.log.join("\n"));
    assert.ok(
      a.log.some((l) => l.includes("with the volumes of its previous container")),
      a.log.join("\n"),
    );
    await until(s, svc.resource_uri, "Running");
    const second = await engineContainer(s, c.resource_uri);
    assert.notEqual(second.id, first.id);
    assert.deepEqual(second.spec.volumesFrom, [first.id], "the new container mounts the old one's volumes");
    assert.equal(await first.engine.inspectContainer(first.id), undefined, "the old container is removed");

    const bad = await call(s.h, s.alice, "POST", `${svc.resource_uri}redeploy/?reuse_volumes=maybe`);
    assert.equal(bad.status, 400, bad.raw);
    assert.equal(bad.body.details[0].field, "reuse_volumes");

    const fresh = await call(s.h, s.alice, "POST", `${svc.resource_uri}redeploy/?reuse_volumes=false`);
    assert.equal(fresh.status, 202, fresh.raw);
    const b = await finished(s, fresh);
    assert.equal(b.state, "Success", b.log.join("\n"));
    await until(s, svc.resource_uri, "Running");
    const third = await engineContainer(s, c.resource_uri);
    assert.notEqual(third.id, second.id);
    assert.equal(third.spec.volumesFrom, undefined, "no volumes of the old container");
    assert.equal(await second.engine.inspectContainer(second.id), undefined);

    // The same choice on one container's redeploy.
    await operate(s, c.resource_uri, "redeploy");
    const fourth = await engineContainer(s, c.resource_uri);
    assert.deepEqual(fourth.spec.volumesFrom, [third.id]);
    const one = await call(s.h, s.alice, "POST", `${c.resource_uri}redeploy/?reuse_volumes=false`);
    assert.equal((await finished(s, one)).state, "Success");
    const fifth = await engineContainer(s, c.resource_uri);
    assert.equal(fifth.spec.volumesFrom, undefined);
    assert.equal(uuidOf(c.resource_uri), c.uuid);
  });
});

describe("observed state and actions", () => {
  test("an observation read before an action wrote the container never replaces the action's state", async () => {
    const svc = await runningService(s, { name: "observed" });
    const [c] = await containersOf(s, svc);
    const { engine, id } = await engineContainer(s, c.resource_uri);
    // An observation reads the record, then the engine, and is slow to come back from the engine…
    let answer!: () => void;
    const slow = new Promise<void>((resolve) => {
      answer = resolve;
    });
    const inspect = engine.inspectContainer.bind(engine);
    engine.inspectContainer = async (cid: string) => {
      const view = await inspect(cid);
      if (cid === id) await slow;
      return view;
    };
    const observing = s.h.runtime.observe(uuidOf(c.resource_uri));
    // …while a stop action marks the container Stopping (its engine stop is held meanwhile).
    const release = engine.hold();
    const stop = await call(s.h, s.alice, "POST", `${c.resource_uri}stop/`);
    assert.equal(stop.status, 202);
    await until(s, c.resource_uri, "Stopping");
    answer();
    await observing;
    engine.inspectContainer = inspect;
    const row = await s.h.store.services.findContainer(uuidOf(c.resource_uri));
    assert.equal(
      row?.state,
      "Stopping",
      "the engine's earlier Running does not replace the action's Stopping",
    );
    release();
    await until(s, c.resource_uri, "Stopped");
  });

  test("an observation made while an action holds the container shows the action's state, and is kept for when its phase ends", async () => {
    const svc = await runningService(s, { name: "kept" });
    const [c] = await containersOf(s, svc);
    const uuid = uuidOf(c.resource_uri);
    const { engine, id } = await engineContainer(s, c.resource_uri);
    // An action takes the container (its prepare writes the phase), then the process exits.
    await s.h.store.mutate("container", uuid, () => ({ phase: "starting" as const }));
    engine.exitProcess(id, 3);
    await waitFor("the process exits", async () => (await engine.inspectContainer(id))?.running === false);
    const observed = await s.h.runtime.observe(uuid);
    assert.equal(observed?.state, "Starting", "the action's state shows while it holds the container");
    assert.equal(observed?.observed, "exited", "the engine's word is recorded all the same");
    assert.equal((await container(c.resource_uri)).state, "Starting");
    // The action ends its phase without asking the engine: what was observed shows.
    await s.h.store.mutate("container", uuid, () => ({ phase: null }));
    const after = await container(c.resource_uri);
    assert.equal(after.state, "Stopped");
    assert.equal(after.exit_code, 3);
  });
});
