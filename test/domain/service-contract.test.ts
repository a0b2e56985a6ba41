// The Create and Update service schemas as the server validates them: Fastify's ajv with the
// options of api/app.ts (coerceTypes "array", useDefaults), so numeric strings pass (CONTRACT §12),
// defaults are filled, and refusals carry what api/errors.ts turns into `details`.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import Fastify, { type FastifyInstance } from "fastify";
import { ServiceCreateBody, ServiceUpdateBody } from "../../src/contract/service.ts";

interface Validation {
  instancePath: string;
  keyword: string;
  params: Record<string, unknown>;
}

let app: FastifyInstance;

before(async () => {
  app = Fastify({
    ajv: {
      customOptions: { coerceTypes: "array", useDefaults: true, removeAdditional: false, allErrors: false },
    },
  });
  app.setErrorHandler((error: { validation?: Validation[] }, _request, reply) =>
    reply.status(400).send({ validation: error.validation }),
  );
  app.post("/create", { schema: { body: ServiceCreateBody } }, async (request) => ({ body: request.body }));
  app.post("/update", { schema: { body: ServiceUpdateBody } }, async (request) => ({ body: request.body }));
  await app.ready();
});

after(async () => {
  await app.close();
});

async function post(path: string, payload: unknown) {
  const res = await app.inject({ method: "POST", url: path, payload: payload as object });
  return {
    status: res.statusCode,
    body: res.json() as { body?: Record<string, unknown>; validation?: Validation[] },
  };
}

describe("Create service schema", () => {
  test("numeric and boolean strings are coerced; item defaults are filled", async () => {
    const res = await post("/create", {
      image: "nginx",
      target_num_containers: "3",
      memory: "512",
      container_ports: [
        { protocol: "tcp", inner_port: "80", outer_port: "8080", published: "true" },
        { protocol: "udp", inner_port: 53 },
      ],
      bindings: [{ container_path: "/data" }],
    });
    assert.equal(res.status, 200);
    const body = res.body.body!;
    assert.equal(body.target_num_containers, 3);
    assert.equal(body.memory, 512);
    assert.deepEqual(body.container_ports, [
      { protocol: "tcp", inner_port: 80, outer_port: 8080, published: true },
      { protocol: "udp", inner_port: 53, published: false },
    ]);
    assert.deepEqual(body.bindings, [{ container_path: "/data", rewritable: true }]);
  });

  test("an empty outer_port or memory reads as null (unset)", async () => {
    const res = await post("/create", {
      image: "nginx",
      memory: "",
      container_ports: [{ protocol: "tcp", inner_port: 80, outer_port: "", published: true }],
    });
    assert.equal(res.status, 200);
    assert.equal(res.body.body?.memory, null);
    const ports = (res.body.body?.container_ports ?? []) as { outer_port: unknown }[];
    assert.equal(ports[0]?.outer_port, null);
  });

  test("tags as strings, the misspelled aliases and echoed read-only port fields are accepted", async () => {
    const res = await post("/create", {
      image: "nginx",
      tags: ["web", { name: "eu" }],
      secuirty_opt: ["label:disable"],
      cgroup_name: "/berth",
      labels: { team: "web" },
      container_ports: [
        { protocol: "tcp", inner_port: 80, port_name: "web", endpoint_uri: null, uri_protocol: "http" },
      ],
      linked_to_service: [{ to_service: "/api/app/v1/alice/service/x/", from_service: "/y/", name: "db" }],
    });
    assert.equal(res.status, 200);
  });

  test("image is required", async () => {
    const res = await post("/create", { name: "web" });
    assert.equal(res.status, 400);
    assert.equal(res.body.validation?.[0]?.keyword, "required");
  });

  test("enumerations are `enum`, so the error lists the allowed values", async () => {
    const res = await post("/create", { image: "nginx", autorestart: "SOMETIMES" });
    assert.equal(res.status, 400);
    assert.equal(res.body.validation?.[0]?.keyword, "enum");
    assert.equal(res.body.validation?.[0]?.instancePath, "/autorestart");
    assert.deepEqual(res.body.validation?.[0]?.params.allowedValues, ["OFF", "ON_FAILURE", "ALWAYS"]);
    const role = await post("/create", { image: "nginx", roles: ["admin"] });
    assert.equal(role.body.validation?.[0]?.instancePath, "/roles/0");
  });

  test("ports out of range and unknown body fields are refused", async () => {
    const port = await post("/create", {
      image: "nginx",
      container_ports: [{ protocol: "tcp", inner_port: 70000 }],
    });
    assert.equal(port.status, 400);
    assert.equal(port.body.validation?.[0]?.instancePath, "/container_ports/0/inner_port");
    const typo = await post("/create", { image: "nginx", enviroment: [] });
    assert.equal(typo.status, 400);
    assert.equal(typo.body.validation?.[0]?.keyword, "additionalProperties");
    assert.equal(typo.body.validation?.[0]?.params.additionalProperty, "enviroment");
  });
});

describe("Update service schema", () => {
  test("the spec's updatable fields pass, with coercion", async () => {
    const res = await post("/update", {
      image: "nginx:1.25",
      target_num_containers: "2",
      cpu_shares: "512",
      memory: 256,
      tags: ["web"],
      deployment_strategy: "HIGH_AVAILABILITY",
      nickname: "Front",
    });
    assert.equal(res.status, 200);
    assert.equal(res.body.body?.target_num_containers, 2);
    assert.equal(res.body.body?.cpu_shares, 512);
  });

  test("fields that cannot be updated are refused by name", async () => {
    for (const field of ["name", "bindings", "labels", "memory_swap"]) {
      const res = await post("/update", { [field]: field === "name" ? "x" : [] });
      assert.equal(res.status, 400, field);
      assert.equal(res.body.validation?.[0]?.params.additionalProperty, field);
    }
  });
});
