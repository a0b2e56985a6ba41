// Pure address plan of the local lab. One /16 belongs to Berth; its first /24 is the link
// network on the host bridge, and every node owns one more /24 for its containers.
//
//   <a>.<b>.0.1/24          host address on the bridge
//   <a>.<b>.0.2 – .9        left free for lab services (a registry, a resolver)
//   <a>.<b>.0.<10+index>    node address (its public_ip, where its engine listens)
//   <a>.<b>.<100+index>.0/24 the node's container subnet, gateway .1 on the node's bridge

export const MAX_NODE_INDEX = 155;
export const ENGINE_PORT = 2375;

export interface LabPlan {
  labRange: string;
  linkPrefixLength: 24;
  hostAddress: string;
  linkNetwork: string;
}

export interface NodeAddresses {
  address: string;
  /** The node's address with the link prefix, as assigned inside its namespace. */
  addressCidr: string;
  containerSubnet: string;
  /** The gateway address of the container subnet, on the node's own bridge. */
  bridgeAddressCidr: string;
  engineUrl: string;
}

export class AddressPlanError extends Error {}

function parseLabRange(labRange: string): { a: number; b: number } {
  const match = /^(\d{1,3})\.(\d{1,3})\.0\.0\/16$/.exec(labRange);
  const a = match ? Number(match[1]) : Number.NaN;
  const b = match ? Number(match[2]) : Number.NaN;
  if (!match || a > 255 || b > 255) {
    throw new AddressPlanError(`labRange must be a /16 such as 10.231.0.0/16, got "${labRange}"`);
  }
  return { a, b };
}

export function planLab(labRange: string): LabPlan {
  const { a, b } = parseLabRange(labRange);
  return { labRange, linkPrefixLength: 24, hostAddress: `${a}.${b}.0.1`, linkNetwork: `${a}.${b}.0.0/24` };
}

export function planNodeAddresses(options: { labRange: string; index: number }): NodeAddresses {
  const { a, b } = parseLabRange(options.labRange);
  const { index } = options;
  if (!Number.isInteger(index) || index < 0 || index > MAX_NODE_INDEX) {
    throw new AddressPlanError(`node index must be an integer from 0 to ${MAX_NODE_INDEX}, got ${index}`);
  }
  const address = `${a}.${b}.0.${10 + index}`;
  const third = 100 + index;
  return {
    address,
    addressCidr: `${address}/24`,
    containerSubnet: `${a}.${b}.${third}.0/24`,
    bridgeAddressCidr: `${a}.${b}.${third}.1/24`,
    engineUrl: `tcp://${address}:${ENGINE_PORT}`,
  };
}

/** Interface and namespace names are derived from the node id, so a record always names them. */
export function shortNodeId(nodeId: string): string {
  const hex = nodeId.toLowerCase().replace(/[^0-9a-f]/g, "");
  if (hex.length < 12) throw new AddressPlanError(`node id must be a uuid, got "${nodeId}"`);
  return hex.slice(0, 12);
}

function parseCidr(cidr: string): { base: number; mask: number } | undefined {
  const match = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?:\/(\d{1,2}))?$/.exec(cidr);
  if (!match) return undefined;
  const octets = match.slice(1, 5).map(Number);
  if (octets.some((o) => o > 255)) return undefined;
  const prefix = match[5] === undefined ? 32 : Number(match[5]);
  if (prefix > 32) return undefined;
  const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  const base = (octets.reduce((acc, o) => acc * 256 + o, 0) & mask) >>> 0;
  return { base, mask };
}

/** True when two IPv4 prefixes share any address; false for anything that is not IPv4. */
export function cidrsOverlap(a: string, b: string): boolean {
  const x = parseCidr(a);
  const y = parseCidr(b);
  if (!x || !y) return false;
  const mask = (x.mask & y.mask) >>> 0;
  return (x.base & mask) >>> 0 === (y.base & mask) >>> 0;
}
