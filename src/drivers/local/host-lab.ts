// The local provider's host lab: the bridge with the host's address, the lab's unreachable route
// and the FORWARD rules, made once before the first node and removed after the last.
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { cidrsOverlap } from "./addresses.ts";
import { LocalProviderError } from "./host-net.ts";
import type { HostTools } from "./host-tools.ts";
import { deleteRule, ensureRule, type IptablesRule, type IptablesSetup } from "./iptables.ts";
import type { ProviderParts } from "./parts.ts";

/** The host bridge with the host's address, the lab's unreachable route and forward rules. */
export async function ensureHost(p: ProviderParts): Promise<void> {
  const { tools, iptables } = await p.setup();
  await p.locks.run("host", async () => {
    let record = p.state.findHost();
    if (!record) {
      await refuseForeignLab(p, tools);
      record = {
        version: 1,
        bridgeName: p.bridgeName,
        labRange: p.lab.labRange,
        hostAddressCidr: `${p.lab.hostAddress}/${p.lab.linkPrefixLength}`,
        iptablesRules: [],
      };
    } else if (record.bridgeName !== p.bridgeName || record.labRange !== p.lab.labRange) {
      throw new LocalProviderError(
        `${p.state.hostFile} records bridge ${record.bridgeName} and lab ${record.labRange}; ` +
          `this provider is configured for ${p.bridgeName} and ${p.lab.labRange}`,
      );
    }
    // Keep rules recorded earlier (another backend may have been live then) so that
    // teardown still removes them.
    const known = new Set(record.iptablesRules.map((rule) => JSON.stringify(rule)));
    for (const rule of hostRules(p, iptables)) {
      if (!known.has(JSON.stringify(rule))) record.iptablesRules.push(rule);
    }
    p.state.saveHost(record);

    // First, before any lab address exists: packets to unused lab addresses are refused
    // here instead of following the default route off the machine.
    const routes = await p.net.readRoutes(tools);
    if (!routes.some((r) => r.type === "unreachable" && r.dst === p.lab.labRange)) {
      await p.net.must(tools.ip, ["route", "replace", "unreachable", p.lab.labRange]);
    }
    if (!(await p.net.linkExists(tools, p.bridgeName))) {
      await p.net.must(tools.ip, ["link", "add", p.bridgeName, "type", "bridge"]);
    }
    await p.net.ensureLink(tools, { name: p.bridgeName, addressCidr: record.hostAddressCidr });
    // Forwarding only for packets that arrive on the lab bridge, not host-wide; node-to-node
    // traffic is switched by the bridge and the rules below keep lab traffic on the bridge.
    const forwarding = `/proc/sys/net/ipv4/conf/${p.bridgeName}/forwarding`;
    if (readFileSync(forwarding, "utf8").trim() !== "1") {
      p.log(`enable IPv4 forwarding on ${p.bridgeName}`);
      writeFileSync(forwarding, "1\n");
    }
    for (const rule of record.iptablesRules) {
      await ensureRule({ commands: p.commands, nsenter: tools.nsenter, rule, log: p.log });
    }
  });
}

/** Host FORWARD rules: lab ports talk to each other (the policy may be DROP) and nothing else. */
function hostRules(p: ProviderParts, iptables: IptablesSetup): IptablesRule[] {
  const comment = ["-m", "comment", "--comment", `berth-lab-${p.bridgeName}`];
  const br = p.bridgeName;
  return iptables.hostBinaries.flatMap((binary): IptablesRule[] => [
    { binary, table: "filter", chain: "FORWARD", spec: ["-i", br, "-o", br, ...comment, "-j", "ACCEPT"] },
    {
      binary,
      table: "filter",
      chain: "FORWARD",
      spec: ["-i", br, "!", "-o", br, ...comment, "-j", "DROP"],
    },
    {
      binary,
      table: "filter",
      chain: "FORWARD",
      spec: ["!", "-i", br, "-o", br, ...comment, "-j", "DROP"],
    },
  ]);
}

/** Refuses to take over a bridge or lab range that this state directory did not create. */
async function refuseForeignLab(p: ProviderParts, tools: HostTools): Promise<void> {
  if (await p.net.linkExists(tools, p.bridgeName)) {
    throw new LocalProviderError(
      `interface ${p.bridgeName} exists but is not recorded in ${p.state.hostFile}; not taking it over`,
    );
  }
  // Another lab, a VPN or a real network in this range: our unreachable route would cut it off.
  const clash = (await p.net.readRoutes(tools)).find((r) => cidrsOverlap(r.dst, p.lab.labRange));
  if (clash) {
    throw new LocalProviderError(
      `the lab range ${p.lab.labRange} is already routed on this host (${clash.type ?? "unicast"} ${clash.dst}` +
        `${clash.dev ? ` dev ${clash.dev}` : ""}) and not recorded in ${p.state.hostFile}`,
    );
  }
}

/** Removes the bridge, the forward rules and the unreachable route once no node is left. */
export async function teardownHost(p: ProviderParts): Promise<void> {
  const { tools } = await p.setup();
  await p.locks.run("host", async () => {
    const remaining = p.state.listNodes();
    if (remaining.length > 0) {
      throw new LocalProviderError(
        `cannot tear down the host while nodes remain: ${remaining.map((n) => n.nodeId).join(", ")}`,
      );
    }
    const record = p.state.findHost();
    if (!record) return;
    for (const rule of record.iptablesRules) {
      await deleteRule({ commands: p.commands, nsenter: tools.nsenter, rule, log: p.log });
    }
    if (await p.net.linkExists(tools, record.bridgeName)) {
      await p.net.must(tools.ip, ["link", "del", record.bridgeName]);
    }
    // Last, after the lab's last address is gone.
    const routes = await p.net.readRoutes(tools);
    if (routes.some((r) => r.type === "unreachable" && r.dst === record.labRange)) {
      await p.net.must(tools.ip, ["route", "del", "unreachable", record.labRange]);
    }
    rmSync(path.join(p.state.stateDir, "bin"), { recursive: true, force: true });
    p.state.removeHost();
    p.log(`host lab ${record.labRange} on ${record.bridgeName} removed`);
  });
}
