// The row layer's decoders: every JSON column the store keeps is read into a typed value by one
// named function here, and nowhere else (test/store/codec.test.ts fails on a `JSON.parse` of a
// stored column elsewhere in src/). Each checks the shape cheaply (an object, an array) and throws
// naming the column when stored text is not that shape; columns a person writes through an
// administrator's settings (limits, privileges) and actions' parameters read as empty instead.
import type { CalculatedEnvVar } from "../domain/container-spec.ts";
import type { Privileges } from "../domain/privileges.ts";
import { type Limits, QUOTA_RESOURCES } from "../domain/quotas.ts";
import type { ServiceSpec } from "../domain/service.ts";

/** A stored JSON column did not hold the shape Berth writes there. */
export class StoredJsonError extends Error {
  constructor(column: string, shape: string) {
    super(`stored ${column} is not a JSON ${shape}`);
  }
}

function objectIn(column: string, json: string): Record<string, unknown> {
  const v: unknown = JSON.parse(json);
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new StoredJsonError(column, "object");
  return v as Record<string, unknown>;
}

function arrayIn(column: string, json: string): unknown[] {
  const v: unknown = JSON.parse(json);
  if (!Array.isArray(v)) throw new StoredJsonError(column, "array");
  return v;
}

/** Text that is not a JSON object reads as undefined. */
function objectOrUndefined(json: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(json);
    return v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** A service's definition as stored (services.spec, and containers.spec: the one it was deployed with). */
export function decodeSpec(json: string): ServiceSpec {
  return objectIn("spec", json) as unknown as ServiceSpec;
}

/** Definitions noted for rows (noteSpec), with the text they were noted for. */
const notedSpecs = new WeakMap<object, { text: string; spec: ServiceSpec }>();

/**
 * Notes that `row.spec` is the JSON of `spec` (a writer that just encoded it, or decoded it once):
 * specOf(row) answers it instead of decoding the text again (issue 34: a PATCH decoded its
 * definition five times). Every reader of the row shares it, so none may change it: its fields
 * are frozen (not the values inside them: walking them all cost as much as the decode saved; no
 * reader changes part of a definition's field, an update replaces whole fields of a copy).
 */
export function noteSpec<T extends { spec: string }>(row: T, spec: ServiceSpec): T {
  notedSpecs.set(row, { text: row.spec, spec: Object.freeze(spec) });
  return row;
}

/** The definition of a service's or container's row (the one noted for it, else decoded). */
export function specOf(row: { spec: string }): ServiceSpec {
  const noted = notedSpecs.get(row);
  if (noted !== undefined && noted.text === row.spec) return noted.spec;
  return decodeSpec(row.spec);
}

/** The rows of `service_links` for a service's definition (JSON of its ServiceSpec). */
export function specLinks(
  fromUuid: string,
  specJson: string,
): { from_uuid: string; to_uuid: string; name: string; position: number }[] {
  const spec = objectIn("spec", specJson) as { linked_to_service?: { to_service: string; name: string }[] };
  return (spec.linked_to_service ?? []).map((l, position) => ({
    from_uuid: fromUuid,
    to_uuid: l.to_service,
    name: l.name,
    position,
  }));
}

/** A port of a container as the engine reported it (containers.ports). */
export interface ReportedPort {
  inner_port: number;
  protocol: string;
  outer_port: number;
}

/** The ports the engine reported for a container. */
export function portsOf(c: { ports: string }): ReportedPort[] {
  return arrayIn("ports", c.ports) as ReportedPort[];
}

/** The environment of a container's engine container as reported; null before one exists. */
export function environmentOf(c: { environment: string | null }): CalculatedEnvVar[] | null {
  return !c.environment ? null : (arrayIn("environment", c.environment) as CalculatedEnvVar[]);
}

/** The `/etc/hosts` lines written into a container for its links; none before any were written. */
export function linkHostsOf(c: { link_hosts: string | null }): string[] {
  return !c.link_hosts ? [] : (arrayIn("link_hosts", c.link_hosts) as string[]);
}

/** The resource URIs of a change-feed entry's parents (changes.parents). */
export function parentsOf(change: { parents: string }): string[] {
  return arrayIn("parents", change.parents) as string[];
}

/** The tags of a node or node cluster. */
export function tagsOf(row: { tags: string }): string[] {
  return arrayIn("tags", row.tags) as string[];
}

/** A node cluster's provider options; null when none were given. */
export function providerOptionsOf(c: { provider_options: string | null }): object | null {
  return !c.provider_options ? null : objectIn("provider_options", c.provider_options);
}

/** An action's stored parameters; text that is not JSON reads as undefined (and fits no schema). */
export function paramsOf(a: { params: string | null }): unknown {
  if (!a.params) return null;
  try {
    return JSON.parse(a.params) as unknown;
  } catch {
    return undefined;
  }
}

/** A node's engine TLS material, from its `engine_tls` column once the secret box opened it. */
export function decodeEngineTls(opened: string): { ca: string; cert: string; key: string } {
  return objectIn("engine_tls", opened) as { ca: string; cert: string; key: string };
}

/** A repository's registry credentials, from its `credentials` column once the secret box opened it. */
export function decodeCredentials(opened: string): { username: string; password: string } {
  return objectIn("credentials", opened) as { username: string; password: string };
}

/** The privileges an administrator allowed a namespace (namespace_settings.privileges); {} when unreadable. */
export function decodePrivileges(json: string): Partial<Privileges> {
  return (objectOrUndefined(json) ?? {}) as Partial<Privileges>;
}

/** Decodes a stored `limits` JSON object, keeping only known resources with a number or null. */
export function decodeLimits(json: string | null | undefined): Limits {
  if (!json) return {};
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return {};
  }
  if (typeof value !== "object" || value === null) return {};
  const out: Limits = {};
  for (const r of QUOTA_RESOURCES) {
    const v = (value as Record<string, unknown>)[r];
    if (v === null || (typeof v === "number" && Number.isInteger(v) && v >= 0)) out[r] = v;
  }
  return out;
}

/** One archive of a volume backup: a container's volume path, in a file of the backup's directory. */
export interface VolumeArchive {
  /** The container's number in its service (restores go to the container of the same number). */
  number: number;
  path: string;
  file: string;
  bytes: number;
  /** SHA-256 of the archive (hex), checked before a restore writes anything (absent before 0033). */
  sha256?: string;
}

/** A volume backup's archives (volume_backups.archives). */
export function archivesOf(row: { archives: string }): VolumeArchive[] {
  return arrayIn("archives", row.archives) as VolumeArchive[];
}

/** A control fact holding a list of strings (adoption's pending nodes, reported containers); other text reads empty. */
export function factListOf(value: string | undefined): string[] {
  if (!value) return [];
  try {
    const v: unknown = JSON.parse(value);
    return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
  } catch {
    return [];
  }
}

/** An alert rule's parameters (alert_rules.params): numbers by name; anything else is left out. */
export function decodeAlertParams(json: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(objectOrUndefined(json) ?? {}))
    if (typeof v === "number" && Number.isFinite(v)) out[k] = v;
  return out;
}

/** One channel of an alert rule, as stored (sealed) in alert_rules.channels. */
export type StoredAlertChannel =
  | { type: "webhook"; url: string; format?: "json" | "slack" }
  | { type: "email"; to: string };

/** An alert rule's channels, once unsealed: each checked to be a webhook or an email channel. */
export function decodeAlertChannels(json: string): StoredAlertChannel[] {
  return arrayIn("channels", json).map((c) => {
    const o = c && typeof c === "object" ? (c as Record<string, unknown>) : {};
    if (o.type === "webhook" && typeof o.url === "string")
      return { type: "webhook", url: o.url, format: o.format === "slack" ? "slack" : "json" };
    if (o.type === "email" && typeof o.to === "string") return { type: "email", to: o.to };
    throw new StoredJsonError("channels", "array of channels");
  });
}

/**
 * The process that wrote a simulated container, read without decoding the container: the store
 * writes `{"origin":"<id>",...}` (store/simulated.ts), so a replica skips its own rows cheaply.
 * Anything else is decoded whole.
 */
export function simulatedOriginOf(json: string): string {
  const head = '{"origin":"';
  if (json.startsWith(head)) {
    const end = json.indexOf('"', head.length);
    const origin = json.slice(head.length, end);
    if (end > head.length && !origin.includes("\\")) return origin;
  }
  return simulatedContainerOf(json).origin;
}

/** A simulated node's engine container as stored: the process that wrote it, and the container (absent once removed). */
export function simulatedContainerOf(json: string): { origin: string; container?: Record<string, unknown> } {
  const v = objectIn("simulated container", json);
  const container = v.container;
  if (
    typeof v.origin !== "string" ||
    (container !== undefined && (typeof container !== "object" || container === null))
  )
    throw new StoredJsonError("simulated container", "object with origin and container");
  return { origin: v.origin, container: container as Record<string, unknown> | undefined };
}
