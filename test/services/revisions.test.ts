// Revision history and manual rollback (issue 29): every definition a service is given is kept as
// a numbered revision (BERTH_SERVICE_REVISIONS newest, and always the current one), listed newest
// first through `GET …/service/<uuid>/revisions/` as the service's view shows those fields and
// naming the call that made it; `POST …/service/<uuid>/rollback/` is an action like a redeploy that
// ends Success only once the containers run the old definition and are healthy, Failed with the
// reason otherwise, and is refused with a 4xx naming what is wrong before anything changes.
// Simulated nodes: fake engines with simulated HTTP servers and health checks.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  APP_CHECK,
  APP_IMAGES,
  call,
  containersOf,
  createService,
  deployCluster,
  finished,
  operate,
  type Sim,
  startSim,
  until,
} from "./sim.ts";

let s: Sim & { users: Record<string, import("../support/harness.ts").Caller> };

before(async () => {
  s = await startSim({
    users: ["bob"],
    env: { BERTH_SERVICE_REVISIONS: "3" },
    registry: APP_IMAGES,
  });
  await deployCluster(s, { name: "pair", target_num_nodes: 2 });
});
after(() => s.close());

const get = async (uri: string) => (await call(s.h, s.alice, "GET", uri)).body;
const revisionsOf = async (uri: string, query = "") => get(`${uri}revisions/${query}`);

async function patch(uri: string, body: Record<string, unknown>) {
  const res = await call(s.h, s.alice, "PATCH", uri, body);
  assert.equal(res.status, 200, res.raw);
  return res.headers["x-platform-action-uri"] as string;
}

async function rollback(uri: string, body?: Record<string, unknown>) {
  const res = await call(s.h, s.alice, "POST", `${uri}rollback/`, body);
  assert.equal(res.status, 202, res.raw);
  return finished(s, res);
}

describe("revision history", () => {
  test("every definition change is a numbered revision, newest first, naming the call that made it", async () => {
    const svc = await createService(s, {
      image: "app:1",
      name: "history",
      container_envvars: [{ key: "MODE", value: "one" }],
      health_check: APP_CHECK,
    });
    const second = await patch(svc.resource_uri, { image: "app:2" });
    await patch(svc.resource_uri, { target_num_containers: 3 }); // no definition change: no revision
    const third = await patch(svc.resource_uri, { container_envvars: [{ key: "MODE", value: "three" }] });
    const list = await revisionsOf(svc.resource_uri);
    assert.equal(list.meta.total_count, 3);
    assert.deepEqual(
      list.objects.map((r: { number: number; current: boolean; cause: string }) => [
        r.number,
        r.current,
        r.cause,
      ]),
      [
        [3, true, "update"],
        [2, false, "update"],
        [1, false, "create"],
      ],
    );
    const [r3, r2, r1] = list.objects;
    assert.equal(r3.action, third);
    assert.equal(r2.action, second);
    assert.match(r1.action, /^\/api\/audit\/v1\/action\/[0-9a-f-]{36}\/$/);
    assert.equal(r1.service, svc.resource_uri);
    assert.match(r1.created_datetime, /\+0000$/);
    assert.equal(r1.definition.image_name, "app:1");
    assert.equal(r2.definition.image_name, "app:2");
    assert.deepEqual(r1.definition.container_envvars, [{ key: "MODE", value: "one" }]);
    assert.deepEqual(r3.definition.container_envvars, [{ key: "MODE", value: "three" }]);
    assert.equal(r1.definition.health_check.type, "http");
    assert.equal(r1.definition.rollout, null);

    const page = await revisionsOf(svc.resource_uri, "?limit=1&offset=1");
    assert.deepEqual(
      page.objects.map((r: { number: number }) => r.number),
      [2],
    );
    assert.match(page.meta.next, /revisions\/\?limit=1&offset=2$/);

    const bob = await call(s.h, s.users.bob!, "GET", `${svc.resource_uri}revisions/`);
    assert.equal(bob.status, 404, `another namespace's service is not found: ${bob.raw}`);
    const bobRollback = await call(s.h, s.users.bob!, "POST", `${svc.resource_uri}rollback/`);
    assert.equal(bobRollback.status, 404);
  });

  test("the newest BERTH_SERVICE_REVISIONS are kept, and always the current one", async () => {
    const svc = await createService(s, { image: "app:1", name: "pruned" });
    for (const v of ["a", "b", "c", "d"])
      await patch(svc.resource_uri, { container_envvars: [{ key: "V", value: v }] });
    const list = await revisionsOf(svc.resource_uri);
    assert.deepEqual(
      list.objects.map((r: { number: number }) => r.number),
      [5, 4, 3],
    );
    assert.equal(list.objects[0].definition.container_envvars[0].value, "d");
  });
});

describe("rollback", () => {
  test("goes back to the previous revision: the containers run it healthy, and the next change takes a new number", async () => {
    const svc = await createService(s, {
      image: "app:1",
      name: "undo",
      target_num_containers: 2,
      health_check: APP_CHECK,
    });
    await operate(s, svc.resource_uri, "start");
    await patch(svc.resource_uri, { image: "app:2" });
    await operate(s, svc.resource_uri, "redeploy");
    const a = await rollback(svc.resource_uri);
    assert.equal(a.state, "Success", a.log.join("\n"));
    assert.ok(a.log.includes("Rolling undo back to revision 1"), a.log.join("\n"));
    const action = await get(`/api/audit/v1/action/${a.uuid}/`);
    assert.equal(action.action, "Service Rollback");
    assert.equal(action.object, svc.resource_uri);
    assert.equal(action.can_be_retried, true);
    const after = await until(s, svc.resource_uri, "Running");
    assert.equal(after.image_name, "app:1");
    assert.equal(after.synchronized, true);
    assert.deepEqual(
      (await containersOf(s, after)).map((c) => [c.image_name, c.state, c.health]),
      [
        ["app:1", "Running", "healthy"],
        ["app:1", "Running", "healthy"],
      ],
    );
    let list = await revisionsOf(svc.resource_uri);
    assert.deepEqual(
      list.objects.map((r: { number: number; current: boolean }) => [r.number, r.current]),
      [
        [2, false],
        [1, true],
      ],
    );
    // Forward again to revision 2 by number, then a change gets 3: a number names one definition.
    const forward = await rollback(svc.resource_uri, { revision: 2 });
    assert.equal(forward.state, "Success", forward.log.join("\n"));
    assert.equal((await until(s, svc.resource_uri, "Running")).image_name, "app:2");
    await patch(svc.resource_uri, { container_envvars: [{ key: "X", value: "1" }] });
    list = await revisionsOf(svc.resource_uri);
    assert.deepEqual(
      list.objects.map((r: { number: number; current: boolean }) => [r.number, r.current]),
      [
        [3, true],
        [2, false],
        [1, false],
      ],
    );
  });

  test("a revision whose containers fail their check ends the rollback Failed with the reason; retry goes to the same revision", async () => {
    const svc = await createService(s, {
      image: "app:sick",
      name: "relapse",
      health_check: APP_CHECK,
    });
    await patch(svc.resource_uri, { image: "app:1" });
    await operate(s, svc.resource_uri, "start");
    await patch(svc.resource_uri, { container_envvars: [{ key: "A", value: "b" }] });
    await operate(s, svc.resource_uri, "redeploy");
    const res = await call(s.h, s.alice, "POST", `${svc.resource_uri}rollback/`, { revision: 1 });
    assert.equal(res.status, 202, res.raw);
    const a = await finished(s, res);
    assert.equal(a.state, "Failed", a.log.join("\n"));
    assert.match(a.log.join("\n"), /relapse-1 .*health check failed/);
    const failed = await get(svc.resource_uri);
    assert.equal(failed.image_name, "app:sick", "the service shows the revision it was rolled back to");
    assert.equal(failed.health, "unhealthy", "and that its containers fail their check");
    const retry = await call(s.h, s.alice, "POST", `/api/audit/v1/action/${a.uuid}/retry/`);
    assert.equal(retry.status, 202, retry.raw);
    const again = await finished(s, { headers: { "x-platform-action-uri": retry.body.resource_uri } });
    assert.equal(again.state, "Failed", again.log.join("\n"));
    assert.ok(again.log.includes("Rolling relapse back to revision 1"), again.log.join("\n"));
    // Back to the good revision 3.
    const good = await rollback(svc.resource_uri, { revision: 3 });
    assert.equal(good.state, "Success", good.log.join("\n"));
    const healthy = await until(s, svc.resource_uri, "Running");
    assert.equal(healthy.image_name, "app:1");
    assert.equal(healthy.health, "healthy");
  });

  test("a rollback canceled between batches ends on one revision, the one it left", async () => {
    const svc = await createService(s, {
      image: "app:1",
      name: "second-thoughts",
      target_num_containers: 3,
      rollout: { order: "stop-first", max_unavailable: 1, delay: 1 },
    });
    await operate(s, svc.resource_uri, "start");
    await patch(svc.resource_uri, { image: "app:2" });
    await operate(s, svc.resource_uri, "redeploy");
    const res = await call(s.h, s.alice, "POST", `${svc.resource_uri}rollback/`);
    assert.equal(res.status, 202, res.raw);
    // Cancel while the rollback's rollout waits between its first and second batch.
    await new Promise((r) => setTimeout(r, 600));
    const cancel = await call(s.h, s.alice, "POST", `${res.headers["x-platform-action-uri"]}cancel/`);
    assert.equal(cancel.status, 200, cancel.raw);
    const a = await finished(s, res);
    assert.equal(a.state, "Canceled", a.log.join("\n"));
    assert.match(a.log.join("\n"), /canceled after 1 of 3 container\(s\); rolled back to revision 2/);
    const after = await until(s, svc.resource_uri, "Running");
    assert.equal(after.image_name, "app:2", "the definition it was rolled back from");
    assert.equal(after.synchronized, true);
    assert.deepEqual(
      (await containersOf(s, after)).map((c) => c.image_name),
      ["app:2", "app:2", "app:2"],
    );
    const list = await revisionsOf(svc.resource_uri);
    assert.deepEqual(
      list.objects.map((r: { number: number; current: boolean }) => [r.number, r.current]),
      [
        [2, true],
        [1, false],
      ],
    );
  });

  test("refusals name what is wrong and change nothing", async () => {
    const svc = await createService(s, { image: "app:1", name: "refused" });
    const notRunning = await call(s.h, s.alice, "POST", `${svc.resource_uri}rollback/`, { revision: 1 });
    assert.equal(notRunning.status, 409, notRunning.raw);
    assert.equal(notRunning.body.code, "invalid_state");
    await operate(s, svc.resource_uri, "start");
    const cases: [unknown, number, string, RegExp][] = [
      [undefined, 409, "no_previous_revision", /has no revision before its current one \(1\)/],
      [{ revision: 1 }, 409, "revision_current", /has revision 1 already/],
      [{ revision: 99 }, 404, "unknown_revision", /no kept revision 99; kept: 1/],
      [{ revision: "two" }, 400, "invalid_field", /revision/],
      [{ revision: 0 }, 400, "invalid_field", /revision/],
      [{ revison: 1 }, 400, "", /revison/],
    ];
    for (const [body, status, code, message] of cases) {
      const res = await call(s.h, s.alice, "POST", `${svc.resource_uri}rollback/`, body);
      assert.equal(res.status, status, `${JSON.stringify(body)}: ${res.raw}`);
      if (code) assert.equal(res.body.code, code, res.raw);
      assert.match(res.body.error, message);
    }
    const now = await get(svc.resource_uri);
    assert.equal(now.state, "Running");
    assert.equal((await revisionsOf(svc.resource_uri)).meta.total_count, 1);
  });
});
