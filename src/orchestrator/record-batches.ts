// The runtime's group commit: what the engines report about the containers of every batched
// operation in flight (a service's start, redeploy, stop, terminate; many at once) is recorded in
// shared batches, each one transaction with its change-feed entries, instead of a transaction per
// container or per operation; and the fan-out that runs the engine work of such an operation in
// parallel (per-node limit) with that group commit.
import type { NodeRow } from "../store/nodes.ts";
import type { ContainerPatch, ContainerRow } from "../store/services.ts";
import type { Store } from "../store/store.ts";
import { eachPerNode, type Limits, type PerNodeHooks } from "./per-node.ts";

/** Records written in one transaction, at most. */
export const RECORD_BATCH_MAX = 250;
/** How long a container the engine has started waits for others to share its record batch. */
export const RECORD_DELAY_MS = 50;

type Write = (
  uuids: string[],
  fn: (r: ContainerRow) => ContainerPatch | undefined,
  known: ReadonlyMap<string, ContainerRow>,
) => Promise<Map<string, ContainerRow>>;

interface Parked {
  uuid: string;
  fn: (r: ContainerRow) => ContainerPatch | undefined;
  known: ContainerRow | undefined;
  done(row: ContainerRow | undefined): void;
  fail(err: unknown): void;
}

/**
 * Group commit of record patches: each caller parks its patch and waits; a batch is written (one
 * `write`: `ServiceStore.patchContainers`, one transaction) as soon as every item in flight is
 * parked, when it holds RECORD_BATCH_MAX, or RECORD_DELAY_MS after its first patch. A patch that
 * holds engine work back (`urgent`: a redeploy's move to its new generation, taken while its node's
 * slot waits) is written in the next turn when no batch is being written, or as soon as the one
 * being written is done, with whatever else is parked then. Items in flight are counted through
 * `hooks` (eachPerNode tells when each starts and ends), over every operation that shares this
 * instance.
 */
export class RecordBatches {
  private batch: Parked[] = [];
  private uuids = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private soon: NodeJS.Immediate | undefined;
  /** The batch holds an urgent patch. */
  private urgent = false;
  /** Batches being written. */
  private writing = 0;
  private parked = 0;
  private running = 0;
  readonly hooks: PerNodeHooks = {
    started: () => {
      this.running += 1;
    },
    ended: () => {
      this.running -= 1;
      this.maybeFlush();
    },
  };

  constructor(private readonly write: Write) {}

  /**
   * Patches the record in the next batch; answers the record as it is after the batch. `known`:
   * the record as the caller last saw it (read again only if it moved since). `urgent`: engine work
   * waits for this patch (see the class).
   */
  record(
    uuid: string,
    fn: (r: ContainerRow) => ContainerPatch | undefined,
    known?: ContainerRow,
    opts: { urgent?: boolean } = {},
  ): Promise<ContainerRow | undefined> {
    // Two patches of one record never share a batch: the first is written before the second reads it.
    if (this.uuids.has(uuid)) this.flush();
    this.parked += 1;
    return new Promise<ContainerRow | undefined>((done, fail) => {
      this.batch.push({ uuid, fn, known, done, fail });
      this.uuids.add(uuid);
      if (opts.urgent) this.urgent = true;
      this.maybeFlush();
    }).finally(() => {
      this.parked -= 1;
    });
  }

  private maybeFlush(): void {
    if (this.batch.length === 0) return;
    if (this.batch.length >= RECORD_BATCH_MAX || this.parked >= this.running) this.flush();
    // Patches parked in this turn join an urgent one; while a batch is written, the next gathers.
    else if (this.urgent && this.writing === 0) this.soon ??= setImmediate(() => this.flush());
    else this.timer ??= setTimeout(() => this.flush(), RECORD_DELAY_MS);
  }

  private flush(): void {
    if (this.timer) clearTimeout(this.timer);
    if (this.soon) clearImmediate(this.soon);
    this.timer = undefined;
    this.soon = undefined;
    this.urgent = false;
    const items = this.batch;
    this.batch = [];
    this.uuids = new Set();
    if (items.length === 0) return;
    const fns = new Map(items.map((i) => [i.uuid, i.fn]));
    const known = new Map(items.flatMap((i) => (i.known ? [[i.uuid, i.known] as const] : [])));
    this.writing += 1;
    this.write([...fns.keys()], (r) => fns.get(r.uuid)?.(r), known)
      .finally(() => {
        this.writing -= 1;
        if (this.urgent) this.maybeFlush();
      })
      .then(
        (written) => {
          for (const w of items) w.done(written.get(w.uuid));
        },
        (err: unknown) => {
          for (const w of items) w.fail(err);
        },
      );
  }
}

/**
 * Runs `work` over the records in parallel (per-node limit) with their nodes, read in one query,
 * recording through `commit`. Answers the errors of the records that failed, each naming its
 * container and node (the action's error lists them all). `work` calls `engineDone` once the
 * engine's work on the record is done (a started container, before the look at it): the next
 * record of the node starts while this one is looked at and waits for its batch to be written.
 * One at a time in all (sequential_deployment) keeps the slot until the record is written: the
 * next container's links read it.
 */
export async function eachWithCommit(
  store: Store,
  commit: RecordBatches,
  rows: ContainerRow[],
  limits: Limits,
  work: (
    c: ContainerRow,
    node: NodeRow | undefined,
    commit: RecordBatches,
    engineDone: () => void,
  ) => Promise<void>,
): Promise<Error[]> {
  if (rows.length === 0) return [];
  const nodes = await store.nodes.knownNodes(rows.map((c) => c.node_uuid));
  return eachPerNode(
    rows,
    limits,
    async (c, release) => {
      const node = nodes.get(c.node_uuid);
      try {
        await work(c, node, commit, limits.total > 1 ? release : () => {});
      } catch (err) {
        const where = node ? node.nickname || node.external_fqdn || node.uuid : c.node_uuid;
        throw new Error(`${c.name} on node ${where}: ${err instanceof Error ? err.message : String(err)}`);
      }
    },
    commit.hooks,
  );
}
