// The engine specs of a burst of containers share their reads (orchestrator/engine-specs.ts): specs
// asked for together, as a batch of starts asks for them, read the containers of the service they
// link to and take volumes from once, not once per container, so their cost grows with the sum of
// the two services' sizes, not their product. Each spec still holds every running target of its
// links and the volumes of the target's containers on its own node.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { SecretBox } from "../../src/identity/secret-box.ts";
import { EngineSpecs } from "../../src/orchestrator/engine-specs.ts";
import type { NodeRow } from "../../src/store/nodes.ts";
import { newContainerRow, type ServiceRow } from "../../src/store/services.ts";
import { type Caller, call, createUser, type Harness, quiesce, startHarness } from "../support/harness.ts";
import { fakeEngineNodeRow } from "../support/rows.ts";

describe("engine specs of a burst of containers", () => {
  let h: Harness;
  let alice: Caller;
  let specs: EngineSpecs;
  const nodes: NodeRow[] = [];

  async function addService(body: Record<string, unknown>): Promise<ServiceRow> {
    const res = await call(h, alice, "POST", "/api/app/v1/service/", { image: "busybox:local", ...body });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return (await h.store.services.findService(res.body.uuid))!;
  }

  /** `count` container records of `s`, round robin on the nodes, running or not yet started. */
  async function addContainers(s: ServiceRow, count: number, running: boolean) {
    await h.store.transaction(async (tx) => {
      for (let n = 1; n <= count; n++) {
        await tx.services.insertContainer(
          newContainerRow(s, nodes[n % nodes.length]!.uuid, n, Date.now(), {
            ...(running
              ? { phase: null, observed: "running", engine_id: randomUUID(), private_ip: `172.17.1.${n}` }
              : {}),
          }),
        );
      }
    });
    return h.store.services.containersOfService(s.uuid);
  }

  before(async () => {
    h = await startHarness();
    alice = await createUser(h, "alice");
    h.identity.cacheTtlMs = 600_000;
    await quiesce(h);
    for (let i = 0; i < 3; i++) {
      nodes.push(
        await h.store.nodes.insertNode(
          fakeEngineNodeRow("alice", Date.now(), { public_ip: `10.8.0.${i + 1}`, slot: i }),
        ),
      );
    }
    specs = new EngineSpecs({
      store: h.store,
      box: SecretBox.open({ secret: h.config.secretKey, dataDir: h.config.dataDir }),
      publicUrl: h.config.publicUrl,
      policies: h.policies,
    });
  });
  after(async () => {
    await h?.close();
  });

  test("specs asked for together read the linked service's containers once, and each holds every target", async () => {
    const db = await addService({
      name: "db",
      container_ports: [{ inner_port: 5432, protocol: "tcp" }],
      container_envvars: [{ key: "FLAVOUR", value: "pg" }],
    });
    const dbContainers = await addContainers(db, 30, true);
    const web = await addService({
      name: "web",
      linked_to_service: [{ to_service: db.uuid, name: "db" }],
      bindings: [{ volumes_from: `/api/app/v1/service/${db.uuid}/` }],
    });
    const webContainers = await addContainers(web, 40, false);

    const { result, statements } = await h.db.statements.during(() =>
      Promise.all(webContainers.map((c) => specs.specFor(c, { volumesFrom: [] }))),
    );
    // One read each of services, nodes, containers and the namespace's node hosts: before, each
    // spec read the linked service's containers twice (links, volumes) and its service and node.
    assert.ok(statements <= 6, `40 specs ran ${statements} statements`);

    for (const [i, spec] of result.entries()) {
      const c = webContainers[i]!;
      for (let n = 1; n <= 30; n++) {
        assert.equal(spec.env?.[`DB_${n}_PORT`], `tcp://172.17.1.${n}:5432`, `${c.name} links db-${n}`);
        assert.equal(spec.env?.[`DB_${n}_ENV_FLAVOUR`], "pg");
      }
      const sameNode = dbContainers.filter((d) => d.node_uuid === c.node_uuid).map((d) => d.engine_id);
      assert.deepEqual(spec.volumesFrom, sameNode, `${c.name} takes the volumes of db on its node`);
    }

    // A spec asked for alone (a batch of one) is the same as one of the burst's.
    const alone = await specs.specFor(webContainers[7]!, { volumesFrom: [] });
    assert.deepEqual(alone.env, result[7]!.env);
    assert.deepEqual(alone.volumesFrom, result[7]!.volumesFrom);
  });

  test("a spec asked for after a target started holds it (reads never outlive the turn they were asked in)", async () => {
    const db = await addService({ name: "db2", container_ports: [{ inner_port: 6379, protocol: "tcp" }] });
    const web = await addService({
      name: "web2",
      linked_to_service: [{ to_service: db.uuid, name: "cache" }],
    });
    const [client] = await addContainers(web, 1, false);
    const before = await specs.specFor(client!, { volumesFrom: [] });
    assert.equal(before.env?.CACHE_PORT, undefined);
    const [target] = await addContainers(db, 1, true);
    const afterStart = await specs.specFor(client!, { volumesFrom: [] });
    assert.equal(afterStart.env?.CACHE_PORT, `tcp://${target!.private_ip}:6379`);
  });
});
