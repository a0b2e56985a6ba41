// Builds the Fastify application; it does not listen (src/main.ts does). Tests call
// buildApp() and use inject() or listen on an ephemeral port.
import { STATUS_CODES } from "node:http";
import cookie from "@fastify/cookie";
import swagger from "@fastify/swagger";
import websocket from "@fastify/websocket";
import Fastify, { type FastifyInstance } from "fastify";
import type { ActionEngine } from "../actions/engine.ts";
import type { Relations } from "../actions/relations.ts";
import type { Catalogue } from "../catalogue/catalogue.ts";
import type { IdentityService } from "../identity/service.ts";
import type { Store } from "../store/store.ts";
import { installAccess } from "./access.ts";
import { installAnswerCheck } from "./answers.ts";
import { type BearerVerifier, installAuth, type PasswordGuard } from "./auth.ts";
import { installNoContentLength, keepsDeleteBody, normalizeUrl } from "./compat.ts";
import { installCompression } from "./compression.ts";
import { clientRefusal, type EarlyRefusal, frameworkRefusal, installErrorHandling } from "./errors.ts";
import { installInputRules } from "./input.ts";
import type { ServerLog } from "./logger.ts";
import { callMeta, installRecorder, recordEarlyRefusal } from "./recorder.ts";
import { actionRoutes } from "./routes/actions.ts";
import { catalogueRoutes } from "./routes/catalogue.ts";
import { identityRoutes } from "./routes/identity.ts";
import { MethodTable } from "./routing.ts";
import { installOpenSerializer } from "./serialize.ts";
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
  /** The server log (api/logger.ts), made before the app. */
  log: ServerLog;
  bearer?: BearerVerifier;
  /** Failed sign-in limits for passwords on the accounts API. */
  passwords?: PasswordGuard;
  /** Dashboard sessions: the cookie is accepted (with its CSRF defence) where credentials are. */
  sessions?: SessionVerifier;
  /** Folder of the built dashboard (web/build.ts), served at `/`. */
  webDir?: string;
  /** Check every answer against its route's response schema (tests; api/answers.ts). */
  checkAnswers?: boolean;
  /** Extra routes (later resources, or test fixtures); registered before the 405 fallbacks. */
  routes?: ((app: FastifyInstance) => void)[];
}

/** The schema with only the path parameters `url` has (`:name`, or `*`). */
function withPathParamsOf<S extends { params?: unknown } | undefined>(url: string, schema: S): S {
  const params = schema?.params as { properties?: Record<string, unknown>; required?: string[] } | undefined;
  if (!schema || !params?.properties) return schema;
  const inUrl = (name: string) => (name === "*" ? url.includes("*") : url.includes(`:${name}`));
  const names = Object.keys(params.properties);
  if (names.every(inUrl)) return schema;
  const kept = names.filter(inUrl);
  return {
    ...schema,
    params: {
      ...params,
      properties: Object.fromEntries(kept.map((n) => [n, params.properties![n]])),
      required: (params.required ?? []).filter(inUrl),
    },
  };
}

/** The request line and Authorization header of a request Node's parser refused, when readable. */
function readRawRequest(
  raw: Buffer | undefined,
): { method: string; path: string; authorization?: string } | undefined {
  if (!raw) return undefined;
  const text = raw.subarray(0, 16 * 1024).toString("latin1");
  const [line, ...headers] = text.split("\r\n");
  const m = /^([A-Za-z-]{1,32}) (\/\S*) HTTP\/1\.[01]$/.exec(line ?? "");
  if (!m) return undefined;
  const auth = headers.find((h) => /^authorization:/i.test(h));
  return {
    method: m[1]!.toUpperCase(),
    path: normalizeUrl(m[2]!).split("?")[0]!,
    ...(auth ? { authorization: auth.slice(auth.indexOf(":") + 1).trim() } : {}),
  };
}

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  // Bound below, once the route table exists; the HTTP layer's own refusals consult it.
  let methods: MethodTable | undefined;
  const sendEarly = (refusal: EarlyRefusal, actionHeaders: Record<string, string>) => {
    const body = JSON.stringify({ error: refusal.error, code: refusal.code });
    return { body, headers: { ...actionHeaders, ...(refusal.headers ?? {}) } };
  };
  const app = Fastify({
    loggerInstance: deps.log,
    bodyLimit: BODY_LIMIT_BYTES,
    rewriteUrl: (req) => normalizeUrl(req.url ?? "/"),
    routerOptions: { ignoreTrailingSlash: true, ignoreDuplicateSlashes: true },
    ajv: {
      customOptions: { coerceTypes: "array", useDefaults: true, removeAdditional: false, allErrors: false },
    },
    return503OnClosing: true,
    // Errors raised while routing: the same {error, code} bodies, and the action of an
    // authenticated platform call (CONTRACT §6, §7).
    frameworkErrors: (error, request, reply) => {
      const refusal = frameworkRefusal(error);
      const path = request.raw.url?.split("?")[0] ?? "/";
      void recordEarlyRefusal(deps, {
        method: request.method,
        path,
        authorization: request.headers.authorization,
        meta: { ...callMeta(request), path },
        refusal,
      })
        .catch((err: unknown) => {
          request.log.error({ err }, "could not record the action of a refused call");
          return {};
        })
        .then((actionHeaders) => {
          const { body, headers } = sendEarly(refusal, actionHeaders);
          const raw = reply.raw;
          if (raw.headersSent) return;
          raw.writeHead(refusal.status, {
            ...headers,
            "Content-Type": "application/json; charset=utf-8",
            "Content-Length": Buffer.byteLength(body),
          });
          raw.end(body);
        });
    },
    // Errors of Node's HTTP parser (bad request line, unknown method, headers over 16 KiB).
    clientErrorHandler(error, socket) {
      if ((error as NodeJS.ErrnoException).code === "ECONNRESET" || socket.destroyed) return;
      const raw = readRawRequest((error as unknown as { rawPacket?: Buffer }).rawPacket);
      const allow = raw ? methods?.allowedMethods(raw.path) : undefined;
      const refusal = clientRefusal(error as NodeJS.ErrnoException, raw && { method: raw.method, allow });
      const recorded =
        raw && refusal.status !== 431
          ? recordEarlyRefusal(deps, {
              method: raw.method,
              path: raw.path,
              authorization: raw.authorization,
              meta: {
                method: raw.method,
                path: raw.path,
                user: "",
                userAgent: "",
                ip: socket.remoteAddress ?? "",
              },
              refusal,
            }).catch(() => ({}))
          : Promise.resolve({});
      void recorded.then((actionHeaders) => {
        if (!socket.writable) return socket.destroy();
        const { body, headers } = sendEarly(refusal, actionHeaders);
        const lines = [
          `HTTP/1.1 ${refusal.status} ${STATUS_CODES[refusal.status] ?? "Error"}`,
          "Content-Type: application/json; charset=utf-8",
          `Content-Length: ${Buffer.byteLength(body)}`,
          "Connection: close",
          ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
        ];
        socket.end(`${lines.join("\r\n")}\r\n\r\n${body}`);
      });
    },
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
    // Both path forms share one params schema (`namespace` optional); each form documents only
    // the parameters its path has.
    transform: ({ schema, url }) => ({ schema: withPathParamsOf(url, schema), url }),
  });

  // Before any route: the plugin's onRoute hook turns routes with a wsHandler into streams.
  await app.register(websocket, websocketPluginOptions());
  const table = new MethodTable(app);
  methods = table;
  installErrorHandling(app, { allowedMethods: (path) => table.allowedMethods(path) });
  installInputRules(app);
  installOpenSerializer(app);
  await app.register(cookie);
  installAuth(app, deps.identity, deps.bearer, deps.passwords, deps.sessions);
  installAccess(app, deps.identity);
  if (deps.checkAnswers) installAnswerCheck(app);
  installRecorder(app, deps.actions);
  installNoContentLength(app);
  installCompression(app);

  identityRoutes(app, deps);
  catalogueRoutes(app, deps.catalogue);
  actionRoutes(app, deps);
  for (const register of deps.routes ?? []) register(app);
  if (deps.webDir) staticRoutes(app, deps.webDir);

  table.installFallbacks(app);
  return app;
}
