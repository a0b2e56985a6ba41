// The Create and Update service schemas as the server checks them: one compiled check each
// (contract/check.ts), used by the /service/ routes and by stack items alike. Strict JSON types
// (numeric strings are converted before it, by the route's input step or the stack-file
// conversion), every problem named by its field as CONTRACT §6 shows, and every bound stated in
// the schema itself (api/input.ts adds none), so the OpenAPI document and the check agree.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { boundSchema } from "../../src/api/input.ts";
import { serviceCreateCheck, serviceUpdateCheck } from "../../src/contract/check.ts";
import { ServiceCreateBody, ServiceUpdateBody } from "../../src/contract/service.ts";

const problems = (body: unknown) => serviceCreateCheck.problems(body);

describe("Create service check", () => {
  test("a full body fits; echoed read-only port and link fields are ignored", () => {
    const body = {
      image: "nginx",
      target_num_containers: 3,
      memory: 512,
      tags: ["web", { name: "eu" }],
      secuirty_opt: ["label:disable"],
      cgroup_name: "/berth",
      labels: { team: "web" },
      container_ports: [
        { protocol: "tcp", inner_port: 80, port_name: "web", endpoint_uri: null, uri_protocol: "http" },
      ],
      linked_to_service: [{ to_service: "/api/app/v1/alice/service/x/", from_service: "/y/", name: "db" }],
      bindings: [{ container_path: "/data" }],
    };
    assert.deepEqual(problems(body), []);
    assert.ok(serviceCreateCheck.fits(body));
  });

  test("problems name fields as CONTRACT §6 shows", () => {
    assert.deepEqual(
      problems({ image: "nginx", container_ports: [{ protocol: "tcp", inner_port: 70000 }] }),
      [{ field: "container_ports[0].inner_port", problem: "must be an integer between 1 and 65535" }],
    );
    assert.deepEqual(problems({ name: "web" }), [{ field: "image", problem: "is required" }]);
    assert.deepEqual(problems({ image: "nginx", enviroment: [] }), [
      { field: "enviroment", problem: "is not a known field" },
    ]);
    assert.deepEqual(problems({ image: "nginx", autorestart: "SOMETIMES" }), [
      { field: "autorestart", problem: "must be one of OFF, ON_FAILURE, ALWAYS" },
    ]);
    assert.deepEqual(problems({ image: "nginx", roles: ["admin"] }), [
      { field: "roles[0]", problem: "must be one of global" },
    ]);
    assert.deepEqual(problems("nginx"), [{ field: "body", problem: "must be an object" }]);
  });

  test("a value no branch of a union takes: the bound it broke, or the types it may have", () => {
    assert.deepEqual(problems({ image: "x", memory: 1e308 }), [
      { field: "memory", problem: "must be an integer between 0 and 1048576" },
    ]);
    assert.deepEqual(problems({ image: "x", memory: "lots" }), [
      { field: "memory", problem: "must be null or an integer" },
    ]);
    assert.deepEqual(problems({ image: "x", tags: [{ name: "" }] }), [
      { field: "tags[0].name", problem: "cannot be empty" },
    ]);
  });

  test("no coercion: numeric strings are converted before the check, not by it", () => {
    assert.deepEqual(problems({ image: "x", target_num_containers: "3" }), [
      { field: "target_num_containers", problem: "must be an integer" },
    ]);
  });

  test("every problem of a body is reported at once", () => {
    assert.deepEqual(
      problems({ image: 1, nickname: "n".repeat(201), net: "overlay" })
        .map((p) => p.field)
        .sort(),
      ["image", "net", "nickname"],
    );
  });
});

describe("Update service check", () => {
  test("fields that cannot be updated are refused by name", () => {
    for (const field of ["name", "bindings", "labels", "memory_swap"]) {
      assert.deepEqual(serviceUpdateCheck.problems({ [field]: field === "name" ? "x" : [] }), [
        { field, problem: "is not a known field" },
      ]);
    }
    assert.deepEqual(serviceUpdateCheck.problems({ nickname: "Front", memory: 256, tags: ["web"] }), []);
  });
});

describe("bounds", () => {
  test("every bound is stated in the schema: the route's default bounds add nothing", () => {
    for (const schema of [ServiceCreateBody, ServiceUpdateBody]) {
      const bounded = structuredClone(schema);
      boundSchema(bounded);
      assert.deepEqual(bounded, structuredClone(schema));
    }
  });
});
