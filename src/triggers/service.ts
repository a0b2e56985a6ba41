// Service triggers: a long random URL that a CI system calls, without credentials, to redeploy a
// service or scale it up by one. The URL's secret part is derived from Berth's secret key and the
// trigger's uuid, so the trigger can show its URL again while the store keeps only a hash of it.
import { createHash, randomUUID, timingSafeEqual } from "node:crypto";
import type { ActionEngine } from "../actions/engine.ts";
import type { CallMeta } from "../actions/types.ts";
import type { TriggerOperation } from "../contract/trigger.ts";
import { conflict, VersionConflict } from "../domain/errors.ts";
import { MAX_CONTAINERS } from "../domain/service-rules.ts";
import type { Clock } from "../domain/time.ts";
import { serviceUri } from "../domain/uri.ts";
import { creatorMayUse } from "../identity/creators.ts";
import type { SecretBox } from "../identity/secret-box.ts";
import type { TriggerRow } from "../store/registries.ts";
import type { ServiceRow } from "../store/services.ts";
import type { ActionRow, Store } from "../store/store.ts";

export { TRIGGER_OPERATIONS, type TriggerOperation } from "../contract/trigger.ts";

export interface TriggerDeps {
  store: Store;
  clock: Clock;
  actions: ActionEngine;
  box: SecretBox;
  publicUrl: string;
}

export interface TriggerView {
  uuid: string;
  name: string;
  operation: string;
  url: string;
  resource_uri: string;
}

export const triggerUri = (t: Pick<TriggerRow, "namespace" | "service_uuid" | "uuid">) =>
  `${serviceUri({ namespace: t.namespace, uuid: t.service_uuid })}trigger/${t.uuid}/`;

const sha256 = (text: string) => createHash("sha256").update(text).digest();

export class TriggerService {
  constructor(private readonly d: TriggerDeps) {}

  private secretOf(uuid: string): string {
    return this.d.box.derive(`berth-trigger:${uuid}`);
  }

  view(t: TriggerRow): TriggerView {
    const uri = triggerUri(t);
    return {
      uuid: t.uuid,
      name: t.name,
      operation: t.operation,
      // The query keeps the secret out of logs: request URLs are logged with token= redacted.
      url: `${this.d.publicUrl}${uri}call/?token=${this.secretOf(t.uuid)}`,
      resource_uri: uri,
    };
  }

  async create(
    service: ServiceRow,
    body: { name?: string; operation?: TriggerOperation },
    createdBy: { id: number; username: string },
  ): Promise<TriggerRow> {
    const operation = body.operation ?? "REDEPLOY";
    const uuid = randomUUID();
    const now = this.d.clock.now();
    return this.d.store.transaction(async (tx) => {
      await tx.quotas.enforce(service.namespace, "triggers", 1, { now });
      return tx.registries.insertTrigger({
        uuid,
        namespace: service.namespace,
        service_uuid: service.uuid,
        name: body.name?.trim() || operation.toLowerCase(),
        operation,
        secret_hash: sha256(this.secretOf(uuid)).toString("hex"),
        created_by: createdBy.username,
        creator_id: createdBy.id,
        created: now,
      });
    });
  }

  async find(service: ServiceRow, uuid: string): Promise<TriggerRow | undefined> {
    const t = await this.d.store.registries.findTrigger(uuid);
    return t && t.service_uuid === service.uuid ? t : undefined;
  }

  async list(service: ServiceRow, page: { limit: number; offset: number }) {
    return this.d.store.registries.listTriggers(service.uuid, page);
  }

  async remove(t: TriggerRow): Promise<void> {
    await this.d.store.registries.deleteTrigger(t.uuid);
  }

  /**
   * Starts the trigger's operation as an action on its service. Undefined when the URL names no
   * trigger: an unknown or deleted one, another service's, or a wrong secret (all answer 404).
   */
  async call(input: {
    serviceUuid: string;
    triggerUuid: string;
    /** The namespace segment of the called path, when it has one. */
    namespace?: string;
    token: string | undefined;
    meta: Omit<CallMeta, "user" | "isUserAction">;
  }): Promise<ActionRow | undefined> {
    const t = await this.d.store.registries.findTrigger(input.triggerUuid);
    if (!t || t.service_uuid !== input.serviceUuid || !input.token) return undefined;
    if (input.namespace !== undefined && input.namespace !== t.namespace) return undefined;
    const expected = Buffer.from(t.secret_hash, "hex");
    const given = sha256(input.token);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return undefined;
    // A trigger acts only while its creator may use its namespace (not removed from the
    // organization, not deactivated): otherwise its URL is as dead as a deleted trigger's.
    if (!(await creatorMayUse(this.d.store, t.creator_id, t.namespace))) return undefined;
    for (;;) {
      try {
        return await this.start(t, { ...input.meta, user: t.created_by, isUserAction: false });
      } catch (err) {
        if (!(err instanceof VersionConflict)) throw err;
      }
    }
  }

  private async start(t: TriggerRow, meta: CallMeta): Promise<ActionRow | undefined> {
    return this.d.store.transaction(async (tx) => {
      const s = await tx.services.findService(t.service_uuid);
      if (!s) return undefined;
      let kind = "service.redeploy";
      let params: { service: string; reuse_volumes?: boolean } = { service: s.uuid, reuse_volumes: true };
      if (t.operation === "SCALEUP") {
        if (s.target_num_containers >= MAX_CONTAINERS) {
          throw conflict(
            `service ${s.name} already has ${MAX_CONTAINERS} containers, the most a service may have`,
          );
        }
        await tx.quotas.enforce(s.namespace, "containers", 1, { now: this.d.clock.now() });
        // In the same transaction as the action: a refused scale leaves the target as it was.
        await tx.services.updateService(s, { target_num_containers: s.target_num_containers + 1 });
        kind = "service.scale";
        params = { service: s.uuid };
      }
      const a = await this.d.actions.enqueue(tx, {
        kind,
        params,
        namespace: t.namespace,
        object: serviceUri(s),
        meta,
      });
      await tx.actions.appendActionLog(
        a.uuid,
        this.d.clock.now(),
        `Started by trigger "${t.name}" (${t.uuid}): ${t.operation === "SCALEUP" ? `scale up to ${s.target_num_containers + 1} containers` : "redeploy"}`,
      );
      return a;
    });
  }
}
