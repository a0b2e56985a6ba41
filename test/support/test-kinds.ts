// An action kind and a route that only tests register: a "widget" whose "work" operation is a
// configurable number of steps, so the action engine can be exercised without engines.
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { type Static, Type } from "typebox";
import type { ActionEngine } from "../../src/actions/engine.ts";
import { namespaceOf } from "../../src/api/namespaces.ts";
import { callMeta } from "../../src/api/recorder.ts";
import type { IdentityService } from "../../src/identity/service.ts";
import type { Store } from "../../src/store/store.ts";

/** The most steps a widget can be asked for (the route refuses more). */
export const MAX_STEPS = 30;

export const WorkParams = Type.Object({
  steps: Type.Integer({ minimum: 0, maximum: MAX_STEPS }),
  stepMs: Type.Integer({ minimum: 0, maximum: 60_000 }),
  /** 1-based step that throws. */
  failAt: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_STEPS })),
  /** 1-based step that never ends (until its timeout). */
  hangAt: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_STEPS })),
  stepTimeoutMs: Type.Optional(Type.Integer({ minimum: 1 })),
});
export type WorkParams = Static<typeof WorkParams>;

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(t);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

/** Steps of the kind are created up to a maximum; `params.steps` decides how many do work. */
export function registerWidgetKind(actions: ActionEngine, maxSteps = MAX_STEPS): void {
  actions.register<WorkParams>({
    kind: "test.widget.work",
    name: "Widget Work",
    params: WorkParams,
    steps: Array.from({ length: maxSteps }, (_, i) => ({
      name: `step ${i + 1}`,
      timeoutMs: 1500,
      async run(ctx) {
        if (i >= ctx.params.steps) return;
        await ctx.log(`step ${i + 1} begins`);
        if (ctx.params.failAt === i + 1) throw new Error(`widget broke at step ${i + 1}`);
        if (ctx.params.hangAt === i + 1) await pause(1e9, ctx.signal);
        await pause(ctx.params.stepMs, ctx.signal);
        await ctx.log(`step ${i + 1} done`);
      },
    })),
  });
}

export function widgetRoutes(deps: { actions: ActionEngine; identity: IdentityService; store: Store }) {
  return (untyped: FastifyInstance) => {
    const app = untyped.withTypeProvider<TypeBoxTypeProvider>();
    for (const url of ["/api/app/v1/widget/:id/work/", "/api/app/v1/:namespace/widget/:id/work/"]) {
      app.post(
        url,
        {
          config: { access: "namespace" },
          schema: {
            hide: true,
            params: Type.Object({ id: Type.String(), namespace: Type.Optional(Type.String()) }),
            response: {
              202: Type.Object({ object: Type.String(), action: Type.String(), state: Type.String() }),
            },
            body: WorkParams,
          },
        },
        async (req, reply) => {
          const ns = namespaceOf(req);
          const object = `/api/app/v1/${ns}/widget/${req.params.id}/`;
          req.audit.object = object;
          const action = await deps.store.transaction((tx) =>
            deps.actions.enqueue(tx, {
              uuid: req.actionUuid,
              kind: "test.widget.work",
              params: req.body,
              namespace: ns,
              object,
              meta: callMeta(req),
            }),
          );
          req.audit.recorded = true;
          return reply.status(202).send({ object, action: action.uuid, state: action.state });
        },
      );
    }
  };
}
