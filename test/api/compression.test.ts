// JSON answers compressed for clients that ask: br (preferred) or gzip by Accept-Encoding, the
// same JSON once decoded, Vary: Accept-Encoding; a client that sends no Accept-Encoding (as
// historical clients do), or only identity, gets the plain body; small bodies stay plain.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import zlib from "node:zlib";
import { chosenEncoding } from "../../src/api/compression.ts";
import { call, type Harness, startHarness } from "../support/harness.ts";

describe("compression of JSON answers", () => {
  let h: Harness;
  before(async () => {
    h = await startHarness();
    for (let i = 0; i < 30; i++) {
      const r = await call(h, h.admin, "POST", "/api/app/v1/service/", {
        image: "busybox:local",
        name: `svc-${i}`,
      });
      assert.equal(r.status, 201);
    }
  });
  after(() => h.close());

  const get = (headers: Record<string, string>, url = "/api/app/v1/service/?limit=100") =>
    h.app.inject({ method: "GET", url, headers: { authorization: h.admin.auth, ...headers } });

  test("br when asked (preferred over gzip), gzip when only it is asked; the same JSON decoded", async () => {
    const plain = await get({});
    assert.equal(plain.headers["content-encoding"], undefined, "no Accept-Encoding: plain, as before");
    const expected = JSON.parse(plain.body);
    assert.equal(expected.objects.length, 30);

    const br = await get({ "accept-encoding": "gzip, deflate, br" });
    assert.equal(br.headers["content-encoding"], "br");
    assert.match(String(br.headers.vary), /Accept-Encoding/i);
    const brBody = zlib.brotliDecompressSync(br.rawPayload).toString();
    assert.deepEqual(JSON.parse(brBody), expected);
    assert.ok(
      br.rawPayload.length * 4 < plain.rawPayload.length,
      `${br.rawPayload.length} of ${plain.rawPayload.length}`,
    );

    const gz = await get({ "accept-encoding": "gzip" });
    assert.equal(gz.headers["content-encoding"], "gzip");
    assert.deepEqual(JSON.parse(zlib.gunzipSync(gz.rawPayload).toString()), expected);
  });

  test("identity, br;q=0 and small answers stay plain", async () => {
    assert.equal((await get({ "accept-encoding": "identity" })).headers["content-encoding"], undefined);
    const noBr = await get({ "accept-encoding": "br;q=0, gzip;q=0.5" });
    assert.equal(noBr.headers["content-encoding"], "gzip");
    const small = await get({ "accept-encoding": "br" }, "/api/app/v1/service/?limit=1&name=none-such");
    assert.equal(small.headers["content-encoding"], undefined);
    JSON.parse(small.body);
    assert.equal(chosenEncoding("*"), "br");
    assert.equal(chosenEncoding("*;q=0"), undefined);
  });
});
