// JSON answers compressed for clients that ask (`Accept-Encoding: br` or `gzip`): a list of
// containers shrinks about tenfold. A client that sends no Accept-Encoding (historical clients
// among them) gets the plain body, as before. Small bodies, streams and already-encoded answers
// (the dashboard's files, served with their own .br and .gz twins) are left alone.
import { promisify } from "node:util";
import zlib from "node:zlib";
import type { FastifyInstance, FastifyRequest } from "fastify";

const brotli = promisify(zlib.brotliCompress);
const gzip = promisify(zlib.gzip);

/** Below this many bytes compression saves less than its headers cost. */
export const COMPRESS_MIN_BYTES = 1024;

/** The encoding to use for a request: br, then gzip, among those it accepts (q > 0), or none. */
export function chosenEncoding(header: string | undefined): "br" | "gzip" | undefined {
  if (!header) return undefined;
  const accepted = new Map<string, number>();
  for (const part of header.split(",")) {
    const [token, ...params] = part.trim().toLowerCase().split(";");
    const q = params.map((p) => /^\s*q=([\d.]+)\s*$/.exec(p)?.[1]).find((v) => v !== undefined);
    if (token) accepted.set(token, q === undefined ? 1 : Number(q));
  }
  const ok = (name: string) => (accepted.get(name) ?? accepted.get("*") ?? 0) > 0;
  if (ok("br")) return "br";
  if (ok("gzip")) return "gzip";
  return undefined;
}

function isJson(type: unknown): boolean {
  return typeof type === "string" && /^application\/(?:[\w.+-]+\+)?json\b/.test(type);
}

export function installCompression(app: FastifyInstance): void {
  app.addHook("onSend", async (request: FastifyRequest, reply, payload) => {
    if (reply.getHeader("content-encoding") || !isJson(reply.getHeader("content-type"))) return payload;
    if (typeof payload !== "string" && !Buffer.isBuffer(payload)) return payload;
    reply.header("Vary", "Accept-Encoding");
    const body = typeof payload === "string" ? Buffer.from(payload) : payload;
    if (body.length < COMPRESS_MIN_BYTES) return payload;
    const encoding = chosenEncoding(request.headers["accept-encoding"]);
    if (!encoding) return payload;
    const packed =
      encoding === "br"
        ? await brotli(body, {
            params: {
              [zlib.constants.BROTLI_PARAM_QUALITY]: 4,
              [zlib.constants.BROTLI_PARAM_SIZE_HINT]: body.length,
            },
          })
        : await gzip(body, { level: 6 });
    reply.header("Content-Encoding", encoding);
    reply.removeHeader("content-length");
    return packed;
  });
}
