// What every controller is: a typed work queue (../work-queue.ts) and the work it does on a batch
// of keys. A controller re-reads what its keys name and acts on the difference.
import { WorkQueue, type WorkQueueOptions } from "../work-queue.ts";
import { CONTROLLER_BACKOFF } from "./context.ts";

export abstract class Controller<K> {
  private readonly queue: WorkQueue<K>;

  constructor(opts: Omit<WorkQueueOptions<K>, "work">) {
    this.queue = new WorkQueue({ backoff: CONTROLLER_BACKOFF, ...opts, work: (keys) => this.work(keys) });
  }

  /** Works on a batch of keys; answers those whose work failed (they come back after a back-off). */
  protected abstract work(keys: K[]): Promise<undefined | readonly K[]>;

  /** Queues a key (once, however often it is added before it is worked on). */
  add(key: K): void {
    this.queue.add(key);
  }

  /** Keys queued or being worked on. */
  get length(): number {
    return this.queue.length;
  }

  idle(): Promise<void> {
    return this.queue.idle();
  }

  start(): void {
    this.queue.reopen();
  }

  stop(): void {
    void this.queue.shutdown();
  }
}
