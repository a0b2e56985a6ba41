// Canonical resource URIs (CONTRACT §4): the one module that builds and parses them. Every
// reference to an object (in objects, filters, event parents, action objects, injected variables)
// uses exactly these strings.

export type Subsystem = "app" | "audit" | "infra" | "repo";

/** An object that lives in a namespace, as URIs need it. */
interface Owned {
  namespace: string;
  uuid: string;
}

export function nsUri(subsystem: Subsystem, namespace: string, resource: string, id: string): string {
  return `/api/${subsystem}/v1/${namespace}/${resource}/${id}/`;
}

export const serviceUri = (s: Owned) => nsUri("app", s.namespace, "service", s.uuid);
export const containerUri = (c: Owned) => nsUri("app", c.namespace, "container", c.uuid);
export const stackUri = (namespace: string, uuid: string) => nsUri("app", namespace, "stack", uuid);
export const nodeUri = (n: Owned) => nsUri("infra", n.namespace, "node", n.uuid);
export const clusterUri = (c: Owned) => nsUri("infra", c.namespace, "nodecluster", c.uuid);
export const registryUri = (namespace: string, host: string) => nsUri("repo", namespace, "registry", host);

export const actionUri = (uuid: string) => `/api/audit/v1/action/${uuid}/`;
export const providerUri = (p: string) => `/api/infra/v1/provider/${p}/`;
export const regionUri = (p: string, r: string) => `/api/infra/v1/region/${p}/${r}/`;
export const azUri = (p: string, r: string, z: string) => `/api/infra/v1/az/${p}/${r}/${z}/`;
export const nodeTypeUri = (p: string, n: string) => `/api/infra/v1/nodetype/${p}/${n}/`;

/** The non-empty segments of a path: `//api/app//v1/x/` gives `api, app, v1, x`. */
export function uriSegments(uri: string): string[] {
  return uri.split("/").filter(Boolean);
}

/** A URI in canonical form for comparisons: one leading and one trailing slash, no repeats. */
export function canonicalUri(uri: string): string {
  return `/${uriSegments(uri).join("/")}/`;
}

/** The last segment of a URI (an object's uuid or name), or undefined for an empty one. */
export function lastSegment(uri: string): string | undefined {
  return uriSegments(uri).at(-1);
}

export interface ParsedUri {
  subsystem: string;
  namespace?: string;
  resource: string;
  id: string;
}

/**
 * Parses a namespaced object URI, with or without its namespace segment
 * (resource-URI filters accept both, CONTRACT §5).
 */
export function parseObjectUri(uri: string): ParsedUri | undefined {
  const parts = uriSegments(uri);
  if (parts[0] !== "api" || parts[2] !== "v1") return undefined;
  if (parts.length === 5) return { subsystem: parts[1]!, resource: parts[3]!, id: parts[4]! };
  if (parts.length === 6)
    return { subsystem: parts[1]!, namespace: parts[3]!, resource: parts[4]!, id: parts[5]! };
  return undefined;
}

/**
 * The comparison key of a resource URI, with or without its namespace segment (filters accept
 * both, CONTRACT §5): `/api/app/v1/alice/service/<id>/` and `/api/app/v1/service/<id>/` give
 * `app/service/<id>`. Anything else keys as its canonical self.
 */
export function uriKey(uri: string): string {
  const parsed = parseObjectUri(uri);
  return parsed ? `${parsed.subsystem}/${parsed.resource}/${parsed.id}` : canonicalUri(uri);
}
