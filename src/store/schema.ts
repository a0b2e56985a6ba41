// Row types of the database. Timestamps are epoch milliseconds; booleans are 0/1 and
// JSON values are text, so that every query works the same on SQLite and PostgreSQL.
// Long because it is one interface per table, the mirror of migrations.ts: splitting it would
// scatter the one place that says what the database holds.
import type { Generated } from "kysely";
import type { ContainerHealth } from "../domain/health.ts";
import type { ContainerObserved, ContainerPhase, NodeObserved, NodePhase } from "../domain/states.ts";
import type {
  AlertDeliveryTable,
  AlertIncidentTable,
  AlertRuleTable,
  StatPointTable,
} from "./schema-telemetry.ts";

export type {
  AlertDeliveryTable,
  AlertIncidentTable,
  AlertRuleTable,
  StatPointTable,
} from "./schema-telemetry.ts";

export interface NamespaceTable {
  name: string;
  kind: "user" | "org";
  created: number;
}

export interface UserTable {
  id: Generated<number>;
  username: string;
  email: string;
  password_hash: string;
  full_name: string;
  is_admin: number;
  is_active: number;
  location: string;
  company: string;
  profile_url: string;
  date_joined: number;
}

export interface EmailTable {
  user_id: number;
  email: string;
  verified: number;
  primary: number;
  created: number;
}

/** Bearer access tokens of the accounts API (CONTRACT §11); only the SHA-256 of the token is kept. */
export interface AccessTokenTable {
  id: Generated<number>;
  token_hash: string;
  user_id: number;
  /** Space-separated scopes the token was issued with. */
  scopes: string;
  created: number;
  expires: number;
}

/** Dashboard sign-in sessions (token stored as SHA-256); deleted at sign-out, ignored once expired. */
export interface SessionTable {
  id: Generated<number>;
  token_hash: string;
  user_id: number;
  created: number;
  expires: number;
  user_agent: string;
}

/** One-time email confirmation tokens (hashed); a confirmed or superseded token is deleted. */
export interface EmailTokenTable {
  token_hash: string;
  user_id: number;
  email: string;
  created: number;
  expires: number;
}

export interface OrgMemberTable {
  org: string;
  username: string;
  role: "owner" | "member";
}

/** An invitation to an organization, pending until the invited user accepts or declines it. */
export interface OrgInvitationTable {
  org: string;
  /** The name invited: it may name no user (an invitation then never becomes acceptable). */
  username: string;
  /**
   * The user the name belonged to when invited (null: no such user). Only that user may accept:
   * a user created later under the name does not inherit the invitation.
   */
  user_id: number | null;
  role: "owner" | "member";
  invited_by: string;
  created: number;
}

export interface ApiKeyTable {
  id: Generated<number>;
  user_id: number;
  label: string;
  key_hash: string;
  created: number;
  /** When set, the key may only address this namespace (service keys of role global). */
  namespace_limit: string | null;
  /** The service a PLATFORM_AUTH key was made for; revoked with it. */
  service_uuid: string | null;
}

export interface ActionTable {
  id: Generated<number>;
  uuid: string;
  namespace: string;
  object: string;
  action: string;
  /** The registered kind of an asynchronous action; null for synchronous calls. */
  kind: string | null;
  /** JSON of the operation's parameters (never a request body: those can hold secrets). */
  params: string | null;
  method: string;
  path: string;
  user: string;
  user_agent: string;
  ip: string;
  location: string;
  start_date: number;
  end_date: number | null;
  state: string;
  is_user_action: number;
  step: number;
  attempts: number;
  lease_owner: string | null;
  lease_until: number | null;
  version: number;
}

export interface ActionLogTable {
  id: Generated<number>;
  action_uuid: string;
  ts: number;
  line: string;
}

export interface ChangeTable {
  revision: Generated<number>;
  namespace: string;
  type: string;
  action: string;
  resource_uri: string;
  state: string;
  parents: string;
  datetime: number;
}

export interface NodeClusterTable {
  id: Generated<number>;
  uuid: string;
  namespace: string;
  name: string;
  nickname: string;
  state: string;
  provider: string;
  region: string;
  node_type: string;
  disk: number | null;
  target_num_nodes: number;
  /** JSON array of tag names. */
  tags: string;
  provider_options: string | null;
  deployed_at: number | null;
  destroyed_at: number | null;
  created: number;
  version: number;
}

export interface NodeTable {
  id: Generated<number>;
  uuid: string;
  namespace: string;
  cluster_uuid: string | null;
  provider: string;
  region: string;
  node_type: string;
  availability_zone: string | null;
  /**
   * The state the API shows, derived by the store from phase, observed and destroyed_at
   * (domain/states.ts `nodeState`) on every write; no caller writes it.
   */
  state: string;
  /** The operation a node action is carrying out (null: none); written only by node actions. */
  phase: NodePhase | null;
  /** Whether the node's engine answered when last asked; written only by health checks and deploys. */
  observed: NodeObserved;
  external_fqdn: string;
  nickname: string;
  /** How Berth reaches the engine: unix:///…, tcp://host:port, or fake://<uuid> for simulated nodes. */
  engine_url: string;
  /** JSON TLS material for attached engines, encrypted at rest; null without TLS. */
  engine_tls: string | null;
  engine_id: string;
  engine_execdriver: string;
  engine_graphdriver: string;
  engine_version: string;
  cpu: number;
  memory: number;
  disk: number;
  public_ip: string;
  tunnel: string | null;
  /** The node's container subnet (local nodes), used for routes between nodes. */
  private_subnet: string;
  /** Small number that picks a local node's addresses; unique among live local nodes. */
  slot: number;
  last_seen: number | null;
  unreachable_since: number | null;
  deployed_at: number | null;
  destroyed_at: number | null;
  tags: string;
  created: number;
  version: number;
}

export interface ServiceTable {
  id: Generated<number>;
  uuid: string;
  namespace: string;
  name: string;
  nickname: string;
  state: string;
  stack_uuid: string | null;
  target_num_containers: number;
  /** JSON of the ServiceSpec (desired definition). */
  spec: string;
  /** Bumped on every definition change; containers deployed with an older one are unsynchronized. */
  spec_version: number;
  /** PLATFORM_AUTH of role global: the service key, encrypted at rest (SecretBox). */
  auth_secret: string | null;
  deployed_at: number | null;
  started_at: number | null;
  stopped_at: number | null;
  destroyed_at: number | null;
  created: number;
  version: number;
}

export interface ContainerTable {
  id: Generated<number>;
  uuid: string;
  namespace: string;
  service_uuid: string;
  node_uuid: string;
  name: string;
  number: number;
  /**
   * The state the API shows, derived by the store from phase, observed and destroyed_at
   * (domain/states.ts `containerState`) on every write; no caller writes it.
   */
  state: string;
  /** What the user asked for: running, stopped or terminated. */
  desired: string;
  /** The operation an action is carrying out on the container (null: none); written only by actions. */
  phase: ContainerPhase | null;
  /** What the engine last reported of the container; written only by the runtime. */
  observed: ContainerObserved;
  /** Its health check's last word as the engine reported it (null: no check); written only by the runtime. */
  health: ContainerHealth | null;
  /** What its check printed when its health last changed (why it is unhealthy); written only by the runtime. */
  health_output: string | null;
  /** Times its engine restarted it (restart policy) since Berth last started it; written only by the runtime. */
  restart_count: number;
  engine_id: string | null;
  exit_code: number | null;
  exit_code_msg: string | null;
  private_ip: string;
  /** JSON [{inner_port, protocol, outer_port}] as the engine published them. */
  ports: string;
  /** JSON of the ServiceSpec this container was deployed with. */
  spec: string;
  spec_version: number;
  /** Token of the engine container that currently embodies this record; a redeploy makes a new one. */
  generation: string;
  /**
   * JSON [{key, value, origin}]: the environment of the current engine container as the engine
   * reports it (secrets left out); null before one exists. Written only by the runtime.
   */
  environment: string | null;
  /** JSON ["host:ip"]: the link host entries last written into the engine container's /etc/hosts. */
  link_hosts: string | null;
  deployed_at: number | null;
  started_at: number | null;
  stopped_at: number | null;
  destroyed_at: number | null;
  created: number;
  version: number;
}

/**
 * The links of each service's definition (`linked_to_service`), one row per link, kept by the store
 * whenever it writes a spec: `linked_from_service` of a page of services is one indexed lookup
 * instead of a read of every service of the namespace.
 */
export interface ServiceLinkTable {
  from_uuid: string;
  to_uuid: string;
  name: string;
  /** The link's position in the definition (the order the view lists them in). */
  position: number;
}

export interface StackTable {
  id: Generated<number>;
  uuid: string;
  namespace: string;
  name: string;
  nickname: string;
  state: string;
  deployed_at: number | null;
  destroyed_at: number | null;
  created: number;
  version: number;
}

export interface RepositoryTable {
  id: Generated<number>;
  uuid: string;
  namespace: string;
  /** `<registry host>/<path>`, unique per namespace. */
  name: string;
  registry_host: string;
  /** JSON {username, password}, encrypted at rest (SecretBox); null for a public repository. */
  credentials: string | null;
  created: number;
  updated: number;
}

export interface TriggerTable {
  id: Generated<number>;
  uuid: string;
  namespace: string;
  service_uuid: string;
  name: string;
  /** REDEPLOY or SCALEUP. */
  operation: string;
  /** SHA-256 of the secret part of the trigger's URL (the secret itself is never stored). */
  secret_hash: string;
  /** The user who created it; actions started by calling it name them. */
  created_by: string;
  /** The id of that user: the trigger acts only while they may use its namespace (null: unknown). */
  creator_id: number | null;
  created: number;
}

export interface RegistrationTokenTable {
  id: Generated<number>;
  uuid: string;
  /** The namespace a node registered with this token joins. */
  namespace: string;
  /** SHA-256 of the token (the token itself is shown once, at creation). */
  token_hash: string;
  /** The user who created it; the registration's action names them. */
  created_by: string;
  /** The id of that user: the token registers only while they may use its namespace (null: unknown). */
  creator_id: number | null;
  created: number;
  expires: number;
  /** Set once a node registered with it: a token is single-use. */
  used_at: number | null;
  node_uuid: string | null;
}

export interface AgentKeyTable {
  /** The node the key authenticates (one key per node). */
  node_uuid: string;
  namespace: string;
  /** SHA-256 of the node key the agent keeps on disk. */
  key_hash: string;
  created: number;
  /** Set when the key no longer opens a tunnel (node terminated, or revoked). */
  revoked_at: number | null;
}

/** A Berth process sharing the database; live while its heartbeat is recent. */
export interface ReplicaTable {
  id: string;
  started_at: number;
  heartbeat_at: number;
  /** 1 once it received SIGTERM: it claims nothing new. */
  stopping: number;
}

/** Work that must happen once, owned by one replica until `until` (epoch ms). */
export interface LeaseTable {
  name: string;
  owner: string;
  until: number;
  acquired_at: number;
}

export interface LoginFailureTable {
  key: string;
  failures: number;
  reset_at: number;
}

export interface ControlFactTable {
  name: string;
  value: string;
}

/**
 * Settings an administrator gives a namespace (migration 0018): its privileges (domain/privileges.ts)
 * and its limits (quotas), each a JSON object; a namespace without a row has the defaults.
 */
/** A node's placement generation (migration 0022, orchestrator/plan-applier.ts). */
export interface PlacementGuardTable {
  node_uuid: string;
  namespace: string;
  /** Moved by every commit that places containers on the node. */
  generation: number;
}

/** A simulated node's engine container, shared by every replica (migration 0030). */
export interface SimulatedContainerTable {
  engine_id: string;
  node_uuid: string;
  /** The node's `simulated_node_clocks` value of the write that left it so (migration 0040). */
  seq: number;
  /** 1 once the engine removed it (a tombstone other replicas learn the removal from). */
  removed: number;
  /** The container as its engine records it (`drivers/fake` `SimulatedContainerState`), JSON. */
  data: string;
  /** When it was written (ms; 0: before migration 0040). */
  written_at: number;
}

/**
 * An address or host port a simulated node's container holds (migration 0036): `claim` is
 * `ip/<address>` or `<protocol>/<host port>`; one holder per node and value.
 */
export interface SimulatedClaimTable {
  node_uuid: string;
  claim: string;
  engine_id: string;
}

export interface SimulatedClockTable {
  id: number;
  seq: number;
}

/** Each simulated node's write clock (migration 0040): its row's lock orders the node's writers. */
export interface SimulatedNodeClockTable {
  node_uuid: string;
  seq: number;
}

export interface NamespaceSettingsTable {
  namespace: string;
  privileges: string;
  limits: string;
}

/** A host name a namespace holds (migration 0026, orchestrator/host-claims.ts): first claim wins. */
export interface HostClaimTable {
  host: string;
  namespace: string;
  /** 1: reserved by an administrator (kept when no service uses it); 0: claimed by a service's domain. */
  reserved: number;
  created: number;
}

/** The certificate of a routed host name (migration 0026): its state as the routers report it, or an upload. */
export interface RouterCertificateTable {
  host: string;
  namespace: string;
  /** pending, issued, error, uploaded. */
  state: string;
  issuer: string;
  expires_at: number | null;
  error: string | null;
  /** Uploaded PEM certificate chain and key, sealed (identity/secret-box.ts); null for ACME. */
  sealed_cert: string | null;
  sealed_key: string | null;
  updated: number;
}

/**
 * An engine container out of the routes, or kept in them while its record moves (migration 0032,
 * router/drains.ts).
 */
export interface RouterDrainTable {
  /** `<container uuid>:<generation>`: one engine container. */
  key: string;
  namespace: string;
  container_uuid: string;
  /**
   * drain: out of the routes; hold: routed as `container` says while its record moves to a new
   * generation; paused: a hold of a rollout paused after a failure (kept while it is paused).
   */
  kind: string;
  /** JSON of the held container as it was routed (domain/router-config.ts RouterContainer); null for a drain. */
  container: string | null;
  /** Epoch ms after which the row means nothing. */
  until: number;
}

/** The serial of the certificate a node's router last served for a host name (migration 0037): renewals. */
export interface RouterSerialTable {
  node_uuid: string;
  host: string;
  /** Hex, as the router reports it. */
  serial: string;
  updated: number;
}

export interface Database {
  host_claims: HostClaimTable;
  router_serials: RouterSerialTable;
  router_drains: RouterDrainTable;
  router_certificates: RouterCertificateTable;
  namespaces: NamespaceTable;
  namespace_settings: NamespaceSettingsTable;
  placement_guards: PlacementGuardTable;
  stat_points: StatPointTable;
  alert_rules: AlertRuleTable;
  alert_incidents: AlertIncidentTable;
  alert_deliveries: AlertDeliveryTable;
  users: UserTable;
  emails: EmailTable;
  access_tokens: AccessTokenTable;
  sessions: SessionTable;
  email_tokens: EmailTokenTable;
  org_members: OrgMemberTable;
  org_invitations: OrgInvitationTable;
  api_keys: ApiKeyTable;
  actions: ActionTable;
  action_logs: ActionLogTable;
  changes: ChangeTable;
  nodeclusters: NodeClusterTable;
  nodes: NodeTable;
  services: ServiceTable;
  containers: ContainerTable;
  service_links: ServiceLinkTable;
  service_revisions: ServiceRevisionTable;
  stacks: StackTable;
  repositories: RepositoryTable;
  triggers: TriggerTable;
  registration_tokens: RegistrationTokenTable;
  agent_keys: AgentKeyTable;
  replicas: ReplicaTable;
  leases: LeaseTable;
  login_failures: LoginFailureTable;
  control_facts: ControlFactTable;
  simulated_containers: SimulatedContainerTable;
  simulated_clock: SimulatedClockTable;
  simulated_node_clocks: SimulatedNodeClockTable;
  simulated_claims: SimulatedClaimTable;
  volume_backups: VolumeBackupTable;
  volume_backup_schedules: VolumeBackupScheduleTable;
  backup_targets: BackupTargetTable;
}

/** An S3-compatible backup target (migration 0033, ops/backup-targets.ts). */
export interface BackupTargetTable {
  uuid: string;
  name: string;
  /** `https://host[:port]` (or http). */
  endpoint: string;
  bucket: string;
  /** Key prefix of every object Berth writes ("" or ending in "/"). */
  prefix: string;
  region: string;
  access_key: string;
  /** The secret key, sealed (identity/secret-box.ts). */
  sealed_secret: string;
  /** 1: path-style addressing (`endpoint/bucket/key`) rather than `bucket.endpoint/key`. */
  path_style: number;
  created: number;
}

/** A backup of a service's volumes (migration 0027, orchestrator/volume-backups.ts). */
export interface VolumeBackupTable {
  id: Generated<number>;
  uuid: string;
  namespace: string;
  service_uuid: string;
  /** The service's name when it was backed up (the service may be gone since). */
  service_name: string;
  /** "In progress", "Success" or "Failed". */
  state: string;
  /** "user" (on demand) or "schedule". */
  trigger: string;
  created: number;
  finished: number | null;
  size_bytes: number;
  /** JSON: the archives (codec.ts archivesOf). */
  archives: string;
  /** The action that made it. */
  action_uuid: string | null;
  error: string | null;
  /** The backup target holding its archives (migration 0033); null: the data directory. */
  target_uuid: string | null;
}

/** A service's volume backup schedule (migration 0027). */
export interface VolumeBackupScheduleTable {
  service_uuid: string;
  namespace: string;
  every_hours: number;
  /** Backups of the service kept; older ones are removed after each success. */
  keep: number;
  /** 1: containers are paused while their volumes are read. */
  pause: number;
  /** A command run in each container before its volumes are read (null: none). */
  pre_command: string | null;
  next_at: number;
  /** Where the backups go (migration 0033): a backup target's uuid, or null for the data directory. */
  target_uuid: string | null;
  /** Retention tiers besides `keep` (0: none): the newest backup of each of the last N days / weeks. */
  keep_daily: number;
  keep_weekly: number;
}

/**
 * A definition a service was given (migration 0031, store/revisions.ts): `number` is the
 * spec_version it had; the service's own `spec_version` names the one it has now.
 */
export interface ServiceRevisionTable {
  service_uuid: string;
  number: number;
  namespace: string;
  /** JSON of the ServiceSpec. */
  spec: string;
  /** What gave the service this definition: create, update, key rotation, existing (before revisions were kept). */
  cause: string;
  /** The action of the call that gave it (null: none recorded). */
  action_uuid: string | null;
  created: number;
}
