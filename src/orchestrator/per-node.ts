// Work on many containers at once, bounded per node and in all: a large service works on many
// nodes at once without piling onto one engine. Containers are taken in the order given (the
// first whose node has a free slot), as sequential_deployment needs, and finding it costs a heap
// pop rather than a scan past every container whose node is busy.
import { Heap } from "../scheduler/index.ts";

export interface Limits {
  perNode: number;
  total: number;
}

/** Items waiting for a slot on their node, in the order given. */
class PerNodeQueue<T extends { node_uuid: string }> {
  private readonly waiting = new Map<string, { items: { item: T; seq: number }[]; next: number }>();
  private readonly active = new Map<string, number>();
  /** Nodes with a waiting item and a free slot, by the position of their first waiting item. */
  private readonly open = new Heap<string>((a, b) => this.head(a) - this.head(b));
  private readonly isOpen = new Set<string>();
  private left = 0;

  constructor(
    items: readonly T[],
    private readonly perNode: number,
  ) {
    for (const [seq, item] of items.entries()) {
      const w = this.waiting.get(item.node_uuid);
      if (w) w.items.push({ item, seq });
      else this.waiting.set(item.node_uuid, { items: [{ item, seq }], next: 0 });
    }
    this.left = items.length;
    for (const node of this.waiting.keys()) this.reopen(node);
  }

  get size(): number {
    return this.left;
  }

  private head(node: string): number {
    const w = this.waiting.get(node)!;
    return w.items[w.next]!.seq;
  }

  private reopen(node: string): void {
    const w = this.waiting.get(node);
    if (!w || w.next >= w.items.length || this.isOpen.has(node)) return;
    if ((this.active.get(node) ?? 0) >= this.perNode) return;
    this.isOpen.add(node);
    this.open.push(node);
  }

  /** The first waiting item whose node has a free slot (taking the slot), if any. */
  take(): T | undefined {
    const node = this.open.pop();
    if (node === undefined) return undefined;
    this.isOpen.delete(node);
    const w = this.waiting.get(node)!;
    const { item } = w.items[w.next]!;
    w.next += 1;
    this.left -= 1;
    this.active.set(node, (this.active.get(node) ?? 0) + 1);
    this.reopen(node);
    return item;
  }

  release(node: string): void {
    this.active.set(node, (this.active.get(node) ?? 1) - 1);
    this.reopen(node);
  }
}

/** Told when an item of `eachPerNode` starts and when it ends (a group commit counts them). */
export interface PerNodeHooks {
  started(): void;
  ended(): void;
}

/**
 * Runs `fn` over the items, at most `limits.perNode` at a time on one node and `limits.total` in
 * all; answers the errors of the items that failed (the others ran). `hooks` hear of each item's
 * start and end (the runtime's group commit, shared by every call, counts the items in flight).
 * An item may call `release` before it ends: its slot goes to the next item then, and what it still
 * does (waiting for its record's group commit) holds no engine work back.
 */
export async function eachPerNode<T extends { node_uuid: string }>(
  items: readonly T[],
  limits: Limits,
  fn: (item: T, release: () => void) => Promise<void>,
  hooks?: PerNodeHooks,
): Promise<Error[]> {
  const errors: Error[] = [];
  const queue = new PerNodeQueue(items, limits.perNode);
  /** Items holding a slot. */
  let running = 0;
  /** Items started and not ended (with a slot or released). */
  let unfinished = 0;
  if (items.length === 0) return errors;
  await new Promise<void>((resolve) => {
    const pump = () => {
      while (running < limits.total) {
        const item = queue.take();
        if (!item) break;
        running += 1;
        unfinished += 1;
        hooks?.started();
        let released = false;
        const release = () => {
          if (released) return;
          released = true;
          queue.release(item.node_uuid);
          running -= 1;
          pump();
        };
        void fn(item, release)
          .catch((err: unknown) => {
            errors.push(err instanceof Error ? err : new Error(String(err)));
          })
          .finally(() => {
            release();
            unfinished -= 1;
            hooks?.ended();
            if (queue.size === 0 && unfinished === 0) resolve();
          });
      }
    };
    pump();
  });
  return errors;
}
