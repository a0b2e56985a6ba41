// Fixtures of the volume backup tests (test/api/volume-backups, test/ops/s3-targets): a running
// service whose containers have a volume, and the simulated engine a container runs on.
import assert from "node:assert/strict";
import { FakeEngine } from "../../src/drivers/fake/fake-engine.ts";
import { inState } from "../streams/support.ts";
import { call, type Harness } from "./harness.ts";

/** A service of `containers` sleeping busybox containers with a volume at /data, Running (as the admin). */
// biome-ignore lint/suspicious/noExplicitAny: the API's JSON.
export async function serviceWithVolume(h: Harness, name: string, containers: number): Promise<any> {
  const made = await call(h, h.admin, "POST", "/api/app/v1/service/", {
    name,
    image: "busybox:local",
    run_command: "sleep 100000",
    target_num_containers: containers,
    bindings: [{ container_path: "/data" }],
  });
  assert.equal(made.status, 201, made.raw);
  await call(h, h.admin, "POST", `${made.body.resource_uri}start/`);
  return inState(h, h.admin, made.body.resource_uri, "Running");
}

/** The simulated engine a container runs on, with its engine id and number. */
export async function fakeEngineOf(h: Harness, containerUuid: string) {
  const row = (await h.store.services.findContainer(containerUuid))!;
  const node = (await h.store.nodes.findNode(row.node_uuid))!;
  const engine = h.engines.forNode(node);
  assert.ok(engine instanceof FakeEngine);
  return { engine, id: row.engine_id!, number: row.number };
}
