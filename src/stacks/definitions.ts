// Stack definitions (spec "Stacks"; CONTRACT §12): create and update take `services` items in
// either dialect (domain/stackfile.ts). Everything is checked before anything is written, and a
// stack's new services are written in one transaction with it: a bad service means nothing is
// created. Export gives the stack back as a stack file.
import { randomUUID } from "node:crypto";
import { type ServiceCreateBody, type ServiceUpdateBody, UPDATABLE_FIELDS } from "../contract/service.ts";
import type { StackCreateBody, StackUpdateBody } from "../contract/stack.ts";
import { ApiError, conflict, type FieldProblem } from "../domain/errors.ts";
import { privilegeRefusal } from "../domain/privileges.ts";
import type { ServiceSpec } from "../domain/service.ts";
import type { ResolvedService } from "../domain/service-rules.ts";
import { parseCreate, parseUpdate, specFieldOf } from "../domain/service-spec.ts";
import { assertStackName, startOrder } from "../domain/stack.ts";
import {
  type ConvertedService,
  convertServices,
  problemsError,
  stackBodyProblems,
} from "../domain/stackfile.ts";
import { exportService } from "../domain/stackfile-export.ts";
import type { Clock } from "../domain/time.ts";
import { lastSegment, serviceUri } from "../domain/uri.ts";
import type { Principal } from "../identity/service.ts";
import type { ServiceManager } from "../orchestrator/manager.ts";
import type { ServiceRow } from "../store/services.ts";
import type { StackRow } from "../store/stacks.ts";
import type { Store } from "../store/store.ts";
import { assertStackAllowed, dependencies, live, servicesOf, specOf } from "./state.ts";

/** JSON with object keys sorted: equality regardless of key order. */
function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, value: unknown) =>
    value && typeof value === "object" && !Array.isArray(value)
      ? Object.fromEntries(
          Object.entries(value as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b)),
        )
      : value,
  );
}
const same = (a: unknown, b: unknown) => canonical(a) === canonical(b);
/** Lists whose order means nothing to a container (ports, mounts): equal as multisets. */
const sameItems = (a: readonly unknown[], b: readonly unknown[]) =>
  same([...a.map(canonical)].sort(), [...b.map(canonical)].sort());

/**
 * How a stack body refers to services: a sibling by name, `<service>.<stack>` for a service of
 * another stack, a plain name for a service outside any stack, or a resource URI.
 */
class References {
  constructor(
    private readonly o: {
      namespace: string;
      stackName: string;
      /** The stack's services, new ones with provisional uuids. */
      siblings: Map<string, ResolvedService>;
      namespaceServices: ServiceRow[];
      stacks: StackRow[];
    },
  ) {}

  resolve = (ref: string): ResolvedService | undefined => {
    const { siblings, namespaceServices, stacks } = this.o;
    if (ref.includes("/")) {
      const id = lastSegment(ref);
      const s = namespaceServices.find((x) => x.uuid === id);
      return s ? { uuid: s.uuid, name: s.name } : undefined;
    }
    const sibling = siblings.get(ref);
    if (sibling) return sibling;
    const dotted = /^([^.]+)\.([^.]+)$/.exec(ref);
    if (dotted) {
      const [, service, stack] = dotted as unknown as [string, string, string];
      if (stack === this.o.stackName) return siblings.get(service);
      const st = stacks.find((x) => x.name === stack);
      const s = st && namespaceServices.find((x) => x.name === service && x.stack_uuid === st.uuid);
      return s ? { uuid: s.uuid, name: s.name } : undefined;
    }
    const s = namespaceServices.find((x) => x.name === ref && x.stack_uuid === null);
    return s ? { uuid: s.uuid, name: s.name } : undefined;
  };

  /**
   * A body whose references are resource URIs, which the ServiceManager resolves: `real` gives
   * the uuids of siblings written by now (provisional ones are replaced).
   */
  rewrite(body: Record<string, unknown>, real: Map<string, string>): Record<string, unknown> {
    const uriOf = (ref: unknown): unknown => {
      if (typeof ref !== "string") return ref;
      const target = this.resolve(ref);
      if (!target) return ref;
      const uuid = real.get(target.name) ?? target.uuid;
      return serviceUri({ namespace: this.o.namespace, uuid });
    };
    const out = { ...body };
    if (Array.isArray(body.linked_to_service)) {
      out.linked_to_service = body.linked_to_service.map((l: unknown) =>
        l && typeof l === "object"
          ? { ...l, to_service: uriOf((l as { to_service?: unknown }).to_service) }
          : l,
      );
    }
    if (Array.isArray(body.bindings)) {
      out.bindings = body.bindings.map((b: unknown) => {
        const from = b && typeof b === "object" ? (b as { volumes_from?: unknown }).volumes_from : undefined;
        return typeof from === "string" && from !== "" ? { ...(b as object), volumes_from: uriOf(from) } : b;
      });
    }
    return out;
  }
}

/** Runs a check of the service rules, turning its 400 into problems named as the item names them. */
function collect<T>(item: ConvertedService, problems: FieldProblem[], fn: () => T): T | undefined {
  try {
    return fn();
  } catch (err) {
    if (!(err instanceof ApiError) || err.kind !== "bad_request") throw err;
    for (const d of err.details ?? [{ field: "", problem: err.message }]) {
      problems.push({ field: item.path + item.fieldOf(d.field), problem: d.problem });
    }
    return undefined;
  }
}

export class StackDefinitions {
  constructor(private readonly d: { store: Store; clock: Clock; services: ServiceManager }) {}

  private get store() {
    return this.d.store;
  }

  /** The stack as a stack file: `{<service name>: {<stack-file keys>}}`, defaults left out. */
  async exportStack(st: StackRow): Promise<Record<string, Record<string, unknown>>> {
    const all = await this.store.services.servicesOfStack(st.uuid);
    const shown = st.state === "Terminated" ? all : all.filter(live);
    const others = await this.store.services.liveServices({ namespace: st.namespace });
    const stacks = new Map<string, string>();
    const refOf = (uuid: string): string | undefined => {
      const s = shown.find((x) => x.uuid === uuid) ?? others.find((x) => x.uuid === uuid);
      if (!s) return undefined;
      if (s.stack_uuid === st.uuid || s.stack_uuid === null) return s.name;
      const stackName = stacks.get(s.stack_uuid);
      return stackName === undefined ? undefined : `${s.name}.${stackName}`;
    };
    for (const s of others) {
      if (s.stack_uuid && !stacks.has(s.stack_uuid)) {
        const other = await this.store.stacks.findStack(s.stack_uuid);
        if (other) stacks.set(other.uuid, other.name);
      }
    }
    return Object.fromEntries(
      shown.map((s) => [
        s.name,
        exportService({
          name: s.name,
          nickname: s.nickname,
          target_num_containers: s.target_num_containers,
          spec: specOf(s),
          refOf,
        }),
      ]),
    );
  }

  private async references(namespace: string, stackName: string, siblings: Map<string, ResolvedService>) {
    const [namespaceServices, stacks] = await Promise.all([
      this.store.services.liveServices({ namespace }),
      this.liveStacks(namespace),
    ]);
    return new References({ namespace, stackName, siblings, namespaceServices, stacks });
  }

  private async liveStacks(namespace: string): Promise<StackRow[]> {
    return (await this.store.stacks.listStacks({ namespace, limit: 100_000, offset: 0 })).rows.filter(live);
  }

  /** Problems of a stack body's top level (a compose file's `version`, a `services` mapping). */
  checkBody(body: unknown): void {
    const problems = stackBodyProblems(body);
    if (problems.length) throw problemsError(problems);
  }

  /** A cycle among the links (and volumes_from) of a stack's services is a 400 naming the first service in it. */
  private checkCycle(
    nodes: { uuid: string; name: string; spec: ServiceSpec; item?: ConvertedService }[],
    problems: FieldProblem[],
  ): string[] {
    const result = startOrder(nodes.map((n) => ({ id: n.uuid, after: dependencies(n.spec) })));
    if ("order" in result) return result.order;
    const names = result.cycle.map((id) => nodes.find((n) => n.uuid === id)!.name);
    const first = nodes.find((n) => n.uuid === result.cycle[0])!;
    const links = first.spec.linked_to_service.some((l) => l.to_service === result.cycle[1]);
    const field = first.item
      ? first.item.path + first.item.fieldOf(links ? "linked_to_service" : "bindings")
      : `services.${first.name}.${links ? "links" : "volumes_from"}`;
    problems.push({
      field,
      problem: `links form a cycle (${names.join(" → ")}): a service starts after the services it links to, so links cannot go round in a circle`,
    });
    return [];
  }

  async create(namespace: string, principal: Principal, body: StackCreateBody): Promise<StackRow> {
    this.checkBody(body);
    assertStackName(body.name);
    const problems: FieldProblem[] = [];
    const items = convertServices(body.services ?? [], problems);
    const provisional = new Map<string, ResolvedService>();
    for (const item of items)
      if (item.name) provisional.set(item.name, { uuid: randomUUID(), name: item.name });
    const refs = await this.references(namespace, body.name, provisional);
    const planned: { uuid: string; name: string; spec: ServiceSpec; item: ConvertedService }[] = [];
    for (const item of items) {
      if (!item.name) continue;
      const uuid = provisional.get(item.name)!.uuid;
      const n = collect(item, problems, () =>
        parseCreate(item.body, { resolveService: refs.resolve, serviceUuid: uuid }),
      );
      if (n) planned.push({ uuid, name: n.name, spec: n.spec, item });
    }
    const order = problems.length ? [] : this.checkCycle(planned, problems);
    if (problems.length) throw problemsError(problems);
    await this.checkPrivileges(
      namespace,
      planned.map((p) => ({ item: p.item, spec: p.spec })),
    );

    if (await this.store.stacks.findLiveStackByName(namespace, body.name)) {
      throw conflict(`A stack named "${body.name}" already exists in ${namespace}.`, "name_taken");
    }
    for (const p of planned) {
      if (await this.store.services.findLiveServiceByName(namespace, p.name)) {
        throw conflict(
          `${p.item.path}name: a service named "${p.name}" already exists in ${namespace} (service names are unique in a namespace)`,
          "name_taken",
        );
      }
    }
    const now = this.d.clock.now();
    return this.store.transaction(async (tx) => {
      await tx.quotas.enforce(namespace, "stacks", 1, { now });
      const st = await tx.stacks.insertStack({
        uuid: randomUUID(),
        namespace,
        name: body.name,
        nickname: body.nickname || body.name,
        state: "Not Running",
        deployed_at: null,
        destroyed_at: null,
        created: now,
      });
      // Targets first, so that every reference is to a service that exists by then.
      const real = new Map<string, string>();
      for (const uuid of order) {
        const p = planned.find((x) => x.uuid === uuid)!;
        const row = await this.d.services.create(
          namespace,
          principal,
          refs.rewrite(p.item.body, real) as ServiceCreateBody,
          { stackUuid: st.uuid, tx },
        );
        real.set(p.name, row.uuid);
      }
      return st;
    });
  }

  /**
   * Updates every listed service (matched by name) with the keys of Update service, and adds the
   * new ones. Keys Update service does not take (volumes, labels, user, …) are accepted when they
   * keep the service's value, so that an exported stack file can be sent back unchanged; changing
   * them is a 400. A service whose definition does not change is not written at all.
   */
  async update(st: StackRow, principal: Principal, body: StackUpdateBody): Promise<StackRow> {
    this.checkBody(body);
    const current = await servicesOf(this.store, st.uuid);
    assertStackAllowed(st, current, "update");
    const problems: FieldProblem[] = [];
    const items = convertServices(body.services ?? [], problems);
    const byName = new Map(current.map((s) => [s.name, s]));
    const siblings = new Map<string, ResolvedService>(
      current.map((s) => [s.name, { uuid: s.uuid, name: s.name }]),
    );
    for (const item of items) {
      if (item.name && !siblings.has(item.name))
        siblings.set(item.name, { uuid: randomUUID(), name: item.name });
    }
    const refs = await this.references(st.namespace, st.name, siblings);
    const ctxFor = (uuid: string) => ({ resolveService: refs.resolve, serviceUuid: uuid });

    const created: { uuid: string; name: string; spec: ServiceSpec; item: ConvertedService }[] = [];
    const updates: { row: ServiceRow; body: Record<string, unknown>; spec: ServiceSpec }[] = [];
    for (const item of items) {
      if (!item.name) continue;
      const row = byName.get(item.name);
      const uuid = siblings.get(item.name)!.uuid;
      if (!row) {
        const n = collect(item, problems, () => parseCreate(item.body, ctxFor(uuid)));
        if (n) created.push({ uuid, name: n.name, spec: n.spec, item });
        continue;
      }
      const spec = specOf(row);
      const change: Record<string, unknown> = {};
      const fixed: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(item.body)) {
        if (key === "name") continue;
        if (UPDATABLE_FIELDS.has(key)) change[key] = value;
        else fixed[key] = value;
      }
      if (Object.keys(fixed).length) this.checkFixed(item, row, spec, change, fixed, ctxFor(uuid), problems);
      const u = collect(item, problems, () => parseUpdate(spec, row.name, change, ctxFor(uuid)));
      if (!u) continue;
      // Ports are a set to a container: the same ones in another order (an export lists published
      // ones first) are no change.
      if (change.container_ports !== undefined && sameItems(u.spec.container_ports, spec.container_ports)) {
        delete change.container_ports;
        u.spec.container_ports = spec.container_ports;
      }
      const unchanged =
        same(u.spec, spec) &&
        (u.nickname === undefined || u.nickname === row.nickname) &&
        (u.target_num_containers === undefined || u.target_num_containers === row.target_num_containers);
      if (!unchanged) updates.push({ row, body: change, spec: u.spec });
    }
    if (!problems.length) {
      const specs = new Map(updates.map((u) => [u.row.uuid, u.spec]));
      this.checkCycle(
        [
          ...current.map((s) => ({
            uuid: s.uuid,
            name: s.name,
            spec: specs.get(s.uuid) ?? specOf(s),
            item: items.find((i) => i.name === s.name),
          })),
          ...created,
        ],
        problems,
      );
    }
    if (problems.length) throw problemsError(problems);
    await this.checkPrivileges(st.namespace, [
      ...created.map((c) => ({ item: c.item, spec: c.spec })),
      ...updates.map((u) => ({
        item: items.find((i) => i.name === u.row.name)!,
        spec: u.spec,
        before: specOf(u.row),
      })),
    ]);
    for (const c of created) {
      if (await this.store.services.findLiveServiceByName(st.namespace, c.name)) {
        throw conflict(
          `${c.item.path}name: a service named "${c.name}" already exists in ${st.namespace} (service names are unique in a namespace)`,
          "name_taken",
        );
      }
    }

    const real = new Map<string, string>();
    if (created.length) {
      const order = startOrder(created.map((c) => ({ id: c.uuid, after: dependencies(c.spec) })));
      const ids = "order" in order ? order.order : created.map((c) => c.uuid);
      await this.store.transaction(async (tx) => {
        for (const id of ids) {
          const c = created.find((x) => x.uuid === id)!;
          const row = await this.d.services.create(
            st.namespace,
            principal,
            refs.rewrite(c.item.body, real) as ServiceCreateBody,
            { stackUuid: st.uuid, tx },
          );
          real.set(c.name, row.uuid);
        }
      });
    }
    for (const u of updates) {
      await this.d.services.update(u.row, refs.rewrite(u.body, real) as ServiceUpdateBody, principal);
    }
    return (await this.store.stacks.findStack(st.uuid))!;
  }

  /**
   * Options of the stack's services that reach their node and the namespace is not allowed
   * (domain/privileges.ts): one 403 naming each as the item wrote it (`services.web.volumes[0]`).
   * Checked before anything is written; the service manager checks each service again.
   */
  private async checkPrivileges(
    namespace: string,
    services: { item: ConvertedService; spec: ServiceSpec; before?: ServiceSpec }[],
  ): Promise<void> {
    const problems: FieldProblem[] = [];
    for (const s of services) {
      for (const p of await this.d.services.privilegeProblems(namespace, s.spec, s.before))
        problems.push({ field: s.item.path + s.item.fieldOf(p.field), problem: p.problem });
    }
    if (problems.length) throw privilegeRefusal(problems);
  }

  /** Keys Update service does not take must keep the service's value. */
  private checkFixed(
    item: ConvertedService,
    row: ServiceRow,
    spec: ServiceSpec,
    change: Record<string, unknown>,
    fixed: Record<string, unknown>,
    ctx: { resolveService: References["resolve"]; serviceUuid: string },
    problems: FieldProblem[],
  ): void {
    const mine: FieldProblem[] = [];
    const n = collect(item, mine, () =>
      parseCreate(
        {
          image: spec.image_name,
          name: row.name,
          // memory_swap is checked against the memory the service will have.
          memory: change.memory ?? spec.memory,
          ...fixed,
        },
        ctx,
      ),
    );
    const fields = new Set(Object.keys(fixed).map((k) => item.path + item.fieldOf(k)));
    problems.push(
      ...mine.filter((p) =>
        [...fields].some((f) => p.field === f || p.field.startsWith(`${f}.`) || p.field.startsWith(`${f}[`)),
      ),
    );
    if (!n) return;
    for (const key of Object.keys(fixed)) {
      // Create-only fields (the contract's, less Update service's) compared in the stored spec.
      const field = specFieldOf(key);
      if (field === undefined) continue;
      const a = n.spec[field];
      const b = spec[field];
      const equal =
        Array.isArray(a) && Array.isArray(b) && field === "bindings" ? sameItems(a, b) : same(a, b);
      if (!equal) {
        problems.push({
          field: item.path + item.fieldOf(key),
          problem:
            "cannot be changed by updating the stack (Update service does not take it): leave it as it is, or terminate the service and add it again",
        });
      }
    }
  }
}
