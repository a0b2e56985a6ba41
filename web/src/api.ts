// Calls to Berth's API from the browser: the session cookie travels by itself (HttpOnly, the page
// never sees it); non-GET calls add the session's CSRF token. Nothing secret is kept in storage.
import { signal } from "@preact/signals";
import type { Session } from "../../src/contract/session.ts";
import type { FieldProblem } from "../../src/domain/errors.ts";

export type { FieldProblem, Session };

/** undefined while the page asks; null when signed out. */
export const session = signal<Session | null | undefined>(undefined);
/** The namespace the pages show and create in (a user's own, or an organization's). */
export const namespace = signal<string>("");

/** A refused call: `message` is the API's own sentence. */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: FieldProblem[] = [],
  ) {
    super(message);
  }
}

export interface Reply<T> {
  status: number;
  data: T;
  /** The action recorded for the call (non-GET platform calls). */
  actionUri?: string;
}

export interface ListPage<T> {
  meta: { limit: number; offset: number; total_count: number; next: string | null; previous: string | null };
  objects: T[];
}

export async function call<T = unknown>(method: string, path: string, body?: unknown): Promise<Reply<T>> {
  const headers: Record<string, string> = {
    "X-Requested-With": "berth-dashboard",
    Accept: "application/json",
  };
  if (method !== "GET" && session.value) headers["X-CSRF-Token"] = session.value.csrf_token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers,
      credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiFailure(0, "network", "Berth cannot be reached; check that the server is running.");
  }
  const text = await res.text();
  let data: unknown = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = text;
    }
  }
  if (!res.ok) {
    const err = (data ?? {}) as { error?: unknown; code?: unknown; details?: FieldProblem[] };
    const message = typeof err.error === "string" ? err.error : `The server answered ${res.status}.`;
    if (res.status === 401 && path !== "/api/session/") session.value = null;
    throw new ApiFailure(res.status, typeof err.code === "string" ? err.code : "error", message, err.details);
  }
  return {
    status: res.status,
    data: data as T,
    actionUri: res.headers.get("X-Platform-Action-URI") ?? undefined,
  };
}

export const get = async <T>(path: string): Promise<T> => (await call<T>("GET", path)).data;

/** `/api/app/v1/<ns>/service/` for the current namespace. */
export function nsPath(subsystem: "app" | "infra" | "repo" | "audit", resource: string): string {
  return `/api/${subsystem}/v1/${namespace.value}/${resource}/`;
}

export function query(path: string, params: Record<string, string | number | boolean | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") q.set(k, String(v));
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

export async function loadSession(): Promise<void> {
  try {
    const s = (await call<Session | { signed_in: false }>("GET", "/api/session/")).data;
    if (s.signed_in) adoptSession(s);
    else session.value = null;
  } catch {
    session.value = null;
  }
}

export function adoptSession(s: Session): void {
  const stored = sessionStorage.getItem("berth.namespace");
  namespace.value = stored && s.namespaces.includes(stored) ? stored : s.username;
  session.value = s;
}

export function chooseNamespace(ns: string): void {
  namespace.value = ns;
  // Only the name of the namespace being viewed: not a secret.
  sessionStorage.setItem("berth.namespace", ns);
}

export async function signIn(username: string, password: string): Promise<void> {
  adoptSession((await call<Session>("POST", "/api/session/", { username, password })).data);
}

export async function signOut(): Promise<void> {
  try {
    await call("DELETE", "/api/session/");
  } finally {
    session.value = null;
  }
}

/** The uuid at the end of a resource URI. */
export const uuidOf = (uri: string): string => uri.split("/").filter(Boolean).at(-1) ?? "";
