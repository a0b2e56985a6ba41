// The list envelope's size cap (api/lists.ts): a page stops before its JSON passes the cap, says
// how many objects it holds, and `next` continues right after them, so following `next` (or
// offset + meta.limit) still returns every object exactly once. And a list's `state=` filter takes
// only the kind's states (domain/states.ts), by schema: a wrong one is a 400 naming `state` and
// listing them, and OpenAPI lists them too.
import assert from "node:assert/strict";
import fs from "node:fs";
import { after, before, describe, test } from "node:test";
import type { FastifyRequest } from "fastify";
import { envelope, MAX_PAGE_CHARS } from "../../src/api/lists.ts";
import { STACK_STATES } from "../../src/domain/stack.ts";
import {
  ACTION_STATES,
  CLUSTER_STATES,
  CONTAINER_STATES,
  NODE_STATES,
  SERVICE_STATES,
} from "../../src/domain/states.ts";
import { call, type Harness, startHarness } from "../support/harness.ts";

const rows = Array.from({ length: 10 }, (_, i) => ({ n: i, pad: "x".repeat(i === 4 ? 5000 : 100) }));
const requestOf = (url: string) => ({ url }) as FastifyRequest;

function page(url: string, maxChars: number) {
  const q = new URLSearchParams(url.split("?")[1]);
  const limit = Number(q.get("limit") ?? 25);
  const offset = Number(q.get("offset") ?? 0);
  return envelope(
    requestOf(url),
    { limit, offset },
    rows.length,
    rows.slice(offset, offset + limit),
    maxChars,
  );
}

describe("the list envelope's size cap", () => {
  test("a page under the cap is untouched", () => {
    const e = page("/api/app/v1/service/?limit=4&state=Running", MAX_PAGE_CHARS);
    assert.equal(e.objects.length, 4);
    assert.deepEqual(e.meta, {
      limit: 4,
      offset: 0,
      total_count: 10,
      next: "/api/app/v1/service/?limit=4&state=Running&offset=4",
      previous: null,
    });
  });

  test("a page over the cap stops early, says how many it holds, and next continues after them", () => {
    const e = page("/api/app/v1/service/?limit=8", 1000);
    // Objects 0–3 are ~110 characters each; object 4 alone is over the cap.
    assert.deepEqual(
      e.objects.map((o) => o.n),
      [0, 1, 2, 3],
    );
    assert.equal(e.meta.limit, 4);
    assert.equal(e.meta.next, "/api/app/v1/service/?limit=8&offset=4");
  });

  test("following next returns every object once, and an object larger than the cap still comes alone", () => {
    const seen: number[] = [];
    let url: string | null = "/api/app/v1/service/?limit=8";
    let pages = 0;
    while (url && pages++ < 20) {
      const e = page(url, 1000);
      assert.ok(e.objects.length >= 1, "every page makes progress");
      seen.push(...e.objects.map((o) => o.n));
      url = e.meta.next;
    }
    assert.deepEqual(seen, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });
});

describe("state filters of lists", () => {
  const LISTS: { path: string; states: readonly string[] }[] = [
    { path: "/api/app/v1/service/", states: SERVICE_STATES },
    { path: "/api/app/v1/container/", states: CONTAINER_STATES },
    { path: "/api/app/v1/stack/", states: STACK_STATES },
    { path: "/api/infra/v1/nodecluster/", states: CLUSTER_STATES },
    { path: "/api/infra/v1/node/", states: NODE_STATES },
    { path: "/api/audit/v1/action/", states: ACTION_STATES },
  ];
  let h: Harness;
  before(async () => {
    h = await startHarness();
  });
  after(async () => {
    await h.close();
  });

  test("a known state filters; an unknown one (or another kind's) is 400 invalid_field naming state and listing the states", async () => {
    for (const { path, states } of LISTS) {
      const ok = await call(h, h.admin, "GET", `${path}?state=${encodeURIComponent(states[0]!)}`);
      assert.equal(ok.status, 200, path);
      for (const wrong of ["running", "Nope"]) {
        const res = await call(h, h.admin, "GET", `${path}?state=${wrong}`);
        assert.equal(res.status, 400, `${path}?state=${wrong}`);
        assert.equal(res.body.code, "invalid_field");
        assert.equal(typeof res.body.error, "string");
        assert.match(res.body.error, /state/);
        assert.deepEqual(res.body.details, [
          { field: "state", problem: `must be one of ${states.join(", ")}` },
        ]);
      }
    }
  });

  test("state__not leaves a state out (hide terminated); an unknown one is 400 invalid_field naming state__not", async () => {
    for (const { path } of LISTS.filter((l) => l.path !== "/api/audit/v1/action/")) {
      const ok = await call(h, h.admin, "GET", `${path}?state__not=Terminated`);
      assert.equal(ok.status, 200, `${path}: ${ok.raw}`);
      for (const o of ok.body.objects as { state: string }[]) assert.notEqual(o.state, "Terminated", path);
      const bad = await call(h, h.admin, "GET", `${path}?state__not=Nope`);
      assert.equal(bad.status, 400, path);
      assert.equal(bad.body.code, "invalid_field");
      assert.equal(bad.body.details?.[0]?.field, "state__not", path);
    }
  });

  test("name__icontains finds names containing the text in any case (wildcards are text); order_by sorts", async () => {
    for (const name of ["Alpha-web", "beta-web", "gamma_db", "delta%db"]) {
      const made = await call(h, h.admin, "POST", "/api/app/v1/service/", {
        image: "busybox:local",
        name: name.toLowerCase().replace(/[%_]/g, "-"),
      });
      assert.equal(made.status, 201, made.raw);
    }
    const names = async (q: string) =>
      ((await call(h, h.admin, "GET", `/api/app/v1/service/?${q}`)).body.objects as { name: string }[]).map(
        (o) => o.name,
      );
    assert.deepEqual(await names("name__icontains=WEB&order_by=name"), ["alpha-web", "beta-web"]);
    assert.deepEqual(await names("name__icontains=WEB&order_by=-name"), ["beta-web", "alpha-web"]);
    assert.deepEqual(await names("name__icontains=%25"), [], "% is a character, not a wildcard");
    assert.deepEqual(await names("name__icontains=a-d&order_by=name"), ["delta-db", "gamma-db"]);
    for (const { path } of LISTS.filter((l) => l.path !== "/api/audit/v1/action/")) {
      const ok = await call(h, h.admin, "GET", `${path}?name__icontains=zz-none&order_by=state`);
      assert.equal(ok.status, 200, `${path}: ${ok.raw}`);
      assert.equal(ok.body.meta.total_count, 0, path);
      const bad = await call(h, h.admin, "GET", `${path}?order_by=color`);
      assert.equal(bad.status, 400, path);
      assert.equal(bad.body.details?.[0]?.field, "order_by", path);
    }
  });

  test("OpenAPI lists each list's states", () => {
    const doc = JSON.parse(fs.readFileSync(new URL("../../docs/openapi.json", import.meta.url), "utf8")) as {
      paths: Record<
        string,
        { get?: { parameters?: { in: string; name: string; schema: { enum?: string[] } }[] } }
      >;
    };
    for (const { path, states } of LISTS) {
      const state = doc.paths[path]?.get?.parameters?.find((p) => p.in === "query" && p.name === "state");
      assert.deepEqual(state?.schema.enum, [...states], path);
    }
  });
});
