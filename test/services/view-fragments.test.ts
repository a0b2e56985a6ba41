// Views kept under the key of the rows they were built from (orchestrator/views.ts ViewFragments):
// a view is served only under the same key, is frozen with its JSON noted (text and bytes, which a
// page joins without serializing it again), and the least recently used go first past the bound.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { bytesOf, jsonOf } from "../../src/domain/json.ts";
import { ViewFragments } from "../../src/orchestrator/view-fragments.ts";

describe("kept views", () => {
  test("a view is served under the key it was kept with, frozen, with its JSON", () => {
    const kept = new ViewFragments<{ name: string; tags: string[] }>(1000);
    const view = kept.keep("a", "k1", { name: "café", tags: ["x"] });
    assert.equal(kept.get("a", "k1"), view);
    assert.equal(kept.get("a", "k2"), undefined, "another key: rows changed since");
    assert.ok(Object.isFrozen(view) && Object.isFrozen(view.tags));
    assert.equal(jsonOf(view), JSON.stringify({ name: "café", tags: ["x"] }));
    assert.deepEqual(bytesOf(view), Buffer.from(JSON.stringify(view)));
  });

  test("past the bound the least recently used view goes first", () => {
    const kept = new ViewFragments<{ pad: string }>(250);
    const v = (n: number) => ({ pad: String(n).repeat(90) });
    kept.keep("a", "k", v(1));
    kept.keep("b", "k", v(2));
    assert.ok(kept.get("a", "k"), "a is used again");
    kept.keep("c", "k", v(3));
    assert.equal(kept.get("b", "k"), undefined, "b was used least recently");
    assert.ok(kept.get("a", "k") && kept.get("c", "k"));
    // A view larger than the bound is answered but not kept.
    kept.keep("d", "k", { pad: "x".repeat(300) });
    assert.equal(kept.get("d", "k"), undefined);
    assert.ok(kept.get("c", "k"));
  });

  test("a view asked for under another key is let go: it no longer holds its share of the bound", () => {
    const kept = new ViewFragments<{ pad: string }>(250);
    const v = (n: number) => ({ pad: String(n).repeat(90) });
    kept.keep("a", "k1", v(1));
    kept.keep("b", "k", v(2));
    // a's rows changed (a terminated service, say): its old view is stale from now on.
    assert.equal(kept.get("a", "k2"), undefined);
    assert.equal(kept.get("a", "k1"), undefined, "the stale view was dropped, not kept");
    // Its room is free: c fits beside b, where b (least recently used) went before.
    kept.keep("c", "k", v(3));
    assert.ok(kept.get("b", "k") && kept.get("c", "k"));
  });
});
