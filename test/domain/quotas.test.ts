// The pure rules of quotas (domain/quotas.ts): which limit is in force, when a count is over it,
// and how a service's environment is measured.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ApiError } from "../../src/domain/errors.ts";
import {
  assertEnvWithin,
  assertWithinQuota,
  DEFAULT_LIMITS,
  envSize,
  limitOf,
  utf8Length,
} from "../../src/domain/quotas.ts";

describe("quota rules", () => {
  test("the limit set wins over the default; null means none; an administrator's namespace has no default", () => {
    assert.equal(limitOf("services", {}), DEFAULT_LIMITS.services);
    assert.equal(limitOf("services", { services: 3 }), 3);
    assert.equal(limitOf("services", { services: null }), null);
    assert.equal(limitOf("services", {}, { exempt: true }), null);
    assert.equal(limitOf("services", { services: 5 }, { exempt: true }), 5);
  });

  test("a count reaching the limit passes, one more is a 403 naming limit and usage; asking nothing always passes", () => {
    assert.doesNotThrow(() => assertWithinQuota("acme", "stacks", 2, 1));
    assert.throws(
      () => assertWithinQuota("acme", "stacks", 2, 2),
      (err: unknown) =>
        err instanceof ApiError &&
        err.kind === "forbidden" &&
        err.code === "quota_exceeded" &&
        /acme has 2 stacks and its limit is 2/.test(err.message),
    );
    assert.doesNotThrow(() => assertWithinQuota("acme", "containers", 2, 5, 0));
    assert.doesNotThrow(() => assertWithinQuota("acme", "containers", null, 5_000, 10));
  });

  test("environment size counts keys and values in UTF-8 bytes", () => {
    for (const s of ["", "a", "é", "€", "😀", "\ud800x", "\udc00"])
      assert.equal(utf8Length(s), Buffer.byteLength(s), s);
    assert.deepEqual(envSize([{ key: "K", value: "€€" }]), { count: 1, bytes: 7 });
    assert.throws(
      () => assertEnvWithin("acme", [{ key: "K", value: "x".repeat(20) }], { count: 10, bytes: 16 }),
      (err: unknown) => err instanceof ApiError && err.details?.[0]?.field === "container_envvars",
    );
  });
});
