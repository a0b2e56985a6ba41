// The log of actions as their steps write it, batched across actions (ActionLogs.writer).
import type { Clock } from "../domain/time.ts";
import type { Store } from "../store/store.ts";

export class ActionLogs {
  /** Log lines of every action waiting for the next write, and the writes (see writer). */
  private logLines: { action_uuid: string; ts: number; line: string }[] = [];
  private lastLogWrite: Promise<void> = Promise.resolve();
  private nextLogWrite: Promise<void> | undefined;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {}

  /**
   * An action's log: lines are stored in the order they were logged, each call resolving once its
   * line is. A write starts at once (in a microtask, never behind a timer or I/O turn, so a step's
   * last line cannot lose a race with its own timeout); lines logged while a write is under way
   * (by this action or any other: many steps working on many containers at once) go together into
   * the next statement.
   */
  writer(uuid: string): (line: string) => Promise<void> {
    return (line) => {
      this.logLines.push({ action_uuid: uuid, ts: this.clock.now(), line });
      if (!this.nextLogWrite) {
        this.nextLogWrite = this.lastLogWrite.then(this.writeLogLines, this.writeLogLines);
        this.lastLogWrite = this.nextLogWrite;
      }
      return this.nextLogWrite;
    };
  }

  private readonly writeLogLines = () => {
    const lines = this.logLines;
    this.logLines = [];
    this.nextLogWrite = undefined;
    return this.store.actions.appendActionLogs(lines);
  };
}
