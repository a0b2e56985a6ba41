// Names, not ids: an object referenced by URI (a service's stack, a container's node, an action's
// object, a cluster's region) is shown by its name, linked to its page. Each URI is read once per
// page load (cached), and a list of them costs one read per distinct object.
import { useEffect, useState } from "preact/hooks";
import { get, type ListPage, nsPath, query } from "./api.ts";
import { short, uriTail } from "./ui.tsx";

const PAGES: Record<string, string> = {
  service: "services",
  container: "containers",
  stack: "stacks",
  nodecluster: "nodeclusters",
  node: "nodes",
  action: "actions",
};

/** The dashboard page of an object, from its URI (with or without namespace). */
export function pageOf(uri: string): string | undefined {
  const m =
    /\/api\/(?:app|infra|audit)\/v1\/(?:[^/]+\/)?(service|container|stack|nodecluster|node|action)\/([^/]+)\/?$/.exec(
      uri,
    );
  return m ? `#/${PAGES[m[1]!]}/${m[2]}` : undefined;
}

/** The kind of an object, from its URI ("service", "nodetype"…). */
export function kindOf(uri: string): string {
  const parts = uri.split("/").filter(Boolean);
  const known = [
    "service",
    "container",
    "stack",
    "nodecluster",
    "node",
    "action",
    "region",
    "nodetype",
    "provider",
  ];
  return parts.find((p) => known.includes(p)) ?? "";
}

const names = new Map<string, Promise<string>>();

interface Named {
  name?: string;
  nickname?: string;
  label?: string;
  external_fqdn?: string;
  action?: string;
}

/** The name of the object at `uri` (its nickname, name, label…), or a short id when unreadable. */
export function nameOf(uri: string): Promise<string> {
  let known = names.get(uri);
  if (!known && !kindOf(uri)) {
    // Not an object the dashboard knows how to read: its id is its name.
    known = Promise.resolve(uriTail(uri));
    names.set(uri, known);
  }
  if (!known && uriTail(uri) === kindOf(uri)) {
    // A collection (the object of a create that was refused): no object to name.
    known = Promise.resolve(`new ${kindOf(uri)}`);
    names.set(uri, known);
  }
  if (!known) {
    known = get<Named>(uri).then(
      (o) => o.nickname || o.label || o.name || o.external_fqdn || o.action || short(uri),
      () => short(uri),
    );
    names.set(uri, known);
  }
  return known;
}

/** Remembers names the page already has (a list's rows), so links to them need no read. */
export function knowName(uri: string, name: string): void {
  if (uri && name) names.set(uri, Promise.resolve(name));
}

export function useName(uri: string | null | undefined): string | undefined {
  const [name, setName] = useState<string | undefined>(undefined);
  useEffect(() => {
    if (!uri) return;
    let alive = true;
    void nameOf(uri).then((n) => alive && setName(n));
    return () => {
      alive = false;
    };
  }, [uri]);
  return name;
}

/** An object by name, linked to its page when it has one. */
export function ObjectLink({ uri, label }: { uri: string | null | undefined; label?: string }) {
  const name = useName(label ? undefined : uri);
  if (!uri) return null;
  const text = label ?? name ?? "…";
  const to = pageOf(uri);
  return to ? (
    <a href={to} title={uri}>
      {text}
    </a>
  ) : (
    <span title={uri}>{text}</span>
  );
}

export interface Match {
  uri: string;
  kind: string;
  name: string;
}

/** Objects of the namespace whose name contains `text` (services, containers, stacks, clusters, nodes). */
export async function findObjects(text: string, each = 5): Promise<Match[]> {
  const kinds: [string, "app" | "infra"][] = [
    ["service", "app"],
    ["stack", "app"],
    ["container", "app"],
    ["nodecluster", "infra"],
    ["node", "infra"],
  ];
  const found = await Promise.all(
    kinds.map(([kind, sub]) =>
      get<ListPage<Named & { resource_uri: string }>>(
        query(nsPath(sub, kind), { name__icontains: text, limit: each, order_by: "name" }),
      ).then(
        (p) =>
          p.objects.map((o) => ({
            uri: o.resource_uri,
            kind,
            name: o.nickname || o.name || o.external_fqdn || short(o.resource_uri),
          })),
        () => [] as Match[],
      ),
    ),
  );
  return found.flat();
}
