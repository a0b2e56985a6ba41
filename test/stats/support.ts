// Stats and alerts tests on simulated nodes whose fake engines share the platform's clock, which
// a test moves forward (`advance`): collection rounds then fall in distinct steps and CPU figures
// are exact (the fake's counters grow with that clock).
import type { PlatformOptions } from "../../src/platform.ts";
import { deployCluster, RecordingEngine, type Sim } from "../services/sim.ts";
import { type Caller, createUser, startHarness, waitFor } from "../support/harness.ts";

export interface StatsSim extends Sim {
  users: Record<string, Caller>;
  /** Moves the platform's and the engines' clock forward. */
  advance(ms: number): void;
  now(): number;
}

export async function startStatsSim(
  opts: { users?: string[]; env?: Record<string, string> } & Pick<
    PlatformOptions,
    "outbox" | "resolveRegistryHost"
  > = {},
): Promise<StatsSim> {
  let offset = 0;
  const now = () => Date.now() + offset;
  const engines = new Map<string, RecordingEngine>();
  const h = await startHarness({
    clock: { now },
    outbox: opts.outbox,
    resolveRegistryHost: opts.resolveRegistryHost,
    env: { BERTH_RECONCILE_INTERVAL_MS: "200", BERTH_CONTAINER_STOP_TIMEOUT_S: "1", ...opts.env },
    makeFakeEngine: (n) => {
      const e = new RecordingEngine({
        name: `sim-${n.uuid.slice(0, 8)}`,
        cpus: 2,
        memoryMb: 4096,
        subnet: `10.${128 + Math.floor(n.slot / 256)}.${n.slot % 256}.0/24`,
        now,
      });
      engines.set(n.uuid, e);
      return e;
    },
  });
  const alice = await createUser(h, "alice");
  const users: Record<string, Caller> = {};
  for (const u of opts.users ?? []) users[u] = await createUser(h, u);
  return {
    h,
    alice,
    engines,
    users,
    advance(ms: number) {
      offset += ms;
    },
    now,
    async close() {
      await h.close();
      for (const e of engines.values()) e.close();
    },
  };
}

/**
 * Deploys a cluster and waits until this platform watches its nodes: a round samples the nodes its
 * replica owns, and on PostgreSQL a replica takes on a new node at its next heartbeat.
 */
export async function deployWatchedCluster(s: Sim, body: Record<string, unknown>, who = s.alice) {
  const cluster = await deployCluster(s, body, who);
  const coordinator = s.h.coordinator;
  if (coordinator) {
    const nodes = await s.h.store.nodes.liveNodes();
    await waitFor("this replica watches every node", async () =>
      nodes.every((n) => coordinator.ownsNode(n.uuid)),
    );
  }
  return cluster;
}
