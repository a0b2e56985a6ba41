// `berth repository`, `registry`, `apikey`, `org` and `--namespace`; colours; shell completion.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type FakeRegistry, startFakeRegistry } from "../registries/support.ts";
import { berth, okWith, rows, Server } from "./support.ts";

let server: Server;
let env: Record<string, string>;
const ok = okWith(() => env);
let registry: FakeRegistry;

before(async () => {
  registry = await startFakeRegistry({ auth: "basic", username: "robot", password: "s3cret" });
  server = await Server.start({ BERTH_REGISTRY_ALLOW: "127.0.0.1", BERTH_REGISTRY_TIMEOUT_MS: "3000" });
  env = server.adminEnv();
});

after(async () => {
  await server.stop();
  await registry.close();
});

describe("repositories, registries, keys, organizations, namespaces", () => {
  test("repository register checks the credentials with the registry; ls, inspect, update, rm; registry ls", async () => {
    const name = `${registry.host}/team/app`;
    const wrong = await berth(["repository", "register", name, "-u", "robot", "--password-stdin"], {
      env,
      input: "nope\n",
    });
    assert.equal(wrong.code, 1);
    assert.equal(wrong.stdout, "");
    await ok(["repository", "register", name, "-u", "robot", "--password-stdin"], { input: "s3cret\n" });
    const ls = await ok(["repository", "ls"]);
    assert.deepEqual(rows(ls.stdout), [[name, "no", registry.host]]);
    assert.equal(JSON.parse((await ok(["repository", "inspect", name])).stdout).name, name);
    await ok(["repository", "update", name, "-u", "robot", "-p", "s3cret"]);
    const registries = rows((await ok(["registry", "ls"])).stdout);
    assert.ok(
      registries.some((r) => r[1] === registry.host || `${r[1]}:${r[2]}` === registry.host),
      JSON.stringify(registries),
    );
    await ok(["repository", "rm", name]);
    assert.equal((await ok(["repository", "ls", "-q"])).stdout, "");
  });

  test("apikey create/ls/rm; org create, member add, and --namespace acting in the organization", async () => {
    const key = (await ok(["apikey", "create", "--label", "ci"])).stdout.trim();
    assert.match(key, /^\S{20,}$/);
    const keys = await ok(["apikey", "ls"]);
    const ci = rows(keys.stdout).find((r) => r[1] === "ci");
    assert.ok(ci, keys.stdout);
    const asKey = await ok(["whoami"], { env: { ...env, BERTH_APIKEY: key } });
    assert.match(asKey.stdout, /^admin at /);
    await ok(["apikey", "rm", ci[0]!]);
    const revoked = await berth(["whoami"], { env: { ...env, BERTH_APIKEY: key } });
    assert.equal(revoked.code, 1);

    await ok(["org", "create", "acme"]);
    const orgs = await ok(["org", "ls"]);
    assert.deepEqual(rows(orgs.stdout), [
      ["admin", "user"],
      ["acme", "organization"],
    ]);
    await ok(["service", "create", "busybox:local", "--name", "shared", "--namespace", "acme"]);
    assert.match((await ok(["service", "ls", "--namespace", "acme"])).stdout, /\nshared /);
    assert.doesNotMatch((await ok(["service", "ls"])).stdout, /\nshared /);
    const elsewhere = await berth(["service", "inspect", "shared"], { env });
    assert.equal(elsewhere.code, 1);
    assert.match(elsewhere.stderr, /service shared not found/);
    const members = await ok(["org", "inspect", "acme"]);
    assert.deepEqual(rows(members.stdout), [["admin", "owner"]]);
  });
});
