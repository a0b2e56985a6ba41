// Email verification and the primary address (CONTRACT §11): verify issues a one-time token
// through the outbox, confirm marks the address verified, and a verified address can become
// primary, which the profile's email follows.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { LogOutbox } from "../../src/accounts/outbox.ts";
import { type Caller, call, createUser, type Harness, startHarness } from "../support/harness.ts";
import { RecordingOutbox, tokenInText, withToken } from "./support.ts";

let h: Harness;
let alice: Caller;
let bob: Caller;
const outbox = new RecordingOutbox();

before(async () => {
  h = await startHarness({ outbox, env: { BERTH_EMAIL_VERIFY_INTERVAL_S: "30" } });
  alice = await createUser(h, "alice");
  bob = await createUser(h, "bob");
});

after(async () => {
  await h.close();
});

const confirm = (token: string) => call(h, undefined, "POST", "/api/v1.1/emails/confirm/", { token });

describe("verify → confirm → make primary", () => {
  test("the whole flow, with a token limited to email scopes", async () => {
    const token = await withToken(h, alice, "email_read email_write");
    const add = await call(h, token, "POST", "/api/v1.1/users/alice/emails/", { email: "alice@new.test" });
    assert.equal(add.status, 201);

    const verify = await call(h, token, "POST", "/api/v1.1/users/alice/emails/verify/", {
      email: "alice@new.test",
    });
    assert.equal(verify.status, 200);
    assert.deepEqual(verify.body, { email: "alice@new.test", verified: false, primary: false });
    const message = outbox.messages.at(-1)!;
    assert.equal(message.to, "alice@new.test");
    assert.match(message.subject, /confirm/i);
    assert.match(message.text, /\/api\/v1\.1\/emails\/confirm\//);

    const confirmed = await confirm(outbox.tokenFor("alice@new.test"));
    assert.equal(confirmed.status, 200);
    assert.deepEqual(confirmed.body, { email: "alice@new.test", verified: true, primary: false });

    const primary = await call(h, token, "PATCH", "/api/v1.1/users/alice/emails/", {
      email: "alice@new.test",
      primary: true,
    });
    assert.equal(primary.status, 200);
    assert.deepEqual(primary.body, { email: "alice@new.test", verified: true, primary: true });

    const list = await call(h, token, "GET", "/api/v1.1/users/alice/emails/");
    assert.deepEqual(list.body, [
      { email: "alice@new.test", verified: true, primary: true },
      { email: "alice@example.test", verified: true, primary: false },
    ]);
    const profile = await call(h, alice, "GET", "/api/v1.1/users/alice/");
    assert.equal(profile.body.email, "alice@new.test");

    // The old primary is an ordinary address now: it can be deleted; the new one cannot.
    const delOld = await call(h, token, "DELETE", "/api/v1.1/users/alice/emails/", {
      email: "alice@example.test",
    });
    assert.equal(delOld.status, 204);
    const delNew = await call(h, token, "DELETE", "/api/v1.1/users/alice/emails/", {
      email: "alice@new.test",
    });
    assert.equal(delNew.status, 409);
    assert.equal(delNew.body.code, "primary_email");
  });

  test("a confirmation token works once", async () => {
    await call(h, alice, "POST", "/api/v1.1/users/alice/emails/", { email: "once@alice.test" });
    await call(h, alice, "POST", "/api/v1.1/users/alice/emails/verify/", { email: "once@alice.test" });
    const t = outbox.tokenFor("once@alice.test");
    assert.equal((await confirm(t)).status, 200);
    const again = await confirm(t);
    assert.equal(again.status, 400);
    assert.equal(again.body.code, "invalid_token");
  });

  test("an unknown token is 400; a missing one 400", async () => {
    const res = await confirm("x".repeat(43));
    assert.equal(res.status, 400);
    assert.equal(res.body.code, "invalid_token");
    const none = await call(h, undefined, "POST", "/api/v1.1/emails/confirm/", {});
    assert.equal(none.status, 400);
  });

  test("verifying an address already verified is 409; one the user lacks is 404", async () => {
    const done = await call(h, alice, "POST", "/api/v1.1/users/alice/emails/verify/", {
      email: "once@alice.test",
    });
    assert.equal(done.status, 409);
    assert.equal(done.body.code, "already_verified");
    const lacking = await call(h, alice, "POST", "/api/v1.1/users/alice/emails/verify/", {
      email: "bob@example.test",
    });
    assert.equal(lacking.status, 404);
  });

  test("a second message to the same address within the interval is 429 with Retry-After", async () => {
    await call(h, bob, "POST", "/api/v1.1/users/bob/emails/", { email: "bob@flood.test" });
    const first = await call(h, bob, "POST", "/api/v1.1/users/bob/emails/verify/", {
      email: "bob@flood.test",
    });
    assert.equal(first.status, 200);
    const sent = outbox.messages.length;
    const second = await call(h, bob, "POST", "/api/v1.1/users/bob/emails/verify/", {
      email: "bob@flood.test",
    });
    assert.equal(second.status, 429);
    assert.equal(second.body.code, "rate_limited");
    const wait = Number(second.headers["retry-after"]);
    assert.ok(wait > 0 && wait <= 30, String(wait));
    assert.equal(outbox.messages.length, sent, "no second message");
  });

  test("deleting an address voids its pending token", async () => {
    await call(h, bob, "POST", "/api/v1.1/users/bob/emails/", { email: "bob@gone.test" });
    await call(h, bob, "POST", "/api/v1.1/users/bob/emails/verify/", { email: "bob@gone.test" });
    const t = outbox.tokenFor("bob@gone.test");
    await call(h, bob, "DELETE", "/api/v1.1/users/bob/emails/", { email: "bob@gone.test" });
    await call(h, bob, "POST", "/api/v1.1/users/bob/emails/", { email: "bob@gone.test" });
    assert.equal((await confirm(t)).status, 400);
    const list = (await call(h, bob, "GET", "/api/v1.1/users/bob/emails/")).body;
    assert.deepEqual(
      list.find((e: { email: string }) => e.email === "bob@gone.test"),
      { email: "bob@gone.test", verified: false, primary: false },
    );
  });
});

describe("token lifetimes and reissue", () => {
  let quick: Harness;
  let carol: Caller;
  const box = new RecordingOutbox();

  before(async () => {
    quick = await startHarness({
      outbox: box,
      env: { BERTH_EMAIL_TOKEN_TTL_S: "1", BERTH_EMAIL_VERIFY_INTERVAL_S: "0" },
    });
    carol = await createUser(quick, "carol");
    await call(quick, carol, "POST", "/api/v1.1/users/carol/emails/", { email: "carol@late.test" });
  });

  after(async () => {
    await quick.close();
  });

  test("a new token replaces the previous one", async () => {
    await call(quick, carol, "POST", "/api/v1.1/users/carol/emails/verify/", { email: "carol@late.test" });
    const first = box.tokenFor("carol@late.test");
    await call(quick, carol, "POST", "/api/v1.1/users/carol/emails/verify/", { email: "carol@late.test" });
    const second = box.tokenFor("carol@late.test");
    assert.notEqual(first, second);
    const old = await call(quick, undefined, "POST", "/api/v1.1/emails/confirm/", { token: first });
    assert.equal(old.status, 400);
  });

  test("an expired confirmation token is refused and the address stays unverified", async () => {
    await call(quick, carol, "POST", "/api/v1.1/users/carol/emails/verify/", { email: "carol@late.test" });
    const t = box.tokenFor("carol@late.test");
    await new Promise((r) => setTimeout(r, 1100));
    const res = await call(quick, undefined, "POST", "/api/v1.1/emails/confirm/", { token: t });
    assert.equal(res.status, 400);
    assert.equal(res.body.code, "invalid_token");
    const list = (await call(quick, carol, "GET", "/api/v1.1/users/carol/emails/")).body;
    assert.equal(list.find((e: { email: string }) => e.email === "carol@late.test").verified, false);
  });
});

describe("without a mail server", () => {
  test("the log outbox writes the message, token included, to the server log", async () => {
    const lines: string[] = [];
    const log = new LogOutbox((line) => lines.push(line));
    await log.send({
      to: "x@y.test",
      subject: "Confirm your email address",
      text: "Confirmation token: abc",
    });
    assert.equal(lines.length, 1);
    assert.match(lines[0]!, /x@y\.test/);
    assert.equal(tokenInText(lines[0]!), "abc");
  });
});
