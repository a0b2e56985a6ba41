// A check of the answers against their route's response schema, switched on by the tests
// (test/support/harness.ts). A response schema also drives Fastify's serializer, which drops
// fields it does not list and coerces values to the listed type; answer schemas are open
// (src/contract/common.ts) so nothing is dropped, and this check makes every test fail when a
// listed field's type is not what the handler really sends, instead of letting the serializer
// silently turn it into something else.
import type { FastifyInstance } from "fastify";
import type { TSchema } from "typebox";
import { Value } from "typebox/value";

/** The schema of the answer with this status code, as Fastify picks it (code, `2xx`, `default`). */
export function answerSchema(responses: unknown, status: number): TSchema | undefined {
  if (typeof responses !== "object" || responses === null) return undefined;
  const byCode = responses as Record<string, TSchema | undefined>;
  return byCode[String(status)] ?? byCode[`${String(status)[0]}xx`] ?? byCode.default;
}

export function installAnswerCheck(app: FastifyInstance): void {
  app.addHook("preSerialization", async (request, reply, payload) => {
    const schema = answerSchema(request.routeOptions.schema?.response, reply.statusCode);
    if (schema === undefined || Value.Check(schema, payload)) return payload;
    const problems = [...Value.Errors(schema, payload)]
      .slice(0, 5)
      .map((e) => `${e.instancePath || "/"} ${e.message}`);
    const message = `the ${reply.statusCode} answer of ${request.method} ${request.routeOptions.url} does not match its schema: ${problems.join("; ")}`;
    request.log.error(message);
    throw new Error(message);
  });
}
