// Operator endpoints (issue 16), outside the platform API and without credentials, like any
// service's probes: GET /healthz (the process answers), GET /readyz (database reachable,
// migrations done, workers running; 503 otherwise, so a load balancer stops sending traffic) and
// GET /metrics (Prometheus text format). Also times every request for the metrics.
import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { Metrics } from "../../ops/metrics.ts";

export interface Readiness {
  ready: boolean;
  /** "ok", or what is wrong, per check. */
  checks: Record<string, string>;
}

export interface OpsDeps {
  replicaId: string;
  metrics: Metrics;
  /** BERTH_METRICS_TOKEN: a request bearing it also gets per-namespace series. */
  metricsToken?: string;
  readiness(): Promise<Readiness>;
}

const Health = Type.Object({ status: Type.String(), replica: Type.String() });
const Ready = Type.Object({
  status: Type.String(),
  replica: Type.String(),
  checks: Type.Record(Type.String(), Type.String()),
});

export function opsRoutes(app: FastifyInstance, deps: OpsDeps): void {
  app.addHook("onResponse", async (request, reply) => {
    deps.metrics.httpDuration.observe(
      {
        method: request.method,
        route: request.routeOptions.url ?? "unmatched",
        status: String(reply.statusCode),
      },
      reply.elapsedTime / 1000,
    );
  });

  app.get(
    "/healthz",
    {
      config: { access: "public" },
      schema: {
        tags: ["operations"],
        summary: "Liveness: the process answers",
        response: { 200: Health },
      },
    },
    async () => ({ status: "alive", replica: deps.replicaId }),
  );

  app.get(
    "/readyz",
    {
      config: { access: "public" },
      schema: {
        tags: ["operations"],
        summary: "Readiness: database reachable, migrations done, workers running",
        response: { 200: Ready, 503: Ready },
      },
    },
    async (_request, reply) => {
      const r = await deps.readiness();
      return reply
        .code(r.ready ? 200 : 503)
        .header("cache-control", "no-store")
        .send({ status: r.ready ? "ready" : "not ready", replica: deps.replicaId, checks: r.checks });
    },
  );

  app.get(
    "/metrics",
    {
      config: { access: "public" },
      schema: {
        tags: ["operations"],
        summary: "Metrics in the Prometheus text format",
        description:
          "Per-namespace series (berth_namespace_*) only with `Authorization: Bearer <BERTH_METRICS_TOKEN>`.",
        response: { 200: Type.String() },
      },
    },
    async (request, reply) => {
      const text = bearsToken(request.headers.authorization, deps.metricsToken)
        ? await deps.metrics.tenantText()
        : await deps.metrics.text();
      return reply.header("content-type", deps.metrics.contentType).send(text);
    },
  );
}

/** Whether an Authorization header is `Bearer <token>` for the configured token (compared in constant time). */
function bearsToken(header: string | undefined, token: string | undefined): boolean {
  if (!token || !header?.startsWith("Bearer ")) return false;
  const given = createHash("sha256").update(header.slice(7)).digest();
  return timingSafeEqual(given, createHash("sha256").update(token).digest());
}
