// `berth alert` against a live server process (issue 32): create a rule with its channels, list,
// disable, read incidents and deliveries, remove; a webhook at an internal address is refused
// with the server's reason.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { berth, liveServer, rows, UUID } from "./support.ts";

const { live, ok } = liveServer();

describe("alert", () => {
  test("create, ls, disable, incidents, deliveries, rm", async () => {
    const made = (
      await ok([
        "alert",
        "create",
        "memory",
        "--kind",
        "memory_high",
        "--threshold",
        "85",
        "--for",
        "3",
        "--email",
        "ops@example.test",
      ])
    ).stdout.trim();
    assert.match(made, UUID);
    let ls = rows((await ok(["alert", "ls"])).stdout);
    assert.deepEqual(ls[0]?.slice(1), ["memory", "memory_high", "yes", "0", "ops@example.test"]);
    const json = JSON.parse((await ok(["alert", "ls", "--json"])).stdout);
    assert.deepEqual((json.objects ?? json)[0].params, { threshold_percent: 85, for_minutes: 3 });
    await ok(["alert", "disable", "memory"]);
    ls = rows((await ok(["alert", "ls"])).stdout);
    assert.equal(ls[0]?.[3], "no");
    assert.equal(rows((await ok(["alert", "incidents", "memory"])).stdout).length, 0);
    assert.equal(rows((await ok(["alert", "deliveries", "memory"])).stdout).length, 0);
    await ok(["alert", "rm", "memory"]);
    assert.equal(rows((await ok(["alert", "ls"])).stdout).length, 0);
  });

  test("a loopback webhook is refused with the server's reason; bad usage is exit 2", async () => {
    const refused = await berth(
      ["alert", "create", "x", "--kind", "container_exited", "--webhook", "http://127.0.0.1:9/hook"],
      { env: live.env },
    );
    assert.equal(refused.code, 1, refused.stderr);
    assert.match(
      refused.stderr,
      /loopback address; Berth does not contact it unless BERTH_ALERT_WEBHOOK_ALLOW/,
    );
    const usage = await berth(["alert", "create", "x", "--kind", "nope", "--email", "a@b.c"], {
      env: live.env,
    });
    assert.equal(usage.code, 2);
    const none = await berth(["alert", "create", "x", "--kind", "container_exited"], { env: live.env });
    assert.equal(none.code, 2);
    assert.match(none.stderr, /at least one --webhook, --slack or --email/);
  });
});
