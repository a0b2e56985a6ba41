// A local node's network: its namespace, the veth link onto the lab bridge with the node's
// address, its own bridge for containers, its directories and hostname; and the routes every node
// (and the host) has to every other node's container subnet.
import { mkdirSync, writeFileSync } from "node:fs";
import { type IpRouteJson, mountPointsUnder } from "./host-net.ts";
import { LINK_NAME, updateRecord, writeDaemonConfig } from "./node-records.ts";
import type { ProviderParts } from "./parts.ts";
import { namespaceInode } from "./processes.ts";
import type { NodeRecord } from "./state.ts";

export async function ensureNodeNetwork(p: ProviderParts, initial: NodeRecord): Promise<NodeRecord> {
  const { tools } = await p.setup();
  let record = initial;
  const ns = record.netnsName;
  if (!p.net.netnsExists(ns)) await p.net.must(tools.ip, ["netns", "add", ns]);
  const netnsInode = namespaceInode(`/run/netns/${ns}`);
  record = updateRecord(p.state, record, (r) => {
    if (netnsInode !== undefined) r.netnsInode = netnsInode;
  });
  await p.net.ensureLink(tools, { name: "lo", netns: ns });

  // A host end without its peer in the namespace is a leftover of a lost namespace.
  const hostEnd = await p.net.linkExists(tools, record.hostVethName);
  const nsEnd = await p.net.linkExists(tools, record.linkName, ns);
  if (hostEnd && !nsEnd) await p.net.must(tools.ip, ["link", "del", record.hostVethName]);
  if (!hostEnd || !nsEnd) {
    await p.net.must(tools.ip, [
      "link",
      "add",
      record.hostVethName,
      "type",
      "veth",
      "peer",
      "name",
      record.linkName,
      "netns",
      ns,
    ]);
  }
  await p.net.ensureLink(tools, { name: record.hostVethName, master: p.bridgeName });
  await p.net.ensureLink(tools, { name: record.linkName, netns: ns, addressCidr: record.addressCidr });
  // No default route inside the node: only the link network and the other nodes' subnets.
  if (!(await p.net.linkExists(tools, record.nodeBridgeName, ns))) {
    await p.net.must(tools.ip, ["-n", ns, "link", "add", record.nodeBridgeName, "type", "bridge"]);
  }
  await p.net.ensureLink(tools, {
    name: record.nodeBridgeName,
    netns: ns,
    addressCidr: record.bridgeAddressCidr,
  });

  for (const dir of [record.nodeDir, record.dataRoot, record.execRoot]) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  }
  writeDaemonConfig(record, p.insecureRegistries);

  // The hostname lives in a persistent UTS namespace, set before dockerd starts, so the
  // engine reports it from the first moment and no shell wrapper is needed.
  if (!mountPointsUnder(record.utsNamespacePath).includes(record.utsNamespacePath)) {
    writeFileSync(record.utsNamespacePath, "");
    await p.net.must(tools.unshare, [
      `--uts=${record.utsNamespacePath}`,
      tools.busybox,
      "hostname",
      record.hostname,
    ]);
  }
  const utsInode = namespaceInode(record.utsNamespacePath);
  return updateRecord(p.state, record, (r) => {
    if (utsInode !== undefined) r.utsInode = utsInode;
  });
}

/**
 * Every node (and the host) gets a route to every other node's container subnet via that
 * node's address, so containers reach each other by private IP with their source kept.
 */
export async function syncRoutes(p: ProviderParts): Promise<void> {
  const { tools } = await p.setup();
  await p.locks.run("routes", async () => {
    // Only nodes whose link already has its address; a node still being set up (in parallel)
    // runs this sync itself once its link is ready.
    const ready: NodeRecord[] = [];
    for (const record of p.state.listNodes()) {
      if (record.terminating || !p.net.netnsExists(record.netnsName)) continue;
      const link = await p.net.readLink(tools, record.linkName, record.netnsName);
      if (link?.up && link.addresses.includes(record.addressCidr)) ready.push(record);
    }
    const existing = new Map<string, IpRouteJson[]>([["host", await p.net.readRoutes(tools)]]);
    for (const record of ready) {
      existing.set(record.netnsName, await p.net.readRoutes(tools, record.netnsName));
    }

    for (const target of ready) {
      const places = ["host", ...ready.filter((r) => r !== target).map((r) => r.netnsName)];
      // Recorded before the routes exist, so an interrupted sync is still cleaned up.
      updateRecord(p.state, target, (r) => {
        r.routesToSubnet = [...new Set([...r.routesToSubnet, ...places])];
      });
      for (const place of places) {
        const dev = place === "host" ? p.bridgeName : LINK_NAME;
        const present = existing
          .get(place)
          ?.some((r) => r.dst === target.containerSubnet && r.gateway === target.address && r.dev === dev);
        if (present) continue;
        const route = ["route", "replace", target.containerSubnet, "via", target.address, "dev", dev];
        await p.net.must(tools.ip, place === "host" ? route : ["-n", place, ...route]);
      }
    }
  });
}
