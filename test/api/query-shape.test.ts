// The cost of a view depends on its rows, never on the namespace: a list request runs the same
// number of SQL statements whether its page holds 2 rows or 60, and whether the namespace holds
// 5 services or 45 with links, shared volumes and many containers; a single GET runs a small,
// fixed number. Counted through the store's statement counter, with background workers stopped.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import type { NodeRow } from "../../src/store/nodes.ts";
import { newContainerRow } from "../../src/store/services.ts";
import { type Caller, call, createUser, type Harness, quiesce, startHarness } from "../support/harness.ts";
import { fakeEngineNodeRow } from "../support/rows.ts";

describe("statements per request", () => {
  let h: Harness;
  let alice: Caller;
  const nodes: NodeRow[] = [];
  /** The node cluster every node belongs to: its answer lists them all. */
  let cluster = "";
  const services: { uuid: string; name: string }[] = [];

  async function addNodes(count: number) {
    const now = Date.now();
    await h.store.transaction(async (tx) => {
      for (let i = 0; i < count; i++) {
        nodes.push(
          await tx.nodes.insertNode(
            fakeEngineNodeRow("alice", now, {
              nickname: `n-${nodes.length}`,
              public_ip: `10.9.0.${nodes.length + 1}`,
              slot: nodes.length,
              cluster_uuid: cluster,
            }),
          ),
        );
      }
    });
  }

  /** A service through the API (linked to the previous one, sharing its volumes) with running containers. */
  async function addService(containers: number) {
    const previous = services.at(-1);
    const res = await call(h, alice, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: `svc-${services.length}`,
      container_ports: [{ inner_port: 80, protocol: "tcp" }],
      container_envvars: [{ key: "K", value: "v" }],
      ...(previous
        ? {
            linked_to_service: [{ to_service: previous.uuid, name: `up${services.length}` }],
            bindings: [{ volumes_from: `/api/app/v1/service/${previous.uuid}/` }],
          }
        : {}),
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    services.push({ uuid: res.body.uuid, name: res.body.name });
    const s = (await h.store.services.findService(res.body.uuid))!;
    await h.store.transaction(async (tx) => {
      for (let n = 1; n <= containers; n++) {
        await tx.services.insertContainer(
          newContainerRow(s, nodes[n % nodes.length]!.uuid, n, Date.now(), {
            phase: null,
            observed: n % 3 === 0 ? "exited" : "running",
            engine_id: randomUUID(),
            private_ip: `172.17.0.${n + 1}`,
            started_at: Date.now(),
          }),
        );
      }
    });
  }

  /**
   * Statements of one call. Authentication is cached for a moment, so a call just before makes
   * the measured ones hits; the fewest of three is taken, since work left over from an earlier
   * call can only add statements, never remove the call's own.
   */
  async function statementsOf(url: string): Promise<number> {
    await call(h, alice, "GET", url);
    let fewest = Number.POSITIVE_INFINITY;
    for (let i = 0; i < 3; i++) {
      const { result, statements } = await h.db.statements.during(() => call(h, alice, "GET", url));
      assert.equal(result.status, 200, `${url}: ${JSON.stringify(result.body)}`);
      fewest = Math.min(fewest, statements);
    }
    return fewest;
  }

  const lists = [
    "/api/app/v1/service/",
    "/api/app/v1/container/",
    "/api/app/v1/alice/container/",
    "/api/infra/v1/node/",
    "/api/infra/v1/nodecluster/",
    "/api/app/v1/stack/",
    "/api/audit/v1/action/",
  ];

  /** Statements of a call whose views are all kept from the call before (orchestrator/views.ts). */
  async function keptStatementsOf(url: string): Promise<number> {
    h.views.keepViews = true;
    try {
      return await statementsOf(url);
    } finally {
      h.views.keepViews = false;
    }
  }

  async function measure(limit: number) {
    const out: Record<string, number> = {};
    for (const url of lists) out[url] = await statementsOf(`${url}?limit=${limit}`);
    out["services, views kept"] = await keptStatementsOf(`/api/app/v1/service/?limit=${limit}`);
    out["GET service"] = await statementsOf(`/api/app/v1/service/${services[1]!.uuid}/`);
    out["GET service, view kept"] = await keptStatementsOf(`/api/app/v1/service/${services[1]!.uuid}/`);
    const c = (await h.store.services.containersOfService(services[1]!.uuid))[0]!;
    out["GET container"] = await statementsOf(`/api/app/v1/container/${c.uuid}/`);
    out["GET node"] = await statementsOf(`/api/infra/v1/node/${nodes[1]!.uuid}/`);
    out["GET node cluster"] = await statementsOf(`/api/infra/v1/nodecluster/${cluster}/`);
    return out;
  }

  before(async () => {
    h = await startHarness();
    alice = await createUser(h, "alice");
    // Only the requests measured run statements.
    // Authentication stays cached however slow the machine is (its TTL is not what is measured).
    h.identity.cacheTtlMs = 600_000;
    // On PostgreSQL the replica heartbeat runs statements of its own on a timer and on node changes.
    await quiesce(h);
    // What is measured is the cost of building an answer, not of serving a cached one (below), nor
    // of checking kept views (measured on their own).
    h.answers.enabled = false;
    h.views.keepViews = false;
    const created = await call(h, alice, "POST", "/api/infra/v1/nodecluster/", {
      name: "pool",
      region: "/api/infra/v1/region/aws/us-east-1/",
      node_type: "/api/infra/v1/nodetype/aws/t2.micro/",
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    cluster = created.body.uuid;
    await addNodes(3);
  });
  after(async () => {
    await h?.close();
  });

  test("a list costs the same number of statements for 2 rows or a full page, in a small or large namespace", async () => {
    for (let i = 0; i < 5; i++) await addService(2);
    const small = await measure(2);
    const smallFull = await measure(100);
    await addNodes(20);
    for (let i = 0; i < 30; i++) await addService(i % 4 === 0 ? 12 : 3);
    const large = await measure(2);
    const largeFull = await measure(100);
    // A page reads its referenced rows in batches; a batch is skipped when there is nothing to
    // read (no linked service outside the page), so the small namespace's worst case is the bound.
    const bound = Object.fromEntries(Object.keys(small).map((k) => [k, Math.max(small[k]!, smallFull[k]!)]));
    const within = (m: Record<string, number>) =>
      Object.fromEntries(Object.entries(m).map(([k, n]) => [k, Math.min(n, bound[k]!)]));
    assert.deepEqual(within(large), large, "a larger namespace costs nothing more per page");
    assert.deepEqual(within(largeFull), largeFull, "a full page of a large namespace costs no more");
    for (const [what, n] of Object.entries(bound)) assert.ok(n <= 8, `${what} runs ${n} statements`);
  });

  test("a page whose views are kept, or where one service changed, costs no more than a page built anew", async () => {
    const url = "/api/app/v1/service/?limit=100";
    const built = await statementsOf(url);
    const kept = await keptStatementsOf(url);
    assert.ok(kept <= built, `kept views: ${kept} statements, built: ${built}`);
    h.views.keepViews = true;
    try {
      const c = (await h.store.services.containersOfService(services[3]!.uuid))[0]!;
      await h.store.services.updateContainer(c, { exit_code_msg: `changed ${randomUUID()}` });
      const { result, statements } = await h.db.statements.during(() => call(h, alice, "GET", url));
      assert.equal(result.status, 200);
      const changed = result.body.objects.find((o: { uuid: string }) => o.uuid === services[3]!.uuid);
      assert.ok(changed, "the changed service is on the page");
      assert.ok(statements <= built, `one service changed: ${statements} statements, built: ${built}`);
    } finally {
      h.views.keepViews = false;
    }
  });

  test("a cached answer costs one statement (its check against the change feed)", async () => {
    h.answers.enabled = true;
    try {
      const c = (await h.store.services.containersOfService(services[1]!.uuid))[0]!;
      for (const url of [
        "/api/app/v1/service/?limit=100",
        "/api/app/v1/container/?limit=100",
        `/api/app/v1/service/${services[1]!.uuid}/`,
        `/api/app/v1/container/${c.uuid}/`,
        "/api/infra/v1/node/?limit=100",
        `/api/infra/v1/node/${nodes[1]!.uuid}/`,
        "/api/infra/v1/nodecluster/?limit=100",
        `/api/infra/v1/nodecluster/${cluster}/`,
      ])
        assert.equal(await statementsOf(url), 1, url);
    } finally {
      h.answers.enabled = false;
    }
  });
});
