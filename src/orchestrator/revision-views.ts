// The wire view of a service's kept definitions (contract/revisions.ts): each revision's
// definition shown as the service's view shows the same fields (its own variables as the user set
// them; the service key, which no definition holds, never), references to other services by
// their URIs as they resolve now (a link to a service since terminated is left out, as the
// service view leaves it out).
import type { Revision } from "../contract/revisions.ts";
import { serviceUriFields } from "../domain/service-views.ts";
import { restTime } from "../domain/time.ts";
import { actionUri, serviceUri } from "../domain/uri.ts";
import { domainViews } from "../router/domain-views.ts";
import { decodeSpec } from "../store/codec.ts";
import type { RevisionRow } from "../store/revisions.ts";
import type { ServiceRow } from "../store/services.ts";
import type { Store } from "../store/store.ts";
import { definitionFields, stopFields } from "./wire-views.ts";

export async function revisionViews(store: Store, s: ServiceRow, rows: RevisionRow[]): Promise<Revision[]> {
  const specs = rows.map((r) => decodeSpec(r.spec));
  const named = new Set<string>();
  for (const spec of specs) {
    for (const l of spec.linked_to_service) named.add(l.to_service);
    for (const b of spec.bindings) if (b.volumes_from) named.add(b.volumes_from);
  }
  const others = named.size ? await store.services.servicesByUuid([...named]) : [];
  const lookup = (uuid: string) => {
    const t = others.find((x) => x.uuid === uuid);
    return t && t.state !== "Terminated" && t.namespace === s.namespace
      ? { resource_uri: serviceUri(t), name: t.name }
      : undefined;
  };
  const uri = serviceUri(s);
  return rows.map((r, i) => {
    const spec = specs[i]!;
    const refs = serviceUriFields(spec, { resourceUri: uri, lookup });
    const { labels, working_dir, user, entrypoint, run_command } = definitionFields(spec);
    return {
      number: r.number,
      current: r.number === s.spec_version,
      created_datetime: restTime(r.created),
      cause: r.cause,
      action: r.action_uuid ? actionUri(r.action_uuid) : null,
      service: uri,
      definition: {
        image_name: spec.image_name,
        run_command,
        entrypoint,
        container_ports: spec.container_ports.map((p) => ({
          protocol: p.protocol,
          inner_port: p.inner_port,
          outer_port: p.outer_port,
          published: p.published,
        })),
        container_envvars: spec.container_envvars,
        linked_to_service: refs.linked_to_service,
        bindings: refs.bindings,
        autorestart: spec.autorestart,
        autodestroy: spec.autodestroy,
        ...stopFields(spec),
        rollout: spec.rollout ?? null,
        sequential_deployment: spec.sequential_deployment,
        roles: spec.roles,
        privileged: spec.privileged,
        read_only: spec.read_only,
        deployment_strategy: spec.deployment_strategy,
        tags: spec.tags.map((name) => ({ name })),
        autoredeploy: spec.autoredeploy,
        net: spec.net,
        pid: spec.pid,
        working_dir,
        user,
        labels,
        cpu_shares: spec.cpu_shares,
        cpuset: spec.cpuset,
        memory: spec.memory,
        memory_swap: spec.memory_swap,
        domains: domainViews(spec),
      },
    };
  });
}
