// Terminating a local node: everything it has is removed (containers, processes, cgroup, routes,
// rules, namespace, link, mounts, files), the record last, so an interrupted removal is finished
// by the next call.
import { existsSync, readdirSync, rmSync } from "node:fs";
import path from "node:path";
import { shortNodeId } from "./addresses.ts";
import { engineClient, removeAllContainers } from "./engine.ts";
import { LocalProviderError, mountPointsUnder } from "./host-net.ts";
import { deleteRule } from "./iptables.ts";
import { updateRecord } from "./node-records.ts";
import type { ProviderParts } from "./parts.ts";
import {
  isProcessAlive,
  killNodeProcesses,
  type NodeProcessScope,
  namespaceInode,
  removeCgroup,
  stopProcess,
} from "./processes.ts";
import type { NodeRecord } from "./state.ts";

/** Removes everything of the node: containers, processes, namespace, link, routes, rules, files. */
export async function terminateNode(p: ProviderParts, nodeId: string): Promise<void> {
  const shortId = shortNodeId(nodeId);
  await p.locks.run(`node:${shortId}`, async () => {
    const record = p.state.findNode(shortId);
    if (!record) return;
    if (record.nodeId !== nodeId) {
      throw new LocalProviderError(`${p.state.nodeFile(shortId)} records another node, ${record.nodeId}`);
    }
    const { tools } = await p.setup();
    const startedAtMs = Date.now();
    updateRecord(p.state, record, (r) => {
      r.terminating = true;
    });

    if (record.dockerd && isProcessAlive(record.dockerd)) {
      try {
        const removed = await removeAllContainers(engineClient(record, { timeoutMs: 30_000 }), {
          parallel: 8,
        });
        p.log(`node ${shortId}: removed ${removed} containers`);
      } catch (error) {
        // The processes are killed below either way; the engine API is only the fast path.
        p.log(`node ${shortId}: removing containers failed: ${(error as Error).message}`);
      }
      await stopProcess(record.dockerd, { graceMs: 10_000 });
    }
    const scope: NodeProcessScope = {
      cgroupPath: record.cgroupPath,
      // Only the namespaces we recorded: a same-named one with another inode is not ours.
      ...(record.netnsInode !== undefined &&
      namespaceInode(`/run/netns/${record.netnsName}`) === record.netnsInode
        ? { netnsInode: record.netnsInode }
        : {}),
      ...(record.utsInode !== undefined && namespaceInode(record.utsNamespacePath) === record.utsInode
        ? { utsInode: record.utsInode }
        : {}),
    };
    const killed = await killNodeProcesses(scope, { timeoutMs: 15_000 });
    if (killed > 0) p.log(`node ${shortId}: killed ${killed} leftover processes`);
    await removeCgroup(record.cgroupPath, { timeoutMs: 10_000 });

    await p.locks.run("routes", async () => {
      // Re-read: a sync that was already running may have added places since.
      const places = p.state.findNode(shortId)?.routesToSubnet ?? record.routesToSubnet;
      for (const place of places) {
        const route = ["route", "del", record.containerSubnet, "via", record.address];
        if (place === "host") await p.net.removal(tools.ip, route);
        else if (p.net.netnsExists(place)) await p.net.removal(tools.ip, ["-n", place, ...route]);
      }
      updateRecord(p.state, record, (r) => {
        r.routesToSubnet = [];
      });
      // Routes inside this node's namespace vanish with it; the other records stop naming it.
      for (const other of p.state.listNodes()) {
        if (other.shortId === record.shortId || !other.routesToSubnet.includes(record.netnsName)) continue;
        updateRecord(p.state, other, (r) => {
          r.routesToSubnet = r.routesToSubnet.filter((place) => place !== record.netnsName);
        });
      }
    });
    if (p.net.netnsExists(record.netnsName)) {
      for (const rule of record.iptablesRules) {
        await deleteRule({ commands: p.commands, nsenter: tools.nsenter, rule, log: p.log });
      }
      await p.net.must(tools.ip, ["netns", "del", record.netnsName]);
    }
    // Normally gone with the namespace; a leftover host end would block a later deploy.
    // The kernel removes it after `netns del` returns, so it may vanish between the check and
    // the delete: a failed delete only counts when the link is still there afterwards.
    if (await p.net.linkExists(tools, record.hostVethName)) {
      await p.net.removal(tools.ip, ["link", "del", record.hostVethName]);
      if (await p.net.linkExists(tools, record.hostVethName)) {
        throw new LocalProviderError(`link ${record.hostVethName} could not be removed`);
      }
    }

    // A remapping engine keeps its containers' runtime state beside its exec-root, in
    // `<exec-root>.<uid>.<gid>` (made at the first container start), so that goes too.
    const execRoots = [record.execRoot, ...(record.usernsRemap ? [remappedExecRoot(record)] : [])];
    for (const dir of [record.nodeDir, ...execRoots]) {
      for (const point of mountPointsUnder(dir)) await p.net.must(tools.umount, [point]);
    }
    for (const dir of execRoots) {
      if (!dir.startsWith(`${record.nodeDir}/`)) rmSync(dir, { recursive: true, force: true });
    }
    // The record goes last, so an interrupted removal is finished by the next call.
    if (existsSync(record.nodeDir)) {
      for (const entry of readdirSync(record.nodeDir)) {
        if (entry !== "node.json") {
          rmSync(path.join(record.nodeDir, entry), { recursive: true, force: true });
        }
      }
    }
    rmSync(record.nodeDir, { recursive: true, force: true });
    p.log(`node ${shortId}: terminated in ${Date.now() - startedAtMs} ms`);
  });
}

/** Where a remapping engine keeps its containers' runtime state: beside its exec-root. */
export function remappedExecRoot(record: Pick<NodeRecord, "execRoot" | "usernsRemap">): string {
  const remap = record.usernsRemap;
  return remap ? `${record.execRoot}.${remap.uid}.${remap.gid}` : record.execRoot;
}
