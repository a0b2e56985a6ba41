// Cached GET answers (api/answer-cache.ts) are never served stale: for each kind of row a service
// or container view reads, a change committed by ANOTHER store on the same database (as another
// replica would: no in-process notification reaches this one) shows in the next answer, of the
// object and of its list. Runs on SQLite and, in the PostgreSQL tier, on PostgreSQL.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { openDatabase } from "../../src/store/db.ts";
import type { NodeRow } from "../../src/store/nodes.ts";
import {
  type ContainerRow,
  newContainerRow,
  type ServiceRow,
  ServiceStore,
} from "../../src/store/services.ts";
import { Store } from "../../src/store/store.ts";
import { type Caller, call, createUser, type Harness, quiesce, startHarness } from "../support/harness.ts";
import { fakeEngineNodeRow } from "../support/rows.ts";

// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON.
type Json = any;

describe("cached answers follow every row they were built from", () => {
  let h: Harness;
  let alice: Caller;
  /** Another replica's store: its commits reach this process only through the database. */
  let other: Store;
  let closeOther: () => Promise<void>;
  let node: NodeRow;
  let bobsNode: NodeRow;
  let bob: Caller;

  async function addNode(namespace: string): Promise<NodeRow> {
    return h.store.nodes.insertNode(fakeEngineNodeRow(namespace, Date.now()));
  }

  async function addService(
    name: string,
    extra: Record<string, unknown> = {},
    who: Caller = alice,
  ): Promise<ServiceRow> {
    const res = await call(h, who, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name,
      container_ports: [{ inner_port: 80, protocol: "tcp", published: true }],
      ...extra,
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return (await h.store.services.findService(res.body.uuid))!;
  }

  async function addContainer(s: ServiceRow, on: NodeRow, number: number): Promise<ContainerRow> {
    return h.store.services.insertContainer(
      newContainerRow(s, on.uuid, number, Date.now(), {
        phase: null,
        observed: "running",
        engine_id: randomUUID(),
        private_ip: `172.17.0.${number + 1}`,
        ports: JSON.stringify([{ inner_port: 80, protocol: "tcp", outer_port: 32000 + number }]),
        started_at: Date.now(),
      }),
    );
  }

  /**
   * The answer of `url` after the change `change` made through the other store: the answer is
   * first cached (a second GET runs one statement: the check), then must show the change.
   */
  async function afterChange(url: string, change: () => Promise<unknown>) {
    const first = await call(h, alice, "GET", url);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    const { result: again, statements } = await h.db.statements.during(() => call(h, alice, "GET", url));
    assert.deepEqual(again.body, first.body);
    assert.equal(statements, 1, `${url} is answered from the cache, with one statement`);
    await change();
    const res = await call(h, alice, "GET", url);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return { before: first.body, after: res.body };
  }

  /** The object `uuid` as `afterChange` saw it before and after: `one` is its own URL, else a list's. */
  const beforeAndAfter =
    (one: string, uuid: string) =>
    (url: string, r: { before: Json; after: Json }): [Json, Json] =>
      url === one
        ? [r.before, r.after]
        : [
            r.before.objects.find((o: Json) => o.uuid === uuid),
            r.after.objects.find((o: Json) => o.uuid === uuid),
          ];

  const fresh = async <T extends { uuid: string }>(find: (uuid: string) => Promise<T | undefined>, r: T) =>
    (await find(r.uuid))!;

  before(async () => {
    h = await startHarness();
    alice = await createUser(h, "alice");
    bob = await createUser(h, "bob");
    h.identity.cacheTtlMs = 600_000;
    await quiesce(h);
    const db = openDatabase(h.config.databaseUrl);
    other = new Store(db.kysely, db.dialect);
    closeOther = () => db.close();
    node = await addNode("alice");
    bobsNode = await addNode("bob");
  });
  after(async () => {
    await closeOther?.();
    await h?.close();
  });

  test("a service's answer follows its row, its containers, linked services and their containers, and links to it", async () => {
    const db = await addService("db");
    const dbContainer = await addContainer(db, node, 1);
    const web = await addService("web", {
      linked_to_service: [{ to_service: db.uuid, name: "db" }],
      bindings: [{ volumes_from: `/api/app/v1/service/${db.uuid}/` }],
    });
    await addContainer(web, node, 1);
    const one = `/api/app/v1/service/${web.uuid}/`;
    const list = "/api/app/v1/service/?limit=10";
    const webOf = (body: { objects: Json[] }) => body.objects.find((o) => o.uuid === web.uuid);

    // Its own row.
    for (const url of [one, list]) {
      const current = await fresh((u) => other.services.findService(u), web);
      const r = await afterChange(url, () =>
        other.services.updateService(current, { nickname: `${current.nickname}-x` }),
      );
      const view = url === one ? r.after : webOf(r.after);
      assert.equal(view.nickname, `${current.nickname}-x`);
    }

    // Its containers.
    for (const url of [one, list]) {
      const r = await afterChange(url, async () => {
        const c = (await other.services.containersOfService(web.uuid)).find((x) => x.state === "Running")!;
        await other.services.updateContainer(c, { observed: "exited", stopped_at: Date.now() });
      });
      const [b, a] = url === one ? [r.before, r.after] : [webOf(r.before), webOf(r.after)];
      assert.equal(a.running_num_containers, b.running_num_containers - 1);
      await addContainer(web, node, 10 + b.current_num_containers);
    }

    // The running containers of a linked service (the link variables of the calculated environment).
    for (const url of [one, list]) {
      const r = await afterChange(url, async () => {
        const c = await fresh((u) => other.services.findContainer(u), dbContainer);
        await other.services.updateContainer(c, {
          observed: c.state === "Running" ? "exited" : "running",
          private_ip: c.state === "Running" ? c.private_ip : "172.17.0.99",
        });
      });
      const [b, a] = url === one ? [r.before, r.after] : [webOf(r.before), webOf(r.after)];
      assert.notDeepEqual(a.calculated_envvars, b.calculated_envvars);
    }

    // A service that comes to link to it (linked_from_service).
    for (const url of [one, list]) {
      const name = `client-${randomUUID().slice(0, 4)}`;
      const r = await afterChange(url, () =>
        addService(name, { linked_to_service: [{ to_service: web.uuid, name: "web" }] }),
      );
      const view = url === one ? r.after : webOf(r.after);
      assert.ok(
        view.linked_from_service.some((l: { from_service: string }) => l.from_service.length > 0) &&
          view.linked_from_service.length ===
            (url === one ? r.before : webOf(r.before)).linked_from_service.length + 1,
      );
    }
  });

  test("a service's answer follows the services it links to and takes volumes from", async () => {
    const db = await addService("db2");
    const web = await addService("web2", {
      linked_to_service: [{ to_service: db.uuid, name: "db" }],
      bindings: [{ volumes_from: `/api/app/v1/service/${db.uuid}/` }],
    });
    const one = `/api/app/v1/service/${web.uuid}/`;
    const r = await afterChange(one, async () => {
      const current = await fresh((u) => other.services.findService(u), db);
      await other.services.updateService(current, { state: "Terminated", destroyed_at: Date.now() });
    });
    assert.equal(r.before.linked_to_service.length, 1);
    assert.equal(r.before.bindings.length, 1);
    assert.deepEqual(r.after.linked_to_service, []);
    assert.deepEqual(r.after.bindings, []);
  });

  test("a container's answer follows its row, its service, its node and the containers it links to", async () => {
    const target = await addService("target");
    const targetContainer = await addContainer(target, node, 1);
    const client = await addService("client", {
      linked_to_service: [{ to_service: target.uuid, name: "t" }],
    });
    const c = await addContainer(client, node, 1);
    const one = `/api/app/v1/container/${c.uuid}/`;
    const list = `/api/app/v1/container/?limit=10&service=${client.uuid}`;
    const cOf = (body: { objects: Json[] }) => body.objects.find((o) => o.uuid === c.uuid);
    const pick = (url: string, r: { before: Json; after: Json }): [Json, Json] =>
      url === one ? [r.before, r.after] : [cOf(r.before), cOf(r.after)];

    // Its own row.
    for (const url of [one, list]) {
      const r = await afterChange(url, async () => {
        const current = await fresh((u) => other.services.findContainer(u), c);
        await other.services.updateContainer(current, {
          observed: current.state === "Running" ? "exited" : "running",
        });
      });
      const [b, a] = pick(url, r);
      assert.notEqual(a.state, b.state);
    }

    // Its service (its name makes the container's link variables).
    for (const url of [one, list]) {
      const r = await afterChange(url, async () => {
        const current = await fresh((u) => other.services.findService(u), client);
        await other.services.updateService(current, { name: `${current.name}x` });
      });
      const [b, a] = pick(url, r);
      assert.notDeepEqual(a.link_variables, b.link_variables);
    }

    // Its node (the host of its published ports).
    for (const url of [one, list]) {
      const r = await afterChange(url, async () => {
        const current = await fresh((u) => other.nodes.findNode(u), node);
        await other.nodes.updateNode(current, { external_fqdn: `x${current.external_fqdn}` });
      });
      const [b, a] = pick(url, r);
      assert.notDeepEqual(a.container_ports, b.container_ports);
    }

    // The containers of the service it links to (linked_to_container).
    for (const url of [one, list]) {
      const r = await afterChange(url, async () => {
        const current = await fresh((u) => other.services.findContainer(u), targetContainer);
        await other.services.updateContainer(current, {
          observed: current.state === "Running" ? "exited" : "running",
        });
      });
      const [b, a] = pick(url, r);
      assert.notDeepEqual(a.linked_to_container, b.linked_to_container);
    }
  });

  test("a stack's answer follows its row, its services and their containers", async () => {
    const res = await call(h, alice, "POST", "/api/app/v1/stack/", {
      name: "st",
      services: [
        { name: "st-a", image: "busybox:local" },
        { name: "st-b", image: "busybox:local" },
      ],
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const stack = (await h.store.stacks.findStack(res.body.uuid))!;
    const one = `/api/app/v1/stack/${stack.uuid}/`;
    const list = "/api/app/v1/stack/?limit=10";
    const pick = beforeAndAfter(one, stack.uuid);

    for (const url of [one, list]) {
      const r = await afterChange(url, async () => {
        const current = await fresh((u) => other.stacks.findStack(u), stack);
        await other.stacks.updateStack(current, { nickname: `${current.nickname}-x` });
      });
      const [b, a] = pick(url, r);
      assert.equal(a.nickname, `${b.nickname}-x`);
    }
    const services = await h.store.services.servicesOfStack(stack.uuid);
    for (const url of [one, list]) {
      const r = await afterChange(url, async () => {
        const s = (await other.services.servicesOfStack(stack.uuid)).find((x) => x.state !== "Terminated")!;
        await other.services.insertContainer(
          newContainerRow(s, node.uuid, 1, Date.now(), { spec_version: s.spec_version + 1 }),
        );
      });
      const [b, a] = pick(url, r);
      assert.equal(b.synchronized, url === one);
      assert.equal(a.synchronized, false);
      if (url === one) continue;
      // Its services: one terminated leaves the stack's list of services.
      const r2 = await afterChange(url, async () => {
        const s = await fresh((u) => other.services.findService(u), services[1]!);
        await other.services.updateService(s, { state: "Terminated", destroyed_at: Date.now() });
      });
      const [b2, a2] = pick(url, r2);
      assert.equal(a2.services.length, b2.services.length - 1);
    }
  });

  test("a node's answer follows its row and the containers placed on it or removed from it", async () => {
    const n = await addNode("alice");
    const s = await addService("on-node");
    const one = `/api/infra/v1/node/${n.uuid}/`;
    const list = "/api/infra/v1/node/?limit=100";
    const pick = beforeAndAfter(one, n.uuid);

    // A container placed on it.
    let number = 0;
    for (const url of [one, list]) {
      const r = await afterChange(url, async () => {
        const current = await fresh((u) => other.services.findService(u), s);
        await other.services.insertContainer(
          newContainerRow(current, n.uuid, ++number, Date.now(), { phase: null, observed: "running" }),
        );
      });
      const [b, a] = pick(url, r);
      assert.equal(a.current_num_containers, b.current_num_containers + 1);
    }

    // A container removed from it (terminated).
    for (const url of [one, list]) {
      const r = await afterChange(url, async () => {
        const [c] = await other.services.liveContainers({ node: n.uuid });
        await other.services.updateContainer(c!, { destroyed_at: Date.now() });
      });
      const [b, a] = pick(url, r);
      assert.equal(a.current_num_containers, b.current_num_containers - 1);
    }

    // Renamed.
    for (const url of [one, list]) {
      const r = await afterChange(url, async () => {
        const current = await fresh((u) => other.nodes.findNode(u), n);
        await other.nodes.updateNode(current, { nickname: `${current.nickname}-x` });
      });
      const [b, a] = pick(url, r);
      assert.equal(a.nickname, `${b.nickname}-x`);
    }

    // Its state (the health check finds it unreachable, then reachable again).
    for (const url of [one, list]) {
      const r = await afterChange(url, async () => {
        const current = await fresh((u) => other.nodes.findNode(u), n);
        await other.nodes.updateNode(current, {
          observed: current.observed === "unreachable" ? "reachable" : "unreachable",
        });
      });
      const [b, a] = pick(url, r);
      assert.notEqual(a.state, b.state);
    }
  });

  test("a node cluster's answer follows its row and its nodes", async () => {
    const res = await call(h, alice, "POST", "/api/infra/v1/nodecluster/", {
      name: "pool",
      region: "/api/infra/v1/region/aws/us-east-1/",
      node_type: "/api/infra/v1/nodetype/aws/t2.micro/",
      target_num_nodes: 2,
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const cluster = (await h.store.nodes.findCluster(res.body.uuid))!;
    const members = [
      await h.store.nodes.insertNode(fakeEngineNodeRow("alice", Date.now(), { cluster_uuid: cluster.uuid })),
      await h.store.nodes.insertNode(fakeEngineNodeRow("alice", Date.now(), { cluster_uuid: cluster.uuid })),
    ];
    const one = `/api/infra/v1/nodecluster/${cluster.uuid}/`;
    const list = "/api/infra/v1/nodecluster/?limit=100";
    const pick = beforeAndAfter(one, cluster.uuid);

    // Its own row.
    for (const url of [one, list]) {
      const r = await afterChange(url, async () => {
        const current = await fresh((u) => other.nodes.findCluster(u), cluster);
        await other.nodes.updateCluster(current, { nickname: `${current.nickname}-x` });
      });
      const [b, a] = pick(url, r);
      assert.equal(a.nickname, `${b.nickname}-x`);
    }

    // A node's state: a node being deployed again is not counted among the deployed ones.
    for (const url of [one, list]) {
      const r = await afterChange(url, async () => {
        const current = await fresh((u) => other.nodes.findNode(u), members[0]!);
        await other.nodes.updateNode(current, { phase: current.phase === null ? "deploying" : null });
      });
      const [b, a] = pick(url, r);
      assert.notEqual(a.current_num_nodes, b.current_num_nodes);
    }

    // A node terminated leaves the cluster's nodes.
    const r = await afterChange(one, async () => {
      const current = await fresh((u) => other.nodes.findNode(u), members[1]!);
      await other.nodes.updateNode(current, { destroyed_at: Date.now() });
    });
    assert.equal(r.after.nodes.length, r.before.nodes.length - 1);
  });

  test("a row of another namespace the answer reads is checked too", async () => {
    // A container on a node of another namespace: the first answer cannot be kept (its build read
    // a namespace it had not checked); the next one checks both and is kept.
    const s = await addService("elsewhere");
    const c = await addContainer(s, bobsNode, 1);
    const one = `/api/app/v1/container/${c.uuid}/`;
    await call(h, alice, "GET", one);
    const r = await afterChange(one, async () => {
      const current = await fresh((u) => other.nodes.findNode(u), bobsNode);
      await other.nodes.updateNode(current, { external_fqdn: `y${current.external_fqdn}` });
    });
    assert.notDeepEqual(r.after.container_ports, r.before.container_ports);

    // A node's answer counts the containers on it of another namespace (the node's answer reads
    // them as the container's answer reads the node): the first answer is not kept, the next is.
    const ofBob = await addService("bobs", {}, bob);
    const bobs = await addContainer(ofBob, node, 1);
    const url = `/api/infra/v1/node/${node.uuid}/`;
    const first = await call(h, alice, "GET", url);
    const r2 = await afterChange(url, async () => {
      const current = await fresh((u) => other.services.findContainer(u), bobs);
      await other.services.updateContainer(current, { destroyed_at: Date.now() });
    });
    assert.equal(r2.before.current_num_containers, first.body.current_num_containers);
    assert.equal(r2.after.current_num_containers, r2.before.current_num_containers - 1);
  });

  test("a container redeployed while its service's view is read shows as redeployed", async () => {
    // A service's view reads its containers without their definitions, then each version's
    // definition: a redeploy committed in between (by another replica) leaves a version without
    // one, and the view reads the records whole instead of failing or showing the old definition.
    const s = await addService("raced", { container_envvars: [{ key: "V", value: "one" }] });
    const c = await addContainer(s, node, 1);
    const read = ServiceStore.prototype.deployedSpecs;
    let raced = false;
    ServiceStore.prototype.deployedSpecs = async function (this: ServiceStore, uuids) {
      if (!raced && uuids.includes(s.uuid)) {
        raced = true;
        const current = await fresh((u) => other.services.findContainer(u), c);
        const spec = { ...JSON.parse(current.spec), container_envvars: [{ key: "V", value: "two" }] };
        await other.services.updateContainer(current, { spec: JSON.stringify(spec), spec_version: 2 });
      }
      return read.call(this, uuids);
    };
    try {
      const res = await call(h, alice, "GET", `/api/app/v1/service/${s.uuid}/`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.ok(raced, "the redeploy came between the two reads");
      assert.equal(res.body.link_variables.RACED_1_ENV_V, "two");
      assert.equal(res.body.synchronized, false);
    } finally {
      ServiceStore.prototype.deployedSpecs = read;
    }
  });

  test("another namespace's answer is not served: a foreign object is still a 404", async () => {
    const s = await addService("mine");
    assert.equal((await call(h, alice, "GET", `/api/app/v1/service/${s.uuid}/`)).status, 200);
    assert.equal((await call(h, bob, "GET", `/api/app/v1/service/${s.uuid}/`)).status, 404);
    assert.equal((await call(h, bob, "GET", `/api/app/v1/alice/service/${s.uuid}/`)).status, 404);
    const n = `/api/infra/v1/node/${node.uuid}/`;
    assert.equal((await call(h, alice, "GET", n)).status, 200);
    assert.equal((await call(h, bob, "GET", n)).status, 404);
    assert.equal((await call(h, bob, "GET", `/api/infra/v1/alice/node/${node.uuid}/`)).status, 404);
  });
});
