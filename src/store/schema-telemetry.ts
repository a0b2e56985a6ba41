// Row types of stats series and alerts (issue 32), part of schema.ts's Database.
/** One point of a stats series (issue 32): a container or node over one step; `domain/stats.ts` StatPoint. */
export interface StatPointTable {
  kind: "container" | "node";
  uuid: string;
  namespace: string;
  service_uuid: string | null;
  node_uuid: string | null;
  /** The series: its step in ms (the collection interval, or a minute). */
  step: number;
  at: number;
  cpu: number;
  cpus: number;
  memory: number;
  memory_limit: number;
  net_rx: number;
  net_tx: number;
  block_read: number;
  block_write: number;
  pids: number;
  restarts: number;
  containers: number;
}

export interface AlertRuleTable {
  uuid: string;
  namespace: string;
  name: string;
  kind: string;
  /** JSON of the kind's parameters (thresholds, windows). */
  params: string;
  /** JSON of the channels (webhook URLs, addresses), sealed at rest (SecretBox): URLs may hold secrets. */
  channels: string;
  enabled: number;
  created_by: string;
  created: number;
}

export interface AlertIncidentTable {
  uuid: string;
  rule_uuid: string;
  namespace: string;
  /** The resource URI the condition holds for. */
  subject: string;
  summary: string;
  started: number;
  /** null while the condition holds. */
  resolved: number | null;
}

export interface AlertDeliveryTable {
  uuid: string;
  incident_uuid: string;
  rule_uuid: string;
  namespace: string;
  /** Position of the channel in the rule. */
  channel: number;
  /** The channel as shown: `webhook https://host/…` or `email a@b`. */
  target: string;
  event: "firing" | "resolved";
  state: "pending" | "delivered" | "failed";
  attempts: number;
  next_at: number;
  last_error: string;
  created: number;
  delivered: number | null;
}
