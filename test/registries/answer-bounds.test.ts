// Registry answers are bounded in bytes and time (registry/outbound.ts): a registry that answers
// with a huge body, or with a body that never ends, costs Berth at most the bound and the
// configured timeout, and the call is refused with a sentence naming it.
import assert from "node:assert/strict";
import type { ServerResponse } from "node:http";
import { after, before, describe, test } from "node:test";
import { type Caller, call, createUser, type Harness, startHarness } from "../support/harness.ts";
import { type FakeRegistry, startFakeRegistry } from "./support.ts";

const base = "/api/repo/v1/repository/";
const MiB = 1024 * 1024;
let h: Harness;
let alice: Caller;

before(async () => {
  h = await startHarness({ env: { BERTH_REGISTRY_ALLOW: "127.0.0.1", BERTH_REGISTRY_TIMEOUT_MS: "1500" } });
  alice = await createUser(h, "alice");
});
after(() => h?.close());

/** Writes up to `total` bytes as fast as Berth reads them; returns how many it managed. */
function pour(res: ServerResponse, total: number, sent: { bytes: number }) {
  const piece = Buffer.alloc(64 * 1024, "r");
  let left = total;
  const more = () => {
    while (left > 0 && !res.destroyed) {
      left -= piece.length;
      sent.bytes += piece.length;
      if (!res.write(piece)) {
        res.once("drain", more);
        return;
      }
    }
    if (left <= 0 && !res.destroyed) res.end();
  };
  more();
}

describe("registry answers", () => {
  let registry: FakeRegistry | undefined;
  after(() => registry?.close());

  test("a registry answering GET /v2/ with 300 MiB is refused once it passed 1 MiB", async () => {
    const sent = { bytes: 0 };
    registry = await startFakeRegistry({
      auth: "none",
      override: (_req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        pour(res, 300 * MiB, sent);
        return true;
      },
    });
    const started = Date.now();
    const r = await call(h, alice, "POST", base, { name: `${registry.host}/team/app` });
    assert.equal(r.status, 400, r.raw);
    assert.equal(r.body.code, "registry_unreachable");
    assert.match(r.body.error, /answered with more than 1048576 bytes/);
    assert.ok(Date.now() - started < 5000);
    assert.ok(sent.bytes < 40 * MiB, `the registry got to send ${sent.bytes} bytes`);
    await registry.close();
    registry = undefined;
  });

  test("a registry whose answer never ends is given up at the configured timeout", async () => {
    registry = await startFakeRegistry({
      auth: "none",
      override: (_req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        const drip = setInterval(() => res.write(" "), 100);
        res.once("close", () => clearInterval(drip));
        return true;
      },
    });
    const started = Date.now();
    const r = await call(h, alice, "POST", base, { name: `${registry.host}/team/app` });
    const ms = Date.now() - started;
    assert.equal(r.status, 400, r.raw);
    assert.equal(r.body.code, "registry_unreachable");
    assert.match(r.body.error, /did not answer within 1500 ms/);
    assert.ok(ms >= 1400 && ms < 5000, `gave up after ${ms} ms`);
    await registry.close();
    registry = undefined;
  });
});
