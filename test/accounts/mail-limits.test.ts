// Confirmation mail cannot be sent to third parties in bulk (issue 26, item 6: one user had 20
// messages sent to 20 addresses in a row): per user and per receiving mailbox, at most so many an
// hour (429 with Retry-After and a JSON body), and a user holds a bounded number of unverified
// addresses (403), also under parallel requests. Defaults: 5 per user, 3 per mailbox, 5 unverified.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Caller, call, createUser, type Harness, startHarness } from "../support/harness.ts";
import { RecordingOutbox } from "./support.ts";

let h: Harness;
let offsetMs = 0;
const outbox = new RecordingOutbox();

before(async () => {
  h = await startHarness({ outbox, clock: { now: () => Date.now() + offsetMs } });
});
after(() => h.close());

const askers: Caller[] = [];
const emails = (who: Caller) => `/api/v1.1/users/${who.username}/emails/`;

async function addAndVerify(who: Caller, email: string) {
  const added = await call(h, who, "POST", emails(who), { email });
  assert.equal(added.status, 201, added.raw);
  return call(h, who, "POST", `${emails(who)}verify/`, { email });
}

function assertLimited(res: Awaited<ReturnType<typeof call>>, why: RegExp) {
  assert.equal(res.status, 429, res.raw);
  assert.equal(res.body.code, "rate_limited");
  assert.match(res.body.error, why);
  assert.equal(res.body.details?.[0]?.field, "email");
  const wait = Number(res.headers["retry-after"]);
  assert.ok(wait > 0 && wait <= 3600, `Retry-After ${res.headers["retry-after"]}`);
  assert.match(String(res.headers["content-type"]), /application\/json/);
}

describe("confirmation mail limits", () => {
  test("20 addresses in a row: 5 messages an hour per user, then 429 with Retry-After", async () => {
    const mallory = await createUser(h, "mallory");
    const sent = outbox.messages.length;
    const answers: number[] = [];
    for (let i = 0; i < 20; i++) {
      const email = `third-party-${i}@victims.test`;
      const res = await addAndVerify(mallory, email);
      answers.push(res.status);
      if (i >= 5)
        assertLimited(res, /mallory has asked for the most confirmation messages allowed \(5 per hour\)/);
      // Deleting the address frees its place among the unverified ones: only the mail limit holds.
      assert.equal((await call(h, mallory, "DELETE", emails(mallory), { email })).status, 204);
    }
    assert.deepEqual(answers, [...Array(5).fill(200), ...Array(15).fill(429)]);
    assert.equal(outbox.messages.length - sent, 5, "5 messages went out, not 20");

    // An hour later the user may send again.
    offsetMs += 3600_000;
    const later = await addAndVerify(mallory, "later@victims.test");
    assert.equal(later.status, 200, later.raw);
  });

  test("one mailbox receives at most 3 an hour, whichever users ask and however they spell it", async () => {
    const spellings = [
      "victim@inbox.test",
      "Victim@INBOX.test",
      "victim+berth@inbox.test",
      "victim+2@inbox.test",
    ];
    const sent = outbox.messages.length;
    const answers: number[] = [];
    for (const [i, email] of spellings.entries()) {
      const who = await createUser(h, `asker${i}`);
      askers.push(who);
      const res = await addAndVerify(who, email);
      answers.push(res.status);
      if (i === 3)
        assertLimited(res, /victim\+2@inbox\.test has been sent the most confirmation messages allowed/);
    }
    assert.deepEqual(answers, [200, 200, 200, 429]);
    assert.equal(outbox.messages.length - sent, 3);
  });

  test("a refused message is not counted against the user", async () => {
    // asker3 was refused for the mailbox above; it still has its 5 messages of the hour (it holds
    // one unverified address already, so four new ones and the refused one again later).
    const asker = askers[3]!;
    for (let i = 0; i < 4; i++) assert.equal((await addAndVerify(asker, `own-${i}@asker.test`)).status, 200);
    offsetMs += 61_000; // past BERTH_EMAIL_VERIFY_INTERVAL_S for that address, within the hour
    const again = await call(h, asker, "POST", `${emails(asker)}verify/`, { email: "own-0@asker.test" });
    assert.equal(again.status, 200, again.raw);
    const sixth = await call(h, asker, "POST", `${emails(asker)}verify/`, { email: "own-1@asker.test" });
    assertLimited(sixth, /asker3 has asked for the most/);
  });

  test("a user holds at most 5 unverified addresses, also when adding them in parallel", async () => {
    const eve = await createUser(h, "eve");
    const adds = await Promise.all(
      Array.from({ length: 12 }, (_, i) => call(h, eve, "POST", emails(eve), { email: `eve-${i}@eve.test` })),
    );
    const statuses = adds.map((r) => r.status).sort();
    assert.deepEqual(statuses, [...Array(5).fill(201), ...Array(7).fill(403)]);
    const refused = adds.find((r) => r.status === 403)!;
    assert.equal(refused.body.code, "too_many_unverified_emails");
    assert.match(
      refused.body.error,
      /eve already has 5 unverified addresses, the most allowed; confirm or delete one/,
    );
    const listed = await call(h, eve, "GET", emails(eve));
    assert.equal(listed.body.filter((e: { verified: boolean }) => !e.verified).length, 5);
    // Deleting one makes room again.
    assert.equal((await call(h, eve, "DELETE", emails(eve), { email: listed.body[1].email })).status, 204);
    assert.equal((await call(h, eve, "POST", emails(eve), { email: "eve-new@eve.test" })).status, 201);
  });
});
