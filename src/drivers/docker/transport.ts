// The request primitive of the Docker driver: one Engine API call with a timeout, its answer read
// within the bounds of drivers/bounds.ts, every failure turned into a typed EngineError. The
// DockerEngine class and its sibling modules (images.ts, exec.ts) send every call through it.
import type { Agent as HttpAgent, IncomingMessage } from "node:http";
import type { Duplex, Readable } from "node:stream";
import {
  AnswerBoundError,
  ENGINE_ANSWER_BYTES,
  ENGINE_TIMEOUTS_MS,
  readBounded,
  withinTime,
} from "../bounds.ts";
import { EngineError } from "../engine.ts";
import { type DockerEndpoint, type DockerTls, describeEndpoint, parseDockerEndpoint } from "./endpoint.ts";
import { type EngineHttpError, type QueryValue, sendRequest, sendUpgrade } from "./request.ts";
import { jsonLines } from "./streams.ts";

export interface DockerEngineOptions {
  /** A parsed endpoint, or an address such as `unix:///var/run/docker.sock` or `tcp://10.0.0.5:2376`. */
  endpoint: DockerEndpoint | string;
  /** TLS material for a TCP address given as a string. */
  tls?: DockerTls;
  /** Longest wait for an ordinary call; streams only wait this long for the engine to answer. */
  callTimeoutMs?: number;
  pingTimeoutMs?: number;
  /** How long a pull, push or load may say nothing, and last in all (ENGINE_TIMEOUTS_MS by default). */
  progressTimeoutsMs?: { idleMs: number; totalMs: number };
  /**
   * Makes the connections instead of TCP (an agent's reverse tunnel: drivers/tunnel). The
   * endpoint's host and port then only name the engine in messages.
   */
  agent?: HttpAgent;
}

export interface Call {
  method: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  query?: Record<string, QueryValue>;
  body?: object;
  file?: NodeJS.ReadableStream;
  contentType?: string;
  /** Statuses that mean success; 304 marks calls Docker answers "already so" (start, stop). */
  ok: number[];
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Sent as X-Registry-Auth; an empty object for anonymous pushes (the engine wants the header). */
  authconfig?: { username?: string; password?: string; serveraddress?: string };
  /** A 404 here means a missing image, not a missing container. */
  imageCall?: boolean;
  /** Most bytes of the answer Berth reads (json and empty modes); ENGINE_ANSWER_BYTES.json by default. */
  limit?: number;
}

/** A failure of a request: Node's network errors (with `code`), a refused status, a bound. */
export type RequestError = Error & Partial<EngineHttpError> & { code?: string };

const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ENOENT",
  "EACCES",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ECONNRESET",
  "EPIPE",
  "EAI_AGAIN",
  "ENOTFOUND",
  "ECONNABORTED",
  "UND_ERR_SOCKET",
  "ERR_STREAM_PREMATURE_CLOSE",
  "ERR_TLS_CERT_ALTNAME_INVALID",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
]);

/** request.ts prefixes "(HTTP code 404) "; users should see the engine's words. */
function engineMessage(error: RequestError): string {
  const json = error.json;
  if (json && typeof json === "object" && "message" in json && typeof json.message === "string")
    return json.message.slice(0, 2000);
  return error.message.replace(/^\(HTTP code \d+\) /, "").trim();
}

function isAbortError(error: unknown): boolean {
  return (
    error instanceof Error && (error.name === "AbortError" || (error as RequestError).code === "ABORT_ERR")
  );
}

/** The connection to one engine and the request primitive over it. */
export class DockerTransport {
  readonly endpoint: DockerEndpoint;
  readonly agent: HttpAgent | undefined;
  readonly callTimeoutMs: number;
  readonly pingTimeoutMs: number;
  readonly progressTimeoutsMs: { idleMs: number; totalMs: number };

  constructor(options: DockerEngineOptions) {
    this.endpoint =
      typeof options.endpoint === "string"
        ? parseDockerEndpoint(options.endpoint, options.tls)
        : options.endpoint;
    this.callTimeoutMs = options.callTimeoutMs ?? ENGINE_TIMEOUTS_MS.call;
    this.pingTimeoutMs = options.pingTimeoutMs ?? ENGINE_TIMEOUTS_MS.ping;
    this.progressTimeoutsMs = options.progressTimeoutsMs ?? {
      idleMs: ENGINE_TIMEOUTS_MS.progressIdle,
      totalMs: ENGINE_TIMEOUTS_MS.progressTotal,
    };
    // The tunnel's connections are plain HTTP on tunnel streams; TLS and unix sockets dial themselves.
    this.agent = "socketPath" in this.endpoint || this.endpoint.tls ? undefined : options.agent;
  }

  /**
   * One Engine API call. The timeout covers the whole call for ordinary requests (answer included),
   * and only the wait for the response headers for streams, which then live until the caller's
   * signal or the engine ends them. `json` answers are read up to `call.limit` bytes and parsed,
   * `empty` ones read up to that limit and dropped.
   */
  dial(call: Call, mode: "json" | "empty"): Promise<unknown>;
  dial(call: Call, mode: "stream"): Promise<IncomingMessage>;
  dial(call: Call, mode: "hijack"): Promise<Duplex>;
  dial(call: Call, mode: "json" | "empty" | "stream" | "hijack"): Promise<unknown> {
    const timeoutMs = call.timeoutMs ?? this.callTimeoutMs;
    const timer = new AbortController();
    const signal = call.signal ? AbortSignal.any([call.signal, timer.signal]) : timer.signal;
    let timedOut = false;
    const handle = setTimeout(() => {
      timedOut = true;
      timer.abort(new Error("timeout"));
    }, timeoutMs);
    const request = { ...call, signal };
    const work = async (): Promise<unknown> => {
      if (mode === "hijack") return sendUpgrade(this.endpoint, this.agent, request, call.ok);
      const res = await sendRequest(this.endpoint, this.agent, request, call.ok);
      if (mode === "stream") return res;
      const what = `the answer to ${call.method} ${call.path}`;
      const body = await readBounded(res, call.limit ?? ENGINE_ANSWER_BYTES.json, what);
      if (mode === "empty") return undefined;
      try {
        return JSON.parse(body.toString("utf8")) as unknown;
      } catch {
        throw new EngineError(
          "other",
          `engine at ${describeEndpoint(this.endpoint)}: ${what} is not JSON (${body.length} bytes)`,
        );
      }
    };
    return work().then(
      (result) => {
        clearTimeout(handle);
        return result;
      },
      (error: unknown) => {
        clearTimeout(handle);
        if (error instanceof EngineError) throw error;
        if (call.signal?.aborted && !timedOut) throw call.signal.reason ?? error;
        throw this.toEngineError(error as RequestError, call, timedOut ? timeoutMs : undefined);
      },
    );
  }

  private toEngineError(error: RequestError, call: Call, timedOutAfterMs: number | undefined): EngineError {
    const where = describeEndpoint(this.endpoint);
    if (timedOutAfterMs !== undefined) {
      return new EngineError("unreachable", `engine at ${where} did not answer within ${timedOutAfterMs} ms`);
    }
    // An answer past a bound: the engine cannot be used as it answers (the node is Unreachable).
    if (error instanceof AnswerBoundError)
      return new EngineError("unreachable", `engine at ${where}: ${error.message}`);
    const status = error.statusCode;
    if (status === undefined) {
      if (
        (error.code && (NETWORK_CODES.has(error.code) || error.code.startsWith("HPE_"))) ||
        isAbortError(error) ||
        /socket hang up/.test(error.message)
      ) {
        return new EngineError("unreachable", `engine at ${where} is unreachable: ${error.message}`);
      }
      return new EngineError("other", error.message);
    }
    const message = engineMessage(error);
    if (status === 404) {
      const image = call.imageCall || /^no such image/i.test(message);
      return new EngineError(image ? "image_not_found" : "not_found", message, status);
    }
    if (status === 409) return new EngineError("conflict", message, status);
    return new EngineError("other", message, status);
  }

  async json<T>(call: Call): Promise<T> {
    return (await this.dial(call, "json")) as T;
  }

  /**
   * The messages of a progress stream (pull, push, load): lines of at most ENGINE_ANSWER_BYTES.jsonLine,
   * a stream silent for ENGINE_TIMEOUTS_MS.progressIdle or longer than progressTotal is given up.
   */
  async *progress(response: IncomingMessage, what: string): AsyncGenerator<unknown> {
    try {
      yield* withinTime(jsonLines(response), response, this.progressTimeoutsMs, what);
    } catch (error) {
      if (error instanceof EngineError) throw error;
      throw this.toEngineError(error as RequestError, { method: "GET", path: "", ok: [] }, undefined);
    } finally {
      response.destroy();
    }
  }
}

/** Ends a stream quietly when the caller aborts, and always releases the HTTP response. */
export async function* untilAborted<T>(
  source: AsyncIterable<T>,
  signal: AbortSignal | undefined,
  response: Readable,
): AsyncGenerator<T> {
  try {
    for await (const item of source) yield item;
  } catch (error) {
    if (signal?.aborted) return;
    throw new EngineError("unreachable", `engine stream broke: ${(error as Error).message}`);
  } finally {
    response.destroy();
  }
}
