// A terminated local node's router is never started again: a configuration push or a renewal check
// that comes after the node's release (a worker still draining, a timer) used to create a new Caddy
// in the node's namespace, which then outlived the node (seen after the renewal test's teardown).
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { LocalRouters } from "../../src/drivers/local/router-process.ts";

const A = "0b6d1f8e-3c2a-4d5e-9f10-1a2b3c4d5e6f";
const B = "7c8d9e0f-1a2b-4c3d-8e4f-5a6b7c8d9e0f";

test("a node being removed gets no router, and its router's Caddy is not started again", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-local-routers-"));
  let terminating = false;
  const node = () => ({
    netnsName: "berth-n-test",
    address: "10.250.0.2",
    ...(terminating ? { terminating: true } : {}),
  });
  const routers = new LocalRouters({ provider: { findNode: () => node() as never }, dir });
  try {
    const router = routers.routerFor(A);
    assert.ok(router, "a live node has a router");
    terminating = true;
    assert.equal(routers.routerFor(B), undefined, "a node being removed is given none");
    await assert.rejects(
      router.restarted!(),
      /removed with its node/,
      "the router it had does not start Caddy again",
    );
  } finally {
    routers.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("a released node's router is not made again; another node's still is", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-local-routers-"));
  const node = { netnsName: "berth-n-test", address: "10.250.0.2" };
  const routers = new LocalRouters({
    // The provider may still list the node while its termination finishes.
    provider: { findNode: () => node as never },
    dir,
  });
  try {
    assert.ok(routers.routerFor(A), "a known node has a router");
    await routers.release(A);
    assert.equal(routers.routerFor(A), undefined, "released: no router, so no Caddy started");
    assert.ok(routers.routerFor(B), "other nodes keep theirs");
  } finally {
    routers.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
