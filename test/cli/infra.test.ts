// `berth nodecluster`, `node`, `tag` and `trigger` against a live server process with simulated
// providers.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { berth, okWith, rows, Server, UUID } from "./support.ts";

let server: Server;
let env: Record<string, string>;
const ok = okWith(() => env);

before(async () => {
  server = await Server.start();
  env = server.adminEnv();
});

after(async () => {
  await server.stop();
});

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
    const refused = await berth(["node", "health-check", ids[0]!], { env });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /health-check is allowed in Unreachable/);
    await ok(["node", "rm", ids[0]!, "--sync"]);
    assert.equal(rows((await ok(["node", "ls"])).stdout).length, 2);
    await ok(["nodecluster", "create", "spare", "aws", "us-east-1", "t2.micro", "--no-deploy"]);
    await ok(["nodecluster", "rm", "spare", "--sync"]);
    assert.doesNotMatch((await ok(["nodecluster", "ls"])).stdout, /\nspare /);
  });
});
