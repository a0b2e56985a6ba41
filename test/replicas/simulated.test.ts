// Simulated nodes behind several replicas (issue 34, item 4): a simulated node's engine is the same
// from every replica. Three Berth processes share one PostgreSQL; containers started through A
// print a line; their logs asked of B and C hold that line, as they do of A. The node's watcher is
// then moved (its owner SIGKILLed): the containers stay Running and no action is recorded on them,
// since the new owner's engine holds them as the old one did. On a main where each replica kept an
// engine of its own per simulated node, B and C answered empty logs and the moved watcher found an
// empty engine.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { openStream } from "../streams/support.ts";
import { waitFor } from "../support/harness.ts";
import {
  adminAuth,
  api,
  cleanup,
  type FreshDatabase,
  freshPgDatabase,
  kill,
  pgUnavailable,
  type Replica,
  startReplica,
  withLogs,
} from "./support.ts";

const skip = pgUnavailable() ?? false;

const GRACE_MS = 4000;
const ENV = {
  BERTH_ACTION_LEASE_MS: "1500",
  BERTH_ACTION_POLL_MS: "200",
  BERTH_REPLICA_LEASE_MS: "2000",
  BERTH_NODE_HEALTH_INTERVAL_MS: "500",
  BERTH_NODE_UNREACHABLE_GRACE_MS: String(GRACE_MS),
  BERTH_SIM_DELAY_FACTOR: "0",
  BERTH_CONTAINER_STOP_TIMEOUT_S: "1",
  BERTH_SHUTDOWN_TIMEOUT_MS: "3000",
};

/** The lines of a container's log as one replica streams them (without following). */
async function logOf(r: Replica, containerUuid: string): Promise<string[]> {
  const stream = await openStream(
    `ws://127.0.0.1:${r.port}/api/app/v1/container/${containerUuid}/logs/?follow=false`,
    { auth: adminAuth },
  );
  await stream.closed;
  return stream.frames.filter((f) => f.type === "log").map((f) => String(f.log).trimEnd());
}

describe("simulated nodes behind three replicas on one PostgreSQL", { skip, timeout: 600_000 }, () => {
  let db: FreshDatabase | undefined;
  const replicas: Record<string, Replica> = {};

  before(async () => {
    db = await freshPgDatabase("berth_simulated");
    const names = ["A", "B", "C"];
    const started = await Promise.all(
      names.map((name) => startReplica(name, { ...ENV, BERTH_DATABASE_URL: db!.url })),
    );
    for (const r of started) replicas[r.name] = r;
  });
  after(async () => {
    for (const r of Object.values(replicas)) cleanup(r);
    await db?.drop();
  });

  test("logs and states are the same from every replica, and a watcher that moves changes nothing", async () => {
    const { A, B, C } = replicas as { A: Replica; B: Replica; C: Replica };
    const store = db!.store;
    try {
      const cluster = await api(A, "POST", "/api/infra/v1/nodecluster/", {
        name: "sim",
        region: "/api/infra/v1/region/aws/us-east-1/",
        node_type: "/api/infra/v1/nodetype/aws/t2.micro/",
        target_num_nodes: 1,
      });
      assert.equal(cluster.status, 201, JSON.stringify(cluster.body));
      assert.equal((await api(A, "POST", `${cluster.body.resource_uri}deploy/`)).status, 202);
      await waitFor(
        "the cluster to be Deployed",
        async () => (await api(A, "GET", cluster.body.resource_uri)).body?.state === "Deployed",
        60_000,
        100,
      );

      const svc = await api(A, "POST", "/api/app/v1/service/", {
        name: "talker",
        image: "busybox:local",
        run_command: "sh -c 'echo hello from the simulated node; sleep 100000'",
        target_num_containers: 4,
      });
      assert.equal(svc.status, 201, JSON.stringify(svc.body));
      assert.equal((await api(A, "POST", `${svc.body.resource_uri}start/`)).status, 202);
      await waitFor(
        "the service to run",
        async () => (await api(A, "GET", svc.body.resource_uri)).body?.state === "Running",
        60_000,
        100,
      );
      const containers = (await store.services.containersOfService(svc.body.uuid)).map((c) => c.uuid);
      assert.equal(containers.length, 4);

      // The same lines whichever replica is asked.
      for (const uuid of containers) {
        const fromA = await logOf(A, uuid);
        assert.deepEqual(fromA, ["hello from the simulated node"], `A's log of ${uuid}`);
        assert.deepEqual(await logOf(B, uuid), fromA, `B's log of ${uuid}`);
        assert.deepEqual(await logOf(C, uuid), fromA, `C's log of ${uuid}`);
      }

      // The node's watcher moves: its owner dies, another replica takes the node over.
      const nodeUuid = (await store.services.containersOfService(svc.body.uuid))[0]!.node_uuid!;
      const ownerOf = async () => {
        const lease = (await store.replicas.listLeases(`node:${nodeUuid}`))[0];
        return lease && lease.until > Date.now() ? lease.owner : undefined;
      };
      const owner = await waitFor("the node to have a watcher", ownerOf, 20_000, 100);
      const actionsBefore = (
        await store.actions.listActions({ namespaces: ["admin"], limit: 1000, offset: 0 })
      ).rows.length;
      await kill(replicas[owner]!);
      const survivors = Object.values(replicas).filter((r) => r.name !== owner);
      const next = await waitFor(
        "a survivor to watch the node",
        async () => {
          const o = await ownerOf();
          return o && o !== owner ? o : undefined;
        },
        GRACE_MS * 3,
        100,
      );
      // For a while after the move, every container stays Running, with no action on any of them.
      const until = Date.now() + 8000;
      while (Date.now() < until) {
        for (const uuid of containers) {
          const res = await api(survivors[0]!, "GET", `/api/app/v1/container/${uuid}/`);
          assert.equal(res.body?.state, "Running", `container ${uuid} after the watcher moved to ${next}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      const actionsAfter = (
        await store.actions.listActions({ namespaces: ["admin"], limit: 1000, offset: 0 })
      ).rows.length;
      assert.equal(actionsAfter, actionsBefore, "no action was recorded on the containers");
      // Their logs are still there, from every replica left.
      for (const r of survivors) {
        assert.deepEqual(
          await logOf(r, containers[0]!),
          ["hello from the simulated node"],
          `${r.name}'s log`,
        );
      }
      // A stop through a survivor ends them, whichever replica ran their processes.
      const stop = await api(survivors[0]!, "POST", `${svc.body.resource_uri}stop/`);
      assert.equal(stop.status, 202, JSON.stringify(stop.body));
      await waitFor(
        "the service to stop",
        async () => (await api(survivors[1]!, "GET", svc.body.resource_uri)).body?.state === "Stopped",
        30_000,
        100,
      );
    } catch (err) {
      throw withLogs(err, Object.values(replicas));
    }
  });
});
