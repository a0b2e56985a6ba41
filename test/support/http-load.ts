// The HTTP client of the router tier (test/real/router-local.test.ts) and of the real-engine
// rollout bench (bench/rollout-real.ts): a request for a host name sent to a node's address (like
// `curl --resolve`), the same request sent again once when its connection closed before any answer,
// and steady keep-alive load by a few clients, counting answers, failures, requests sent again and
// the longest gap between successful answers.
import http from "node:http";
import https from "node:https";

export interface Answer {
  status: number;
  body: string;
  issuer?: string;
}

/** `curl --resolve <host>:<port>:<address>`: a request for `host` sent to `address`, trusting `ca`. */
export function request(
  scheme: "http" | "https",
  address: string,
  host: string,
  ca?: string,
  agent?: http.Agent | false,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const lib = scheme === "https" ? https : http;
    const req = lib.request(
      {
        host: address,
        port: scheme === "https" ? 443 : 80,
        path: "/",
        headers: { host },
        timeout: 5000,
        ...(scheme === "https" ? { servername: host, ca, rejectUnauthorized: true } : {}),
        ...(agent !== undefined ? { agent } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        const cert =
          scheme === "https"
            ? (res.socket as import("node:tls").TLSSocket).getPeerCertificate?.()
            : undefined;
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString(),
            issuer: String(cert?.issuer?.CN ?? ""),
          });
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error("timed out")));
    req.on("error", (err: Error & { reused?: boolean }) => {
      err.reused = req.reusedSocket;
      reject(err);
    });
    req.end();
  });
}

/**
 * A request as HTTP clients may send an idempotent one (RFC 9110 §9.2.2, RFC 9112 §9.3.1): sent
 * again once, on a new connection, when its connection closed before any answer. Caddy closes
 * idle kept-alive connections when it swaps in a new configuration (Go's http.Server.Shutdown); a
 * request that races that close never reached it (browsers and curl send it again). `retried`
 * says which connection closed. A request whose second sending fails, or that got an answer at
 * all, is not sent again.
 */
export async function idempotent(
  scheme: "http" | "https",
  address: string,
  host: string,
  ca: string | undefined,
  agent: http.Agent,
): Promise<Answer & { retried?: "kept-alive" | "new" }> {
  try {
    return await request(scheme, address, host, ca, agent);
  } catch (err) {
    const retried = (err as { reused?: boolean }).reused ? "kept-alive" : "new";
    return { ...(await request(scheme, address, host, ca, false)), retried };
  }
}

export interface LoadFigures {
  /** Answered 200. */
  ok: number;
  /** Every other outcome: an answer that is not 200, or a request whose second sending failed too. */
  failures: string[];
  /** Requests sent again after their connection closed unanswered, by which connection closed. */
  retried: { "kept-alive": number; new: number };
  /** The longest time without a 200 answer, from the load's start to its stop (ms). */
  longestGapMs: number;
  /** How long the load ran (ms). */
  elapsedMs: number;
}

/**
 * Steady load on a domain by `clients` clients keeping connections alive, each sending its next
 * request once its last was answered, until stopped.
 */
export function steadyLoad(opts: {
  scheme: "http" | "https";
  address: string;
  host: string;
  ca?: string;
  clients?: number;
}) {
  const clients = opts.clients ?? 6;
  const lib = opts.scheme === "https" ? https : http;
  const agent = new lib.Agent({ keepAlive: true, maxSockets: clients });
  let stopped = false;
  const failures: string[] = [];
  let ok = 0;
  const retried = { "kept-alive": 0, new: 0 };
  const t0 = performance.now();
  let lastOk = t0;
  let longestGapMs = 0;
  const answered = () => {
    ok += 1;
    if (stopped) return; // the gap up to the stop is already counted
    const now = performance.now();
    longestGapMs = Math.max(longestGapMs, now - lastOk);
    lastOk = now;
  };
  const worker = async () => {
    while (!stopped) {
      try {
        const a = await idempotent(opts.scheme, opts.address, opts.host, opts.ca, agent);
        if (a.retried) retried[a.retried] += 1;
        if (a.status === 200) answered();
        else failures.push(`${a.status} ${a.body.slice(0, 80)}`);
      } catch (err) {
        failures.push(`${(err as Error).message} (sent twice)`);
      }
    }
  };
  const running = Promise.all(Array.from({ length: clients }, worker));
  return {
    /** Answered so far. */
    get answered() {
      return ok;
    },
    async stop(): Promise<LoadFigures> {
      stopped = true;
      const end = performance.now();
      longestGapMs = Math.max(longestGapMs, end - lastOk);
      await running;
      agent.destroy();
      return { ok, failures, retried, longestGapMs, elapsedMs: end - t0 };
    },
  };
}
