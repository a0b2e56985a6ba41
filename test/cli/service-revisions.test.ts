// `berth service revisions` and `berth service rollback` against a live server process with
// simulated nodes (issue 29): the kept definitions newest first with the current one marked, a
// rollback followed with --sync, and a refusal that says why.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { berth, liveServer, rows } from "./support.ts";

const { live, ok } = liveServer({
  env: { BERTH_START_MIN_UP_MS: "150" },
  cluster: { name: "revs", nodes: 1 },
});

describe("service revisions and rollback", () => {
  test("revisions lists the kept definitions; rollback --sync goes back to the previous one", async () => {
    await ok(["service", "run", "busybox:local", "--name", "clock", "-r", "sleep 100000", "--sync"]);
    await ok(["service", "env", "add", "clock", "MODE=two", "--redeploy", "--sync"]);
    const listed = await ok(["service", "revisions", "clock"]);
    assert.match(listed.stdout.split("\n")[0]!, /^REVISION\s+IMAGE\s+CAUSE\s+CREATED\s+ACTION\s+CHANGED/);
    assert.deepEqual(
      rows(listed.stdout).map((r) => r.slice(0, 3)),
      [
        ["2 *", "busybox:local", "update"],
        ["1", "busybox:local", "create"],
      ],
    );
    assert.match(listed.stdout, /container_envvars/);

    const back = await ok(["service", "rollback", "clock", "--sync"]);
    assert.match(back.stderr, /Service Rollback [0-9a-f-]{36} /);
    assert.match(back.stderr, /Rolling clock back to revision 1/);
    assert.match(back.stderr, /Service Rollback Success in /);
    const json = JSON.parse((await ok(["service", "revisions", "clock", "--json"])).stdout);
    assert.deepEqual(
      json.objects.map((r: { number: number; current: boolean }) => [r.number, r.current]),
      [
        [2, false],
        [1, true],
      ],
    );
    const inspect = JSON.parse((await ok(["service", "inspect", "clock"])).stdout);
    assert.deepEqual(inspect.container_envvars, []);

    const refused = await berth(["service", "rollback", "clock", "--revision", "7"], { env: live.env });
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /no kept revision 7; kept: 2, 1/);
    const bad = await berth(["service", "rollback", "clock", "--revision", "two"], { env: live.env });
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /must be a whole number/);
  });
});
