// Accounts API endpoints and rules (spec accounts-api.md "Endpoints", CONTRACT §11): profiles and
// email addresses, with Basic credentials (password or API key).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { basic, type Caller, call, createUser, type Harness, startHarness } from "../support/harness.ts";
import { RecordingOutbox } from "./support.ts";

let h: Harness;
let alice: Caller;
let bob: Caller;
let alicePw: Caller;
const outbox = new RecordingOutbox();

before(async () => {
  h = await startHarness({ outbox, env: { BERTH_PUBLIC_URL: "https://berth.example.test:8443" } });
  alice = await createUser(h, "alice");
  bob = await createUser(h, "bob");
  alicePw = { ...alice, auth: basic("alice", alice.password) };
});

after(async () => {
  await h.close();
});

const ISO_MICROS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

describe("GET /api/v1.1/users/<username>/", () => {
  test("answers the whole profile, with an absolute url and date_joined in microseconds", async () => {
    for (const who of [alice, alicePw]) {
      const res = await call(h, who, "GET", "/api/v1.1/users/alice/");
      assert.equal(res.status, 200);
      assert.match(String(res.headers["content-type"]), /^application\/json/);
      const p = res.body;
      assert.deepEqual(Object.keys(p).sort(), [
        "avatar_url",
        "company",
        "date_joined",
        "email",
        "full_name",
        "id",
        "is_active",
        "location",
        "profile_url",
        "type",
        "url",
        "username",
      ]);
      assert.equal(typeof p.id, "number");
      assert.equal(p.username, "alice");
      assert.equal(p.url, "https://berth.example.test:8443/api/v1.1/users/alice/");
      assert.match(p.date_joined, ISO_MICROS);
      assert.equal(p.type, "User");
      assert.equal(p.email, "alice@example.test");
      assert.equal(p.is_active, true);
      for (const f of ["full_name", "location", "company", "profile_url"])
        assert.equal(typeof p[f], "string");
      assert.ok(p.avatar_url.startsWith("https://berth.example.test:8443/"), p.avatar_url);
    }
  });

  test("the avatar_url serves an image to anyone", async () => {
    const p = (await call(h, alice, "GET", "/api/v1.1/users/alice/")).body;
    const res = await h.app.inject({ method: "GET", url: new URL(p.avatar_url).pathname });
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers["content-type"], "image/svg+xml");
    assert.match(res.body, /^<svg .*>A<\/text><\/svg>$/);
  });

  test("the path works without its trailing slash", async () => {
    const res = await call(h, alice, "GET", "/api/v1.1/users/alice");
    assert.equal(res.status, 200);
  });

  test("another user's profile is 404, with the same body as a missing user", async () => {
    const other = await call(h, alice, "GET", "/api/v1.1/users/bob/");
    const missing = await call(h, alice, "GET", "/api/v1.1/users/nobody/");
    assert.equal(other.status, 404);
    assert.equal(missing.status, 404);
    assert.deepEqual(other.body, missing.body);
    assert.equal(other.body.code, "not_found");
  });

  test("an admin reads any profile", async () => {
    const res = await call(h, h.admin, "GET", "/api/v1.1/users/bob/");
    assert.equal(res.status, 200);
    assert.equal(res.body.username, "bob");
  });

  test("without credentials: 401", async () => {
    const res = await call(h, undefined, "GET", "/api/v1.1/users/alice/");
    assert.equal(res.status, 401);
    assert.equal(res.headers["www-authenticate"], 'Basic realm="berth"');
  });
});

describe("PATCH /api/v1.1/users/<username>/", () => {
  test("changes location, profile_url and company and answers the full profile", async () => {
    const res = await call(h, alice, "PATCH", "/api/v1.1/users/alice/", {
      location: "Lisbon",
      profile_url: "https://alice.example.test/",
      company: "Acme",
    });
    assert.equal(res.status, 200);
    assert.match(String(res.headers["content-type"]), /^application\/json/);
    assert.equal(res.body.location, "Lisbon");
    assert.equal(res.body.profile_url, "https://alice.example.test/");
    assert.equal(res.body.company, "Acme");
    assert.equal(res.body.username, "alice");
    assert.match(res.body.date_joined, ISO_MICROS);
    const again = await call(h, alice, "GET", "/api/v1.1/users/alice/");
    assert.equal(again.body.location, "Lisbon");
    assert.equal(again.body.company, "Acme");
  });

  test("a partial patch leaves the other fields alone", async () => {
    const res = await call(h, alice, "PATCH", "/api/v1.1/users/alice/", { company: "Acme Two" });
    assert.equal(res.status, 200);
    assert.equal(res.body.company, "Acme Two");
    assert.equal(res.body.location, "Lisbon");
  });

  test("email or username in the body: 400 naming them, and nothing changes", async () => {
    const before = (await call(h, alice, "GET", "/api/v1.1/users/alice/")).body;
    const res = await call(h, alice, "PATCH", "/api/v1.1/users/alice/", {
      location: "Porto",
      email: "evil@example.test",
      username: "mallory",
    });
    assert.equal(res.status, 400);
    assert.equal(res.body.code, "invalid_field");
    assert.match(res.body.error, /email/);
    assert.match(res.body.error, /username/);
    assert.deepEqual(res.body.details.map((d: { field: string }) => d.field).sort(), ["email", "username"]);
    const afterRes = await call(h, alice, "GET", "/api/v1.1/users/alice/");
    assert.deepEqual(afterRes.body, before, "nothing changed, not even location");
    const byOldName = await call(h, alice, "GET", "/api/v1.1/users/mallory/");
    assert.equal(byOldName.status, 404);
  });

  for (const field of ["full_name", "is_active", "id", "type", "date_joined", "avatar_url", "url"]) {
    test(`${field} cannot be patched`, async () => {
      const res = await call(h, alice, "PATCH", "/api/v1.1/users/alice/", { [field]: "x" });
      assert.equal(res.status, 400);
      assert.equal(res.body.details[0].field, field);
    });
  }

  test("profile_url must be an http(s) URL; empty clears it", async () => {
    for (const bad of ["javascript:alert(1)", "ftp://example.test/", "not a url", "mailto:a@b.c"]) {
      const res = await call(h, alice, "PATCH", "/api/v1.1/users/alice/", { profile_url: bad });
      assert.equal(res.status, 400, bad);
      assert.equal(res.body.details[0].field, "profile_url");
    }
    assert.equal(
      (await call(h, alice, "GET", "/api/v1.1/users/alice/")).body.profile_url,
      "https://alice.example.test/",
    );
    const http = await call(h, alice, "PATCH", "/api/v1.1/users/alice/", {
      profile_url: "http://alice.example.test/x",
    });
    assert.equal(http.status, 200);
    const cleared = await call(h, alice, "PATCH", "/api/v1.1/users/alice/", { profile_url: "" });
    assert.equal(cleared.status, 200);
    assert.equal(cleared.body.profile_url, "");
  });

  test("a body that is not an object, or a field of the wrong type, is 400", async () => {
    assert.equal((await call(h, alice, "PATCH", "/api/v1.1/users/alice/", [1, 2])).status, 400);
    assert.equal((await call(h, alice, "PATCH", "/api/v1.1/users/alice/", { location: {} })).status, 400);
    assert.equal(
      (await call(h, alice, "PATCH", "/api/v1.1/users/alice/", { location: "x".repeat(300) })).status,
      400,
    );
  });

  test("another user's profile cannot be patched (404) and is unchanged", async () => {
    const res = await call(h, alice, "PATCH", "/api/v1.1/users/bob/", { location: "Mars" });
    assert.equal(res.status, 404);
    const bobNow = await call(h, bob, "GET", "/api/v1.1/users/bob/");
    assert.equal(bobNow.body.location, "");
  });

  test("an admin patches any profile", async () => {
    const res = await call(h, h.admin, "PATCH", "/api/v1.1/users/bob/", { company: "Bob & Co" });
    assert.equal(res.status, 200);
    assert.equal(res.body.company, "Bob & Co");
  });

  test("methods the profile does not define are 405", async () => {
    const res = await call(h, alice, "DELETE", "/api/v1.1/users/alice/");
    assert.equal(res.status, 405);
    assert.equal(res.headers.allow, "GET, PATCH");
  });
});

describe("email addresses", () => {
  test("GET lists the addresses as a bare JSON array; the creation address is verified and primary", async () => {
    const res = await call(h, alice, "GET", "/api/v1.1/users/alice/emails/");
    assert.equal(res.status, 200);
    assert.match(String(res.headers["content-type"]), /^application\/json/);
    assert.ok(Array.isArray(res.body));
    assert.deepEqual(res.body, [{ email: "alice@example.test", verified: true, primary: true }]);
  });

  test("POST adds an unverified, non-primary address (201) and sends no message", async () => {
    const sent = outbox.messages.length;
    const res = await call(h, alice, "POST", "/api/v1.1/users/alice/emails/", { email: "alice@work.test" });
    assert.equal(res.status, 201);
    assert.match(String(res.headers["content-type"]), /^application\/json/);
    assert.deepEqual(res.body, { email: "alice@work.test", verified: false, primary: false });
    assert.equal(outbox.messages.length, sent, "no confirmation message on add");
    const list = await call(h, alice, "GET", "/api/v1.1/users/alice/emails/");
    assert.deepEqual(list.body, [
      { email: "alice@example.test", verified: true, primary: true },
      { email: "alice@work.test", verified: false, primary: false },
    ]);
  });

  test("adding an address the user already has is 409", async () => {
    for (const email of ["alice@work.test", "alice@WORK.test", " alice@work.test ", "alice@example.test"]) {
      const res = await call(h, alice, "POST", "/api/v1.1/users/alice/emails/", { email });
      assert.equal(res.status, 409, email);
      assert.equal(res.body.code, "email_exists");
    }
  });

  test("something that is not an address is 400", async () => {
    for (const email of [
      "",
      "alice",
      "alice@",
      "@work.test",
      "a b@work.test",
      "a@b",
      "a<b>@x.test",
      "a@x.test\r\nBcc: y",
    ]) {
      const res = await call(h, alice, "POST", "/api/v1.1/users/alice/emails/", { email });
      assert.equal(res.status, 400, email);
      assert.equal(typeof res.body.code, "string");
    }
    const missing = await call(h, alice, "POST", "/api/v1.1/users/alice/emails/", {});
    assert.equal(missing.status, 400);
    assert.equal(missing.body.details[0].field, "email");
  });

  test("DELETE with a JSON body {email} removes a non-primary address: 204, empty, Content-Length 0", async () => {
    await call(h, alice, "POST", "/api/v1.1/users/alice/emails/", { email: "old@alice.test" });
    const res = await call(h, alice, "DELETE", "/api/v1.1/users/alice/emails/", { email: "old@alice.test" });
    assert.equal(res.status, 204);
    assert.equal(res.raw, "");
    assert.equal(res.headers["content-length"], "0");
    const list = await call(h, alice, "GET", "/api/v1.1/users/alice/emails/");
    assert.ok(!list.body.some((e: { email: string }) => e.email === "old@alice.test"));
  });

  test("DELETE reads a JSON body sent without Content-Type, and ?email= too", async () => {
    await call(h, alice, "POST", "/api/v1.1/users/alice/emails/", { email: "raw@alice.test" });
    const raw = await h.app.inject({
      method: "DELETE",
      url: "//api/v1.1/users/alice/emails",
      headers: { authorization: alice.auth },
      payload: Buffer.from(JSON.stringify({ email: "raw@alice.test" })),
    });
    assert.equal(raw.statusCode, 204, raw.body);
    await call(h, alice, "POST", "/api/v1.1/users/alice/emails/", { email: "q@alice.test" });
    const q = await call(h, alice, "DELETE", "/api/v1.1/users/alice/emails/?email=q%40alice.test");
    assert.equal(q.status, 204);
  });

  test("DELETE without an address is 400; with invalid JSON 400 invalid_json", async () => {
    const none = await call(h, alice, "DELETE", "/api/v1.1/users/alice/emails/");
    assert.equal(none.status, 400);
    assert.equal(none.body.details[0].field, "email");
    const broken = await h.app.inject({
      method: "DELETE",
      url: "/api/v1.1/users/alice/emails/",
      headers: { authorization: alice.auth, "content-type": "application/json" },
      payload: '{"email": ',
    });
    assert.equal(broken.statusCode, 400);
    assert.equal(broken.json().code, "invalid_json");
  });

  test("the primary address cannot be deleted: 409 primary_email, and the list is unchanged", async () => {
    const before = (await call(h, alice, "GET", "/api/v1.1/users/alice/emails/")).body;
    const res = await call(h, alice, "DELETE", "/api/v1.1/users/alice/emails/", {
      email: "alice@example.test",
    });
    assert.equal(res.status, 409);
    assert.equal(res.body.code, "primary_email");
    assert.equal(typeof res.body.error, "string");
    const afterList = (await call(h, alice, "GET", "/api/v1.1/users/alice/emails/")).body;
    assert.deepEqual(afterList, before);
    assert.equal((await call(h, alice, "GET", "/api/v1.1/users/alice/")).body.email, "alice@example.test");
  });

  test("deleting an address the user does not have is 404", async () => {
    const res = await call(h, alice, "DELETE", "/api/v1.1/users/alice/emails/", { email: "nope@alice.test" });
    assert.equal(res.status, 404);
    const bobs = await call(h, alice, "DELETE", "/api/v1.1/users/alice/emails/", {
      email: "bob@example.test",
    });
    assert.equal(bobs.status, 404);
  });

  test("another user's addresses: 404 for every method, nothing changes", async () => {
    const bobBefore = (await call(h, bob, "GET", "/api/v1.1/users/bob/emails/")).body;
    const missingBody = (await call(h, alice, "GET", "/api/v1.1/users/nobody/emails/")).body;
    for (const [method, payload] of [
      ["GET", undefined],
      ["POST", { email: "x@bob.test" }],
      ["DELETE", { email: "bob@example.test" }],
      ["PATCH", { email: "bob@example.test", primary: true }],
    ] as const) {
      const res = await call(h, alice, method, "/api/v1.1/users/bob/emails/", payload);
      assert.equal(res.status, 404, method);
      assert.deepEqual(res.body, missingBody);
    }
    const verify = await call(h, alice, "POST", "/api/v1.1/users/bob/emails/verify/", {
      email: "bob@example.test",
    });
    assert.equal(verify.status, 404);
    assert.deepEqual((await call(h, bob, "GET", "/api/v1.1/users/bob/emails/")).body, bobBefore);
  });

  test("an admin manages any user's addresses", async () => {
    const add = await call(h, h.admin, "POST", "/api/v1.1/users/bob/emails/", { email: "bob@admin.test" });
    assert.equal(add.status, 201);
    const list = await call(h, h.admin, "GET", "/api/v1.1/users/bob/emails/");
    assert.equal(list.body.length, 2);
    const del = await call(h, h.admin, "DELETE", "/api/v1.1/users/bob/emails/", { email: "bob@admin.test" });
    assert.equal(del.status, 204);
  });

  test("an unverified address cannot become primary (409), a missing one is 404", async () => {
    const res = await call(h, alice, "PATCH", "/api/v1.1/users/alice/emails/", {
      email: "alice@work.test",
      primary: true,
    });
    assert.equal(res.status, 409);
    assert.equal(res.body.code, "email_unverified");
    assert.equal((await call(h, alice, "GET", "/api/v1.1/users/alice/")).body.email, "alice@example.test");
    const missing = await call(h, alice, "PATCH", "/api/v1.1/users/alice/emails/", {
      email: "none@alice.test",
      primary: true,
    });
    assert.equal(missing.status, 404);
    const falsy = await call(h, alice, "PATCH", "/api/v1.1/users/alice/emails/", {
      email: "alice@example.test",
      primary: false,
    });
    assert.equal(falsy.status, 400);
    const extra = await call(h, alice, "PATCH", "/api/v1.1/users/alice/emails/", {
      email: "alice@work.test",
      verified: true,
      primary: true,
    });
    assert.equal(extra.status, 400, "verified cannot be set by the client");
  });

  test("making the current primary primary again is a harmless 200", async () => {
    const res = await call(h, alice, "PATCH", "/api/v1.1/users/alice/emails/", {
      email: "alice@example.test",
      primary: true,
    });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { email: "alice@example.test", verified: true, primary: true });
  });
});
