// The CLI's only way to the server: HTTP (global fetch) and WebSocket (`ws`), Basic auth with the
// user's API key. Errors come back as CliErrors carrying the server's sentence and field details.
import WebSocket from "ws";
import { lastSegment } from "../domain/uri.ts";
import type { Credentials } from "./config.ts";
import { CliError } from "./errors.ts";

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

export const USER_AGENT = "berth-cli/0.2";

export const API = {
  app: "/api/app/v1/",
  infra: "/api/infra/v1/",
  repo: "/api/repo/v1/",
  audit: "/api/audit/v1/",
} as const;

export interface FieldProblem {
  field: string;
  problem: string;
}

/** A refusal from the server: its status, stable code and the fields it named. */
export class ApiError extends CliError {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string | undefined,
    readonly details: FieldProblem[],
  ) {
    super(message);
  }
}

export interface Reply<T = unknown> {
  status: number;
  /** The answer; `T` is its contract type where the caller knows it (`request<Service>`). */
  body: T;
  /** The action this call left (`X-Platform-Action-URI`), if any. */
  actionUri: string | undefined;
}

export type Query = Record<string, string | number | boolean | undefined>;

function queryString(query: Query | undefined): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) params.set(k, String(v));
  const qs = params.toString();
  return qs ? `?${qs}` : "";
}

export interface Closed {
  code: number;
  reason: string;
}

export interface Stream {
  ws: WebSocket;
  /** Resolves when the socket closes (1006 and the error's message when it broke). */
  closed: Promise<Closed>;
}

export class Client {
  constructor(
    readonly creds: Credentials,
    /** The namespace commands address (`--namespace`); undefined means the caller's own. */
    readonly namespace: string | undefined,
  ) {}

  /** A namespaced collection path: `/api/app/v1/` + `acme/` + `service/`. */
  collection(prefix: string, resource: string): string {
    const ns = this.namespace ? `${encodeURIComponent(this.namespace)}/` : "";
    return `${prefix}${ns}${resource}/`;
  }

  private authorization(): string | undefined {
    if (this.creds.user === undefined || this.creds.apiKey === undefined) return undefined;
    return `Basic ${Buffer.from(`${this.creds.user}:${this.creds.apiKey}`).toString("base64")}`;
  }

  async request<T = unknown>(
    method: string,
    path: string,
    opts: { body?: unknown; query?: Query } = {},
  ): Promise<Reply<T>> {
    const headers: Record<string, string> = { accept: "application/json", "user-agent": USER_AGENT };
    const auth = this.authorization();
    if (auth) headers.authorization = auth;
    if (opts.body !== undefined) headers["content-type"] = "application/json";
    let res: Response;
    try {
      res = await fetch(this.creds.url + path + queryString(opts.query), {
        method,
        headers,
        ...(opts.body === undefined ? {} : { body: JSON.stringify(opts.body) }),
      });
    } catch (err) {
      const cause = (err as { cause?: { message?: string } }).cause?.message;
      throw new CliError(`cannot reach ${this.creds.url}: ${cause ?? (err as Error).message}`);
    }
    const text = await res.text();
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = text;
    }
    if (!res.ok) throw this.refusal(res, body, text);
    return {
      status: res.status,
      body: body as T,
      actionUri: res.headers.get("x-platform-action-uri") ?? undefined,
    };
  }

  private refusal(res: Response, answer: unknown, text: string): ApiError {
    const body = isObject(answer) ? answer : {};
    const error = typeof body.error === "string" ? body.error : undefined;
    let message = error ?? `${res.status} ${res.statusText}${text ? `: ${text.slice(0, 300)}` : ""}`;
    const details: FieldProblem[] = Array.isArray(body.details)
      ? body.details.filter((d): d is FieldProblem => isObject(d) && typeof d.field === "string")
      : [];
    if (res.status === 401) {
      const who = this.creds.user ? ` as ${this.creds.user}` : "";
      message = `${message} (signed in${who} at ${this.creds.url}; run berth login, or set BERTH_USER and BERTH_APIKEY)`;
      if (!this.creds.user)
        message = `not signed in to ${this.creds.url}: run berth login, or set BERTH_USER and BERTH_APIKEY`;
    }
    return new ApiError(message, res.status, typeof body.code === "string" ? body.code : undefined, details);
  }

  /** An object of the API; `T` is its contract type (`Service`, `Container`, …) where the caller knows it. */
  async get<T = unknown>(path: string, query?: Query): Promise<T> {
    return (await this.request<T>("GET", path, { query })).body;
  }

  /** Every object of a list, following `next` pages (at most `max`). */
  async all<T = unknown>(path: string, query: Query = {}, max = 10_000): Promise<T[]> {
    const out: T[] = [];
    let offset = 0;
    for (;;) {
      const page = await this.get<{ objects?: T[]; meta?: { next?: string | null } }>(path, {
        limit: 1000,
        ...query,
        offset,
      });
      const objects = page?.objects ?? [];
      out.push(...objects);
      if (!page?.meta?.next || objects.length === 0 || out.length >= max) return out;
      offset += objects.length;
    }
  }

  /** A stream URL with the credentials in the handshake header. */
  open(path: string, query?: Query): WebSocket {
    const url = this.creds.url.replace(/^http/, "ws") + path + queryString(query);
    const auth = this.authorization();
    return new WebSocket(url, {
      headers: { "user-agent": USER_AGENT, ...(auth ? { authorization: auth } : {}) },
    });
  }

  /**
   * Opens a stream and resolves once it is open; an upgrade the server answered with an HTTP
   * status rejects with its error, as a REST call would.
   */
  connect(
    path: string,
    query: Query | undefined,
    onMessage: (data: WebSocket.RawData, isBinary: boolean) => void,
  ): Promise<Stream> {
    const ws = this.open(path, query);
    // Attached before the handshake ends: frames that arrive with the upgrade's answer are
    // emitted before a promise continuation could attach a listener.
    ws.on("message", onMessage);
    const closed = new Promise<Closed>((resolve) => {
      ws.on("close", (code, reason) => resolve({ code, reason: reason.toString() }));
      ws.on("error", (err) => resolve({ code: 1006, reason: err.message }));
    });
    return new Promise((resolve, reject) => {
      ws.once("open", () => resolve({ ws, closed }));
      ws.once("unexpected-response", (_req, res) => {
        let text = "";
        res.on("data", (chunk: Buffer) => {
          text += chunk.toString();
        });
        res.on("end", () => {
          let body: unknown;
          try {
            body = JSON.parse(text);
          } catch {
            body = undefined;
          }
          const status = res.statusCode ?? 0;
          reject(this.refusal({ status, statusText: res.statusMessage ?? "" } as Response, body, text));
        });
      });
      ws.once("error", (err) => reject(new CliError(`cannot reach ${this.creds.url}: ${err.message}`)));
    });
  }
}

/** The uuid at the end of a resource URI (`/api/audit/v1/action/<uuid>/` → `<uuid>`). */
export function uuidOf(uri: string): string {
  return lastSegment(uri) ?? "";
}
