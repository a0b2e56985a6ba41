// Stack files (CONTRACT §12): the `services` items of a stack body, in either dialect and even
// mixed, become the Create/Update service bodies the ServiceManager takes; a stack's services
// become a stack file again for export (stackfile-export.ts). Key forms: stackfile-forms.ts. Pure
// functions.
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
import { healthCheckFromStackFile } from "./health.ts";
import { nameFromImage, withTag } from "./service.ts";
import {
  autodestroy,
  bindings,
  command,
  environment,
  Item,
  integer,
  isObject,
  labels,
  listOf,
  megabytes,
  type Origin,
  parseLink,
  parsePort,
  restart,
  strategy,
} from "./stackfile-forms.ts";
import { durationSeconds } from "./stop.ts";

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
  healthcheck: "health_check",
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

/** The name Create service gives a service without one. */
export function defaultServiceName(image: string): string {
  return (
    nameFromImage(withTag(image))
      .slice(0, 59)
      .replace(/^-+|-+$/g, "") || "service"
  );
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
      case "healthcheck": {
        // Compose's shape, with Berth's http and tcp checks (domain/health.ts).
        const found: FieldProblem[] = [];
        const check = healthCheckFromStackFile(value, key, found);
        for (const f of found) it.add(f.field, f.problem);
        if (check || value === null) it.body.health_check = check;
        it.from("health_check", key, false);
        break;
      }
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
