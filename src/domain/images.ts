// Image references and external repository names, by Docker's rules as far as Berth needs them:
// which registry an image comes from, and which repository (host and path, without tag) it is.
// Pure functions; no I/O.

/** Where an image reference without a registry host comes from. */
export const DEFAULT_REGISTRY = "docker.io";

export interface ImageRef {
  /** The registry host, with its port when it has one: `registry.example.com:5000`, or docker.io. */
  registry: string;
  /** The path inside the registry: `team/app` (`library/nginx` for official Docker Hub images). */
  path: string;
  /** `<registry>/<path>`: the repository the image belongs to. */
  repository: string;
  tag: string | undefined;
  digest: string | undefined;
}

/** Docker's rule: the first component names a registry when it has a dot or a port, or is localhost. */
export function isRegistryHost(component: string): boolean {
  return component.includes(".") || component.includes(":") || component === "localhost";
}

export function parseImageRef(ref: string): ImageRef {
  let rest = ref;
  let digest: string | undefined;
  const at = rest.indexOf("@");
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
  }
  let tag: string | undefined;
  const colon = rest.lastIndexOf(":");
  if (colon > rest.lastIndexOf("/")) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
  }
  const first = rest.split("/")[0]!;
  if (rest.includes("/") && isRegistryHost(first)) {
    return { registry: first, path: rest.slice(first.length + 1), repository: rest, tag, digest };
  }
  const path = rest.includes("/") ? rest : `library/${rest}`;
  return { registry: DEFAULT_REGISTRY, path, repository: `${DEFAULT_REGISTRY}/${path}`, tag, digest };
}

export interface HostPort {
  /** Without brackets for IPv6. */
  hostname: string;
  port: number | undefined;
}

/** `reg.example.com:5000` → {reg.example.com, 5000}; `[::1]:5000` → {::1, 5000}. */
export function splitHost(host: string): HostPort {
  const m = /^(\[[^\]]+\]|[^:]+)(?::(\d{1,5}))?$/.exec(host);
  if (!m) return { hostname: host, port: undefined };
  return { hostname: m[1]!.replace(/^\[|\]$/g, ""), port: m[2] === undefined ? undefined : Number(m[2]) };
}

const LABEL = "[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?";
const HOSTNAME = new RegExp(`^${LABEL}(?:\\.${LABEL})*$`);
const IPV4 = /^\d{1,3}(?:\.\d{1,3}){3}$/;
const PATH_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;

/** Why `host` (with an optional port) cannot be a registry host, or undefined. */
export function registryHostProblem(host: string): string | undefined {
  const { hostname, port } = splitHost(host);
  if (port !== undefined && !(port >= 1 && port <= 65535)) return "has a port outside 1 to 65535";
  if (/^\d/.test(hostname) && IPV4.test(hostname)) {
    return hostname.split(".").every((o) => Number(o) <= 255) ? undefined : "is not a valid IPv4 address";
  }
  if (host.startsWith("[")) return /^[0-9a-f:.]+$/.test(hostname) ? undefined : "is not a valid IPv6 address";
  if (!HOSTNAME.test(hostname))
    return "is not a valid host name (lower-case letters, digits, dots and dashes)";
  return undefined;
}

export interface RepositoryName {
  /** The registry host, with its port when it has one. */
  host: string;
  path: string;
}

/**
 * Checks an external repository name, `<registry host>/<path>` (spec "External repository"), and
 * returns why it is not one, or its parts.
 */
export function parseRepositoryName(name: string): RepositoryName | { problem: string } {
  if (name.length > 255) return { problem: "must be at most 255 characters" };
  const slash = name.indexOf("/");
  const host = slash < 0 ? name : name.slice(0, slash);
  if (slash < 0 || !isRegistryHost(host)) {
    return {
      problem:
        "must start with the registry host and have a path, as in registry.example.com/team/app (a host has a dot or a port, or is localhost)",
    };
  }
  const hostProblem = registryHostProblem(host);
  if (hostProblem) return { problem: `registry host "${host}" ${hostProblem}` };
  const path = name.slice(slash + 1);
  const parts = path.split("/");
  const last = parts.at(-1) ?? "";
  if (parts.length > 0 && /:[^/]*$/.test(last) && PATH_COMPONENT.test(last.replace(/:.*$/, ""))) {
    return { problem: "names a repository, without a tag (drop the :tag)" };
  }
  const bad = parts.find((p) => !PATH_COMPONENT.test(p));
  if (bad !== undefined) {
    return {
      problem: `path component "${bad}" must be lower-case letters and digits, separated by ".", "_", "__" or "-"`,
    };
  }
  return { host, path };
}
