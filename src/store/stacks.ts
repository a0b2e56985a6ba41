// Queries of stacks.
import { containsText, type ListOrder, orderOf } from "./list-search.ts";
import { stackFailing } from "./overview.ts";
import type { Kernel, StackRow } from "./types.ts";

export type { StackRow } from "./types.ts";
export type NewStack = Omit<StackRow, "id" | "version">;

export interface StackQuery {
  namespace: string;
  uuid?: string;
  uuidPrefix?: string;
  name?: string;
  state?: string;
  /** Leaves out this state (`state__not`). */
  stateNot?: string;
  /** Names containing this text, any case (`name__icontains`). */
  nameContains?: string;
  /** Only failing stacks (`failing=true`, store/overview.ts), or only the others. */
  failing?: boolean;
  orderBy?: ListOrder;
  limit: number;
  offset: number;
}

const like = (prefix: string) => `${prefix.replace(/[%_\\]/g, "")}%`;

export class StackStore {
  constructor(private readonly s: Kernel) {}

  /** Inserts a stack with its change-feed entry. */
  async insertStack(r: NewStack): Promise<StackRow> {
    const [row] = await this.s.insertRows("stack", [r]);
    return row!;
  }

  async findStack(uuid: string): Promise<StackRow | undefined> {
    return this.s.db.selectFrom("stacks").selectAll().where("uuid", "=", uuid).executeTakeFirst();
  }

  /** Optimistic update with its change-feed entry (`Store.updateRow`). */
  async updateStack(r: StackRow, patch: Partial<StackRow>): Promise<StackRow> {
    return this.s.updateRow("stack", r, patch);
  }

  /** A stack of the namespace that is not Terminated, by name. */
  async findLiveStackByName(namespace: string, name: string): Promise<StackRow | undefined> {
    return this.s.db
      .selectFrom("stacks")
      .selectAll()
      .where("namespace", "=", namespace)
      .where("name", "=", name)
      .where("state", "!=", "Terminated")
      .executeTakeFirst();
  }

  async liveStacks(): Promise<StackRow[]> {
    return this.s.db
      .selectFrom("stacks")
      .selectAll()
      .where("state", "!=", "Terminated")
      .orderBy("id")
      .execute();
  }

  async listStacks(q: StackQuery): Promise<{ rows: StackRow[]; total: number }> {
    let base = this.s.db.selectFrom("stacks").where("namespace", "=", q.namespace);
    if (q.uuid !== undefined) base = base.where("uuid", "=", q.uuid);
    if (q.uuidPrefix !== undefined) base = base.where("uuid", "like", like(q.uuidPrefix));
    if (q.name !== undefined) base = base.where("name", "=", q.name);
    if (q.state !== undefined) base = base.where("state", "=", q.state);
    if (q.stateNot !== undefined) base = base.where("state", "!=", q.stateNot);
    if (q.nameContains !== undefined) base = base.where(containsText(["name"], q.nameContains));
    if (q.failing !== undefined)
      base = base.where((eb) => (q.failing ? stackFailing(eb) : eb.not(stackFailing(eb))));
    const count = await base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirst();
    const rows = await base.selectAll().orderBy(orderOf(q.orderBy)).limit(q.limit).offset(q.offset).execute();
    return { rows, total: Number(count?.n ?? 0) };
  }
}
