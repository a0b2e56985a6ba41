// The scheduler (spec "Service" → deployment strategies): where new containers land, why a
// service cannot be placed, which containers go first on scale-down, and how they are numbered.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  type ContainerSnapshot,
  type NodeSnapshot,
  nextContainerNumbers,
  PlacementState,
  planEveryNode,
  planPlacement,
  planRemoval,
} from "../../src/scheduler/index.ts";

function node(name: string, extra: Partial<NodeSnapshot> = {}): NodeSnapshot {
  return { uuid: `uuid-${name}`, name, state: "Deployed", tags: [], ...extra };
}

let serial = 0;
function container(nodeName: string, extra: Partial<ContainerSnapshot> = {}): ContainerSnapshot {
  serial += 1;
  return {
    uuid: `c-${serial}`,
    node: `uuid-${nodeName}`,
    service: "web",
    state: "Running",
    number: serial,
    ...extra,
  };
}

/** Node names in placement order, easier to read in assertions than uuids. */
function names(placements: string[]): string[] {
  return placements.map((uuid) => uuid.replace(/^uuid-/, ""));
}

function placements(plan: ReturnType<typeof planPlacement>): string[] {
  assert.equal(plan.ok, true, plan.ok ? "" : plan.reasons.join("\n"));
  return plan.ok ? names(plan.placements) : [];
}

function reasons(plan: ReturnType<typeof planPlacement>): string[] {
  assert.equal(plan.ok, false, "expected the plan to be refused");
  return plan.ok ? [] : plan.reasons;
}

describe("HIGH_AVAILABILITY", () => {
  test("four containers over two empty nodes land two on each", () => {
    const plan = planPlacement({
      service: "web",
      strategy: "HIGH_AVAILABILITY",
      serviceTags: [],
      count: 4,
      nodes: [node("a"), node("b")],
      containers: [],
    });
    assert.deepEqual(placements(plan), ["a", "b", "a", "b"]);
  });

  test("a new container goes to the node with the fewest containers of the same service", () => {
    const plan = planPlacement({
      service: "web",
      strategy: "HIGH_AVAILABILITY",
      serviceTags: [],
      count: 1,
      // b is busier overall but holds no web container, so web is safer there.
      nodes: [node("a"), node("b")],
      containers: [
        container("a"),
        container("b", { service: "db" }),
        container("b", { service: "db" }),
        container("b", { service: "db" }),
      ],
    });
    assert.deepEqual(placements(plan), ["b"]);
  });

  test("when nodes hold as many containers of the service, the emptiest node wins", () => {
    const plan = planPlacement({
      service: "web",
      strategy: "HIGH_AVAILABILITY",
      serviceTags: [],
      count: 1,
      nodes: [node("a"), node("b")],
      containers: [container("a"), container("b"), container("a", { service: "db" })],
    });
    assert.deepEqual(placements(plan), ["b"]);
  });
});

describe("EMPTIEST_NODE", () => {
  test("new containers fill the emptier node first, then spread", () => {
    const plan = planPlacement({
      service: "web",
      strategy: "EMPTIEST_NODE",
      serviceTags: [],
      count: 4,
      nodes: [node("a"), node("b")],
      // a runs two containers of other services.
      containers: [container("a", { service: "db" }), container("a", { service: "cache" })],
    });
    assert.deepEqual(placements(plan), ["b", "b", "a", "b"]);
  });

  test("only running containers count: a node full of stopped containers is empty", () => {
    const plan = planPlacement({
      service: "web",
      strategy: "EMPTIEST_NODE",
      serviceTags: [],
      count: 1,
      nodes: [node("a"), node("b")],
      containers: [
        container("a", { service: "db", state: "Stopped" }),
        container("a", { service: "cache", state: "Stopped" }),
        container("b", { service: "db" }),
      ],
    });
    assert.deepEqual(placements(plan), ["a"]);
  });

  test("equally loaded nodes are chosen in the order they are listed", () => {
    const plan = planPlacement({
      service: "web",
      strategy: "EMPTIEST_NODE",
      serviceTags: [],
      count: 3,
      nodes: [node("c"), node("a"), node("b")],
      containers: [],
    });
    assert.deepEqual(placements(plan), ["c", "a", "b"]);
  });

  test("an order given by the caller breaks ties among equally loaded nodes, never the count", () => {
    // A replica's own order (plan-applier.ts): d first, then b; a, the emptiest, still wins first.
    const rank: Record<string, number> = { d: 0, b: 1, c: 2, a: 3 };
    const state = new PlacementState(
      [node("a"), node("b"), node("c"), node("d")],
      [container("b"), container("c"), container("d")],
      (n) => rank[n.name]!,
    );
    const plan = state.plan({ service: "api", strategy: "EMPTIEST_NODE", serviceTags: [], count: 4 });
    assert.deepEqual(placements(plan), ["a", "d", "b", "c"]);
  });

  test("terminated and terminating containers do not make a node look full", () => {
    const plan = planPlacement({
      service: "web",
      strategy: "EMPTIEST_NODE",
      serviceTags: [],
      count: 1,
      nodes: [node("a"), node("b")],
      containers: [
        container("a", { state: "Terminated" }),
        container("a", { state: "Terminating" }),
        container("b", { state: "Starting" }),
      ],
    });
    assert.deepEqual(placements(plan), ["a"]);
  });

  test("asking for no containers plans nothing, even with no nodes", () => {
    const plan = planPlacement({
      service: "web",
      strategy: "EMPTIEST_NODE",
      serviceTags: [],
      count: 0,
      nodes: [],
      containers: [],
    });
    assert.deepEqual(plan, { ok: true, placements: [] });
  });
});

describe("node filters", () => {
  test("tagged services stay off nodes lacking their tags", () => {
    const plan = planPlacement({
      service: "web",
      strategy: "EMPTIEST_NODE",
      serviceTags: ["frontend", "ssd"],
      count: 3,
      nodes: [node("db-1", { tags: ["ssd"] }), node("web-1", { tags: ["frontend", "ssd", "eu"] })],
      containers: [],
    });
    assert.deepEqual(placements(plan), ["web-1", "web-1", "web-1"]);
  });

  test("an Unreachable or Deploying node takes no containers", () => {
    const plan = planPlacement({
      service: "web",
      strategy: "HIGH_AVAILABILITY",
      serviceTags: [],
      count: 2,
      nodes: [node("a", { state: "Unreachable" }), node("b", { state: "Deploying" }), node("c")],
      containers: [],
    });
    assert.deepEqual(placements(plan), ["c", "c"]);
  });

  test("when nothing fits, the refusal says why for each node, naming missing tags and states", () => {
    const plan = planPlacement({
      service: "web",
      strategy: "EMPTIEST_NODE",
      serviceTags: ["frontend", "ssd"],
      count: 1,
      nodes: [
        node("web-2", { state: "Unreachable", tags: ["frontend", "ssd"] }),
        node("db-1", { tags: [] }),
        node("web-3", { state: "Deploying", tags: ["frontend"] }),
      ],
      containers: [],
    });
    const lines = reasons(plan);
    assert.equal(lines.length, 4, "a summary line plus one line per node");
    assert.match(lines[0]!, /no node can take a container/);
    assert.match(lines[0]!, /Deployed node with tags frontend, ssd/);
    assert.equal(
      lines[1],
      "node web-2 (uuid-web-2): state is Unreachable, only Deployed nodes take containers",
    );
    assert.equal(lines[2], "node db-1 (uuid-db-1): lacks tags frontend, ssd");
    assert.equal(
      lines[3],
      "node web-3 (uuid-web-3): state is Deploying, only Deployed nodes take containers; lacks tag ssd",
    );
  });

  test("with no nodes at all, the refusal says to deploy nodes first", () => {
    const plan = planPlacement({
      service: "web",
      strategy: "HIGH_AVAILABILITY",
      serviceTags: [],
      count: 1,
      nodes: [],
      containers: [],
    });
    assert.deepEqual(reasons(plan), [
      "no nodes in this namespace: deploy a node cluster or attach an engine first",
    ]);
  });
});

describe("EVERY_NODE", () => {
  const nodes = [node("a"), node("b"), node("c", { state: "Unreachable" }), node("d")];

  test("places exactly one container on each fitting node that lacks one", () => {
    const plan = planEveryNode({
      service: "web",
      serviceTags: [],
      nodes,
      // a already runs web; the Terminated container on b does not count.
      containers: [
        container("a"),
        container("b", { state: "Terminated" }),
        container("d", { service: "db" }),
      ],
    });
    assert.deepEqual(placements(plan), ["b", "d"]);
  });

  test("a newly added node gets a container and the others get none", () => {
    const containers = [container("a"), container("b"), container("d")];
    const before = planEveryNode({ service: "web", serviceTags: [], nodes, containers });
    assert.deepEqual(placements(before), []);
    const after = planEveryNode({
      service: "web",
      serviceTags: [],
      nodes: [...nodes, node("e")],
      containers,
    });
    assert.deepEqual(placements(after), ["e"]);
  });

  test("planPlacement with EVERY_NODE ignores the count and covers every node", () => {
    const plan = planPlacement({
      service: "web",
      strategy: "EVERY_NODE",
      serviceTags: [],
      count: 0,
      nodes,
      containers: [],
    });
    assert.deepEqual(placements(plan), ["a", "b", "d"]);
  });

  test("when no node fits, the refusal explains each node", () => {
    const plan = planEveryNode({
      service: "web",
      serviceTags: ["gpu"],
      nodes: [node("a")],
      containers: [],
    });
    const lines = reasons(plan);
    assert.equal(lines.length, 2);
    assert.equal(lines[1], "node a (uuid-a): lacks tag gpu");
  });
});

describe("scaling down", () => {
  test("containers on nodes that are not Deployed are removed first", () => {
    const nodes = [node("a"), node("b", { state: "Unreachable" })];
    const busy = [
      container("a", { number: 1 }),
      container("a", { number: 2 }),
      container("a", { number: 3 }),
    ];
    const stranded = container("b", { number: 4 });
    assert.deepEqual(planRemoval({ service: "web", count: 1, nodes, containers: [...busy, stranded] }), [
      stranded.uuid,
    ]);
  });

  test("then containers on the node holding the most containers of the service", () => {
    const nodes = [node("a"), node("b")];
    const a1 = container("a", { number: 1 });
    const a2 = container("a", { number: 2 });
    const a3 = container("a", { number: 3 });
    const b4 = container("b", { number: 4 });
    const b5 = container("b", { number: 5 });
    // Other services on b do not make it "more loaded" for this service.
    const others = [container("b", { service: "db" }), container("b", { service: "db" })];
    const plan = planRemoval({
      service: "web",
      count: 2,
      nodes,
      containers: [a1, a2, a3, b4, b5, ...others],
    });
    // a3 evens the nodes out at two each; then the highest number goes.
    assert.deepEqual(plan, [a3.uuid, b5.uuid]);
  });

  test("then the container with the highest number", () => {
    const nodes = [node("a"), node("b")];
    const containers = [
      container("a", { number: 1 }),
      container("b", { number: 2 }),
      container("a", { number: 7 }),
      container("b", { number: 3 }),
    ];
    const plan = planRemoval({ service: "web", count: 1, nodes, containers });
    assert.deepEqual(plan, [containers[2]!.uuid]);
  });

  test("a large scale-down follows the same rule at every pick", () => {
    // 40 nodes, 3 of them not Deployed, holding 0 to 24 containers each (a deterministic spread).
    const nodes = Array.from({ length: 40 }, (_, i) =>
      node(`n${i}`, i % 13 === 5 ? { state: "Unreachable" } : {}),
    );
    const containers: ContainerSnapshot[] = [];
    let number = 0;
    for (const [i, n] of nodes.entries()) {
      for (let k = 0; k < (i * 7) % 25; k++) containers.push(container(n.name, { number: ++number }));
    }
    // The rule applied one pick at a time over every remaining container, as a user reads it.
    const expected: string[] = [];
    const left = [...containers];
    const deployed = (c: ContainerSnapshot) => nodes.find((n) => n.uuid === c.node)!.state === "Deployed";
    for (let i = 0; i < 300; i++) {
      const counts = new Map<string, number>();
      for (const c of left) counts.set(c.node, (counts.get(c.node) ?? 0) + 1);
      const onNode = (c: ContainerSnapshot) => counts.get(c.node)!;
      left.sort(
        (a, b) => Number(deployed(a)) - Number(deployed(b)) || onNode(b) - onNode(a) || b.number - a.number,
      );
      expected.push(left.shift()!.uuid);
    }
    assert.deepEqual(planRemoval({ service: "web", count: 300, nodes, containers }), expected);
  });

  test("only live containers of the service are removed, never more than exist", () => {
    const nodes = [node("a")];
    const live = container("a", { number: 1 });
    const containers = [
      live,
      container("a", { number: 2, state: "Terminated" }),
      container("a", { number: 3, service: "db" }),
    ];
    assert.deepEqual(planRemoval({ service: "web", count: 5, nodes, containers }), [live.uuid]);
    assert.deepEqual(planRemoval({ service: "web", count: 0, nodes, containers }), []);
  });
});

describe("container numbers", () => {
  test("new containers reuse the numbers of terminated ones before counting up", () => {
    assert.deepEqual(nextContainerNumbers([1, 3, 4], 3), [2, 5, 6]);
  });

  test("the first containers of a service are web-1, web-2, …", () => {
    assert.deepEqual(nextContainerNumbers([], 3), [1, 2, 3]);
    assert.deepEqual(nextContainerNumbers([2], 0), []);
  });
});

describe("purity", () => {
  test("planning leaves the snapshot untouched and gives the same plan twice", () => {
    const nodes = [node("a"), node("b")];
    const containers = [container("a"), container("b", { state: "Stopped" })];
    const request = {
      service: "web",
      strategy: "HIGH_AVAILABILITY" as const,
      serviceTags: [],
      count: 3,
      nodes,
      containers,
    };
    const copy = structuredClone(request);
    const first = planPlacement(request);
    const removal = planRemoval({ service: "web", count: 1, nodes, containers });
    assert.deepEqual(request, copy);
    assert.deepEqual(planPlacement(request), first);
    assert.deepEqual(planRemoval({ service: "web", count: 1, nodes, containers }), removal);
  });
});

describe("ports and capacity", () => {
  const port = (p: number, protocol: "tcp" | "udp" = "tcp") => ({
    ports: [{ port: p, protocol }],
    memoryMb: 0,
    cpuShares: 0,
    cpusetMax: -1,
  });
  const memory = (mb: number) => ({ ports: [], memoryMb: mb, cpuShares: 0, cpusetMax: -1 });

  test("a fixed published port fits once per node: three wanted on two nodes places two and names the port", () => {
    const plan = planPlacement({
      service: "web",
      strategy: "EMPTIEST_NODE",
      serviceTags: [],
      count: 3,
      nodes: [node("a"), node("b")],
      containers: [],
      demand: port(8080),
    });
    assert.equal(plan.ok, true);
    if (!plan.ok) return;
    assert.deepEqual(names(plan.placements).sort(), ["a", "b"]);
    assert.ok(plan.shortfall, "the third is explained");
    assert.match(plan.shortfall[0]!, /only 2 of 3/);
    assert.ok(
      plan.shortfall.slice(1).every((l) => /8080\/tcp already taken/.test(l)),
      plan.shortfall.join("\n"),
    );
  });

  test("ports already taken by containers on the node count; tcp and udp are separate", () => {
    const busy = container("a", { service: "other", demand: port(53, "udp") });
    const tcp = planPlacement({
      service: "web",
      strategy: "EMPTIEST_NODE",
      serviceTags: [],
      count: 1,
      nodes: [node("a")],
      containers: [busy],
      demand: port(53, "tcp"),
    });
    assert.deepEqual(placements(tcp), ["a"]);
    const udp = planPlacement({
      service: "web",
      strategy: "EMPTIEST_NODE",
      serviceTags: [],
      count: 1,
      nodes: [node("a")],
      containers: [busy],
      demand: port(53, "udp"),
    });
    assert.match(reasons(udp).join("\n"), /node a .*53\/udp already taken/);
  });

  test("memory: a container larger than any node is refused node by node with the figures", () => {
    const plan = planPlacement({
      service: "web",
      strategy: "EMPTIEST_NODE",
      serviceTags: [],
      count: 1,
      nodes: [node("a", { memoryMb: 1024 }), node("b", { memoryMb: 2048 })],
      containers: [],
      demand: memory(4096),
    });
    const why = reasons(plan);
    assert.match(why[0]!, /no node has room/);
    assert.match(why.join("\n"), /node a .*needs 4096 MB of memory, 1024 MB of 1024 MB are free/);
    assert.match(why.join("\n"), /node b .*needs 4096 MB of memory, 2048 MB of 2048 MB are free/);
  });

  test("memory already reserved on a node counts, and placements of the same plan count too", () => {
    const plan = planPlacement({
      service: "web",
      strategy: "EMPTIEST_NODE",
      serviceTags: [],
      count: 3,
      nodes: [node("a", { memoryMb: 1000 }), node("b", { memoryMb: 1000 })],
      containers: [container("a", { service: "other", demand: memory(600) })],
      demand: memory(400),
    });
    assert.equal(plan.ok, true);
    if (!plan.ok) return;
    assert.deepEqual(names(plan.placements).sort(), ["a", "b", "b"]);
    assert.equal(plan.shortfall, undefined);
  });

  test("cpu_shares count 1024 to a CPU; a cpuset needs the CPUs it names", () => {
    const shares = planPlacement({
      service: "web",
      strategy: "EMPTIEST_NODE",
      serviceTags: [],
      count: 1,
      nodes: [node("a", { cpus: 2 })],
      containers: [],
      demand: { ports: [], memoryMb: 0, cpuShares: 4096, cpusetMax: -1 },
    });
    assert.match(reasons(shares).join("\n"), /needs 4096 CPU shares/);
    const cpuset = planPlacement({
      service: "web",
      strategy: "EMPTIEST_NODE",
      serviceTags: [],
      count: 1,
      nodes: [node("a", { cpus: 2 })],
      containers: [],
      demand: { ports: [], memoryMb: 0, cpuShares: 0, cpusetMax: 3 },
    });
    assert.match(reasons(cpuset).join("\n"), /cpuset names CPU 3, the node has 2 CPUs/);
  });

  test("EVERY_NODE skips a node without room and says why", () => {
    const plan = planEveryNode({
      service: "web",
      serviceTags: [],
      nodes: [node("a"), node("b")],
      containers: [container("b", { service: "other", demand: port(80) })],
      demand: port(80),
    });
    assert.equal(plan.ok, true);
    if (!plan.ok) return;
    assert.deepEqual(names(plan.placements), ["a"]);
    assert.match(plan.shortfall?.join("\n") ?? "", /node b .*80\/tcp/);
  });
});

describe("a placement state counted again in part (plans across replicas)", () => {
  const memory = (mb: number) => ({ ports: [], memoryMb: mb, cpuShares: 0, cpusetMax: -1 });
  const request = (count: number, mb: number) => ({
    service: "web",
    serviceTags: [],
    strategy: "EMPTIEST_NODE" as const,
    demand: memory(mb),
    count,
  });

  test("a refused plan taken back leaves the state as it was", () => {
    const state = new PlacementState([node("a", { memoryMb: 1000 }), node("b", { memoryMb: 1000 })], []);
    const first = state.plan(request(2, 600));
    assert.equal(first.ok, true);
    if (!first.ok) return;
    state.unplan("web", first.placements, memory(600));
    // Without the take-back, neither node would have room for 600 MB more.
    assert.deepEqual(placements(state.plan(request(2, 600))), ["a", "b"]);
  });

  test("a node counted again from its containers as read now: another replica filled it", () => {
    const state = new PlacementState([node("a", { memoryMb: 1000 }), node("b", { memoryMb: 1000 })], []);
    state.refreshNode("uuid-a", [container("a", { service: "other", demand: memory(900) })]);
    assert.deepEqual(placements(state.plan(request(2, 500))), ["b", "b"]);
    // And emptied again: what was counted on it before is forgotten.
    state.refreshNode("uuid-a", []);
    assert.deepEqual(placements(state.plan(request(1, 500))), ["a"]);
  });
});
