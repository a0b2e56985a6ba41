// How answers become JSON. Fastify compiles each response schema with fast-json-stringify, which is
// quick for closed objects but, for an open one (`additionalProperties: true`, our answer objects:
// contract/common.ts), walks every key at run time after the listed ones: 2.5× slower than
// JSON.stringify on a service, 9× on a page of containers. A schema that drops nothing (every object
// in it open, or a map) gets JSON.stringify instead: the same fields, since fast-json-stringify
// would drop none either, and the same types, since every test checks each answer against its
// schema (api/answers.ts). Schemas with a closed object keep fast-json-stringify, which drops
// unlisted fields on purpose. A list envelope carries the JSON of its objects, already made when
// its size was bounded (api/lists.ts), so a page is serialized once.
import type { FastifyInstance } from "fastify";
import { encodedOf } from "../domain/json.ts";

/**
 * The serializer of answers whose schemas drop nothing: JSON already made for one is reused, bytes
 * already encoded are sent as they are (Fastify's reply sends a Buffer payload unchanged).
 */
export const serializeOpen = encodedOf as (value: unknown) => string;

type Schema = Record<string, unknown>;

const isSchema = (s: unknown): s is Schema => typeof s === "object" && s !== null && !Array.isArray(s);

/**
 * Whether fast-json-stringify would serialize every field of any value this schema accepts: every
 * object in it is open (or a map of anything), through arrays, unions and nested objects. A schema
 * it cannot read (a `$ref`) counts as closed.
 */
export function dropsNothing(schema: unknown): boolean {
  if (!isSchema(schema)) return schema === true || schema === undefined;
  // Shapes this check does not follow count as closed.
  if (["$ref", "content", "not", "if", "dependentSchemas"].some((k) => schema[k] !== undefined)) return false;
  for (const key of ["anyOf", "oneOf", "allOf"] as const) {
    const members = schema[key];
    if (Array.isArray(members) && !members.every(dropsNothing)) return false;
  }
  const items = schema.items;
  if (Array.isArray(items) ? !items.every(dropsNothing) : items !== undefined && !dropsNothing(items))
    return false;
  const properties = isSchema(schema.properties) ? Object.values(schema.properties) : [];
  const patterns = isSchema(schema.patternProperties) ? schema.patternProperties : {};
  const object = schema.type === "object" || (Array.isArray(schema.type) && schema.type.includes("object"));
  if (object || properties.length > 0) {
    const extra = schema.additionalProperties;
    const open = extra === true || (isSchema(extra) && dropsNothing(extra));
    const anyKey = properties.length === 0 && Object.keys(patterns).some((p) => p === "^.*$" || p === ".*");
    if (!open && !anyKey) return false;
  }
  return properties.every(dropsNothing) && Object.values(patterns).every(dropsNothing);
}

/**
 * Routes whose answer schemas all drop nothing are serialized with JSON.stringify (installed before
 * any route). The schemas still document the answers and the tests still check them.
 */
export function installOpenSerializer(app: FastifyInstance): void {
  app.addHook("onRoute", (route) => {
    const responses = route.schema?.response;
    if (!isSchema(responses) || route.serializerCompiler) return;
    if (Object.values(responses).every(dropsNothing)) route.serializerCompiler = () => serializeOpen;
  });
}
