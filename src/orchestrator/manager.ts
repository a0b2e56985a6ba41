// Service definitions: create and update (validation in domain/service-spec.ts), the service key
// of role global, and the dry run of a placement. The wire views of services and containers are
// views.ts; the engine spec of a container is built by engine-specs.ts.
import { randomUUID } from "node:crypto";
import type { ServiceCreateBody, ServiceUpdateBody } from "../contract/service.ts";
import { ApiError, conflict, type FieldProblem } from "../domain/errors.ts";
import { assertEnvWithin, limitOf } from "../domain/quotas.ts";
import { hostsOfDefinition } from "../domain/router-config.ts";
import type { ServiceSpec } from "../domain/service.ts";
import type { SpecContext } from "../domain/service-rules.ts";
import { applyUpdate, normalizeCreate } from "../domain/service-spec.ts";
import { assertAllowed, SERVICE_OPERATIONS, type ServiceState } from "../domain/states.ts";
import type { Clock } from "../domain/time.ts";
import { lastSegment, nodeUri, serviceUri } from "../domain/uri.ts";
import type { NamespacePolicies } from "../identity/privileges.ts";
import type { SecretBox } from "../identity/secret-box.ts";
import type { IdentityService, Principal } from "../identity/service.ts";
import { decodeSpec, noteSpec, specOf } from "../store/codec.ts";
import type { RevisionRow } from "../store/revisions.ts";
import type { ContainerRow, ServiceRow } from "../store/services.ts";
import type { Store, UserRow } from "../store/store.ts";
import { claimHosts, refuseSharedDomains } from "./host-claims.ts";
import type { Orchestrator } from "./services.ts";

export interface ManagerDeps {
  store: Store;
  clock: Clock;
  identity: IdentityService;
  /** The namespace's privileges: a definition may reach its node only as far as they allow. */
  policies: NamespacePolicies;
  box: SecretBox;
  orchestrator: Orchestrator;
  /** Definitions kept per service as revisions (store/revisions.ts); 10 by default. */
  revisionsKept?: number;
}

/** What gave a service a definition, and the call's action when there was one. */
export interface DefinitionCause {
  cause?: string;
  actionUuid?: string;
  /** Records the call's action in the write's transaction (api/recorder.ts, recordWithWrite). */
  record?: (tx: Store) => Promise<void>;
}

const live = (c: ContainerRow) => c.state !== "Terminated";

export class ServiceManager {
  constructor(private readonly d: ManagerDeps) {}

  private get store() {
    return this.d.store;
  }

  /**
   * Resolves a service reference (resource URI with or without namespace, or a uuid) in a
   * namespace, among the services a body names (`referencesOf`): what a definition costs to check
   * does not grow with its namespace.
   */
  async resolver(
    namespace: string,
    body: Parameters<typeof referencesOf>[0],
    store: Store = this.store,
  ): Promise<SpecContext["resolveService"]> {
    const refs = referencesOf(body);
    const services = refs.length
      ? (await store.services.servicesByUuid(refs)).filter(
          (x) => x.namespace === namespace && x.state !== "Terminated",
        )
      : [];
    return (ref: string) => {
      const id = lastSegment(ref);
      const s = services.find((x) => x.uuid === id);
      return s ? { uuid: s.uuid, name: s.name } : undefined;
    };
  }

  // ---- create and update ----------------------------------------------------------------------------

  /**
   * The options of a definition the namespace is not allowed (domain/privileges.ts), named by
   * field: every one of a new service, those an update of `before` introduces or changes.
   */
  privilegeProblems(namespace: string, spec: ServiceSpec, before?: ServiceSpec): Promise<FieldProblem[]> {
    return this.d.policies.definitionProblems(namespace, spec, before);
  }

  async create(
    namespace: string,
    principal: Principal,
    body: ServiceCreateBody,
    opts: {
      stackUuid?: string;
      /** The caller's transaction: a stack creates all of its services or none. */
      tx?: Store;
      /** The call's action (the revision's `action`). */
      actionUuid?: string;
      /** Records the call's action in the insert's transaction, once the service's URI is known. */
      record?: (tx: Store, row: ServiceRow) => Promise<void>;
    } = {},
  ) {
    const store = opts.tx ?? this.store;
    const uuid = randomUUID();
    const n = normalizeCreate(body, {
      resolveService: await this.resolver(namespace, body, store),
      serviceUuid: uuid,
    });
    // Whoever acts in the namespace (a member's key, a service key, a stack) gets its allowance.
    await this.d.policies.checkDefinition(namespace, n.spec);
    if (await store.services.findLiveServiceByName(namespace, n.name)) {
      throw conflict(`A service named "${n.name}" already exists in ${namespace}.`, "name_taken");
    }
    const now = this.d.clock.now();
    return store.transaction(async (tx) => {
      // Counted in the transaction that inserts (a stack's services count one after another).
      await this.assertEnvWithin(tx, namespace, n.spec.container_envvars);
      await tx.quotas.enforce(namespace, "services", 1, { now });
      await tx.quotas.enforce(namespace, "containers", n.target_num_containers, { now });
      await claimHosts(tx, namespace, hostsOfDefinition(n.spec), now);
      await refuseSharedDomains(tx, namespace, uuid, n.spec.domains ?? []);
      const row = await tx.services.insertService({
        uuid,
        namespace,
        name: n.name,
        nickname: n.nickname,
        state: "Not running",
        stack_uuid: opts.stackUuid ?? null,
        target_num_containers: n.target_num_containers,
        spec: JSON.stringify(n.spec),
        spec_version: 1,
        auth_secret: n.spec.roles.includes("global")
          ? await this.serviceKey(principal.user, namespace, uuid, tx)
          : null,
        deployed_at: null,
        started_at: null,
        stopped_at: null,
        destroyed_at: null,
        created: now,
      });
      await this.recordRevision(tx, row, { cause: "create", actionUuid: opts.actionUuid });
      await opts.record?.(tx, row);
      return row;
    });
  }

  /** Records the definition a service row has now as its revision (store/revisions.ts). */
  private recordRevision(tx: Store, row: ServiceRow, cause: DefinitionCause): Promise<void> {
    return tx.services.revisions.record(row, {
      created: this.d.clock.now(),
      cause: cause.cause ?? "update",
      actionUuid: cause.actionUuid,
      keep: this.d.revisionsKept ?? 10,
    });
  }

  /**
   * The number a new definition of the service takes: after the highest ever given (a rollback
   * moved spec_version back; the revisions after it keep their numbers).
   */
  private async nextNumber(store: Store, cur: ServiceRow): Promise<number> {
    return Math.max(cur.spec_version, await store.services.revisions.latestNumber(cur.uuid)) + 1;
  }

  /** Refuses a service environment over the namespace's limits (variables, bytes). */
  private async assertEnvWithin(
    store: Store,
    namespace: string,
    envvars: readonly { key: string; value: string }[],
  ): Promise<void> {
    const { limits, exempt } = await store.quotas.settings(namespace);
    assertEnvWithin(namespace, envvars, {
      count: limitOf("envvars_per_service", limits, { exempt }),
      bytes: limitOf("env_bytes_per_service", limits, { exempt }),
    });
  }

  /** The PLATFORM_AUTH of role global: a key of the creating user, limited to the namespace, sealed at rest. */
  private async serviceKey(
    user: UserRow,
    namespace: string,
    serviceUuid: string,
    tx?: Store,
  ): Promise<string> {
    // Inside a transaction the key must be written through it: on SQLite a write outside it
    // would wait for the transaction's connection forever.
    const { key } = await this.d.identity.createApiKey(user, {
      label: `service ${serviceUuid}`,
      namespaceLimit: namespace,
      serviceUuid,
      tx,
    });
    const header = `Basic ${Buffer.from(`${user.username}:${key}`).toString("base64")}`;
    return this.d.box.seal(header);
  }

  /**
   * Replaces the PLATFORM_AUTH key of a role-global service (someone who could read it lost
   * access): in one transaction the old key is revoked and a new key of `owner`, limited to the
   * namespace, is sealed in its place; without an owner the key is only revoked. The definition
   * version moves on, so the service and its containers show `synchronized: false` until a
   * redeploy gives the containers the new key (the old one, still in their environment, is
   * refused from now on). False when the service has no key or is terminated.
   */
  async rotateServiceKey(serviceUuid: string, owner: UserRow | undefined): Promise<boolean> {
    return this.store.retrying(async (tx) => {
      const cur = await tx.services.findService(serviceUuid);
      if (!cur?.auth_secret || cur.state === "Terminated") return false;
      await tx.identity.deleteServiceApiKeys(serviceUuid);
      const sealed = owner ? await this.serviceKey(owner, cur.namespace, cur.uuid, tx) : null;
      const written = await tx.services.updateService(cur, {
        auth_secret: sealed,
        spec_version: await this.nextNumber(tx, cur),
      });
      await this.recordRevision(tx, written, { cause: "key rotation" });
      return true;
    });
  }

  /**
   * A dry run of start or scale (`?dry_run=true`): where the containers the service lacks would
   * go, and why any would not fit; nothing is changed.
   */
  async planDryRun(
    s: ServiceRow,
    operation: string,
    target: number,
  ): Promise<{
    dry_run: true;
    operation: string;
    service: string;
    target_num_containers: number;
    fits: boolean;
    placements: { node: string; node_name: string }[];
    explanation: string[];
  }> {
    const nodes = await this.store.nodes.liveNodes({ namespace: s.namespace });
    const plan = await this.d.orchestrator.planFor(s, target);
    const placements = plan.ok
      ? plan.placements.map((uuid) => {
          const n = nodes.find((x) => x.uuid === uuid);
          return {
            node: nodeUri({ namespace: s.namespace, uuid }),
            node_name: n?.nickname || n?.external_fqdn || uuid,
          };
        })
      : [];
    const explanation = plan.ok ? (plan.shortfall ?? []) : plan.reasons;
    return {
      dry_run: true,
      operation,
      service: serviceUri(s),
      target_num_containers: target,
      fits: plan.ok && !plan.shortfall,
      placements,
      explanation,
    };
  }

  // ---- revisions and rollback ------------------------------------------------------------------------

  /**
   * The revision a rollback of the service goes to: `number` when given, else the newest kept
   * one before the definition it has now. Refused (4xx) when there is none to go to, when that
   * revision is not kept, when it is the current one, or when it reaches the node further than
   * the namespace is allowed now.
   */
  async rollbackTarget(s: ServiceRow, number?: number): Promise<RevisionRow> {
    assertAllowed(SERVICE_OPERATIONS, `service ${s.name}`, s.state as ServiceState, "rollback");
    const kept = await this.store.services.revisions.numbers(s.uuid);
    const target = number ?? kept.find((n) => n < s.spec_version);
    if (target === undefined)
      throw conflict(
        `service ${s.name} has no revision before its current one (${s.spec_version}) to roll back to`,
        "no_previous_revision",
      );
    const rev = await this.store.services.revisions.find(s.uuid, target);
    if (!rev)
      throw new ApiError(
        "not_found",
        "unknown_revision",
        `service ${s.name} has no kept revision ${target}; kept: ${kept.join(", ") || "none"}`,
        [{ field: "revision", problem: `kept revisions are ${kept.join(", ") || "none"}` }],
      );
    if (rev.number === s.spec_version)
      throw conflict(
        `service ${s.name} has revision ${rev.number} already; redeploy it to deploy it again`,
        "revision_current",
      );
    await this.d.policies.checkDefinition(s.namespace, decodeSpec(rev.spec), specOf(s));
    return rev;
  }

  /**
   * Gives the service the definition of a kept revision, its number included (a rollback's
   * prepare, in the transaction that records the action).
   * What an update checks in its transaction is checked here too: the environment's limits and
   * the host names it claims. A definition that needs a service key the service no longer has
   * (role global) is refused: only an update, which knows who asks, can make one.
   */
  async restoreRevision(tx: Store, s: ServiceRow, rev: RevisionRow): Promise<ServiceRow> {
    const spec = decodeSpec(rev.spec);
    const now = this.d.clock.now();
    let auth = s.auth_secret;
    if (rev.number !== s.spec_version) {
      await this.assertEnvWithin(tx, s.namespace, spec.container_envvars);
      await claimHosts(tx, s.namespace, hostsOfDefinition(spec), now);
      const wantsKey = spec.roles.includes("global");
      if (wantsKey && !auth)
        throw conflict(
          `revision ${rev.number} of service ${s.name} has role global, whose key only an update can make: update the service's roles first`,
          "revision_needs_key",
        );
      if (!wantsKey && auth) {
        await tx.identity.deleteServiceApiKeys(s.uuid);
        auth = null;
      }
    }
    const written = await tx.services.updateService(s, {
      spec: rev.spec,
      spec_version: rev.number,
      auth_secret: auth,
    });
    if (rev.number !== s.spec_version)
      await tx.containersTouched((await tx.services.containersOfService(s.uuid)).filter(live));
    return written;
  }

  async revokeServiceKey(serviceUuid: string): Promise<void> {
    await this.d.identity.revokeServiceKeys(serviceUuid);
  }

  async update(
    s: ServiceRow,
    body: ServiceUpdateBody,
    principal?: Principal,
    cause: DefinitionCause = {},
  ): Promise<ServiceRow> {
    assertAllowed(SERVICE_OPERATIONS, `service ${s.name}`, s.state as ServiceState, "update");
    // Decoded once: the check of what changed, the write's `after` and the answer's view share it.
    const before = specOf(s);
    noteSpec(s, before);
    const u = applyUpdate(before, s.name, body, {
      resolveService: await this.resolver(s.namespace, body),
      serviceUuid: s.uuid,
    });
    // Only what the update introduces or changes is judged: a value an administrator set stays.
    await this.d.policies.checkDefinition(s.namespace, u.spec, before);
    if (body.container_envvars !== undefined)
      await this.assertEnvWithin(this.store, s.namespace, u.spec.container_envvars);
    const wantsKey = u.spec.roles.includes("global");
    let auth = s.auth_secret;
    if (wantsKey && !auth && principal) auth = await this.serviceKey(principal.user, s.namespace, s.uuid);
    if (!wantsKey && auth) {
      await this.revokeServiceKey(s.uuid);
      auth = null;
    }
    // A definition whose every field is the one it had (a scale, a nickname) is not encoded and
    // written again.
    const same = !Object.keys(body).some(touchesSpec) || sameFields(before, u.spec);
    const spec = same ? undefined : JSON.stringify(u.spec);
    const r = await this.store.mutate(
      "service",
      s.uuid,
      async (cur) => ({
        ...(spec !== undefined ? { spec } : {}),
        ...(u.changed ? { spec_version: await this.nextNumber(this.store, cur) } : {}),
        ...(u.nickname !== undefined ? { nickname: u.nickname } : {}),
        ...(u.target_num_containers !== undefined ? { target_num_containers: u.target_num_containers } : {}),
        auth_secret: auth,
      }),
      {
        read: s,
        // Only statements run in it: it may share its commit with concurrent calls' (write-groups.ts).
        group: true,
        // More containers asked for: counted after the write, in its transaction.
        after: async (tx, read, written) => {
          // The row as written holds u.spec's JSON (or, unchanged, the one read): not decoded again.
          if (written.spec === (spec ?? s.spec)) noteSpec(written, u.spec);
          const now = specOf(written);
          if (written.spec_version !== read.spec_version) await this.recordRevision(tx, written, cause);
          await claimHosts(tx, s.namespace, hostsOfDefinition(now), this.d.clock.now());
          // Only the domains this change adds: a pair two services shared before the rule stays.
          const had = new Set((specOf(read).domains ?? []).map((d) => `${d.host}${d.path}`));
          const added = (now.domains ?? []).filter((d) => !had.has(`${d.host}${d.path}`));
          await refuseSharedDomains(tx, s.namespace, s.uuid, added);
          const more = written.target_num_containers - read.target_num_containers;
          if (more > 0)
            await tx.quotas.enforce(s.namespace, "containers", more, {
              now: this.d.clock.now(),
              written: true,
            });
          await cause.record?.(tx);
        },
      },
    );
    if (u.changed) {
      // Every container now differs from the definition: tell event subscribers (their links, and
      // the reconciler rewriting their link host entries, follow). Containers linking to this
      // service see its containers as deployed: they change when those are redeployed.
      await this.store.containersTouched(
        (await this.store.services.containersOfService(s.uuid)).filter(live),
      );
    }
    return r!;
  }
}

/** Whether an update body's field is one of the definition's (not the row's own count or nickname). */
const touchesSpec = (field: string) => field !== "target_num_containers" && field !== "nickname";

/** Whether two definitions hold the very same value in every field (an update that changed none). */
function sameFields(a: ServiceSpec, b: ServiceSpec): boolean {
  const keys = Object.keys(b) as (keyof ServiceSpec)[];
  if (keys.length !== Object.keys(a).length) return false;
  for (const k of keys) if (!(k in a) || a[k] !== b[k]) return false;
  return true;
}

/** The uuids of the services a definition's body names (links, volumes_from). */
function referencesOf(body: {
  linked_to_service?: readonly { to_service: string }[];
  bindings?: readonly { volumes_from?: string | null }[];
}): string[] {
  const refs: unknown[] = [
    ...(body.linked_to_service ?? []).map((l) => l.to_service),
    ...(body.bindings ?? []).map((b) => b.volumes_from),
  ];
  return refs.flatMap((r) => (typeof r === "string" ? (lastSegment(r) ?? []) : []));
}
