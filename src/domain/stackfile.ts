// Stack files (CONTRACT §12): the `services` items of a stack body, in either dialect and even
// mixed, become the Create/Update service bodies the ServiceManager takes; a stack's services
// become a stack file again for export. Pure functions.
//
// Dialects, key by key: REST keys (`image`, `container_ports`, `linked_to_service`, …) pass
// through, with numeric strings taken as integers; stack-file keys (`ports`, `expose`,
// `environment`, `links`, `volumes`, `volumes_from`, `restart`, `command`, `mem_limit`, …) are
// converted. References to other services stay as written (`db`, `db.otherstack`, a resource
// URI): the stack resolves them, because only it knows its services. Every problem names the
// service and the field the user wrote (`services.web.ports[1]`), also for problems found later
// in the converted body (see `fieldOf`).
import { SERVICE_FIELDS } from "../contract/service.ts";
import { ApiError, type FieldProblem } from "./errors.ts";
import { type DeploymentStrategy, nameFromImage, type ServiceSpec, STRATEGIES, withTag } from "./service.ts";
import { durationSeconds, durationText } from "./stop.ts";

// ---------------------------------------------------------------------------------------------
// Keys

/**
 * Keys of Create service (and Update service, a subset) as the REST dialect spells them: the
 * contract's list, so a field added to the contract is taken by stack files at once. Compose
 * spells `stop_signal` and `stop_grace_period` the same (the latter converted below).
 */
const REST_KEYS: ReadonlySet<string> = new Set(SERVICE_FIELDS);

/** Stack-file keys that are spellings of a REST key: both in one item would say the same thing twice. */
const SPELLINGS: Record<string, string> = {
  ports: "container_ports",
  expose: "container_ports",
  environment: "container_envvars",
  links: "linked_to_service",
  volumes: "bindings",
  volumes_from: "bindings",
  command: "run_command",
  restart: "autorestart",
  mem_limit: "memory",
  memswap_limit: "memory_swap",
  network_mode: "net",
};

/** Compose keys Berth does not take, with what to do instead. */
const UNSUPPORTED: Record<string, string> = {
  build: "is not supported: Berth runs images; build and push the image, then name it in image",
  external_links:
    'is not supported: link to a service of another stack with links, as "<service>.<stack>:<alias>"',
  env_file: "is not supported: the server cannot read your files; list the variables in environment",
  version: "is not supported: a stack file has no version; each item of services is one service",
  services: "is not supported: a stack's services are the items of its services list, each named by name",
  depends_on: "is not supported: links decide the order services start in",
  container_name: "is not supported: containers are named after their service (web-1, web-2, …)",
  networks: "is not supported: containers reach each other through links",
};
const UNKNOWN = "is not supported: it is neither a stack-file key nor a key of Create service";

// ---------------------------------------------------------------------------------------------
// Converted items

/** Where a field of the converted body came from in the item. */
interface Origin {
  /** A field of the converted body, such as `container_ports[2]`. */
  rest: string;
  /** The item's field, such as `ports[1]`. */
  item: string;
  /** The item's field is a string (`"8080:80"`): sub-fields of the converted one map to it whole. */
  whole: boolean;
}

export interface ConvertedService {
  /** Position in the services list. */
  index: number;
  /** The service's name: the item's `name`, or the default Create service takes from the image. */
  name: string | undefined;
  /** Prefix of the item's error fields: `services.web.`, or `services[2].` without a usable name. */
  path: string;
  /** A Create service body (the caller takes an Update service body out of it). */
  body: Record<string, unknown>;
  /** The item's own field for a field of `body`, without the `path` prefix. */
  fieldOf(restField: string): string;
}

/** One 400 for a list of problems: the first one's text, counting the others (`details` has them all). */
export function problemsError(problems: readonly FieldProblem[]): ApiError {
  const [first, ...rest] = problems;
  if (!first) throw new Error("problemsError needs a problem");
  const more = rest.length === 0 ? "" : ` (and ${rest.length} more problem${rest.length === 1 ? "" : "s"})`;
  return new ApiError("bad_request", "invalid_field", `${first.field}: ${first.problem}${more}`, [
    ...problems,
  ]);
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** Numeric strings are integers (CONTRACT §12); anything else is left for the service rules to judge. */
function integer(v: unknown): unknown {
  return typeof v === "string" && /^-?\d+$/.test(v.trim()) ? Number(v.trim()) : v;
}

/** The name Create service gives a service without one. */
export function defaultServiceName(image: string): string {
  return (
    nameFromImage(withTag(image))
      .slice(0, 59)
      .replace(/^-+|-+$/g, "") || "service"
  );
}

class Item {
  readonly body: Record<string, unknown> = {};
  readonly origins: Origin[] = [];
  constructor(
    readonly path: string,
    private readonly problems: FieldProblem[],
  ) {}

  add(field: string, problem: string): void {
    this.problems.push({ field: this.path + field, problem });
  }

  from(rest: string, item: string, whole = true): void {
    this.origins.push({ rest, item, whole });
  }

  fieldOf = (restField: string): string => {
    let best: Origin | undefined;
    for (const o of this.origins) {
      const next = restField.charAt(o.rest.length);
      if (restField.startsWith(o.rest) && (next === "" || next === "." || next === "[")) {
        if (!best || o.rest.length > best.rest.length) best = o;
      }
    }
    if (!best) return restField;
    return best.whole ? best.item : best.item + restField.slice(best.rest.length);
  };
}

/**
 * Converts one `services` item. Problems are pushed (with the service's path) rather than thrown,
 * so that a whole stack body is checked in one pass.
 */
export function convertService(raw: unknown, index: number, problems: FieldProblem[]): ConvertedService {
  if (!isObject(raw)) {
    problems.push({ field: `services[${index}]`, problem: "must be an object (one service)" });
    return { index, name: undefined, path: `services[${index}].`, body: {}, fieldOf: (f) => f };
  }
  const name =
    typeof raw.name === "string" && raw.name !== ""
      ? raw.name
      : raw.name === undefined && typeof raw.image === "string" && raw.image.trim() !== ""
        ? defaultServiceName(raw.image)
        : undefined;
  const path =
    name !== undefined && /^[A-Za-z0-9_-]+$/.test(name) ? `services.${name}.` : `services[${index}].`;
  const it = new Item(path, problems);
  if (raw.name === undefined && raw.image === undefined) it.add("name", "is required: it names the service");
  else if (raw.name !== undefined && name === undefined)
    it.add("name", "must be the service's name (a string)");
  // Without a name the image names the service, so an image that is not a string leaves it nameless.
  else if (name === undefined)
    it.add("image", "must be an image name (a string); it also names the service when name is left out");

  for (const key of Object.keys(raw)) {
    const spelled = SPELLINGS[key];
    if (spelled !== undefined && raw[spelled] !== undefined) {
      it.add(key, `is the stack-file spelling of ${spelled}, which is given too: send one of them`);
    }
  }

  const ports: Record<string, unknown>[] = [];
  const portOrigins: Origin[] = [];
  for (const [key, value] of Object.entries(raw)) {
    if (value === undefined) continue;
    if (SPELLINGS[key] !== undefined && raw[SPELLINGS[key]] !== undefined) continue;
    switch (key) {
      case "ports":
      case "expose":
      case "volumes":
      case "volumes_from":
        break; // after the loop, in a fixed order: published ports first, volumes before volumes_from
      case "container_ports":
        if (Array.isArray(value)) {
          it.body.container_ports = value.map((p) =>
            isObject(p) ? { ...p, inner_port: integer(p.inner_port), outer_port: integer(p.outer_port) } : p,
          );
        } else it.body.container_ports = value;
        break;
      case "environment":
        it.body.container_envvars = environment(it, value);
        break;
      case "links": {
        const links: Record<string, unknown>[] = [];
        listOf(it, key, value).forEach((l, i) => {
          const link = parseLink(it, `links[${i}]`, l);
          if (!link) return;
          it.from(`linked_to_service[${links.length}]`, `links[${i}]`);
          links.push(link);
        });
        it.from("linked_to_service", "links");
        it.body.linked_to_service = links;
        break;
      }
      case "command":
        it.body.run_command = command(it, key, value);
        it.from("run_command", key);
        break;
      case "entrypoint":
        it.body.entrypoint = command(it, key, value);
        break;
      case "restart":
        it.body.autorestart = restart(it, value);
        it.from("autorestart", key);
        break;
      case "autodestroy":
        it.body.autodestroy = autodestroy(it, value);
        break;
      case "mem_limit":
        it.body.memory = megabytes(it, key, value, false);
        it.from("memory", key);
        break;
      case "memswap_limit":
        it.body.memory_swap = megabytes(it, key, value, true);
        it.from("memory_swap", key);
        break;
      case "deployment_strategy":
        it.body.deployment_strategy = strategy(it, value);
        break;
      case "network_mode":
        // Compose's spelling of net; other modes (none, container:<name>, a network's name) are not taken.
        if (value === "bridge" || value === "host") it.body.net = value;
        else it.add(key, "must be bridge or host (containers reach each other through links)");
        it.from("net", key);
        break;
      case "stop_grace_period": {
        // A compose duration ("30s", "1m30s") becomes seconds; a number (of seconds) is the
        // schema's to judge, as in the REST dialect.
        const seconds =
          typeof value === "string" && !/^\s*-?\d+\s*$/.test(value) ? durationSeconds(value) : integer(value);
        if (typeof seconds === "string") it.add(key, seconds);
        else it.body.stop_grace_period = seconds;
        break;
      }
      case "target_num_containers":
      case "cpu_shares":
      case "memory":
      case "memory_swap":
        it.body[key] = integer(value);
        break;
      case "dns":
      case "dns_search":
        it.body[key] = typeof value === "string" ? [value] : value;
        break;
      case "labels":
        it.body.labels = labels(it, value);
        break;
      case "extra_hosts":
        it.body.extra_hosts = isObject(value)
          ? Object.entries(value).map(([host, ip]) => `${host}:${String(ip)}`)
          : value;
        break;
      default:
        if (REST_KEYS.has(key)) it.body[key] = value;
        else it.add(key, UNSUPPORTED[key] ?? UNKNOWN);
    }
  }
  for (const key of ["ports", "expose"] as const) {
    if (raw[key] === undefined || raw.container_ports !== undefined) continue;
    for (const [i, p] of listOf(it, key, raw[key]).entries()) {
      const port = parsePort(it, `${key}[${i}]`, p, key === "ports");
      if (!port) continue;
      const same = ports.findIndex((q) => q.inner_port === port.inner_port && q.protocol === port.protocol);
      if (same >= 0) {
        it.add(
          `${key}[${i}]`,
          `${port.inner_port}/${port.protocol} is already listed in ${portOrigins[same]!.item}`,
        );
        continue;
      }
      portOrigins.push({ rest: `container_ports[${ports.length}]`, item: `${key}[${i}]`, whole: true });
      ports.push(port);
    }
  }
  if (ports.length) {
    it.body.container_ports = ports;
    it.origins.push(...portOrigins);
    if (raw.ports !== undefined) it.from("container_ports", "ports");
    else it.from("container_ports", "expose");
  }
  if (raw.volumes !== undefined || raw.volumes_from !== undefined) {
    if (raw.bindings === undefined) bindings(it, raw.volumes, raw.volumes_from);
  }
  return { index, name, path, body: it.body, fieldOf: it.fieldOf };
}

/**
 * Converts every item of a `services` list; two items may not name the same service. Problems are
 * collected in `problems`.
 */
export function convertServices(items: readonly unknown[], problems: FieldProblem[]): ConvertedService[] {
  const out = items.map((item, i) => convertService(item, i, problems));
  const seen = new Map<string, number>();
  for (const s of out) {
    if (s.name === undefined) continue;
    const first = seen.get(s.name);
    if (first !== undefined) {
      problems.push({
        field: `services[${s.index}].name`,
        problem: `${s.name} is already the name of services[${first}]: each service of a stack has its own name`,
      });
    } else seen.set(s.name, s.index);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Key forms

function listOf(it: Item, field: string, value: unknown): unknown[] {
  if (Array.isArray(value)) return value;
  it.add(field, "must be a list");
  return [];
}

const PORT_FORMS = 'such as "80", "8080:80" or "53/udp"';

/** `80`, `"80"`, `"8080:80"`, `"53/udp"`, `"8080:80/udp"`; `expose` takes no host port. */
function parsePort(
  it: Item,
  field: string,
  value: unknown,
  published: boolean,
): Record<string, unknown> | undefined {
  const text = typeof value === "number" && Number.isInteger(value) ? String(value) : value;
  if (typeof text !== "string") {
    it.add(field, `must be a port ${PORT_FORMS}`);
    return undefined;
  }
  const spec = text.trim();
  if (/^(\[[0-9a-fA-F:.]+\]|\d+\.\d+\.\d+\.\d+):/.test(spec)) {
    it.add(
      field,
      "binding a port to one host address is not supported: Berth publishes ports on the node's public interface; write host_port:container_port, such as 8080:80",
    );
    return undefined;
  }
  if (/\d-\d/.test(spec)) {
    it.add(field, "port ranges are not supported: list each port");
    return undefined;
  }
  const m = /^(?:(\d+):)?(\d+)(?:\/([A-Za-z]+))?$/.exec(spec);
  if (!m) {
    it.add(field, `must be a port ${published ? PORT_FORMS : 'such as "80" or "53/udp"'}`);
    return undefined;
  }
  const [, outerText, innerText, protocolText] = m;
  const protocol = (protocolText ?? "tcp").toLowerCase();
  if (protocol !== "tcp" && protocol !== "udp") {
    it.add(field, `${protocolText} is not a protocol: use tcp or udp`);
    return undefined;
  }
  if (outerText !== undefined && !published) {
    it.add(
      field,
      "expose lists ports of the containers only (such as 80 or 53/udp); publish a port on the node with ports",
    );
    return undefined;
  }
  const inner = Number(innerText);
  if (inner < 1 || inner > 65535) {
    it.add(field, `${innerText} is not a port number (1 to 65535)`);
    return undefined;
  }
  const outer = outerText === undefined ? 0 : Number(outerText);
  if (outer > 65535) {
    it.add(field, `${outerText} is not a port number (1 to 65535, or 0 for one the engine picks)`);
    return undefined;
  }
  return { protocol, inner_port: inner, outer_port: outer === 0 ? null : outer, published };
}

const ENV_KEY_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** `["KEY=value", …]` or `{KEY: value}`; numbers and booleans become their text. */
function environment(it: Item, value: unknown): { key: string; value: string }[] {
  const out: { key: string; value: string }[] = [];
  const push = (field: string, key: string, v: string) => {
    if (!ENV_KEY_RE.test(key)) {
      it.add(field, `${key} is not a variable name: letters, digits and _, not starting with a digit`);
      return;
    }
    if (out.some((e) => e.key === key)) {
      it.add(field, `${key} is already set`);
      return;
    }
    it.from(`container_envvars[${out.length}]`, field);
    out.push({ key, value: v });
  };
  if (Array.isArray(value)) {
    value.forEach((entry, i) => {
      const field = `environment[${i}]`;
      if (typeof entry !== "string" || !entry.includes("=")) {
        it.add(
          field,
          'must be "KEY=value" (a variable without a value would come from the caller\'s environment, which the server cannot see)',
        );
        return;
      }
      const eq = entry.indexOf("=");
      push(field, entry.slice(0, eq), entry.slice(eq + 1));
    });
  } else if (isObject(value)) {
    for (const [key, v] of Object.entries(value)) {
      const field = `environment.${key}`;
      if (typeof v === "string") push(field, key, v);
      else if (typeof v === "number" || typeof v === "boolean") push(field, key, String(v));
      else
        it.add(
          field,
          "must be a string, a number or true/false (a variable without a value would come from the caller's environment)",
        );
    }
  } else {
    it.add("environment", 'must be a list of "KEY=value" or an object of variables');
  }
  it.from("container_envvars", "environment");
  return out;
}

/** `db`, `db:alias`, `db.otherstack`, `db.otherstack:alias` → target reference and alias. */
function linkParts(text: string): { ref: string; alias?: string } | undefined {
  const m = /^([^:\s]+)(?::([^:\s]+))?$/.exec(text.trim());
  if (!m) return undefined;
  return m[2] === undefined ? { ref: m[1]! } : { ref: m[1]!, alias: m[2] };
}

function parseLink(it: Item, field: string, value: unknown): Record<string, unknown> | undefined {
  const parts = typeof value === "string" ? linkParts(value) : undefined;
  if (!parts) {
    it.add(
      field,
      'must be "<service>" or "<service>:<alias>"; a service of another stack is "<service>.<stack>"',
    );
    return undefined;
  }
  return parts.alias === undefined ? { to_service: parts.ref } : { to_service: parts.ref, name: parts.alias };
}

/** `volumes` (`/data`, `/host:/data`, `/host:/data:ro`, `/data:ro`) and `volumes_from` (`svc`, `svc:ro`). */
function bindings(it: Item, volumes: unknown, volumesFrom: unknown): void {
  const out: Record<string, unknown>[] = [];
  if (volumes !== undefined) {
    listOf(it, "volumes", volumes).forEach((v, i) => {
      const field = `volumes[${i}]`;
      if (typeof v !== "string") {
        it.add(field, 'must be a string such as "/data", "/srv/data:/data" or "/srv/data:/data:ro"');
        return;
      }
      const parts = v.split(":");
      let mode: string | undefined;
      if (parts.length === 3 || (parts.length === 2 && (parts[1] === "ro" || parts[1] === "rw"))) {
        mode = parts.pop();
      }
      if (mode !== undefined && mode !== "ro" && mode !== "rw") {
        it.add(field, `${mode} is not a volume mode: use ro (read-only) or rw`);
        return;
      }
      if (parts.length > 2) {
        it.add(field, 'must be "<container path>" or "<host path>:<container path>", with :ro for read-only');
        return;
      }
      const [host, container] = parts.length === 2 ? [parts[0]!, parts[1]!] : [null, parts[0]!];
      if (host !== null && !host.startsWith("/")) {
        it.add(
          field,
          host.startsWith(".") || host.startsWith("~")
            ? "relative host paths are not supported: give an absolute host path"
            : "named volumes are not supported: give an absolute host path (/srv/data:/data) or only the container path (/data) for a volume of the container",
        );
        return;
      }
      if (!container.startsWith("/")) {
        it.add(field, "the container path must be absolute");
        return;
      }
      it.from(`bindings[${out.length}]`, field);
      out.push({ host_path: host, container_path: container, rewritable: mode !== "ro" });
    });
  }
  if (volumesFrom !== undefined) {
    listOf(it, "volumes_from", volumesFrom).forEach((v, i) => {
      const field = `volumes_from[${i}]`;
      const m = typeof v === "string" ? /^([^:\s]+)(?::(ro|rw))?$/.exec(v.trim()) : null;
      if (!m || m[1] === "container") {
        it.add(field, 'must be the name of a service, with ":ro" for read-only, such as "data" or "data:ro"');
        return;
      }
      it.from(`bindings[${out.length}]`, field);
      out.push({ volumes_from: m[1], rewritable: m[2] !== "ro" });
    });
  }
  it.from("bindings", volumes !== undefined ? "volumes" : "volumes_from");
  it.body.bindings = out;
}

/** A shell word as the service rules split it back (domain/service-spec.ts `splitShellWords`). */
function shellWord(word: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word;
  return `'${word.replace(/'/g, `'"'"'`)}'`;
}

/** `command` and `entrypoint`: a string, or a list of words (joined so that they split back the same). */
function command(it: Item, field: string, value: unknown): unknown {
  if (Array.isArray(value)) {
    if (!value.every((w) => typeof w === "string")) {
      it.add(field, "must be a string or a list of strings");
      return undefined;
    }
    return value.map(shellWord).join(" ");
  }
  return value;
}

const RESTART: Record<string, string> = { no: "OFF", "on-failure": "ON_FAILURE", always: "ALWAYS" };
const AUTODESTROY: Record<string, string> = { no: "OFF", "on-success": "ON_SUCCESS", always: "ALWAYS" };

function restart(it: Item, value: unknown): unknown {
  const mapped = typeof value === "string" ? RESTART[value] : undefined;
  if (mapped) return mapped;
  if (value === false) return "OFF";
  it.add("restart", "must be no, on-failure or always (a retry count is not supported)");
  return undefined;
}

/** Stack-file values (no, on-success, always) or REST ones (OFF, ON_SUCCESS, ALWAYS). */
function autodestroy(it: Item, value: unknown): unknown {
  if (typeof value === "string" && ["OFF", "ON_SUCCESS", "ALWAYS"].includes(value)) return value;
  const mapped = typeof value === "string" ? AUTODESTROY[value] : undefined;
  if (mapped) return mapped;
  it.add("autodestroy", "must be no, on-success or always");
  return undefined;
}

/** Lower case in stack files, upper case in REST. */
function strategy(it: Item, value: unknown): unknown {
  const upper = typeof value === "string" ? value.toUpperCase() : undefined;
  if (upper && STRATEGIES.includes(upper as DeploymentStrategy)) return upper;
  it.add("deployment_strategy", "must be one of emptiest_node, high_availability, every_node");
  return undefined;
}

const UNIT_BYTES: Record<string, number> = { b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 };

/**
 * `mem_limit` and `memswap_limit` (`512m`, `1g`, `1073741824`: a plain number counts bytes, as in
 * compose files) → MB, the unit Berth keeps; -1 (memswap only) is unlimited swap; 0 is no limit.
 */
function megabytes(it: Item, field: string, value: unknown, allowUnlimited: boolean): unknown {
  if (allowUnlimited && (value === -1 || value === "-1")) return -1;
  const m = /^(\d+)\s*([bkmg])?b?$/i.exec(typeof value === "number" ? String(value) : String(value ?? ""));
  if ((typeof value !== "number" && typeof value !== "string") || !m) {
    it.add(
      field,
      `must be an amount of memory such as 512m or 1g (units b, k, m, g; a plain number counts bytes)${allowUnlimited ? ", or -1 for unlimited swap" : ""}`,
    );
    return undefined;
  }
  const bytes = Number(m[1]) * UNIT_BYTES[(m[2] ?? "b").toLowerCase()]!;
  if (bytes % 1024 ** 2 !== 0) {
    it.add(field, `must be a whole number of megabytes, such as 512m or 1g (Berth limits memory in MB)`);
    return undefined;
  }
  return bytes / 1024 ** 2;
}

/** `{key: value}` or `["key=value", "key"]`. */
function labels(it: Item, value: unknown): unknown {
  if (!Array.isArray(value)) return value;
  const out: Record<string, string> = {};
  value.forEach((entry, i) => {
    if (typeof entry !== "string" || entry === "") {
      it.add(`labels[${i}]`, 'must be "key=value" or "key"');
      return;
    }
    const eq = entry.indexOf("=");
    if (eq < 0) out[entry] = "";
    else out[entry.slice(0, eq)] = entry.slice(eq + 1);
  });
  return out;
}

// ---------------------------------------------------------------------------------------------
// Stack bodies and stack-file documents

/** Compose keys that may sit next to `services` at the top of a body, and why Berth does not take them. */
const TOP_LEVEL: Record<string, string> = {
  version: "is not supported: a stack body is {name, nickname, services: [...]}, without a version",
  networks: "is not supported: containers reach each other through links",
  volumes: "is not supported at the top level: list a service's volumes in its volumes",
  secrets: "is not supported",
  configs: "is not supported",
};

/** Problems of a stack body's top level that its schema would name less helpfully. */
export function stackBodyProblems(body: unknown): FieldProblem[] {
  if (!isObject(body)) return [];
  const out: FieldProblem[] = [];
  for (const [key, problem] of Object.entries(TOP_LEVEL)) {
    if (body[key] !== undefined) out.push({ field: key, problem });
  }
  if (body.services !== undefined && !Array.isArray(body.services)) {
    out.push({
      field: "services",
      problem: isObject(body.services)
        ? "must be a list of services, each with its name: a compose file's services mapping (a top-level wrapper) is not supported"
        : "must be a list of services",
    });
  }
  return out;
}

/**
 * A stack-file document (`{web: {...}, db: {...}}`, what export returns and `berth stack up -f`
 * reads) → the `services` list of a stack body, each item named by its key.
 */
export function stackFileServices(doc: unknown): Record<string, unknown>[] {
  if (!isObject(doc))
    throw problemsError([{ field: "stack file", problem: "must map service names to services" }]);
  const problems: FieldProblem[] = [];
  const out: Record<string, unknown>[] = [];
  for (const [name, value] of Object.entries(doc)) {
    if (name === "version" || name === "services") {
      problems.push({
        field: name,
        problem:
          name === "version"
            ? "is not supported: a stack file has no version; its top-level keys are the services"
            : "is not supported as a top-level wrapper: a stack file's top-level keys are the services themselves",
      });
      continue;
    }
    if (!isObject(value)) {
      problems.push({ field: name, problem: "must be a service: an object of stack-file keys" });
      continue;
    }
    if (value.name !== undefined && value.name !== name) {
      problems.push({
        field: `${name}.name`,
        problem: `names the service ${String(value.name)}, not ${name}`,
      });
      continue;
    }
    out.push({ name, ...value });
  }
  if (problems.length) throw problemsError(problems);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Export

export interface ExportInput {
  name: string;
  nickname: string;
  target_num_containers: number;
  spec: ServiceSpec;
  /** How the stack file names a service (by uuid): `db`, `db.otherstack`; undefined when gone. */
  refOf(uuid: string): string | undefined;
}

function memoryText(mb: number): string {
  return mb % 1024 === 0 ? `${mb / 1024}g` : `${mb}m`;
}

/** A service as stack-file keys, leaving out every value that is the default. */
export function exportService(s: ExportInput): Record<string, unknown> {
  const spec = s.spec;
  const out: Record<string, unknown> = { image: spec.image_name };
  if (spec.run_command !== null) out.command = spec.run_command;
  if (spec.entrypoint !== null) out.entrypoint = spec.entrypoint;
  if (spec.container_envvars.length)
    out.environment = Object.fromEntries(spec.container_envvars.map((e) => [e.key, e.value]));
  const portText = (p: ServiceSpec["container_ports"][number]) =>
    `${p.outer_port !== null ? `${p.outer_port}:` : ""}${p.inner_port}${p.protocol === "udp" ? "/udp" : ""}`;
  const published = spec.container_ports.filter((p) => p.published);
  const exposed = spec.container_ports.filter((p) => !p.published);
  if (published.length) out.ports = published.map(portText);
  if (exposed.length) out.expose = exposed.map(portText);
  const links = spec.linked_to_service.flatMap((l) => {
    const ref = s.refOf(l.to_service);
    if (ref === undefined) return [];
    return [ref.split(".")[0] === l.name ? ref : `${ref}:${l.name}`];
  });
  if (links.length) out.links = links;
  const volumes = spec.bindings
    .filter((b) => b.volumes_from === null)
    .map(
      (b) =>
        `${b.host_path !== null ? `${b.host_path}:` : ""}${b.container_path}${b.rewritable ? "" : ":ro"}`,
    );
  if (volumes.length) out.volumes = volumes;
  const volumesFrom = spec.bindings.flatMap((b) => {
    const ref = b.volumes_from === null ? undefined : s.refOf(b.volumes_from);
    return ref === undefined ? [] : [`${ref}${b.rewritable ? "" : ":ro"}`];
  });
  if (volumesFrom.length) out.volumes_from = volumesFrom;
  if (spec.deployment_strategy !== "EVERY_NODE" && s.target_num_containers !== 1)
    out.target_num_containers = s.target_num_containers;
  if (spec.deployment_strategy !== "EMPTIEST_NODE")
    out.deployment_strategy = spec.deployment_strategy.toLowerCase();
  if (spec.tags.length) out.tags = [...spec.tags];
  if (spec.roles.length) out.roles = [...spec.roles];
  if (spec.autorestart !== "OFF") out.restart = spec.autorestart === "ALWAYS" ? "always" : "on-failure";
  if (spec.autodestroy !== "OFF") out.autodestroy = spec.autodestroy === "ALWAYS" ? "always" : "on-success";
  if (spec.autoredeploy) out.autoredeploy = true;
  if (spec.sequential_deployment) out.sequential_deployment = true;
  if (spec.memory !== null) out.mem_limit = memoryText(spec.memory);
  if (spec.memory_swap !== null)
    out.memswap_limit = spec.memory_swap === -1 ? -1 : memoryText(spec.memory_swap);
  if (spec.cpu_shares !== null) out.cpu_shares = spec.cpu_shares;
  if (spec.cpuset !== "") out.cpuset = spec.cpuset;
  if (spec.privileged) out.privileged = true;
  if (spec.read_only) out.read_only = true;
  if (spec.net !== "bridge") out.net = spec.net;
  if (spec.pid !== "none") out.pid = spec.pid;
  if (spec.working_dir !== "/") out.working_dir = spec.working_dir;
  for (const key of ["user", "hostname", "domainname", "mac_address", "cgroup_parent"] as const) {
    if (spec[key] !== "") out[key] = spec[key];
  }
  for (const key of [
    "dns",
    "dns_search",
    "cap_add",
    "cap_drop",
    "devices",
    "extra_hosts",
    "security_opt",
  ] as const) {
    if (spec[key].length) out[key] = [...spec[key]];
  }
  if (Object.keys(spec.labels).length) out.labels = { ...spec.labels };
  if (spec.tty) out.tty = true;
  if (spec.stdin_open) out.stdin_open = true;
  if (s.nickname !== s.name) out.nickname = s.nickname;
  // How the containers are stopped (null or absent: the defaults).
  if (spec.stop_signal) out.stop_signal = spec.stop_signal;
  if (spec.stop_grace_period !== undefined && spec.stop_grace_period !== null)
    out.stop_grace_period = durationText(spec.stop_grace_period);
  return out;
}
