// A Docker engine in a network namespace of its own that listens ONLY on its unix socket: the
// "server behind NAT" of the agent tests. The namespace is joined to the host by one veth pair
// (a /24 guarded by an `unreachable` route, no default route inside), so a process run inside it
// (`run()`, through nsenter) reaches Berth on the host's veth address and nothing else. It stops
// only what it started, by PID, and removes its namespace, link, route and files.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, existsSync, openSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type Docker from "dockerode";
import { dockerdUnavailable, pickSubnet, superviseDockerd, TEST_IMAGE } from "./dockerd.ts";

const run = promisify(execFile);
const PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const DOCKERD = ["/usr/sbin/dockerd", "/usr/bin/dockerd", "/usr/local/bin/dockerd"].find((p) =>
  existsSync(p),
);

export function netnsDockerdUnavailable(): string | undefined {
  const reason = dockerdUnavailable();
  if (reason) return reason;
  if (!existsSync("/usr/bin/nsenter") && !existsSync("/bin/nsenter")) return "nsenter not found (util-linux)";
  return undefined;
}

export interface NetnsDockerd {
  netns: string;
  socketPath: string;
  /** The host's end of the veth pair: what processes in the namespace reach. */
  hostAddress: string;
  /** The namespace's own address (the address Berth sees them come from). */
  nodeAddress: string;
  image: string;
  dir: string;
  pid: number;
  /** The engine from the test's side (through its socket), for checks and set-up only. */
  docker: Docker;
  /** Starts a process inside the namespace. */
  spawnInside(
    command: string,
    args: string[],
    opts?: { env?: NodeJS.ProcessEnv; log?: string },
  ): ChildProcess;
  stop(): Promise<void>;
}

export interface NetnsDockerdOptions {
  /** The link's /24 as three octets ("10.241.1"); a free 172.31.x by default. */
  prefix?: string;
  /** The engine's own bridge inside the namespace (`--bip`); 172.30.<x>.1/24 by default. */
  bip?: string;
  /** The host's end of the link. */
  hostLink?: string;
}

export async function startNetnsDockerd(o: NetnsDockerdOptions = {}): Promise<NetnsDockerd> {
  const reason = netnsDockerdUnavailable();
  if (reason) throw new Error(reason);
  const hex = randomBytes(3).toString("hex");
  const netns = `bagt-${hex}`;
  const hostLink = o.hostLink ?? `bah-${hex}`;
  const peerLink = `bag-${hex}`;
  const dir = await mkdtemp(join(tmpdir(), "berth-nsd-"));
  const undo: Array<() => Promise<unknown>> = [];
  const ip = (args: string[]) => run("ip", args, { env: { PATH } });
  const inside = (args: string[]) => ip(["netns", "exec", netns, "ip", ...args]);
  const stop = async () => {
    for (const step of undo.splice(0).reverse()) await step().catch(() => {});
  };
  try {
    undo.push(() => rm(dir, { recursive: true, force: true }));
    const prefix = o.prefix ?? (await pickSubnet());
    const subnet = `${prefix}.0/24`;
    // Guard first: an address of this /24 that no interface holds is refused here, never routed out.
    await ip(["route", "add", "unreachable", subnet, "metric", "4242"]);
    undo.push(() => ip(["route", "del", "unreachable", subnet, "metric", "4242"]));
    await ip(["netns", "add", netns]);
    undo.push(() => ip(["netns", "del", netns]));
    await ip(["link", "add", hostLink, "type", "veth", "peer", "name", peerLink]);
    undo.push(() => ip(["link", "del", hostLink]));
    await ip(["link", "set", peerLink, "netns", netns]);
    await inside(["link", "set", peerLink, "name", "eth0"]);
    await ip(["addr", "add", `${prefix}.1/24`, "dev", hostLink]);
    await ip(["link", "set", hostLink, "up"]);
    await inside(["addr", "add", `${prefix}.2/24`, "dev", "eth0"]);
    await inside(["link", "set", "eth0", "up"]);
    await inside(["link", "set", "lo", "up"]);

    const socketPath = join(dir, "docker.sock");
    await writeFile(
      join(dir, "daemon.json"),
      JSON.stringify({ "deprecated-key-path": join(dir, "key.json") }),
    );
    // Only a unix socket: no TCP listener anywhere, so Berth has nothing to dial.
    const args = [
      `--net=/run/netns/${netns}`,
      "unshare",
      "--mount",
      "--uts",
      "--propagation",
      "slave",
      DOCKERD!,
      "--data-root",
      join(dir, "data"),
      "--exec-root",
      join(dir, "exec"),
      "--pidfile",
      join(dir, "docker.pid"),
      "--config-file",
      join(dir, "daemon.json"),
      "--host",
      `unix://${socketPath}`,
      "--bip",
      o.bip ?? `172.30.${Number(prefix.split(".")[2])}.1/24`,
      "--iptables=false",
      "--ip-forward=false",
      "--ip-masq=false",
    ];
    const { pid, docker } = await superviseDockerd({ command: "nsenter", args, dir, socketPath, undo });

    return {
      netns,
      socketPath,
      hostAddress: `${prefix}.1`,
      nodeAddress: `${prefix}.2`,
      image: TEST_IMAGE,
      dir,
      pid,
      docker,
      spawnInside(command, cmdArgs, opts = {}) {
        const out = opts.log ? openSync(opts.log, "a") : "ignore";
        const p = spawn("nsenter", [`--net=/run/netns/${netns}`, command, ...cmdArgs], {
          env: { PATH, ...opts.env },
          stdio: ["ignore", out, out],
        });
        if (typeof out === "number") closeSync(out);
        return p;
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
