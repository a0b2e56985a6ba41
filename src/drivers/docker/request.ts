// One Engine API request over Node's HTTP client: the connection (unix socket, TCP, TLS, or an
// agent's tunnel through `agent`), the query and body encodings Docker expects, and the answer,
// read within the bounds of drivers/bounds.ts. Berth sends its requests itself instead of through
// docker-modem: the modem formats every request's options with `util.inspect` (showHidden, no
// depth limit) before sending it, whether or not debugging is on, and those options hold the HTTP
// agent with every connection it has open, so each call cost more than the one before while an
// agent's tunnel kept answers open; it also held whole answers in memory without a limit.
import http from "node:http";
import https from "node:https";
import { Duplex } from "node:stream";
import { ENGINE_ANSWER_BYTES, readBounded } from "../bounds.ts";
import type { DockerEndpoint } from "./endpoint.ts";

export type QueryValue = string | number | boolean | string[] | undefined;

export interface EngineRequest {
  method: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  query?: Record<string, QueryValue>;
  /** Sent as JSON. */
  body?: object;
  /** Streamed as the body instead (an image archive). */
  file?: NodeJS.ReadableStream;
  contentType?: string;
  /** X-Registry-Auth; an empty object for anonymous pushes (the engine wants the header). */
  authconfig?: { username?: string; password?: string; serveraddress?: string };
  /** Aborting it ends the request, and the answer if it has begun. */
  signal: AbortSignal;
}

/** A status the caller did not accept: the engine's message, from a bounded read of the body. */
export interface EngineHttpError extends Error {
  statusCode: number;
  json?: unknown;
}

export function queryString(query: Record<string, QueryValue>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) params.append(key, v);
    else params.append(key, String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

function requestOptions(
  endpoint: DockerEndpoint,
  agent: http.Agent | undefined,
  call: EngineRequest,
  upgrade: boolean,
): { client: typeof http | typeof https; options: https.RequestOptions; data?: string } {
  const headers: http.OutgoingHttpHeaders = {};
  let data: string | undefined;
  if (call.file) {
    headers["Content-Type"] = call.contentType ?? "application/x-tar";
  } else if (call.body && call.method === "POST") {
    data = JSON.stringify(call.body);
    headers["Content-Type"] = call.contentType ?? "application/json";
    headers["Content-Length"] = Buffer.byteLength(data);
  }
  if (call.authconfig) {
    headers["X-Registry-Auth"] = Buffer.from(JSON.stringify(call.authconfig))
      .toString("base64")
      .replace(/\+/g, "-")
      .replace(/\//g, "_");
  }
  if (upgrade) {
    headers.Connection = "Upgrade";
    headers.Upgrade = "tcp";
  }
  const path = `${call.path}${call.query ? queryString(call.query) : ""}`;
  const base: https.RequestOptions = { method: call.method, path, headers, signal: call.signal };
  if ("socketPath" in endpoint)
    return { client: http, options: { ...base, socketPath: endpoint.socketPath }, data };
  const target = { ...base, host: endpoint.host, port: endpoint.port, ...(agent ? { agent } : {}) };
  if (endpoint.tls) {
    const { ca, cert, key } = endpoint.tls;
    return { client: https, options: { ...target, ca, cert, key }, data };
  }
  return { client: http, options: target, data };
}

/**
 * Sends the request; resolves with the answer once its status line and headers arrived and its
 * status is one of `ok`, else rejects with the engine's message (its body read up to
 * ENGINE_ANSWER_BYTES.error). Network failures reject with Node's error (its `code` tells them).
 */
export function sendRequest(
  endpoint: DockerEndpoint,
  agent: http.Agent | undefined,
  call: EngineRequest,
  ok: readonly number[],
): Promise<http.IncomingMessage> {
  const { client, options, data } = requestOptions(endpoint, agent, call, false);
  return new Promise((resolve, reject) => {
    let req: http.ClientRequest;
    try {
      req = client.request(options);
    } catch (err) {
      reject(err);
      return;
    }
    req.once("error", reject);
    req.once("response", (res) => {
      if (ok.includes(res.statusCode ?? 0)) {
        // Later failures of the answer are its readers' business (they see them on `res`).
        req.off("error", reject);
        req.on("error", () => {});
        resolve(res);
        return;
      }
      refusal(res).then(reject, reject);
    });
    send(req, data, call.file, true);
  });
}

/**
 * Sends a request that turns the connection into a raw byte stream (exec start): resolves with
 * that stream once the engine switched protocols (or answered one of `ok` without switching).
 */
export function sendUpgrade(
  endpoint: DockerEndpoint,
  agent: http.Agent | undefined,
  call: EngineRequest,
  ok: readonly number[],
): Promise<Duplex> {
  const { client, options, data } = requestOptions(endpoint, agent, call, true);
  return new Promise((resolve, reject) => {
    let req: http.ClientRequest;
    try {
      req = client.request(options);
    } catch (err) {
      reject(err);
      return;
    }
    req.once("error", reject);
    req.once("upgrade", (_res, socket, head) => {
      req.off("error", reject);
      req.on("error", () => {});
      if (head.length > 0) socket.unshift(head);
      resolve(socket);
    });
    req.once("response", (res) => {
      if (!ok.includes(res.statusCode ?? 0)) {
        refusal(res).then(reject, reject);
        return;
      }
      req.off("error", reject);
      req.on("error", () => {});
      resolve(Duplex.from({ readable: res, writable: req }));
    });
    // The request stays open: after the switch, the connection carries the command's stdin.
    send(req, data, undefined, false);
  });
}

function send(
  req: http.ClientRequest,
  data: string | undefined,
  file: NodeJS.ReadableStream | undefined,
  end: boolean,
) {
  if (file) {
    file.on("error", (err: Error) => req.destroy(err));
    file.pipe(req);
    return;
  }
  if (data !== undefined) req.write(data);
  else if (!end) req.flushHeaders();
  if (end) req.end();
}

/** The error of a status the caller did not accept, with the engine's JSON message when it sent one. */
async function refusal(res: http.IncomingMessage): Promise<never> {
  const status = res.statusCode ?? 0;
  let body: Buffer;
  try {
    body = await readBounded(res, ENGINE_ANSWER_BYTES.error, `the engine's refusal (HTTP ${status})`);
  } catch {
    body = Buffer.alloc(0);
  }
  const text = body.toString("utf8");
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  const message =
    json && typeof json === "object" && "message" in json && typeof json.message === "string"
      ? json.message
      : text.trim() || http.STATUS_CODES[status] || "unexpected answer";
  const err = new Error(`(HTTP code ${status}) ${message.slice(0, 2000)}`) as EngineHttpError;
  err.statusCode = status;
  err.json = json;
  throw err;
}
