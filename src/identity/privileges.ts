// Namespace privileges (domain/privileges.ts): the policy of each namespace as administrators set
// it, read where a service is defined, a container is created or a local node cluster is made.
//
// Policies are read on hot paths (every container's engine spec), so they are cached, and dropped
// on the same signal as the identity caches (Store.onIdentityChange): a change of a namespace's
// settings calls Store.identityChanged, which tells this process at once and other replicas on the
// change channel; IDENTITY_CACHE_TTL_MS bounds a lost notification.
import { type FieldProblem, forbidden, notFound } from "../domain/errors.ts";
import {
  ALL_PRIVILEGES,
  canonicalPrivileges,
  engineSpecReach,
  introduced,
  type Privileges,
  policyProblems,
  privilegeRefusal,
  refusalProblem,
  refused,
  serviceReach,
} from "../domain/privileges.ts";
import type { ServiceSpec } from "../domain/service.ts";
import { problemsError } from "../domain/stackfile.ts";
import type { ContainerSpec } from "../drivers/engine.ts";
import { decodePrivileges } from "../store/codec.ts";
import type { NamespaceFacts } from "../store/namespaces.ts";
import type { Store } from "../store/store.ts";
import { IDENTITY_CACHE_TTL_MS, type Principal } from "./service.ts";

const CACHE_MAX = 10_000;

/** A namespace's settings as the API shows them. */
export interface NamespaceSettings {
  name: string;
  kind: "user" | "org";
  /** What the namespace's containers may do: everything for an administrator's own namespace. */
  privileges: Privileges;
  /** The personal namespace of an administrator: allowed everything, whatever is stored. */
  administrator: boolean;
}

function settingsOf(facts: NamespaceFacts): NamespaceSettings {
  return {
    name: facts.name,
    kind: facts.kind,
    privileges: facts.ownerIsAdmin ? ALL_PRIVILEGES : canonicalPrivileges(decodePrivileges(facts.privileges)),
    administrator: facts.ownerIsAdmin,
  };
}

export class NamespacePolicies {
  private readonly cache = new Map<string, { value: NamespaceSettings; until: number }>();
  private generation = 0;
  /** How long an entry is trusted without a notification. */
  cacheTtlMs = IDENTITY_CACHE_TTL_MS;

  constructor(private readonly store: Store) {
    store.onIdentityChange(() => {
      this.generation += 1;
      this.cache.clear();
    });
  }

  /** The namespace's settings; undefined when there is no such namespace. */
  async settings(namespace: string): Promise<NamespaceSettings | undefined> {
    const now = performance.now();
    const hit = this.cache.get(namespace);
    if (hit && hit.until > now) return hit.value;
    const generation = this.generation;
    const facts = await this.store.namespaces.facts(namespace);
    if (!facts) return undefined;
    const value = settingsOf(facts);
    if (generation === this.generation) {
      if (this.cache.size >= CACHE_MAX) this.cache.clear();
      this.cache.set(namespace, { value, until: now + this.cacheTtlMs });
    }
    return value;
  }

  /** What the namespace's containers may do (nothing for a namespace that does not exist). */
  async policyOf(namespace: string): Promise<Privileges> {
    return (await this.settings(namespace))?.privileges ?? canonicalPrivileges({});
  }

  /**
   * The options of a definition the namespace may not have, named by field: all of them for a new
   * service, those it introduces or changes for an update of `before`.
   */
  async definitionProblems(
    namespace: string,
    spec: ServiceSpec,
    before?: ServiceSpec,
  ): Promise<FieldProblem[]> {
    const reach = serviceReach(spec);
    if (reach.length === 0) return [];
    const judged = before ? introduced(serviceReach(before), reach) : reach;
    if (judged.length === 0) return [];
    return refused(namespace, await this.policyOf(namespace), judged);
  }

  /** `definitionProblems` as a 403 `privilege_not_allowed`. */
  async checkDefinition(namespace: string, spec: ServiceSpec, before?: ServiceSpec): Promise<void> {
    const problems = await this.definitionProblems(namespace, spec, before);
    if (problems.length) throw privilegeRefusal(problems);
  }

  /** The options of an engine spec the namespace may not have now (checked before a container is created). */
  async engineSpecProblems(namespace: string, spec: ContainerSpec): Promise<FieldProblem[]> {
    const reach = engineSpecReach(spec);
    if (reach.length === 0) return [];
    return refused(namespace, await this.policyOf(namespace), reach);
  }

  /** Nodes on the Berth host (provider local, an engine attached on it): refused unless allowed. */
  async checkLocalNodes(namespace: string, field: string): Promise<void> {
    if ((await this.policyOf(namespace)).local_nodes) return;
    throw privilegeRefusal([
      { field, problem: refusalProblem(namespace, { field, grant: "local_nodes", value: "true" }) },
    ]);
  }

  /** A namespace's settings for a caller: its members' and administrators'; 404 for anyone else. */
  async settingsFor(p: Principal, namespace: string, isMember: boolean): Promise<NamespaceSettings> {
    const s = await this.settings(namespace);
    if (!s || (!isMember && !(p.user.is_admin && !p.namespaceLimit))) throw notFound("namespace");
    return s;
  }

  /**
   * Changes a namespace's privileges (administrators; the route checks): the keys of `patch`
   * replace the stored ones, the others stay.
   */
  async updatePrivileges(namespace: string, patch: Partial<Privileges>): Promise<NamespaceSettings> {
    const facts = await this.store.namespaces.facts(namespace);
    if (!facts) throw notFound("namespace");
    const problems = policyProblems(patch, "privileges.");
    if (problems.length) throw problemsError(problems);
    const next = canonicalPrivileges({ ...decodePrivileges(facts.privileges), ...patch });
    await this.store.namespaces.putPrivileges(namespace, JSON.stringify(next));
    const written = await this.store.namespaces.facts(namespace);
    if (!written) throw forbidden(`Namespace ${namespace} is gone.`, "not_found");
    return settingsOf(written);
  }
}
