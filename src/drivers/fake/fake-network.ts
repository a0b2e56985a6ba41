// The fake engine's bridge network (fake-engine.ts): private addresses from its subnet and published
// host ports, handed out and taken back like Docker's allocators, with Docker's errors.
import { EngineError, type PortKey, portKey } from "../engine.ts";
import { type FakeContainer, ipToNumber, numberToIp } from "./fake-model.ts";
import { hasProgram } from "./shell.ts";

/** Rewrites a container's /etc/hosts as Docker's driver does, through the image's shell. */
export function rewriteHostEntries(
  container: FakeContainer,
  entries: { remove: string[]; add: string[] },
): void {
  if (container.state !== "running") {
    throw new EngineError("conflict", `Container ${container.id} is not running`, 409);
  }
  if (!hasProgram(["sh"], container.image.programs)) {
    throw new EngineError(
      "other",
      'could not rewrite /etc/hosts (exit code 126): "sh": executable file not found',
    );
  }
  const drop = new Set(entries.remove);
  container.hosts = [...container.hosts.filter((h) => !drop.has(h)), ...entries.add];
}

export class FakeNetwork {
  private readonly usedAddresses = new Set<number>();
  private readonly usedPorts = new Map<string, string>();
  private nextPort: number;
  private readonly subnet: { base: number; size: number; prefix: number };

  constructor(
    subnet: string,
    private readonly portRange: [number, number],
  ) {
    this.nextPort = portRange[0];
    const [address, prefixText] = subnet.split("/");
    const prefix = Number(prefixText);
    if (!address || !(prefix >= 8 && prefix <= 30))
      throw new Error(`fake engine subnet must be a.b.c.d/8-30`);
    const size = 2 ** (32 - prefix);
    this.subnet = { base: ipToNumber(address) - (ipToNumber(address) % size), size, prefix };
  }

  allocatePorts(container: FakeContainer): Partial<Record<PortKey, number>> {
    const ports: Partial<Record<PortKey, number>> = {};
    const taken: string[] = [];
    const release = () => {
      for (const key of taken) this.usedPorts.delete(key);
    };
    for (const binding of container.spec.portBindings ?? []) {
      const protocol = binding.protocol ?? "tcp";
      let hostPort = binding.hostPort;
      if (hostPort) {
        if (this.usedPorts.has(`${protocol}/${hostPort}`)) {
          release();
          const message = `driver failed programming external connectivity on endpoint ${container.name}: Bind for ${binding.hostIp || "0.0.0.0"}:${hostPort} failed: port is already allocated`;
          container.error = message;
          throw new EngineError("other", message, 500);
        }
      } else {
        hostPort = this.freePort(protocol);
      }
      this.usedPorts.set(`${protocol}/${hostPort}`, container.id);
      taken.push(`${protocol}/${hostPort}`);
      ports[portKey(binding)] = hostPort;
    }
    return ports;
  }

  /** Like Docker's allocator: keeps going round the range from the last port it handed out. */
  private freePort(protocol: string): number {
    const [low, high] = this.portRange;
    for (let tries = 0; tries <= high - low; tries += 1) {
      const port = this.nextPort;
      this.nextPort = port >= high ? low : port + 1;
      if (!this.usedPorts.has(`${protocol}/${port}`)) return port;
    }
    throw new EngineError("other", "Bind for 0.0.0.0:0 failed: all ports are allocated", 500);
  }

  allocateAddress(): string {
    // The network address and the gateway (the first host) are never handed out; nor the broadcast.
    for (let offset = 2; offset < this.subnet.size - 1; offset += 1) {
      if (!this.usedAddresses.has(offset)) {
        this.usedAddresses.add(offset);
        return numberToIp(this.subnet.base + offset);
      }
    }
    throw new EngineError("other", "no available IPv4 addresses on this network's address pools", 500);
  }

  /** Takes the address and host ports a container holds (as another copy of the engine recorded them). */
  claim(container: FakeContainer): void {
    if (container.ipAddress) this.usedAddresses.add(ipToNumber(container.ipAddress) - this.subnet.base);
    for (const [key, hostPort] of Object.entries(container.ports)) {
      if (hostPort !== undefined)
        this.usedPorts.set(`${key.split("/")[1] ?? "tcp"}/${hostPort}`, container.id);
    }
  }

  /** What the container holds: `ip/<address>` and `<protocol>/<host port>` (drivers/fake/synced.ts). */
  claimsOf(container: FakeContainer): string[] {
    const claims = container.ipAddress ? [`ip/${container.ipAddress}`] : [];
    for (const [key, hostPort] of Object.entries(container.ports))
      if (hostPort !== undefined) claims.push(`${key.split("/")[1] ?? "tcp"}/${hostPort}`);
    return claims;
  }

  /** Holds a value (as claimsOf writes it) for a container of another copy of this engine. */
  reserve(claim: string, holder: string): void {
    const [kind, value] = claim.split("/") as [string, string];
    if (kind === "ip") {
      const offset = ipToNumber(value) - this.subnet.base;
      if (offset >= 0 && offset < this.subnet.size) this.usedAddresses.add(offset);
    } else this.usedPorts.set(claim, holder);
  }

  release(container: FakeContainer): void {
    if (container.ipAddress) this.usedAddresses.delete(ipToNumber(container.ipAddress) - this.subnet.base);
    for (const [key, holder] of this.usedPorts) if (holder === container.id) this.usedPorts.delete(key);
    container.ipAddress = undefined;
    container.ports = {};
  }
}
