// `berth tag` and `berth trigger` against a live server process with simulated nodes.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { berth, liveServer, rows } from "./support.ts";

const { live, ok } = liveServer({ cluster: { name: "pool", nodes: 1 } });

describe("tags and triggers", () => {
  test("tag add/rm/set/ls on a service and a node cluster", async () => {
    await ok(["service", "create", "busybox:local", "--name", "web", "-r", "sleep 100000"]);
    await ok(["tag", "add", "-t", "blue", "-t", "green", "web", "pool"]);
    await ok(["tag", "rm", "-t", "green", "web"]);
    const ls = await ok(["tag", "ls", "web", "pool"]);
    assert.deepEqual(rows(ls.stdout), [
      ["web", "service", "blue"],
      ["pool", "node cluster", "blue green"],
    ]);
    // The cluster's tags are its nodes' tags: a service tagged red deploys on them.
    await ok(["tag", "set", "-t", "red", "pool", "web"]);
    assert.deepEqual(
      JSON.parse((await ok(["tag", "ls", "pool", "web", "--json"])).stdout).map(
        (t: { tags: string[] }) => t.tags,
      ),
      [["red"], ["red"]],
    );
    const none = await berth(["tag", "add", "-t", "x", "nosuch"], { env: live.env });
    assert.equal(none.code, 1);
    assert.match(none.stderr, /no service, node cluster or node is called nosuch/);
  });

  test("trigger create prints a URL that redeploys; ls and rm by name", async () => {
    const url = (await ok(["trigger", "create", "web", "-n", "deploy-hook"])).stdout.trim();
    assert.match(url, /\/trigger\/[0-9a-f-]{36}\/call\/\?token=/);
    const ls = await ok(["trigger", "ls", "web"]);
    assert.deepEqual(rows(ls.stdout)[0]?.slice(1, 3), ["deploy-hook", "REDEPLOY"]);
    await ok(["trigger", "rm", "web", "deploy-hook"]);
    assert.equal(rows((await ok(["trigger", "ls", "web"])).stdout).length, 0);
  });
});
