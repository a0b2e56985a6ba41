// Stack items are held to the rules of /service/ (issue 17 item 4, issue 14 item 3): what
// POST or PATCH /service/ refuses, a stack create or update refuses too, naming the item and the
// field, with the same sentence where the item's key is a REST key (one compiled check,
// contract/check.ts), and nothing is written.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Caller, call, createUser, type Harness, startHarness } from "../support/harness.ts";

let h: Harness;
let alice: Caller;
let stack: { resource_uri: string };
let web: { resource_uri: string };

const IMAGE = { image: "busybox:local" };

before(async () => {
  h = await startHarness();
  alice = await createUser(h, "alice");
  const res = await call(h, alice, "POST", "/api/app/v1/stack/", {
    name: "base",
    services: [{ name: "web", ...IMAGE }],
  });
  assert.equal(res.status, 201, res.raw);
  stack = res.body;
  web = (await call(h, alice, "GET", res.body.services[0])).body;
});
after(() => h.close());

interface Problem {
  field: string;
  problem: string;
}

/** The 400's problem for `field`; fails when the answer is anything else. */
function problemOf(res: { status: number; body: unknown; raw: string }, field: string): Problem {
  assert.equal(res.status, 400, res.raw);
  const body = res.body as { code: string; error: string; details?: Problem[] };
  assert.equal(body.code, "invalid_field", res.raw);
  assert.equal(typeof body.error, "string");
  const found = body.details?.find((d) => d.field === field);
  assert.ok(found, `${field} named in ${res.raw.slice(0, 600)}`);
  return found;
}

async function count(path: string): Promise<number> {
  return (await call(h, alice, "GET", path)).body.meta.total_count;
}

// [what, fields of a service body, the field named, whether Update service takes the fields,
//  whether a stack item takes the key as it is (a REST key: the same sentence is expected)]
type Case = [string, Record<string, unknown>, string, { update: boolean; sameText: boolean }];
const U = { update: true, sameText: true };
const C = { update: false, sameText: true };
const CASES: Case[] = [
  ["a 100,000-character nickname", { nickname: "n".repeat(100_000) }, "nickname", U],
  ["a number as a nickname", { nickname: 5 }, "nickname", U],
  ["an image given as a list", { image: ["x"] }, "image", U],
  ["an empty image", { image: "" }, "image", U],
  ["an image with spaces", { image: "bad image" }, "image", U],
  ["a null target_num_containers", { target_num_containers: null }, "target_num_containers", U],
  ["101 containers", { target_num_containers: 101 }, "target_num_containers", U],
  ["-1 containers", { target_num_containers: -1 }, "target_num_containers", U],
  ["1.5 containers", { target_num_containers: 1.5 }, "target_num_containers", U],
  ["containers as a word", { target_num_containers: "many" }, "target_num_containers", U],
  ["an unknown autorestart value", { autorestart: "SOMETIMES" }, "autorestart", U],
  [
    "an unknown autodestroy value",
    { autodestroy: "NEVER" },
    "autodestroy",
    { update: true, sameText: false },
  ],
  [
    "an unknown deployment strategy",
    { deployment_strategy: "RANDOM" },
    "deployment_strategy",
    { update: true, sameText: false },
  ],
  ["a string as a boolean", { privileged: "yes" }, "privileged", U],
  ["an unknown net", { net: "overlay" }, "net", U],
  ["an unknown pid", { pid: "container" }, "pid", U],
  ["a role other than global", { roles: ["admin"] }, "roles[0]", U],
  ["a relative working_dir", { working_dir: "srv" }, "working_dir", U],
  ["a run_command with an open quote", { run_command: 'echo "open' }, "run_command", U],
  ["a number as a run_command", { run_command: 5 }, "run_command", U],
  ["ports that are not a list", { container_ports: "80" }, "container_ports", U],
  [
    "inner port 70000",
    { container_ports: [{ protocol: "tcp", inner_port: 70000 }] },
    "container_ports[0].inner_port",
    U,
  ],
  [
    "an object as a port",
    { container_ports: [{ protocol: "tcp", inner_port: { n: 1 } }] },
    "container_ports[0].inner_port",
    U,
  ],
  [
    "protocol sctp",
    { container_ports: [{ protocol: "sctp", inner_port: 80 }] },
    "container_ports[0].protocol",
    U,
  ],
  [
    "outer port 65536",
    { container_ports: [{ protocol: "tcp", inner_port: 80, outer_port: 65536, published: true }] },
    "container_ports[0].outer_port",
    U,
  ],
  [
    "a published flag that is text",
    { container_ports: [{ protocol: "tcp", inner_port: 80, published: "sure" }] },
    "container_ports[0].published",
    U,
  ],
  [
    "the same port twice",
    {
      container_ports: [
        { protocol: "tcp", inner_port: 80 },
        { protocol: "tcp", inner_port: 80 },
      ],
    },
    "container_ports[1].inner_port",
    U,
  ],
  [
    "201 environment variables",
    { container_envvars: Array.from({ length: 201 }, (_, i) => ({ key: `K${i}`, value: "v" })) },
    "container_envvars",
    U,
  ],
  ["a variable without a value", { container_envvars: [{ key: "A" }] }, "container_envvars[0].value", U],
  ["a variable named 1X", { container_envvars: [{ key: "1X", value: "" }] }, "container_envvars[0].key", U],
  ["tags given as a string", { tags: "abc" }, "tags", U],
  ["51 tags", { tags: Array.from({ length: 51 }, (_, i) => `t${i}`) }, "tags", U],
  ["an empty tag", { tags: [""] }, "tags[0]", U],
  ["memory of 1e308", { memory: 1e308 }, "memory", U],
  ["memory over 1 TiB", { memory: 1048577 }, "memory", U],
  ["memory as a word", { memory: "lots" }, "memory", U],
  ["memory below the engine's minimum", { memory: 3 }, "memory", U],
  ["cpu_shares over Docker's range", { cpu_shares: 262145 }, "cpu_shares", U],
  ["negative cpu_shares", { cpu_shares: -1 }, "cpu_shares", U],
  [
    "a link to no service",
    { linked_to_service: [{ to_service: "/api/app/v1/alice/service/0000/" }] },
    "linked_to_service[0].to_service",
    U,
  ],
  // Keys only Create service takes: a stack update may send them only unchanged.
  [
    "a rewritable flag that is text",
    { bindings: [{ container_path: "/data", rewritable: "rw" }] },
    "bindings[0].rewritable",
    C,
  ],
  ["a label value that is a number", { labels: { team: 3 } }, "labels.team", C],
  ["a label in Berth's namespace", { labels: { "io.berth.node": "x" } }, "labels.io.berth.node", C],
  ["a 2,000-character user", { user: "u".repeat(2000) }, "user", C],
  ["a host name that is not one", { hostname: "-bad-" }, "hostname", C],
  ["a DNS server that is not an address", { dns: ["resolver"] }, "dns[0]", C],
  ["a memory_swap without memory", { memory_swap: 128 }, "memory_swap", C],
];

describe("what /service/ refuses, a stack refuses too", () => {
  for (const [what, fields, field, how] of CASES) {
    test(`${what}: create, update and stack create/update refuse it naming ${field}`, async () => {
      const services = await count("/api/app/v1/service/");
      const stacks = await count("/api/app/v1/stack/");

      const direct = problemOf(
        await call(h, alice, "POST", "/api/app/v1/service/", { ...IMAGE, ...fields }),
        field,
      );
      const created = problemOf(
        await call(h, alice, "POST", "/api/app/v1/stack/", {
          name: "st",
          services: [{ name: "web2", ...IMAGE, ...fields }],
        }),
        `services.web2.${field}`,
      );
      const added = problemOf(
        await call(h, alice, "PATCH", stack.resource_uri, {
          services: [{ name: "added", ...IMAGE, ...fields }],
        }),
        `services.added.${field}`,
      );
      const updated = problemOf(
        await call(h, alice, "PATCH", stack.resource_uri, { services: [{ name: "web", ...fields }] }),
        `services.web.${field}`,
      );
      if (how.sameText) {
        assert.equal(created.problem, direct.problem);
        assert.equal(added.problem, direct.problem);
      }
      if (how.update) {
        const patched = problemOf(await call(h, alice, "PATCH", web.resource_uri, fields), field);
        if (how.sameText) assert.equal(updated.problem, patched.problem);
      }
      assert.equal(await count("/api/app/v1/service/"), services, "no service was created");
      assert.equal(await count("/api/app/v1/stack/"), stacks, "no stack was created");
    });
  }

  test("refusals leave the stack's service as it was", async () => {
    const now = (await call(h, alice, "GET", web.resource_uri)).body;
    assert.equal(now.nickname, "web");
    assert.equal(now.target_num_containers, 1);
    assert.equal(now.memory, null);
  });
});
