// TypeBox schemas of the router's answers and bodies (issue 30): a service's domains with their
// certificates, its routes with request figures, uploaded certificates, reserved host names.
import { type Static, Type } from "typebox";
import { Nullable, Time, Uri, View } from "./common.ts";

export const CertificateView = View(
  {
    host: Type.String(),
    state: Type.String({
      description:
        "pending, issued, error, uploaded, or expiring (issued but within 14 days of its expiry, or half its renewal window for a short-lived one: the router's renewal, due a third of its lifetime before expiry by default (30 days of 90), has not happened; error says the last renewal error when one is known)",
    }),
    issuer: Type.String(),
    expires: Time,
    error: Nullable(Type.String({ description: "why it could not be obtained (the ACME server's words)" })),
  },
  "the certificate of a host name",
);
export type CertificateView = Static<typeof CertificateView>;

export const DomainView = View(
  {
    host: Type.String(),
    path: Type.String(),
    port: Nullable(Type.Integer()),
    tls: Type.String(),
    redirect_https: Type.Boolean(),
    sticky: Type.Boolean(),
    weight: Type.Integer(),
    certificate: Nullable(CertificateView),
  },
  "a host name (and path prefix) the service serves, with its certificate",
);
export type DomainView = Static<typeof DomainView>;

export const RouteView = View(
  {
    host: Type.String(),
    path: Type.String(),
    port: Type.Integer(),
    tls: Type.String(),
    redirect_https: Type.Boolean(),
    sticky: Type.Boolean(),
    weight: Type.Integer(),
    source: Type.String({ description: "domains, or virtual_host (VIRTUAL_HOST under a load balancer)" }),
    upstreams: Type.Array(
      View({
        container: Uri,
        name: Type.String(),
        address: Type.String(),
        held: Type.Boolean({
          description:
            "an old container kept routed while its replacement is not ready (a start-first redeploy, for at most BERTH_ROUTER_HOLD_MAX_MS, or a rollout paused after a failure, for as long as it is paused)",
        }),
      }),
    ),
    problem: Nullable(Type.String({ description: "why the route is not served" })),
    requests_total: Type.Integer(),
    requests_per_second: Type.Number(),
    error_rate: Type.Number({ description: "share of answers that were 5xx over the last interval" }),
    latency_p99_ms: Nullable(Type.Number()),
  },
  "a route of the service on its namespace's routers, with request figures",
);

export const RouteList = View({ objects: Type.Array(RouteView) });
export type RouteList = Static<typeof RouteList>;

export const CertificateBody = Type.Object(
  {
    host: Type.String({
      minLength: 1,
      maxLength: 253,
      description: "a host name of the service whose tls is uploaded",
    }),
    certificate: Type.String({ minLength: 1, maxLength: 64 * 1024, description: "PEM certificate chain" }),
    key: Type.String({ minLength: 1, maxLength: 16 * 1024, description: "PEM private key (sealed at rest)" }),
  },
  { additionalProperties: false, description: "Upload a certificate" },
);
export type CertificateBody = Static<typeof CertificateBody>;

export const HostClaimView = View({
  host: Type.String(),
  namespace: Type.String(),
  reserved: Type.Boolean(),
  created: Time,
});
export type HostClaimView = Static<typeof HostClaimView>;

export const HostClaimBody = Type.Object(
  {
    host: Type.String({ minLength: 1, maxLength: 253 }),
    namespace: Type.String({ minLength: 1, maxLength: 100 }),
  },
  { additionalProperties: false, description: "Reserve a host name for a namespace" },
);
export type HostClaimBody = Static<typeof HostClaimBody>;
