// The routers' upstream resolver (issue 30): a small authoritative DNS responder that answers only
// Berth's own route names, `r<16 hex>.routes.berth.internal`, with the addresses of the route's
// upstreams now (A records, TTL 0). Caddy's reverse proxy looks a route's upstreams up there
// (`dynamic_upstreams`, source `a`, refreshed every second: caddy-config.ts), so a scale, a
// redeploy, a drain or a health change changes only this answer and never makes Caddy load a new
// configuration, which would close every WebSocket it proxies (Caddy 2.6 closes hijacked
// connections of a configuration it unloads; `stream_close_delay` came in 2.7).
//
// Why A records and not SRV: Caddy 2.6 dials an SRV record's target by name through the system's
// resolver (a request outside Berth), and Go's resolver drops SRV targets that are IP literals; a
// route's upstreams all listen on the route's port (router-config.ts), so the port is in the
// configuration and the answer is the addresses only.
//
// Why the wire format is written here and not taken from a package: the responder needs one
// question, A answers with one compression pointer and an OPT record's payload size, about a
// hundred lines checked end to end by Caddy's own (Go) resolver in test/real/router-ws.test.ts;
// a dependency added mid-wave would change the shared install. Every query is refused unless it
// is a standard query of class IN for one route name: other names get REFUSED (it never recurses
// or forwards), unknown route names NXDOMAIN, and answers stay within the asker's UDP size.
//
// Who may ask: a local node's router asks from its node's address on the lab bridge, and is
// answered only its own node's routes (a container, asking from its own address, gets REFUSED);
// an agent's responder listens on the host's loopback only and answers its one router.
import { createHash } from "node:crypto";
import dgram from "node:dgram";
import net from "node:net";
import type { Route } from "./router.ts";

/** The zone Berth answers for. */
export const ROUTE_ZONE = "routes.berth.internal";
/** How often Caddy looks a route's upstreams up again (ms): the longest a removed upstream is still chosen. */
export const ROUTE_REFRESH_MS = 1000;
/** Addresses in one answer at most (an answer is also cut to the asker's UDP payload size). */
export const MAX_ANSWER_ADDRESSES = 64;
/** Route names one router may publish at most. */
export const MAX_ROUTE_NAMES = 10_000;

const TYPE_A = 1;
const TYPE_OPT = 41;
const CLASS_IN = 1;
const RCODE = { noError: 0, formErr: 1, servFail: 2, nxDomain: 3, notImp: 4, refused: 5 } as const;

/** The DNS name (without its final dot) a route's upstreams are answered at: stable with the route's id. */
export function routeDnsName(routeId: string): string {
  return `r${createHash("sha256").update(routeId).digest("hex").slice(0, 16)}.${ROUTE_ZONE}`;
}

/** The upstream addresses of each route, by its DNS name (IPv4 only: the upstreams' private addresses). */
export function routeTable(routes: readonly Route[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const r of routes.slice(0, MAX_ROUTE_NAMES)) {
    const ips = r.upstreams
      .map((u) => u.address.slice(0, u.address.lastIndexOf(":")))
      .filter((ip) => net.isIPv4(ip));
    out.set(routeDnsName(r.id), [...new Set(ips)]);
  }
  return out;
}

/**
 * Whether a route still looked up in `after` lost an upstream it had in `before` (a route gone, or
 * left with none, is a load: its 502 answers at once): a router then chooses it for up to
 * ROUTE_REFRESH_MS more (Router.settlesAt).
 */
export function removedUpstream(
  before: { routes: readonly Route[] },
  after: { routes: readonly Route[] },
): boolean {
  const now = new Map(after.routes.map((r) => [r.id, new Set(r.upstreams.map((u) => u.address))]));
  return before.routes.some((r) => {
    const still = now.get(r.id);
    return !!still && still.size > 0 && r.upstreams.some((u) => !still.has(u.address));
  });
}

export interface ParsedQuery {
  id: number;
  /** The query's RD bit, echoed. */
  rd: boolean;
  /** The question's bytes as sent (name, type, class), echoed in the answer. */
  question: Buffer;
  name: string;
  qtype: number;
  qclass: number;
  /** The payload size an OPT record offered; undefined without one. */
  udpSize?: number;
}

/** A standard query with one question; its id and the error to answer when it is not one; undefined: no answer (an answer, or garbage). */
export function parseQuery(msg: Buffer): ParsedQuery | { id: number; rcode: number } | undefined {
  if (msg.length < 12 || msg.length > 4096) return undefined;
  const id = msg.readUInt16BE(0);
  const flags = msg.readUInt16BE(2);
  if (flags & 0x8000) return undefined; // an answer: never answered
  if (((flags >> 11) & 0xf) !== 0) return { id, rcode: RCODE.notImp };
  if (msg.readUInt16BE(4) !== 1) return { id, rcode: RCODE.formErr };
  let at = 12;
  const labels: string[] = [];
  for (;;) {
    if (at >= msg.length) return { id, rcode: RCODE.formErr };
    const len = msg[at]!;
    at += 1;
    if (len === 0) break;
    if (len > 63 || at + len > msg.length) return { id, rcode: RCODE.formErr }; // pointers included
    labels.push(msg.toString("latin1", at, at + len));
    at += len;
    if (labels.join(".").length > 253) return { id, rcode: RCODE.formErr };
  }
  if (at + 4 > msg.length) return { id, rcode: RCODE.formErr };
  const qtype = msg.readUInt16BE(at);
  const qclass = msg.readUInt16BE(at + 2);
  at += 4;
  const question = msg.subarray(12, at);
  let udpSize: number | undefined;
  // An OPT record right after the question (a query carries no answers nor authority).
  if (msg.readUInt16BE(6) === 0 && msg.readUInt16BE(8) === 0 && msg.readUInt16BE(10) >= 1) {
    if (at + 11 <= msg.length && msg[at] === 0 && msg.readUInt16BE(at + 1) === TYPE_OPT)
      udpSize = msg.readUInt16BE(at + 3);
  }
  return {
    id,
    rd: (flags & 0x0100) !== 0,
    question,
    name: labels.join(".").toLowerCase(),
    qtype,
    qclass,
    ...(udpSize !== undefined ? { udpSize } : {}),
  };
}

/**
 * An answer to a query: its question echoed, authoritative, with A records for `addresses`. When
 * they do not all fit the asker's UDP size, the `turn`th window of those that fit (each answer the
 * next window, so every upstream gets its share of lookups).
 */
export function encodeAnswer(
  q: ParsedQuery,
  rcode: number,
  addresses: readonly string[] = [],
  turn = 0,
): Buffer {
  const limit = q.udpSize === undefined ? 512 : Math.min(Math.max(q.udpSize, 512), 1232);
  const fixed = 12 + q.question.length + (q.udpSize === undefined ? 0 : 11);
  const fit = Math.max(0, Math.min(MAX_ANSWER_ADDRESSES, Math.floor((limit - fixed) / 16)));
  const start = addresses.length > fit ? (turn * fit) % addresses.length : 0;
  const ips = [...addresses.slice(start), ...addresses.slice(0, start)].slice(0, fit);
  const out = Buffer.alloc(fixed + ips.length * 16);
  out.writeUInt16BE(q.id, 0);
  out.writeUInt16BE(0x8000 | 0x0400 | (q.rd ? 0x0100 : 0) | rcode, 2); // QR, AA, RD echoed
  out.writeUInt16BE(1, 4);
  out.writeUInt16BE(ips.length, 6);
  out.writeUInt16BE(0, 8);
  out.writeUInt16BE(q.udpSize === undefined ? 0 : 1, 10);
  q.question.copy(out, 12);
  let at = 12 + q.question.length;
  for (const ip of ips) {
    out.writeUInt16BE(0xc00c, at); // the question's name
    out.writeUInt16BE(TYPE_A, at + 2);
    out.writeUInt16BE(CLASS_IN, at + 4);
    out.writeUInt32BE(0, at + 6); // TTL 0: Caddy's refresh decides
    out.writeUInt16BE(4, at + 10);
    ip.split(".").forEach((o, i) => {
      out[at + 12 + i] = Number(o);
    });
    at += 16;
  }
  if (q.udpSize !== undefined) {
    out[at] = 0; // root
    out.writeUInt16BE(TYPE_OPT, at + 1);
    out.writeUInt16BE(1232, at + 3);
    out.writeUInt32BE(0, at + 5);
    out.writeUInt16BE(0, at + 9);
  }
  return out;
}

/** A bare error answer for a query that could not be read whole. */
function errorAnswer(id: number, rcode: number): Buffer {
  const out = Buffer.alloc(12);
  out.writeUInt16BE(id, 0);
  out.writeUInt16BE(0x8000 | rcode, 2);
  return out;
}

/** What a router's driver needs of the resolver: where it listens, and publishing its routes. */
export interface RouteDns {
  /** `udp/<ip>:<port>` once listening (Caddy's resolver address). */
  address(): Promise<string>;
  /** The routes' upstreams this router is answered from now on. */
  publish(routes: readonly Route[]): void;
  refreshMs: number;
}

/** The answer to one query from `source` (exported for tests without sockets). */
export function answerQuery(
  msg: Buffer,
  table: ReadonlyMap<string, readonly string[]> | undefined,
  turn = 0,
): Buffer | undefined {
  const q = parseQuery(msg);
  if (!q) return undefined;
  if (!("question" in q)) return errorAnswer(q.id, q.rcode);
  const inZone = q.name === ROUTE_ZONE || q.name.endsWith(`.${ROUTE_ZONE}`);
  if (!inZone || q.qclass !== CLASS_IN || !table) return encodeAnswer(q, RCODE.refused);
  const ips = table.get(q.name);
  if (!ips) return encodeAnswer(q, RCODE.nxDomain);
  if (q.qtype !== TYPE_A || ips.length === 0) return encodeAnswer(q, RCODE.noError);
  return encodeAnswer(q, RCODE.noError, ips, turn);
}

/**
 * One UDP responder answering several routers, each by the source address its queries come from
 * (`*`: any source, for a responder on loopback serving one router).
 */
export class RouteResolver {
  private socket: dgram.Socket | undefined;
  private listening: Promise<string> | undefined;
  private readonly tables = new Map<string, Map<string, string[]>>();
  private turn = 0;

  constructor(
    private readonly o: {
      host: string;
      /** The port tried first; when it is taken, a free one (told in the log). */
      port: number;
      log?(line: string): void;
      /** Told the port it listens on (kept, to be tried first next time: the routers' configuration names it). */
      listening?(port: number): void;
    },
  ) {}

  /** The driver's view for the router whose queries come from `source`. */
  forSource(source: string): RouteDns {
    return {
      address: () => this.listen(),
      publish: (routes) => {
        this.tables.set(source, routeTable(routes));
      },
      refreshMs: ROUTE_REFRESH_MS,
    };
  }

  /** Stops answering the router of `source` (its node is gone). */
  forget(source: string): void {
    this.tables.delete(source);
  }

  listen(): Promise<string> {
    this.listening ??= this.bind(this.o.port)
      .catch((err: NodeJS.ErrnoException) => {
        if (this.o.port === 0 || err.code !== "EADDRINUSE") throw err;
        this.o.log?.(`route resolver: ${this.o.host}:${this.o.port} is taken; listening on a free port`);
        return this.bind(0);
      })
      .catch((err: unknown) => {
        this.listening = undefined;
        throw err;
      });
    return this.listening;
  }

  close(): void {
    this.socket?.close();
    this.socket = undefined;
    this.listening = undefined;
  }

  private bind(port: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = dgram.createSocket({ type: "udp4" });
      socket.once("error", reject);
      socket.on("message", (msg, rinfo) => {
        const table = this.tables.get(rinfo.address) ?? this.tables.get("*");
        const answer = answerQuery(msg, table, this.turn++);
        if (answer) socket.send(answer, rinfo.port, rinfo.address);
      });
      socket.bind(port, this.o.host, () => {
        socket.off("error", reject);
        socket.on("error", (err) => this.o.log?.(`route resolver: ${err.message}`));
        socket.unref();
        this.socket = socket;
        this.o.listening?.(socket.address().port);
        resolve(`udp/${this.o.host}:${socket.address().port}`);
      });
    });
  }
}
