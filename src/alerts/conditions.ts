// What each alert kind watches (issue 32): a condition answers, for one rule, the subjects it
// holds for now, each with a sentence. The evaluator opens an incident for a subject that starts
// to hold and resolves it when it no longer does. A kind whose source lives elsewhere
// (`certificate_expiring`: the router's certificates) is registered by that part with `register`;
// until then rules of that kind are refused.
import type { AlertKind, AlertParams } from "../contract/alert.ts";
import { containerUri } from "../domain/uri.ts";
import { nodeUri } from "../nodes/views.ts";
import { alertsOf } from "../store/alerts.ts";
import { statsOf } from "../store/stats.ts";
import type { Store } from "../store/store.ts";

export interface Holding {
  /** The resource URI the condition holds for. */
  subject: string;
  summary: string;
}

export interface RuleFacts {
  uuid: string;
  namespace: string;
  kind: AlertKind;
  params: AlertParams;
  created: number;
}

export type Condition = (rule: RuleFacts, now: number) => Promise<Holding[]>;

/** Defaults of the kinds' parameters. */
export const DEFAULTS = {
  threshold_percent: 90,
  for_minutes: 5,
  restarts: 3,
  window_minutes: 10,
  days: 14,
} as const;

/** How far back a failed action still raises (and keeps open) an incident. */
const ACTION_WINDOW_MS = 24 * 3_600_000;

export class Conditions {
  private readonly sources = new Map<AlertKind, Condition>();

  constructor(
    private readonly deps: {
      store: Store;
      /** The stats collection step (the fine series). */
      statsStepMs: number;
    },
  ) {
    const { store } = deps;
    this.sources.set("container_exited", async (rule) =>
      (await alertsOf(store).exitedContainers(rule.namespace)).map((c) => ({
        subject: containerUri(c),
        summary: `container ${c.name} exited${c.exit_code === null ? "" : ` with code ${c.exit_code}`}${
          c.exit_code_msg ? ` (${c.exit_code_msg})` : ""
        }`,
      })),
    );
    this.sources.set("unhealthy", async (rule) =>
      (await alertsOf(store).unhealthyContainers(rule.namespace)).map((c) => ({
        subject: containerUri(c),
        summary: `container ${c.name} is unhealthy`,
      })),
    );
    this.sources.set("node_unreachable", async (rule) =>
      (await alertsOf(store).unreachableNodes(rule.namespace)).map((n) => ({
        subject: nodeUri(n),
        summary: `node ${n.nickname || n.external_fqdn || n.uuid} is unreachable`,
      })),
    );
    this.sources.set("action_failed", async (rule, now) =>
      (
        await alertsOf(store).failedActions(rule.namespace, Math.max(rule.created, now - ACTION_WINDOW_MS))
      ).map((a) => ({
        subject: `/api/audit/v1/action/${a.uuid}/`,
        summary: `${a.action} of ${a.object} failed`,
      })),
    );
    this.sources.set("memory_high", async (rule, now) => {
      const percent = rule.params.threshold_percent ?? DEFAULTS.threshold_percent;
      const forMs = (rule.params.for_minutes ?? DEFAULTS.for_minutes) * 60_000;
      // Most of the window's points must be there: a container that just started is not judged yet.
      const minPoints = Math.max(1, Math.floor((forMs / deps.statsStepMs) * 0.8));
      const above = await statsOf(store).memoryAbove(
        rule.namespace,
        deps.statsStepMs,
        now - forMs,
        percent,
        minPoints,
      );
      return this.named(
        above.map((a) => a.uuid),
        (name, uuid) => {
          const lowest = above.find((a) => a.uuid === uuid)!.lowest;
          return `container ${name} used at least ${lowest.toFixed(1)} % of its memory limit for ${forMs / 60_000} min (threshold ${percent} %)`;
        },
      );
    });
    this.sources.set("crash_looping", async (rule, now) => {
      const restarts = rule.params.restarts ?? DEFAULTS.restarts;
      const windowMin = rule.params.window_minutes ?? DEFAULTS.window_minutes;
      const grew = await statsOf(store).restartedSince(
        rule.namespace,
        deps.statsStepMs,
        now - windowMin * 60_000,
        restarts,
        now,
      );
      return this.named(
        grew.map((g) => g.uuid),
        (name, uuid) => {
          const n = grew.find((g) => g.uuid === uuid)!.grew;
          return `container ${name} restarted ${n} times within ${windowMin} min`;
        },
      );
    });
  }

  private async named(uuids: string[], summary: (name: string, uuid: string) => string): Promise<Holding[]> {
    const rows = await alertsOf(this.deps.store).containerNames(uuids);
    return rows.map((c) => ({ subject: containerUri(c), summary: summary(c.name, c.uuid) }));
  }

  /** Adds the source of a kind watched by another part (the router's certificates). */
  register(kind: AlertKind, condition: Condition): void {
    this.sources.set(kind, condition);
  }

  has(kind: AlertKind): boolean {
    return this.sources.has(kind);
  }

  holding(rule: RuleFacts, now: number): Promise<Holding[]> {
    const source = this.sources.get(rule.kind);
    return source ? source(rule, now) : Promise.resolve([]);
  }
}
