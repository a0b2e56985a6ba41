// The containers controller: records follow their engines. It watches the engine events of the
// nodes this replica owns (an event only queues the container), and works on queued containers in
// batches: those an action holds are left to it, containers of a gone node are ended, the others
// are compared with their engines (runtime.observeMany writes what the engines report). Its one
// write of its own is ending containers whose node is gone; observed state is the runtime's.

import { LABELS } from "../../domain/service.ts";
import { containerUri, serviceUri, stackUri } from "../../domain/uri.ts";
import type { ContainerEvent } from "../../drivers/engine.ts";
import type { EngineSource } from "../../nodes/provisioners.ts";
import type { NodeRow } from "../../store/nodes.ts";
import type { ContainerRow } from "../../store/services.ts";
import type { ContainerRuntime } from "../runtime.ts";
import type { ContainerKey, ControllerContext } from "./context.ts";
import { Controller } from "./controller.ts";

/** Engines asked at once per node when containers are compared with them. */
const OBSERVE_PER_NODE = 4;

/** How long engine events gather in the queue before it is worked on. */
const EVENT_BATCH_MS = 20;

/** Containers taken together (their records, services and actions read in a few statements). */
const BATCH = 500;

/** Engine events that end a container's process, or the container. */
const END_EVENTS: ReadonlySet<string> = new Set(["die", "oom", "kill", "stop", "destroy"]);

/** States of a record that claim its container's process runs (or is coming up). */
const LIVE_STATES: ReadonlySet<string> = new Set(["Running", "Starting"]);

export interface ContainersDeps extends ControllerContext {
  engines: EngineSource;
  runtime: Pick<ContainerRuntime, "observeMany">;
  /** Told of the observed records that stopped while they should run (autodestroy looks at them). */
  onStopped(records: ContainerRow[]): void;
}

export class ContainersController extends Controller<ContainerKey> {
  private readonly watchers = new Map<string, AbortController>();
  /**
   * Containers whose engine container (by record uuid: its engine id) reported an end while an
   * action held them. The action's own record of them may predate that end: once an action ends,
   * those whose record still holds that container and claims it runs are looked at again, rather
   * than at the next periodic pass (recheckEnded).
   */
  private readonly endedWhileHeld = new Map<string, string>();
  /** Containers queued because of such an end event (by record uuid: its engine id), until worked on. */
  private readonly endsQueued = new Map<string, string>();

  constructor(private readonly d: ContainersDeps) {
    super({ id: (k) => k.container, batch: BATCH, gatherMs: EVENT_BATCH_MS, onError: d.onError });
  }

  /** Whether an engine end happened while an action held a container (an action's end is then worth a look). */
  get waitsForActions(): boolean {
    return this.endedWhileHeld.size > 0;
  }

  override stop(): void {
    super.stop();
    for (const w of this.watchers.values()) w.abort();
    this.watchers.clear();
  }

  /**
   * Containers whose engine container ended while an action held them (endedWhileHeld), once an
   * action has ended: those whose record still holds that container and says it runs are queued
   * to be compared with their engine (their actions may still hold them: they wait for the next).
   */
  async recheckEnded(): Promise<void> {
    const ended = new Map(this.endedWhileHeld);
    this.endedWhileHeld.clear();
    for (const c of await this.d.store.services.containerHeads([...ended.keys()])) {
      const engineId = ended.get(c.uuid);
      if (engineId === undefined || c.engine_id !== engineId || !LIVE_STATES.has(c.state)) continue;
      this.endsQueued.set(c.uuid, engineId);
      this.add({ container: c.uuid });
    }
  }

  /**
   * Every queued container at once: the records, their services and which of them (or their
   * services, or the services' stacks) an action holds are read in three queries, so a burst of
   * engine events during a large deploy costs a few statements; the containers left to the
   * controller are then compared together (converge).
   */
  protected async work(keys: ContainerKey[]): Promise<undefined> {
    const uuids = keys.map((k) => k.container);
    try {
      const { store } = this.d;
      const rows = await store.services.containerHeads(uuids);
      const services = new Map(
        (await store.services.servicesByUuid(rows.map((c) => c.service_uuid))).map((x) => [x.uuid, x]),
      );
      const busy = await store.actions.objectsWithActiveActions([
        ...rows.map((c) => containerUri(c)),
        ...[...services.values()].flatMap((s) => [
          serviceUri(s),
          ...(s.stack_uuid ? [stackUri(s.namespace, s.stack_uuid)] : []),
        ]),
      ]);
      const free = rows.filter((c) => {
        if (c.state === "Terminated") return false;
        const s = services.get(c.service_uuid);
        if (!s) return false;
        const isHeld =
          busy.has(containerUri(c)) ||
          busy.has(serviceUri(s)) ||
          (s.stack_uuid !== null && busy.has(stackUri(s.namespace, s.stack_uuid)));
        // An end the engine reported is looked at again once an action has ended (recheckEnded).
        const ended = this.endsQueued.get(c.uuid);
        if (isHeld && ended !== undefined) this.endedWhileHeld.set(c.uuid, ended);
        return !isHeld;
      });
      await this.converge(free.map((c) => c.uuid));
      return undefined;
    } finally {
      for (const uuid of uuids) this.endsQueued.delete(uuid);
    }
  }

  /**
   * Containers compared with their engines together, in a number of statements that does not
   * grow with their count: their records and nodes are read in a query each, the engines asked in
   * parallel (a few at a time per node) and what they report written in one transaction
   * (runtime.observeMany). Their services' states follow from the change feed (settle.ts).
   */
  private async converge(uuids: string[]): Promise<void> {
    if (uuids.length === 0) return;
    const { store } = this.d;
    const rows = (await store.services.containersByUuid(uuids)).filter((c) => c.state !== "Terminated");
    if (rows.length === 0) return;
    const nodes = await store.nodes.knownNodes(rows.map((c) => c.node_uuid));
    // Their node is gone, and the containers with it.
    const orphaned = rows.filter((c) => {
      const node = nodes.get(c.node_uuid);
      return !node || node.state === "Terminated";
    });
    const now = this.d.clock.now();
    // Unless an action took a container since the check in `work`: the write is conditional on
    // the record as the store holds it (no phase), in the transaction of the write.
    await store.services.patchContainers(
      orphaned.map((c) => c.uuid),
      (r) =>
        r.phase === null && r.destroyed_at === null
          ? { desired: "terminated", destroyed_at: now, observed: "missing" }
          : undefined,
    );
    // Nothing can be observed on a node that is not Deployed (unreachable, deploying).
    const observable = rows.filter((c) => nodes.get(c.node_uuid)?.state === "Deployed");
    const observed = await this.d.runtime.observeMany(observable, { perNode: OBSERVE_PER_NODE });
    const stopped = [...observed.values()].filter(
      (r) => r.state === "Stopped" && r.desired === "running" && r.exit_code !== null,
    );
    if (stopped.length) this.d.onStopped(stopped);
  }

  /** One engine-event subscription per Deployed node this replica owns; events only queue the container. */
  syncWatchers(nodes: NodeRow[]): void {
    const wanted = new Set(nodes.map((n) => n.uuid));
    for (const [uuid, ctl] of this.watchers) {
      if (!wanted.has(uuid)) {
        ctl.abort();
        this.watchers.delete(uuid);
      }
    }
    for (const n of nodes) {
      if (this.watchers.has(n.uuid)) continue;
      const ctl = new AbortController();
      this.watchers.set(n.uuid, ctl);
      void this.watch(n, ctl.signal).finally(() => {
        if (this.watchers.get(n.uuid)?.signal === ctl.signal) this.watchers.delete(n.uuid);
      });
    }
  }

  /**
   * Whether an action of this process holds the container of an engine event, or its service (as
   * its labels name them): `work` would find it busy and leave it, after reading it. A stack's
   * action is not seen here; the store is asked then, as for other replicas' actions.
   */
  private heldHere(uuid: string, labels: Record<string, string>): boolean {
    const namespace = labels[LABELS.namespace];
    const service = labels[LABELS.service];
    if (namespace === undefined) return false;
    const objects = [containerUri({ namespace, uuid })];
    if (service !== undefined) objects.push(serviceUri({ namespace, uuid: service }));
    return this.d.actions.runsOnAny(objects);
  }

  private async watch(node: NodeRow, signal: AbortSignal): Promise<void> {
    try {
      const engine = this.d.engines.forNode(node);
      for await (const ev of engine.events({
        signal,
        since: this.d.clock.now() - 1000,
      }) as AsyncIterable<ContainerEvent>) {
        const uuid = ev.labels?.[LABELS.container];
        if (!uuid) continue;
        const ended = END_EVENTS.has(ev.action);
        if (this.heldHere(uuid, ev.labels)) {
          // Left to the action, unless what ended is what its record holds once the action is over.
          if (ended) this.endedWhileHeld.set(uuid, ev.id);
          continue;
        }
        if (ended) this.endsQueued.set(uuid, ev.id);
        this.add({ container: uuid });
      }
    } catch (err) {
      if (!signal.aborted) this.d.onError(err);
    }
  }
}
