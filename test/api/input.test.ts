// Input that holds (issue 14 item 3): strict JSON types, bounds on numbers, strings and lists,
// stack items held to the rules of /service/, 405 with Allow for every method a path lacks, and
// `{error, code}` bodies from the HTTP layer itself (Node's parser, Fastify's router).
import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import net from "node:net";
import { after, before, describe, test } from "node:test";
import { basic, type Caller, call, createUser, type Harness, startHarness } from "../support/harness.ts";

let h: Harness;
let alice: Caller;
let port: number;

before(async () => {
  h = await startHarness();
  alice = await createUser(h, "alice");
  await h.app.listen({ port: 0, host: "127.0.0.1" });
  port = (h.app.server.address() as AddressInfo).port;
});

after(async () => {
  await h.close();
});

function assertRefused(res: { status: number; body: unknown; raw: string }, field: string): void {
  assert.equal(res.status, 400, res.raw);
  const body = res.body as { code: string; error: string; details?: { field: string }[] };
  assert.equal(body.code, "invalid_field");
  const fields = (body.details ?? []).map((d) => d.field);
  assert.ok(
    fields.some((f) => f === field || f.endsWith(`.${field}`)),
    `${field} named in ${JSON.stringify(body)}`,
  );
}

async function serviceCount(): Promise<number> {
  return (await call(h, alice, "GET", "/api/app/v1/service/")).body.meta.total_count;
}

describe("strict types", () => {
  const cases: [string, Record<string, unknown>, string][] = [
    ["an image given as a list", { image: ["x"] }, "image"],
    ["a null target_num_containers", { image: "x", target_num_containers: null }, "target_num_containers"],
    ["tags given as a string", { image: "x", tags: "abc" }, "tags"],
    ["a boolean as a name", { image: "x", name: true }, "name"],
    ["a number as a run_command", { image: "x", run_command: 5 }, "run_command"],
    ["a string as a boolean", { image: "x", privileged: "yes" }, "privileged"],
    [
      "an object as a port",
      { image: "x", container_ports: [{ protocol: "tcp", inner_port: { n: 1 } }] },
      "container_ports[0].inner_port",
    ],
    ["a float where an integer goes", { image: "x", target_num_containers: 1.5 }, "target_num_containers"],
    ["a non-numeric string where an integer goes", { image: "x", memory: "lots" }, "memory"],
  ];
  for (const [what, body, field] of cases) {
    test(`${what} is 400 naming ${field}, and nothing is created`, async () => {
      const before = await serviceCount();
      assertRefused(await call(h, alice, "POST", "/api/app/v1/service/", body), field);
      assert.equal(await serviceCount(), before);
    });
  }

  test("numeric strings stay accepted where integers go (CONTRACT §12)", async () => {
    const res = await call(h, alice, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: "numeric",
      target_num_containers: "2",
      container_ports: [{ protocol: "tcp", inner_port: "80" }],
    });
    assert.equal(res.status, 201, res.raw);
    assert.equal(res.body.target_num_containers, 2);
    assert.equal(res.body.container_ports[0].inner_port, 80);
  });

  test("a user named true from {username: true} is refused", async () => {
    const res = await call(h, h.admin, "POST", "/api/v1.1/users/", {
      username: true,
      email: "t@example.test",
      password: "long-enough-password",
    });
    assertRefused(res, "username");
  });
});

describe("bounds", () => {
  for (const offset of ["99999999999999999999", String(2 ** 63), "1e308", "-1", "abc"]) {
    test(`offset=${offset} is 400 on every list, never 500`, async () => {
      for (const path of [
        "/api/app/v1/service/",
        "/api/app/v1/container/",
        "/api/app/v1/stack/",
        "/api/infra/v1/node/",
        "/api/infra/v1/nodecluster/",
        "/api/audit/v1/action/",
        "/api/repo/v1/registry/",
        "/api/infra/v1/region/",
      ]) {
        const res = await call(h, alice, "GET", `${path}?offset=${offset}`);
        assert.equal(res.status, 400, `${path}: ${res.raw}`);
        assert.equal(res.body.code, "invalid_field");
      }
    });
  }

  const tooBig: [string, Record<string, unknown>, string][] = [
    ["memory of 1e308", { image: "x", memory: 1e308 }, "memory"],
    ["memory over 1 TiB", { image: "x", memory: 1048577 }, "memory"],
    ["cpu_shares over Docker's range", { image: "x", cpu_shares: 262145 }, "cpu_shares"],
    ["a 100,000-character nickname", { image: "x", nickname: "n".repeat(100_000) }, "nickname"],
    ["a 60-character name", { image: "x", name: "a".repeat(60) }, "name"],
    [
      "201 environment variables",
      {
        image: "x",
        container_envvars: Array.from({ length: 201 }, (_, i) => ({ key: `K${i}`, value: "v" })),
      },
      "container_envvars",
    ],
    ["51 tags", { image: "x", tags: Array.from({ length: 51 }, (_, i) => `t${i}`) }, "tags"],
    [
      "101 ports",
      {
        image: "x",
        container_ports: Array.from({ length: 101 }, (_, i) => ({ protocol: "tcp", inner_port: i + 1 })),
      },
      "container_ports",
    ],
  ];
  for (const [what, body, field] of tooBig) {
    test(`${what} is 400 naming ${field}`, async () => {
      assertRefused(await call(h, alice, "POST", "/api/app/v1/service/", body), field);
    });
  }
});

describe("stack items are held to the rules of /service/", () => {
  const items: [string, Record<string, unknown>, string][] = [
    ["a 100,000-character nickname", { name: "web", image: "x", nickname: "n".repeat(100_000) }, "nickname"],
    ["an image given as a list", { image: ["x"] }, "image"],
    [
      "a null target_num_containers",
      { name: "web", image: "x", target_num_containers: null },
      "target_num_containers",
    ],
    ["memory of 1e308", { name: "web", image: "x", memory: 1e308 }, "memory"],
    ["tags given as a string", { name: "web", image: "x", tags: "abc" }, "tags"],
    ["51 tags", { name: "web", image: "x", tags: Array.from({ length: 51 }, (_, i) => `t${i}`) }, "tags"],
  ];
  for (const [what, item, field] of items) {
    test(`${what} is 400 through a stack as through /service/`, async () => {
      const res = await call(h, alice, "POST", "/api/app/v1/stack/", { name: "st", services: [item] });
      assertRefused(res, field);
      assert.equal((await call(h, alice, "GET", "/api/app/v1/stack/?name=st")).body.meta.total_count, 0);
    });
  }
});

describe("methods a path does not define", () => {
  for (const method of ["OPTIONS", "TRACE", "PROPFIND", "PUT"]) {
    test(`${method} on an existing path is 405 with Allow`, async () => {
      for (const path of [
        "/api/app/v1/service/",
        "/api/app/v1/alice/service/0000/",
        "/api/audit/v1/action/",
      ]) {
        const res = await rawRequest(
          `${method} ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: ${alice.auth}\r\nConnection: close\r\n\r\n`,
        );
        assert.equal(res.status, 405, `${method} ${path}: ${res.text}`);
        assert.match(res.headers.allow ?? "", /GET/);
        assertErrorBody(res.body, "method_not_allowed");
      }
    });
  }

  test("an unknown path stays 404", async () => {
    const res = await call(h, alice, "OPTIONS", "/api/app/v1/nothing/here/at/all/");
    assert.equal(res.status, 404);
  });
});

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: unknown;
  text: string;
}

/** Sends bytes as they are (inject() would refuse what Node's parser refuses) and reads the answer. */
function rawRequest(bytes: string): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1", () => socket.write(bytes));
    let text = "";
    socket.setEncoding("latin1");
    socket.on("data", (d: string) => {
      text += d;
    });
    socket.on("error", reject);
    socket.on("close", () => {
      const [head = "", ...rest] = text.split("\r\n\r\n");
      const [statusLine = "", ...lines] = head.split("\r\n");
      const headers: Record<string, string> = {};
      for (const l of lines) {
        const i = l.indexOf(":");
        headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
      }
      let body: unknown;
      try {
        body = JSON.parse(rest.join("\r\n\r\n"));
      } catch {
        body = rest.join("\r\n\r\n");
      }
      resolve({ status: Number(statusLine.split(" ")[1]), headers, body, text });
    });
    setTimeout(() => socket.destroy(), 5000).unref();
  });
}

function assertErrorBody(body: unknown, code?: string): void {
  assert.ok(typeof body === "object" && body !== null, `a JSON object, got ${JSON.stringify(body)}`);
  const b = body as { error?: unknown; code?: unknown };
  assert.equal(typeof b.error, "string");
  assert.match(String(b.code), /^[a-z][a-z0-9_]*$/);
  assert.deepEqual(Object.keys(b).sort(), ["code", "error"]);
  if (code) assert.equal(b.code, code);
}

describe("errors of the HTTP layer itself are {error, code}", () => {
  const auth = () => `Authorization: ${alice.auth}\r\n`;
  test("a bad percent-escape is 400 bad_url, and an authenticated POST records its action", async () => {
    const res = await rawRequest(
      `POST /api/app/v1/service/%zz/start/ HTTP/1.1\r\nHost: x\r\n${auth()}Content-Length: 0\r\nConnection: close\r\n\r\n`,
    );
    assert.equal(res.status, 400, res.text);
    assertErrorBody(res.body, "bad_url");
    const uri = res.headers["x-platform-action-uri"];
    assert.ok(uri, "the refused call has its action");
    const action = await call(h, alice, "GET", uri);
    assert.equal(action.status, 200);
    assert.equal(action.body.state, "Failed");
  });

  test("a path segment over the router's limit is 414", async () => {
    const res = await rawRequest(
      `GET /api/app/v1/service/${"a".repeat(300)}/ HTTP/1.1\r\nHost: x\r\n${auth()}Connection: close\r\n\r\n`,
    );
    assert.equal(res.status, 414, res.text);
    assertErrorBody(res.body, "uri_too_long");
  });

  test("headers over 16 KiB are 431", async () => {
    const res = await rawRequest(
      `GET /api/app/v1/service/ HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\nConnection: close\r\n\r\n`,
    );
    assert.equal(res.status, 431, res.text);
    assertErrorBody(res.body, "headers_too_large");
  });

  test("a method Node does not know is answered with {error, code}; on a known path 405 and its action", async () => {
    const res = await rawRequest(
      `FROB /api/app/v1/service/ HTTP/1.1\r\nHost: x\r\n${auth()}Connection: close\r\n\r\n`,
    );
    assert.equal(res.status, 405, res.text);
    assertErrorBody(res.body, "method_not_allowed");
    assert.ok(res.headers["x-platform-action-uri"], "the refused call has its action");
    const garbage = await rawRequest("FROB\r\n\r\n");
    assert.equal(garbage.status, 400, garbage.text);
    assertErrorBody(garbage.body);
  });

  test("without credentials nothing is recorded", async () => {
    const res = await rawRequest(
      `POST /api/app/v1/service/%zz/start/ HTTP/1.1\r\nHost: x\r\nAuthorization: ${basic("alice", "wrong")}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`,
    );
    assert.equal(res.status, 400);
    assert.equal(res.headers["x-platform-action-uri"], undefined);
  });
});
