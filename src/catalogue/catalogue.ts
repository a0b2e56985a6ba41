// The infrastructure catalogue: providers, regions, availability zones and node types,
// read-only and loaded from catalogue.json (spec "Infrastructure catalogue").
import fs from "node:fs";
import { azUri, nodeTypeUri, providerUri, regionUri } from "../domain/uri.ts";

export interface ProviderKind {
  /** Whether `provider_options` (vpc, iam) may be given. */
  provider_options: boolean;
  /** `any`: any positive size; `none`: disk cannot be set; `fixed`: only `disk_sizes`. */
  disk: "any" | "none" | "fixed";
  disk_sizes?: number[];
}

/** The disk (GB) a cluster gets when its create body names none. */
export const DEFAULT_DISK_GB = 60;

/**
 * The default disk of a provider kind: none where the provider sets it; 60 GB where any size is
 * accepted; where only listed sizes are, the smallest listed size of at least 60 GB (else the
 * largest), so the default is always one the provider accepts.
 */
export function defaultDisk(kind: ProviderKind): number | null {
  if (kind.disk === "none") return null;
  const sizes = kind.disk === "fixed" ? [...(kind.disk_sizes ?? [])].sort((a, b) => a - b) : [];
  if (sizes.length === 0) return DEFAULT_DISK_GB;
  return sizes.find((s) => s >= DEFAULT_DISK_GB) ?? sizes[sizes.length - 1]!;
}

export interface NodeTypeData {
  name: string;
  label: string;
  cpu: number;
  memory_mb: number;
}

export interface ProviderData {
  name: string;
  label: string;
  driver: "local" | "sim" | "byon";
  simulated: boolean;
  kind: ProviderKind;
  delays_ms?: { deploy_node: number; terminate_node: number };
  regions: { name: string; label: string; availability_zones: string[]; node_types: string[] }[];
  node_types: NodeTypeData[];
}

export interface ProviderView {
  resource_uri: string;
  name: string;
  label: string;
  regions: string[];
  available: boolean;
  /** Berth extension: what node clusters of this provider accept (the dashboard's form follows it). */
  node_cluster_rules: {
    provider_options: boolean;
    disk: ProviderKind["disk"];
    disk_sizes: number[];
    default_disk: number | null;
  };
}
export interface RegionView {
  resource_uri: string;
  name: string;
  label: string;
  node_types: string[];
  availability_zones: string[];
  provider: string;
  available: boolean;
}
export interface AzView {
  resource_uri: string;
  name: string;
  region: string;
  available: boolean;
}
export interface NodeTypeView {
  resource_uri: string;
  name: string;
  label: string;
  regions: string[];
  availability_zones: string[];
  provider: string;
  available: boolean;
}

export type Availability = () => { available: boolean; reason?: string };

export class Catalogue {
  private readonly providers: ProviderData[];

  constructor(
    data: { providers: ProviderData[] },
    /** Availability checks per provider name (the `local` provider's prerequisites). */
    private readonly availability: Record<string, Availability> = {},
  ) {
    this.providers = data.providers;
  }

  static load(
    file = new URL("./catalogue.json", import.meta.url),
    availability: Record<string, Availability> = {},
  ) {
    return new Catalogue(JSON.parse(fs.readFileSync(file, "utf8")), availability);
  }

  providerData(name: string): ProviderData | undefined {
    return this.providers.find((p) => p.name === name);
  }

  private avail(p: ProviderData): { available: boolean; reason?: string } {
    return this.availability[p.name]?.() ?? { available: true };
  }

  listProviders(): ProviderView[] {
    return this.providers.map((p) => {
      const a = this.avail(p);
      return {
        resource_uri: providerUri(p.name),
        name: p.name,
        label: a.available ? p.label : `${p.label} (unavailable: ${a.reason ?? "prerequisites missing"})`,
        regions: p.regions.map((r) => regionUri(p.name, r.name)),
        available: a.available,
        node_cluster_rules: {
          provider_options: p.kind.provider_options,
          disk: p.kind.disk,
          disk_sizes: p.kind.disk_sizes ?? [],
          default_disk: defaultDisk(p.kind),
        },
      };
    });
  }

  listRegions(): RegionView[] {
    return this.providers.flatMap((p) =>
      p.regions.map((r) => ({
        resource_uri: regionUri(p.name, r.name),
        name: r.name,
        label: r.label,
        node_types: r.node_types.map((n) => nodeTypeUri(p.name, n)),
        availability_zones: r.availability_zones.map((z) => azUri(p.name, r.name, z)),
        provider: providerUri(p.name),
        available: this.avail(p).available,
      })),
    );
  }

  listAzs(): AzView[] {
    return this.providers.flatMap((p) =>
      p.regions.flatMap((r) =>
        r.availability_zones.map((z) => ({
          resource_uri: azUri(p.name, r.name, z),
          name: z,
          region: regionUri(p.name, r.name),
          available: this.avail(p).available,
        })),
      ),
    );
  }

  listNodeTypes(): NodeTypeView[] {
    return this.providers.flatMap((p) =>
      p.node_types.map((n) => {
        const regions = p.regions.filter((r) => r.node_types.includes(n.name));
        return {
          resource_uri: nodeTypeUri(p.name, n.name),
          name: n.name,
          label: n.label,
          regions: regions.map((r) => regionUri(p.name, r.name)),
          availability_zones: regions.flatMap((r) =>
            r.availability_zones.map((z) => azUri(p.name, r.name, z)),
          ),
          provider: providerUri(p.name),
          available: this.avail(p).available,
        };
      }),
    );
  }
}
