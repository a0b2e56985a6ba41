// The router of a local node (issue 30): Caddy, started by Berth in the node's network namespace
// next to its engine (`nsenter --net=/run/netns/<ns> -- caddy run`), so it listens on the node's
// address (:80, :443) and reaches containers on the node's bridge and, by the lab routes, other
// nodes'. Its admin API is a unix socket in its directory (never a port containers reach).
// Supervised like the engine: its process is written to `router.json` (pid and start time) before
// anything depends on it, a router found not running is started again (a crash, a reboot: the
// controller then gives it its configuration again), and only the recorded process is ever
// signalled. Terminating the node ends it with the node's other processes (by namespace inode,
// terminate.ts); `release()` then removes its files.
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { CaddyRouter } from "../router/caddy.ts";
import { shortNodeId } from "./addresses.ts";
import { createCommandRunner } from "./commands.ts";
import { findExecutable, searchPath } from "./host-tools.ts";
import type { LocalProvider } from "./local-provider.ts";
import { identifyProcess, isProcessAlive, type ProcessIdentity, stopProcess } from "./processes.ts";

interface RouterRecord {
  caddy: ProcessIdentity;
}

/** Unix socket paths are at most 107 bytes. */
const MAX_SOCKET_PATH = 100;

export class LocalRouters {
  private readonly routers = new Map<string, CaddyRouter>();
  /** Starts under way, by node (one at a time per node). */
  private readonly starting = new Map<string, Promise<boolean>>();
  /** Nodes whose router was released: a configuration pushed late starts no new Caddy for them. */
  private readonly released = new Set<string>();

  constructor(
    private readonly o: {
      provider: Pick<LocalProvider, "findNode">;
      /** Where each node's router keeps its files (`<dir>/<12 hex>/`). */
      dir: string;
    },
  ) {}

  /** The router of a local node the provider knows, undefined otherwise. */
  routerFor(nodeId: string): CaddyRouter | undefined {
    const node = this.o.provider.findNode(nodeId);
    if (!node) return undefined;
    let router = this.routers.get(nodeId);
    if (router) return router;
    const dir = path.join(this.o.dir, shortNodeId(nodeId));
    const socket = path.join(dir, "admin.sock");
    const adminSocket =
      socket.length <= MAX_SOCKET_PATH ? socket : `/run/berth-router-${shortNodeId(nodeId)}.sock`;
    router = new CaddyRouter({
      adminSocket,
      address: node.address,
      paths: {
        adminListen: `unix/${adminSocket}`,
        storageDir: path.join(dir, "data"),
        logFile: path.join(dir, "caddy.log"),
        accessLogFile: path.join(dir, "access.log"),
      },
      ensureRunning: () => this.ensureRunning(nodeId, dir, adminSocket, node.netnsName),
      remove: () => this.release(nodeId),
    });
    this.routers.set(nodeId, router);
    return router;
  }

  /** Stops a node's router (by its recorded process) and removes its files. */
  async release(nodeId: string): Promise<void> {
    this.released.add(nodeId);
    this.routers.delete(nodeId);
    // A start under way writes its process record when it is done: wait for it, then stop that.
    await this.starting.get(nodeId)?.catch(() => undefined);
    const dir = path.join(this.o.dir, shortNodeId(nodeId));
    const record = readRecord(dir);
    if (record && isProcessAlive(record.caddy)) await stopProcess(record.caddy, { graceMs: 5000 });
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(`/run/berth-router-${shortNodeId(nodeId)}.sock`, { force: true });
  }

  private ensureRunning(nodeId: string, dir: string, adminSocket: string, netns: string): Promise<boolean> {
    if (this.released.has(nodeId))
      return Promise.reject(new Error("the node's router was stopped with its node"));
    const record = readRecord(dir);
    if (record && isProcessAlive(record.caddy)) return Promise.resolve(false);
    let p = this.starting.get(nodeId);
    if (!p) {
      p = this.start(dir, adminSocket, netns).finally(() => this.starting.delete(nodeId));
      this.starting.set(nodeId, p);
    }
    return p;
  }

  private async start(dir: string, adminSocket: string, netns: string): Promise<boolean> {
    const caddy = findExecutable("caddy");
    const nsenter = findExecutable("nsenter");
    if (!caddy)
      throw new Error("caddy is not installed: the router of local nodes needs it (apt-get install caddy)");
    if (!nsenter) throw new Error("nsenter is not installed (util-linux)");
    fs.mkdirSync(path.join(dir, "data"), { recursive: true, mode: 0o700 });
    await migrateAcceptQueues(nsenter, netns, path.join(dir, "caddy.out"));
    fs.rmSync(adminSocket, { force: true });
    const bootstrap = path.join(dir, "bootstrap.json");
    fs.writeFileSync(
      bootstrap,
      JSON.stringify({
        admin: { listen: `unix/${adminSocket}`, origins: ["localhost"], config: { persist: false } },
      }),
      { mode: 0o600 },
    );
    const pid = await createCommandRunner().spawnDetached({
      file: nsenter,
      args: [`--net=/run/netns/${netns}`, "--", caddy, "run", "--config", bootstrap],
      logPath: path.join(dir, "caddy.out"),
      env: {
        PATH: searchPath().join(":"),
        HOME: dir,
        XDG_DATA_HOME: path.join(dir, "data"),
        XDG_CONFIG_HOME: dir,
        LANG: "C",
      },
    });
    const identity = identifyProcess(pid);
    if (!identity)
      throw new Error(`the router of ${netns} exited at once; see ${path.join(dir, "caddy.out")}`);
    fs.writeFileSync(path.join(dir, "router.json"), `${JSON.stringify({ caddy: identity })}\n`, {
      mode: 0o600,
    });
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      if (!isProcessAlive(identity))
        throw new Error(`the router of ${netns} exited; see ${path.join(dir, "caddy.out")}`);
      if (await answers(adminSocket)) return true;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`the router of ${netns} did not answer on ${adminSocket} within 10 s`);
  }
}

/**
 * Caddy 2.6 on Linux swaps a configuration in by opening new listening sockets beside the old ones
 * (SO_REUSEPORT) and closing the old ones once their server shut down: connections the kernel had
 * already queued on an old socket, accepted by nobody yet, were reset (16 of 46,577 requests under
 * steady load across a scale and a redeploy). `net.ipv4.tcp_migrate_req` (Linux 5.14, per network
 * namespace) makes the kernel hand them to a socket of the same port that stays open instead. A
 * kernel without it keeps the old behaviour, said once in the router's log.
 */
async function migrateAcceptQueues(nsenter: string, netns: string, logPath: string): Promise<void> {
  const sysctl = findExecutable("sysctl");
  const result = sysctl
    ? await createCommandRunner().run({
        file: nsenter,
        args: [`--net=/run/netns/${netns}`, "--", sysctl, "-q", "-w", "net.ipv4.tcp_migrate_req=1"],
        timeoutMs: 5000,
      })
    : { exitCode: 127, stdout: "", stderr: "sysctl is not installed (procps)" };
  if (result.exitCode !== 0)
    fs.appendFileSync(
      logPath,
      `berth: net.ipv4.tcp_migrate_req could not be set (${result.stderr.trim()}): a configuration load may reset connections queued on the old listener\n`,
    );
}

function readRecord(dir: string): RouterRecord | undefined {
  try {
    return JSON.parse(fs.readFileSync(path.join(dir, "router.json"), "utf8")) as RouterRecord;
  } catch {
    return undefined;
  }
}

function answers(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.request(
      { socketPath, path: "/config/", method: "GET", timeout: 1000, headers: { host: "localhost" } },
      (res) => {
        res.resume();
        resolve(res.statusCode === 200);
      },
    );
    req.on("error", () => resolve(false));
    req.on("timeout", () => {
      req.destroy();
      resolve(false);
    });
    req.end();
  });
}
