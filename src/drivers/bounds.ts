// The bounds of every answer Berth reads from an engine, an agent's tunnel or anything else it
// does not control: how many bytes it buffers and how long it waits, named in one place, and the
// readers that hold them. An answer past a bound is cut (the connection destroyed, so nothing
// more arrives) and its call fails with an error naming the answer and the bound; the process
// buffers no more than the bound, whatever the far end sends.
import { type Readable, Transform } from "node:stream";

const KiB = 1024;
const MiB = 1024 * KiB;

/** Bounds of a node's router (drivers/router/caddy.ts): its admin API's answers, and the logs Berth reads. */
export const ROUTER_BOUNDS = {
  /** An answer of the router's admin API. */
  answerBytes: 1 * MiB,
  /** One admin call (a configuration load included). */
  callMs: 15_000,
  /** A TLS probe of one host name's certificate. */
  probeMs: 4_000,
  /** Of the router's own log, the tail read for certificate errors. */
  logTailBytes: 256 * KiB,
  /** Of the access log, what is read per reading (older lines are skipped, counted as lost). */
  accessReadBytes: 8 * MiB,
} as const;

/** Bytes Berth buffers of one engine answer, by kind. */
export const ENGINE_ANSWER_BYTES = {
  /** A JSON answer held whole before it is parsed (info, version, create, exec inspect…). */
  json: 8 * MiB,
  /**
   * A container inspect: the definition comes back, with up to a few MiB of environment and
   * labels (Berth's own labels carry the environment's origins).
   */
  inspect: 16 * MiB,
  /**
   * A container list. Docker answers ~1-2 KiB per container (labels included), so 10,000
   * containers on one node are 10-20 MiB.
   */
  list: 48 * MiB,
  /** The body of a refusal (an HTTP status Berth did not ask for); only its message is kept. */
  error: 64 * KiB,
  /** One line of a newline-delimited JSON stream (events, pull, push and load progress). */
  jsonLine: 1 * MiB,
  /**
   * One frame of multiplexed output (logs, exec): Docker writes log messages of at most 16 KiB
   * and exec output in reads of 32 KiB.
   */
  frame: 1 * MiB,
  /** A log line without its newline is passed on in pieces of this size. */
  logLine: 256 * KiB,
  /** Exec output read from the engine and not yet taken by its reader: the engine is paused beyond. */
  execQueue: 1 * MiB,
  /** Output of the commands Berth itself runs in containers (the link host entries script). */
  commandOutput: 64 * KiB,
  /** One container's stats (`/containers/<id>/stats`): per-CPU lists make it grow with the host. */
  stats: 1 * MiB,
} as const;

/** How long Berth waits for an engine, by kind of call. */
export const ENGINE_TIMEOUTS_MS = {
  /** An ordinary call, answer included; a stream's wait for its answer to begin. */
  call: 30_000,
  /** `/_ping`. */
  ping: 3_000,
  /** A node's health probe (`/info` and `/version`). */
  probe: 4_000,
  /** One container's stats, read by the stats collector (stats/collector.ts) at every interval. */
  stats: 5_000,
  /** Push and image load: the engine answers once the upload is read. */
  upload: 600_000,
  /** A pull, push or load progress stream that says nothing for this long is given up. */
  progressIdle: 300_000,
  /** A pull, push or load never takes longer than this, however steadily it reports progress. */
  progressTotal: 3_600_000,
} as const;

/**
 * A volume's archive read from an engine (volume backups): at most `bytes`, given up when it says
 * nothing for `idleMs` or takes longer than `totalMs`; a write to an engine has the same time.
 */
export const VOLUME_ARCHIVE = {
  bytes: 16 * 1024 * MiB,
  idleMs: 120_000,
  totalMs: 3_600_000,
} as const;

/**
 * Calls to an S3-compatible backup target (ops/s3-target.ts): each call (a list, a stat, a delete,
 * the start of an upload or download) ends within `callMs`; a transfer says something at least
 * every `idleMs` and ends within `totalMs`; an object read is at most `bytes`; a listing reads at
 * most `listEntries` objects.
 */
export const BACKUP_TARGET = {
  callMs: 30_000,
  idleMs: 120_000,
  totalMs: 3_600_000,
  bytes: 16 * 1024 * MiB,
  listEntries: 10_000,
} as const;

/** Error code of an answer cut at a bound (Node's code style, so network-error checks can tell it). */
export const ANSWER_TOO_LARGE = "ERR_BERTH_ANSWER_TOO_LARGE";
export const ANSWER_TOO_SLOW = "ERR_BERTH_ANSWER_TOO_SLOW";

/** An answer broke one of the bounds above; `message` names the answer and the bound. */
export class AnswerBoundError extends Error {
  constructor(
    message: string,
    readonly code: typeof ANSWER_TOO_LARGE | typeof ANSWER_TOO_SLOW,
  ) {
    super(message);
    this.name = "AnswerBoundError";
  }
}

export function isAnswerBoundError(err: unknown): err is AnswerBoundError {
  return err instanceof AnswerBoundError;
}

/** `8388608` → `8 MiB`. */
export function formatBytes(n: number): string {
  if (n >= MiB && n % MiB === 0) return `${n / MiB} MiB`;
  if (n >= KiB && n % KiB === 0) return `${n / KiB} KiB`;
  return `${n} bytes`;
}

/** `300` → `300 ms`, `300000` → `300 s`. */
export function formatMs(ms: number): string {
  return ms < 1000 || ms % 1000 !== 0 ? `${ms} ms` : `${ms / 1000} s`;
}

export function tooLarge(what: string, limit: number): AnswerBoundError {
  return new AnswerBoundError(
    `${what} was larger than ${formatBytes(limit)}; Berth stopped reading it`,
    ANSWER_TOO_LARGE,
  );
}

/**
 * Reads a whole body of at most `limit` bytes. A declared Content-Length over the limit fails at
 * once; a body that grows past it is destroyed as soon as it does (nothing more is read).
 */
export function readBounded(
  body: Readable & { headers?: Record<string, string | string[] | undefined> },
  limit: number,
  what: string,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(body.headers?.["content-length"]);
    if (Number.isFinite(declared) && declared > limit) {
      body.destroy();
      reject(tooLarge(what, limit));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const settle = (err: Error | undefined, value?: Buffer) => {
      if (settled) return;
      settled = true;
      body.off("data", onData);
      if (err) reject(err);
      else resolve(value!);
    };
    const onData = (chunk: Buffer | string) => {
      const b = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      size += b.length;
      if (size > limit) {
        chunks.length = 0;
        settle(tooLarge(what, limit));
        body.destroy();
        return;
      }
      chunks.push(b);
    };
    body.on("data", onData);
    body.once("end", () => settle(undefined, Buffer.concat(chunks, size)));
    body.once("error", (err) => settle(err));
    body.once("close", () => {
      if (!body.readableEnded)
        settle(Object.assign(new Error(`${what} ended early`), { code: "ECONNRESET" }));
    });
  });
}

/**
 * Passes a stream's chunks on while it keeps talking: it fails when no chunk came for `idleMs` or
 * the whole took longer than `totalMs`, and destroys the stream then (progress streams of pulls,
 * pushes and loads, which end on their own once the work is done).
 */
export async function* withinTime<T>(
  source: AsyncIterable<T>,
  stream: { destroy(err?: Error): void },
  limits: { idleMs: number; totalMs: number },
  what: string,
): AsyncGenerator<T> {
  const started = Date.now();
  let failure: AnswerBoundError | undefined;
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    clearTimeout(timer);
    const idle = limits.idleMs;
    const left = limits.totalMs - (Date.now() - started);
    const ms = Math.max(0, Math.min(idle, left));
    timer = setTimeout(() => {
      failure = new AnswerBoundError(
        left <= idle
          ? `${what} took longer than ${formatMs(limits.totalMs)}; Berth gave up`
          : `${what} said nothing for ${formatMs(idle)}; Berth gave up`,
        ANSWER_TOO_SLOW,
      );
      stream.destroy(failure);
    }, ms);
    timer.unref?.();
  };
  arm();
  try {
    for await (const item of source) {
      if (failure) throw failure;
      arm();
      yield item;
    }
    if (failure) throw failure;
  } catch (err) {
    throw failure ?? err;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Passes a byte stream on while it stays within `limits` (VOLUME_ARCHIVE): fails with an
 * AnswerBoundError naming `what` past `bytes`, after `idleMs` of silence or `totalMs` in all, and
 * destroys the source then (nothing more is read).
 */
export function boundedBytes(
  source: Readable,
  limits: { bytes: number; idleMs: number; totalMs: number },
  what: string,
): Readable {
  let size = 0;
  const started = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const out: Transform = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      size += chunk.length;
      if (size > limits.bytes) {
        clearTimeout(timer);
        source.destroy();
        done(tooLarge(what, limits.bytes));
        return;
      }
      arm();
      done(null, chunk);
    },
    flush(done) {
      clearTimeout(timer);
      done();
    },
  });
  const arm = () => {
    clearTimeout(timer);
    const left = limits.totalMs - (Date.now() - started);
    timer = setTimeout(
      () => {
        source.destroy();
        out.destroy(
          new AnswerBoundError(
            left <= limits.idleMs
              ? `${what} took longer than ${formatMs(limits.totalMs)}; Berth gave up`
              : `${what} said nothing for ${formatMs(limits.idleMs)}; Berth gave up`,
            ANSWER_TOO_SLOW,
          ),
        );
      },
      Math.max(0, Math.min(limits.idleMs, left)),
    );
    timer.unref?.();
  };
  arm();
  source.once("error", (err) => {
    clearTimeout(timer);
    out.destroy(err);
  });
  out.once("close", () => clearTimeout(timer));
  source.pipe(out);
  return out;
}
