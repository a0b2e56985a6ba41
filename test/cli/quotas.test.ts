// `berth namespace quota` (issue 26): a tenant reads its quotas, an administrator sets limits, and
// the CLI shows a create refused over a limit with the API's sentence.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { api, berth, okWith, rows, Server } from "./support.ts";

let server: Server;
let admin: Record<string, string>;
let alice: Record<string, string>;
const asAdmin = okWith(() => admin);
const asAlice = okWith(() => alice);

before(async () => {
  server = await Server.start();
  admin = server.adminEnv();
  const made = await api(server, "POST", "/api/v1.1/users/", {
    username: "alice",
    email: "alice@example.test",
    password: "alice-password",
  });
  assert.equal(made.status, 201);
  const key = await api(server, "POST", "/api/v1.1/users/alice/apikeys/", { label: "cli" });
  alice = { ...admin, BERTH_USER: "alice", BERTH_APIKEY: key.body.key };
});
after(() => server.stop());

test("quota shows limits and usage; an administrator sets one; a create over it is refused", async () => {
  const shown = rows((await asAlice(["namespace", "quota", "alice"])).stdout);
  assert.deepEqual(
    shown.find((r) => r[0] === "services"),
    ["services", "200", "0"],
  );
  assert.deepEqual(
    shown.find((r) => r[0] === "apikeys"),
    ["apikeys", "20", "1"],
  );
  const refused = await berth(["namespace", "quota", "alice", "--services", "1"], { env: alice });
  assert.equal(refused.code, 1);
  const set = rows(
    (await asAdmin(["namespace", "quota", "alice", "--services", "1", "--streams-per-key", "none"])).stdout,
  );
  assert.deepEqual(
    set.find((r) => r[0] === "services"),
    ["services", "1", "0"],
  );
  assert.deepEqual(
    set.find((r) => r[0] === "streams_per_key"),
    ["streams_per_key", "none", "0"],
  );
  await asAlice(["service", "create", "busybox:local", "--name", "one"]);
  const over = await berth(["service", "create", "busybox:local", "--name", "two"], { env: alice });
  assert.equal(over.code, 1);
  assert.match(over.stderr, /alice has 1 services and its limit is 1/);
  const bad = await berth(["namespace", "quota", "alice", "--services", "many"], { env: admin });
  assert.equal(bad.code, 2, bad.stderr);
});
