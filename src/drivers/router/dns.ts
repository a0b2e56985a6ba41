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
// The wire format is dns-packet's (decode and encode; the responder only chooses what to answer).
// Every query is refused unless it is a standard query of class IN for one route name: other names
// get REFUSED (it never recurses or forwards), unknown route names NXDOMAIN, and answers stay
// within the asker's UDP size.
//
// Who may ask: a local node's router asks from its node's address on the lab bridge, and is
// answered only its own node's routes (a container, asking from its own address, gets REFUSED);
// an agent's responder listens on the host's loopback only and answers its one router.
import { createHash } from "node:crypto";
import dgram from "node:dgram";
import net from "node:net";
import * as packet from "dns-packet";
import type { Route } from "./router.ts";

/** The zone Berth answers for. */
export const ROUTE_ZONE = "routes.berth.internal";
/** How often Caddy looks a route's upstreams up again (ms): the longest a removed upstream is still chosen. */
export const ROUTE_REFRESH_MS = 1000;
/** Addresses in one answer at most (an answer is also cut to the asker's UDP payload size). */
export const MAX_ANSWER_ADDRESSES = 64;
/** Route names one router may publish at most. */
export const MAX_ROUTE_NAMES = 10_000;

/** Response codes, as dns-packet reads them from a header's flags. */
const RCODE = { noError: 0, formErr: 1, nxDomain: 3, notImp: 4, refused: 5 } as const;
/** The largest UDP payload answered, whatever an asker offers (the DNS flag day's safe size). */
const MAX_UDP = 1232;

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
  /** The question as asked (its name's case kept), echoed in the answer. */
  question: packet.Question;
  /** The question's name, lower case, without a final dot. */
  name: string;
  /** The payload size an OPT record offered; undefined without one. */
  udpSize?: number;
}

/** A standard query with one question; its id and the error to answer when it is not one; undefined: no answer (an answer, or garbage). */
export function parseQuery(msg: Buffer): ParsedQuery | { id: number; rcode: number } | undefined {
  if (msg.length < 12 || msg.length > 4096) return undefined;
  const id = msg.readUInt16BE(0);
  let q: packet.DecodedPacket & { opcode?: string };
  try {
    q = packet.decode(msg);
  } catch {
    return { id, rcode: RCODE.formErr };
  }
  if (q.flag_qr) return undefined; // an answer: never answered
  if (q.opcode !== "QUERY") return { id, rcode: RCODE.notImp };
  const question = q.questions?.length === 1 ? q.questions[0] : undefined;
  if (!question || question.name.length > 253) return { id, rcode: RCODE.formErr };
  const opt = q.additionals?.find((r): r is packet.OptAnswer => r.type === "OPT");
  return {
    id,
    rd: q.flag_rd,
    question,
    name: question.name.toLowerCase().replace(/\.$/, ""),
    ...(opt ? { udpSize: opt.udpPayloadSize } : {}),
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
  const limit = q.udpSize === undefined ? 512 : Math.min(Math.max(q.udpSize, 512), MAX_UDP);
  const additionals: packet.Answer[] =
    q.udpSize === undefined
      ? []
      : [
          {
            type: "OPT",
            name: ".",
            udpPayloadSize: MAX_UDP,
            extendedRcode: 0,
            ednsVersion: 0,
            flags: 0,
            flag_do: false,
            options: [],
          },
        ];
  const record = (ip: string): packet.Answer => ({
    type: "A",
    class: "IN",
    name: q.question.name,
    ttl: 0,
    data: ip,
  });
  const fixed = packet.encodingLength({ questions: [q.question], additionals });
  const perRecord =
    packet.encodingLength({ questions: [q.question], answers: [record("0.0.0.0")], additionals }) - fixed;
  const fit = Math.max(0, Math.min(MAX_ANSWER_ADDRESSES, Math.floor((limit - fixed) / perRecord)));
  const start = addresses.length > fit ? (turn * fit) % addresses.length : 0;
  const ips = [...addresses.slice(start), ...addresses.slice(0, start)].slice(0, fit);
  return packet.encode({
    type: "response",
    id: q.id,
    flags: packet.AUTHORITATIVE_ANSWER | (q.rd ? packet.RECURSION_DESIRED : 0) | rcode,
    questions: [q.question],
    // TTL 0: Caddy's refresh decides when it asks again.
    answers: ips.map(record),
    additionals,
  });
}

/** A bare error answer for a query that could not be read whole. */
function errorAnswer(id: number, rcode: number): Buffer {
  return packet.encode({ type: "response", id, flags: rcode });
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
  if (!inZone || q.question.class !== "IN" || !table) return encodeAnswer(q, RCODE.refused);
  const ips = table.get(q.name);
  if (!ips) return encodeAnswer(q, RCODE.nxDomain);
  if (q.question.type !== "A" || ips.length === 0) return encodeAnswer(q, RCODE.noError);
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
