// Table-driven over docs/openapi.json (issue 14 item 3): every body field and every query
// parameter of every operation gets values of the wrong type and values out of its stated range,
// and each must be refused with 400 `{error, code}` — never a 5xx, never accepted (a silent
// conversion). The rest of each body is a minimal valid one, so the refusal is about that field.
import assert from "node:assert/strict";
import fs from "node:fs";
import { after, before, test } from "node:test";
import { type Harness, startHarness } from "../support/harness.ts";

type Schema = Record<string, unknown>;

interface Operation {
  method: string;
  path: string;
  body?: Schema;
  query: { name: string; schema: Schema }[];
}

const doc = JSON.parse(fs.readFileSync(new URL("../../docs/openapi.json", import.meta.url), "utf8")) as {
  paths: Record<string, Record<string, { parameters?: Schema[]; requestBody?: Schema }>>;
};

const PARAMS: Record<string, string> = {
  namespace: "admin",
  uuid: "00000000-0000-4000-8000-000000000000",
  username: "admin",
  org: "acme",
  id: "1",
  trigger: "00000000-0000-4000-8000-000000000000",
  region: "r",
  provider: "p",
  name: "n",
  host: "h",
  file: "f",
  "*": "reg.example.test/team/app",
};

function operations(): Operation[] {
  const out: Operation[] = [];
  for (const [path, ops] of Object.entries(doc.paths)) {
    // The namespaced form validates exactly like the bare one.
    if (path.includes("{namespace}") && doc.paths[path.replace("{namespace}/", "")]) continue;
    for (const [method, op] of Object.entries(ops)) {
      const content = (op.requestBody as { content?: Record<string, { schema?: Schema }> } | undefined)
        ?.content;
      const body = content?.["application/json"]?.schema;
      const query = (op.parameters ?? [])
        .filter((p) => p.in === "query")
        .map((p) => ({ name: String(p.name), schema: p.schema as Schema }));
      if (!body && query.length === 0) continue;
      const concrete = path.replace(/\{([^}]+)\}/g, (_, n: string) => PARAMS[n] ?? "x");
      out.push({ method: method.toUpperCase(), path: concrete, ...(body ? { body } : {}), query });
    }
  }
  return out;
}

const typesOf = (s: Schema): string[] => {
  // OpenAPI 3.0 spells a union with null as `nullable: true`.
  if (s.nullable === true) return [...typesOf({ ...s, nullable: false }), "null"];
  if (Array.isArray(s.anyOf)) return (s.anyOf as Schema[]).flatMap(typesOf);
  const t = s.type;
  if (Array.isArray(t)) return t as string[];
  if (typeof t === "string") return [t];
  if (Array.isArray(s.enum)) return [...new Set((s.enum as unknown[]).map((v) => jsonType(v)))];
  return [];
};

function jsonType(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

/** The first branch of a union that is not null. */
function main(s: Schema): Schema {
  if (Array.isArray(s.anyOf))
    return main(((s.anyOf as Schema[]).find((b) => b.type !== "null") ?? {}) as Schema);
  return s;
}

/** A minimal valid value. */
function sample(schema: Schema): unknown {
  const s = main(schema);
  if (Array.isArray(s.enum)) return (s.enum as unknown[])[0];
  if (s.const !== undefined) return s.const;
  switch (typesOf(s)[0]) {
    case "string":
      return "x".repeat(Math.max(1, Number(s.minLength ?? 1)));
    case "integer":
    case "number":
      return Math.max(Number(s.minimum ?? 1), 1);
    case "boolean":
      return true;
    case "array":
      return [];
    case "object": {
      const out: Record<string, unknown> = {};
      const props = (s.properties ?? {}) as Record<string, Schema>;
      for (const r of (s.required ?? []) as string[]) if (props[r]) out[r] = sample(props[r]);
      return out;
    }
    default:
      return "x";
  }
}

/** Values of a JSON type the field does not take, and values beyond its bounds. */
function badValues(schema: Schema): { label: string; value: unknown }[] {
  const allowed = new Set(typesOf(schema));
  if (allowed.has("integer")) allowed.add("number-int");
  const candidates: [string, unknown][] = [
    ["string", "not-a-value"],
    ["integer", 12345],
    ["number", 1.5],
    ["boolean", true],
    ["null", null],
    ["array", ["x"]],
    ["object", { x: 1 }],
  ];
  const out: { label: string; value: unknown }[] = [];
  const s = main(schema);
  const enumValues = Array.isArray(s.enum) ? (s.enum as unknown[]) : undefined;
  for (const [type, value] of candidates) {
    if (allowed.size === 0) break; // an open value (stack items): anything goes
    if (allowed.has(type) && !(enumValues && !enumValues.includes(value))) continue;
    if (type === "integer" && allowed.has("number")) continue;
    out.push({ label: `a ${type}`, value });
  }
  const t = typesOf(s).find((x) => x !== "null");
  if ((t === "integer" || t === "number") && s.maximum !== undefined)
    out.push({ label: "above its maximum", value: Number(s.maximum) + 1 }, { label: "1e308", value: 1e308 });
  if ((t === "integer" || t === "number") && s.minimum !== undefined)
    out.push({ label: "below its minimum", value: Number(s.minimum) - 1 });
  if (t === "string" && s.maxLength !== undefined)
    out.push({ label: "longer than its maxLength", value: "a".repeat(Number(s.maxLength) + 1) });
  if (t === "array" && s.maxItems !== undefined && s.items)
    out.push({
      label: "more items than its maxItems",
      value: Array.from({ length: Number(s.maxItems) + 1 }, () => sample(s.items as Schema)),
    });
  return out;
}

/** Every field of a body schema with the path that reaches it. */
function fields(
  schema: Schema,
  path: (string | number)[] = [],
): { path: (string | number)[]; schema: Schema }[] {
  const s = main(schema);
  const out: { path: (string | number)[]; schema: Schema }[] = [];
  if (path.length) out.push({ path, schema });
  if (typesOf(s)[0] === "object" && s.properties)
    for (const [k, sub] of Object.entries(s.properties as Record<string, Schema>))
      out.push(...fields(sub, [...path, k]));
  if (typesOf(s)[0] === "array" && s.items && typesOf(main(s.items as Schema))[0] === "object")
    out.push(...fields(s.items as Schema, [...path, 0]).filter((f) => f.path.length > path.length + 1));
  return out;
}

/** The minimal body with `value` at `path` (containers on the way are minimal valid ones). */
function bodyWith(root: Schema, path: (string | number)[], value: unknown): unknown {
  const base = sample(root) as Record<string, unknown>;
  let node: Record<string | number, unknown> = base;
  let schema = main(root);
  path.forEach((key, i) => {
    const last = i === path.length - 1;
    const sub =
      typeof key === "number"
        ? (schema.items as Schema)
        : ((schema.properties as Record<string, Schema>)[key] as Schema);
    if (last) {
      node[key] = value;
      return;
    }
    const next = typeof key === "number" ? sample(sub) : main(sub).type === "array" ? [] : sample(sub);
    node[key] = next;
    node = next as Record<string | number, unknown>;
    schema = main(sub);
  });
  return base;
}

const fieldName = (path: (string | number)[]) =>
  path.reduce<string>((acc, p) => (typeof p === "number" ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), "");

let h: Harness;

before(async () => {
  h = await startHarness();
});

after(async () => {
  await h.close();
});

test("every body field refuses wrong types and out-of-range values with 400", async () => {
  const failures: string[] = [];
  let sent = 0;
  for (const op of operations()) {
    if (!op.body) continue;
    for (const f of fields(op.body)) {
      for (const bad of badValues(f.schema)) {
        const payload = bodyWith(op.body, f.path, bad.value);
        const res = await h.app.inject({
          method: op.method as "POST",
          url: op.path,
          headers: { authorization: h.admin.auth, "content-type": "application/json" },
          payload: JSON.stringify(payload),
        });
        sent++;
        let body: { error?: unknown; code?: unknown } = {};
        try {
          body = res.json();
        } catch {}
        // The token endpoint answers in RFC 6749 §5.2 terms: {"error": "invalid_request"}.
        const shaped =
          op.path === "/oauth/token" ? typeof body.error === "string" : typeof body.code === "string";
        if (res.statusCode !== 400 || !shaped)
          failures.push(
            `${op.method} ${op.path} ${fieldName(f.path)} = ${bad.label}: ${res.statusCode} ${res.body.slice(0, 160)}`,
          );
      }
    }
  }
  assert.ok(sent > 500, `only ${sent} requests were generated`);
  assert.deepEqual(failures, []);
});

test("every query parameter refuses wrong types and out-of-range values with 400", async () => {
  const failures: string[] = [];
  let sent = 0;
  for (const op of operations()) {
    for (const q of op.query) {
      const s = main(q.schema);
      const t = typesOf(s)[0];
      const values: string[] = [];
      if (t === "integer" || t === "number")
        values.push("abc", "1.5", "99999999999999999999", String(2 ** 63), "1e308", "-99999999999");
      if (t === "boolean") values.push("maybe", "2");
      if (Array.isArray(s.enum)) values.push("not-a-value");
      if (t === "string" && s.maxLength !== undefined && Number(s.maxLength) < 8000)
        values.push("a".repeat(Number(s.maxLength) + 1));
      for (const v of values) {
        const url = `${op.path}?${q.name}=${encodeURIComponent(v)}`;
        const res = await h.app.inject({
          method: op.method as "GET",
          url,
          headers: { authorization: h.admin.auth },
        });
        sent++;
        let body: { code?: unknown } = {};
        try {
          body = res.json();
        } catch {}
        if (res.statusCode !== 400 || typeof body.code !== "string")
          failures.push(`${op.method} ${url.slice(0, 120)}: ${res.statusCode} ${res.body.slice(0, 160)}`);
      }
    }
  }
  assert.ok(sent > 200, `only ${sent} requests were generated`);
  assert.deepEqual(failures, []);
});
