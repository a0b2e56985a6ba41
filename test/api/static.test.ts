// The dashboard's files served by Berth at `/`: content types, compression (brotli, gzip),
// revalidation of the page, long caching of hashed assets, and what `/` says without a build.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import zlib from "node:zlib";
import { buildDashboard } from "../../web/build.ts";
import { type Harness, startHarness } from "../support/harness.ts";

let h: Harness;
let bare: Harness;
const webDir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "berth-web-build-")), "dist");

before(async () => {
  await buildDashboard(webDir);
  h = await startHarness({ env: { BERTH_WEB_DIR: webDir } });
  bare = await startHarness({ env: { BERTH_WEB_DIR: path.join(webDir, "missing") } });
});
after(async () => {
  await h.close();
  await bare.close();
  fs.rmSync(path.dirname(webDir), { recursive: true, force: true });
});

describe("dashboard files", () => {
  test("the page at / is HTML that loads only same-origin assets, revalidated by ETag", async () => {
    const res = await h.app.inject({ method: "GET", url: "/" });
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers["content-type"], "text/html; charset=utf-8");
    assert.equal(res.headers["cache-control"], "no-cache");
    assert.match(String(res.headers["content-security-policy"]), /default-src 'self'/);
    assert.doesNotMatch(res.body, /https?:\/\//, "no CDN or outside address in the page");
    const again = await h.app.inject({
      method: "GET",
      url: "/",
      headers: { "if-none-match": String(res.headers.etag) },
    });
    assert.equal(again.statusCode, 304);
  });

  test("scripts and styles are served compressed (brotli, else gzip) and cached for good", async () => {
    const page = (await h.app.inject({ method: "GET", url: "/" })).body;
    const js = /src="(\/assets\/app-[^"]+\.js)"/.exec(page)![1]!;
    const css = /href="(\/assets\/app-[^"]+\.css)"/.exec(page)![1]!;
    const plain = await h.app.inject({ method: "GET", url: js });
    assert.equal(plain.headers["content-type"], "text/javascript; charset=utf-8");
    assert.equal(plain.headers["content-encoding"], undefined);
    assert.match(String(plain.headers["cache-control"]), /immutable/);
    const br = await h.app.inject({
      method: "GET",
      url: js,
      headers: { "accept-encoding": "gzip, deflate, br" },
    });
    assert.equal(br.headers["content-encoding"], "br");
    assert.equal(br.headers.vary, "Accept-Encoding");
    assert.ok(br.rawPayload.length < plain.rawPayload.length / 2);
    assert.equal(zlib.brotliDecompressSync(br.rawPayload).toString(), plain.body);
    const gz = await h.app.inject({ method: "GET", url: css, headers: { "accept-encoding": "gzip" } });
    assert.equal(gz.headers["content-encoding"], "gzip");
    assert.equal(gz.headers["content-type"], "text/css; charset=utf-8");
    assert.equal(
      zlib.gunzipSync(gz.rawPayload).toString(),
      (await h.app.inject({ method: "GET", url: css })).body,
    );
  });

  test("an unknown asset is a JSON 404, and the API keeps its own 404s", async () => {
    const res = await h.app.inject({ method: "GET", url: "/assets/nope.js" });
    assert.equal(res.statusCode, 404);
    assert.equal(res.json().code, "not_found");
    assert.equal((await h.app.inject({ method: "GET", url: "/nope" })).statusCode, 404);
  });

  test("without a build, / says how to make one", async () => {
    const res = await bare.app.inject({ method: "GET", url: "/" });
    assert.equal(res.statusCode, 503);
    assert.match(res.body, /npm run build:web/);
  });
});
