// Input that holds (CONTRACT §6): strict JSON types in bodies and a bound on every number, string,
// list and map of every route schema.
//
// - Fastify's ajv runs with `coerceTypes` so that query strings (always text) become numbers and
//   booleans. In a JSON body that coercion would silently turn `{"image": ["x"]}` into "x", `null`
//   into 0 and `true` into "true"; `checkBodyTypes` refuses every such mismatch first, naming the
//   field. The one conversion kept is the one CONTRACT §12 promises: a numeric string where an
//   integer is expected (`"3"`) becomes that integer.
// - `boundSchema` gives every schema node without an explicit bound a default one, so nothing a
//   caller sends is unbounded (a 1e308 offset used to reach SQLite and answer 500). The bounds are
//   written into the route schemas themselves, so the OpenAPI document states them.
// - Boolean query parameters are read as the historical clients send them (compat: `True`, `1`,
//   `yes`…, see `parseQueryBoolean`); any other value is a 400 naming the parameter.
//
// Both checks run in one preValidation step per route, after the route's own hooks (which may
// explain a body better, as stack files do); a new route gets them by declaring its schema.
import type {
  FastifyInstance,
  FastifyRequest,
  FastifySchemaCompiler,
  preValidationAsyncHookHandler,
} from "fastify";
import type { TSchema } from "typebox";
import { Compile } from "typebox/compile";
import { Value } from "typebox/value";
import { bodyCheck, TYPE_NAMES } from "../contract/check.ts";
import { ApiError, type FieldProblem, invalidField } from "../domain/errors.ts";
import { booleanQueryKeys, parseQueryBoolean } from "./compat.ts";

/** Defaults for schema nodes that state no bound of their own. */
export const DEFAULT_BOUNDS = {
  stringMaxLength: 4096,
  arrayMaxItems: 100,
  objectMaxProperties: 100,
  /** Integers fit a signed 32-bit column unless the schema says otherwise. */
  integerMinimum: -2147483648,
  integerMaximum: 2147483647,
} as const;

type Schema = Record<string, unknown>;

const isSchema = (v: unknown): v is Schema => typeof v === "object" && v !== null && !Array.isArray(v);

function typesOf(s: Schema): string[] {
  const t = s.type;
  return Array.isArray(t) ? (t as string[]) : typeof t === "string" ? [t] : [];
}

/** Adds the default bounds, in place, to every node of a route schema that has none. */
export function boundSchema(schema: unknown, seen = new Set<unknown>()): void {
  if (!isSchema(schema) || seen.has(schema)) return;
  seen.add(schema);
  const types = typesOf(schema);
  if (types.includes("string") && schema.maxLength === undefined && schema.enum === undefined)
    schema.maxLength = DEFAULT_BOUNDS.stringMaxLength;
  if (types.includes("array") && schema.maxItems === undefined)
    schema.maxItems = DEFAULT_BOUNDS.arrayMaxItems;
  if (types.includes("integer") || types.includes("number")) {
    if (schema.maximum === undefined && schema.exclusiveMaximum === undefined)
      schema.maximum = DEFAULT_BOUNDS.integerMaximum;
    if (schema.minimum === undefined && schema.exclusiveMinimum === undefined)
      schema.minimum = DEFAULT_BOUNDS.integerMinimum;
  }
  const open =
    isSchema(schema.additionalProperties) || isSchema(schema.patternProperties) || schema.type === "object";
  if (open && schema.maxProperties === undefined && !isSchema(schema.properties))
    schema.maxProperties = DEFAULT_BOUNDS.objectMaxProperties;
  for (const key of ["items", "additionalProperties", "not"]) boundSchema(schema[key], seen);
  for (const key of ["anyOf", "oneOf", "allOf"])
    if (Array.isArray(schema[key])) for (const s of schema[key] as unknown[]) boundSchema(s, seen);
  for (const key of ["properties", "patternProperties"])
    if (isSchema(schema[key])) for (const s of Object.values(schema[key] as Schema)) boundSchema(s, seen);
}

const NUMERIC_STRING = /^-?\d{1,20}$/;

function jsonType(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

/** Whether `v` has one of the schema's JSON types (a numeric string counts for an integer). */
function typeFits(s: Schema, v: unknown): boolean {
  const types = typesOf(s);
  if (types.length === 0) return true;
  const t = jsonType(v);
  if (types.includes(t)) return true;
  if (t === "integer" && types.includes("number")) return true;
  return (
    typeof v === "string" && (types.includes("integer") || types.includes("number")) && NUMERIC_STRING.test(v)
  );
}

function expected(s: Schema): string[] {
  if (Array.isArray(s.anyOf)) return (s.anyOf as Schema[]).flatMap(expected);
  return typesOf(s).map((t) => TYPE_NAMES[t] ?? t);
}

function fieldName(path: (string | number)[]): string {
  return path.reduce<string>(
    (acc, p) => (typeof p === "number" ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p),
    "",
  );
}

/**
 * Walks a JSON value along its schema and lists every value of the wrong JSON type. Numeric
 * strings where an integer is expected are converted in place (CONTRACT §12). `set` replaces the
 * value in its parent.
 */
function walk(
  s: unknown,
  v: unknown,
  path: (string | number)[],
  problems: FieldProblem[],
  set: (x: unknown) => void,
): void {
  if (!isSchema(s) || v === undefined) return;
  if (Array.isArray(s.anyOf)) {
    const branches = (s.anyOf as unknown[]).filter(isSchema);
    const exact = branches.find((b) => typesOf(b).includes(jsonType(v)) || typesOf(b).length === 0);
    const branch = exact ?? branches.find((b) => typeFits(b, v));
    if (!branch) {
      const names = [...new Set(branches.flatMap(expected))];
      problems.push({ field: fieldName(path) || "body", problem: `must be ${names.join(" or ")}` });
      return;
    }
    walk(branch, v, path, problems, set);
    return;
  }
  if (!typeFits(s, v)) {
    problems.push({ field: fieldName(path) || "body", problem: `must be ${expected(s).join(" or ")}` });
    return;
  }
  const types = typesOf(s);
  if (
    typeof v === "string" &&
    !types.includes("string") &&
    (types.includes("integer") || types.includes("number"))
  ) {
    set(Number(v));
    return;
  }
  if (Array.isArray(v)) {
    v.forEach((item, i) => {
      walk(s.items, item, [...path, i], problems, (x) => {
        v[i] = x;
      });
    });
    return;
  }
  if (isSchema(v)) {
    const props = isSchema(s.properties) ? (s.properties as Schema) : {};
    for (const [key, item] of Object.entries(v)) {
      const sub = key in props ? props[key] : s.additionalProperties;
      walk(sub, item, [...path, key], problems, (x) => {
        v[key] = x;
      });
    }
  }
}

/** The problems of a body's JSON types; numeric strings in integer fields are converted in place. */
export function checkBodyTypes(schema: unknown, body: unknown): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const holder = { body };
  walk(schema, body, [], problems, (x) => {
    holder.body = x;
  });
  return problems;
}

export function typeError(problems: FieldProblem[]): ApiError {
  const first = problems[0]!;
  const more = problems.length > 1 ? ` (and ${problems.length - 1} more)` : "";
  return new ApiError(
    "bad_request",
    "invalid_field",
    `Invalid body: ${first.field} ${first.problem}${more}.`,
    problems,
  );
}

/** Installs the input rules: bounds on every route schema, strict body types, query booleans. */
export function installInputRules(app: FastifyInstance): void {
  app.addHook("onRoute", (route) => {
    const schema = route.schema as Record<string, unknown> | undefined;
    if (!schema) return;
    for (const part of ["body", "querystring", "params"]) boundSchema(schema[part]);
    const booleans = booleanQueryKeys(schema.querystring);
    if (!schema.body && booleans.length === 0) return;
    const check: preValidationAsyncHookHandler = async (request) => {
      readQueryBooleans(request, booleans);
      strictBody(request);
    };
    const own = route.preValidation;
    route.preValidation = [...(own === undefined ? [] : Array.isArray(own) ? own : [own]), check];
  });
}

function readQueryBooleans(request: FastifyRequest, keys: readonly string[]): void {
  const query = request.query as Record<string, unknown>;
  for (const key of keys) {
    const raw = query[key];
    if (raw === undefined || typeof raw === "boolean") continue;
    const values = Array.isArray(raw) ? raw : [raw];
    const parsed = values.map((v) => (typeof v === "string" ? parseQueryBoolean(v) : undefined));
    if (parsed.some((v) => v === undefined)) {
      throw invalidField(key, "must be a boolean: true or false (also True/False, 1/0, yes/no)");
    }
    query[key] = parsed.at(-1);
  }
}

function strictBody(request: FastifyRequest): void {
  const schema = (request.routeOptions.schema as { body?: unknown } | undefined)?.body;
  if (!schema || request.body === undefined) return;
  const problems = checkBodyTypes(schema, request.body);
  if (problems.length) throw typeError(problems);
}

/**
 * The validator of routes whose body is a contract body with one compiled check shared with other
 * callers (contract/check.ts: Create and Update service, which stack items go through too): the
 * body is checked by that very check, so both refuse the same bodies with the same problems. Path
 * and query parameters are compiled with TypeBox too, converted as Fastify's own validator would.
 */
export const contractValidator: FastifySchemaCompiler<TSchema> = ({ schema, httpPart }) => {
  if (httpPart === "body") {
    const check = bodyCheck(schema);
    return (value: unknown) => {
      const problems = check.problems(value);
      return problems.length ? { error: typeError(problems) } : { value };
    };
  }
  const compiled = Compile(schema);
  const where = httpPart === "querystring" ? "query parameter" : (httpPart ?? "request");
  return (value: unknown) => {
    const converted = Value.Convert(schema, value);
    if (compiled.Check(converted)) return { value: converted };
    const first = [...compiled.Errors(converted)][0];
    const field = first?.instancePath.split("/").filter(Boolean).join(".") || where;
    return {
      error: invalidField(field, `${first?.message ?? "is invalid"} (${where})`),
    };
  };
};
