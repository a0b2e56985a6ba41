// `berth nodecluster`, `node`, `tag` and `trigger` against a live server process with simulated
// providers.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { engineFacts } from "../agent/support.ts";
import { berth, liveServer, rows, UUID } from "./support.ts";

const { live, ok } = liveServer();

describe("node clusters, the catalogue and nodes", () => {
  test("provider, region and nodetype list the catalogue; -q gives names", async () => {
    const providers = await ok(["nodecluster", "provider", "-q"]);
    assert.ok(providers.stdout.split("\n").includes("aws"), providers.stdout);
    const regions = await ok(["nodecluster", "region", "-p", "aws"]);
    assert.match(regions.stdout, /^NAME\s+LABEL\s+PROVIDER\s+AVAILABLE\n/);
    assert.ok(rows(regions.stdout).every((r) => r[2] === "aws"));
    const types = await ok(["nodecluster", "nodetype", "-p", "aws", "-r", "us-east-1", "--json"]);
    assert.ok(JSON.parse(types.stdout).objects.some((t: { name: string }) => t.name === "t2.micro"));
  });

  test("nodecluster create deploys with --sync; ls, scale, node ls/inspect/upgrade/rm, nodecluster rm", async () => {
    const created = await ok([
      "nodecluster",
      "create",
      "pool",
      "aws",
      "us-east-1",
      "t2.micro",
      "-t",
      "2",
      "--sync",
    ]);
    assert.match(created.stdout, /^[0-9a-f-]{36}\n$/);
    assert.match(created.stderr, /Node Cluster Deploy Success/);
    const ls = await ok(["nodecluster", "ls"]);
    const row = rows(ls.stdout).find((r) => r[0] === "pool");
    assert.deepEqual(row?.slice(2, 4), ["us-east-1", "t2.micro"]);
    assert.deepEqual(row?.slice(5), ["Deployed", "2", "2"]);

    await ok(["nodecluster", "scale", "pool", "3", "--sync"]);
    const nodes = await ok(["node", "ls", "--cluster", "pool"]);
    assert.equal(rows(nodes.stdout).length, 3);
    assert.ok(
      rows(nodes.stdout).every((r) => r[3] === "Deployed" && r[4] === "pool"),
      nodes.stdout,
    );
    const ids = (await ok(["node", "ls", "-q"])).stdout.trim().split("\n");
    assert.ok(ids.every((id) => UUID.test(id)));
    const node = JSON.parse((await ok(["node", "inspect", ids[0]!.slice(0, 8)])).stdout);
    assert.equal(node.uuid, ids[0]);
    // By its FQDN too.
    assert.equal(JSON.parse((await ok(["node", "inspect", node.external_fqdn])).stdout).uuid, ids[0]);
    const upgrade = await ok(["node", "upgrade", ids[0]!, "--sync"]);
    assert.match(upgrade.stderr, /Node Engine Upgrade Success/);
    const refused = await berth(["node", "health-check", ids[0]!], { env: live.env });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /health-check is allowed in Unreachable/);
    await ok(["node", "rm", ids[0]!, "--sync"]);
    assert.equal(rows((await ok(["node", "ls"])).stdout).length, 2);
    await ok(["nodecluster", "create", "spare", "aws", "us-east-1", "t2.micro", "--no-deploy"]);
    await ok(["nodecluster", "rm", "spare", "--sync"]);
    assert.doesNotMatch((await ok(["nodecluster", "ls"])).stdout, /\nspare /);
  });
});

describe("bring your own node", () => {
  test("node byo prints the token and the commands to run on the server; the token registers one server", async () => {
    const byo = await ok(["node", "byo"]);
    const token = /^Token: (\S+)$/m.exec(byo.stdout)?.[1];
    assert.ok(token, byo.stdout);
    const url = /--url (\S+)/.exec(byo.stdout)?.[1];
    assert.ok(url, byo.stdout);
    // The server's own command (download the agent, run it) and the installed berth's form of it.
    assert.match(
      byo.stdout,
      new RegExp(`curl -fsSL \\S+/api/agent/v1/berth-agent\\.mjs .* --token ${token}`),
    );
    assert.ok(
      byo.stdout.includes(`    sudo berth agent --url ${url} --token ${token} --install-systemd\n`),
      byo.stdout,
    );
    assert.match(
      byo.stdout,
      /expires in (an hour|59 minutes); revoke it with: berth node token rm [0-9a-f]{8}\n$/,
    );

    const listed = await ok(["node", "token", "ls"]);
    assert.match(listed.stdout, /^UUID\s+CREATED\s+EXPIRES\s+CREATED BY\n/);
    const [, created, expires, by] = rows(listed.stdout)[0] ?? [];
    assert.deepEqual([created, by], ["just now", "admin"]);
    assert.match(expires ?? "", /^in (an hour|59 minutes)$/);
    assert.ok(!listed.stdout.includes(token), "a listing never shows the secret");

    // The printed token is the real thing: the agent's registration takes it, once.
    const register = (t: string) =>
      fetch(`${live.server.url}/api/agent/v1/register/`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ token: t, engine: engineFacts() }),
      });
    assert.equal((await register(token)).status, 201);
    assert.equal((await register(token)).status, 403, "a used token is refused");
    assert.equal((await ok(["node", "token", "ls", "-q"])).stdout, "", "a used token is no longer listed");
  });

  test("--json prints the API's answer, -q the token alone; token rm revokes by uuid prefix", async () => {
    const json = JSON.parse((await ok(["node", "byo", "--json"])).stdout);
    assert.match(json.uuid, UUID);
    assert.match(json.command, new RegExp(`--token ${json.token}`));
    const quiet = (await ok(["node", "byo", "-q"])).stdout;
    assert.match(quiet, /^\S{20,}\n$/);
    const ids = (await ok(["node", "token", "ls", "-q"])).stdout.trim().split("\n");
    assert.equal(ids.length, 2);
    assert.ok(ids.every((id) => UUID.test(id)));
    const listed = JSON.parse((await ok(["node", "token", "ls", "--json"])).stdout);
    assert.equal(listed.meta.total_count, 2);
    assert.ok(listed.objects.every((t: { token?: string }) => t.token === undefined));

    const revoked = await ok(["node", "token", "rm", json.uuid.slice(0, 8)]);
    assert.equal(revoked.stdout, `${json.uuid}\n`);
    assert.deepEqual(
      (await ok(["node", "token", "ls", "-q"])).stdout.trim().split("\n"),
      ids.filter((id) => id !== json.uuid),
    );
    const gone = await berth(["node", "token", "rm", json.uuid], { env: live.env });
    assert.equal(gone.code, 1);
    assert.match(gone.stderr, /^berth: token \S+ not found \(used, expired or revoked tokens are gone\)\n$/);
    await ok(["node", "token", "rm", ...ids.filter((id) => id !== json.uuid)]);
  });

  test("in another namespace: --namespace creates the token there; a namespace one cannot see is refused", async () => {
    await ok(["org", "create", "byoteam"]);
    const created = JSON.parse((await ok(["node", "byo", "--namespace", "byoteam", "--json"])).stdout);
    assert.match(created.resource_uri, /^\/api\/infra\/v1\/byoteam\/token\//);
    assert.equal(
      (await ok(["node", "token", "ls", "-q", "--namespace", "byoteam"])).stdout,
      `${created.uuid}\n`,
    );
    const refused = await berth(["node", "byo", "--namespace", "nosuchteam"], { env: live.env });
    assert.equal(refused.code, 1);
    assert.equal(refused.stdout, "");
    assert.match(refused.stderr, /^berth: .+\n$/);
  });
});
