// Re-adoption after a restore (issue 16): the restored records meet engines whose containers kept
// running. Each node's containers carrying Berth's labels are matched with the records by the
// `io.berth.container` label and observed into them (nothing is started, stopped or created), and
// every difference is reported as an action: a record whose container changed or is gone, an
// engine container no record knows. The services of changed containers settle to what their
// containers now say. Later work (service policies, the reconciler) acts on the records as usual.
import { randomUUID } from "node:crypto";
import type { ActionEngine } from "../actions/engine.ts";
import { LABELS } from "../domain/service.ts";
import { containerUri } from "../domain/uri.ts";
import type { EngineSource } from "../nodes/provisioners.ts";
import { nodeUri } from "../nodes/views.ts";
import type { Store } from "../store/store.ts";
import type { ContainerRuntime } from "./runtime.ts";
import type { Orchestrator } from "./services.ts";

const META = {
  method: "POST",
  path: "",
  user: "berth",
  userAgent: "berth-restore",
  ip: "",
  isUserAction: false,
};

export interface AdoptionReport {
  adopted: number;
  changed: number;
  missing: number;
  unknown: number;
  unreachableNodes: number;
}

export async function adoptAfterRestore(d: {
  store: Store;
  engines: EngineSource;
  runtime: ContainerRuntime;
  orchestrator: Pick<Orchestrator, "settleService">;
  actions: ActionEngine;
}): Promise<AdoptionReport> {
  const report: AdoptionReport = { adopted: 0, changed: 0, missing: 0, unknown: 0, unreachableNodes: 0 };
  const unsettled = new Set<string>();
  const record = (namespace: string, object: string, name: string, ok: boolean, line: string) =>
    d.actions.recordSync({
      uuid: randomUUID(),
      namespace,
      object,
      name,
      meta: META,
      state: ok ? "Success" : "Failed",
      logLine: line,
    });
  const nodes = (await d.store.nodes.liveNodes()).filter((n) => n.engine_url && n.state !== "Terminated");
  for (const node of nodes) {
    let onEngine: Map<string, string>;
    try {
      const list = await d.engines
        .forNode(node)
        .listContainers({ labels: { [LABELS.node]: node.uuid }, all: true });
      onEngine = new Map(
        list.flatMap((c) => (c.labels[LABELS.container] ? [[c.labels[LABELS.container]!, c.id]] : [])),
      );
    } catch (err) {
      report.unreachableNodes++;
      await record(
        node.namespace,
        nodeUri(node),
        "Node Adopt",
        false,
        `After a restore: the node's engine did not answer (${err instanceof Error ? err.message : String(err)}); its containers are compared once it answers`,
      );
      continue;
    }
    let adopted = 0;
    for (const before of await d.store.services.liveContainers({ node: node.uuid })) {
      const engineId = onEngine.get(before.uuid);
      onEngine.delete(before.uuid);
      const after = await d.runtime.observe(before.uuid);
      if (!engineId || after?.state !== before.state) unsettled.add(before.service_uuid);
      if (!engineId) {
        report.missing++;
        await record(
          before.namespace,
          containerUri(before),
          "Container Adopt",
          false,
          `After a restore: recorded as ${before.state}, but no engine container of it runs on node ${node.uuid}`,
        );
      } else if (after && (after.engine_id !== before.engine_id || after.state !== before.state)) {
        report.changed++;
        await record(
          before.namespace,
          containerUri(before),
          "Container Adopt",
          true,
          `After a restore: adopted engine container ${engineId.slice(0, 12)}; recorded ${before.state}${before.engine_id && before.engine_id !== engineId ? ` as ${before.engine_id.slice(0, 12)}` : ""}, the engine says ${after.state}`,
        );
      } else adopted++;
    }
    report.adopted += adopted;
    for (const [recordUuid, engineId] of onEngine) {
      report.unknown++;
      await record(
        node.namespace,
        nodeUri(node),
        "Container Unknown",
        false,
        `After a restore: engine container ${engineId.slice(0, 12)} carries Berth's labels for container ${recordUuid}, which the restored records do not hold as live`,
      );
    }
    await record(
      node.namespace,
      nodeUri(node),
      "Node Adopt",
      true,
      `After a restore: ${adopted} container(s) adopted as recorded, without restarting them`,
    );
  }
  for (const service of unsettled) await d.orchestrator.settleService(service, { keepTransitional: true });
  return report;
}
