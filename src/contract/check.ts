// Compiled checks of request bodies against their contract schemas, with problems named by field.
//
// A schema is compiled once (TypeBox `Compile`) and the same check serves every path a body can
// arrive by: the route's validator (api/input.ts `contractValidator`: POST and PATCH /service/)
// and the stack items that become service bodies (domain/service-spec.ts `parseCreate`,
// `parseUpdate`). So what /service/ refuses, a stack refuses too, with the same sentence.
//
// The check is strict about JSON types (no coercion): numeric strings where integers go are
// converted before it, by the route's input step (api/input.ts) or by the stack-file conversion
// (domain/stackfile.ts), as CONTRACT §12 promises.
import type { Static, TSchema } from "typebox";
import { Compile } from "typebox/compile";
import type { FieldProblem } from "../domain/errors.ts";
import { ServiceCreateBody, ServiceUpdateBody } from "./service.ts";

interface SchemaError {
  keyword: string;
  schemaPath: string;
  instancePath: string;
  params: Record<string, unknown>;
  message: string;
}

export interface BodyCheck<T> {
  readonly schema: TSchema;
  /** Whether the value fits the schema. */
  fits(value: unknown): value is T;
  /** Every problem of the value, one per field, named as CONTRACT §6 names fields (`container_ports[0].inner_port`). */
  problems(value: unknown): FieldProblem[];
}

const compiled = new WeakMap<TSchema, BodyCheck<unknown>>();

/** The one compiled check of a schema (compiled on first use, then shared). */
export function bodyCheck<T extends TSchema>(schema: T): BodyCheck<Static<T>> {
  const known = compiled.get(schema);
  if (known) return known as BodyCheck<Static<T>>;
  const validator = Compile(schema);
  const check: BodyCheck<Static<T>> = {
    schema,
    fits: (value): value is Static<T> => validator.Check(value),
    problems: (value) =>
      validator.Check(value) ? [] : problemsOf(schema, validator.Errors(value) as SchemaError[]),
  };
  compiled.set(schema, check as BodyCheck<unknown>);
  return check;
}

/** Create service and Update service, compiled at start: the route and the stacks share them. */
export const serviceCreateCheck = bodyCheck(ServiceCreateBody);
export const serviceUpdateCheck = bodyCheck(ServiceUpdateBody);

// ---- problems ------------------------------------------------------------------------------------

/** `/container_ports/0/inner_port` → `container_ports[0].inner_port` */
export function fieldPath(instancePath: string, extra?: string): string {
  const parts = instancePath.split("/").filter(Boolean);
  if (extra) parts.push(extra);
  return parts
    .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"))
    .reduce((acc, p) => (/^\d+$/.test(p) ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), "");
}

/** JSON types as a problem names them ("must be a list"); api/input.ts says them the same way. */
export const TYPE_NAMES: Record<string, string> = {
  string: "a string",
  integer: "an integer",
  number: "a number",
  boolean: "true or false",
  array: "a list",
  object: "an object",
  null: "null",
};

/** The schema node a `schemaPath` (`#/properties/a/items/anyOf/1`) points at. */
function nodeAt(schema: TSchema, schemaPath: string): Record<string, unknown> | undefined {
  let node: unknown = schema;
  for (const raw of schemaPath.replace(/^#\/?/, "").split("/").filter(Boolean)) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (typeof node !== "object" || node === null) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return typeof node === "object" && node !== null ? (node as Record<string, unknown>) : undefined;
}

/** "an integer between 1 and 65535", "at most 100", … from the node's own bounds. */
function numberProblem(node: Record<string, unknown> | undefined, fallback: string): string {
  if (!node) return fallback;
  const kind = node.type === "integer" ? "an integer" : "a number";
  const { minimum: min, maximum: max } = node as { minimum?: number; maximum?: number };
  if (min !== undefined && max !== undefined) return `must be ${kind} between ${min} and ${max}`;
  if (max !== undefined) return `must be ${kind} of at most ${max}`;
  if (min !== undefined) return `must be ${kind} of at least ${min}`;
  return fallback;
}

function problemOf(schema: TSchema, e: SchemaError): FieldProblem[] {
  const field = fieldPath(e.instancePath) || "body";
  const node = nodeAt(schema, e.schemaPath);
  switch (e.keyword) {
    case "required":
      return ((e.params.requiredProperties as string[] | undefined) ?? []).map((name) => ({
        field: fieldPath(e.instancePath, name),
        problem: "is required",
      }));
    case "additionalProperties":
      return ((e.params.additionalProperties as string[] | undefined) ?? []).map((name) => ({
        field: fieldPath(e.instancePath, name),
        problem: "is not a known field",
      }));
    case "type":
      return [{ field, problem: `must be ${TYPE_NAMES[String(e.params.type)] ?? String(e.params.type)}` }];
    case "enum":
      return [{ field, problem: `must be one of ${(e.params.allowedValues as unknown[]).join(", ")}` }];
    case "maxLength":
      return [{ field, problem: `must be at most ${String(e.params.limit)} characters` }];
    case "minLength":
      return [
        {
          field,
          problem:
            e.params.limit === 1
              ? "cannot be empty"
              : `must be at least ${String(e.params.limit)} characters`,
        },
      ];
    case "maxItems":
      return [{ field, problem: `must have at most ${String(e.params.limit)} items` }];
    case "maxProperties":
      return [{ field, problem: `must have at most ${String(e.params.limit)} keys` }];
    case "minimum":
    case "maximum":
      return [{ field, problem: numberProblem(node, `must be ${e.message.replace(/^must be /, "")}`) }];
    default:
      return [{ field, problem: e.message }];
  }
}

/**
 * One problem per field. A union (`null` or an integer) that nothing fits reports each branch: the
 * bound a value broke says more than "must be null", and types alone say "must be null or an integer".
 */
function problemsOf(schema: TSchema, errors: SchemaError[]): FieldProblem[] {
  const byField = new Map<string, FieldProblem[]>();
  const typesAt = new Map<string, string[]>();
  for (const e of errors) {
    // `additionalProperties: false` also reports "schema is false" at the key itself.
    if (e.keyword === "boolean" || e.keyword === "anyOf") continue;
    if (e.keyword === "type" && /\/anyOf\/\d+$/.test(e.schemaPath)) {
      const field = fieldPath(e.instancePath) || "body";
      typesAt.set(field, [...(typesAt.get(field) ?? []), TYPE_NAMES[String(e.params.type)] ?? ""]);
      continue;
    }
    for (const p of problemOf(schema, e)) byField.set(p.field, [...(byField.get(p.field) ?? []), p]);
  }
  const inside = (field: string) =>
    [...byField.keys()].some((f) => f === field || f.startsWith(`${field}.`) || f.startsWith(`${field}[`));
  for (const [field, types] of typesAt) {
    // A branch that fits the type but breaks a rule inside (`{name: ""}` as a tag) said it better.
    if (!inside(field))
      byField.set(field, [{ field, problem: `must be ${[...new Set(types)].join(" or ")}` }]);
  }
  return [...byField.values()].map((list) => list[0]!);
}
