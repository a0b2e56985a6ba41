// The forms a stack-file key may take (CONTRACT §12), each read into the Create service body of
// one `services` item (Item), with every problem named by the field the user wrote. Pure functions.

import type { FieldProblem } from "./errors.ts";
import { type DeploymentStrategy, STRATEGIES } from "./service.ts";

// ---------------------------------------------------------------------------------------------
// The item being converted

/** Where a field of the converted body came from in the item. */
export interface Origin {
  /** A field of the converted body, such as `container_ports[2]`. */
  rest: string;
  /** The item's field, such as `ports[1]`. */
  item: string;
  /** The item's field is a string (`"8080:80"`): sub-fields of the converted one map to it whole. */
  whole: boolean;
}

export const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** Numeric strings are integers (CONTRACT §12); anything else is left for the service rules to judge. */
export function integer(v: unknown): unknown {
  return typeof v === "string" && /^-?\d+$/.test(v.trim()) ? Number(v.trim()) : v;
}

export class Item {
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

// ---------------------------------------------------------------------------------------------
// Key forms

export function listOf(it: Item, field: string, value: unknown): unknown[] {
  if (Array.isArray(value)) return value;
  it.add(field, "must be a list");
  return [];
}

const PORT_FORMS = 'such as "80", "8080:80" or "53/udp"';

/** `80`, `"80"`, `"8080:80"`, `"53/udp"`, `"8080:80/udp"`; `expose` takes no host port. */
export function parsePort(
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
export function environment(it: Item, value: unknown): { key: string; value: string }[] {
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

export function parseLink(it: Item, field: string, value: unknown): Record<string, unknown> | undefined {
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
export function bindings(it: Item, volumes: unknown, volumesFrom: unknown): void {
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
export function command(it: Item, field: string, value: unknown): unknown {
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

export function restart(it: Item, value: unknown): unknown {
  const mapped = typeof value === "string" ? RESTART[value] : undefined;
  if (mapped) return mapped;
  if (value === false) return "OFF";
  it.add("restart", "must be no, on-failure or always (a retry count is not supported)");
  return undefined;
}

/** Stack-file values (no, on-success, always) or REST ones (OFF, ON_SUCCESS, ALWAYS). */
export function autodestroy(it: Item, value: unknown): unknown {
  if (typeof value === "string" && ["OFF", "ON_SUCCESS", "ALWAYS"].includes(value)) return value;
  const mapped = typeof value === "string" ? AUTODESTROY[value] : undefined;
  if (mapped) return mapped;
  it.add("autodestroy", "must be no, on-success or always");
  return undefined;
}

/** Lower case in stack files, upper case in REST. */
export function strategy(it: Item, value: unknown): unknown {
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
export function megabytes(it: Item, field: string, value: unknown, allowUnlimited: boolean): unknown {
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
export function labels(it: Item, value: unknown): unknown {
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
