// The action engine through the API: queuing, cancel, retry, timeouts, resuming after a lost worker.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ActionEngine } from "../../src/actions/engine.ts";
import { systemClock } from "../../src/domain/time.ts";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";
import { registerWidgetKind, widgetRoutes } from "../support/test-kinds.ts";

let h: Harness;
let alice: Caller;

before(async () => {
  h = await startHarness({
    leaseMs: 600,
    extend: ({ actions, store, identity }) => {
      registerWidgetKind(actions);
      return { routes: [widgetRoutes({ actions, store, identity })] };
    },
  });
  alice = await createUser(h, "alice");
});
after(() => h.close());

async function work(id: string, params: Record<string, unknown>) {
  const res = await call(h, alice, "POST", `/api/app/v1/widget/${id}/work/`, params);
  assert.equal(res.status, 202, res.raw);
  const uri = res.headers["x-platform-action-uri"] as string;
  assert.equal(res.headers["x-dockercloud-action-uri"], uri);
  return uri;
}

async function get(uri: string) {
  const res = await call(h, alice, "GET", uri);
  assert.equal(res.status, 200, res.raw);
  return res.body;
}

async function until(uri: string, state: string, timeoutMs = 30_000) {
  return waitFor(
    `${uri} to be ${state}`,
    async () => {
      const a = await get(uri);
      return a.state === state ? a : undefined;
    },
    timeoutMs,
  );
}

async function logOf(uri: string): Promise<string[]> {
  const uuid = uri.split("/").filter(Boolean).pop()!;
  return (await h.store.actions.actionLogTail(uuid, 100)).map((l) => l.line);
}

describe("action engine", () => {
  test("an asynchronous call is answered 202 with its action In progress, and ends Success", async () => {
    const uri = await work("w1", { steps: 2, stepMs: 50 });
    const first = await get(uri);
    assert.ok(["In progress", "Success"].includes(first.state));
    assert.equal(first.action, "Widget Work");
    assert.equal(first.object, "/api/app/v1/alice/widget/w1/");
    const done = await until(uri, "Success");
    assert.notEqual(done.end_date, null);
    assert.deepEqual(await logOf(uri), ["step 1 begins", "step 1 done", "step 2 begins", "step 2 done"]);
  });

  test("a second call on the same object waits Pending until the first ends", async () => {
    const a = await work("w2", { steps: 3, stepMs: 200 });
    const b = await work("w2", { steps: 1, stepMs: 10 });
    assert.equal((await get(b)).state, "Pending");
    assert.equal((await get(b)).can_be_canceled, true);
    await until(a, "Success");
    await until(b, "Success");
    const [ra, rb] = [await get(a), await get(b)];
    assert.ok(Date.parse(rb.end_date) >= Date.parse(ra.end_date));
  });

  test("calls on different objects run side by side", async () => {
    const a = await work("w3a", { steps: 2, stepMs: 300 });
    const b = await work("w3b", { steps: 2, stepMs: 300 });
    await waitFor(
      "both in progress",
      async () => (await get(a)).state === "In progress" && (await get(b)).state === "In progress",
    );
    await until(a, "Success");
    await until(b, "Success");
  });

  test("cancel of a Pending action cancels it at once; the queue moves on", async () => {
    const a = await work("w4", { steps: 2, stepMs: 300 });
    const b = await work("w4", { steps: 1, stepMs: 10 });
    const c = await work("w4", { steps: 1, stepMs: 10 });
    const res = await call(h, alice, "POST", `${b}cancel/`);
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.state, "Canceled");
    assert.equal(res.body.can_be_retried, true);
    await until(a, "Success");
    await until(c, "Success");
    assert.deepEqual(await logOf(b), [
      "Waiting for action " + a.split("/").filter(Boolean).pop() + " on the same object",
      "Canceled before it started",
    ]);
  });

  test("cancel of an In progress action goes Canceling, then Canceled after the current step", async () => {
    const uri = await work("w5", { steps: 5, stepMs: 300 });
    await waitFor("step 1 running", async () => (await logOf(uri)).includes("step 1 begins"));
    const res = await call(h, alice, "POST", `${uri}cancel/`);
    assert.equal(res.status, 200);
    assert.equal(res.body.state, "Canceling");
    assert.equal(res.body.can_be_canceled, false);
    await until(uri, "Canceled");
    const log = await logOf(uri);
    assert.ok(log.includes("step 1 done"), "the current step finishes");
    assert.ok(!log.includes("step 3 begins"), "no later step starts");
    const again = await call(h, alice, "POST", `${uri}cancel/`);
    assert.equal(again.status, 409);
    assert.match(again.body.error, /Canceled; cancel is allowed in Pending, In progress/);
  });

  test("retry creates a new action for the same operation and object", async () => {
    const uri = await work("w6", { steps: 2, stepMs: 10, failAt: 2 });
    const failed = await until(uri, "Failed");
    assert.equal(failed.can_be_retried, true);
    assert.ok((await logOf(uri)).some((l) => l.includes("widget broke at step 2")));
    const res = await call(h, alice, "POST", `${uri}retry/`);
    assert.equal(res.status, 202, res.raw);
    const fresh = res.body;
    assert.notEqual(fresh.uuid, failed.uuid);
    assert.equal(fresh.object, failed.object);
    assert.equal(fresh.action, "Widget Work");
    assert.equal(res.headers["x-platform-action-uri"], fresh.resource_uri);
    await until(fresh.resource_uri, "Failed"); // same parameters, same outcome
    const inProgress = await work("w6", { steps: 3, stepMs: 300 });
    const refused = await call(h, alice, "POST", `${inProgress}retry/`);
    assert.equal(refused.status, 409);
    assert.match(refused.body.error, /retry is allowed in Success, Failed, Canceled/);
    await until(inProgress, "Success");
  });

  test("a step that exceeds its timeout ends the action Failed with a log line", async () => {
    const uri = await work("w7", { steps: 2, stepMs: 10, hangAt: 1 });
    await until(uri, "Failed", 5000);
    assert.ok(
      (await logOf(uri)).some((l) => /Step "step 1" timed out after 1500 ms/.test(l)),
      String(await logOf(uri)),
    );
  });

  test("an action whose worker disappeared is resumed by another worker at the step it was on", async () => {
    // A second engine on the same database plays a server that dies mid-action: it stops
    // without finishing, and its lease lapses.
    const other = new ActionEngine({
      store: h.store,
      clock: systemClock,
      leaseMs: 600,
      stepTimeoutMs: 5000,
      pollMs: 100,
      maxAttempts: 5,
    });
    registerWidgetKind(other);
    await h.actions.stop();
    other.start();
    const uri = await work("w8", { steps: 4, stepMs: 250 });
    await waitFor("step 2 running", async () => (await logOf(uri)).includes("step 2 begins"));
    await other.stop();
    h.actions.start();
    const done = await until(uri, "Success");
    assert.equal(done.state, "Success");
    const log = await logOf(uri);
    assert.ok(
      log.some((l) => l.startsWith("Resuming at step 2")),
      log.join("\n"),
    );
    assert.ok(log.includes("step 4 done"));
    assert.ok(
      !log
        .slice(
          0,
          log.findIndex((l) => l.startsWith("Resuming")),
        )
        .includes("step 2 done"),
    );
  });

  test("an action interrupted too many times is failed, never left In progress", async () => {
    await h.actions.stop();
    const row = await h.store.transaction((tx) =>
      h.actions.enqueue(tx, {
        kind: "test.widget.work",
        params: { steps: 1, stepMs: 10 },
        namespace: "alice",
        object: "/api/app/v1/alice/widget/w9/",
        meta: { method: "POST", path: "/x", user: "alice", userAgent: "", ip: "127.0.0.1" },
      }),
    );
    // Pretend five workers already died holding it.
    await h.store.db
      .updateTable("actions")
      .set({ attempts: 5, lease_owner: "dead", lease_until: 1 })
      .where("uuid", "=", row.uuid)
      .execute();
    h.actions.start();
    const uri = `/api/audit/v1/action/${row.uuid}/`;
    await until(uri, "Failed");
    assert.ok((await logOf(uri)).some((l) => /giving up/.test(l)));
  });

  test("an action recorded inside a transaction runs once that commits, not at the next poll", async () => {
    await h.actions.stop();
    const slow = new ActionEngine({
      store: h.store,
      clock: systemClock,
      leaseMs: 600,
      stepTimeoutMs: 5000,
      pollMs: 600_000,
      maxAttempts: 5,
    });
    registerWidgetKind(slow);
    slow.start();
    try {
      const uri = await work("w10", { steps: 1, stepMs: 10 });
      assert.equal((await until(uri, "Success", 5000)).state, "Success");
    } finally {
      await slow.stop();
      h.actions.start();
    }
  });
});

// The reservation holds for one lease of the recording worker; the file's 600 ms lease (short for the
// resume tests) can lapse on a loaded machine and turn this into a take-over test. So its own server,
// with leases that outlast any stall (5 s did not, on PostgreSQL at load 15).
describe("action reservation", () => {
  let saved: [Harness, Caller];
  before(async () => {
    saved = [h, alice];
    h = await startHarness({
      leaseMs: 30_000,
      extend: ({ actions, store, identity }) => {
        registerWidgetKind(actions);
        return { routes: [widgetRoutes({ actions, store, identity })] };
      },
    });
    alice = await createUser(h, "alice");
  });
  after(async () => {
    await h.close();
    [h, alice] = saved;
  });

  test("the worker that recorded an action runs it; another worker on the database leaves it alone", async () => {
    const ranElsewhere: string[] = [];
    const other = new ActionEngine({
      store: h.store,
      clock: systemClock,
      leaseMs: 30_000,
      stepTimeoutMs: 30_000,
      pollMs: 20,
      maxAttempts: 5,
      onEnded: (kind) => ranElsewhere.push(kind),
    });
    registerWidgetKind(other);
    // The other worker is woken first by each commit: only the reservation keeps it off.
    await h.actions.stop();
    other.start();
    h.actions.start();
    try {
      const uris = await Promise.all(
        Array.from({ length: 6 }, (_, i) => work(`w11-${i}`, { steps: 1, stepMs: 50 })),
      );
      for (const uri of uris) {
        await until(uri, "Success");
        assert.ok(!(await logOf(uri)).some((l) => l.startsWith("Resuming")));
      }
      assert.deepEqual(ranElsewhere, [], "the second worker took none of them");
    } finally {
      await other.stop();
    }
  });
  test("parameters that do not fit the kind's schema are a programming error at enqueue", async () => {
    await assert.rejects(
      h.store.transaction((tx) =>
        h.actions.enqueue(tx, {
          kind: "test.widget.work",
          params: { steps: "many", stepMs: 10 },
          namespace: "alice",
          object: "/api/app/v1/alice/widget/w12/",
          meta: { method: "POST", path: "/", user: "alice", userAgent: "", ip: "127.0.0.1" },
        }),
      ),
      /the parameters of action kind test\.widget\.work do not fit its schema: steps must be an integer/,
    );
    assert.throws(
      () => h.actions.register({ kind: "test.none", name: "None", steps: [] } as never),
      /declares no schema for its parameters/,
    );
  });

  test("a stored action whose parameters do not fit ends Failed with a message, and cannot be retried", async () => {
    const first = await work("w13", { steps: 2, stepMs: 300 });
    const queued = await work("w13", { steps: 1, stepMs: 10 });
    const row = (await h.store.actions.findAction(queued.split("/").filter(Boolean).pop()!))!;
    assert.equal(row.state, "Pending");
    await h.store.actions.updateAction(row, { params: JSON.stringify({ steps: 1, stepMs: "slow" }) });
    await until(first, "Success");
    await until(queued, "Failed");
    const log = await logOf(queued);
    assert.ok(
      log.some((l) => /^This action cannot run: .*stepMs must be an integer/.test(l)),
      log.join("\n"),
    );
    assert.ok(!log.includes("step 1 begins"), "no step ran");
    const retry = await call(h, alice, "POST", `${queued}retry/`);
    assert.equal(retry.status, 409, retry.raw);
    assert.equal(retry.body.code, "not_retriable");
    assert.match(retry.body.error, /stepMs must be an integer/);
  });
});
