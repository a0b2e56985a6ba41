// Stats (issue 32) on fake engines: what a container, a service and a node used, computed as
// `docker stats` computes it; series kept for their retention and rolled up into minutes; another
// namespace gets 404; the live stream sends each round's point.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import type { Engine } from "../../src/drivers/engine.ts";
import { StatsCollector } from "../../src/stats/collector.ts";
import { statsOf } from "../../src/store/stats.ts";
import {
  call,
  containersOf,
  deployCluster,
  engineContainer,
  runningService,
  uuidOf,
} from "../services/sim.ts";
import { listen, openStream, refusal } from "../streams/support.ts";
import { deployWatchedCluster, type StatsSim, startStatsSim } from "./support.ts";

const MiB = 1024 * 1024;
let s: StatsSim;
// biome-ignore lint/suspicious/noExplicitAny: API bodies are arbitrary JSON.
let node: any;
// biome-ignore lint/suspicious/noExplicitAny: API bodies are arbitrary JSON.
let svc: any;
// biome-ignore lint/suspicious/noExplicitAny: API bodies are arbitrary JSON.
let containers: any[];
let address: string | undefined;
/** The harness's address (it listens once). */
const listening = async () => (address ??= await listen(s.h));

before(async () => {
  s = await startStatsSim({
    users: ["bob"],
    env: {
      BERTH_STATS_FINE_KEEP_S: "120",
      BERTH_STATS_COARSE_KEEP_S: "900",
      BERTH_METRICS_TOKEN: "scrape-token-0123456789",
    },
  });
  const cluster = await deployWatchedCluster(s, { name: "pool", target_num_nodes: 1 });
  node = (await call(s.h, s.alice, "GET", cluster.nodes[0])).body;
  svc = await runningService(s, { name: "web", target_num_containers: 2, memory: 256 });
  containers = await containersOf(s, svc);
  const first = await engineContainer(s, containers[0].resource_uri);
  first.engine.setUsage(first.id, { cpuCores: 1.5, memoryBytes: 100 * MiB, netRxPerS: 4096 });
  const second = await engineContainer(s, containers[1].resource_uri);
  second.engine.setUsage(second.id, { cpuCores: 0.25, memoryBytes: 20 * MiB });
  // Two rounds, ten seconds apart: CPU and rates come from their difference.
  await s.h.statsCollector.collect();
  s.advance(10_000);
  await s.h.statsCollector.collect();
});
after(() => s.close());

const last = <T>(list: T[]): T => list[list.length - 1]!;

describe("collection", () => {
  test("a container's CPU, memory and I/O are docker stats' figures", async () => {
    const res = await call(s.h, s.alice, "GET", `${containers[0].resource_uri}stats/?range=2m`);
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.resource_uri, containers[0].resource_uri);
    assert.equal(res.body.step, 10);
    assert.equal(res.body.points.length, 2);
    const p = last(res.body.points as Record<string, number>[]) as Record<string, number>;
    assert.equal(p.cpu_percent, 150);
    assert.equal(p.cpu_node_percent, 75, "two CPUs on the node");
    assert.equal(p.memory_bytes, 100 * MiB);
    assert.equal(p.memory_limit_bytes, 256 * MiB, "the service's memory limit");
    assert.equal(p.memory_percent, 39.063);
    // Counters are whole bytes: a rate over ten seconds is within a byte of the rate set.
    assert.ok(Math.abs(p.net_rx_bytes_per_s! - 4096) < 1, String(p.net_rx_bytes_per_s));
    assert.ok(Math.abs(p.net_tx_bytes_per_s! - 512) < 1, String(p.net_tx_bytes_per_s));
    assert.equal(p.pids, 1);
    assert.equal(p.restart_count, 0);
    assert.equal(res.body.points[0].cpu_percent, 0, "the first sample has no CPU figure yet");
  });

  test("a service sums its containers; a node sums its containers and shows its own size", async () => {
    const sres = await call(s.h, s.alice, "GET", `${svc.resource_uri}stats/?range=2m`);
    assert.equal(sres.status, 200, sres.raw);
    const sp = last(sres.body.points as Record<string, number>[]);
    assert.equal(sp.cpu_percent, 175);
    assert.equal(sp.cpu_node_percent, null);
    assert.equal(sp.memory_bytes, 120 * MiB);
    assert.equal(sp.containers, 2);
    const nres = await call(s.h, s.alice, "GET", `${node.resource_uri}stats/?range=2m`);
    assert.equal(nres.status, 200, nres.raw);
    const np = last(nres.body.points as Record<string, number>[]);
    assert.equal(np.cpu_percent, 175);
    assert.equal(np.cpu_node_percent, 87.5);
    assert.equal(np.cpus, 2);
    assert.equal(np.memory_limit_bytes, 4096 * MiB);
    assert.equal(np.containers, 2);
  });

  test("another namespace gets 404, as for a missing object", async () => {
    const bob = s.users.bob!;
    for (const uri of [containers[0].resource_uri, svc.resource_uri, node.resource_uri]) {
      const res = await call(s.h, bob, "GET", `${uri}stats/`);
      assert.equal(res.status, 404, `${uri}: ${res.raw}`);
      assert.equal(res.body.code, "not_found");
      const bare = uri.replace("/alice/", "/");
      assert.equal((await call(s.h, bob, "GET", `${bare}stats/`)).status, 404);
    }
    const missing = await call(s.h, s.alice, "GET", `/api/app/v1/container/${"0".repeat(36)}/stats/`);
    assert.equal(missing.status, 404);
  });

  test("a range or step that cannot be read is a 400 naming it", async () => {
    const tooLong = await call(s.h, s.alice, "GET", `${svc.resource_uri}stats/?range=2d`);
    assert.equal(tooLong.status, 400, tooLong.raw);
    assert.equal(tooLong.body.details[0].field, "range");
    const bad = await call(s.h, s.alice, "GET", `${svc.resource_uri}stats/?step=often`);
    assert.equal(bad.status, 400, bad.raw);
    const many = await call(s.h, s.alice, "GET", `${svc.resource_uri}stats/?range=900&step=0`);
    assert.equal(many.status, 400, many.raw);
  });

  test("the engine is asked once per container per round, never streamed", async () => {
    const { engine } = await engineContainer(s, containers[0].resource_uri);
    let calls = 0;
    const original = engine.containerStats.bind(engine);
    engine.containerStats = async (id: string) => {
      calls += 1;
      return original(id);
    };
    try {
      s.advance(10_000);
      const round = await s.h.statsCollector.collect();
      assert.deepEqual([round.nodes, round.containers, calls], [1, 2, 2]);
    } finally {
      engine.containerStats = original;
    }
  });
});

describe("metrics", () => {
  test("per-namespace series only for the administrator's scrape token", async () => {
    const scrape = async (authorization?: string) =>
      (
        await s.h.app.inject({
          method: "GET",
          url: "/metrics",
          headers: authorization ? { authorization } : {},
        })
      ).body;
    const open = await scrape();
    assert.match(open, /berth_open_streams/);
    assert.doesNotMatch(open, /berth_namespace_/);
    assert.doesNotMatch(await scrape("Bearer wrong-token-0123456789"), /berth_namespace_/);
    assert.doesNotMatch(await scrape(s.alice.auth), /berth_namespace_/);
    assert.doesNotMatch(await scrape(s.h.admin.auth), /berth_namespace_/);
    const full = await scrape("Bearer scrape-token-0123456789");
    const cpu = /berth_namespace_cpu_percent\{namespace="alice",replica="[^"]+"\} ([\d.]+)/.exec(full);
    assert.ok(cpu && Math.abs(Number(cpu[1]) - 175) < 0.01, cpu?.[0]);
    assert.match(full, /berth_namespace_containers_sampled\{namespace="alice",replica="[^"]+"\} 2/);
    assert.match(full, /berth_open_streams/);
  });
});

describe("retention", () => {
  test("minutes are rolled up from the fine series, and each series is pruned past its retention", async () => {
    // Five more minutes of rounds, every ten seconds.
    for (let i = 0; i < 30; i++) {
      s.advance(10_000);
      await s.h.statsCollector.collect();
      await s.h.statsCollector.maintain();
    }
    const uuid = uuidOf(containers[0].resource_uri);
    const fine = await statsOf(s.h.store).series(uuid, 10_000, 0, s.now() + 1);
    assert.ok(fine.length <= 13 && fine.length >= 11, `fine points kept: ${fine.length} (two minutes)`);
    assert.ok(fine[0]!.at >= s.now() - 120_000);
    const coarse = await call(s.h, s.alice, "GET", `${containers[0].resource_uri}stats/?range=15m`);
    assert.equal(coarse.status, 200, coarse.raw);
    assert.equal(coarse.body.step, 60, "past the fine retention: minutes");
    assert.ok(coarse.body.points.length >= 4, JSON.stringify(coarse.body.points.length));
    for (const p of coarse.body.points.slice(1)) assert.equal(p.cpu_percent, 150);
    // Later: the minutes past their own retention go too.
    s.advance(16 * 60_000);
    await s.h.statsCollector.maintain();
    assert.equal((await statsOf(s.h.store).series(uuid, 60_000, 0, s.now() + 1)).length, 0);
    assert.equal((await statsOf(s.h.store).series(uuid, 10_000, 0, s.now() + 1)).length, 0);
  });
});

describe("live stream", () => {
  test("each round's point arrives; another namespace's upgrade is a 404", async () => {
    const base = await listening();
    const path = `${containers[1].resource_uri}stats/live/`;
    const refused = await refusal(`${base}${path}`, s.users.bob!.auth);
    assert.equal(refused.status, 404);
    const client = await openStream(`${base}${path}`, { auth: s.alice.auth });
    s.advance(10_000);
    await s.h.statsCollector.collect();
    s.advance(10_000);
    const round = await s.h.statsCollector.collect();
    const frames = await client.until("a point of the last round", (f) =>
      f.some((x) => x.point.timestamp === round.at / 1000),
    );
    const frame = frames.find((x) => x.point.timestamp === round.at / 1000);
    assert.equal(frame.type, "stats");
    assert.equal(frame.resource_uri, containers[1].resource_uri);
    assert.equal(frame.point.cpu_percent, 25);
    client.close();
  });
});

describe("several replicas", () => {
  test("a service's point is given whole though two replicas write its round; after two intervals as it is", async () => {
    await deployCluster(s, { name: "pair", target_num_nodes: 2 });
    const spread = await runningService(s, {
      name: "spread",
      target_num_containers: 2,
      deployment_strategy: "HIGH_AVAILABILITY",
    });
    const rows = await Promise.all(
      (await containersOf(s, spread)).map((c) => s.h.store.services.findContainer(uuidOf(c.resource_uri))),
    );
    const [one, two] = rows.map((r) => r!.node_uuid);
    assert.notEqual(one, two, "one container per node");
    // Two replicas' collectors over the one database, each sampling its own node; the first is
    // this platform's (it wakes this platform's reader), the second another replica's.
    const replica = (node: string, own: boolean) =>
      new StatsCollector({
        store: s.h.store,
        engines: { forNode: (n) => s.engines.get(n.uuid) as unknown as Engine },
        clock: { now: s.now },
        duties: { ownsNode: (n) => n === node, leads: () => false },
        settings: {
          fineStepMs: 10_000,
          fineKeepMs: 120_000,
          coarseStepMs: 60_000,
          coarseKeepMs: 900_000,
          nodeConcurrency: 4,
          callsPerNode: 4,
        },
        onError: (err) => {
          throw err;
        },
        onRound: own ? () => s.h.statsReader.roundWritten() : undefined,
      });
    const a = replica(one!, true);
    const b = replica(two!, false);
    const base = await listening();
    const client = await openStream(`${base}${spread.resource_uri}stats/live/`, { auth: s.alice.auth });
    const at = (round: { at: number }) => round.at / 1000;
    const framesOf = (t: number) => client.frames.filter((f) => f.point?.timestamp === t);

    // Both halves fall in one step (the clock runs on: start just after a step's beginning).
    const nextStep = () => s.advance(10_000 - (s.now() % 10_000) + 50);
    nextStep();
    const first = await a.collect();
    await sleep(500);
    assert.deepEqual(framesOf(at(first)), [], "half a round is not sent");
    const series = await call(s.h, s.alice, "GET", `${spread.resource_uri}stats/?range=90s`);
    assert.equal(
      series.body.points.filter((p: { timestamp: number }) => p.timestamp === at(first)).length,
      0,
      "nor is it the last point of a series",
    );
    await b.collect();
    // This platform's reader looks again (its timer; here at once).
    s.h.statsReader.roundWritten();
    await client.until("the whole round", () => framesOf(at(first)).length > 0);
    assert.deepEqual(
      framesOf(at(first)).map((f) => f.point.containers),
      [2],
    );
    const whole = await call(s.h, s.alice, "GET", `${spread.resource_uri}stats/?range=90s`);
    assert.equal(whole.body.points.at(-1).timestamp, at(first));
    assert.equal(whole.body.points.at(-1).containers, 2);

    // The other replica's half never comes: two intervals on, the round is given as it is.
    nextStep();
    const second = await a.collect();
    await sleep(200);
    assert.deepEqual(framesOf(at(second)), []);
    s.advance(20_000);
    s.h.statsReader.roundWritten();
    await client.until("the round given as it is", () => framesOf(at(second)).length > 0);
    assert.deepEqual(
      framesOf(at(second)).map((f) => f.point.containers),
      [1],
    );
    client.close();
  });
});
