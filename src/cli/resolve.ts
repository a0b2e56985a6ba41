// Objects are named as the historical CLI named them: by name, uuid or uuid prefix (services also
// as `name.stack`). A live object wins over terminated ones of the same name.
import type { Action } from "../contract/action.ts";
import type { Container } from "../contract/container.ts";
import type { Node, NodeCluster } from "../contract/nodes.ts";
import type { Service } from "../contract/service.ts";
import type { Stack } from "../contract/stack.ts";
import { API, type Client } from "./client.ts";
import { CliError } from "./errors.ts";

/** What every object a reference can name has (the contract's views all have these). */
export interface Named {
  uuid: string;
  resource_uri: string;
  state: string;
  name?: string;
  nickname?: string;
}

/** A kind of object; `T` is its answer in the contract, so resolving one gives a typed object. */
export interface Kind<T extends Named = Named> {
  /** Word used in messages: "service", "node cluster". */
  label: string;
  prefix: string;
  resource: string;
  /** The list filters by `name`. */
  byName: boolean;
  /**
   * Fields compared with the reference when the list cannot filter by name. (A method, so a
   * `Kind<Service>` is a `Kind` where only the common fields matter.)
   */
  match?(o: T, ref: string): boolean;
}

export const KINDS: {
  service: Kind<Service>;
  container: Kind<Container>;
  stack: Kind<Stack>;
  nodecluster: Kind<NodeCluster>;
  node: Kind<Node>;
  action: Kind<Action>;
} = {
  service: { label: "service", prefix: API.app, resource: "service", byName: true },
  container: { label: "container", prefix: API.app, resource: "container", byName: true },
  stack: { label: "stack", prefix: API.app, resource: "stack", byName: true },
  nodecluster: { label: "node cluster", prefix: API.infra, resource: "nodecluster", byName: true },
  node: {
    label: "node",
    prefix: API.infra,
    resource: "node",
    byName: false,
    match: (o, ref) => o.nickname === ref || o.external_fqdn === ref,
  },
  action: { label: "action", prefix: API.audit, resource: "action", byName: false },
};

const UUIDISH = /^[0-9a-f][0-9a-f-]*$/i;
const FINAL = new Set(["Terminated"]);

function pick<T extends Named>(kind: Kind<T>, ref: string, objects: T[]): T | undefined {
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

type Page<T> = { objects?: T[] } | undefined;

export async function resolve<T extends Named>(client: Client, kind: Kind<T>, ref: string): Promise<T> {
  if (ref === "") throw new CliError(`a ${kind.label} name or uuid must not be empty`, 2);
  const path = client.collection(kind.prefix, kind.resource);
  if (kind.byName) {
    const named = pick(
      kind,
      ref,
      (await client.get<Page<T>>(path, { name: ref, limit: 100 }))?.objects ?? [],
    );
    if (named) return named;
  }
  if (UUIDISH.test(ref)) {
    const found = pick(
      kind,
      ref,
      (await client.get<Page<T>>(path, { uuid__startswith: ref.toLowerCase(), limit: 100 }))?.objects ?? [],
    );
    if (found) return found;
  }
  if (kind.match) {
    const found = pick(
      kind,
      ref,
      (await client.all<T>(path)).filter((o) => kind.match?.(o, ref)),
    );
    if (found) return found;
  }
  if ((kind as Kind) === KINDS.service && ref.includes(".")) {
    // `web.shop`: service web of stack shop.
    const dot = ref.lastIndexOf(".");
    const found = pick(
      kind,
      ref,
      (
        await client.get<Page<T>>(path, {
          name: ref.slice(0, dot),
          stack__name: ref.slice(dot + 1),
          limit: 100,
        })
      )?.objects ?? [],
    );
    if (found) return found;
  }
  const where = client.namespace ? ` in namespace ${client.namespace}` : "";
  throw new CliError(`${kind.label} ${ref} not found${where}`);
}

/** Resolves several references, one after another, keeping their order. */
export async function resolveAll<T extends Named>(
  client: Client,
  kind: Kind<T>,
  refs: readonly string[],
): Promise<T[]> {
  const out: T[] = [];
  for (const ref of refs) out.push(await resolve(client, kind, ref));
  return out;
}
