// What is failing, counted where the rows are (issue 33): a container fails when it runs with a
// failing health check ("unhealthy") or stopped on its own with an error ("crashed"); a service
// fails when one of its containers does, or as its health reads "crashing" (domain/health.ts
// serviceHealth); a stack when one of its services does, or it is partly running; a node when it
// is unreachable; a node cluster when one of its nodes is, or it is partly deployed. The same
// expressions filter the lists (`failing=true`) and count the overview (`GET …/overview/`), so a
// count and the list it links to always agree.
import { type Expression, type ExpressionBuilder, type RawBuilder, type SqlBool, sql } from "kysely";
import type { Database } from "./schema.ts";
import type { Kernel } from "./types.ts";

/**
 * Exit codes of a stop rather than a crash: 0, and how SIGINT, SIGKILL and SIGTERM end a process
 * (130, 137, 143), as the dashboard's crash.tsx reads them.
 */
export const STOP_EXIT_CODES = [0, 130, 137, 143] as const;
const stops = sql.raw(STOP_EXIT_CODES.join(", "));

/** Why a container (alias `c`) fails, or null: "crashed" before "unhealthy". */
function containerReason(c: string) {
  const t = sql.raw(c);
  return sql<string | null>`case
    when ${t}.state <> 'Terminated' and (
      (${t}.state <> 'Running' and ${t}.exit_code is not null and ${t}.exit_code not in (${stops}))
      or ${t}.observed = 'restarting'
    ) then 'crashed'
    when ${t}.state = 'Running' and ${t}.health = 'unhealthy' then 'unhealthy'
    else null end`;
}

/** Why a service (table `services`) fails, or null; its own "Partly running" counts as one. */
function serviceReason() {
  const crashedIn = sql`exists (select 1 from containers c where c.service_uuid = services.uuid and ${containerReason("c")} = 'crashed')`;
  const crashing = sql`exists (select 1 from containers c where c.service_uuid = services.uuid and c.state <> 'Terminated' and c.desired = 'running' and (c.observed = 'restarting' or c.restart_count > 0 or (c.observed = 'exited' and c.exit_code is not null and c.exit_code <> 0)))`;
  const unhealthy = sql`exists (select 1 from containers c where c.service_uuid = services.uuid and c.state <> 'Terminated' and c.health = 'unhealthy')`;
  return sql<string | null>`case
    when services.state = 'Terminated' then null
    when ${crashedIn} or ${crashing} then 'crashed'
    when ${unhealthy} then 'unhealthy'
    when services.state = 'Partly running' then 'partly running'
    else null end`;
}

/** The order in which a stack names its services' reasons: the worst one first. */
const SERVICE_REASONS = ["crashed", "unhealthy", "partly running"] as const;

/**
 * Why a stack (table `stacks`) fails, or null: the worst reason among its live services, else its
 * own "Partly running" (a service stopped by hand). One subquery over the stack's services
 * (index services_stack), ranked so that the worst reason wins.
 */
function stackReason() {
  const rank = (r: string, i: number) => sql`when ${sql.lit(r)} then ${sql.lit(i + 1)}`;
  const name = (r: string, i: number) => sql`when ${sql.lit(i + 1)} then ${sql.lit(r)}`;
  const worst = sql`(select min(case (${serviceReason()}) ${sql.join(SERVICE_REASONS.map(rank), sql` `)} end)
    from services where services.stack_uuid = stacks.uuid and services.state <> 'Terminated')`;
  const own = sql`case when stacks.state = 'Partly running' then ${sql.lit(SERVICE_REASONS.indexOf("partly running") + 1)} end`;
  return sql<string | null>`case
    when stacks.state = 'Terminated' then null
    else case coalesce(${worst}, ${own}) ${sql.join(SERVICE_REASONS.map(name), sql` `)} else null end
    end`;
}

/** Why a node (table `nodes`) fails, or null: its engine does not answer. */
function nodeReason() {
  return sql<string | null>`case when nodes.state = 'Unreachable' then 'unreachable' else null end`;
}

/**
 * Why a node cluster (table `nodeclusters`) fails, or null: one of its nodes is unreachable
 * (whatever operation the cluster is in), else it is partly deployed (fewer nodes deployed than
 * its target). Reads index nodes_ns_cluster.
 */
function clusterReason() {
  const unreachable = sql`exists (select 1 from nodes n where n.namespace = nodeclusters.namespace and n.cluster_uuid = nodeclusters.uuid and n.state = 'Unreachable')`;
  return sql<string | null>`case
    when nodeclusters.state = 'Terminated' then null
    when ${unreachable} then 'unreachable'
    when nodeclusters.state = 'Partly deployed' then 'partly deployed'
    else null end`;
}

/** `failing=true` of the stacks list. */
export function stackFailing(_eb: ExpressionBuilder<Database, "stacks">): Expression<SqlBool> {
  return sql<SqlBool>`(${stackReason()}) is not null`;
}

/** `failing=true` of the nodes list. */
export function nodeFailing(_eb: ExpressionBuilder<Database, "nodes">): Expression<SqlBool> {
  return sql<SqlBool>`(${nodeReason()}) is not null`;
}

/** `failing=true` of the node clusters list. */
export function clusterFailing(_eb: ExpressionBuilder<Database, "nodeclusters">): Expression<SqlBool> {
  return sql<SqlBool>`(${clusterReason()}) is not null`;
}

/** `failing=true` of the containers list. */
export function containerFailing(_eb: ExpressionBuilder<Database, "containers">): Expression<SqlBool> {
  return sql<SqlBool>`(${containerReason("containers")}) is not null`;
}

/** `failing=true` of the services list. */
export function serviceFailing(_eb: ExpressionBuilder<Database, "services">): Expression<SqlBool> {
  return sql<SqlBool>`(${serviceReason()}) is not null`;
}

/** How many objects of a kind are in a state, and failing for a reason (null: not failing). */
export interface CountRow {
  state: string;
  reason: string | null;
  n: number;
}

export type OverviewKind = "nodecluster" | "node" | "stack" | "service" | "container";

export class OverviewStore {
  constructor(private readonly s: Kernel) {}

  /** Objects of a namespace by state and failing reason, Terminated ones left out. */
  async counts(namespace: string): Promise<Record<OverviewKind, CountRow[]>> {
    const db = this.s.db;
    const grouped = async (table: "nodeclusters" | "nodes" | "stacks", reason: RawBuilder<string | null>) =>
      db
        .selectFrom(table)
        .select(["state", reason.as("reason"), (eb) => eb.fn.countAll<number>().as("n")])
        .where("namespace", "=", namespace)
        .where("state", "<>", "Terminated")
        .groupBy(["state", "reason"])
        .execute();
    const [nodecluster, node, stack, service, container] = await Promise.all([
      grouped("nodeclusters", clusterReason()),
      grouped("nodes", nodeReason()),
      grouped("stacks", stackReason()),
      db
        .selectFrom("services")
        .select(["state", serviceReason().as("reason"), (eb) => eb.fn.countAll<number>().as("n")])
        .where("namespace", "=", namespace)
        .where("state", "<>", "Terminated")
        .groupBy(["state", "reason"])
        .execute(),
      db
        .selectFrom("containers")
        .select([
          "state",
          containerReason("containers").as("reason"),
          (eb) => eb.fn.countAll<number>().as("n"),
        ])
        .where("namespace", "=", namespace)
        .where("state", "<>", "Terminated")
        .groupBy(["state", "reason"])
        .execute(),
    ]);
    const typed = (rows: { state: string; reason: string | null; n: number | string | bigint }[]) =>
      rows.map((r) => ({ state: r.state, reason: r.reason, n: Number(r.n) }));
    return {
      nodecluster: typed(nodecluster),
      node: typed(node),
      stack: typed(stack),
      service: typed(service),
      container: typed(container),
    };
  }
}
