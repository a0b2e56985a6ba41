// One dockerd per node: its settings, starting it inside the node's namespaces, waiting until it
// answers, and stopping it.
import { existsSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import Dockerode from "dockerode";
import { ENGINE_PORT } from "./addresses.ts";
import type { CommandRunner } from "./commands.ts";
import type { HostTools } from "./host-tools.ts";
import { identifyProcess, isProcessAlive, namespaceInode, type ProcessIdentity } from "./processes.ts";
import type { NodeRecord } from "./state.ts";

/** The node's own daemon.json, so /etc/docker/daemon.json of the host is never read. */
export function daemonConfig(
  record: NodeRecord,
  options: { insecureRegistries?: string[] } = {},
): Record<string, unknown> {
  return {
    // Registries reached over plain HTTP (Berth's own registry on a lab address, for one).
    ...(options.insecureRegistries?.length ? { "insecure-registries": options.insecureRegistries } : {}),
    // A key file per node, or every node reports the same engine id.
    "deprecated-key-path": record.keyFilePath,
    // Containers land in a cgroup subtree of their own, so the node's processes can be found
    // (and cleaned up after a crash) without looking at process names.
    "cgroup-parent": record.cgroupPath,
    // A container's root is the remap user's first subordinate id on the host, not root.
    ...(record.usernsRemap ? { "userns-remap": record.usernsRemap.user } : {}),
  };
}

export function dockerdArgs(record: NodeRecord): string[] {
  return [
    "--config-file",
    record.daemonConfigPath,
    "--data-root",
    record.dataRoot,
    "--exec-root",
    record.execRoot,
    "--pidfile",
    record.pidFilePath,
    "--host",
    `unix://${record.unixSocketPath}`,
    "--host",
    `tcp://${record.address}:${ENGINE_PORT}`,
    // Without it Debian's dockerd waits 15 s before listening on TCP without TLS.
    "--tls=false",
    // The node's bridge already carries the container subnet (--bip cannot be combined with it).
    "--bridge",
    record.nodeBridgeName,
    // Containers keep their own source address across nodes; nothing is NATed out of the lab.
    "--ip-masq=false",
  ];
}

export function engineClient(record: NodeRecord, options: { timeoutMs: number }): Dockerode {
  return new Dockerode({
    host: record.address,
    port: ENGINE_PORT,
    protocol: "http",
    timeout: options.timeoutMs,
  });
}

function containerdPidFile(record: NodeRecord): string {
  return path.join(record.execRoot, "containerd", "containerd.pid");
}

/** The live process a pidfile names, if any (a zombie is not live). */
export function pidFileProcess(pidFile: string): ProcessIdentity | undefined {
  let pid: number;
  try {
    pid = Number(readFileSync(pidFile, "utf8").trim());
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 1) return undefined;
  const identity = identifyProcess(pid);
  return identity && isProcessAlive(identity) ? identity : undefined;
}

/**
 * dockerd reuses the containerd its pidfile names if kill(pid, 0) succeeds, which is also true
 * for a zombie (where init does not reap) or an unrelated process with a reused pid; it then
 * waits for a socket nobody serves. Keep the pidfile only for a live containerd of this node.
 */
export function clearStaleContainerdPidFile(record: NodeRecord): boolean {
  const file = containerdPidFile(record);
  if (!existsSync(file)) return false;
  const identity = pidFileProcess(file);
  if (
    identity &&
    record.netnsInode !== undefined &&
    namespaceInode(`/proc/${identity.pid}/ns/net`) === record.netnsInode
  ) {
    return false;
  }
  rmSync(file, { force: true });
  return true;
}

export async function spawnEngine(options: {
  record: NodeRecord;
  tools: HostTools;
  commands: CommandRunner;
  path: string;
}): Promise<ProcessIdentity> {
  const { record, tools } = options;
  // nsenter and unshare exec (they do not fork for these namespaces), so the pid we get is
  // dockerd's. `ip netns exec` is avoided: it remounts /sys and hides the cgroups.
  const pid = await options.commands.spawnDetached({
    file: tools.nsenter,
    args: [
      `--net=/run/netns/${record.netnsName}`,
      `--uts=${record.utsNamespacePath}`,
      "--",
      tools.unshare,
      "--mount",
      "--propagation",
      "slave",
      "--",
      tools.dockerd,
      ...dockerdArgs(record),
    ],
    logPath: record.logPath,
    env: { PATH: options.path, HOME: record.nodeDir, LANG: "C" },
  });
  const identity = identifyProcess(pid);
  if (!identity) throw new Error(`dockerd of ${record.netnsName} exited at once; see ${record.logPath}`);
  return identity;
}

function logTail(file: string, lines: number): string {
  try {
    return readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "";
  }
}

/** Polls the engine's TCP endpoint until it answers a ping, failing early if dockerd dies. */
export async function waitForEngine(options: {
  record: NodeRecord;
  identity: ProcessIdentity;
  timeoutMs: number;
}): Promise<void> {
  const { record, identity } = options;
  const docker = engineClient(record, { timeoutMs: 1_000 });
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    try {
      await docker.ping();
      return;
    } catch {
      // Not listening yet.
    }
    if (!isProcessAlive(identity)) {
      throw new Error(`dockerd of ${record.netnsName} exited during start:\n${logTail(record.logPath, 15)}`);
    }
    if (Date.now() >= deadline) {
      throw new Error(
        `dockerd of ${record.netnsName} did not answer on ${record.engineUrl} within ${options.timeoutMs} ms`,
      );
    }
    await sleep(100);
  }
}

/** Force-removes every container: a `sleep` as PID 1 ignores SIGTERM, so a graceful stop waits. */
export async function removeAllContainers(docker: Dockerode, options: { parallel: number }): Promise<number> {
  const containers = await docker.listContainers({ all: true });
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < containers.length) {
      const info = containers[next++]!;
      await docker.getContainer(info.Id).remove({ force: true, v: true });
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.parallel, containers.length) }, worker));
  return containers.length;
}
