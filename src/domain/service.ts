import type { ServiceDomain } from "./domains.ts";

// The service definition as Berth stores it (desired state). Containers keep a copy of the
// definition they were deployed with; `synchronized` compares the two by `spec_version`.
import type { HealthCheck } from "./health.ts";
import type { RolloutStrategy } from "./rollout.ts";

export type Protocol = "tcp" | "udp";
export type Autorestart = "OFF" | "ON_FAILURE" | "ALWAYS";
export type Autodestroy = "OFF" | "ON_SUCCESS" | "ALWAYS";
export type DeploymentStrategy = "EMPTIEST_NODE" | "HIGH_AVAILABILITY" | "EVERY_NODE";
export const AUTORESTART: Autorestart[] = ["OFF", "ON_FAILURE", "ALWAYS"];
export const AUTODESTROY: Autodestroy[] = ["OFF", "ON_SUCCESS", "ALWAYS"];
export const STRATEGIES: DeploymentStrategy[] = ["EMPTIEST_NODE", "HIGH_AVAILABILITY", "EVERY_NODE"];

export interface ServicePort {
  protocol: Protocol;
  inner_port: number;
  /** null: the engine picks one when published. */
  outer_port: number | null;
  published: boolean;
}

export interface EnvVar {
  key: string;
  value: string;
}

export interface ServiceLink {
  /** uuid of the target service (same namespace). */
  to_service: string;
  /** Link name (alias); defaults to the target service's name. */
  name: string;
}

export interface ServiceBinding {
  host_path: string | null;
  container_path: string | null;
  rewritable: boolean;
  /** uuid of the service whose volumes are mounted. */
  volumes_from: string | null;
}

export interface ServiceSpec {
  /** Always with a tag (`latest` when none was given). */
  image_name: string;
  run_command: string | null;
  entrypoint: string | null;
  container_ports: ServicePort[];
  container_envvars: EnvVar[];
  linked_to_service: ServiceLink[];
  bindings: ServiceBinding[];
  autorestart: Autorestart;
  autodestroy: Autodestroy;
  // How containers are stopped (domain/stop.ts); definitions stored before these existed lack
  // them, which means null.
  /** The signal that asks the command to stop, such as SIGTERM; null: the image's, or SIGTERM. */
  stop_signal?: string | null;
  /** Seconds a stop waits after the stop signal before the engine kills; null: the platform's default. */
  stop_grace_period?: number | null;
  /** The containers' health check (domain/health.ts); null or absent: the image's HEALTHCHECK. */
  health_check?: HealthCheck | null;
  /** How a redeploy replaces the containers (domain/rollout.ts); null or absent: all at once. */
  rollout?: RolloutStrategy | null;
  sequential_deployment: boolean;
  roles: string[];
  privileged: boolean;
  deployment_strategy: DeploymentStrategy;
  tags: string[];
  autoredeploy: boolean;
  net: "bridge" | "host";
  pid: "none" | "host";
  working_dir: string;
  user: string;
  hostname: string;
  domainname: string;
  mac_address: string;
  cgroup_parent: string;
  tty: boolean;
  stdin_open: boolean;
  dns: string[];
  dns_search: string[];
  cap_add: string[];
  cap_drop: string[];
  devices: string[];
  extra_hosts: string[];
  security_opt: string[];
  cpu_shares: number | null;
  cpuset: string;
  /** MB */
  memory: number | null;
  /** MB, memory plus swap */
  memory_swap: number | null;
  labels: Record<string, string>;
  read_only: boolean;
  /** Host names and paths served through the router (domain/domains.ts); absent in older definitions. */
  domains?: ServiceDomain[];
}

export const DEFAULT_SPEC: Omit<ServiceSpec, "image_name"> = {
  run_command: null,
  entrypoint: null,
  container_ports: [],
  container_envvars: [],
  linked_to_service: [],
  bindings: [],
  autorestart: "OFF",
  autodestroy: "OFF",
  stop_signal: null,
  stop_grace_period: null,
  health_check: null,
  rollout: null,
  sequential_deployment: false,
  roles: [],
  privileged: false,
  deployment_strategy: "EMPTIEST_NODE",
  tags: [],
  autoredeploy: false,
  net: "bridge",
  pid: "none",
  working_dir: "/",
  user: "",
  hostname: "",
  domainname: "",
  mac_address: "",
  cgroup_parent: "",
  tty: false,
  stdin_open: false,
  dns: [],
  dns_search: [],
  cap_add: [],
  cap_drop: [],
  devices: [],
  extra_hosts: [],
  security_opt: [],
  cpu_shares: null,
  cpuset: "",
  memory: null,
  memory_swap: null,
  labels: {},
  read_only: false,
};

/** `nginx` → `nginx:latest`; keeps digests and registry ports intact. */
export function withTag(image: string): string {
  if (image.includes("@")) return image;
  const lastSlash = image.lastIndexOf("/");
  return image.slice(lastSlash + 1).includes(":") ? image : `${image}:latest`;
}

/** Default service name from an image: `registry:5000/team/web:1.2` → `web`. */
export function nameFromImage(image: string): string {
  const base = image.split("@")[0]!.split("/").pop()!.split(":")[0]!;
  return (
    base
      .replace(/[^a-zA-Z0-9-]/g, "-")
      .replace(/^-+|-+$/g, "")
      .toLowerCase() || "service"
  );
}

/** Engine labels that mark what Berth owns (CONTRACT §10): Berth only touches objects carrying them. */
export const LABELS = {
  container: "io.berth.container",
  service: "io.berth.service",
  namespace: "io.berth.namespace",
  node: "io.berth.node",
} as const;
