// Names of users and organizations double as namespace path segments (CONTRACT §1),
// so they may never equal a resource or operation word.

export const RESERVED_NAMES = new Set([
  "action",
  "api",
  "app",
  "audit",
  "auth",
  "az",
  "call",
  "cancel",
  "container",
  "containers",
  "deploy",
  "emails",
  "engine-upgrade",
  "events",
  "exec",
  "export",
  "health-check",
  "infra",
  "logs",
  "node",
  "nodecluster",
  "nodetype",
  "oauth",
  "orgs",
  "overview",
  "provider",
  "redeploy",
  "region",
  "registry",
  "repo",
  "repository",
  "retry",
  "scale",
  "service",
  "stack",
  "start",
  "stop",
  "token",
  "trigger",
  "alert",
  "users",
  "v1",
  "v1.1",
  "volume",
  "volumegroup",
  "admin-api",
  "static",
  "www",
]);

const NAME_RE = /^[a-z0-9][a-z0-9_-]{1,29}$/;

/** Returns a problem sentence when the name cannot be a namespace, or undefined. */
export function namespaceNameProblem(name: string): string | undefined {
  if (!NAME_RE.test(name)) {
    return "must be 2 to 30 characters: lower-case letters, digits, '-' or '_', starting with a letter or digit";
  }
  if (RESERVED_NAMES.has(name)) return `"${name}" is reserved because it is a word of the API's paths`;
  return undefined;
}
