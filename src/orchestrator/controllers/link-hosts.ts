// The link hosts controller: a running container's link host entries (its /etc/hosts lines for
// the services it links to) follow its service's links. A changed container (its own change, or
// one of its link targets', see ChangeFeed in store/feed.ts) is queued from the change feed; the
// periodic pass queues those whose recorded entries are not what the links give now. The engine
// write is the runtime's (`ensureLinkHosts`), on the replica that owns the container's node.
import { linkHosts } from "../../domain/container-spec.ts";
import type { ServiceSpec } from "../../domain/service.ts";
import { containerUri, lastSegment } from "../../domain/uri.ts";
import { linkHostsOf, parentsOf, specOf } from "../../store/codec.ts";
import type { ComparedContainer, ServiceRow } from "../../store/services.ts";
import type { ChangeRow } from "../../store/store.ts";
import { followedLinks, hostTargetOf, offeredAddress, sameEntries } from "../links.ts";
import type { ContainerRuntime } from "../runtime.ts";
import { type ContainerKey, type ControllerContext, held, serviceObjects } from "./context.ts";
import { Controller } from "./controller.ts";

export interface LinkHostsDeps extends ControllerContext {
  runtime: Pick<ContainerRuntime, "ensureLinkHosts">;
}

export class LinkHostsController extends Controller<ContainerKey> {
  constructor(private readonly d: LinkHostsDeps) {
    super({ id: (k) => k.container, batch: 500, onError: d.onError });
  }

  /** Queues the running containers of a page of the change feed. */
  fromFeed(rows: readonly ChangeRow[]): void {
    for (const row of rows) {
      if (row.type !== "container" || row.action === "delete" || row.state !== "Running") continue;
      // An action of this process holds the container, its service or its stack: the check would
      // find it busy and leave it (a large deploy's every container would be read for nothing).
      // What changed meanwhile is the periodic pass's (compare).
      if (this.d.actions.runsOnAny([row.resource_uri, ...parentsOf(row)])) continue;
      const uuid = lastSegment(row.resource_uri);
      if (uuid) this.add({ container: uuid });
    }
  }

  /**
   * The periodic pass: running containers of a service whose recorded link host entries are not
   * the ones its links give now (a change the feed did not bring, or one left alone while an action
   * worked) are queued; worked out from what the pass has already read.
   */
  compare(
    s: ServiceRow,
    spec: ServiceSpec,
    byService: ReadonlyMap<string, readonly ComparedContainer[]>,
  ): void {
    if (spec.linked_to_service.length === 0 && !spec.sequential_deployment) return;
    const targetsOf = (uuid: string) =>
      (byService.get(uuid) ?? []).filter((t) => offeredAddress(t) !== "").map(hostTargetOf);
    for (const c of byService.get(s.uuid) ?? []) {
      if (c.state !== "Running" || c.link_hosts === null) continue;
      const desired = linkHosts(
        followedLinks(spec, { serviceUuid: s.uuid, serviceName: s.name, number: c.number }, targetsOf),
      );
      if (!sameEntries(linkHostsOf(c), desired)) this.add({ container: c.uuid });
    }
  }

  /**
   * Every queued check at once: the containers and their services are read in two queries, and
   * only containers that follow links (or hold entries) are looked at one by one.
   */
  protected async work(keys: ContainerKey[]): Promise<ContainerKey[]> {
    const { store } = this.d;
    const rows = await store.services.containerHeads(keys.map((k) => k.container));
    const services = new Map(
      (await store.services.servicesByUuid(rows.map((c) => c.service_uuid))).map((x) => [x.uuid, x]),
    );
    const failed: ContainerKey[] = [];
    for (const c of rows) {
      if (c.state !== "Running" || !c.engine_id || c.link_hosts === null) continue;
      const s = services.get(c.service_uuid);
      if (!s) continue;
      const spec = specOf(s);
      const followsNone = spec.linked_to_service.length === 0 && !spec.sequential_deployment;
      if (followsNone && c.link_hosts === "[]") continue; // holds none and should hold none
      await this.follow(c.uuid).catch((err: unknown) => {
        this.d.onError(err);
        failed.push({ container: c.uuid });
      });
    }
    return failed;
  }

  /** A running container's link host entries follow its service's links (runtime.ensureLinkHosts). */
  private async follow(uuid: string): Promise<void> {
    await this.d.runtime.ensureLinkHosts(uuid, {
      // One replica acts on a container (the one that watches its node), and never while an
      // action works on it or its service.
      mayAct: async (c) => {
        if (!this.d.duties.ownsNode(c.node_uuid)) return false;
        const s = await this.d.store.services.findService(c.service_uuid);
        return s !== undefined && !(await held(this.d.store, [containerUri(c), ...serviceObjects(s)]));
      },
    });
  }
}
