// Bounds on what a service definition may hold. One table for the route schemas (so the OpenAPI
// document states them) and for domain/service-spec.ts (so stack items, which arrive as open
// objects, are held to exactly the same limits as bodies of /service/).
export const SERVICE_LIMITS = {
  /** A service name is a DNS label that leaves room for the `-100` of its containers' names. */
  nameMaxLength: 59,
  /** A link name is a host name (one DNS label). */
  linkNameMaxLength: 63,
  nicknameMaxLength: 200,
  imageMaxLength: 512,
  /** run_command and entrypoint. */
  commandMaxLength: 16384,
  /** stop_signal (a name such as SIGTERM) and stop_grace_period, in seconds (domain/stop.ts). */
  stopSignalMaxLength: 16,
  stopGracePeriodMaxS: 3600,
  /** Any other text field (user, hostname, working_dir, cpuset, paths, references…). */
  textMaxLength: 1024,
  envKeyMaxLength: 256,
  envValueMaxLength: 32768,
  /** Environment variables of one service. */
  maxEnvVars: 200,
  /** Tags of one object (service, node, node cluster). */
  maxTags: 50,
  tagMaxLength: 128,
  maxPorts: 100,
  maxLinks: 100,
  maxBindings: 100,
  /** dns, dns_search, cap_add, cap_drop, devices, extra_hosts, security_opt, roles. */
  maxListItems: 50,
  maxLabels: 100,
  labelKeyMaxLength: 256,
  labelValueMaxLength: 4096,
  /** 1 TiB: larger than any node Berth runs on, small enough to be exact everywhere. */
  memoryMaxMb: 1048576,
  /** Docker's range for CPU shares. */
  cpuSharesMax: 262144,
  /** Services of one stack body. */
  maxStackServices: 100,
} as const;
