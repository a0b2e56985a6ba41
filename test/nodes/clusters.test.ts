// Node clusters and nodes on simulated providers (fake engines): validation, state tables,
// scaling, tags, health, and the change feed.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { systemClock } from "../../src/domain/time.ts";
import type { FakeEngine } from "../../src/drivers/fake/index.ts";
import { LAST_SEEN_RESOLUTION_MS, NodeProbe } from "../../src/nodes/probe.ts";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";

let h: Harness;
let alice: Caller;
let bob: Caller;

const AWS = {
  region: "/api/infra/v1/region/aws/us-east-1/",
  node_type: "/api/infra/v1/nodetype/aws/t2.micro/",
};
const DO = {
  region: "/api/infra/v1/region/digitalocean/ams3/",
  node_type: "/api/infra/v1/nodetype/digitalocean/1gb/",
};
const SL = {
  region: "/api/infra/v1/region/softlayer/dal09/",
  node_type: "/api/infra/v1/nodetype/softlayer/1c-1g/",
};

before(async () => {
  h = await startHarness({ env: { BERTH_NODE_UNREACHABLE_GRACE_MS: "1" } });
  alice = await createUser(h, "alice");
  bob = await createUser(h, "bob");
});
after(() => h.close());

async function createCluster(who: Caller, body: Record<string, unknown>) {
  const res = await call(h, who, "POST", "/api/infra/v1/nodecluster/", body);
  assert.equal(res.status, 201, res.raw);
  return res.body;
}

async function settled(who: Caller, uri: string, state: string) {
  return waitFor(`${uri} ${state}`, async () => {
    const r = await call(h, who, "GET", uri);
    return r.body.state === state ? r.body : undefined;
  });
}

async function deployed(who: Caller, body: Record<string, unknown>) {
  const c = await createCluster(who, body);
  const res = await call(h, who, "POST", `${c.resource_uri}deploy/`);
  assert.equal(res.status, 202, res.raw);
  return settled(who, c.resource_uri, "Deployed");
}

describe("node cluster create validation", () => {
  const cases: [string, Record<string, unknown>, string][] = [
    ["name is required", { ...AWS }, "name"],
    [
      "region must be a catalogue URI",
      { name: "x", node_type: AWS.node_type, region: "/api/infra/v1/region/aws/mars-1/" },
      "region",
    ],
    [
      "node type must exist",
      { name: "x", region: AWS.region, node_type: "/api/infra/v1/nodetype/aws/t9.huge/" },
      "node_type",
    ],
    [
      "node type must be offered in the region",
      { name: "x", region: AWS.region, node_type: DO.node_type },
      "node_type",
    ],
    ["disk cannot be set where the provider fixes it", { name: "x", ...DO, disk: 40 }, "disk"],
    ["only the listed sizes where sizes are fixed", { name: "x", ...SL, disk: 33 }, "disk"],
    ["disk must be an integer", { name: "x", ...AWS, disk: "big" }, "disk"],
    [
      "vpc.id is required inside vpc",
      { name: "x", ...AWS, provider_options: { vpc: { subnets: ["a"] } } },
      "provider_options.vpc.id",
    ],
    [
      "iam.instance_profile_name is required inside iam",
      { name: "x", ...AWS, provider_options: { iam: {} } },
      "provider_options.iam.instance_profile_name",
    ],
    [
      "provider_options only where the provider supports them",
      { name: "x", ...DO, provider_options: { vpc: { id: "v" } } },
      "provider_options",
    ],
    [
      "provider_options names only known options",
      { name: "x", ...AWS, provider_options: { vpn: { id: "v" } } },
      "provider_options.vpn",
    ],
    [
      "vpc.subnets is a list of strings",
      { name: "x", ...AWS, provider_options: { vpc: { id: "v", subnets: [7] } } },
      "provider_options.vpc.subnets",
    ],
    ["target_num_nodes is at most 100", { name: "x", ...AWS, target_num_nodes: 101 }, "target_num_nodes"],
    ["target_num_nodes is not negative", { name: "x", ...AWS, target_num_nodes: -1 }, "target_num_nodes"],
    ["disk is at least 1 GB", { name: "x", ...AWS, disk: 0 }, "disk"],
    ["tags are objects with a name", { name: "x", ...AWS, tags: [{ nom: "a" }] }, "tags"],
    [
      "target_num_nodes must be an integer",
      { name: "x", ...AWS, target_num_nodes: "many" },
      "target_num_nodes",
    ],
  ];
  for (const [what, body, field] of cases) {
    test(`400 naming the field: ${what}`, async () => {
      const res = await call(h, alice, "POST", "/api/infra/v1/nodecluster/", body);
      assert.equal(res.status, 400, res.raw);
      assert.ok(
        res.body.details?.some((d: { field: string }) => d.field.startsWith(field)),
        `details name ${field}: ${res.raw}`,
      );
      assert.match(res.body.error, new RegExp(field.split(".")[0]!));
    });
  }

  test("defaults: disk 60 where settable, none where not; numeric strings accepted", async () => {
    const a = await createCluster(alice, { name: "defaults", ...AWS, target_num_nodes: "2" });
    assert.equal(a.disk, 60);
    assert.equal(a.target_num_nodes, 2);
    assert.equal(a.state, "Init");
    assert.equal(a.nickname, "defaults");
    assert.deepEqual(a.nodes, []);
    assert.equal(a.provider_options, null);
    const d = await createCluster(alice, { name: "droplets", ...DO });
    assert.equal(d.disk, null);
    const s = await createCluster(alice, { name: "fixed", ...SL, disk: 100 });
    assert.equal(s.disk, 100);
    // A provider offering listed sizes only defaults to one of them (60 is not listed for SoftLayer).
    const sd = await createCluster(alice, { name: "fixed-default", ...SL });
    assert.equal(sd.disk, 75);
    const provider = await call(h, alice, "GET", "/api/infra/v1/provider/softlayer/");
    assert.ok(provider.body.node_cluster_rules.disk_sizes.includes(sd.disk));
    assert.equal(provider.body.node_cluster_rules.default_disk, sd.disk);
    const v = await createCluster(alice, {
      name: "vpc",
      ...AWS,
      provider_options: { vpc: { id: "vpc-1", subnets: ["s1", "s2"] }, iam: { instance_profile_name: "p" } },
    });
    assert.deepEqual(v.provider_options, {
      vpc: { id: "vpc-1", subnets: ["s1", "s2"] },
      iam: { instance_profile_name: "p" },
    });
  });
});

describe("node cluster names", () => {
  test("a second live cluster of one name in a namespace is 409 name_taken; other namespaces and Terminated ones do not count", async () => {
    const first = await createCluster(alice, { name: "twin", ...AWS });
    const again = await call(h, alice, "POST", "/api/infra/v1/nodecluster/", { name: " twin ", ...SL });
    assert.equal(again.status, 409, again.raw);
    assert.equal(again.body.code, "name_taken");
    assert.match(again.body.error, /twin/);
    const listed = await call(h, alice, "GET", "/api/infra/v1/nodecluster/?name=twin");
    assert.equal(listed.body.meta.total_count, 1, "nothing half-written");
    await createCluster(await createUser(h, "carol"), { name: "twin", ...AWS });
    const del = await call(h, alice, "DELETE", first.resource_uri);
    assert.equal(del.status, 202, del.raw);
    await settled(alice, first.resource_uri, "Terminated");
    const reused = await createCluster(alice, { name: "twin", ...AWS });
    assert.notEqual(reused.resource_uri, first.resource_uri);
    // Hide terminated: state__not=Terminated leaves the first one out of the list and its count.
    const all = await call(h, alice, "GET", "/api/infra/v1/nodecluster/?name=twin");
    assert.equal(all.body.meta.total_count, 2);
    const live = await call(h, alice, "GET", "/api/infra/v1/nodecluster/?name=twin&state__not=Terminated");
    assert.equal(live.status, 200, live.raw);
    assert.equal(live.body.meta.total_count, 1);
    assert.equal(live.body.objects[0].resource_uri, reused.resource_uri);
  });
});

describe("node cluster lifecycle on a simulated provider", () => {
  test("deploy brings every node to Deployed with facts from its engine, and the cluster to Deployed", async () => {
    const c = await deployed(alice, { name: "web", ...AWS, target_num_nodes: 2, tags: [{ name: "web" }] });
    assert.equal(c.current_num_nodes, 2);
    assert.notEqual(c.deployed_datetime, null);
    assert.equal(c.nodes.length, 2);
    const zones = new Set<string>();
    for (const uri of c.nodes) {
      const n = (await call(h, alice, "GET", uri)).body;
      assert.equal(n.state, "Deployed");
      assert.equal(n.node_cluster, c.resource_uri);
      assert.ok(n.cpu > 0 && n.memory > 0, "cpu and memory from the engine");
      assert.ok(n.engine_version.length > 0);
      assert.notEqual(n.last_seen, null);
      assert.deepEqual(n.tags, [{ name: "web" }]);
      assert.ok(n.public_ip);
      zones.add(n.availability_zone);
    }
    assert.equal(zones.size, 2, "nodes are spread over availability zones");
  });

  test("every state-table refusal is a 409 naming the state and where the operation is allowed", async () => {
    const c = await deployed(alice, { name: "refusals", ...AWS, target_num_nodes: 1 });
    const again = await call(h, alice, "POST", `${c.resource_uri}deploy/`);
    assert.equal(again.status, 409);
    assert.equal(again.body.code, "invalid_state");
    assert.match(again.body.error, /is Deployed; deploy is allowed in Init/);
    const node = c.nodes[0];
    const hc = await call(h, alice, "POST", `${node}health-check/`);
    assert.equal(hc.status, 409);
    assert.match(hc.body.error, /is Deployed; health-check is allowed in Unreachable/);
    const del = await call(h, alice, "DELETE", c.resource_uri);
    assert.equal(del.status, 202);
    assert.equal(del.body.state, "Terminating");
    const scale = await call(h, alice, "PATCH", c.resource_uri, { target_num_nodes: 3 });
    assert.ok([409, 202].includes(scale.status)); // 202 only if queued before terminate began
    await settled(alice, c.resource_uri, "Terminated");
    const late = await call(h, alice, "DELETE", c.resource_uri);
    assert.equal(late.status, 409);
    assert.match(
      late.body.error,
      /is Terminated; terminate is allowed in Init, Deployed, Partly deployed, Empty cluster/,
    );
    const n = (await call(h, alice, "GET", node)).body;
    assert.equal(n.state, "Terminated");
    assert.notEqual(n.destroyed_datetime, null);
    const up = await call(h, alice, "POST", `${node}engine-upgrade/`);
    assert.equal(up.status, 409);
    assert.match(up.body.error, /is Terminated; engine-upgrade is allowed in Deployed/);
  });

  test("scaling up and down goes through Scaling and ends with the target number of nodes", async () => {
    const c = await deployed(alice, { name: "scaler", ...AWS, target_num_nodes: 1 });
    const up = await call(h, alice, "PATCH", c.resource_uri, { target_num_nodes: 3 });
    assert.equal(up.status, 202, up.raw);
    assert.equal(up.body.state, "Scaling");
    assert.ok(up.headers["x-platform-action-uri"]);
    const big = await settled(alice, c.resource_uri, "Deployed");
    assert.equal(big.current_num_nodes, 3);
    assert.equal(big.nodes.length, 3);
    const down = await call(h, alice, "PATCH", c.resource_uri, { target_num_nodes: 1 });
    assert.equal(down.status, 202);
    const small = await settled(alice, c.resource_uri, "Deployed");
    assert.equal(small.current_num_nodes, 1);
    assert.deepEqual(small.nodes, [c.nodes[0]], "the oldest node stays");
    const gone = await call(h, alice, "GET", "/api/infra/v1/node/?state=Terminated");
    assert.ok(gone.body.objects.length >= 2);
    const zero = await call(h, alice, "PATCH", c.resource_uri, { target_num_nodes: 0 });
    assert.equal(zero.status, 202);
    await settled(alice, c.resource_uri, "Empty cluster");
  });

  test("PATCH tags replaces the cluster's and its nodes' tags; node PATCH renames and retags one node", async () => {
    const c = await deployed(alice, { name: "tagged", ...AWS, target_num_nodes: 2, tags: ["old"] });
    const res = await call(h, alice, "PATCH", c.resource_uri, { tags: [{ name: "blue" }, { name: "db" }] });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.tags, [{ name: "blue" }, { name: "db" }]);
    for (const uri of c.nodes) {
      assert.deepEqual((await call(h, alice, "GET", uri)).body.tags, [{ name: "blue" }, { name: "db" }]);
    }
    const one = await call(h, alice, "PATCH", c.nodes[0], { nickname: "primary", tags: [{ name: "solo" }] });
    assert.equal(one.status, 200);
    assert.equal(one.body.nickname, "primary");
    assert.deepEqual(one.body.tags, [{ name: "solo" }]);
    assert.deepEqual((await call(h, alice, "GET", c.nodes[1])).body.tags, [{ name: "blue" }, { name: "db" }]);
  });

  test("terminating one node lowers the cluster's target; engine-upgrade passes through Upgrading", async () => {
    const c = await deployed(alice, { name: "single", ...AWS, target_num_nodes: 2 });
    const up = await call(h, alice, "POST", `${c.nodes[0]}engine-upgrade/`);
    assert.equal(up.status, 202);
    assert.equal(up.body.state, "Upgrading");
    await settled(alice, c.nodes[0], "Deployed");
    const del = await call(h, alice, "DELETE", c.nodes[1]);
    assert.equal(del.status, 202);
    assert.equal(del.body.state, "Terminating");
    await settled(alice, c.nodes[1], "Terminated");
    // The cluster was Deployed all along: the target drops when the terminate action ends.
    const action = del.headers["x-platform-action-uri"] as string;
    await waitFor("the terminate action to end", async () => {
      const a = await call(h, alice, "GET", action);
      return a.body.state === "Success";
    });
    const after = await settled(alice, c.resource_uri, "Deployed");
    assert.equal(after.target_num_nodes, 1);
    assert.equal(after.current_num_nodes, 1);
  });

  test("lists filter by state, name, region, node_type and node_cluster; other tenants see nothing", async () => {
    const c = await createCluster(alice, { name: "findme", ...SL, disk: 25 });
    const byName = await call(h, alice, "GET", "/api/infra/v1/nodecluster/?name=findme");
    assert.deepEqual(
      byName.body.objects.map((x: { uuid: string }) => x.uuid),
      [c.uuid],
    );
    const byRegion = await call(h, alice, "GET", `/api/infra/v1/nodecluster/?region=${SL.region}&state=Init`);
    assert.ok(byRegion.body.objects.some((x: { uuid: string }) => x.uuid === c.uuid));
    const bad = await call(h, alice, "GET", "/api/infra/v1/nodecluster/?state=Nope");
    assert.equal(bad.status, 400);
    const theirs = await call(h, bob, "GET", "/api/infra/v1/nodecluster/");
    assert.equal(theirs.body.meta.total_count, 0);
    assert.equal((await call(h, bob, "GET", c.resource_uri)).status, 404);
    assert.equal((await call(h, bob, "GET", `/api/infra/v1/nodecluster/${c.uuid}/`)).status, 404);
    assert.equal((await call(h, bob, "POST", `/api/infra/v1/nodecluster/${c.uuid}/deploy/`)).status, 404);
  });
});

describe("node health", () => {
  test("a node whose engine stops answering becomes Unreachable; health-check brings it back", async () => {
    const c = await deployed(alice, { name: "health", ...AWS, target_num_nodes: 1 });
    const uri = c.nodes[0];
    const uuid = uri.split("/").filter(Boolean).pop()!;
    const node = (await h.store.nodes.findNode(uuid))!;
    const fake = h.engines.forNode(node) as unknown as { setReachable(v: boolean): void };
    fake.setReachable(false);
    await h.health.sweep();
    const down = await settled(alice, uri, "Unreachable");
    assert.equal(down.state, "Unreachable");
    const cluster = (await call(h, alice, "GET", c.resource_uri)).body;
    assert.equal(cluster.state, "Deployed", "the watcher does not rewrite the cluster while nodes flap");
    const still = await call(h, alice, "POST", `${uri}health-check/`);
    assert.equal(still.status, 200);
    assert.equal(still.body.state, "Unreachable");
    fake.setReachable(true);
    const back = await call(h, alice, "POST", `${uri}health-check/`);
    assert.equal(back.status, 200);
    assert.equal(back.body.state, "Deployed");
    assert.ok(back.headers["x-platform-action-uri"], "health-check is an audited call");
  });

  test("a node that keeps answering is recorded at most once a minute: health sweeps add no write and no event", async () => {
    const c = await deployed(alice, { name: "quiet", ...AWS, target_num_nodes: 1 });
    const uuid = c.nodes[0].split("/").filter(Boolean).pop()!;
    await h.health.sweep();
    const before = (await h.store.nodes.findNode(uuid))!;
    const revision = await h.store.latestRevision();
    for (let i = 0; i < 3; i++) await h.health.sweep();
    const after = (await h.store.nodes.findNode(uuid))!;
    assert.equal(after.version, before.version, "the node's row was not written");
    const events = (await h.store.changesSince(revision, 1000)).filter((x) => x.resource_uri === c.nodes[0]);
    assert.deepEqual(events, []);
    // Once the recorded last_seen is a minute old, the next answer is recorded.
    const later = new NodeProbe({
      store: h.store,
      engines: h.engines,
      clock: { now: () => Date.now() + LAST_SEEN_RESOLUTION_MS },
      unreachableGraceMs: 60_000,
    });
    const recorded = (await later.probe(uuid, { immediate: false }))!;
    assert.ok(recorded.version > before.version);
    assert.ok(recorded.last_seen! >= before.last_seen! + LAST_SEEN_RESOLUTION_MS);
  });

  test("a node's changed engine facts are recorded by the next sweep, with one update event", async () => {
    const c = await deployed(alice, { name: "resized", ...AWS, target_num_nodes: 1 });
    const uuid = c.nodes[0].split("/").filter(Boolean).pop()!;
    await h.health.sweep();
    const before = (await h.store.nodes.findNode(uuid))!;
    const revision = await h.store.latestRevision();
    const fake = h.engines.forNode(before) as unknown as FakeEngine;
    fake.changeHost({ memoryMb: before.memory! + 4096, engineVersion: "99.0.1" });
    // The next sweep records it (one already under way when this one is asked may have read the
    // engine before the change: sweeps are asked again until one ran after it).
    const node = await waitFor("the new facts", async () => {
      await h.health.sweep();
      const n = (await call(h, alice, "GET", c.nodes[0])).body;
      return n.memory === before.memory! + 4096 ? n : undefined;
    });
    assert.equal(node.engine_version, "99.0.1");
    assert.equal(node.docker_version, "99.0.1");
    const events = (await h.store.changesSince(revision, 1000)).filter((x) => x.resource_uri === c.nodes[0]);
    assert.deepEqual(
      events.map((x) => `${x.action}:${x.state}`),
      ["update:Deployed"],
    );
  });

  test("after Berth itself was down, a node is not Unreachable before it was heard silent for the grace", async () => {
    const c = await deployed(alice, { name: "restart", ...AWS, target_num_nodes: 1 });
    const uuid = c.nodes[0].split("/").filter(Boolean).pop()!;
    // Last heard an hour ago: Berth was down meanwhile. A Berth starting now, whose first probe fails.
    await h.store.db
      .updateTable("nodes")
      .set({ last_seen: Date.now() - 3_600_000 })
      .where("uuid", "=", uuid)
      .execute();
    // Only the new Berth finds the engine silent: were the shared fake made unreachable, the
    // platform's own background work on the node could turn it Unreachable first.
    const silent = {
      forNode: () => ({ info: () => Promise.reject(new Error("connect ECONNREFUSED")) }) as never,
    };
    const fresh = new NodeProbe({
      store: h.store,
      engines: silent,
      clock: systemClock,
      unreachableGraceMs: 60_000,
    });
    const after = await fresh.probe(uuid, { immediate: false });
    assert.equal(after?.state, "Deployed", "one failed probe right after start is within the grace");
    assert.notEqual(after?.unreachable_since, null, "the silence is counted from now");
    assert.equal((await fresh.probe(uuid, { immediate: true }))?.state, "Unreachable");
  });

  test("every node and cluster state change is in the change feed with its parents", async () => {
    const before = await h.store.latestRevision();
    const c = await deployed(alice, { name: "feed", ...AWS, target_num_nodes: 1 });
    const changes = await h.store.changesSince(before, 1000);
    const mine = changes.filter((x) => x.resource_uri === c.resource_uri || x.resource_uri === c.nodes[0]);
    const states = mine.map((x) => `${x.type}:${x.state}`);
    assert.deepEqual(
      states.filter((s) => s.startsWith("nodecluster")),
      ["nodecluster:Init", "nodecluster:Deploying", "nodecluster:Deployed"],
    );
    assert.ok(states.includes("node:Deploying") && states.includes("node:Deployed"));
    const nodeChange = mine.find((x) => x.type === "node")!;
    assert.deepEqual(JSON.parse(nodeChange.parents), [c.resource_uri]);
    assert.ok(changes.some((x) => x.type === "action" && JSON.parse(x.parents)[0] === c.resource_uri));
  });
});
