// A plan reuses the snapshot the namespace's previous plan kept (orchestrator/placement-snapshots.ts)
// instead of reading every live container and node of the namespace again, and never when what
// the snapshot holds has changed since: a node's tags, a container that ended and freed its port.
// Another replica's commits do not drop it: a plan on it checks its own services' containers, and
// a node another replica placed on since is counted again at commit, so a kept snapshot never
// places onto a node another replica filled.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { systemClock } from "../../src/domain/time.ts";
import { PlanApplier } from "../../src/orchestrator/plan-applier.ts";
import { Store } from "../../src/store/store.ts";
import {
  call,
  containersOf,
  createService,
  deployCluster,
  finished,
  operate,
  runningService,
  type Sim,
  startSim,
  until,
  waitFor,
} from "./sim.ts";

let s: Sim;
let left: { resource_uri: string; nodes: string[] };
let right: { resource_uri: string; nodes: string[] };

before(async () => {
  // No periodic pass: what is read is what the starts read.
  s = await startSim({ env: { BERTH_RECONCILE_INTERVAL_MS: "3600000" } });
  left = await deployCluster(s, { name: "left", target_num_nodes: 1, tags: [{ name: "left" }] });
  right = await deployCluster(s, { name: "right", target_num_nodes: 1, tags: [{ name: "right" }] });
  // On PostgreSQL, the change listener's first connect announces "" (whatever was missed), which
  // drops what is kept: the tests start once it has.
  await waitFor("change notifications", async () => s.h.listener?.connected !== false || undefined);
});
after(() => s.close());

/** The SQL texts of the statements the store ran while `fn` ran. */
async function statementsDuring<T>(fn: () => Promise<T>): Promise<{ result: T; sql: string[] }> {
  const { result, queries } = await s.h.db.statements.queriesDuring(fn);
  return { result, sql: queries.map((q) => q.sql) };
}

/** Placement's read of every live container of a namespace (ServiceStore.containerLoads, unnarrowed). */
const readsNamespaceContainers = (sql: string) =>
  /^select "uuid", "node_uuid", "service_uuid", "state", "number" from "containers" where "namespace" = (\$1|\?) and "state" != (\$2|\?) order by/.test(
    sql,
  );

const onNode = async (svc: { containers: string[] }) => (await containersOf(s, svc)).map((c) => c.node);

describe("placement snapshots", () => {
  test("a start after another plans on the kept snapshot: it reads no container of the namespace", async () => {
    const first = await runningService(s, {
      name: "first",
      target_num_containers: 2,
      tags: [{ name: "left" }],
    });
    assert.deepEqual(await onNode(first), [left.nodes[0], left.nodes[0]]);
    // first's containers went from Starting to Running since its plan: that changes no placement.
    const { result: second, sql } = await statementsDuring(() =>
      runningService(s, { name: "second", target_num_containers: 2 }),
    );
    assert.equal(sql.filter(readsNamespaceContainers).length, 0, sql.join("\n"));
    // EMPTIEST_NODE: the kept snapshot counts first's two containers on left.
    assert.deepEqual(await onNode(second), [right.nodes[0], right.nodes[0]]);
  });

  test("a node's new tags are seen by the next plan", async () => {
    const retag = await call(s.h, s.alice, "PATCH", right.resource_uri, {
      tags: [{ name: "right" }, { name: "gpu" }],
    });
    assert.ok(retag.status < 300, retag.raw);
    await until(s, right.resource_uri, "Deployed");
    const { result: gpu, sql } = await statementsDuring(() =>
      runningService(s, { name: "gpu", target_num_containers: 1, tags: [{ name: "gpu" }] }),
    );
    assert.deepEqual(await onNode(gpu), [right.nodes[0]]);
    assert.equal(sql.filter(readsNamespaceContainers).length, 1, "the snapshot was read again");
  });

  test("a container that ended frees its port for the next plan", async () => {
    const port = [{ protocol: "tcp", inner_port: 80, outer_port: 8081, published: true }];
    const holder = await runningService(s, {
      name: "holder",
      tags: [{ name: "left" }],
      container_ports: port,
    });
    assert.deepEqual(await onNode(holder), [left.nodes[0]]);
    // Its container alone ends (the service stays): only a container's write tells the change.
    await operate(s, holder.containers[0], "terminate");

    const next = await createService(s, {
      image: "busybox:local",
      name: "next",
      run_command: "sleep 100000",
      tags: [{ name: "left" }],
      container_ports: port,
    });
    const res = await call(s.h, s.alice, "POST", `${next.resource_uri}start/`);
    assert.equal(res.status, 202, res.raw);
    const a = await finished(s, res);
    assert.equal(a.state, "Success", a.log.join("\n"));
    assert.deepEqual(await onNode(await until(s, next.resource_uri, "Running")), [left.nodes[0]]);
  });

  test("another replica's announced commit keeps the snapshot: the next plan checks its services, not the namespace", async () => {
    await runningService(s, { name: "before-remote", tags: [{ name: "right" }] });
    // What store/listen.ts does when another replica announces a commit of a container.
    s.h.store.announceRemoteChange("container");
    const { result, sql } = await statementsDuring(() =>
      runningService(s, { name: "after-remote", tags: [{ name: "right" }] }),
    );
    assert.deepEqual(await onNode(result), [right.nodes[0]]);
    assert.equal(sql.filter(readsNamespaceContainers).length, 0, sql.join("\n"));
  });

  test("a kept snapshot never places onto a node another replica filled since", async () => {
    const port = [{ protocol: "tcp", inner_port: 80, outer_port: 8082, published: true }];
    // This replica's last plan keeps its snapshot: left's port 8082 is free in it.
    await runningService(s, { name: "keeps", tags: [{ name: "left" }] });
    // Another replica's plan applier (a store of its own: this process is told nothing of its
    // commit, as when its announcement has not arrived yet) takes 8082 on left.
    const other = new Store(s.h.db.kysely, s.h.db.dialect);
    const remote = await createService(s, {
      image: "busybox:local",
      name: "remote",
      run_command: "sleep 100000",
      tags: [{ name: "left" }],
      container_ports: port,
    });
    const [row] = await other.services.servicesByUuid([remote.uuid]);
    const { placed } = await new PlanApplier({ store: other, clock: systemClock }).place(
      row!,
      async () => {},
    );
    assert.deepEqual(
      placed.map((c) => `/api/infra/v1/alice/node/${c.node_uuid}/`),
      [left.nodes[0]],
    );

    const mine = await createService(s, {
      image: "busybox:local",
      name: "mine",
      run_command: "sleep 100000",
      tags: [{ name: "left" }],
      container_ports: port,
    });
    const res = await call(s.h, s.alice, "POST", `${mine.resource_uri}start/`);
    assert.equal(res.status, 202, res.raw);
    const a = await finished(s, res);
    assert.equal(a.state, "Failed", a.log.join("\n"));
    assert.match(a.log.join("\n"), /8082\/tcp already taken/);
    assert.equal((await call(s.h, s.alice, "GET", mine.resource_uri)).body.containers.length, 0);
  });
});
