// Serializing answers (api/serialize.ts): a route whose answer schemas drop nothing is sent with
// JSON.stringify, which keeps every field exactly as fast-json-stringify would for open objects; a
// schema with a closed object keeps fast-json-stringify and its dropping of unlisted fields; a list
// page is serialized once, from the JSON made when its size was bounded. The answers of services,
// containers, nodes, stacks and actions, and their lists, must stay on the fast path: a closed
// object inside one of them would make every GET walk its keys again.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import Fastify, { type FastifyRequest } from "fastify";
import { Type } from "typebox";
import { envelope, listSchema } from "../../src/api/lists.ts";
import { dropsNothing, installOpenSerializer, serializeOpen } from "../../src/api/serialize.ts";
import { ActionView } from "../../src/contract/action.ts";
import { ContainerView } from "../../src/contract/container.ts";
import { NodeClusterView, NodeView } from "../../src/contract/nodes.ts";
import { ServiceView } from "../../src/contract/service.ts";
import { StackView } from "../../src/contract/stack.ts";

describe("answers serialized with JSON.stringify where the schema drops nothing", () => {
  test("the answers of the platform's resources and their lists drop nothing", () => {
    for (const [name, schema] of Object.entries({
      ServiceView,
      ContainerView,
      NodeView,
      NodeClusterView,
      StackView,
      ActionView,
    })) {
      assert.ok(dropsNothing(schema), `${name} drops nothing`);
      assert.ok(dropsNothing(listSchema(schema)), `a list of ${name} drops nothing`);
    }
  });

  test("a closed object anywhere, a $ref or a wrapped answer counts as closed", () => {
    const open = { type: "object", properties: { a: { type: "string" } }, additionalProperties: true };
    const closed = { type: "object", properties: { a: { type: "string" } } };
    assert.equal(dropsNothing(open), true);
    assert.equal(dropsNothing(closed), false);
    assert.equal(dropsNothing({ ...open, properties: { a: { type: "array", items: closed } } }), false);
    assert.equal(dropsNothing({ anyOf: [open, closed] }), false);
    assert.equal(dropsNothing({ anyOf: [open, { type: "null" }] }), true);
    assert.equal(dropsNothing(Type.Record(Type.String(), Type.String())), true);
    assert.equal(dropsNothing({ $ref: "#/x" }), false);
    assert.equal(dropsNothing({ content: { "application/json": { schema: open } } }), false);
  });

  test("an open route keeps every field, a closed one drops what it does not list", async () => {
    const app = Fastify({ logger: false });
    installOpenSerializer(app);
    const body = { a: "1", secret: "s", nested: { b: 2, extra: true } };
    const Nested = Type.Object({ b: Type.Integer() }, { additionalProperties: true });
    app.get(
      "/open",
      {
        schema: {
          response: {
            200: Type.Object({ a: Type.String(), nested: Nested }, { additionalProperties: true }),
          },
        },
      },
      async () => body,
    );
    app.get(
      "/closed",
      { schema: { response: { 200: Type.Object({ a: Type.String(), nested: Nested }) } } },
      async () => body,
    );
    try {
      assert.deepEqual((await app.inject({ url: "/open" })).json(), body);
      assert.deepEqual((await app.inject({ url: "/closed" })).json(), {
        a: "1",
        nested: { b: 2, extra: true },
      });
    } finally {
      await app.close();
    }
  });

  test("a page is sent as the JSON made when its size was bounded, and it cannot change after", () => {
    const objects = [
      { n: 1, s: "é\u2028" },
      { n: 2, nested: { list: [1, null] } },
    ];
    const page = envelope({ url: "/api/x/?limit=2" } as FastifyRequest, { limit: 2, offset: 0 }, 5, objects);
    const sent = serializeOpen(page);
    assert.deepEqual(JSON.parse(sent), JSON.parse(JSON.stringify(page)));
    assert.equal(sent, JSON.stringify({ meta: page.meta, objects }));
    assert.throws(() => {
      (page as { objects: unknown[] }).objects = [];
    }, TypeError);
    assert.equal(serializeOpen({ plain: true }), '{"plain":true}');
  });
});
