// The server log, made first (platform.ts): every part that reports takes it, and the HTTP app
// logs through it (Fastify's `loggerInstance`), so no report waits for the app to exist.
import type { FastifyBaseLogger } from "fastify";
import pino from "pino";
import type { LogLevel } from "../config/index.ts";
import { redactUrl } from "./redact.ts";

export type ServerLog = FastifyBaseLogger;

export function serverLog(o: {
  level?: LogLevel;
  /** Carried by every line, so that the lines of several replicas can be told apart. */
  replicaId?: string;
  /** Where the lines go instead of stdout (tests read them). */
  stream?: NodeJS.WritableStream;
}): ServerLog {
  return pino(
    {
      level: o.level ?? "info",
      ...(o.replicaId ? { base: { pid: process.pid, replica: o.replicaId } } : {}),
      serializers: {
        // Logged URLs hide every query parameter whose name is a secret (api/redact.ts).
        req: (req: { method: string; url: string }) => ({ method: req.method, url: redactUrl(req.url) }),
      },
    },
    o.stream,
  );
}
