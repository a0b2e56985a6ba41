// `berth org invite | invitations | accept | decline | uninvite | leave` (issue 26): the binary
// against a server process; nobody joins an organization without accepting.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { api, berth, okWith, rows, Server } from "./support.ts";

let server: Server;
let admin: Record<string, string>;
let bob: Record<string, string>;
let carol: Record<string, string>;
const asAdmin = okWith(() => admin);
const asBob = okWith(() => bob);
const asCarol = okWith(() => carol);

async function user(name: string): Promise<Record<string, string>> {
  const made = await api(server, "POST", "/api/v1.1/users/", {
    username: name,
    email: `${name}@example.test`,
    password: `${name}-password`,
  });
  assert.equal(made.status, 201);
  const key = await api(server, "POST", `/api/v1.1/users/${name}/apikeys/`, { label: "cli" });
  assert.equal(key.status, 201);
  return { ...admin, BERTH_USER: name, BERTH_APIKEY: key.body.key };
}

before(async () => {
  server = await Server.start();
  admin = server.adminEnv();
  bob = await user("bob");
  carol = await user("carol");
});
after(() => server.stop());

test("invite, list, accept, decline, withdraw and leave through the binary", async () => {
  await asAdmin(["org", "create", "crew"]);
  assert.equal(
    (await asAdmin(["org", "invite", "crew", "bob", "--role", "owner"])).stdout.trim(),
    "bob pending",
  );
  await asAdmin(["org", "invite", "crew", "carol"]);
  assert.deepEqual(
    rows((await asAdmin(["org", "invitations", "crew"])).stdout).map((r) => r.slice(0, 3)),
    [
      ["crew", "bob", "owner"],
      ["crew", "carol", "member"],
    ],
  );
  // Not a member yet.
  assert.equal((await berth(["service", "ls", "--namespace", "crew"], { env: bob })).code, 1);
  assert.deepEqual(
    rows((await asBob(["org", "invitations"])).stdout).map((r) => r[0]),
    ["crew"],
  );
  await asBob(["org", "accept", "crew"]);
  assert.equal((await asBob(["service", "ls", "--namespace", "crew"])).code, 0);
  assert.deepEqual(rows((await asAdmin(["org", "inspect", "crew"])).stdout), [
    ["admin", "owner"],
    ["bob", "owner"],
  ]);
  await asCarol(["org", "decline", "crew"]);
  assert.equal((await berth(["org", "accept", "crew"], { env: carol })).code, 1);
  await asAdmin(["org", "invite", "crew", "carol"]);
  await asAdmin(["org", "uninvite", "crew", "carol"]);
  assert.equal((await asAdmin(["org", "invitations", "crew", "-q"])).stdout, "");

  await asBob(["org", "leave", "crew"]);
  assert.deepEqual(rows((await asAdmin(["org", "inspect", "crew"])).stdout), [["admin", "owner"]]);
  const last = await berth(["org", "leave", "crew"], { env: admin });
  assert.equal(last.code, 1);
  assert.match(last.stderr, /last owner/);
});
