// Access tokens and scopes of the accounts API (spec "Authentication", CONTRACT §2, §11):
// POST /oauth/token, each scope allowing exactly its endpoints, tokens confined to their user,
// expiry, and what tokens and service keys may not do.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { basic, type Caller, call, createUser, type Harness, startHarness } from "../support/harness.ts";
import { RecordingOutbox, requestToken, withToken } from "./support.ts";

let h: Harness;
let alice: Caller;
let bob: Caller;

before(async () => {
  // The scope sweeps add and verify many addresses: the mail limits are not under test here.
  h = await startHarness({
    outbox: new RecordingOutbox(),
    env: {
      BERTH_EMAIL_VERIFY_INTERVAL_S: "0",
      BERTH_EMAIL_VERIFY_MAX_PER_USER: "1000",
      BERTH_EMAIL_MAX_UNVERIFIED: "1000",
    },
  });
  alice = await createUser(h, "alice");
  bob = await createUser(h, "bob");
});

after(async () => {
  await h.close();
});

const grant = (who: Caller, scope: string) => ({
  grant_type: "password",
  username: who.username,
  password: who.password,
  scope,
});

describe("POST /oauth/token", () => {
  test("the password grant answers an RFC 6749 token (JSON body)", async () => {
    const res = await requestToken(h, grant(alice, "profile_read email_read"));
    assert.equal(res.status, 200);
    assert.deepEqual(Object.keys(res.body).sort(), ["access_token", "expires_in", "scope", "token_type"]);
    assert.equal(res.body.token_type, "Bearer");
    assert.equal(res.body.expires_in, 3600, "one hour by default");
    assert.equal(res.body.scope, "profile_read email_read");
    assert.ok(res.body.access_token.length >= 40);
    assert.equal(res.headers["cache-control"], "no-store");
    const me = await call(
      h,
      { ...alice, auth: `Bearer ${res.body.access_token}` },
      "GET",
      "/api/v1.1/users/alice/",
    );
    assert.equal(me.status, 200);
    assert.equal(me.body.username, "alice");
  });

  test("a form body works too; duplicate scopes collapse", async () => {
    const res = await requestToken(h, grant(alice, "email_write  profile_read email_write"), { form: true });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.scope, "profile_read email_write");
  });

  test("the token is stored hashed: the database never holds it", async () => {
    const res = await requestToken(h, grant(alice, "profile_read"));
    const rows = await h.store.db.selectFrom("access_tokens").selectAll().execute();
    assert.ok(rows.length > 0);
    for (const r of rows) {
      assert.notEqual(r.token_hash, res.body.access_token);
      assert.match(r.token_hash, /^[0-9a-f]{64}$/);
    }
  });

  const refusals: [string, Record<string, string> | string, string][] = [
    [
      "a wrong password",
      { ...grant({ username: "alice", password: "nope" } as Caller, "profile_read") },
      "invalid_grant",
    ],
    [
      "an unknown user",
      { ...grant({ username: "zed", password: "zed-password" } as Caller, "profile_read") },
      "invalid_grant",
    ],
    [
      "another grant type",
      { grant_type: "client_credentials", scope: "profile_read" },
      "unsupported_grant_type",
    ],
    ["no grant type", { username: "alice", password: "x", scope: "profile_read" }, "invalid_request"],
    ["no password", { grant_type: "password", username: "alice", scope: "profile_read" }, "invalid_request"],
    [
      "an unknown scope",
      { grant_type: "password", username: "alice", password: "x", scope: "profile_read admin" },
      "invalid_scope",
    ],
    ["no scope", { grant_type: "password", username: "alice", password: "x" }, "invalid_scope"],
    ["a body that is neither JSON nor a form", '{"grant_type": ', "invalid_request"],
  ];
  for (const [what, params, error] of refusals) {
    test(`${what}: 400 ${error}`, async () => {
      const res =
        typeof params === "string"
          ? await (async () => {
              const r = await h.app.inject({
                method: "POST",
                url: "/oauth/token",
                headers: { "content-type": "application/json" },
                payload: params,
              });
              return { status: r.statusCode, body: r.json() };
            })()
          : await requestToken(h, params);
      assert.equal(res.status, 400);
      assert.equal(res.body.error, error);
      assert.equal(typeof res.body.error_description, "string");
    });
  }

  test("an empty body is invalid_request", async () => {
    const r = await h.app.inject({ method: "POST", url: "/oauth/token" });
    assert.equal(r.statusCode, 400);
    assert.equal(r.json().error, "invalid_request");
  });

  test("GET is 405", async () => {
    const r = await h.app.inject({
      method: "GET",
      url: "/oauth/token",
      headers: { authorization: alice.auth },
    });
    assert.equal(r.statusCode, 405);
  });
});

describe("scopes", () => {
  // Each endpoint of the spec's table (and the verification step), with a request that succeeds
  // when the scope is held. `prepare` runs with Basic credentials first.
  let n = 0;
  const endpoints: {
    name: string;
    scope: string;
    run(who: Caller): Promise<{ status: number }>;
    ok: number;
  }[] = [
    {
      name: "GET profile",
      scope: "profile_read",
      ok: 200,
      run: (w) => call(h, w, "GET", "/api/v1.1/users/alice/"),
    },
    {
      name: "PATCH profile",
      scope: "profile_write",
      ok: 200,
      run: (w) => call(h, w, "PATCH", "/api/v1.1/users/alice/", { location: `L${n++}` }),
    },
    {
      name: "GET emails",
      scope: "email_read",
      ok: 200,
      run: (w) => call(h, w, "GET", "/api/v1.1/users/alice/emails/"),
    },
    {
      name: "POST emails",
      scope: "email_write",
      ok: 201,
      run: (w) => call(h, w, "POST", "/api/v1.1/users/alice/emails/", { email: `post${n++}@alice.test` }),
    },
    {
      name: "DELETE emails",
      scope: "email_write",
      ok: 204,
      run: async (w) => {
        const email = `del${n++}@alice.test`;
        await call(h, alice, "POST", "/api/v1.1/users/alice/emails/", { email });
        return call(h, w, "DELETE", "/api/v1.1/users/alice/emails/", { email });
      },
    },
    {
      name: "PATCH emails (primary)",
      scope: "email_write",
      ok: 200,
      run: (w) =>
        call(h, w, "PATCH", "/api/v1.1/users/alice/emails/", { email: "alice@example.test", primary: true }),
    },
    {
      name: "POST emails/verify",
      scope: "email_write",
      ok: 200,
      run: async (w) => {
        const email = `ver${n++}@alice.test`;
        await call(h, alice, "POST", "/api/v1.1/users/alice/emails/", { email });
        return call(h, w, "POST", "/api/v1.1/users/alice/emails/verify/", { email });
      },
    },
  ];

  for (const scope of ["profile_read", "profile_write", "email_read", "email_write"]) {
    test(`a token with only ${scope} reaches exactly its endpoints`, async () => {
      const token = await withToken(h, alice, scope);
      for (const e of endpoints) {
        const res = (await e.run(token)) as {
          status: number;
          body: { code?: string };
          headers: Record<string, unknown>;
        };
        if (e.scope === scope) {
          assert.equal(res.status, e.ok, `${e.name} with ${scope}`);
        } else {
          assert.equal(res.status, 403, `${e.name} with ${scope}`);
          assert.equal(res.body.code, "insufficient_scope");
          assert.equal(
            res.headers["www-authenticate"],
            `Bearer error="insufficient_scope", scope="${e.scope}"`,
            e.name,
          );
        }
      }
    });
  }

  test("a token with every scope reaches every endpoint", async () => {
    const token = await withToken(h, alice, "profile_read profile_write email_read email_write");
    for (const e of endpoints) assert.equal((await e.run(token)).status, e.ok, e.name);
  });

  test("Basic with the password or an API key holds all four scopes", async () => {
    for (const who of [alice, { ...alice, auth: basic("alice", alice.password) }]) {
      for (const e of endpoints) assert.equal((await e.run(who)).status, e.ok, e.name);
    }
  });

  test("a refused scope changes nothing", async () => {
    const token = await withToken(h, alice, "profile_read");
    const before = (await call(h, alice, "GET", "/api/v1.1/users/alice/")).body;
    const res = await call(h, token, "PATCH", "/api/v1.1/users/alice/", { location: "Nowhere" });
    assert.equal(res.status, 403);
    assert.deepEqual((await call(h, alice, "GET", "/api/v1.1/users/alice/")).body, before);
  });
});

describe("tokens and accounts", () => {
  test("a token of user A is refused on user B with the 404 of a missing user", async () => {
    const token = await withToken(h, alice, "profile_read profile_write email_read email_write");
    const missing = (await call(h, token, "GET", "/api/v1.1/users/nobody/")).body;
    for (const [method, url, payload] of [
      ["GET", "/api/v1.1/users/bob/", undefined],
      ["PATCH", "/api/v1.1/users/bob/", { location: "Hacked" }],
      ["GET", "/api/v1.1/users/bob/emails/", undefined],
      ["POST", "/api/v1.1/users/bob/emails/", { email: "evil@alice.test" }],
      ["DELETE", "/api/v1.1/users/bob/emails/", { email: "bob@example.test" }],
    ] as const) {
      const res = await call(h, token, method, url, payload);
      assert.equal(res.status, 404, `${method} ${url}`);
      assert.deepEqual(res.body, missing);
    }
    const bobNow = await call(h, bob, "GET", "/api/v1.1/users/bob/");
    assert.equal(bobNow.body.location, "");
    assert.equal((await call(h, bob, "GET", "/api/v1.1/users/bob/emails/")).body.length, 1);
  });

  test("an admin's token reaches other users", async () => {
    const token = await withToken(h, h.admin, "profile_read");
    const res = await call(h, token, "GET", "/api/v1.1/users/bob/");
    assert.equal(res.status, 200);
  });

  test("tokens cannot use the Basic-only accounts routes (keys, organizations, users)", async () => {
    const token = await withToken(h, alice, "profile_read profile_write email_read email_write");
    for (const [method, url, payload] of [
      ["GET", "/api/v1.1/users/alice/apikeys/", undefined],
      ["POST", "/api/v1.1/users/alice/apikeys/", { label: "via token" }],
      ["POST", "/api/v1.1/orgs/", { name: "tokenorg" }],
    ] as const) {
      const res = await call(h, token, method, url, payload);
      assert.equal(res.status, 403, `${method} ${url}`);
      assert.equal(res.body.code, "insufficient_scope");
    }
    const keys = await call(h, alice, "GET", "/api/v1.1/users/alice/apikeys/");
    assert.ok(!keys.body.objects.some((k: { label: string }) => k.label === "via token"));
  });

  test("tokens are refused on the platform API and on /auth/", async () => {
    const token = await withToken(h, alice, "profile_read");
    assert.equal((await call(h, token, "GET", "/api/infra/v1/provider/")).status, 401);
    assert.equal((await call(h, token, "GET", "/auth/")).status, 401);
  });

  test("an unknown token is 401", async () => {
    const res = await call(h, { ...alice, auth: "Bearer not-a-token" }, "GET", "/api/v1.1/users/alice/");
    assert.equal(res.status, 401);
  });

  test("a service key (confined to a namespace) holds no account rights and cannot mint tokens", async () => {
    const user = (await h.store.identity.findUserByName("alice"))!;
    const { key } = await h.identity.createApiKey(user, { namespaceLimit: "alice", serviceUuid: "svc-test" });
    const svc = { ...alice, auth: basic("alice", key) };
    const res = await call(h, svc, "GET", "/api/v1.1/users/alice/");
    assert.equal(res.status, 403);
    assert.equal(res.body.code, "insufficient_scope");
    assert.equal((await call(h, svc, "POST", "/api/v1.1/users/alice/apikeys/", {})).status, 403);
    const minted = await requestToken(h, { ...grant(alice, "profile_read"), password: key });
    assert.equal(minted.status, 400);
    assert.equal(minted.body.error, "invalid_grant");
  });
});

describe("token expiry", () => {
  let short: Harness;
  let carol: Caller;

  before(async () => {
    short = await startHarness({ env: { BERTH_TOKEN_TTL_S: "1" } });
    carol = await createUser(short, "carol");
  });

  after(async () => {
    await short.close();
  });

  test("an expired token is refused with 401", async () => {
    const res = await requestToken(short, grant(carol, "profile_read"));
    assert.equal(res.body.expires_in, 1);
    const token = { ...carol, auth: `Bearer ${res.body.access_token}` };
    assert.equal((await call(short, token, "GET", "/api/v1.1/users/carol/")).status, 200);
    await new Promise((r) => setTimeout(r, 1100));
    const late = await call(short, token, "GET", "/api/v1.1/users/carol/");
    assert.equal(late.status, 401);
    assert.equal(late.headers["www-authenticate"], 'Basic realm="berth"');
  });
});
