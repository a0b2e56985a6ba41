// Change-feed entries of services, containers and stacks, with the parents of CONTRACT §8:
// container → service, stack, node, node cluster; service → stack; stack → [].
import type { ServiceSpec } from "../domain/service.ts";
import type { Clock } from "../domain/time.ts";
import { clusterUri, containerUri, nodeUri, serviceUri, stackUri } from "../domain/uri.ts";
import type { NodeRow } from "../store/nodes.ts";
import type { ContainerRow, ServiceRow } from "../store/services.ts";
import type { Store } from "../store/store.ts";
import { offeredAddress } from "./links.ts";

export type ChangeAction = "create" | "update" | "delete";

/** Parents remembered per container: a container's service, stack, node and cluster never change. */
const PARENTS_CACHE_MAX = 100_000;

export class AppChanges {
  private readonly parents = new Map<string, string>();

  constructor(private readonly clock: Clock) {}

  async service(tx: Store, s: ServiceRow, action: ChangeAction): Promise<void> {
    await tx.appendChange({
      namespace: s.namespace,
      type: "service",
      action,
      resource_uri: serviceUri(s),
      state: s.state,
      parents: JSON.stringify(s.stack_uuid ? [stackUri(s.namespace, s.stack_uuid)] : []),
      datetime: this.clock.now(),
    });
  }

  async container(tx: Store, c: ContainerRow, action: ChangeAction): Promise<void> {
    const parents = this.parents.get(c.uuid) ?? (await this.parentsOf(tx, c));
    await tx.appendChange({
      namespace: c.namespace,
      type: "container",
      action,
      resource_uri: containerUri(c),
      state: c.state,
      parents,
      datetime: this.clock.now(),
    });
  }

  /**
   * Entries of many containers in one statement, their parents looked up together (a batch of
   * placements or observations commits with its change-feed entries in one transaction).
   */
  async containers(
    tx: Store,
    entries: readonly { row: ContainerRow; action: ChangeAction }[],
  ): Promise<void> {
    if (entries.length === 0) return;
    const missing = entries.filter((e) => !this.parents.has(e.row.uuid)).map((e) => e.row);
    if (missing.length) {
      const services = new Map(
        (await tx.services.servicesByUuid(missing.map((c) => c.service_uuid))).map((s) => [s.uuid, s]),
      );
      const nodes = new Map(
        (await tx.nodes.nodesByUuid(missing.map((c) => c.node_uuid))).map((n) => [n.uuid, n]),
      );
      for (const c of missing) this.remember(c, services.get(c.service_uuid), nodes.get(c.node_uuid));
    }
    const now = this.clock.now();
    await tx.appendChanges(
      entries.map(({ row: c, action }) => ({
        namespace: c.namespace,
        type: "container",
        action,
        resource_uri: containerUri(c),
        state: c.state,
        parents: this.parents.get(c.uuid) ?? this.parentsJson(c, undefined, undefined),
        datetime: now,
      })),
    );
  }

  private parentsJson(
    c: ContainerRow,
    service: Pick<ServiceRow, "stack_uuid"> | undefined,
    node: NodeRow | undefined,
  ): string {
    const parents = [serviceUri({ namespace: c.namespace, uuid: c.service_uuid })];
    if (service?.stack_uuid) parents.push(stackUri(c.namespace, service.stack_uuid));
    if (node) {
      parents.push(nodeUri(node));
      if (node.cluster_uuid) parents.push(clusterUri({ namespace: node.namespace, uuid: node.cluster_uuid }));
    }
    return JSON.stringify(parents);
  }

  /** Parents of a container; only complete answers are kept (a service or node not visible yet would be missing). */
  private remember(c: ContainerRow, service: ServiceRow | undefined, node: NodeRow | undefined): string {
    const json = this.parentsJson(c, service, node);
    if (service && node) {
      if (this.parents.size >= PARENTS_CACHE_MAX) this.parents.clear();
      this.parents.set(c.uuid, json);
    }
    return json;
  }

  private async parentsOf(tx: Store, c: ContainerRow): Promise<string> {
    const service = await tx.services.findService(c.service_uuid);
    const node = await tx.nodes.findNode(c.node_uuid);
    return this.remember(c, service, node);
  }

  /**
   * Containers' changes as their link clients see them: when a container starts or stops offering
   * an address to its links, its address changes or it is redeployed (new ports and variables),
   * every live container linking to its service (and, with sequential_deployment, the service's
   * own other containers) gets an `update` event, since its `linked_to_container` changed with it
   * (the load balancer follows it, and the reconciler rewrites its link host entries).
   */
  async linkTargets(
    tx: Store,
    changed: readonly { before: ContainerRow; after: ContainerRow }[],
  ): Promise<void> {
    const moved = changed.filter(
      ({ before, after }) =>
        offeredAddress(before) !== offeredAddress(after) || before.generation !== after.generation,
    );
    if (moved.length === 0) return;
    const targets = [...new Set(moved.map((m) => m.after.service_uuid))];
    const clients = new Set(
      (await tx.services.linksTo(targets))
        .filter((l) =>
          moved.some((m) => m.after.service_uuid === l.to_uuid && m.after.namespace === l.namespace),
        )
        .map((l) => l.from_uuid),
    );
    for (const s of await tx.services.servicesByUuid(targets)) {
      if ((JSON.parse(s.spec) as ServiceSpec).sequential_deployment) clients.add(s.uuid);
    }
    if (clients.size === 0) return;
    const self = new Set(moved.map((m) => m.after.uuid));
    await this.containers(
      tx,
      (await tx.services.containersOfServices([...clients]))
        .filter((c) => !self.has(c.uuid))
        .map((row) => ({ row, action: "update" as const })),
    );
  }

  async stack(tx: Store, ns: string, uuid: string, state: string, action: ChangeAction): Promise<void> {
    await tx.appendChange({
      namespace: ns,
      type: "stack",
      action,
      resource_uri: stackUri(ns, uuid),
      state,
      parents: "[]",
      datetime: this.clock.now(),
    });
  }
}
