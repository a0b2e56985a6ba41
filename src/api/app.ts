// Builds the Fastify application; it does not listen (src/main.ts does). Tests call
// buildApp() and use inject() or listen on an ephemeral port.
import swagger from "@fastify/swagger";
import Fastify, { type FastifyInstance } from "fastify";
import type { ActionEngine } from "../actions/engine.ts";
import type { Relations } from "../actions/relations.ts";
import type { Catalogue } from "../catalogue/catalogue.ts";
import type { LogLevel } from "../config/index.ts";
import type { IdentityService } from "../identity/service.ts";
import type { Store } from "../store/store.ts";
import { type BearerVerifier, installAuth } from "./auth.ts";
import { installNoContentLength, normalizeUrl } from "./compat.ts";
import { installErrorHandling } from "./errors.ts";
import { installRecorder } from "./recorder.ts";
import { actionRoutes } from "./routes/actions.ts";
import { catalogueRoutes } from "./routes/catalogue.ts";
import { identityRoutes } from "./routes/identity.ts";
import { MethodTable } from "./routing.ts";

export const BODY_LIMIT_BYTES = 1024 * 1024;

export interface AppDeps {
  store: Store;
  identity: IdentityService;
  actions: ActionEngine;
  relations: Relations;
  catalogue: Catalogue;
  publicUrl: string;
  logLevel?: LogLevel;
  bearer?: BearerVerifier;
  /** Extra routes (later resources, or test fixtures); registered before the 405 fallbacks. */
  routes?: ((app: FastifyInstance) => void)[];
}

/** Never log secrets: stream credentials may ride in the query string. */
function redactUrl(url: string): string {
  return url.replace(/([?&](token|password)=)[^&]*/gi, "$1***");
}

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    logger: {
      level: deps.logLevel ?? "info",
      serializers: {
        req: (req: { method: string; url: string }) => ({ method: req.method, url: redactUrl(req.url) }),
      },
    },
    bodyLimit: BODY_LIMIT_BYTES,
    rewriteUrl: (req) => normalizeUrl(req.url ?? "/"),
    routerOptions: { ignoreTrailingSlash: true, ignoreDuplicateSlashes: true },
    ajv: {
      customOptions: { coerceTypes: "array", useDefaults: true, removeAdditional: false, allErrors: false },
    },
    return503OnClosing: true,
  });

  // Any body is JSON whatever its Content-Type (CONTRACT §1), except form posts to the token endpoint.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "string" }, (request, body, done) => {
    if (request.method === "GET" || request.method === "DELETE" || request.method === "HEAD")
      return done(null, undefined);
    const text = String(body);
    if (text.trim() === "") return done(null, undefined);
    const looksJson = /^\s*[[{"]/.test(text);
    if (!looksJson && request.url.startsWith("/oauth/")) {
      return done(null, Object.fromEntries(new URLSearchParams(text)));
    }
    try {
      done(null, JSON.parse(text));
    } catch {
      const err = new SyntaxError("The body is not valid JSON.");
      done(err, undefined);
    }
  });

  await app.register(swagger, {
    openapi: {
      openapi: "3.0.3",
      info: {
        title: "Berth API",
        version: "1.0.0",
        description: "Container platform (app, audit, infra, repo) and accounts API of Berth.",
      },
      components: { securitySchemes: { basic: { type: "http", scheme: "basic" } } },
      security: [{ basic: [] }],
    },
  });

  installErrorHandling(app);
  installAuth(app, deps.identity, deps.bearer);
  installRecorder(app, deps.actions);
  installNoContentLength(app);
  const methods = new MethodTable(app);

  identityRoutes(app, deps);
  catalogueRoutes(app, deps.catalogue);
  actionRoutes(app, deps);
  for (const register of deps.routes ?? []) register(app);

  methods.installFallbacks(app);
  return app;
}
