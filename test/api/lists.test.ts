// The list envelope's size cap (api/lists.ts): a page stops before its JSON passes the cap, says
// how many objects it holds, and `next` continues right after them, so following `next` (or
// offset + meta.limit) still returns every object exactly once.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { FastifyRequest } from "fastify";
import { envelope, MAX_PAGE_CHARS } from "../../src/api/lists.ts";

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
