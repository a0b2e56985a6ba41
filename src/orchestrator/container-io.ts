// The runtime's port for streams: a container's engine log and commands run inside it, reached
// through the container's record, so the HTTP layer never holds an engine or a driver.
import {
  type ContainerView,
  type Engine,
  type ExecOptions,
  type ExecSession,
  isEngineError,
  type LogLine,
  type LogsOptions,
  type TerminalSize,
} from "../drivers/engine.ts";
import type { EngineSource } from "../nodes/provisioners.ts";
import type { ContainerRow } from "../store/services.ts";
import type { Store } from "../store/store.ts";

export type { ExecSession, LogLine, TerminalSize };

/** A container as the streams address it: its record's node and engine container id. */
export type ContainerRef = Pick<ContainerRow, "node_uuid"> & { engineId: string };

export interface ContainerIO {
  /** The engine log of the container, or undefined when its node no longer exists. */
  logs(c: ContainerRef, options: LogsOptions): Promise<AsyncIterable<LogLine> | undefined>;
  /** What the engine says of the container now, or undefined (node or container gone). */
  inspect(c: ContainerRef): Promise<ContainerView | undefined>;
  /** Starts a command in the container; throws when its node is gone or the engine refuses. */
  exec(c: ContainerRef, options: ExecOptions): Promise<ExecSession>;
}

/** Whether an error means the engine no longer has the container (a normal end for a stream). */
export function isContainerGone(error: unknown): boolean {
  return isEngineError(error, "not_found");
}

export class EngineContainerIO implements ContainerIO {
  constructor(
    private readonly store: Store,
    private readonly engines: EngineSource,
  ) {}

  private async engineOf(c: ContainerRef): Promise<Engine | undefined> {
    const node = await this.store.nodes.knownNode(c.node_uuid);
    return node && node.state !== "Terminated" ? this.engines.forNode(node) : undefined;
  }

  async logs(c: ContainerRef, options: LogsOptions): Promise<AsyncIterable<LogLine> | undefined> {
    return (await this.engineOf(c))?.logs(c.engineId, options);
  }

  async inspect(c: ContainerRef): Promise<ContainerView | undefined> {
    const engine = await this.engineOf(c);
    return engine ? engine.inspectContainer(c.engineId).catch(() => undefined) : undefined;
  }

  async exec(c: ContainerRef, options: ExecOptions): Promise<ExecSession> {
    const engine = await this.engineOf(c);
    if (!engine) throw new Error("its node no longer exists");
    return engine.exec(c.engineId, options);
  }
}
