// `berth namespace`: a namespace's privileges shown to its members, changed by administrators, and
// the refusal a tenant's `berth service create` gets for an option that reaches the node.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { basic } from "../support/harness.ts";
import { ADMIN, berth, okWith, rows, Server } from "./support.ts";

let server: Server;
let adminEnv: Record<string, string>;
let aliceEnv: Record<string, string>;
const ok = okWith(() => adminEnv);

before(async () => {
  server = await Server.start();
  adminEnv = server.adminEnv();
  const admin = basic(ADMIN.username, ADMIN.key);
  const made = await fetch(`${server.url}/api/v1.1/users/`, {
    method: "POST",
    headers: { authorization: admin, "content-type": "application/json" },
    body: JSON.stringify({ username: "alice", email: "alice@example.test", password: "alice-password" }),
  });
  assert.equal(made.status, 201);
  const key = await fetch(`${server.url}/api/v1.1/users/alice/apikeys/`, {
    method: "POST",
    headers: { authorization: basic("alice", "alice-password"), "content-type": "application/json" },
    body: "{}",
  });
  aliceEnv = { ...adminEnv, BERTH_USER: "alice", BERTH_APIKEY: ((await key.json()) as { key: string }).key };
});

after(async () => {
  await server.stop();
});

describe("berth namespace", () => {
  test("a tenant is refused a privileged service; an admin allows it; inspect shows it; deny takes it back", async () => {
    const refused = await berth(["service", "create", "busybox:local", "--name", "root", "--privileged"], {
      env: aliceEnv,
    });
    assert.equal(refused.code, 1, refused.stdout);
    assert.match(refused.stderr, /privileged: namespace alice is not allowed privileged containers/);
    assert.match(refused.stderr, /an administrator can allow it/);

    const before = await berth(["namespace", "inspect", "alice"], { env: aliceEnv });
    assert.equal(before.code, 0, before.stderr);
    assert.deepEqual(rows(before.stdout), [
      ["privileged", "no"],
      ["host_network", "no"],
      ["host_pid", "no"],
      ["capabilities", "-"],
      ["devices", "no"],
      ["security_opt", "no"],
      ["cgroup_parent", "no"],
      ["host_paths", "-"],
      ["local_nodes", "no"],
    ]);

    const notAdmin = await berth(["namespace", "allow", "alice", "--privileged"], { env: aliceEnv });
    assert.equal(notAdmin.code, 1);
    assert.match(notAdmin.stderr, /Only administrators/);

    const allowed = await ok([
      "namespace",
      "allow",
      "alice",
      "--privileged",
      "--cap",
      "net_admin",
      "--host-path",
      "/srv/data",
      "--host-path",
      "/opt/app",
      "--local-nodes",
    ]);
    const table = new Map(rows(allowed.stdout).map((r) => [r[0], r.slice(1).join(" ")]));
    assert.equal(table.get("privileged"), "yes");
    assert.equal(table.get("capabilities"), "NET_ADMIN");
    assert.equal(table.get("host_paths"), "/opt/app, /srv/data");
    assert.equal(table.get("local_nodes"), "yes");
    assert.equal(table.get("host_network"), "no");

    const created = await berth(
      ["service", "create", "busybox:local", "--name", "root", "--privileged", "-v", "/srv/data/x:/x"],
      { env: aliceEnv },
    );
    assert.equal(created.code, 0, created.stderr);
    const outside = await berth(["service", "create", "busybox:local", "--name", "etc", "-v", "/etc:/etc"], {
      env: aliceEnv,
    });
    assert.equal(outside.code, 1);
    assert.match(outside.stderr, /host path \/etc: namespace alice is not allowed bind mounts of host paths/);

    await ok(["namespace", "deny", "alice", "--privileged", "--host-path", "/opt/app"]);
    const json = JSON.parse((await ok(["--json", "namespace", "inspect", "alice"])).stdout);
    assert.equal(json.privileges.privileged, false);
    assert.deepEqual(json.privileges.host_paths, ["/srv/data"]);
    await ok(["namespace", "deny", "alice", "--all"]);
    const none = JSON.parse((await ok(["--json", "namespace", "inspect", "alice"])).stdout);
    assert.deepEqual(none.privileges.host_paths, []);
    assert.equal(none.privileges.local_nodes, false);
  });
});
