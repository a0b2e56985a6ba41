// Canonical resource URIs (CONTRACT §4). Every reference to an object uses exactly these strings.

export type Subsystem = "app" | "audit" | "infra" | "repo";

export function nsUri(subsystem: Subsystem, namespace: string, resource: string, id: string): string {
  return `/api/${subsystem}/v1/${namespace}/${resource}/${id}/`;
}

export const actionUri = (uuid: string) => `/api/audit/v1/action/${uuid}/`;
export const providerUri = (p: string) => `/api/infra/v1/provider/${p}/`;
export const regionUri = (p: string, r: string) => `/api/infra/v1/region/${p}/${r}/`;
export const azUri = (p: string, r: string, z: string) => `/api/infra/v1/az/${p}/${r}/${z}/`;
export const nodeTypeUri = (p: string, n: string) => `/api/infra/v1/nodetype/${p}/${n}/`;

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
  const parts = uri.split("/").filter(Boolean);
  if (parts[0] !== "api" || parts[2] !== "v1") return undefined;
  if (parts.length === 5) return { subsystem: parts[1]!, resource: parts[3]!, id: parts[4]! };
  if (parts.length === 6)
    return { subsystem: parts[1]!, namespace: parts[3]!, resource: parts[4]!, id: parts[5]! };
  return undefined;
}
