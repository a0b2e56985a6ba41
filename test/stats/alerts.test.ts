// Alerts (issue 32) on fake engines: every rule kind fires once per incident and says when it
// resolved; deliveries go to a webhook receiver the test runs (JSON and Slack forms) and to the
// mail outbox, are retried and logged; a webhook at an internal address is refused unless
// BERTH_ALERT_WEBHOOK_ALLOW names it (here: only 127.0.0.1, for the receiver); another namespace
// sees none of it.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { MailMessage, Outbox } from "../../src/accounts/outbox.ts";
import {
  call,
  containersOf,
  engineContainer,
  operate,
  runningService,
  uuidOf,
  waitFor,
} from "../services/sim.ts";
import type { Caller } from "../support/harness.ts";
import { Receiver } from "./receiver.ts";
import { deployWatchedCluster, type StatsSim, startStatsSim } from "./support.ts";

const MiB = 1024 * 1024;
const mails: MailMessage[] = [];
const outbox: Outbox = { send: async (m) => void mails.push(m) };
let s: StatsSim;
let receiver: Receiver;
let hook: string;
/** Host names the platform resolves (no outside DNS): changed by the rebinding test. */
const names = new Map<string, string>([["hooks.example.test", "93.184.216.34"]]);

before(async () => {
  receiver = new Receiver();
  hook = await receiver.start();
  s = await startStatsSim({
    users: ["bob", "exiter", "looper", "rounder", "hogger", "noder", "actor", "certs", "retrier"],
    outbox,
    resolveRegistryHost: async (name) => {
      const a = names.get(name);
      if (!a) throw Object.assign(new Error("not found"), { code: "ENOTFOUND" });
      return [{ address: a, family: 4 }];
    },
    env: {
      BERTH_ALERT_WEBHOOK_ALLOW: "127.0.0.1",
      BERTH_ALERT_RETRY_BASE_MS: "1000",
      BERTH_ALERT_MAX_ATTEMPTS: "3",
    },
  });
});
after(async () => {
  await s.close();
  await receiver.close();
});

const user = (name: string): Caller => s.users[name]!;

async function rule(who: Caller, body: Record<string, unknown>) {
  const res = await call(s.h, who, "POST", "/api/app/v1/alert/", body);
  assert.equal(res.status, 201, res.raw);
  return res.body;
}

/**
 * One notifier pass, as the leader runs it at every interval; a pass a collection round woke
 * ends first, and one woken meanwhile ends before this returns.
 */
async function pass(): Promise<void> {
  await s.h.alertNotifier.idle();
  await s.h.alertNotifier.evaluate();
  await s.h.alertNotifier.deliver();
  await s.h.alertNotifier.idle();
}

async function incidents(who: Caller, alert: { resource_uri: string }) {
  const res = await call(s.h, who, "GET", `${alert.resource_uri}incidents/`);
  assert.equal(res.status, 200, res.raw);
  return res.body.objects as { subject: string; state: string; summary: string; resolved: string | null }[];
}

async function setUp(who: Caller, service: Record<string, unknown>) {
  await deployWatchedCluster(s, { name: `pool-${who.username}`, target_num_nodes: 1 }, who);
  const svc = await runningService(s, { target_num_containers: 1, ...service }, who);
  const [container] = await containersOf(s, svc, who);
  return { svc, container, engine: await engineContainer(s, container.resource_uri) };
}

describe("rules", () => {
  test("container exited: fires once, resolves when it runs again; JSON webhook", async () => {
    const who = user("exiter");
    const { container, engine } = await setUp(who, { name: "worker" });
    const alert = await rule(who, {
      name: "worker down",
      kind: "container_exited",
      channels: [{ type: "webhook", url: `${hook}/exit` }],
    });
    assert.deepEqual(alert.channels, [{ type: "webhook", format: "json", target: `${hook}/…` }]);
    engine.engine.exitProcess(engine.id, 3);
    await waitFor("the exit seen", async () => {
      const row = await s.h.store.services.findContainer(uuidOf(container.resource_uri));
      return row?.observed === "exited";
    });
    await pass();
    await pass();
    let list = await incidents(who, alert);
    assert.equal(list.length, 1, "fires once");
    assert.equal(list[0]!.state, "firing");
    assert.equal(list[0]!.subject, container.resource_uri);
    assert.match(list[0]!.summary, /container worker-1 exited with code 3/);
    assert.equal((await call(s.h, who, "GET", alert.resource_uri)).body.firing, 1);
    await operate(s, container.resource_uri, "start", who);
    await pass();
    await pass();
    list = await incidents(who, alert);
    assert.equal(list.length, 1);
    assert.equal(list[0]!.state, "resolved");
    assert.ok(list[0]!.resolved);
    const got = receiver.of("/exit");
    assert.deepEqual(
      got.map((r) => [r.body.event, r.body.incident.state]),
      [
        ["firing", "firing"],
        ["resolved", "resolved"],
      ],
    );
    assert.equal(got[0]!.body.alert.name, "worker down");
    assert.equal(got[0]!.body.incident.subject, container.resource_uri);
  });

  test("crash-looping: restarts fire at the next pass (no collection round needed), once, and resolve when they stop; Slack webhook; restart counts on the wire", async () => {
    const who = user("looper");
    const { svc, container, engine } = await setUp(who, { name: "flappy", autorestart: "ALWAYS" });
    const alert = await rule(who, {
      name: "flapping",
      kind: "crash_looping",
      params: { restarts: 3, window_minutes: 5 },
      channels: [{ type: "webhook", url: `${hook}/loop`, format: "slack" }],
    });
    // No collection round: the container was deployed within the window, so it counts from 0.
    for (let i = 1; i <= 3; i++) {
      engine.engine.exitProcess(engine.id, 1);
      await waitFor(`restart ${i}`, async () => {
        const v = await engine.engine.inspectContainer(engine.id);
        return v?.restartCount === i && v.state === "running";
      });
    }
    // The runtime records the count from the engine's events; the next pass sees it, within the
    // collection interval (no round ran since the restarts).
    await waitFor("the third restart recorded", async () => {
      const row = await s.h.store.services.findContainer(uuidOf(container.resource_uri));
      return row?.restart_count === 3;
    });
    await pass();
    await pass();
    assert.deepEqual(
      (await incidents(who, alert)).map((i) => i.state),
      ["firing"],
    );
    // Restart counts on the container, in the containers list and summed on the service.
    const view = await call(s.h, who, "GET", container.resource_uri);
    assert.equal(view.body.restart_count, 3, view.raw);
    const list = await call(s.h, who, "GET", `/api/app/v1/container/?service=${svc.resource_uri}`);
    assert.deepEqual(
      list.body.objects.map((c: { restart_count: number }) => c.restart_count),
      [3],
    );
    assert.equal((await call(s.h, who, "GET", svc.resource_uri)).body.restart_count, 3);
    const services = await call(s.h, who, "GET", "/api/app/v1/service/");
    assert.deepEqual(
      services.body.objects.map((x: { name: string; restart_count: number }) => [x.name, x.restart_count]),
      [["flappy", 3]],
    );
    // Every round's points carry the count (no inspect every few rounds).
    s.advance(10_000);
    await s.h.statsCollector.collect();
    const series = await call(s.h, who, "GET", `${container.resource_uri}stats/?range=5m`);
    assert.equal(series.body.points.at(-1).restart_count, 3, series.raw);
    s.advance(6 * 60_000);
    await s.h.statsCollector.collect();
    await pass();
    assert.deepEqual(
      (await incidents(who, alert)).map((i) => i.state),
      ["resolved"],
    );
    const texts = receiver.of("/loop").map((r) => r.body.text as string);
    assert.equal(texts.length, 2);
    assert.match(texts[0]!, /^\[FIRING\] flapping: container flappy-1 restarted 3 times within 5 min/);
    assert.match(texts[1]!, /^\[RESOLVED\] flapping: .*\(after \d+ min\)/);
    assert.ok(texts[0]!.includes(container.resource_uri));
  });

  test("crash-looping fires after the collection round that follows the restarts, not an alert interval later", async () => {
    // The harness's alert interval is an hour: only the pass a round wakes can fire it.
    const who = user("rounder");
    const { container, engine } = await setUp(who, { name: "looping", autorestart: "ALWAYS" });
    const alert = await rule(who, {
      name: "looping",
      kind: "crash_looping",
      params: { restarts: 3, window_minutes: 5 },
      channels: [{ type: "webhook", url: `${hook}/round` }],
    });
    for (let i = 1; i <= 3; i++) {
      engine.engine.exitProcess(engine.id, 1);
      await waitFor(`restart ${i}`, async () => {
        const v = await engine.engine.inspectContainer(engine.id);
        return v?.restartCount === i && v.state === "running";
      });
    }
    await waitFor("the third restart recorded", async () => {
      const row = await s.h.store.services.findContainer(uuidOf(container.resource_uri));
      return row?.restart_count === 3;
    });
    assert.deepEqual(await incidents(who, alert), [], "no pass ran yet");
    s.advance(10_000);
    await s.h.statsCollector.collect();
    await waitFor("the firing webhook", async () => receiver.of("/round").length === 1);
    assert.deepEqual(
      (await incidents(who, alert)).map((i) => i.state),
      ["firing"],
    );
    assert.equal(receiver.of("/round")[0]!.body.event, "firing");
    await s.h.alertNotifier.idle();
  });

  test("memory above a share of its limit for M minutes; email through the outbox", async () => {
    const who = user("hogger");
    const { container, engine } = await setUp(who, { name: "hog", memory: 256 });
    const alert = await rule(who, {
      name: "memory",
      kind: "memory_high",
      params: { threshold_percent: 75, for_minutes: 1 },
      channels: [{ type: "email", to: "ops@example.test" }],
    });
    engine.engine.setUsage(engine.id, { memoryBytes: 200 * MiB });
    for (let i = 0; i < 3; i++) {
      s.advance(10_000);
      await s.h.statsCollector.collect();
    }
    await pass();
    assert.equal((await incidents(who, alert)).length, 0, "not for a minute yet");
    for (let i = 0; i < 4; i++) {
      s.advance(10_000);
      await s.h.statsCollector.collect();
    }
    await pass();
    await pass();
    const list = await incidents(who, alert);
    assert.equal(list.length, 1);
    assert.match(list[0]!.summary, /container hog-1 used at least 78\.1 % of its memory limit/);
    engine.engine.setUsage(engine.id, { memoryBytes: 20 * MiB });
    s.advance(10_000);
    await s.h.statsCollector.collect();
    await pass();
    assert.equal((await incidents(who, alert))[0]!.state, "resolved");
    const mine = mails.filter((m) => m.to === "ops@example.test");
    assert.deepEqual(
      mine.map((m) => m.subject.split(":")[0]),
      ["[FIRING] memory", "[RESOLVED] memory"],
    );
    assert.ok(mine[0]!.text.includes(container.resource_uri));
  });

  test("node unreachable fires once and resolves when the node answers again", async () => {
    const who = user("noder");
    const { engine } = await setUp(who, { name: "any" });
    const node = (await call(s.h, who, "GET", "/api/infra/v1/node/")).body.objects[0];
    const alert = await rule(who, {
      name: "nodes",
      kind: "node_unreachable",
      channels: [{ type: "webhook", url: `${hook}/node` }],
    });
    engine.engine.setReachable(false);
    await s.h.nodeProbe.probe(node.uuid, { immediate: true });
    await pass();
    await pass();
    assert.deepEqual(
      (await incidents(who, alert)).map((i) => [i.subject, i.state]),
      [[node.resource_uri, "firing"]],
    );
    engine.engine.setReachable(true);
    await s.h.nodeProbe.probe(node.uuid, { immediate: true });
    await pass();
    assert.equal((await incidents(who, alert))[0]!.state, "resolved");
    assert.equal(receiver.of("/node").length, 2);
  });

  test("action failed fires once per failed action and resolves when the object's next action succeeds", async () => {
    const who = user("actor");
    await deployWatchedCluster(s, { name: "pool-act", target_num_nodes: 1 }, who);
    const alert = await rule(who, {
      name: "failures",
      kind: "action_failed",
      channels: [{ type: "webhook", url: `${hook}/act` }],
    });
    const created = await call(s.h, who, "POST", "/api/app/v1/service/", {
      name: "ghost",
      image: "nowhere.example.test/ghost:1",
    });
    assert.equal(created.status, 201, created.raw);
    const start = await call(s.h, who, "POST", `${created.body.resource_uri}start/`);
    assert.equal(start.status, 202);
    await waitFor("the start fails", async () => {
      const a = (await call(s.h, who, "GET", start.headers["x-platform-action-uri"] as string)).body;
      return a.state === "Failed";
    });
    await pass();
    await pass();
    const list = await incidents(who, alert);
    assert.equal(list.length, 1);
    assert.equal(list[0]!.subject, start.headers["x-platform-action-uri"]);
    assert.match(list[0]!.summary, /^Service Start of .* failed$/);
    const patched = await call(s.h, who, "PATCH", created.body.resource_uri, { image: "busybox:local" });
    assert.equal(patched.status, 200, patched.raw);
    await pass();
    assert.equal((await incidents(who, alert))[0]!.state, "resolved");
    assert.equal(receiver.of("/act").length, 2);
  });

  test("certificate expiring is a hook the router fills (replaced here by a fixed source)", async () => {
    const who = user("certs");
    s.h.alertConditions.register("certificate_expiring", async (r) =>
      r.namespace === "certs" || r.namespace === "retrier"
        ? [{ subject: "/api/app/v1/certs/service/x/", summary: "certificate expires in 3 days" }]
        : [],
    );
    const alert = await rule(who, {
      name: "certs",
      kind: "certificate_expiring",
      params: { days: 7 },
      channels: [{ type: "webhook", url: `${hook}/cert` }],
    });
    await pass();
    assert.equal((await incidents(who, alert)).length, 1);
    assert.equal(receiver.of("/cert")[0]!.body.incident.summary, "certificate expires in 3 days");
  });

  test("unhealthy fires once while the health check fails, and resolves when the container stops", async () => {
    const who = user("certs");
    await deployWatchedCluster(s, { name: "pool-health", target_num_nodes: 1 }, who);
    const alert = await rule(who, {
      name: "health",
      kind: "unhealthy",
      channels: [{ type: "webhook", url: `${hook}/health` }],
    });
    const created = await call(s.h, who, "POST", "/api/app/v1/service/", {
      name: "closed",
      image: "busybox:local",
      run_command: "sleep 100000",
      health_check: { type: "tcp", port: 5432, interval: 0.2, retries: 1 },
    });
    assert.equal(created.status, 201, created.raw);
    await call(s.h, who, "POST", `${created.body.resource_uri}start/`);
    const container = await waitFor(
      "the container unhealthy",
      async () => {
        const svc = (await call(s.h, who, "GET", created.body.resource_uri)).body;
        const [c] = await containersOf(s, svc, who);
        return c?.health === "unhealthy" ? c : undefined;
      },
      30_000,
    );
    await pass();
    await pass();
    assert.deepEqual(
      (await incidents(who, alert)).map((i) => [i.subject, i.state, i.summary]),
      [[container.resource_uri, "firing", "container closed-1 is unhealthy"]],
    );
    await operate(s, container.resource_uri, "stop", who);
    await pass();
    assert.equal((await incidents(who, alert))[0]!.state, "resolved");
    assert.deepEqual(
      receiver.of("/health").map((r) => r.body.event),
      ["firing", "resolved"],
    );
  });
});

describe("deliveries", () => {
  test("a failed delivery is retried after a growing wait, and each attempt is in the log", async () => {
    const who = user("retrier");
    const { engine } = await setUp(who, { name: "r" });
    const alert = await rule(who, {
      name: "retry",
      kind: "container_exited",
      channels: [
        { type: "webhook", url: `${hook}/retry` },
        { type: "webhook", url: `${hook}/never` },
      ],
    });
    receiver.failures.push(500, 503);
    engine.engine.exitProcess(engine.id, 1);
    await waitFor("the exit seen", async () => (await incidentsAfter(who, alert)).length === 1);
    const log = async () => (await call(s.h, who, "GET", `${alert.resource_uri}deliveries/`)).body.objects;
    // The first channel: 500 then 503; the second: the same failures reach it through the shared receiver.
    s.advance(1000);
    await s.h.alertNotifier.deliver();
    assert.ok((await log()).every((d: { state: string }) => d.state === "pending"));
    s.advance(2500);
    await s.h.alertNotifier.deliver();
    const entries = await log();
    assert.deepEqual(entries.map((d: { state: string; attempts: number }) => [d.state, d.attempts]).sort(), [
      ["delivered", 2],
      ["delivered", 2],
    ]);
    assert.match(entries[0].target, /^webhook http:\/\/127\.0\.0\.1:\d+\/…$/);
  });

  test("a delivery that keeps failing is given up after the last attempt, with the reason", async () => {
    const who = user("retrier");
    const alert = await rule(who, {
      name: "always failing",
      kind: "certificate_expiring",
      channels: [{ type: "webhook", url: `${hook}/down` }],
    });
    receiver.failures.push(500, 500, 500);
    await s.h.alertNotifier.evaluate();
    for (let i = 0; i < 3; i++) {
      await s.h.alertNotifier.deliver();
      s.advance(10_000);
    }
    const [d] = (await call(s.h, who, "GET", `${alert.resource_uri}deliveries/`)).body.objects;
    assert.equal(d.state, "failed");
    assert.equal(d.attempts, 3);
    assert.match(d.last_error, /the webhook answered 500/);
  });

  test("a webhook whose name later resolves to an internal address is refused at delivery, not retried", async () => {
    const who = user("retrier");
    const alert = await rule(who, {
      name: "rebinding",
      kind: "certificate_expiring",
      channels: [{ type: "webhook", url: "http://hooks.example.test/x" }],
    });
    names.set("hooks.example.test", "127.0.0.5");
    await pass();
    const [d] = (await call(s.h, who, "GET", `${alert.resource_uri}deliveries/`)).body.objects;
    assert.equal(d.state, "failed");
    assert.equal(d.attempts, 1);
    assert.match(
      d.last_error,
      /resolves to 127\.0\.0\.5, which is a loopback address; Berth does not contact it unless BERTH_ALERT_WEBHOOK_ALLOW/,
    );
  });
});

async function incidentsAfter(who: Caller, alert: { resource_uri: string }) {
  await s.h.alertNotifier.evaluate();
  return incidents(who, alert);
}

describe("guard and access", () => {
  test("a webhook at a loopback, link-local or private address is refused (400) unless allowed", async () => {
    for (const url of [
      "http://127.0.0.2:8080/hook",
      "http://[::1]/hook",
      "http://169.254.169.254/latest/meta-data/",
      "http://10.0.0.1/",
      "http://[::ffff:127.0.0.2]/",
      "ftp://example.test/",
    ]) {
      const res = await call(s.h, s.alice, "POST", "/api/app/v1/alert/", {
        name: "x",
        kind: "container_exited",
        channels: [
          { type: "email", to: "a@example.test" },
          { type: "webhook", url },
        ],
      });
      assert.equal(res.status, 400, `${url}: ${res.raw}`);
      assert.equal(res.body.details[0].field, "channels[1].url", url);
    }
    const res = await call(s.h, s.alice, "POST", "/api/app/v1/alert/", {
      name: "x",
      kind: "container_exited",
      channels: [{ type: "webhook", url: "http://127.0.0.2:8080/hook" }],
    });
    assert.equal(res.body.code, "webhook_refused");
    assert.match(
      res.body.error,
      /loopback address; Berth does not contact it unless BERTH_ALERT_WEBHOOK_ALLOW names it/,
    );
    assert.equal((await call(s.h, s.alice, "GET", "/api/app/v1/alert/")).body.meta.total_count, 0);
  });

  test("another namespace's rules are 404 and not listed; changes are recorded as actions", async () => {
    const alert = await rule(s.alice, {
      name: "mine",
      kind: "container_exited",
      channels: [{ type: "email", to: "alice@example.test" }],
    });
    const bob = user("bob");
    for (const path of ["", "incidents/", "deliveries/"])
      assert.equal((await call(s.h, bob, "GET", `${alert.resource_uri}${path}`)).status, 404);
    assert.equal((await call(s.h, bob, "DELETE", alert.resource_uri)).status, 404);
    assert.equal((await call(s.h, bob, "PATCH", alert.resource_uri, { enabled: false })).status, 404);
    assert.equal((await call(s.h, bob, "GET", "/api/app/v1/alice/alert/")).status, 404);
    assert.equal((await call(s.h, bob, "GET", "/api/app/v1/alert/")).body.meta.total_count, 0);
    const off = await call(s.h, s.alice, "PATCH", alert.resource_uri, { enabled: false });
    assert.equal(off.status, 200, off.raw);
    assert.equal(off.body.enabled, false);
    assert.ok(off.headers["x-platform-action-uri"]);
    const del = await call(s.h, s.alice, "DELETE", alert.resource_uri);
    assert.equal(del.status, 204);
    assert.equal((await call(s.h, s.alice, "GET", alert.resource_uri)).status, 404);
    const bad = await call(s.h, s.alice, "POST", "/api/app/v1/alert/", {
      name: "x",
      kind: "nope",
      channels: [],
    });
    assert.equal(bad.status, 400);
  });
});
