// Live state: ONE events socket per page (the cookie authenticates it), resumed with
// `since=<revision>` after a reconnect so no change is missed, and hooks that keep lists and
// objects on screen current from its frames, never by reloading the page.
import { signal } from "@preact/signals";
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiFailure, get, type ListPage } from "./api.ts";

export interface EventFrame {
  type: string;
  action: "create" | "update" | "delete";
  parents: string[];
  resource_uri: string;
  state: string;
  uuid: string;
  datetime: string;
  revision?: number;
}

export const liveStatus = signal<"connecting" | "live" | "offline">("connecting");

const listeners = new Set<(e: EventFrame) => void>();
let socket: WebSocket | undefined;
let lastRevision: number | undefined;
let retryMs = 500;
let wanted = false;
let timer: ReturnType<typeof setTimeout> | undefined;

export function wsUrl(path: string): string {
  return `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}${path}`;
}

function connect(): void {
  if (!wanted) return;
  liveStatus.value = "connecting";
  const ws = new WebSocket(
    wsUrl(`/api/audit/v1/events/${lastRevision === undefined ? "" : `?since=${lastRevision}`}`),
  );
  socket = ws;
  ws.onopen = () => {
    liveStatus.value = "live";
    retryMs = 500;
  };
  ws.onmessage = (m) => {
    let e: EventFrame;
    try {
      e = JSON.parse(String(m.data)) as EventFrame;
    } catch {
      return;
    }
    if (typeof e.revision === "number") lastRevision = e.revision;
    for (const l of listeners) l(e);
  };
  ws.onclose = () => {
    if (socket !== ws) return;
    socket = undefined;
    liveStatus.value = "offline";
    if (!wanted) return;
    timer = setTimeout(connect, retryMs);
    retryMs = Math.min(retryMs * 2, 10_000);
  };
}

export function startLive(): void {
  if (wanted) return;
  wanted = true;
  connect();
}

export function stopLive(): void {
  wanted = false;
  clearTimeout(timer);
  const ws = socket;
  socket = undefined;
  ws?.close();
  lastRevision = undefined;
}

export function onEvent(fn: (e: EventFrame) => void): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

/**
 * Runs `fn` at once on the first call, then at most once per `ms` (a burst of events costs one
 * more refresh at the end): a change shows as soon as it is read, and a storm stays cheap.
 */
function throttle(fn: () => void, ms: number): { run(): void; cancel(): void } {
  let t: ReturnType<typeof setTimeout> | undefined;
  let pending = false;
  const cool = () => {
    t = setTimeout(() => {
      t = undefined;
      if (pending) {
        pending = false;
        fn();
        cool();
      }
    }, ms);
  };
  return {
    run() {
      if (t) {
        pending = true;
        return;
      }
      fn();
      cool();
    },
    cancel() {
      clearTimeout(t);
      t = undefined;
      pending = false;
    },
  };
}

export interface Resource {
  resource_uri: string;
  uuid?: string;
  state?: string;
  [key: string]: unknown;
}

export interface Loaded<T> {
  data: T | undefined;
  error: ApiFailure | undefined;
  reload(): void;
}

/**
 * A page of a list, kept current: an event about a listed object sets its state at once and
 * refreshes the page shortly after (other fields, new and deleted objects of that type).
 */
export function useList<T extends Resource>(url: string, types: string[]): Loaded<ListPage<T>> {
  const [data, setData] = useState<ListPage<T> | undefined>(undefined);
  const [error, setError] = useState<ApiFailure | undefined>(undefined);
  const [tick, setTick] = useState(0);
  const current = useRef(url);
  current.current = url;
  useEffect(() => {
    let alive = true;
    const load = () =>
      get<ListPage<T>>(url).then(
        (d) => {
          if (alive && current.current === url) {
            setData(d);
            setError(undefined);
          }
        },
        (e: unknown) =>
          alive && setError(e instanceof ApiFailure ? e : new ApiFailure(0, "error", String(e))),
      );
    void load();
    const refresh = throttle(() => void load(), 400);
    const off = onEvent((e) => {
      if (!types.includes(e.type)) return;
      setData((d) => {
        if (!d) return d;
        const i = d.objects.findIndex((o) => o.resource_uri === e.resource_uri);
        if (i === -1) return d;
        const objects = d.objects.slice();
        objects[i] = { ...objects[i]!, state: e.state };
        return { ...d, objects };
      });
      refresh.run();
    });
    return () => {
      alive = false;
      off();
      refresh.cancel();
    };
  }, [url, tick]);
  return { data, error, reload: () => setTick((t) => t + 1) };
}

/** One object, kept current by events about it and about its children (containers of a service…). */
export function useObject<T extends Resource>(url: string | undefined): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<ApiFailure | undefined>(undefined);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    if (!url) return;
    let alive = true;
    setData(undefined);
    const load = () =>
      get<T>(url).then(
        (d) => {
          if (alive) {
            setData(d);
            setError(undefined);
          }
        },
        (e: unknown) =>
          alive && setError(e instanceof ApiFailure ? e : new ApiFailure(0, "error", String(e))),
      );
    void load();
    const refresh = throttle(() => void load(), 300);
    const off = onEvent((e) => {
      const mine = sameUri(e.resource_uri, url);
      if (mine) setData((d) => (d ? { ...d, state: e.state } : d));
      if (mine || e.parents.some((p) => sameUri(p, url))) refresh.run();
    });
    return () => {
      alive = false;
      off();
      refresh.cancel();
    };
  }, [url, tick]);
  return { data, error, reload: () => setTick((t) => t + 1) };
}

/** URIs compare without their query and trailing slash. */
export function sameUri(a: string, b: string): boolean {
  const norm = (u: string) => u.split("?")[0]!.replace(/\/+$/, "");
  return norm(a) === norm(b);
}
