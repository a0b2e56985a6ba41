// The audit trail (CONTRACT §7, spec "Actions"): every non-GET platform call by an authenticated
// user leaves an action and carries its URI in two headers; users see only their namespaces'
// actions; the list filters and orders them.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { namespaceOf } from "../../src/api/namespaces.ts";
import { nsPaths } from "../../src/api/routing.ts";
import { restTime, systemClock } from "../../src/domain/time.ts";
import { IdentityService } from "../../src/identity/service.ts";
import type { Store } from "../../src/store/store.ts";
import {
  addMember,
  basic,
  type Caller,
  call,
  createUser,
  type Harness,
  startHarness,
} from "../support/harness.ts";

const ACTION_URI =
  /^\/api\/audit\/v1\/action\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\/$/;

/**
 * Test-only resources: `gadget` and `gizmo` objects with a synchronous `poke` operation, so that
 * calls succeed with a known object URI. A gadget is related to the gizmo of the same id.
 */
function pokeRoutes(_identity: IdentityService) {
  return (untyped: FastifyInstance) => {
    const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
    for (const [resource, name] of [
      ["gadget", "Gadget Poke"],
      ["gizmo", "Gizmo Poke"],
    ] as const) {
      for (const url of nsPaths(`/api/app/v1/{ns}${resource}/:id/poke/`)) {
        app.post(
          url,
          {
            config: { action: name, access: "namespace" },
            schema: {
              hide: true,
              params: Type.Object({ id: Type.String(), namespace: Type.Optional(Type.String()) }),
              response: { 200: Type.Object({ poked: Type.String() }) },
              body: Type.Optional(
                Type.Object({
                  level: Type.Optional(Type.Integer({ minimum: 1, maximum: 10 })),
                  secret: Type.Optional(Type.String()),
                }),
              ),
            },
          },
          async (req) => {
            const ns = namespaceOf(req);
            const object = `/api/app/v1/${ns}/${resource}/${req.params.id}/`;
            req.audit.object = object;
            return { poked: object };
          },
        );
      }
    }
  };
}

let h: Harness;
let alice: Caller;
let bob: Caller;

before(async () => {
  h = await startHarness({
    extend: ({ store, relations }) => {
      relations.register("gadget", async (_store, _uri, parsed) => [
        `/api/app/v1/${parsed.namespace}/gizmo/${parsed.id}/`,
      ]);
      return { routes: [pokeRoutes(new IdentityService(store, systemClock))] };
    },
  });
  alice = await createUser(h, "alice");
  bob = await createUser(h, "bob");
});

after(async () => {
  await h.close();
});

async function countActions(): Promise<number> {
  const row = await h.db.kysely
    .selectFrom("actions")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

/** The action URI of a response; asserts both headers are present and equal. */
function actionHeader(res: { headers: Record<string, unknown> }): { uri: string; uuid: string } {
  const platform = res.headers["x-platform-action-uri"];
  const legacy = res.headers["x-dockercloud-action-uri"];
  assert.equal(typeof platform, "string", "X-Platform-Action-URI is set");
  assert.equal(legacy, platform, "X-DockerCloud-Action-URI carries the same value");
  const m = ACTION_URI.exec(platform as string);
  assert.ok(m, `action URI form: ${String(platform)}`);
  return { uri: platform as string, uuid: m[1]! };
}

async function poke(who: Caller, path: string, body: unknown = {}) {
  const res = await call(h, who, "POST", path, body);
  assert.equal(res.status, 200, res.raw);
  return actionHeader(res).uuid;
}

// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON.
async function listActions(who: Caller, query: string): Promise<any[]> {
  const res = await call(h, who, "GET", `/api/audit/v1/action/?limit=1000&${query}`);
  assert.equal(res.status, 200, res.raw);
  return res.body.objects;
}

describe("every non-GET call leaves an action", () => {
  test("a successful call gets a Success action with both headers pointing at it", async () => {
    const res = await call(h, alice, "POST", "/api/app/v1/gadget/g1/poke/", { level: 2 });
    assert.equal(res.status, 200);
    const { uri, uuid } = actionHeader(res);
    const action = await call(h, alice, "GET", uri);
    assert.equal(action.status, 200);
    assert.deepEqual(Object.keys(action.body).sort(), [
      "action",
      "can_be_canceled",
      "can_be_retried",
      "end_date",
      "ip",
      "is_user_action",
      "location",
      "method",
      "object",
      "path",
      "resource_uri",
      "start_date",
      "state",
      "user",
      "user_agent",
      "uuid",
    ]);
    assert.equal(action.body.resource_uri, uri);
    assert.equal(action.body.uuid, uuid);
    assert.equal(action.body.state, "Success");
    assert.equal(action.body.action, "Gadget Poke");
    assert.equal(action.body.object, "/api/app/v1/alice/gadget/g1/");
    assert.equal(action.body.method, "POST");
    assert.equal(action.body.path, "/api/app/v1/gadget/g1/poke/");
    assert.equal(action.body.user, "alice");
    assert.equal(action.body.is_user_action, true);
    assert.equal(typeof action.body.ip, "string");
    assert.ok(action.body.ip.length > 0);
    assert.equal(action.body.location, "");
    assert.equal(action.body.can_be_canceled, false);
    assert.equal(action.body.can_be_retried, false);
    assert.equal(typeof action.body.end_date, "string");
  });

  test("the same action is readable with the namespace segment", async () => {
    const uuid = await poke(alice, "/api/app/v1/gadget/g2/poke/");
    const res = await call(h, alice, "GET", `/api/audit/v1/alice/action/${uuid}/`);
    assert.equal(res.status, 200);
    assert.equal(res.body.uuid, uuid);
  });

  test("the user agent is recorded, the request body is not", async () => {
    const res = await h.app.inject({
      method: "POST",
      url: "/api/app/v1/gadget/g3/poke/",
      headers: { authorization: alice.auth, "user-agent": "python-dockercloud/1.0.9" },
      payload: { secret: "hunter2-do-not-store" },
    });
    assert.equal(res.statusCode, 200);
    const { uuid, uri } = actionHeader(res);
    const action = await call(h, alice, "GET", uri);
    assert.equal(action.body.user_agent, "python-dockercloud/1.0.9");
    const row = await h.store.actions.findAction(uuid);
    assert.ok(row);
    assert.ok(!JSON.stringify(row).includes("hunter2"), "the stored action holds no request body");
    assert.ok(!action.raw.includes("hunter2"));
  });

  const failures: [string, string, string, unknown, number][] = [
    ["a method the path does not define", "POST", "/api/infra/v1/provider/", { name: "x" }, 405],
    ["an unknown path", "POST", "/api/app/v1/nothing/here/", {}, 404],
    ["a body that fails validation", "POST", "/api/app/v1/gadget/g4/poke/", { level: 99 }, 400],
    ["a DELETE on a read-only object", "DELETE", "/api/infra/v1/region/aws/us-east-1/", undefined, 405],
  ];
  for (const [what, method, path, body, status] of failures) {
    test(`a call refused for ${what} (${status}) leaves a Failed action with the error in its log`, async () => {
      const res = await call(h, alice, method as "POST", path, body);
      assert.equal(res.status, status);
      const { uri, uuid } = actionHeader(res);
      const action = await call(h, alice, "GET", uri);
      assert.equal(action.status, 200);
      assert.equal(action.body.state, "Failed");
      assert.equal(action.body.method, method);
      assert.equal(action.body.user, "alice");
      assert.equal(typeof action.body.object, "string");
      assert.ok(action.body.object.startsWith("/api/"), action.body.object);
      assert.equal(action.body.can_be_retried, false);
      const log = await h.store.actions.actionLogTail(uuid, 10);
      assert.ok(log.length > 0, "the failed action has a log");
      assert.ok(
        log.some((l) => l.line.includes(res.body.error)),
        `the log holds the error line "${res.body.error}": ${JSON.stringify(log)}`,
      );
    });
  }

  test("invalid JSON on the platform API leaves a Failed action too", async () => {
    const res = await h.app.inject({
      method: "POST",
      url: "/api/app/v1/gadget/g5/poke/",
      headers: { authorization: alice.auth, "content-type": "application/json" },
      payload: "{oops",
    });
    assert.equal(res.statusCode, 400);
    const { uuid } = actionHeader(res);
    const row = await h.store.actions.findAction(uuid);
    assert.equal(row?.state, "Failed");
    const log = await h.store.actions.actionLogTail(uuid, 10);
    assert.ok(log.some((l) => l.line.includes(res.json().error)));
  });

  test("GET calls leave no action and carry no action header", async () => {
    const before = await countActions();
    for (const url of ["/api/infra/v1/provider/", "/api/audit/v1/action/", "/api/infra/v1/nothing/"]) {
      const res = await call(h, alice, "GET", url);
      assert.equal(res.headers["x-platform-action-uri"], undefined, url);
      assert.equal(res.headers["x-dockercloud-action-uri"], undefined, url);
    }
    assert.equal(await countActions(), before);
  });

  test("unauthenticated calls leave no action and carry no action header", async () => {
    const before = await countActions();
    const anonymous = await call(h, undefined, "POST", "/api/app/v1/gadget/g6/poke/", {});
    const wrongKey = await call(
      h,
      { ...alice, auth: basic("alice", "wrong") },
      "DELETE",
      "/api/infra/v1/provider/aws/",
    );
    const password = await call(
      h,
      { ...alice, auth: basic("alice", alice.password) },
      "POST",
      "/api/infra/v1/provider/",
    );
    for (const res of [anonymous, wrongKey, password]) {
      assert.equal(res.status, 401);
      assert.equal(res.headers["x-platform-action-uri"], undefined);
      assert.equal(res.headers["x-dockercloud-action-uri"], undefined);
    }
    assert.equal(await countActions(), before);
  });

  test("calls outside the platform API leave no action", async () => {
    const before = await countActions();
    const res = await call(h, alice, "POST", "/api/v1.1/users/alice/apikeys/", { label: "not audited" });
    assert.equal(res.status, 201);
    assert.equal(res.headers["x-platform-action-uri"], undefined);
    assert.equal(await countActions(), before);
  });
});

describe("visibility", () => {
  test("a user never sees another user's actions", async () => {
    const bobUuid = await poke(bob, "/api/app/v1/gadget/secret/poke/");
    const aliceUuids = (await listActions(alice, "")).map((a) => a.uuid);
    assert.ok(aliceUuids.length > 0);
    assert.ok(!aliceUuids.includes(bobUuid));
    for (const a of await listActions(alice, "")) assert.equal(a.user, "alice");
    assert.deepEqual(await listActions(alice, `uuid=${bobUuid}`), []);

    const missing = await call(h, alice, "GET", `/api/audit/v1/action/${randomUUID()}/`);
    assert.equal(missing.status, 404);
    for (const url of [
      `/api/audit/v1/action/${bobUuid}/`,
      `/api/audit/v1/bob/action/${bobUuid}/`,
      `/api/audit/v1/alice/action/${bobUuid}/`,
    ]) {
      const res = await call(h, alice, "GET", url);
      assert.equal(res.status, 404, url);
      assert.deepEqual(res.body, missing.body, "no existence leak");
    }
    const bobList = await call(h, alice, "GET", "/api/audit/v1/bob/action/");
    assert.equal(bobList.status, 404);

    assert.equal((await call(h, bob, "GET", `/api/audit/v1/action/${bobUuid}/`)).status, 200);
    assert.equal((await call(h, bob, "GET", `/api/audit/v1/bob/action/${bobUuid}/`)).status, 200);
  });

  test("cancel and retry of another user's action are 404", async () => {
    const bobUuid = await poke(bob, "/api/app/v1/gadget/secret2/poke/");
    for (const op of ["cancel", "retry"]) {
      const res = await call(h, alice, "POST", `/api/audit/v1/action/${bobUuid}/${op}/`);
      assert.equal(res.status, 404, op);
    }
    const row = await h.store.actions.findAction(bobUuid);
    assert.equal(row?.state, "Success");
  });

  test("members of an organization share its actions; others do not see them", async () => {
    const org = await call(h, alice, "POST", "/api/v1.1/orgs/", { name: "acme" });
    assert.equal(org.status, 201);
    await addMember(h, alice, "acme", bob);
    const uuid = await poke(bob, "/api/app/v1/acme/gadget/shared/poke/");
    const seen = await call(h, alice, "GET", "/api/audit/v1/acme/action/");
    assert.equal(seen.status, 200);
    const found = seen.body.objects.find((a: { uuid: string }) => a.uuid === uuid);
    assert.ok(found, "alice sees bob's action in acme");
    assert.equal(found.object, "/api/app/v1/acme/gadget/shared/");
    assert.equal(found.user, "bob");
    assert.ok(
      !(await listActions(alice, "")).some((a) => a.uuid === uuid),
      "not listed in alice's own namespace",
    );
    const carol = await createUser(h, "carol");
    assert.equal((await call(h, carol, "GET", `/api/audit/v1/action/${uuid}/`)).status, 404);
  });
});

describe("list filters and order", () => {
  let dana: Caller;
  const inserted: string[] = [];
  const starts = [
    Date.UTC(2020, 0, 1, 0, 0, 0, 500),
    Date.UTC(2021, 0, 1, 0, 0, 0, 500),
    Date.UTC(2022, 0, 1, 0, 0, 0, 500),
  ];

  async function insert(store: Store, start: number, state: string, end: number | null) {
    const uuid = randomUUID();
    await store.actions.insertAction({
      uuid,
      namespace: "dana",
      object: `/api/app/v1/dana/gadget/old${inserted.length}/`,
      action: "Gadget Poke",
      kind: null,
      params: null,
      method: "POST",
      path: `/api/app/v1/gadget/old${inserted.length}/poke/`,
      user: "dana",
      user_agent: "test",
      ip: "127.0.0.1",
      location: "",
      start_date: start,
      end_date: end,
      state,
      is_user_action: 1,
    });
    inserted.push(uuid);
    return uuid;
  }

  before(async () => {
    dana = await createUser(h, "dana");
    await insert(h.store, starts[0]!, "Success", starts[0]! + 10_000);
    await insert(h.store, starts[1]!, "Failed", starts[1]! + 10_000);
    await insert(h.store, starts[2]!, "Success", starts[2]! + 10_000);
  });

  const uuids = (objects: { uuid: string }[]) => objects.map((a) => a.uuid);
  const q = (value: string) => encodeURIComponent(value);

  test("actions list oldest first; order_by=-start_date gives newest first", async () => {
    assert.deepEqual(uuids(await listActions(dana, "")), inserted);
    assert.deepEqual(uuids(await listActions(dana, "order_by=-start_date")), [...inserted].reverse());
    assert.deepEqual(uuids(await listActions(dana, "order_by=start_date")), inserted);
    const page = await call(h, dana, "GET", "/api/audit/v1/action/?order_by=-start_date&limit=1");
    assert.equal(page.body.objects[0].uuid, inserted[2]);
    const next = await call(h, dana, "GET", page.body.meta.next);
    assert.equal(next.body.objects[0].uuid, inserted[1], "next keeps the order");
  });

  test("newly recorded actions come after older ones", async () => {
    const first = await poke(alice, "/api/app/v1/gadget/o1/poke/");
    const second = await poke(alice, "/api/app/v1/gadget/o2/poke/");
    const mine = uuids(await listActions(alice, ""));
    assert.ok(mine.indexOf(first) < mine.indexOf(second));
    const reversed = uuids(await listActions(alice, "order_by=-start_date"));
    assert.ok(reversed.indexOf(second) < reversed.indexOf(first));
  });

  test("an unknown order_by is 400", async () => {
    const res = await call(h, dana, "GET", "/api/audit/v1/action/?order_by=-nope");
    assert.equal(res.status, 400);
  });

  test("uuid and uuid__startswith select actions by id", async () => {
    assert.deepEqual(uuids(await listActions(dana, `uuid=${inserted[1]}`)), [inserted[1]]);
    assert.deepEqual(uuids(await listActions(dana, `uuid=${randomUUID()}`)), []);
    const prefix = inserted[2]!.slice(0, 8);
    const found = uuids(await listActions(dana, `uuid__startswith=${prefix}`));
    assert.ok(found.includes(inserted[2]!));
    for (const u of found) assert.ok(u.startsWith(prefix));
    assert.deepEqual(await listActions(dana, "uuid__startswith=zzzz"), []);
  });

  test("state filters, and an unknown state is 400 naming state", async () => {
    assert.deepEqual(uuids(await listActions(dana, "state=Failed")), [inserted[1]]);
    assert.deepEqual(uuids(await listActions(dana, "state=Success")), [inserted[0], inserted[2]]);
    assert.deepEqual(await listActions(dana, `state=${q("In progress")}`), []);
    const res = await call(h, dana, "GET", "/api/audit/v1/action/?state=Nope");
    assert.equal(res.status, 400);
    assert.equal(typeof res.body.error, "string");
    assert.ok(
      res.body.details?.some((d: { field: string }) => d.field === "state"),
      JSON.stringify(res.body),
    );
  });

  test("start_date bounds are inclusive and accept ISO and REST forms", async () => {
    assert.deepEqual(
      uuids(await listActions(dana, "start_date__gte=2021-01-01T00:00:00Z")),
      inserted.slice(1),
    );
    assert.deepEqual(
      uuids(await listActions(dana, "start_date__lte=2021-06-01T00:00:00Z")),
      inserted.slice(0, 2),
    );
    assert.deepEqual(
      uuids(
        await listActions(dana, "start_date__gte=2020-06-01T00:00:00Z&start_date__lte=2021-06-01T00:00:00Z"),
      ),
      [inserted[1]],
    );
    // The timestamp an action shows, used as a bound, includes that action on both sides.
    const shown = restTime(starts[1]!)!;
    assert.deepEqual(uuids(await listActions(dana, `start_date__gte=${q(shown)}`)), inserted.slice(1));
    assert.deepEqual(uuids(await listActions(dana, `start_date__lte=${q(shown)}`)), inserted.slice(0, 2));
    assert.deepEqual(
      uuids(await listActions(dana, `start_date__gte=${q(shown)}&start_date__lte=${q(shown)}`)),
      [inserted[1]],
    );
  });

  test("end_date bounds are inclusive and accept ISO and REST forms", async () => {
    assert.deepEqual(uuids(await listActions(dana, "end_date__gte=2021-01-01T00:00:05Z")), inserted.slice(1));
    assert.deepEqual(
      uuids(await listActions(dana, "end_date__lte=2021-01-01T00:00:05Z")),
      inserted.slice(0, 1),
    );
    const shown = restTime(starts[1]! + 10_000)!;
    assert.deepEqual(uuids(await listActions(dana, `end_date__gte=${q(shown)}&end_date__lte=${q(shown)}`)), [
      inserted[1],
    ]);
  });

  for (const field of ["start_date__gte", "start_date__lte", "end_date__gte", "end_date__lte"]) {
    test(`an invalid ${field} is 400 naming it`, async () => {
      const res = await call(h, dana, "GET", `/api/audit/v1/action/?${field}=not-a-date`);
      assert.equal(res.status, 400);
      assert.equal(typeof res.body.code, "string");
      assert.ok(
        res.body.details?.some((d: { field: string }) => d.field === field),
        JSON.stringify(res.body),
      );
    });
  }

  test("object filters by resource URI, with or without the namespace segment", async () => {
    const target = await poke(alice, "/api/app/v1/gadget/f1/poke/");
    const other = await poke(alice, "/api/app/v1/gadget/f2/poke/");
    for (const object of [
      "/api/app/v1/alice/gadget/f1/",
      "/api/app/v1/gadget/f1/",
      "/api/app/v1/alice/gadget/f1",
      "/api/app/v1/gadget/f1",
    ]) {
      const found = uuids(await listActions(alice, `object=${object}`));
      assert.deepEqual(found, [target], object);
      assert.ok(!found.includes(other));
    }
    const viaNs = await call(h, alice, "GET", "/api/audit/v1/alice/action/?object=/api/app/v1/gadget/f1/");
    assert.deepEqual(uuids(viaNs.body.objects), [target]);
  });

  test("object finds the calls made on an action (cancel, retry)", async () => {
    const target = await poke(alice, "/api/app/v1/gadget/f3/poke/");
    const cancel = await call(h, alice, "POST", `/api/audit/v1/action/${target}/cancel/`);
    assert.equal(cancel.status, 409);
    const cancelUuid = actionHeader(cancel).uuid;
    const found = uuids(await listActions(alice, `object=/api/audit/v1/action/${target}/`));
    assert.deepEqual(found, [cancelUuid]);
  });

  test("include_related adds the actions of related objects", async () => {
    const gadget = await poke(alice, "/api/app/v1/gadget/r1/poke/");
    const gizmo = await poke(alice, "/api/app/v1/gizmo/r1/poke/");
    const unrelated = await poke(alice, "/api/app/v1/gizmo/r2/poke/");
    const onlyGadget = uuids(await listActions(alice, "object=/api/app/v1/alice/gadget/r1/"));
    assert.deepEqual(onlyGadget, [gadget]);
    for (const object of ["/api/app/v1/alice/gadget/r1/", "/api/app/v1/gadget/r1/"]) {
      const related = uuids(await listActions(alice, `object=${object}&include_related=true`));
      assert.deepEqual(related, [gadget, gizmo], object);
      assert.ok(!related.includes(unrelated));
    }
    const explicitFalse = uuids(
      await listActions(alice, "object=/api/app/v1/alice/gadget/r1/&include_related=false"),
    );
    assert.deepEqual(explicitFalse, [gadget]);
    // A kind with no registered resolver relates only to itself.
    const gizmoOnly = uuids(
      await listActions(alice, "object=/api/app/v1/alice/gizmo/r1/&include_related=true"),
    );
    assert.deepEqual(gizmoOnly, [gizmo]);
  });

  test("filters combine and keep their values in next", async () => {
    const res = await call(h, dana, "GET", "/api/audit/v1/action/?state=Success&limit=1");
    assert.equal(res.body.meta.total_count, 2);
    const next = new URL(res.body.meta.next, "http://x");
    assert.equal(next.searchParams.get("state"), "Success");
    const page2 = await call(h, dana, "GET", res.body.meta.next);
    assert.deepEqual(uuids(page2.body.objects), [inserted[2]]);
  });
});

describe("cancel and retry of synchronous actions", () => {
  test("cancel of a finished synchronous action is 409 naming its state", async () => {
    const uuid = await poke(alice, "/api/app/v1/gadget/c1/poke/");
    const res = await call(h, alice, "POST", `/api/audit/v1/action/${uuid}/cancel/`);
    assert.equal(res.status, 409);
    assert.equal(typeof res.body.code, "string");
    assert.match(res.body.error, /Success/);
    const after = await call(h, alice, "GET", `/api/audit/v1/action/${uuid}/`);
    assert.equal(after.body.state, "Success");
    assert.equal(after.body.can_be_canceled, false);
  });

  test("retry of a synchronous action is 409 naming its state", async () => {
    const uuid = await poke(alice, "/api/app/v1/gadget/c2/poke/");
    const before = await countActions();
    const res = await call(h, alice, "POST", `/api/audit/v1/action/${uuid}/retry/`);
    assert.equal(res.status, 409);
    assert.equal(typeof res.body.code, "string");
    assert.match(res.body.error, /Success/);
    assert.equal(await countActions(), before + 1, "only the refused retry call itself is recorded");
    const refusal = actionHeader(res);
    const row = await h.store.actions.findAction(refusal.uuid);
    assert.equal(row?.state, "Failed");
    assert.equal(row?.object, `/api/audit/v1/action/${uuid}/`);
    assert.equal(row?.action, "Action Retry");
  });

  test("a failed synchronous action cannot be retried or canceled either", async () => {
    const failed = await call(h, alice, "POST", "/api/infra/v1/provider/");
    const { uuid } = actionHeader(failed);
    const view = await call(h, alice, "GET", `/api/audit/v1/action/${uuid}/`);
    assert.equal(view.body.state, "Failed");
    assert.equal(view.body.can_be_canceled, false);
    assert.equal(view.body.can_be_retried, false);
    const cancel = await call(h, alice, "POST", `/api/audit/v1/action/${uuid}/cancel/`);
    assert.equal(cancel.status, 409);
    assert.match(cancel.body.error, /Failed/);
    const retry = await call(h, alice, "POST", `/api/audit/v1/action/${uuid}/retry/`);
    assert.equal(retry.status, 409);
    assert.match(retry.body.error, /Failed/);
  });

  test("cancel and retry of an unknown action are 404", async () => {
    for (const op of ["cancel", "retry"]) {
      const res = await call(h, alice, "POST", `/api/audit/v1/action/${randomUUID()}/${op}/`);
      assert.equal(res.status, 404);
      actionHeader(res);
    }
  });

  test("synchronous actions are never cancelable or retriable in the list", async () => {
    for (const a of await listActions(alice, "")) {
      assert.equal(a.can_be_canceled, false, a.uuid);
      assert.equal(a.can_be_retried, false, a.uuid);
    }
  });
});
