// The host's network pieces as the local provider reads and changes them: links, addresses and
// routes through `ip` (each change logged; a removal of what is gone is fine), namespaces, the
// mounts under a directory, and a mutex per key that serializes flows inside this process.
import { readFileSync } from "node:fs";
import { type CommandResult, type CommandRunner, formatCommand } from "./commands.ts";
import type { HostTools } from "./host-tools.ts";
import { namespaceInode, unescapeMountPath } from "./processes.ts";

export class LocalProviderError extends Error {}

/** Serializes work per key (one host, one node) inside this process. */
export class KeyedMutex {
  private readonly tails = new Map<string, Promise<void>>();

  async run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    let release = (): void => {};
    const current = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = previous.then(() => current);
    this.tails.set(key, tail);
    await previous;
    try {
      return await work();
    } finally {
      release();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }
}

interface IpLinkJson {
  flags: string[];
  master?: string;
  addr_info: { family: string; local: string; prefixlen: number }[];
}

/** The parts of `ip -j route show` we read. */
export interface IpRouteJson {
  dst: string;
  type?: string;
  gateway?: string;
  dev?: string;
}

export interface LinkState {
  up: boolean;
  master?: string;
  /** IPv4 addresses as CIDR. */
  addresses: string[];
}

export function mountPointsUnder(dir: string): string[] {
  const prefix = dir.endsWith("/") ? dir : `${dir}/`;
  const points: string[] = [];
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const field = line.split(" ")[4];
    if (!field) continue;
    const point = unescapeMountPath(field);
    if (point === dir || point.startsWith(prefix)) points.push(point);
  }
  // Deepest first, so nested mounts come off before their parents.
  return points.sort((a, b) => b.length - a.length);
}

/** Runs `ip` and friends for the provider, logging every command that changes the host. */
export class HostNet {
  constructor(
    private readonly commands: CommandRunner,
    private readonly log: (line: string) => void,
  ) {}

  async run(file: string, args: string[], options: { mutate: boolean }): Promise<CommandResult> {
    if (options.mutate) this.log(`$ ${formatCommand(file, args)}`);
    return this.commands.run({ file, args });
  }

  /** Runs a command that must succeed. */
  async must(file: string, args: string[]): Promise<void> {
    const result = await this.run(file, args, { mutate: true });
    if (result.exitCode !== 0) {
      throw new LocalProviderError(`${formatCommand(file, args)} failed: ${result.stderr.trim()}`);
    }
  }

  /** Runs a removal; an object that is already gone is fine. */
  async removal(file: string, args: string[]): Promise<void> {
    const result = await this.run(file, args, { mutate: true });
    if (result.exitCode !== 0) this.log(`  (already gone: ${result.stderr.trim()})`);
  }

  async readLink(tools: HostTools, name: string, netns?: string): Promise<LinkState | undefined> {
    const args = [...(netns ? ["-n", netns] : []), "-j", "addr", "show", "dev", name];
    const result = await this.run(tools.ip, args, { mutate: false });
    if (result.exitCode !== 0) return undefined;
    const [link] = JSON.parse(result.stdout) as IpLinkJson[];
    if (!link) return undefined;
    return {
      up: link.flags.includes("UP"),
      ...(link.master ? { master: link.master } : {}),
      addresses: link.addr_info.filter((a) => a.family === "inet").map((a) => `${a.local}/${a.prefixlen}`),
    };
  }

  async linkExists(tools: HostTools, name: string, netns?: string): Promise<boolean> {
    return (await this.readLink(tools, name, netns)) !== undefined;
  }

  /** Brings a link up (and onto a bridge) and gives it an address, changing only what differs. */
  async ensureLink(
    tools: HostTools,
    options: { name: string; netns?: string; master?: string; addressCidr?: string },
  ): Promise<void> {
    const ns = options.netns ? ["-n", options.netns] : [];
    const link = await this.readLink(tools, options.name, options.netns);
    if (!link) {
      const where = options.netns ? ` in ${options.netns}` : "";
      throw new LocalProviderError(`link ${options.name} is missing${where}`);
    }
    if (options.master && link.master !== options.master) {
      await this.must(tools.ip, [...ns, "link", "set", options.name, "master", options.master]);
    }
    // Up before the address: other nodes' route syncs take the address to mean "link ready".
    if (!link.up) await this.must(tools.ip, [...ns, "link", "set", options.name, "up"]);
    if (options.addressCidr && !link.addresses.includes(options.addressCidr)) {
      await this.must(tools.ip, [...ns, "addr", "replace", options.addressCidr, "dev", options.name]);
    }
  }

  async readRoutes(tools: HostTools, netns?: string): Promise<IpRouteJson[]> {
    const args = [...(netns ? ["-n", netns] : []), "-j", "-4", "route", "show"];
    const result = await this.run(tools.ip, args, { mutate: false });
    return result.exitCode === 0 ? (JSON.parse(result.stdout) as IpRouteJson[]) : [];
  }

  netnsExists(name: string): boolean {
    return namespaceInode(`/run/netns/${name}`) !== undefined;
  }
}
