// Route permissions (issue 17): each route declares `config.access` (api/context.ts) and this one
// hook checks it after validation, before the handler: the same order of answers as when handlers
// checked for themselves (a malformed body is still a 400 before a foreign namespace is a 404).
// A route that does not declare its access, the schema of its path parameters or of its answers
// cannot be registered: the app refuses to build (test/api/routes.test.ts).
import type { FastifyInstance, FastifyRequest, RouteOptions } from "fastify";
import { forbidden } from "../domain/errors.ts";
import type { IdentityService, Principal } from "../identity/service.ts";
import { principalOf } from "./namespaces.ts";

/** Administrators act for everyone; a key limited to one namespace (a service's key) never does. */
export function isAdmin(p: Principal): boolean {
  return Boolean(p.user.is_admin) && !p.namespaceLimit;
}

async function resolveNamespace(request: FastifyRequest, identity: IdentityService): Promise<void> {
  // Every namespaced path names its segment `:namespace` (routing.nsPaths); bare paths have none.
  const params = request.params as { namespace?: string } | undefined;
  const ns = await identity.resolveNamespace(principalOf(request), params?.namespace);
  request.namespace = ns;
  request.audit.namespace = ns;
}

/** What a route must declare; the problems of one that does not (none when it does). */
export function undeclared(route: Pick<RouteOptions, "url" | "config" | "schema">): string[] {
  if (route.config?.fallback) return [];
  const problems: string[] = [];
  if (route.config?.access === undefined) problems.push("config.access");
  if (/[:*]/.test(route.url) && route.schema?.params === undefined) problems.push("schema.params");
  if (route.schema?.response === undefined) problems.push("schema.response");
  return problems;
}

/** Refuses to register a route that leaves out a declaration (installed before any route). */
export function requireDeclarations(app: FastifyInstance): void {
  app.addHook("onRoute", (route) => {
    const missing = undeclared(route);
    if (missing.length)
      throw new Error(`${String(route.method)} ${route.url} must declare ${missing.join(" and ")}`);
  });
}

export function installAccess(app: FastifyInstance, identity: IdentityService): void {
  requireDeclarations(app);
  app.decorateRequest("namespace", undefined);
  app.addHook("preHandler", async (request) => {
    const access = request.routeOptions.config?.access;
    if (access === undefined || access === "public" || access === "caller") return;
    if (access === "namespace") return resolveNamespace(request, identity);
    if (access.namespace) await resolveNamespace(request, identity);
    if (!isAdmin(principalOf(request))) throw forbidden(access.admin, "admin_only");
  });
}
