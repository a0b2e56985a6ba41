// Secrets in request URLs never reach the log, whatever their spelling: stream credentials ride in
// the query (CONTRACT §2), and the query parser decodes a percent-encoded name (`%74oken`) to the
// name it checks, so the log's redaction must decide on the decoded name too (issue 26, item 6).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { LogCapture } from "../registries/support.ts";
import { listen, openStream, refusal } from "../streams/support.ts";
import { type Caller, call, createUser, type Harness, startHarness } from "../support/harness.ts";

let h: Harness;
let alice: Caller;
let base = "";
const log = new LogCapture();

before(async () => {
  h = await startHarness({ env: { BERTH_LOG_LEVEL: "trace" }, logStream: log });
  alice = await createUser(h, "alice");
  base = await listen(h);
});
after(() => h.close());

/** Every byte of `text` as %XX, in upper or lower case. */
function percentAll(text: string, lower = false): string {
  const hex = [...Buffer.from(text)].map((b) => `%${b.toString(16).padStart(2, "0")}`).join("");
  return lower ? hex : hex.toUpperCase();
}

/** Each form a secret may take in a log line (raw, percent-encoded, base64). */
function forms(secret: string): string[] {
  return [secret, percentAll(secret), percentAll(secret, true), Buffer.from(secret).toString("base64")];
}

describe("logged URLs", () => {
  test("a stream key passed under an encoded name opens the stream and is not logged", async () => {
    const names = ["token", "%74oken", "%74%6F%6B%65%6E", "%74%6f%6b%65%6e", "tok%65n"];
    for (const name of names) {
      // The encoded name is a real credential: the query parser decodes it and the stream opens.
      const s = await openStream(`${base}/v1/events/?user=alice&${name}=${alice.key}`);
      s.close();
      await s.closed;
    }
    // The value encoded too.
    const s = await openStream(`${base}/v1/events/?user=alice&%74oken=${percentAll(alice.key)}`);
    s.close();
    await s.closed;
    // The parameter repeated: refused (two values are no credential), and not logged either.
    const twice = await refusal(
      `${base}/v1/events/?user=alice&%74oken=${percentAll(alice.key, true)}&token=${alice.key}`,
    );
    assert.equal(twice.status, 401);
    for (const form of forms(alice.key))
      assert.ok(!log.text.includes(form), `the log holds the key as ${form}`);
    assert.match(
      log.text,
      /\/v1\/events\/\?user=alice&%74oken=\*\*\*/,
      "the request is logged, its key redacted",
    );
  });

  test("every secret parameter is redacted, in any case and encoding, the others kept", async () => {
    const secrets: Record<string, string> = {
      TOKEN: "s3cret-upper-token-0001",
      "%4Bey": "s3cret-key-0002",
      apikey: "s3cret-apikey-0003",
      "api%5Fkey": "s3cret-api-key-0004",
      "pass%77ord": "s3cret-password-0005",
      SeCrEt: "s3cret-secret-0006",
      "%61ccess_token": "s3cret-access-token-0007",
      "%2574oken": "s3cret-double-encoded-0008",
      "to%6Ben": "s3cret-partly-encoded-0009",
    };
    const query = Object.entries(secrets)
      .map(([name, value]) => `${name}=${value}`)
      .join("&");
    for (const path of ["/api/app/v1/service/", "/api/app/v1/nothing-here/"]) {
      const res = await call(h, alice, "GET", `${path}?limit=5&${query};password=s3cret-semicolon-0010`);
      assert.ok(res.status < 500, `${path}: ${res.status}`);
    }
    for (const secret of [...Object.values(secrets), "s3cret-semicolon-0010"])
      for (const form of forms(secret)) assert.ok(!log.text.includes(form), `the log holds ${form}`);
    assert.match(log.text, /"url":"\/api\/app\/v1\/service\/\?limit=5&TOKEN=\*\*\*&%4Bey=\*\*\*/);
  });
});
