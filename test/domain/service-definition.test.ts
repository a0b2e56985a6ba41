// One source for the service definition: the contract's Create service schema lists its fields
// (SERVICE_FIELDS), and every other place that handles them follows it — stack files take each
// as a REST key, a stack update compares each create-only one in the stored spec, the dashboard's
// form sends exactly the ones it says it offers (and says why of the others), and the CLI has an
// option for each it says it offers. Adding a field to the contract and not to these fails here
// (and, for the form and the CLI, fails the compiler first).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Command } from "commander";
import { CLI_FIELDS, registerService } from "../../src/cli/commands/service.ts";
import { serviceCreateCheck, serviceUpdateCheck } from "../../src/contract/check.ts";
import { SERVICE_FIELDS, UPDATABLE_FIELDS } from "../../src/contract/service.ts";
import type { FieldProblem } from "../../src/domain/errors.ts";
import { DEFAULT_SPEC } from "../../src/domain/service.ts";
import { specFieldOf } from "../../src/domain/service-spec.ts";
import { convertServices } from "../../src/domain/stackfile.ts";
import { FORM_FIELDS, type FormValues, formBody } from "../../web/src/pages/service-body.ts";

const sorted = (keys: Iterable<string>) => [...keys].sort();

describe("one source for the service definition", () => {
  test("the contract lists Create service's fields, and Update service takes a subset of them", () => {
    assert.ok(SERVICE_FIELDS.includes("stop_signal") && SERVICE_FIELDS.includes("cap_add"));
    for (const f of UPDATABLE_FIELDS) assert.ok(SERVICE_FIELDS.includes(f as never), f);
  });

  test("a stack file takes every field of the contract as a REST key", () => {
    for (const field of SERVICE_FIELDS) {
      const problems: FieldProblem[] = [];
      convertServices([{ name: "web", image: "busybox", [field]: "x" }], problems);
      const unknown = problems.filter(
        (p) => p.field === `services.web.${field}` && /not supported/.test(p.problem),
      );
      assert.deepEqual(unknown, [], `${field} is refused as an unknown key of a stack item`);
    }
  });

  test("every create-only field but the name sets a field of the stored spec, so a stack update can keep it", () => {
    const specFields = new Set([...Object.keys(DEFAULT_SPEC), "image_name"]);
    for (const field of SERVICE_FIELDS) {
      if (field === "name" || UPDATABLE_FIELDS.has(field)) continue;
      const spec = specFieldOf(field);
      assert.ok(spec !== undefined && specFields.has(spec), `${field} maps to no ServiceSpec field`);
    }
    assert.equal(specFieldOf("cgroup_name"), "cgroup_parent");
    assert.equal(specFieldOf("secuirty_opt"), "security_opt");
  });

  const full: FormValues = {
    image: "busybox:local",
    name: "web",
    nickname: "Web",
    target: "2",
    runCommand: "sleep 1000",
    entrypoint: "/bin/sh -c",
    strategy: "HIGH_AVAILABILITY",
    autorestart: "ALWAYS",
    autodestroy: "ON_SUCCESS",
    autoredeploy: true,
    global: true,
    privileged: true,
    sequential: true,
    memory: "64",
    cpuShares: "512",
    net: "host",
    pid: "host",
    workingDir: "/srv",
    tags: "ssd, eu",
    stopSignal: "SIGINT",
    stopGracePeriod: "30",
    ports: [{ protocol: "tcp", inner_port: "80", outer_port: "8080", published: true }],
    envs: [{ key: "A", value: "1" }],
    links: [{ to_service: "/api/app/v1/user/service/5f0e1a4e-7a43-4b5c-8f7e-0c6a7d1b2c3d/", name: "db" }],
    bindings: [{ host_path: "", container_path: "/data", rewritable: true, volumes_from: "" }],
    health: {
      type: "http",
      command: "",
      port: "8080",
      path: "/ready",
      status: "204",
      interval: "0.5",
      timeout: "",
      retries: "2",
      startPeriod: "",
    },
    rollout: { order: "start-first", maxUnavailable: "", maxSurge: "2", delay: "1", failureAction: "pause" },
  };
  const offered = Object.entries(FORM_FIELDS)
    .filter(([, how]) => how === "offered")
    .map(([f]) => f);

  test("the dashboard's form mentions every field, and gives a reason for each it does not offer", () => {
    assert.deepEqual(sorted(Object.keys(FORM_FIELDS)), sorted(SERVICE_FIELDS));
    for (const [field, how] of Object.entries(FORM_FIELDS))
      if (how !== "offered") assert.ok(how.notOffered.length > 20, field);
    assert.ok(offered.includes("stop_signal") && offered.includes("stop_grace_period"));
  });

  test("the form creates with exactly the fields it offers, in a body Create service accepts", () => {
    const body = formBody(full, false);
    assert.deepEqual(sorted(Object.keys(body)), sorted(offered));
    assert.deepEqual(serviceCreateCheck.problems(body), []);
    assert.equal(body.stop_signal, "SIGINT");
    assert.equal(body.stop_grace_period, 30);
    // Only the health and rollout inputs that hold something are sent: the server's defaults fill the rest.
    assert.deepEqual(body.health_check, {
      type: "http",
      port: 8080,
      path: "/ready",
      status: 204,
      interval: 0.5,
      retries: 2,
    });
    assert.deepEqual(body.rollout, { order: "start-first", max_surge: 2, delay: 1, failure_action: "pause" });
  });

  test("the form edits with the offered fields Update service takes, and no other", () => {
    const body = formBody(full, true);
    assert.deepEqual(sorted(Object.keys(body)), sorted(offered.filter((f) => UPDATABLE_FIELDS.has(f))));
    assert.deepEqual(serviceUpdateCheck.problems(body), []);
    // Emptied stop inputs send null: the image's signal and the platform's grace period again.
    const cleared = formBody({ ...full, stopSignal: " ", stopGracePeriod: "" }, true);
    assert.equal(cleared.stop_signal, null);
    assert.equal(cleared.stop_grace_period, null);
    assert.deepEqual(serviceUpdateCheck.problems(cleared), []);
    // No kind and no order chosen: the image's check, and every container at once (null for both).
    const plain = formBody(
      { ...full, health: { ...full.health, type: "" }, rollout: { ...full.rollout, order: "" } },
      true,
    );
    assert.equal(plain.health_check, null);
    assert.equal(plain.rollout, null);
    const off = formBody({ ...full, health: { ...full.health, type: "none" } }, true);
    assert.deepEqual(off.health_check, { type: "none" });
    assert.deepEqual(serviceUpdateCheck.problems(off), []);
  });

  test("the CLI mentions every field, and has an option for each it offers", () => {
    assert.deepEqual(sorted(Object.keys(CLI_FIELDS)), sorted(SERVICE_FIELDS));
    const program = new Command("berth");
    registerService(program, () => assert.fail("no command runs here"));
    const service = program.commands.find((c) => c.name() === "service")!;
    const flags = (name: string) =>
      new Set((service.commands.find((c) => c.name() === name) as Command).options.map((o) => o.long ?? ""));
    const create = flags("create");
    const run = flags("run");
    const set = flags("set");
    for (const [field, how] of Object.entries(CLI_FIELDS)) {
      if (typeof how !== "string") {
        assert.ok(how.notOffered.length > 20, field);
        continue;
      }
      // create and run take the image as their argument and set cannot rename.
      if (field !== "image")
        assert.ok(create.has(how) && run.has(how), `service create lacks ${how} (${field})`);
      if (UPDATABLE_FIELDS.has(field)) assert.ok(set.has(how), `service set lacks ${how} (${field})`);
    }
  });
});
