// The agent's router (issue 30): Caddy on this host, started and supervised by the agent the way
// Berth supervises a local node's (drivers/router/caddy-process.ts): in the agent's own network
// namespace, where it listens on :80 and :443 and reaches the engine's containers by their
// addresses; its admin API is a unix socket in the agent's state directory, and
// `net.ipv4.tcp_migrate_req` is set here so a configuration load resets no queued connection.
// Berth drives it through the tunnel (streams to the target `router`, drivers/router/agent-router.ts
// has the calls); the ACME account and certificates stay in this directory. The host is the
// user's: Caddy runs only while the node's namespace has routes, so a host whose namespace serves
// no domain keeps its ports 80 and 443 free.
//
// Routes' upstreams are looked up by Caddy at the agent's own route resolver (drivers/router/dns.ts)
// on this host's loopback, answered from the routes Berth pushed: a scale or a redeploy changes
// that answer only, and Caddy keeps its configuration and its open connections (WebSockets).
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import type { Duplex } from "node:stream";
import type { AgentRouterConfig } from "../drivers/router/agent-router.ts";
import { CaddyProcess, MAX_SOCKET_PATH } from "../drivers/router/caddy-process.ts";
import { RouteResolver } from "../drivers/router/dns.ts";
import { type Router, type RouterConfig, RouterUnavailable } from "../drivers/router/router.ts";

/** The largest configuration Berth sends (uploaded certificates included). */
const MAX_CONFIG_BYTES = 16 * 1024 * 1024;

export interface AgentRouterServiceOptions {
  stateDir: string;
  log(line: string): void;
  /** A router driver in place of Caddy (tests: a fake router, no ports taken). */
  router?: Router;
}

export class AgentRouterService {
  private readonly caddy: CaddyProcess | undefined;
  private readonly router: Router;
  private readonly server: http.Server;
  /** Whether Berth gave a configuration since this agent started, and whether it had routes. */
  private applied = false;
  private serving = false;
  private readonly dir: string;
  /** Answers Caddy's lookups of routes' upstreams, on loopback only (a free port). */
  private readonly resolver: RouteResolver;

  constructor(o: AgentRouterServiceOptions) {
    this.dir = path.join(o.stateDir, "router");
    // The port it had before is tried first: Caddy's configuration names it (a new one is a load).
    const portFile = path.join(this.dir, "resolver-port");
    this.resolver = new RouteResolver({
      host: "127.0.0.1",
      port: readPort(portFile),
      log: o.log,
      listening: (port) => {
        fs.mkdirSync(this.dir, { recursive: true, mode: 0o700 });
        fs.writeFileSync(portFile, `${port}\n`, { mode: 0o600 });
      },
    });
    const socket = path.join(this.dir, "admin.sock");
    this.caddy = o.router
      ? undefined
      : new CaddyProcess({
          dir: this.dir,
          adminSocket: socket.length <= MAX_SOCKET_PATH ? socket : "/run/berth-agent-router.sock",
          // Certificates are probed where clients get them: this host's :443.
          address: "127.0.0.1",
          label: "the agent's router",
          dns: this.resolver.forSource("*"),
        });
    this.router = o.router ?? this.caddy!.router;
    this.server = http.createServer((req, res) => {
      this.handle(req).then(
        (answer) => send(res, 200, answer ?? {}),
        (err: Error) => {
          o.log(`router: ${req.method} ${req.url} failed: ${err.message}`);
          // Berth shows a router that cannot run here on the services it would serve.
          send(res, 500, {
            error: err.message,
            ...(err instanceof RouterUnavailable ? { code: err.code } : {}),
          });
        },
      );
    });
  }

  /** Serves one stream Berth opened to the router (one HTTP request). */
  take(stream: Duplex): void {
    this.server.emit("connection", stream);
  }

  /** Stops Caddy and removes its files (the node was terminated). */
  async remove(): Promise<void> {
    this.applied = false;
    this.serving = false;
    await (this.caddy ? this.caddy.remove() : this.router.remove?.());
    this.resolver.forget("*");
  }

  /** Stops answering lookups (the agent stops). */
  close(): void {
    this.resolver.close();
  }

  private async handle(req: http.IncomingMessage): Promise<unknown> {
    const route = `${req.method} ${req.url}`;
    switch (route) {
      case "POST /ensure": {
        // An agent started again holds no configuration even when Caddy kept running.
        if (!this.applied) return { restarted: true };
        return { restarted: this.serving && ((await this.router.restarted?.()) ?? false) };
      }
      case "POST /apply": {
        const body = JSON.parse(await readBody(req)) as AgentRouterConfig;
        const config: RouterConfig = {
          routes: body.routes,
          certificates: body.certificates,
          acme: {
            directory: body.acme.directory,
            email: body.acme.email,
            caRootFile: this.caRoot(body),
            ...renewal(body.acme),
          },
        };
        if (config.routes.length === 0 && this.caddy) {
          // Nothing to serve: the host's ports are left free (the ACME state stays for later).
          await this.caddy.stop();
        } else {
          await this.router.apply(config);
        }
        this.applied = true;
        this.serving = config.routes.length > 0;
        return {};
      }
      case "GET /certificates":
        return this.serving ? this.router.certificates() : [];
      case "GET /counters":
        return this.router.counters();
      default:
        throw new Error(`no such call: ${route}`);
    }
  }

  /** The ACME server's root, written where Caddy reads it; "" for the system's roots. */
  private caRoot(body: AgentRouterConfig): string {
    if (!body.acme.caRootPem) return "";
    fs.mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const file = path.join(this.dir, "acme-root.pem");
    fs.writeFileSync(file, body.acme.caRootPem, { mode: 0o600 });
    return file;
  }
}

/** The port kept in `file`, 0 (any free one) when none is. */
function readPort(file: string): number {
  try {
    const n = Number(fs.readFileSync(file, "utf8").trim());
    return Number.isInteger(n) && n > 1024 && n < 65536 ? n : 0;
  } catch {
    return 0;
  }
}

function send(res: http.ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > MAX_CONFIG_BYTES) {
        req.destroy();
        reject(new Error(`a router configuration over ${MAX_CONFIG_BYTES} bytes`));
        return;
      }
      chunks.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

/** The renewal settings Berth gave, when they are in range (the router's defaults otherwise). */
function renewal(acme: AgentRouterConfig["acme"]): { renewIntervalMs?: number; renewalWindowRatio?: number } {
  const out: { renewIntervalMs?: number; renewalWindowRatio?: number } = {};
  const every = acme.renewIntervalMs;
  if (typeof every === "number" && Number.isInteger(every) && every >= 1000) out.renewIntervalMs = every;
  const ratio = acme.renewalWindowRatio;
  if (typeof ratio === "number" && ratio > 0 && ratio < 1) out.renewalWindowRatio = ratio;
  return out;
}
