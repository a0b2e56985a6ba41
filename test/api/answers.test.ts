// Answers are the views themselves (issue 17): route response schemas drive Fastify's serializer,
// which would drop a field they do not list or coerce one they list with the wrong type. For a
// full service, container, node, node cluster and stack, the HTTP answer must equal the view object
// the server builds, field for field, and the schema must list every field (so OpenAPI documents
// the whole answer).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { withContainerAliases, withNodeAliases } from "../../src/api/compat.ts";
import { ContainerView } from "../../src/contract/container.ts";
import { NodeClusterView, NodeView } from "../../src/contract/nodes.ts";
import { ServiceView } from "../../src/contract/service.ts";
import { StackView } from "../../src/contract/stack.ts";
import { clusterView, nodeView } from "../../src/nodes/views.ts";
import { inState, simulatedCluster } from "../streams/support.ts";
import {
  allowPrivileges,
  type Caller,
  call,
  createUser,
  type Harness,
  startHarness,
} from "../support/harness.ts";

let h: Harness;
let alice: Caller;
let stackUri: string;

const uuidOf = (uri: string) => uri.split("/").filter(Boolean).at(-1)!;
const json = (v: unknown) => JSON.parse(JSON.stringify(v));

before(async () => {
  h = await startHarness();
  alice = await createUser(h, "alice");
  // The web service mounts a host path: an administrator allowed it.
  await allowPrivileges(h, "alice", { host_paths: ["/srv/static"] });
  const cluster = await simulatedCluster(h, alice, 2);
  // Tagged nodes, so that the tagged service is placed.
  assert.equal((await call(h, alice, "PATCH", cluster.resource_uri, { tags: ["web"] })).status, 200);
  const created = await call(h, alice, "POST", "/api/app/v1/stack/", {
    name: "shop",
    services: [
      {
        name: "db",
        image: "busybox:local",
        run_command: "sleep 100000",
        container_ports: [{ protocol: "tcp", inner_port: 5432, published: false }],
        container_envvars: [{ key: "POSTGRES_DB", value: "shop" }],
        bindings: [{ container_path: "/var/lib/data", rewritable: true }],
      },
      {
        name: "web",
        image: "busybox:local",
        run_command: "sleep 100000",
        target_num_containers: 2,
        container_ports: [{ protocol: "tcp", inner_port: 80, outer_port: 8080, published: true }],
        container_envvars: [{ key: "MODE", value: "shop" }],
        linked_to_service: [{ to_service: "db", name: "database" }],
        bindings: [{ volumes_from: "db" }, { host_path: "/srv/static", container_path: "/static" }],
        tags: ["web"],
        labels: { team: "shop" },
        roles: ["global"],
        autorestart: "ALWAYS",
        deployment_strategy: "HIGH_AVAILABILITY",
        cpu_shares: 512,
        memory: 256,
        dns: ["10.0.0.2"],
        extra_hosts: ["cache:10.0.0.3"],
        working_dir: "/srv",
      },
    ],
  });
  assert.equal(created.status, 201, created.raw);
  stackUri = created.body.resource_uri;
  assert.equal((await call(h, alice, "POST", `${stackUri}start/`)).status, 202);
  for (const s of created.body.services as string[]) {
    const state = await inState(h, alice, s, "Running").catch(async (err) => {
      const sv = await call(h, alice, "GET", s);
      const all = await h.store.actions.listActions({ namespaces: ["alice"], limit: 50, offset: 0 });
      const logs = await Promise.all(
        all.rows.map(
          async (a) =>
            `${a.action} ${a.state}: ${(await h.store.actions.actionLogTail(a.uuid, 20)).map((r) => r.line).join(" | ")}`,
        ),
      );
      throw new Error(`${err}: service=${sv.body.state} ${logs.join("; ")}`);
    });
    assert.equal(state.state, "Running");
  }
});
after(() => h.close());

/** The answer over HTTP is the view, and the schema lists exactly the view's fields. */
function sameAsView(answer: unknown, view: object, schema: { properties: object }) {
  assert.deepEqual(answer, json(view));
  assert.deepEqual(Object.keys(schema.properties).sort(), Object.keys(view).sort());
}

describe("answers keep every field of the view", () => {
  test("services, including the list envelope", async () => {
    const rows = await h.store.services.servicesOfStack(uuidOf(stackUri));
    assert.equal(rows.length, 2);
    for (const row of rows) {
      const view = await h.views.serviceView(row);
      const answer = await call(h, alice, "GET", view.resource_uri);
      sameAsView(answer.body, view, ServiceView);
    }
    const web = (await h.views.serviceViews(rows)).find((s) => s.name === "web")!;
    assert.equal(web.linked_to_service.length, 1);
    const list = await call(h, alice, "GET", "/api/app/v1/service/?name=web");
    assert.deepEqual(list.body.objects, [json(web)]);
  });

  test("containers, with their compat alias", async () => {
    const { rows } = await h.store.services.listContainers({ namespace: "alice", limit: 10, offset: 0 });
    assert.equal(rows.length, 3);
    for (const row of rows) {
      const view = withContainerAliases(await h.views.containerView(row));
      const answer = await call(h, alice, "GET", view.resource_uri);
      sameAsView(answer.body, view, ContainerView);
    }
    const web = rows.find((c) => c.name === "web-1")!;
    const view = withContainerAliases(await h.views.containerView(web));
    assert.ok(view.linked_to_container.length > 0 && view.container_ports.length > 0);
  });

  test("nodes, with the historical engine fields, and node clusters", async () => {
    const { rows } = await h.store.nodes.listNodes({ namespace: "alice", limit: 10, offset: 0 });
    assert.equal(rows.length, 2);
    const counts = await h.store.services.countLiveContainersOnNodes(rows.map((n) => n.uuid));
    for (const row of rows) {
      const view = withNodeAliases(nodeView(row, { currentNumContainers: counts.get(row.uuid) ?? 0 }));
      const answer = await call(h, alice, "GET", view.resource_uri);
      sameAsView(answer.body, view, NodeView);
      assert.equal(answer.body.docker_version, row.engine_version);
    }
    const cluster = (await h.store.nodes.findCluster(rows[0]!.cluster_uuid!))!;
    const view = clusterView(cluster, await h.store.nodes.nodesOfCluster(cluster.uuid));
    sameAsView((await call(h, alice, "GET", view.resource_uri)).body, view, NodeClusterView);
  });

  test("stacks", async () => {
    const view = await h.stacks.view((await h.store.stacks.findStack(uuidOf(stackUri)))!);
    sameAsView((await call(h, alice, "GET", stackUri)).body, view, StackView);
  });
});
