// What a container claims on its node, and whether a node still has room for one more.
//
// Berth's accounting (documented in README "Placement"):
// - Published ports with a fixed `outer_port` are exclusive per node and per protocol: 8080/tcp
//   and 8080/udp are different claims. Ports the engine picks claim nothing.
// - Memory: a container reserves its `memory` limit (MB). `memory_swap` adds nothing: swap is not
//   the node's RAM. A container without a limit reserves nothing.
// - CPU: `cpu_shares` are counted as a request with 1024 shares = one CPU, against the node's CPU
//   count × 1024 (Docker's own scale: 1024 is a full share). Without cpu_shares nothing is reserved.
//   `cpuset` needs the node to have every CPU it names.
// Every live container of the node counts, stopped ones too: they keep their claims and start again.
import type { Demand, NodeSnapshot } from "./types.ts";

export const SHARES_PER_CPU = 1024;

export const NO_DEMAND: Demand = { ports: [], memoryMb: 0, cpuShares: 0, cpusetMax: -1 };

/** The highest CPU index a cpuset names (`0-2,4` → 4); -1 for none. */
export function cpusetMax(cpuset: string): number {
  let max = -1;
  for (const part of cpuset.split(",")) {
    for (const n of part.split("-")) {
      const v = Number(n);
      if (n !== "" && Number.isInteger(v)) max = Math.max(max, v);
    }
  }
  return max;
}

/** What is claimed on one node so far. */
export class NodeUsage {
  readonly ports = new Set<string>();
  memoryMb = 0;
  cpuShares = 0;

  constructor(readonly node: NodeSnapshot) {}

  add(demand: Demand): void {
    for (const p of demand.ports) this.ports.add(`${p.port}/${p.protocol}`);
    this.memoryMb += demand.memoryMb;
    this.cpuShares += demand.cpuShares;
  }

  /** Gives back what `add` counted (a planned container that was not written). */
  remove(demand: Demand): void {
    // Published ports are exclusive on a node: the one planned container held this claim alone.
    for (const p of demand.ports) this.ports.delete(`${p.port}/${p.protocol}`);
    this.memoryMb -= demand.memoryMb;
    this.cpuShares -= demand.cpuShares;
  }

  /** A copy to count tentative claims on. */
  copy(): NodeUsage {
    const c = new NodeUsage(this.node);
    for (const p of this.ports) c.ports.add(p);
    c.memoryMb = this.memoryMb;
    c.cpuShares = this.cpuShares;
    return c;
  }

  /** Whether the node can take a container with `demand` (`refusal` without building the reason). */
  fits(demand: Demand): boolean {
    for (const p of demand.ports) if (this.ports.has(`${p.port}/${p.protocol}`)) return false;
    const memory = this.node.memoryMb ?? 0;
    if (demand.memoryMb > 0 && memory > 0 && this.memoryMb + demand.memoryMb > memory) return false;
    const cpus = this.node.cpus ?? 0;
    if (demand.cpuShares > 0 && cpus > 0 && this.cpuShares + demand.cpuShares > cpus * SHARES_PER_CPU)
      return false;
    return !(demand.cpusetMax >= 0 && cpus > 0 && demand.cpusetMax >= cpus);
  }

  /** Why the node cannot take a container with `demand`, or undefined when it can. */
  refusal(demand: Demand): string | undefined {
    const why: string[] = [];
    const taken = demand.ports.filter((p) => this.ports.has(`${p.port}/${p.protocol}`));
    if (taken.length)
      why.push(
        `published ${taken.length === 1 ? "port" : "ports"} ${taken.map((p) => `${p.port}/${p.protocol}`).join(", ")} already taken on this node`,
      );
    const memory = this.node.memoryMb ?? 0;
    if (demand.memoryMb > 0 && memory > 0 && this.memoryMb + demand.memoryMb > memory)
      why.push(
        `needs ${demand.memoryMb} MB of memory, ${Math.max(0, memory - this.memoryMb)} MB of ${memory} MB are free`,
      );
    const cpus = this.node.cpus ?? 0;
    if (demand.cpuShares > 0 && cpus > 0 && this.cpuShares + demand.cpuShares > cpus * SHARES_PER_CPU)
      why.push(
        `needs ${demand.cpuShares} CPU shares (${SHARES_PER_CPU} = 1 CPU), ${Math.max(0, cpus * SHARES_PER_CPU - this.cpuShares)} of ${cpus * SHARES_PER_CPU} are free`,
      );
    if (demand.cpusetMax >= 0 && cpus > 0 && demand.cpusetMax >= cpus)
      why.push(`cpuset names CPU ${demand.cpusetMax}, the node has ${cpus} CPU${cpus === 1 ? "" : "s"}`);
    return why.length ? why.join("; ") : undefined;
  }
}
