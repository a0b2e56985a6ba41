// The heap's composition for the benchmarks (issue 34, item 2), two ways that are cheap enough at
// 150,000 containers (a heap snapshot of a 2 GB heap is not):
// - `heapSpaces`: V8's spaces (old, new, code, large objects) after a full collection;
// - `census`: the collections (Map, Set, Array, plain objects used as records) reachable from a
//   root through its own data properties, with their sizes, found by walking the object graph (no
//   getters are called; closures' variables and module-level values are not reachable this way).
//   Entries of a collection are walked as one path (`[*]`): what each entry holds is summed over
//   all of them, so `engines.fakes[*].containers` is the containers of every simulated node.
//   A collection whose size grows with containers is what holds memory per container.
import fs from "node:fs";
import v8 from "node:v8";

export interface CensusEntry {
  /** From the root, e.g. `store.feed.parents` or `engines.fakes[*].containers`. */
  path: string;
  kind: string;
  /** Entries summed over every instance found at the path. */
  size: number;
  /** How many instances the path leads to. */
  instances: number;
}

const SKIP = new Set(["constructor", "prototype", "__proto__"]);

/** Collections reachable from `root` with at least `minSize` entries in all, largest first. */
export function census(
  root: object,
  opts: { minSize?: number; maxDepth?: number; maxObjects?: number } = {},
): CensusEntry[] {
  const minSize = opts.minSize ?? 1000;
  const maxDepth = opts.maxDepth ?? 10;
  const maxObjects = opts.maxObjects ?? 5_000_000;
  const seen = new WeakSet<object>();
  const found = new Map<string, CensusEntry>();
  let visited = 0;
  const note = (path: string, kind: string, size: number) => {
    const e = found.get(path) ?? { path, kind, size: 0, instances: 0 };
    e.size += size;
    e.instances += 1;
    found.set(path, e);
  };
  // Breadth first, so each object is named by its shortest path.
  let level: [object, string][] = [[root, ""]];
  for (let depth = 0; depth <= maxDepth && level.length > 0 && visited < maxObjects; depth++) {
    const next: [object, string][] = [];
    const push = (value: unknown, path: string) => {
      if (value === null || (typeof value !== "object" && typeof value !== "function")) return;
      if (seen.has(value as object)) return;
      seen.add(value as object);
      next.push([value as object, path]);
    };
    for (const [obj, path] of level) {
      if (++visited > maxObjects) break;
      if (ArrayBuffer.isView(obj) || obj instanceof ArrayBuffer || obj instanceof WeakMap) continue;
      if (obj instanceof Map) {
        note(path, "Map", obj.size);
        for (const [k, v] of obj) {
          push(k, `${path}[*]`);
          push(v, `${path}[*]`);
        }
        continue;
      }
      if (obj instanceof Set) {
        note(path, "Set", obj.size);
        for (const v of obj) push(v, `${path}[*]`);
        continue;
      }
      if (Array.isArray(obj)) {
        note(path, "Array", obj.length);
        for (const v of obj) push(v, `${path}[*]`);
        continue;
      }
      if (typeof obj === "function") continue;
      let names: string[];
      try {
        names = Object.getOwnPropertyNames(obj);
      } catch {
        continue;
      }
      // A plain object with many keys is a record used as a map.
      if (names.length >= 100) note(path, "Object", names.length);
      for (const name of names) {
        if (SKIP.has(name)) continue;
        const d = Object.getOwnPropertyDescriptor(obj, name);
        if (!d || !("value" in d)) continue;
        push(d.value, names.length >= 100 ? `${path}[*]` : path ? `${path}.${name}` : name);
      }
    }
    level = next;
  }
  return [...found.values()].filter((e) => e.size >= minSize).sort((a, b) => b.size - a.size);
}

/** V8's heap spaces in MB (used of each), after whatever collection the caller ran. */
export function heapSpaces(): string {
  return v8
    .getHeapSpaceStatistics()
    .filter((s) => s.space_used_size > 1024 * 1024)
    .map((s) => `${s.space_name.replace(/_space$/, "")} ${(s.space_used_size / 1024 / 1024).toFixed(0)}`)
    .join(", ");
}

/** The census as lines: each path's entries, per container when `containers` is given. */
export function censusLines(entries: CensusEntry[], containers?: number, top = 14): string[] {
  return entries.slice(0, top).map((e) => {
    const per = containers ? ` (${(e.size / containers).toFixed(2)} per container)` : "";
    const where = e.instances > 1 ? ` in ${e.instances}` : "";
    return `${String(e.size).padStart(9)} × ${e.kind}${where}${per}  ${e.path.slice(0, 90)}`;
  });
}

/**
 * RSS's parts from /proc/self/smaps (Linux; empty elsewhere), in MB: file pages mapped (code, the
 * SQLite file's memory map), the main malloc arena (`brk`), other threads' malloc arenas (64 MB
 * aligned reservations), and the other anonymous mappings (V8's heap pages, large mallocs, stacks).
 */
export function rssParts(): string {
  let text: string;
  try {
    text = fs.readFileSync("/proc/self/smaps", "utf8");
  } catch {
    return "";
  }
  const ARENA = 64 * 1024 * 1024;
  const maps: { start: number; end: number; perms: string; name: string; rss: number }[] = [];
  for (const line of text.split("\n")) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (m) {
      maps.push({
        start: Number.parseInt(m[1]!, 16),
        end: Number.parseInt(m[2]!, 16),
        perms: m[3]!,
        name: m[4]!,
        rss: 0,
      });
      continue;
    }
    const k = /^Rss:\s+(\d+) kB/.exec(line);
    if (k && maps.length > 0) maps[maps.length - 1]!.rss += Number(k[1]);
  }
  const parts = { file: 0, brk: 0, arenas: 0, otherAnon: 0 };
  for (const [i, m] of maps.entries()) {
    const next = maps[i + 1];
    if (m.name.startsWith("/")) parts.file += m.rss;
    else if (m.name === "[heap]") parts.brk += m.rss;
    else if (
      !m.name &&
      m.start % ARENA === 0 &&
      (m.end - m.start === ARENA ||
        (next?.start === m.end && next.perms === "---p" && next.end - m.start === ARENA))
    )
      parts.arenas += m.rss;
    else parts.otherAnon += m.rss;
  }
  const f = (kb: number) => (kb / 1024).toFixed(0);
  return `file ${f(parts.file)}, malloc main ${f(parts.brk)}, malloc thread arenas ${f(parts.arenas)}, other anonymous ${f(parts.otherAnon)} (V8 pages, large mallocs, stacks)`;
}
