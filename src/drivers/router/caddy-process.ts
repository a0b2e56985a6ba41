// Caddy run and supervised by Berth (issue 30): on a local node, in the node's network namespace
// (`nsenter --net=/run/netns/<ns> -- caddy run`); on an agent node, by the agent in its own. Its
// admin API is a unix socket in its directory (never a port a container reaches). Supervised like
// an engine: the process is written to `router.json` (pid and start time) before anything depends
// on it, a Caddy found not running is started again (a crash, a reboot: its configuration is then
// given again by whoever asked, see Router.restarted), and only the recorded process is signalled.
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { createCommandRunner } from "../local/commands.ts";
import { findExecutable, searchPath } from "../local/host-tools.ts";
import { identifyProcess, isProcessAlive, type ProcessIdentity, stopProcess } from "../local/processes.ts";
import { CaddyRouter } from "./caddy.ts";
import type { RouteDns } from "./dns.ts";
import { RouterUnavailable } from "./router.ts";

interface RouterRecord {
  caddy: ProcessIdentity;
}

/** Unix socket paths are at most 107 bytes. */
export const MAX_SOCKET_PATH = 100;

export interface CaddyProcessOptions {
  /** Where Caddy keeps its files: certificates, ACME accounts, logs, its record. */
  dir: string;
  /** The admin API's socket (in `dir` when the path is short enough). */
  adminSocket: string;
  /** The network namespace it runs in (a name under /run/netns); none: the caller's own. */
  netns?: string;
  /** The address its :443 is reached at from the caller (certificate probes). */
  address: string;
  /** How messages name it ("the router of <…>"). */
  label: string;
  /** Where its routes' upstreams are looked up (dns.ts): upstream changes then need no configuration load. */
  dns?: RouteDns;
  /**
   * Whether its node may still have a Caddy started (false once the node's removal began: a
   * renewal check or a counters read after terminate killed it must not start one that outlives
   * the node's namespace).
   */
  mayStart?(): boolean;
}

/** One supervised Caddy and the router driver that configures it. */
export class CaddyProcess {
  readonly router: CaddyRouter;
  private starting: Promise<boolean> | undefined;
  /** Removed with its node: a configuration pushed late starts no new Caddy in its directory. */
  private removed = false;

  constructor(private readonly o: CaddyProcessOptions) {
    this.router = new CaddyRouter({
      adminSocket: o.adminSocket,
      address: o.address,
      paths: {
        adminListen: `unix/${o.adminSocket}`,
        storageDir: path.join(o.dir, "data"),
        logFile: path.join(o.dir, "caddy.log"),
        accessLogFile: path.join(o.dir, "access.log"),
      },
      ensureRunning: () => this.ensureRunning(),
      remove: () => this.remove(),
      ...(o.dns ? { dns: o.dns, shapeFile: path.join(o.dir, "loaded-shape") } : {}),
    });
  }

  /** Starts Caddy when its recorded process does not run; true when it was started (its configuration is lost). */
  ensureRunning(): Promise<boolean> {
    if (this.removed || this.o.mayStart?.() === false)
      return Promise.reject(new Error(`${this.o.label} was removed with its node`));
    const record = readRecord(this.o.dir);
    if (record && isProcessAlive(record.caddy)) return Promise.resolve(false);
    this.starting ??= this.start().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  /** Stops Caddy (by its recorded process), keeping its files (ACME account, certificates). */
  async stop(): Promise<void> {
    const record = readRecord(this.o.dir);
    if (record && isProcessAlive(record.caddy)) await stopProcess(record.caddy, { graceMs: 5000 });
  }

  /** Stops Caddy (by its recorded process) and removes its files. */
  async remove(): Promise<void> {
    this.removed = true;
    // A start under way writes its process record when it is done: wait for it, then stop that.
    await this.starting?.catch(() => undefined);
    await this.stop();
    fs.rmSync(this.o.dir, { recursive: true, force: true });
    fs.rmSync(this.o.adminSocket, { force: true });
  }

  private async start(): Promise<boolean> {
    const { dir, adminSocket, netns, label } = this.o;
    const caddy = findExecutable("caddy");
    if (!caddy)
      throw new RouterUnavailable(`Caddy is not installed: ${label} needs it (apt-get install caddy)`);
    const nsenter = netns ? findExecutable("nsenter") : undefined;
    if (netns && !nsenter)
      throw new RouterUnavailable(`nsenter is not installed: ${label} needs it (apt-get install util-linux)`);
    fs.mkdirSync(path.join(dir, "data"), { recursive: true, mode: 0o700 });
    // A Caddy started now runs no configuration (caddy.ts shapeFile).
    fs.rmSync(path.join(dir, "loaded-shape"), { force: true });
    const enter = nsenter && netns ? [nsenter, `--net=/run/netns/${netns}`, "--"] : [];
    await migrateAcceptQueues(enter, path.join(dir, "caddy.out"));
    fs.rmSync(adminSocket, { force: true });
    const bootstrap = path.join(dir, "bootstrap.json");
    fs.writeFileSync(
      bootstrap,
      JSON.stringify({
        admin: { listen: `unix/${adminSocket}`, origins: ["localhost"], config: { persist: false } },
      }),
      { mode: 0o600 },
    );
    const [file, ...prefix] = [...enter, caddy];
    const pid = await createCommandRunner().spawnDetached({
      file: file!,
      args: [...prefix, "run", "--config", bootstrap],
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
    if (!identity) throw new Error(`${label} exited at once; see ${path.join(dir, "caddy.out")}`);
    fs.writeFileSync(path.join(dir, "router.json"), `${JSON.stringify({ caddy: identity })}\n`, {
      mode: 0o600,
    });
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      if (!isProcessAlive(identity)) throw new Error(`${label} exited; see ${path.join(dir, "caddy.out")}`);
      if (await answers(adminSocket)) return true;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`${label} did not answer on ${adminSocket} within 10 s`);
  }
}

/**
 * Caddy 2.6 on Linux swaps a configuration in by opening new listening sockets beside the old ones
 * (SO_REUSEPORT) and closing the old ones once their server shut down: connections the kernel had
 * already queued on an old socket, accepted by nobody yet, were reset (16 of 46,577 requests under
 * steady load across a scale and a redeploy). `net.ipv4.tcp_migrate_req` (Linux 5.14, per network
 * namespace) makes the kernel hand them to a socket of the same port that stays open instead. A
 * kernel without it (or a process not allowed to set it) keeps the old behaviour, said once in
 * the router's log.
 */
async function migrateAcceptQueues(enter: string[], logPath: string): Promise<void> {
  const sysctl = findExecutable("sysctl");
  const [file, ...prefix] = [...enter, sysctl ?? "sysctl"];
  const result = sysctl
    ? await createCommandRunner().run({
        file: file!,
        args: [...prefix, "-q", "-w", "net.ipv4.tcp_migrate_req=1"],
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
