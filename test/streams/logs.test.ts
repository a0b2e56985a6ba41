// Log streams over a real WebSocket (CONTRACT §9): container logs from the (fake) engine with tail
// and follow, service logs merged with `source` and picking up new containers, action logs that
// follow an action to its end; refusals on the upgrade.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";
import { finishedAction } from "../support/real-api.ts";
import { registerWidgetKind, widgetRoutes } from "../support/test-kinds.ts";
import {
  drain,
  type Frame,
  fakeContainer,
  inState,
  listen,
  openStream,
  refusal,
  runningService,
  simulatedCluster,
} from "./support.ts";

let h: Harness;
let base: string;
let alice: Caller;
let bob: Caller;

before(async () => {
  h = await startHarness({
    env: { BERTH_RECONCILE_INTERVAL_MS: "200", BERTH_CONTAINER_STOP_TIMEOUT_S: "1" },
    extend: ({ actions, identity, store }) => {
      registerWidgetKind(actions);
      return { routes: [widgetRoutes({ actions, identity, store })] };
    },
  });
  base = await listen(h);
  alice = await createUser(h, "alice");
  bob = await createUser(h, "bob");
  await simulatedCluster(h, alice, 2);
});
after(() => h.close());

const numbered = (from: number, to: number, prefix = "line") =>
  Array.from({ length: to - from + 1 }, (_, i) => `${prefix} ${from + i}\n`).join("");
const texts = (frames: Frame[]) => frames.map((f) => f.log);

describe("container logs", () => {
  let container: string;

  before(async () => {
    const s = await runningService(h, alice, { name: "counter" });
    container = s.containers[0];
    const { engine, id } = await fakeContainer(h, container);
    engine.print(id, "stdout", numbered(1, 20));
  });

  test("tail=5&follow=false sends exactly the last 5 lines, as the engine printed them, and closes normally", async () => {
    const { frames, closed } = await drain(`${base}${container}logs/?tail=5&follow=false`, alice.auth);
    assert.deepEqual(texts(frames), ["line 16\n", "line 17\n", "line 18\n", "line 19\n", "line 20\n"]);
    const nowS = Math.floor(Date.now() / 1000);
    for (const f of frames) {
      assert.deepEqual(Object.keys(f), ["type", "log", "streamType", "timestamp"]);
      assert.equal(f.type, "log");
      assert.equal(f.streamType, "stdout");
      assert.ok(Number.isInteger(f.timestamp) && Math.abs(f.timestamp - nowS) < 30, "Unix seconds");
    }
    assert.equal(closed.code, 1000);
  });

  test("without tail, the last 300 lines; the namespaced path works too", async () => {
    const { engine, id } = await fakeContainer(h, container);
    engine.print(id, "stdout", numbered(21, 400));
    const { frames } = await drain(`${base}${container}logs/?follow=false`, alice.auth);
    assert.equal(frames.length, 300);
    assert.equal(frames[0].log, "line 101\n");
    assert.equal(frames.at(-1).log, "line 400\n");
    assert.ok(container.startsWith("/api/app/v1/alice/container/"));
  });

  test("follow delivers new lines as they are printed, stdout and stderr told apart, until the container stops", async () => {
    const stream = await openStream(`${base}${container}logs/?tail=2`, { auth: alice.auth });
    await stream.until("the tail", (fs) => fs.length === 2);
    assert.deepEqual(texts(stream.frames), ["line 399\n", "line 400\n"]);
    const { engine, id } = await fakeContainer(h, container);
    engine.print(id, "stdout", "more\n");
    engine.print(id, "stderr", "trouble\n");
    engine.print(id, "stdout", "no newline yet");
    await stream.until("the new lines", (fs) => fs.length === 4);
    assert.deepEqual(
      stream.frames.slice(2).map((f) => [f.log, f.streamType]),
      [
        ["more\n", "stdout"],
        ["trouble\n", "stderr"],
      ],
    );
    const stop = await call(h, alice, "POST", `${container}stop/`);
    assert.equal(stop.status, 202, stop.raw);
    const closed = await stream.closed;
    assert.equal(closed.code, 1000, "a stopped container ends its log stream normally");
    assert.match(closed.reason, /stopped/);
  });

  test("bad tail values are a 400 on the upgrade; another user's container a 404; no credentials a 401", async () => {
    for (const q of ["tail=abc", "tail=10001", "tail=-1", "follow=maybe"]) {
      const r = await refusal(`${base}${container}logs/?${q}`, alice.auth);
      assert.equal(r.status, 400, q);
      assert.equal(r.body.code, "invalid_field", q);
    }
    const other = await refusal(`${base}${container}logs/`, bob.auth);
    assert.equal(other.status, 404);
    const bare = container.replace("/alice/", "/");
    assert.equal((await refusal(`${base}${bare}logs/`, bob.auth)).status, 404);
    const none = await refusal(`${base}${container}logs/`);
    assert.equal(none.status, 401);
    assert.equal(none.headers["www-authenticate"], 'Basic realm="berth"');
  });
});

describe("service logs", () => {
  let service: Frame;

  before(async () => {
    service = await runningService(h, alice, { name: "multi", target_num_containers: 2 });
  });

  async function printOn(number: number, text: string) {
    const uri = (
      await call(
        h,
        alice,
        "GET",
        `/api/app/v1/container/?service=${service.resource_uri}&name=multi-${number}&state=Running`,
      )
    ).body.objects[0].resource_uri;
    const { engine, id } = await fakeContainer(h, uri);
    engine.print(id, "stdout", text);
  }

  test("the tail merges every container's lines by time, each line naming its container", async () => {
    // Distinct milliseconds, so that the order by time is well defined.
    for (const [n, text] of [
      [1, "a1\n"],
      [2, "b1\n"],
      [1, "a2\n"],
      [2, "b2\n"],
    ] as const) {
      await printOn(n, text);
      await sleep(5);
    }
    const { frames, closed } = await drain(
      `${base}${service.resource_uri}logs/?tail=3&follow=false`,
      alice.auth,
    );
    assert.deepEqual(
      frames.map((f) => [f.source, f.log]),
      [
        ["multi-2", "b1\n"],
        ["multi-1", "a2\n"],
        ["multi-2", "b2\n"],
      ],
    );
    assert.deepEqual(Object.keys(frames[0]), ["type", "source", "log", "streamType", "timestamp"]);
    assert.equal(closed.code, 1000);
  });

  test("following, new lines of every container arrive, and containers added by a scale or a redeploy are picked up", async () => {
    const stream = await openStream(`${base}${service.resource_uri}logs/?tail=3`, { auth: alice.auth });
    await stream.until("the merged tail", (fs) => fs.length === 3);
    assert.deepEqual(texts(stream.frames), ["b1\n", "a2\n", "b2\n"]);

    await printOn(1, "a3\n");
    await stream.until("a live line", (fs) => fs.some((f) => f.log === "a3\n" && f.source === "multi-1"));

    assert.equal(
      (await call(h, alice, "PATCH", service.resource_uri, { target_num_containers: 3 })).status,
      200,
    );
    const scaled = await call(h, alice, "POST", `${service.resource_uri}scale/`);
    assert.equal(scaled.status, 202);
    await waitFor("multi-3 running", async () => {
      const r = await call(h, alice, "GET", `/api/app/v1/container/?name=multi-3&state=Running`);
      return r.body.meta.total_count === 1;
    });
    // The stream notices the new container through the events feed; print until it shows up.
    await waitFor("a line of the new container", async () => {
      await printOn(3, "c1\n");
      return stream.frames.some((f) => f.source === "multi-3" && f.log === "c1\n");
    });
    // A scale ends once its new container has stayed up (a start that tells the truth): only then
    // does the service take the next operation.
    assert.equal((await finishedAction(h, alice, scaled)).state, "Success");

    assert.equal((await call(h, alice, "POST", `${service.resource_uri}redeploy/`)).status, 202);
    await inState(h, alice, service.resource_uri, "Running");
    await waitFor("a line of the redeployed multi-1", async () => {
      await printOn(1, "after redeploy\n");
      return stream.frames.some((f) => f.source === "multi-1" && f.log === "after redeploy\n");
    });
    assert.equal(stream.isClosed, false, "the service stream outlives its containers");

    assert.equal((await call(h, alice, "DELETE", service.resource_uri)).status, 202);
    const closed = await stream.closed;
    assert.equal(closed.code, 1000, "terminating the service ends its log stream normally");
  });

  test("another user's service is a 404 on the upgrade", async () => {
    assert.equal((await refusal(`${base}${service.resource_uri}logs/`, bob.auth)).status, 404);
  });
});

describe("action logs", () => {
  async function startWidget(steps: number, stepMs: number): Promise<string> {
    const res = await call(h, alice, "POST", "/api/app/v1/widget/w1/work/", { steps, stepMs });
    assert.equal(res.status, 202, res.raw);
    return res.headers["x-platform-action-uri"] as string;
  }

  test("following an action streams its lines as they are written and closes when it ends", async () => {
    const action = await startWidget(4, 150);
    const stream = await openStream(`${base}${action}logs/`, { auth: alice.auth });
    const closed = await stream.closed;
    assert.equal(closed.code, 1000);
    assert.deepEqual(
      texts(stream.frames),
      [1, 2, 3, 4].flatMap((n) => [`step ${n} begins`, `step ${n} done`]),
    );
    for (const f of stream.frames) {
      assert.deepEqual(Object.keys(f), ["type", "log", "timestamp"]);
      assert.ok(Number.isInteger(f.timestamp));
    }
    assert.equal((await call(h, alice, "GET", action)).body.state, "Success");
  });

  test("tail=3&follow=false on a finished action sends its last 3 lines; tail=0 sends none", async () => {
    const action = await startWidget(2, 0);
    await waitFor(
      "the action to end",
      async () => (await call(h, alice, "GET", action)).body.state === "Success",
    );
    const { frames, closed } = await drain(`${base}${action}logs/?tail=3&follow=false`, alice.auth);
    assert.deepEqual(texts(frames), ["step 1 done", "step 2 begins", "step 2 done"]);
    assert.equal(closed.code, 1000);
    const none = await drain(`${base}${action}logs/?tail=0`, alice.auth);
    assert.deepEqual(none.frames, []);
  });

  test("another user's action is a 404 on the upgrade, on both path forms", async () => {
    const action = await startWidget(1, 0);
    assert.equal((await refusal(`${base}${action}logs/`, bob.auth)).status, 404);
    const namespaced = action.replace("/api/audit/v1/", "/api/audit/v1/alice/");
    assert.equal((await refusal(`${base}${namespaced}logs/`, bob.auth)).status, 404);
    const ok = await drain(`${base}${namespaced}logs/?follow=false`, alice.auth);
    assert.equal(ok.closed.code, 1000);
  });
});
