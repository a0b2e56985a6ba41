// Serves the dashboard's built files (web/build.ts writes them, with .br and .gz twins) at `/` and
// `/assets/…` on the API's listener. Assets carry a content hash in their name and are cached for
// good; the page itself is revalidated (ETag) so a new build is picked up at the next load.
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Type } from "typebox";
import { ErrorView } from "../contract/common.ts";

/** A built file (a buffer): never serialized. */
const FileBody = Type.Unsafe<Buffer>({ type: "string" });

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".json": "application/json",
  ".woff2": "font/woff2",
  ".map": "application/json",
};

interface StaticFile {
  type: string;
  etag: string;
  identity: Buffer;
  br?: Buffer;
  gzip?: Buffer;
}

/** What the page may load: only this origin (no CDN), streams on this host; xterm sets inline styles. */
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
  "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

function loadFiles(dir: string): Map<string, StaticFile> {
  const files = new Map<string, StaticFile>();
  if (!fs.existsSync(path.join(dir, "index.html"))) return files;
  for (const name of fs.readdirSync(dir, { recursive: true }) as string[]) {
    const full = path.join(dir, name);
    const ext = path.extname(name);
    if (ext === ".br" || ext === ".gz" || !fs.statSync(full).isFile()) continue;
    const identity = fs.readFileSync(full);
    const twin = (suffix: string) =>
      fs.existsSync(full + suffix) ? fs.readFileSync(full + suffix) : undefined;
    files.set(`/${name.split(path.sep).join("/")}`, {
      type: TYPES[ext] ?? "application/octet-stream",
      etag: `"${createHash("sha256").update(identity).digest("base64url").slice(0, 22)}"`,
      identity,
      br: twin(".br"),
      gzip: twin(".gz"),
    });
  }
  return files;
}

function send(request: FastifyRequest, reply: FastifyReply, file: StaticFile, immutable: boolean) {
  reply
    .header("Content-Type", file.type)
    .header("ETag", file.etag)
    .header("Vary", "Accept-Encoding")
    .header("X-Content-Type-Options", "nosniff")
    .header("Cache-Control", immutable ? "public, max-age=31536000, immutable" : "no-cache");
  if (request.headers["if-none-match"] === file.etag) return reply.status(304).send();
  const accepted = String(request.headers["accept-encoding"] ?? "");
  if (file.br && /\bbr\b/.test(accepted)) return reply.header("Content-Encoding", "br").send(file.br);
  if (file.gzip && /\bgzip\b/.test(accepted)) return reply.header("Content-Encoding", "gzip").send(file.gzip);
  return reply.send(file.identity);
}

/** Registers `/` and `/assets/*` from `dir`; without a build, `/` says how to make one. */
export function staticRoutes(app: FastifyInstance, dir: string): void {
  const typed = app.withTypeProvider<TypeBoxTypeProvider>();
  const files = loadFiles(dir);
  const index = files.get("/index.html");
  // HTML, scripts, styles: never serialized as JSON (strings and buffers pass as they are).
  const hide = { hide: true, response: { 200: Type.String(), 503: Type.String() } };
  app.get("/", { schema: hide, config: { access: "public" } }, async (request, reply) => {
    if (!index)
      return reply
        .status(503)
        .header("Content-Type", "text/plain; charset=utf-8")
        .send("The dashboard is not built. Run `npm run build:web` (npm start does it), then reload.\n");
    reply
      .header("Content-Security-Policy", CSP)
      .header("X-Frame-Options", "DENY")
      .header("Referrer-Policy", "no-referrer");
    return send(request, reply, index, false);
  });
  const AssetParams = Type.Object({ "*": Type.String() });
  typed.get(
    "/assets/*",
    {
      schema: { ...hide, params: AssetParams, response: { 200: FileBody, 404: ErrorView } },
      config: { access: "public" },
    },
    async (request, reply) => {
      const name = request.params["*"];
      const file = files.get(`/assets/${name}`);
      if (!file)
        return reply.status(404).send({ error: `No dashboard file at /assets/${name}.`, code: "not_found" });
      return send(request, reply, file, true);
    },
  );
}
