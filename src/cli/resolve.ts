// Objects are named as the historical CLI named them: by name, uuid or uuid prefix (services also
// as `name.stack`). A live object wins over terminated ones of the same name.
import { API, type Client, type Json } from "./client.ts";
import { CliError } from "./errors.ts";

export interface Kind {
  /** Word used in messages: "service", "node cluster". */
  label: string;
  prefix: string;
  resource: string;
  /** The list filters by `name`. */
  byName: boolean;
  /** Fields compared with the reference when the list cannot filter by name. */
  match?: (o: Json, ref: string) => boolean;
}

export const KINDS = {
  service: { label: "service", prefix: API.app, resource: "service", byName: true },
  container: { label: "container", prefix: API.app, resource: "container", byName: true },
  stack: { label: "stack", prefix: API.app, resource: "stack", byName: true },
  nodecluster: { label: "node cluster", prefix: API.infra, resource: "nodecluster", byName: true },
  node: {
    label: "node",
    prefix: API.infra,
    resource: "node",
    byName: false,
    match: (o: Json, ref: string) => o.nickname === ref || o.external_fqdn === ref,
  },
  action: { label: "action", prefix: API.audit, resource: "action", byName: false },
} satisfies Record<string, Kind>;

const UUIDISH = /^[0-9a-f][0-9a-f-]*$/i;
const FINAL = new Set(["Terminated"]);

function pick(kind: Kind, ref: string, objects: Json[]): Json | undefined {
  const live = objects.filter((o) => !FINAL.has(o.state));
  const candidates = live.length > 0 ? live : objects;
  if (candidates.length > 1)
    throw new CliError(
      `${kind.label} ${ref} is ambiguous: it matches ${candidates
        .slice(0, 5)
        .map((o) => `${o.name ?? o.nickname ?? ""} ${String(o.uuid).slice(0, 8)}`.trim())
        .join(", ")}; use more of its uuid`,
    );
  return candidates[0];
}

export async function resolve(client: Client, kind: Kind, ref: string): Promise<Json> {
  if (ref === "") throw new CliError(`a ${kind.label} name or uuid must not be empty`, 2);
  const path = client.collection(kind.prefix, kind.resource);
  if (kind.byName) {
    const named = pick(kind, ref, (await client.get(path, { name: ref, limit: 100 }))?.objects ?? []);
    if (named) return named;
  }
  if (UUIDISH.test(ref)) {
    const found = pick(
      kind,
      ref,
      (await client.get(path, { uuid__startswith: ref.toLowerCase(), limit: 100 }))?.objects ?? [],
    );
    if (found) return found;
  }
  if (kind.match) {
    const found = pick(
      kind,
      ref,
      (await client.all(path)).filter((o) => kind.match?.(o, ref)),
    );
    if (found) return found;
  }
  if (kind === KINDS.service && ref.includes(".")) {
    // `web.shop`: service web of stack shop.
    const dot = ref.lastIndexOf(".");
    const found = pick(
      kind,
      ref,
      (await client.get(path, { name: ref.slice(0, dot), stack__name: ref.slice(dot + 1), limit: 100 }))
        ?.objects ?? [],
    );
    if (found) return found;
  }
  const where = client.namespace ? ` in namespace ${client.namespace}` : "";
  throw new CliError(`${kind.label} ${ref} not found${where}`);
}

/** Resolves several references, one after another, keeping their order. */
export async function resolveAll(client: Client, kind: Kind, refs: readonly string[]): Promise<Json[]> {
  const out: Json[] = [];
  for (const ref of refs) out.push(await resolve(client, kind, ref));
  return out;
}
