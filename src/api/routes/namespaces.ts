// Namespace settings (Berth extension next to organizations, CONTRACT §3): what administrators
// decide per namespace. `GET /api/v1.1/namespaces/<ns>/` shows them to the namespace's members and
// to administrators (404 for anyone else); `PATCH` changes them (administrators only) and is
// recorded as a `Namespace Update` action in the namespace's audit log.
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { NamespacePatchBody, NamespaceView, namespaceUri } from "../../contract/namespace.ts";
import { ApiError } from "../../domain/errors.ts";
import type { NamespacePolicies, NamespaceSettings } from "../../identity/privileges.ts";
import type { IdentityService } from "../../identity/service.ts";
import { contractValidator } from "../input.ts";
import { principalOf } from "../namespaces.ts";

interface Deps {
  identity: IdentityService;
  policies: NamespacePolicies;
}

const tags = ["users and organizations"];

function view(s: NamespaceSettings) {
  return {
    name: s.name,
    kind: s.kind,
    resource_uri: namespaceUri(s.name),
    administrator: s.administrator,
    privileges: s.privileges,
  };
}

export function namespaceRoutes(untyped: FastifyInstance, deps: Deps): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const { identity, policies } = deps;
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
      return view(await policies.settingsFor(p, req.params.ns, isMember));
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
        summary: "Change a namespace's settings: its privileges (administrators)",
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
      if (req.body.privileges === undefined) return view(current);
      return view(await policies.updatePrivileges(ns, req.body.privileges));
    },
  );
}
