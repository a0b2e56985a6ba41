// Namespace settings (Berth extension next to organizations, CONTRACT §3): what administrators
// decide per namespace. `GET /api/v1.1/namespaces/<ns>/` shows them to the namespace's members and
// to administrators (404 for anyone else); `PATCH` changes them (administrators only) and is
// recorded as a `Namespace Update` action in the namespace's audit log.
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { NamespacePatchBody, NamespaceView, namespaceUri } from "../../contract/namespace.ts";
import { ApiError } from "../../domain/errors.ts";
import { type Limits, limitOf } from "../../domain/quotas.ts";
import type { Clock } from "../../domain/time.ts";
import type { NamespacePolicies, NamespaceSettings } from "../../identity/privileges.ts";
import type { IdentityService } from "../../identity/service.ts";
import type { Store } from "../../store/store.ts";
import { contractValidator } from "../input.ts";
import { principalOf } from "../namespaces.ts";

interface Deps {
  identity: IdentityService;
  policies: NamespacePolicies;
  store: Store;
  clock: Clock;
}

const tags = ["users and organizations"];

function view(
  s: NamespaceSettings,
  q: { limits: Limits; quotas: Record<string, { limit: number | null; usage: number }> },
) {
  return {
    name: s.name,
    kind: s.kind,
    resource_uri: namespaceUri(s.name),
    administrator: s.administrator,
    privileges: s.privileges,
    limits: q.limits,
    quotas: q.quotas,
  };
}

export function namespaceRoutes(untyped: FastifyInstance, deps: Deps): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const { identity, policies, store, clock } = deps;
  /** Limits as set, and each quota's limit in force with the namespace's usage (issue 26). */
  const quotasOf = async (ns: string) => {
    const { limits, exempt } = await store.quotas.settings(ns);
    const quotas: Record<string, { limit: number | null; usage: number }> = await store.quotas.report(
      ns,
      clock.now(),
    );
    for (const r of ["streams_per_key", "envvars_per_service", "env_bytes_per_service"] as const)
      quotas[r] = { limit: limitOf(r, limits, { exempt }), usage: 0 };
    return { limits, quotas };
  };
  const Params = Type.Object({ ns: Type.String({ maxLength: 100 }) });

  app.get(
    "/api/v1.1/namespaces/:ns/",
    {
      config: { access: "caller" },
      schema: {
        tags,
        summary: "Get a namespace's settings (its members and administrators)",
        params: Params,
        response: { 200: NamespaceView },
      },
    },
    async (req) => {
      const p = principalOf(req);
      const isMember = await identity.resolveNamespace(p, req.params.ns).then(
        () => true,
        (err: unknown) => {
          if (err instanceof ApiError && err.kind === "not_found") return false;
          throw err;
        },
      );
      const settings = await policies.settingsFor(p, req.params.ns, isMember);
      return view(settings, await quotasOf(settings.name));
    },
  );

  app.patch(
    "/api/v1.1/namespaces/:ns/",
    {
      config: {
        action: "Namespace Update",
        access: { admin: "Only administrators can change a namespace's settings." },
      },
      validatorCompiler: contractValidator,
      schema: {
        tags,
        summary: "Change a namespace's settings: its privileges and quota limits (administrators)",
        params: Params,
        body: NamespacePatchBody,
        response: { 200: NamespaceView },
      },
    },
    async (req) => {
      const ns = req.params.ns;
      const current = await policies.settingsFor(principalOf(req), ns, false);
      req.audit.namespace = current.name;
      req.audit.object = namespaceUri(current.name);
      if (req.body.limits !== undefined) await store.quotas.putLimits(current.name, req.body.limits);
      const settings =
        req.body.privileges === undefined
          ? current
          : await policies.updatePrivileges(ns, req.body.privileges);
      return view(settings, await quotasOf(settings.name));
    },
  );
}
