// The router's routes (issue 30): a service's routes with request figures, uploaded certificates
// of its host names, and host names administrators reserve for a namespace.
import { createPrivateKey, X509Certificate } from "node:crypto";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { Type } from "typebox";
import { NoContent } from "../../contract/common.ts";
import {
  CertificateBody,
  CertificateView,
  HostClaimBody,
  HostClaimView,
  RouteList,
} from "../../contract/router.ts";
import { acmeProblem, isHostName } from "../../domain/domains.ts";
import { conflict, invalidField, notFound } from "../../domain/errors.ts";
import { restTime } from "../../domain/time.ts";
import { containerUri, serviceUri } from "../../domain/uri.ts";
import { hostTaken } from "../../orchestrator/host-claims.ts";
import { certificateView } from "../../router/domain-views.ts";
import type { RouterModule } from "../../router/routers.ts";
import { specOf } from "../../store/codec.ts";
import { type HostClaimRow, RouterStore } from "../../store/router.ts";
import type { ServiceRow } from "../../store/services.ts";
import type { Store } from "../../store/store.ts";
import { contractValidator } from "../input.ts";
import { envelope, listSchema, PAGE_QUERY, pageOf } from "../lists.ts";
import { ownObject, UuidParams } from "../objects.ts";
import { nsPaths } from "../routing.ts";

interface Deps {
  store: Store;
  router: RouterModule;
  seal(plain: string): string;
}

const HostParams = Type.Object({ host: Type.String() });
const ServiceHostParams = Type.Object({
  uuid: Type.String(),
  host: Type.String(),
  namespace: Type.Optional(Type.String()),
});

function claimView(c: HostClaimRow) {
  return { host: c.host, namespace: c.namespace, reserved: c.reserved === 1, created: restTime(c.created) };
}

/** The certificate and key of an upload, checked: PEM, for the host name, the key the certificate's. */
function checkedUpload(host: string, certificate: string, key: string): { expires: number; issuer: string } {
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(certificate);
  } catch {
    throw invalidField("certificate", "must be a PEM certificate (-----BEGIN CERTIFICATE-----)");
  }
  let privateKey: ReturnType<typeof createPrivateKey>;
  try {
    privateKey = createPrivateKey(key);
  } catch {
    throw invalidField("key", "must be a PEM private key without a passphrase");
  }
  if (!x509.checkPrivateKey(privateKey)) throw invalidField("key", "is not the key of the certificate");
  if (x509.checkHost(host) === undefined)
    throw invalidField(
      "certificate",
      `does not name ${host} (its subject is ${x509.subject.replace(/\n/g, ", ")})`,
    );
  const expires = Date.parse(x509.validTo);
  if (!(expires > Date.now())) throw invalidField("certificate", `expired on ${x509.validTo}`);
  return { expires, issuer: x509.issuer.replace(/\n/g, ", ") };
}

export function routerRoutes(untyped: FastifyInstance, deps: Deps): void {
  const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
  const { store, router } = deps;
  const routerStore = new RouterStore(store);
  const tags = ["router"];
  const serviceOf = async (req: FastifyRequest, uuid: string): Promise<ServiceRow> =>
    ownObject(req, await store.services.findService(uuid), "service", serviceUri);

  for (const url of nsPaths("/api/app/v1/{ns}service/:uuid/routes/")) {
    app.get(
      url,
      {
        config: { access: "namespace" },
        schema: {
          tags,
          summary: "A service's routes on its namespace's routers, with request figures",
          params: UuidParams,
          response: { 200: RouteList },
        },
      },
      async (req) => {
        const s = await serviceOf(req, req.params.uuid);
        const built = await router.routes(s.namespace);
        const counters = await router.counters(s.namespace);
        const mine = built.routes.filter((r) => r.service === s.uuid);
        const objects = mine.map((r) => ({
          host: r.host,
          path: r.path,
          port: r.port,
          tls: r.tls,
          redirect_https: r.redirect_https,
          sticky: r.sticky,
          weight: r.weight,
          source: r.source,
          upstreams: r.upstreams.map((u) => ({
            container: containerUri({ namespace: s.namespace, uuid: u.container }),
            name: u.name,
            address: u.address,
            held: u.held,
          })),
          problem: (r.tls === "acme" ? acmeProblem(r.host) : undefined) ?? (null as string | null),
          ...router.figures(r.id, counters.get(r.id)),
        }));
        for (const p of built.problems.filter((x) => x.service === s.uuid)) {
          objects.push({
            host: p.host,
            path: "",
            port: 0,
            tls: "off",
            redirect_https: false,
            sticky: false,
            weight: 0,
            source: "domains",
            upstreams: [],
            problem: p.problem,
            ...router.figures("", undefined),
          });
        }
        return { objects };
      },
    );
  }

  for (const url of nsPaths("/api/app/v1/{ns}service/:uuid/certificate/")) {
    app.put(
      url,
      {
        config: { action: "Service Certificate Upload", access: "namespace" },
        validatorCompiler: contractValidator,
        schema: {
          tags,
          summary: "Upload the certificate and key of one of the service's host names (tls: uploaded)",
          params: UuidParams,
          body: CertificateBody,
          response: { 200: CertificateView },
        },
      },
      async (req) => {
        const s = await serviceOf(req, req.params.uuid);
        const host = req.body.host.trim().toLowerCase();
        const domain = (specOf(s).domains ?? []).find((d) => d.host === host);
        if (!domain) throw invalidField("host", `is not a host name of service ${s.name}`);
        if (domain.tls !== "uploaded")
          throw conflict(
            `The domain ${host} of service ${s.name} has tls ${domain.tls}; set its tls to uploaded first.`,
            "tls_not_uploaded",
          );
        const { expires, issuer } = checkedUpload(host, req.body.certificate, req.body.key);
        const row = {
          host,
          namespace: s.namespace,
          state: "uploaded",
          issuer,
          expires_at: expires,
          error: null,
          sealed_cert: deps.seal(req.body.certificate),
          sealed_key: deps.seal(req.body.key),
          updated: Date.now(),
        };
        await routerStore.putCertificate(row, [s]);
        return certificateView(row);
      },
    );
  }

  for (const url of nsPaths("/api/app/v1/{ns}service/:uuid/certificate/:host/")) {
    app.delete(
      url,
      {
        config: { action: "Service Certificate Delete", access: "namespace" },
        schema: {
          tags,
          summary: "Remove an uploaded certificate of one of the service's host names",
          params: ServiceHostParams,
          response: { 204: NoContent },
        },
      },
      async (req, reply) => {
        const s = await serviceOf(req, req.params.uuid);
        const host = req.params.host.toLowerCase();
        const [cert] = await routerStore.certificatesOf([host]);
        if (!cert || cert.namespace !== s.namespace || cert.state !== "uploaded")
          throw notFound("certificate");
        await routerStore.deleteCertificate(host);
        return reply.status(204).send();
      },
    );
  }

  // ---- host names reserved by administrators ------------------------------------------------------

  const admin = { admin: "Only administrators can reserve host names." };
  app.get(
    "/api/v1.1/hostnames/",
    {
      config: { access: admin },
      schema: {
        tags,
        summary: "Host names held by namespaces (administrators)",
        querystring: Type.Object({ ...PAGE_QUERY, namespace: Type.Optional(Type.String()) }),
        response: { 200: listSchema(HostClaimView) },
      },
    },
    async (req) => {
      const page = pageOf(req.query);
      const { rows, total } = await routerStore.listClaims({ namespace: req.query.namespace, ...page });
      return envelope(req, page, total, rows.map(claimView));
    },
  );
  app.post(
    "/api/v1.1/hostnames/",
    {
      config: { action: "Host Name Reserve", access: admin },
      validatorCompiler: contractValidator,
      schema: {
        tags,
        summary: "Reserve a host name for a namespace (administrators)",
        body: HostClaimBody,
        response: { 201: HostClaimView },
      },
    },
    async (req, reply) => {
      const host = req.body.host.trim().toLowerCase();
      if (!isHostName(host)) throw invalidField("host", "must be a host name such as app.example.com");
      const ns = req.body.namespace;
      req.audit.object = `/api/v1.1/hostnames/${host}/`;
      const now = Date.now();
      const row = await store.transaction(async (tx) => {
        const rs = new RouterStore(tx);
        const [cur] = await rs.claimsOf([host]);
        const next = { host, namespace: ns, reserved: 1, created: now };
        if (!cur) await rs.insertClaim(next);
        else if (cur.namespace === ns)
          await rs.moveClaim(cur, { namespace: ns, reserved: 1, created: cur.created });
        else {
          const serving = (await tx.services.liveServices({ namespace: cur.namespace })).some((s) =>
            (specOf(s).domains ?? []).some((d) => d.host === host),
          );
          if (serving) throw hostTaken(host, cur.reserved === 1);
          await rs.moveClaim(cur, next);
        }
        return (await rs.claimsOf([host]))[0]!;
      });
      return reply.status(201).send(claimView(row));
    },
  );
  app.delete(
    "/api/v1.1/hostnames/:host/",
    {
      config: { action: "Host Name Release", access: admin },
      schema: {
        tags,
        summary: "Release a host name (administrators)",
        params: HostParams,
        response: { 204: NoContent },
      },
    },
    async (req, reply) => {
      req.audit.object = `/api/v1.1/hostnames/${req.params.host}/`;
      if (!(await routerStore.deleteClaim(req.params.host.toLowerCase()))) throw notFound("host name");
      return reply.status(204).send();
    },
  );
}
