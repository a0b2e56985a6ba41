// `service.rollback` (issue 29): the service goes back to one of its kept revisions. Its prepare,
// in the transaction that records the action, gives the service that revision's definition and
// number (ServiceManager.restoreRevision); its step is a redeploy with it, so it tells the truth
// as a redeploy does (Success once every container runs it and is healthy or has stayed up;
// Failed with the reason otherwise, and a rolling strategy's own rollback when a batch fails); a
// cancel and a retry behave as a redeploy's. The revision is fixed when the call is made: a retry
// goes to the same one.
import type { ActionKind } from "../../actions/types.ts";
import { ServiceRollbackParams } from "../../contract/action-params.ts";
import { notFound } from "../../domain/errors.ts";
import { assertAllowed, SERVICE_OPERATIONS, type ServiceState } from "../../domain/states.ts";
import type { RevisionRow } from "../../store/revisions.ts";
import type { ServiceRow } from "../../store/services.ts";
import type { Store } from "../../store/store.ts";
import type { Orchestrator } from "../services.ts";

export interface RollbackDeps {
  store: Store;
  orchestrator: Orchestrator;
  /** Gives the service the revision's definition. */
  restore(tx: Store, s: ServiceRow, rev: RevisionRow): Promise<ServiceRow>;
}

export function rollbackKind(d: RollbackDeps): ActionKind<never> {
  const k: ActionKind<ServiceRollbackParams> = {
    kind: "service.rollback",
    name: "Service Rollback",
    params: ServiceRollbackParams,
    prepare: async (tx, { service, revision }) => {
      const s = await tx.services.findService(service);
      if (!s) throw notFound("service");
      assertAllowed(SERVICE_OPERATIONS, `service ${s.name}`, s.state as ServiceState, "rollback");
      const rev = await tx.services.revisions.find(s.uuid, revision);
      if (!rev) throw notFound(`revision ${revision} of service ${s.name} (it is no longer kept)`);
      await d.orchestrator.beginOperation(tx, await d.restore(tx, s, rev), "Redeploying");
    },
    steps: [
      {
        name: "rollback",
        timeoutMs: 10 * 60_000,
        run: async (ctx) => {
          const s = await d.store.services.findService(ctx.params.service);
          if (!s) throw new Error("the service no longer exists");
          await ctx.log(`Rolling ${s.name} back to revision ${ctx.params.revision}`);
          await d.orchestrator.runOperation("redeploy", s.uuid, ctx, {
            reuseVolumes: ctx.params.reuse_volumes !== false,
          });
        },
      },
    ],
    finish: (ctx, outcome) => d.orchestrator.finishOperation("redeploy", ctx.params.service, outcome),
  };
  return k as unknown as ActionKind<never>;
}
