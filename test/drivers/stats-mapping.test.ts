// The Docker stats answer read as `docker stats` reads it (issue 32): memory without the page cache
// on cgroup v1 and v2, CPU from two samples, network and block I/O summed.
import assert from "node:assert/strict";
import { test } from "node:test";
import { cpuPercent } from "../../src/domain/stats.ts";
import { containerStats, memoryWithoutCache } from "../../src/drivers/docker/stats.ts";

test("memory: usage less inactive_file (cgroup v2) or total_inactive_file (cgroup v1)", () => {
  assert.equal(memoryWithoutCache({ usage: 1000, stats: { inactive_file: 300, active_file: 50 } }), 700);
  assert.equal(memoryWithoutCache({ usage: 1000, stats: { total_inactive_file: 400, cache: 600 } }), 600);
  assert.equal(memoryWithoutCache({ usage: 100, stats: { inactive_file: 300 } }), 100, "never below zero");
  assert.equal(memoryWithoutCache({ usage: 100 }), 100);
  assert.equal(memoryWithoutCache(null), 0);
});

test("a stats answer: counters, summed networks and block I/O by op, the docker CLI's CPU formula", () => {
  const answer = {
    read: "2026-11-27T10:00:10.000000000Z",
    pids_stats: { current: 7 },
    cpu_stats: {
      cpu_usage: { total_usage: 3_000_000_000 },
      system_cpu_usage: 40_000_000_000,
      online_cpus: 4,
    },
    memory_stats: {
      usage: 50 * 1024 * 1024,
      limit: 512 * 1024 * 1024,
      stats: { inactive_file: 10 * 1024 * 1024 },
    },
    networks: { eth0: { rx_bytes: 100, tx_bytes: 10 }, eth1: { rx_bytes: 5, tx_bytes: 1 } },
    blkio_stats: {
      io_service_bytes_recursive: [
        { major: 8, minor: 0, op: "read", value: 4096 },
        { major: 8, minor: 0, op: "Write", value: 8192 },
        { major: 8, minor: 16, op: "write", value: 8 },
        { major: 8, minor: 0, op: "total", value: 99999 },
      ],
    },
  };
  const s = containerStats(answer);
  assert.equal(s.readAtMs, Date.parse("2026-11-27T10:00:10Z"));
  assert.equal(s.memoryBytes, 40 * 1024 * 1024);
  assert.equal(s.memoryLimitBytes, 512 * 1024 * 1024);
  assert.deepEqual(
    [s.netRxBytes, s.netTxBytes, s.blockReadBytes, s.blockWriteBytes, s.pids],
    [105, 11, 4096, 8200, 7],
  );
  assert.equal(s.onlineCpus, 4);
  // One core busy for a second on a 4-CPU host: the host counted 4 s of CPU time.
  const next = { ...s, cpuTotalNs: s.cpuTotalNs + 1e9, systemCpuNs: s.systemCpuNs + 4e9 };
  assert.equal(cpuPercent(s, next), 100);
  assert.equal(cpuPercent(next, s), 0, "no negative figures");
  assert.equal(containerStats({ cpu_stats: { cpu_usage: { percpu_usage: [1, 2] } } }).onlineCpus, 2);
  assert.equal(containerStats("nonsense").memoryBytes, 0);
});
