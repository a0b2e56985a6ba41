// Re-adoption after a restore (issues 16, 31): the restored records meet engines whose containers
// kept running. Each node's containers carrying Berth's labels are matched with the records by the
// `io.berth.container` label and observed into them (nothing is removed or created), and every
// difference is an action on the container or the node, saying what the engine showed:
// - a container the engine restarted while Berth was down (its start time moved);
// - a container that exited while Berth was down: Stopped with its exit code, and started again
//   by a "Container Start" action when its autorestart asks for it (ALWAYS; ON_FAILURE after a
//   failure) and its engine did not restart it;
// - a container of a generation made after the backup (a redeploy since): adopted as it runs;
// - a record whose engine container is gone;
// - an engine container no record knows (unknown-containers.ts): reported, left running.
// A node whose engine does not answer at the first start stays pending (a control fact) and is
// adopted when it answers (the reconciler asks, adoptPending); until then the reconciler neither
// compares its containers nor looks for orphans on it.
import { randomUUID } from "node:crypto";
import type { ActionEngine } from "../actions/engine.ts";
import { LABELS } from "../domain/service.ts";
import { containerUri } from "../domain/uri.ts";
import type { ContainerSummary } from "../drivers/engine.ts";
import type { EngineSource } from "../nodes/provisioners.ts";
import { nodeUri } from "../nodes/views.ts";
import { factListOf, specOf } from "../store/codec.ts";
import type { NodeRow } from "../store/nodes.ts";
import type { ContainerRow } from "../store/services.ts";
import type { Store } from "../store/store.ts";
import type { ContainerRuntime } from "./runtime.ts";
import { GENERATION_LABEL } from "./runtime.ts";
import type { Orchestrator } from "./services.ts";
import { ADOPTION_META, reportUnknown } from "./unknown-containers.ts";

export const PENDING_FACT = "adoption_pending_nodes";

export interface AdoptionReport {
  adopted: number;
  changed: number;
  missing: number;
  unknown: number;
  restarted: number;
  unreachableNodes: number;
}

export interface AdoptionDeps {
  store: Store;
  engines: EngineSource;
  runtime: Pick<ContainerRuntime, "observe">;
  orchestrator: Pick<Orchestrator, "settleService">;
  actions: Pick<ActionEngine, "recordSync" | "enqueue">;
}

const when = (ms: number | null | undefined) => (ms ? new Date(ms).toISOString() : "never");

function shouldRun(c: ContainerRow): boolean {
  const autorestart = specOf(c).autorestart;
  return autorestart === "ALWAYS" || (autorestart === "ON_FAILURE" && (c.exit_code ?? 0) !== 0);
}

export class Adoption {
  constructor(private readonly d: AdoptionDeps) {}

  private record(namespace: string, object: string, name: string, ok: boolean, line: string) {
    return this.d.actions.recordSync({
      uuid: randomUUID(),
      namespace,
      object,
      name,
      meta: ADOPTION_META,
      state: ok ? "Success" : "Failed",
      logLine: line,
    });
  }

  /** The first start after a restore: every live node now, those that do not answer later. */
  async afterRestore(): Promise<AdoptionReport> {
    const report: AdoptionReport = {
      adopted: 0,
      changed: 0,
      missing: 0,
      unknown: 0,
      restarted: 0,
      unreachableNodes: 0,
    };
    const nodes = (await this.d.store.nodes.liveNodes()).filter(
      (n) => n.engine_url && n.state !== "Terminated",
    );
    const pending: string[] = [];
    for (const node of nodes) {
      if (!(await this.adoptNode(node, report))) pending.push(node.uuid);
    }
    await this.d.store.replicas.putFact(PENDING_FACT, JSON.stringify(pending));
    return report;
  }

  /** Nodes still waiting for their adoption (empty once every node answered). */
  async pending(): Promise<Set<string>> {
    return new Set(factListOf(await this.d.store.replicas.findFact(PENDING_FACT)));
  }

  /**
   * Adopts the pending nodes among `nodes` (Deployed, owned by this replica) whose engines answer
   * now; answers the nodes still pending, which the reconciler leaves alone.
   */
  async adoptPending(nodes: readonly NodeRow[]): Promise<Set<string>> {
    const pending = await this.pending();
    if (pending.size === 0) return pending;
    const report: AdoptionReport = {
      adopted: 0,
      changed: 0,
      missing: 0,
      unknown: 0,
      restarted: 0,
      unreachableNodes: 0,
    };
    const done: string[] = [];
    for (const node of nodes) {
      if (!pending.has(node.uuid)) continue;
      if (await this.adoptNode(node, report, { quiet: true })) done.push(node.uuid);
    }
    // Nodes gone meanwhile are not waited for.
    const live = new Set(
      (await this.d.store.nodes.liveNodes()).filter((n) => n.state !== "Terminated").map((n) => n.uuid),
    );
    await this.d.store.transaction(async (tx) => {
      const now = await new Adoption({ ...this.d, store: tx }).pending();
      for (const uuid of done) now.delete(uuid);
      for (const uuid of now) if (!live.has(uuid)) now.delete(uuid);
      await tx.replicas.putFact(PENDING_FACT, JSON.stringify([...now]));
    });
    for (const uuid of done) pending.delete(uuid);
    return pending;
  }

  /** One node: false when its engine did not answer (it stays pending). */
  private async adoptNode(
    node: NodeRow,
    report: AdoptionReport,
    opts: { quiet?: boolean } = {},
  ): Promise<boolean> {
    let listed: ContainerSummary[];
    try {
      listed = await this.d.engines
        .forNode(node)
        .listContainers({ labels: { [LABELS.node]: node.uuid }, all: true });
    } catch (err) {
      report.unreachableNodes++;
      if (!opts.quiet)
        await this.record(
          node.namespace,
          nodeUri(node),
          "Node Adopt",
          false,
          `After a restore: the node's engine did not answer (${err instanceof Error ? err.message : String(err)}); its containers are adopted once it answers, and nothing on it is removed before`,
        );
      return false;
    }
    const onEngine = new Map<string, ContainerSummary[]>();
    for (const c of listed) {
      const uuid = c.labels[LABELS.container];
      if (uuid) onEngine.set(uuid, [...(onEngine.get(uuid) ?? []), c]);
    }
    const unsettled = new Set<string>();
    let adopted = 0;
    for (const before of await this.d.store.services.liveContainers({ node: node.uuid })) {
      const found = (onEngine.get(before.uuid) ?? []).sort((a, b) => b.createdAt - a.createdAt);
      onEngine.delete(before.uuid);
      const uri = containerUri(before);
      if (found.length === 0) {
        report.missing++;
        unsettled.add(before.service_uuid);
        await this.d.runtime.observe(before.uuid);
        await this.record(
          before.namespace,
          uri,
          "Container Adopt",
          false,
          `After a restore: recorded as ${before.state}, but no engine container of it is on node ${node.uuid}`,
        );
        continue;
      }
      const notes: string[] = [];
      if (!found.some((x) => x.labels[GENERATION_LABEL] === before.generation)) {
        // Redeployed after the backup: the engine runs a later definition; it is adopted as it runs.
        const newest = found[0]!;
        await this.d.store.services.patchContainers([before.uuid], (r) =>
          r.generation === before.generation
            ? { generation: newest.labels[GENERATION_LABEL] ?? r.generation }
            : undefined,
        );
        notes.push(
          `its engine container ${newest.id.slice(0, 12)} runs a definition made after the backup (redeploy the service to run the restored one)`,
        );
      }
      const after = (await this.d.runtime.observe(before.uuid)) ?? before;
      if (after.engine_id !== before.engine_id)
        notes.push(
          `engine container ${after.engine_id?.slice(0, 12)} replaces ${before.engine_id?.slice(0, 12) ?? "none"}`,
        );
      if (after.state !== before.state)
        notes.push(`recorded ${before.state}, the engine says ${after.state}`);
      if (after.state === "Running" && before.started_at !== null && after.started_at !== before.started_at)
        notes.push(
          `restarted by its engine at ${when(after.started_at)} (autorestart ${specOf(after).autorestart})`,
        );
      if (after.state !== before.state) unsettled.add(before.service_uuid);
      let restart = false;
      if (after.state === "Stopped" && after.desired === "running" && before.state !== "Stopped") {
        notes.push(`exited while Berth was down (exit code ${after.exit_code ?? "unknown"})`);
        restart = shouldRun(after);
        notes.push(
          restart
            ? `autorestart ${specOf(after).autorestart}: started again`
            : `autorestart ${specOf(after).autorestart}: left stopped`,
        );
      }
      if (notes.length === 0) {
        adopted++;
        continue;
      }
      report.changed++;
      await this.record(
        before.namespace,
        uri,
        "Container Adopt",
        true,
        `After a restore: adopted engine container ${after.engine_id?.slice(0, 12) ?? found[0]!.id.slice(0, 12)}; ${notes.join("; ")}`,
      );
      if (restart) {
        report.restarted++;
        await this.d.store.transaction((tx) =>
          this.d.actions.enqueue(tx, {
            kind: "container.start",
            params: { container: after.uuid },
            namespace: after.namespace,
            object: uri,
            meta: ADOPTION_META,
          }),
        );
      }
    }
    report.adopted += adopted;
    // Engine containers no live record holds: those of terminated records are the orphans
    // controller's; those Berth does not know at all are reported and left running.
    const leftover = [...onEngine.entries()];
    const known = new Set(
      (await this.d.store.services.containerHeads(leftover.map(([uuid]) => uuid))).map((r) => r.uuid),
    );
    const unknown = leftover.filter(([uuid]) => !known.has(uuid)).flatMap(([, list]) => list);
    report.unknown += await reportUnknown(
      { store: this.d.store, record: (i) => this.d.actions.recordSync(i) },
      node,
      unknown,
      "made after the backup that was restored",
    );
    await this.record(
      node.namespace,
      nodeUri(node),
      "Node Adopt",
      true,
      `After a restore: ${adopted} container(s) adopted as recorded, without restarting them${unknown.length ? `; ${unknown.length} unknown container(s) left running` : ""}`,
    );
    for (const service of unsettled)
      await this.d.orchestrator.settleService(service, { keepTransitional: true });
    return true;
  }
}
