// Stack views (spec "Stacks"): a page of stacks reads its services and their containers once,
// and `include_related` of a stack lists its services and their containers.
import type { RelationResolver } from "../actions/relations.ts";
import { addTo } from "../domain/collections.ts";
import { restTime } from "../domain/time.ts";
import { containerUri, serviceUri, stackUri } from "../domain/uri.ts";
import type { ServiceRow } from "../store/services.ts";
import type { StackRow } from "../store/stacks.ts";
import type { Store } from "../store/store.ts";
import { live, stateOf } from "./state.ts";

export class StackViews {
  constructor(private readonly store: Store) {}

  async view(st: StackRow, read?: Set<string>) {
    return (await this.views([st], read))[0]!;
  }

  /**
   * Views of a page of stacks: their services and those services' containers are read once for the
   * page; `read` gets the namespace of every row read (api/answer-cache.ts).
   */
  async views(rows: StackRow[], read?: Set<string>) {
    for (const st of rows) read?.add(st.namespace);
    const byStack = new Map<string, ServiceRow[]>();
    for (const s of await this.store.services.servicesOfStacks(rows.map((st) => st.uuid))) {
      read?.add(s.namespace);
      addTo(byStack, s.stack_uuid!, s);
    }
    const liveServices = [...byStack.values()].flat().filter(live);
    const unsynchronized = new Set<string>();
    const versions = new Map(liveServices.map((s) => [s.uuid, s.spec_version]));
    for (const c of await this.store.services.containersOfServices(liveServices.map((s) => s.uuid))) {
      read?.add(c.namespace);
      if (c.spec_version !== versions.get(c.service_uuid)) unsynchronized.add(c.service_uuid);
    }
    return rows.map((st) => {
      const all = byStack.get(st.uuid) ?? [];
      const shown = st.state === "Terminated" ? all : all.filter(live);
      return {
        uuid: st.uuid,
        resource_uri: stackUri(st.namespace, st.uuid),
        name: st.name,
        nickname: st.nickname,
        state: stateOf(st, all.filter(live)),
        synchronized: !shown.filter(live).some((s) => unsynchronized.has(s.uuid)),
        services: shown.map(serviceUri),
        deployed_datetime: restTime(st.deployed_at),
        destroyed_datetime: restTime(st.destroyed_at),
      };
    });
  }

  /** `include_related` of a stack: all its services and all their containers. */
  related: RelationResolver = async (store, _uri, parsed) => {
    const out: string[] = [];
    for (const s of await store.services.servicesOfStack(parsed.id)) {
      out.push(serviceUri(s));
      for (const c of await store.services.containersOfService(s.uuid)) {
        out.push(containerUri(c));
      }
    }
    return out;
  };
}
