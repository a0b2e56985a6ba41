// Where a Docker engine listens: a unix socket, plain TCP, or TCP with mutual TLS.

export interface DockerTls {
  /** PEM strings, as stored for a node; never paths, so nothing depends on files on the server. */
  ca: string;
  cert: string;
  key: string;
}

export type DockerEndpoint = { socketPath: string } | { host: string; port: number; tls?: DockerTls };

/**
 * Reads `unix:///path`, a bare absolute socket path, or `tcp://host:port` (IPv6 in brackets).
 * TLS material, when given, applies to TCP addresses only.
 */
export function parseDockerEndpoint(address: string, tls?: DockerTls): DockerEndpoint {
  if (address.startsWith("/")) return { socketPath: address };
  if (address.startsWith("unix://")) {
    const socketPath = address.slice("unix://".length);
    if (!socketPath.startsWith("/"))
      throw new Error(`unix socket address needs an absolute path: "${address}"`);
    return { socketPath };
  }
  const match = /^tcp:\/\/(\[[0-9a-fA-F:.]+\]|[^:/[\]]+):(\d{1,5})\/?$/.exec(address);
  const port = match ? Number(match[2]) : Number.NaN;
  if (!match || !(port > 0 && port <= 65535)) {
    throw new Error(`engine address must be unix:///path or tcp://host:port, got "${address}"`);
  }
  const host = match[1]!.replace(/^\[|\]$/g, "");
  return tls ? { host, port, tls } : { host, port };
}

export function describeEndpoint(endpoint: DockerEndpoint): string {
  if ("socketPath" in endpoint) return `unix://${endpoint.socketPath}`;
  const host = endpoint.host.includes(":") ? `[${endpoint.host}]` : endpoint.host;
  return `tcp://${host}:${endpoint.port}${endpoint.tls ? " (TLS)" : ""}`;
}
