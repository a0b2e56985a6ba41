// HTTP conventions every client relies on (CONTRACT §1, §2, §4, §5, §6): the list envelope and
// its links, path leniency, method and path errors, body handling, and authentication.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { basic, type Caller, call, createUser, type Harness, startHarness } from "../support/harness.ts";

const REST_TIME =
  /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} \+0000$/;

/** CONTRACT §6: every error body is `{error: <sentence>, code: <snake_case>}`. */
function assertErrorBody(body: unknown, code?: string): void {
  assert.equal(typeof body, "object", `error body should be a JSON object, got ${JSON.stringify(body)}`);
  assert.ok(body !== null && !Array.isArray(body));
  const b = body as { error?: unknown; code?: unknown };
  assert.equal(typeof b.error, "string", "error body has an `error` string");
  assert.ok((b.error as string).length > 0);
  assert.equal(typeof b.code, "string", "error body has a `code` string");
  assert.match(b.code as string, /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/, "code is snake_case");
  if (code !== undefined) assert.equal(b.code, code);
}

let h: Harness;
let alice: Caller;

before(async () => {
  h = await startHarness();
  alice = await createUser(h, "alice");
});

after(async () => {
  await h.close();
});

describe("list envelope", () => {
  test("a list answers {meta, objects} with limit, offset, total_count and links", async () => {
    const res = await call(h, alice, "GET", "/api/infra/v1/region/?limit=2");
    assert.equal(res.status, 200);
    assert.ok(!Array.isArray(res.body), "a bare array is never returned");
    assert.deepEqual(Object.keys(res.body).sort(), ["meta", "objects"]);
    const { meta, objects } = res.body;
    assert.equal(meta.limit, 2);
    assert.equal(meta.offset, 0);
    assert.equal(typeof meta.total_count, "number");
    assert.ok(meta.total_count > 2, "the catalogue has more than two regions");
    assert.equal(meta.previous, null);
    assert.equal(typeof meta.next, "string");
    const next = new URL(meta.next, "http://x");
    assert.equal(next.pathname, "/api/infra/v1/region/");
    assert.equal(next.searchParams.get("limit"), "2");
    assert.equal(next.searchParams.get("offset"), "2");
    assert.equal(objects.length, 2);
  });

  test("the default page is 25 objects from offset 0", async () => {
    const res = await call(h, alice, "GET", "/api/infra/v1/region/");
    assert.equal(res.status, 200);
    assert.equal(res.body.meta.limit, 25);
    assert.equal(res.body.meta.offset, 0);
    assert.equal(res.body.objects.length, Math.min(25, res.body.meta.total_count));
  });

  test("next and previous keep the filters of the request", async () => {
    const provider = "/api/infra/v1/provider/aws/";
    const first = await call(h, alice, "GET", `/api/infra/v1/region/?provider=${provider}&limit=2`);
    assert.equal(first.status, 200);
    const next = new URL(first.body.meta.next, "http://x");
    assert.equal(next.searchParams.get("provider"), provider);
    assert.equal(next.searchParams.get("offset"), "2");
    assert.equal(next.searchParams.get("limit"), "2");

    const second = await call(h, alice, "GET", first.body.meta.next);
    assert.equal(second.status, 200);
    assert.equal(second.body.meta.offset, 2);
    assert.equal(typeof second.body.meta.previous, "string");
    const previous = new URL(second.body.meta.previous, "http://x");
    assert.equal(previous.searchParams.get("provider"), provider);
    assert.equal(previous.searchParams.get("offset"), "0");
    for (const r of second.body.objects) assert.equal(r.provider, provider);
  });

  test("following next until null visits every filtered object exactly once", async () => {
    const provider = "/api/infra/v1/provider/aws/";
    const all = await call(h, alice, "GET", `/api/infra/v1/region/?provider=${provider}&limit=1000`);
    const expected = all.body.objects.map((r: { resource_uri: string }) => r.resource_uri).sort();
    assert.ok(expected.length > 2, "aws has several regions");

    const seen: string[] = [];
    let url: string | null = `/api/infra/v1/region/?provider=${provider}&limit=2`;
    let pages = 0;
    while (url !== null) {
      const page = await call(h, alice, "GET", url);
      assert.equal(page.status, 200);
      assert.equal(page.body.meta.total_count, expected.length);
      for (const r of page.body.objects) {
        assert.equal(r.provider, provider);
        seen.push(r.resource_uri);
      }
      url = page.body.meta.next;
      pages++;
      assert.ok(pages <= expected.length, "pagination terminates");
    }
    assert.equal(pages, Math.ceil(expected.length / 2));
    assert.deepEqual([...seen].sort(), expected);
    assert.equal(new Set(seen).size, seen.length, "no object is visited twice");
  });

  test("the last page has next null and an offset past the end gives no objects", async () => {
    const all = await call(h, alice, "GET", "/api/infra/v1/provider/");
    const total = all.body.meta.total_count as number;
    const last = await call(h, alice, "GET", `/api/infra/v1/provider/?limit=1&offset=${total - 1}`);
    assert.equal(last.body.meta.next, null);
    assert.equal(last.body.objects.length, 1);
    const beyond = await call(h, alice, "GET", `/api/infra/v1/provider/?offset=${total + 5}`);
    assert.equal(beyond.status, 200);
    assert.deepEqual(beyond.body.objects, []);
    assert.equal(beyond.body.meta.next, null);
  });

  for (const limit of ["0", "1001", "-1", "abc"]) {
    test(`limit=${limit} is refused with 400 naming limit`, async () => {
      const res = await call(h, alice, "GET", `/api/infra/v1/region/?limit=${limit}`);
      assert.equal(res.status, 400);
      assertErrorBody(res.body);
      assert.ok(Array.isArray(res.body.details), "400 carries details");
      assert.ok(
        res.body.details.some((d: { field: string }) => d.field === "limit"),
        `details name limit: ${JSON.stringify(res.body.details)}`,
      );
    });
  }

  test("limit=1 and limit=1000 are accepted", async () => {
    for (const limit of [1, 1000]) {
      const res = await call(h, alice, "GET", `/api/infra/v1/region/?limit=${limit}`);
      assert.equal(res.status, 200);
      assert.equal(res.body.meta.limit, limit);
    }
  });

  test("a negative offset is refused with 400 naming offset", async () => {
    const res = await call(h, alice, "GET", "/api/infra/v1/region/?offset=-1");
    assert.equal(res.status, 400);
    assertErrorBody(res.body);
    assert.ok(res.body.details.some((d: { field: string }) => d.field === "offset"));
  });

  test("unknown query keys are ignored", async () => {
    const plain = await call(h, alice, "GET", "/api/infra/v1/provider/");
    const res = await call(h, alice, "GET", "/api/infra/v1/provider/?whatever=1&format=json");
    assert.equal(res.status, 200);
    assert.ok(res.body.meta.total_count > 0);
    assert.deepEqual(res.body.objects, plain.body.objects);
  });
});

describe("paths", () => {
  test("the trailing slash is optional", async () => {
    const withSlash = await call(h, alice, "GET", "/api/infra/v1/provider/aws/");
    const without = await call(h, alice, "GET", "/api/infra/v1/provider/aws");
    assert.equal(withSlash.status, 200);
    assert.equal(without.status, 200);
    assert.deepEqual(without.body, withSlash.body);
    const list = await call(h, alice, "GET", "/api/infra/v1/provider");
    assert.equal(list.status, 200);
    assert.ok(Array.isArray(list.body.objects));
  });

  test("repeated slashes collapse and nothing redirects", async () => {
    const plain = await call(h, alice, "GET", "/api/infra/v1/provider/");
    const res = await call(h, alice, "GET", "//api//infra/v1//provider//");
    assert.equal(res.status, 200);
    assert.equal(res.headers.location, undefined);
    assert.deepEqual(res.body, plain.body);
    const item = await call(h, alice, "GET", "//api//infra//v1//provider//aws//");
    assert.equal(item.status, 200);
    assert.equal(item.body.resource_uri, "/api/infra/v1/provider/aws/");
  });

  test("links in the envelope are clean even when the request path had repeated slashes", async () => {
    const res = await call(h, alice, "GET", "//api//infra/v1//region?limit=1");
    assert.equal(res.status, 200);
    assert.ok(res.body.meta.next.startsWith("/api/infra/v1/region/?"), res.body.meta.next);
  });

  test("a method the path does not define is 405 with Allow and a JSON error", async () => {
    const res = await call(h, alice, "DELETE", "/api/infra/v1/provider/aws/");
    assert.equal(res.status, 405);
    assert.equal(res.headers.allow, "GET");
    assert.match(String(res.headers["content-type"]), /^application\/json/);
    assertErrorBody(res.body, "method_not_allowed");
  });

  test("every method a repository's path lacks is 405 with Allow, its name's slashes and all", async () => {
    // Issue 27: the route of a repository ends in `*` (names have slashes), and the methods no route
    // defines on it (OPTIONS, TRACE, PROPFIND, …) fell through to 404.
    for (const url of [
      "/api/repo/v1/repository/reg.example.com/team/app/",
      "/api/repo/v1/alice/repository/reg.example.com/app",
      "/api/repo/v1/repository/reg.example.com%2Fapp/",
    ]) {
      for (const method of [
        "OPTIONS",
        "TRACE",
        "PROPFIND",
        "SEARCH",
        "PURGE",
        "LOCK",
        "POST",
        "PUT",
      ] as const) {
        const res = await call(h, alice, method, url);
        assert.equal(res.status, 405, `${method} ${url}: ${res.raw}`);
        assert.equal(res.headers.allow, "GET, PATCH, DELETE", `${method} ${url}`);
        assertErrorBody(res.body, "method_not_allowed");
      }
    }
    // The collection keeps its own methods, and a path under no route stays 404.
    assert.equal((await call(h, alice, "OPTIONS", "/api/repo/v1/repository/")).headers.allow, "GET, POST");
    assert.equal((await call(h, alice, "OPTIONS", "/api/repo/v1/nothing/a/b/")).status, 404);
  });

  test("every documented path answers 405 with its Allow to a method it does not define", async () => {
    const doc = JSON.parse(
      fs.readFileSync(path.join(import.meta.dirname, "../../docs/openapi.json"), "utf8"),
    ) as {
      paths: Record<string, Record<string, unknown>>;
    };
    const order = ["GET", "POST", "PUT", "PATCH", "DELETE"];
    for (const [template, operations] of Object.entries(doc.paths)) {
      const url = template
        .replace("{namespace}", "alice")
        .replace("{*}", "reg.example.com/team/app/")
        .replace(/\{[^}]+\}/g, "x0");
      const allow = order.filter((m) => m.toLowerCase() in operations);
      const missing = order.find((m) => !allow.includes(m))!;
      for (const method of ["OPTIONS", missing] as const) {
        const res = await call(h, alice, method as "OPTIONS", url);
        assert.equal(res.status, 405, `${method} ${url}: ${res.raw}`);
        assert.equal(res.headers.allow, allow.join(", "), `${method} ${url}`);
      }
    }
  });

  test("an unknown path is 404 with a JSON error", async () => {
    for (const url of ["/api/infra/v1/nothing/", "/api/nothing/", "/nothing"]) {
      const res = await call(h, alice, "GET", url);
      assert.equal(res.status, 404, url);
      assert.match(String(res.headers["content-type"]), /^application\/json/);
      assertErrorBody(res.body, "not_found");
    }
  });
});

describe("request bodies", () => {
  test("a body over 1 MiB is refused with 413", async () => {
    const big = JSON.stringify({ name: "big", pad: "x".repeat(1024 * 1024) });
    const res = await h.app.inject({
      method: "POST",
      url: "/api/v1.1/orgs/",
      headers: { authorization: alice.auth, "content-type": "application/json" },
      payload: big,
    });
    assert.equal(res.statusCode, 413);
    assertErrorBody(res.json());
  });

  test("a body just under 1 MiB is not refused for its size", async () => {
    const body = JSON.stringify({ name: "justunder", pad: "x".repeat(1024 * 1024 - 100) });
    assert.ok(Buffer.byteLength(body) < 1024 * 1024);
    const res = await h.app.inject({
      method: "POST",
      url: "/api/v1.1/orgs/",
      headers: { authorization: alice.auth, "content-type": "application/json" },
      payload: body,
    });
    assert.notEqual(res.statusCode, 413);
    assert.equal(res.statusCode, 201);
  });

  test("invalid JSON is 400 invalid_json", async () => {
    for (const headers of [{ "content-type": "application/json" }, {}]) {
      const res = await h.app.inject({
        method: "POST",
        url: "/api/v1.1/orgs/",
        headers: { authorization: alice.auth, ...headers },
        payload: '{"name": "broken"',
      });
      assert.equal(res.statusCode, 400);
      assertErrorBody(res.json(), "invalid_json");
    }
  });

  test("a JSON body without Content-Type is parsed as JSON", async () => {
    const res = await h.app.inject({
      method: "POST",
      url: "/api/v1.1/orgs/",
      headers: { authorization: alice.auth },
      payload: Buffer.from(JSON.stringify({ name: "noctype" })),
    });
    assert.equal(res.headers["content-type"]?.toString().startsWith("application/json"), true);
    assert.equal(res.statusCode, 201, res.body);
    assert.equal(res.json().name, "noctype");
  });

  test("a JSON body sent as text/plain is parsed as JSON", async () => {
    const res = await h.app.inject({
      method: "POST",
      url: "/api/v1.1/orgs/",
      headers: { authorization: alice.auth, "content-type": "text/plain" },
      payload: JSON.stringify({ name: "textplain" }),
    });
    assert.equal(res.statusCode, 201, res.body);
    assert.equal(res.json().name, "textplain");
  });

  test("a body on DELETE is ignored, even when it is not JSON", async () => {
    const created = await call(h, alice, "POST", "/api/v1.1/users/alice/apikeys/", { label: "to delete" });
    assert.equal(created.status, 201);
    const res = await h.app.inject({
      method: "DELETE",
      url: `/api/v1.1/users/alice/apikeys/${created.body.id}/`,
      headers: { authorization: alice.auth, "content-type": "application/json" },
      payload: "{this is not json",
    });
    assert.equal(res.statusCode, 204);
    assert.equal(res.body, "");
  });

  test("a body on GET is ignored", async () => {
    const res = await h.app.inject({
      method: "GET",
      url: "/api/infra/v1/provider/",
      headers: { authorization: alice.auth, "content-type": "application/json" },
      payload: "{not json",
    });
    assert.equal(res.statusCode, 200);
  });
});

describe("authentication", () => {
  const cases: [string, () => string | undefined][] = [
    ["no credentials", () => undefined],
    ["a wrong API key", () => basic("alice", "not-the-key")],
    ["the password in place of the API key", () => basic("alice", alice.password)],
    ["another user's API key", () => basic("alice", h.admin.key)],
    ["a malformed Authorization header", () => "Basic !!!"],
    ["a bearer token", () => "Bearer whatever"],
  ];
  for (const [what, auth] of cases) {
    test(`the platform API answers 401 to ${what}`, async () => {
      const header = auth();
      const res = await h.app.inject({
        method: "GET",
        url: "/api/infra/v1/provider/",
        headers: header === undefined ? {} : { authorization: header },
      });
      assert.equal(res.statusCode, 401);
      assert.equal(res.headers["www-authenticate"], 'Basic realm="berth"');
      const body = res.json();
      assert.equal(typeof body.error, "string");
      assertErrorBody(body);
    });
  }

  test("the API key works on the platform API", async () => {
    const res = await call(h, alice, "GET", "/api/infra/v1/provider/");
    assert.equal(res.status, 200);
  });

  test("the password works on the accounts routes", async () => {
    const withPassword = { ...alice, auth: basic("alice", alice.password) };
    const res = await call(h, withPassword, "GET", "/api/v1.1/users/alice/apikeys/");
    assert.equal(res.status, 200);
    const org = await call(h, withPassword, "POST", "/api/v1.1/orgs/", { name: "viapassword" });
    assert.equal(org.status, 201);
  });

  test("a wrong password is 401 on the accounts routes", async () => {
    const res = await call(
      h,
      { ...alice, auth: basic("alice", "wrong-password") },
      "GET",
      "/api/v1.1/users/alice/apikeys/",
    );
    assert.equal(res.status, 401);
    assert.equal(res.headers["www-authenticate"], 'Basic realm="berth"');
    assertErrorBody(res.body);
  });

  test("GET /auth/ answers 401 without credentials", async () => {
    const res = await call(h, undefined, "GET", "/auth/");
    assert.equal(res.status, 401);
    assert.equal(res.headers["www-authenticate"], 'Basic realm="berth"');
    assertErrorBody(res.body);
  });
});

describe("representation", () => {
  test("an action's start_date and end_date use the REST timestamp form", async () => {
    const refused = await call(h, alice, "POST", "/api/infra/v1/provider/");
    const uri = refused.headers["x-platform-action-uri"];
    assert.equal(typeof uri, "string");
    const res = await call(h, alice, "GET", String(uri));
    assert.equal(res.status, 200);
    assert.match(res.body.start_date, REST_TIME);
    assert.match(res.body.end_date, REST_TIME);
    const parsed = Date.parse(res.body.start_date);
    assert.ok(Math.abs(parsed - Date.now()) < 60_000, "the timestamp is now, in UTC");
  });

  test("every error body is {error, code}", async () => {
    const responses = [
      await call(h, alice, "GET", "/api/infra/v1/provider/nope/"),
      await call(h, alice, "PATCH", "/api/infra/v1/region/"),
      await call(h, alice, "GET", "/api/audit/v1/action/?state=Nope"),
      await call(h, alice, "POST", "/api/v1.1/users/", {
        username: "eve",
        email: "eve@example.test",
        password: "eve-password",
      }),
      await call(h, alice, "POST", "/api/v1.1/orgs/", { name: "alice" }),
      await call(h, undefined, "POST", "/api/v1.1/orgs/", { name: "anon" }),
    ];
    assert.deepEqual(
      responses.map((r) => r.status),
      [404, 405, 400, 403, 409, 401],
    );
    for (const r of responses) assertErrorBody(r.body);
  });

  test("a 2xx answer other than 204 has a JSON object body", async () => {
    for (const url of ["/api/infra/v1/provider/", "/api/infra/v1/provider/local/", "/auth/"]) {
      const res = await call(h, alice, "GET", url);
      assert.equal(res.status, 200);
      assert.match(String(res.headers["content-type"]), /^application\/json/);
      assert.equal(typeof res.body, "object");
      assert.ok(res.body !== null && !Array.isArray(res.body));
    }
  });
});
