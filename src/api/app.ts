// Builds the Fastify application; it does not listen (src/main.ts does). Tests call
// buildApp() and use inject() or listen on an ephemeral port.
import cookie from "@fastify/cookie";
import swagger from "@fastify/swagger";
import websocket from "@fastify/websocket";
import Fastify, { type FastifyInstance } from "fastify";
import type { ActionEngine } from "../actions/engine.ts";
import type { Relations } from "../actions/relations.ts";
import type { Catalogue } from "../catalogue/catalogue.ts";
import type { LogLevel } from "../config/index.ts";
import type { IdentityService } from "../identity/service.ts";
import type { Store } from "../store/store.ts";
import { type BearerVerifier, installAuth, type PasswordGuard } from "./auth.ts";
import { installNoContentLength, installQueryBooleans, keepsDeleteBody, normalizeUrl } from "./compat.ts";
import { installErrorHandling } from "./errors.ts";
import { installRecorder } from "./recorder.ts";
import { actionRoutes } from "./routes/actions.ts";
import { catalogueRoutes } from "./routes/catalogue.ts";
import { identityRoutes } from "./routes/identity.ts";
import { MethodTable } from "./routing.ts";
import type { SessionVerifier } from "./session.ts";
import { staticRoutes } from "./static.ts";
import { websocketPluginOptions } from "./streams/sockets.ts";

export const BODY_LIMIT_BYTES = 1024 * 1024;

export interface AppDeps {
  store: Store;
  identity: IdentityService;
  actions: ActionEngine;
  relations: Relations;
  catalogue: Catalogue;
  publicUrl: string;
  logLevel?: LogLevel;
  /** Where the log goes instead of stdout (tests read it). */
  logStream?: NodeJS.WritableStream;
  /** Carried by every log line, so that the lines of several replicas can be told apart. */
  replicaId?: string;
  bearer?: BearerVerifier;
  /** Failed sign-in limits for passwords on the accounts API. */
  passwords?: PasswordGuard;
  /** Dashboard sessions: the cookie is accepted (with its CSRF defence) where credentials are. */
  sessions?: SessionVerifier;
  /** Folder of the built dashboard (web/build.ts), served at `/`. */
  webDir?: string;
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
      ...(deps.replicaId ? { base: { pid: process.pid, replica: deps.replicaId } } : {}),
      serializers: {
        req: (req: { method: string; url: string }) => ({ method: req.method, url: redactUrl(req.url) }),
      },
      ...(deps.logStream ? { stream: deps.logStream } : {}),
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
    if (
      request.method === "GET" ||
      request.method === "HEAD" ||
      (request.method === "DELETE" && !keepsDeleteBody(request.url))
    )
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
      components: {
        securitySchemes: {
          basic: { type: "http", scheme: "basic" },
          // Accounts API access tokens (CONTRACT §11).
          oauth2: {
            type: "oauth2",
            flows: {
              password: {
                tokenUrl: "/oauth/token",
                scopes: {
                  profile_read: "read the profile",
                  profile_write: "update the profile",
                  email_read: "list email addresses",
                  email_write: "add, verify, delete email addresses and choose the primary one",
                },
              },
            },
          },
        },
      },
      security: [{ basic: [] }],
    },
  });

  // Before any route: the plugin's onRoute hook turns routes with a wsHandler into streams.
  await app.register(websocket, websocketPluginOptions());
  installErrorHandling(app);
  await app.register(cookie);
  installAuth(app, deps.identity, deps.bearer, deps.passwords, deps.sessions);
  installRecorder(app, deps.actions);
  installNoContentLength(app);
  installQueryBooleans(app);
  const methods = new MethodTable(app);

  identityRoutes(app, deps);
  catalogueRoutes(app, deps.catalogue);
  actionRoutes(app, deps);
  for (const register of deps.routes ?? []) register(app);
  if (deps.webDir) staticRoutes(app, deps.webDir);

  methods.installFallbacks(app);
  return app;
}
