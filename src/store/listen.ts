// Change notifications between replicas sharing one PostgreSQL: a dedicated connection LISTENs on
// the change channel and wakes this process's feed readers when another replica commits a change.
// The feed table stays the source of truth: a notification only says "read the feed now". When the
// connection drops it reconnects with back-off, and readers poll meanwhile (`connected` is false).
// The channel is the database's: notifications of other schemas (another installation sharing the
// database) are dropped.
import pg from "pg";
import { CHANGE_CHANNEL } from "./notify.ts";

export interface RemoteChange {
  /** The replica that committed it. */
  origin: string;
  type: string;
  /** The change's own time (epoch ms, the committing replica's clock). */
  datetimeMs: number;
}

export interface ChangeListenerOptions {
  url: string;
  /** This replica's id: its own notifications are skipped (it woke its readers in-process). */
  origin: string;
  onChange(change: RemoteChange): void;
  onError?(err: unknown): void;
  minBackoffMs?: number;
  maxBackoffMs?: number;
}

export class ChangeListener {
  private client: pg.Client | undefined;
  private stopped = true;
  private retry: NodeJS.Timeout | undefined;
  private backoffMs: number;
  private ok = false;
  /** The schema this replica works in (its connection's search_path), read at connect. */
  private schema: string | undefined;

  constructor(private readonly o: ChangeListenerOptions) {
    this.backoffMs = o.minBackoffMs ?? 250;
  }

  /** Whether notifications arrive now (readers may then poll rarely). */
  get connected(): boolean {
    return this.ok;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    void this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    this.ok = false;
    const c = this.client;
    this.client = undefined;
    await c?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const client = new pg.Client({ connectionString: this.o.url, keepAlive: true });
    this.client = client;
    const lost = (err?: unknown) => {
      if (this.client !== client) return;
      this.client = undefined;
      this.ok = false;
      if (err) this.o.onError?.(err);
      void client.end().catch(() => undefined);
      this.schedule();
    };
    client.on("error", lost);
    client.on("end", () => lost());
    client.on("notification", (msg) => {
      if (msg.channel !== CHANGE_CHANNEL) return;
      const [origin = "", type = "", datetime = "0", ...schema] = (msg.payload ?? "").split(" ");
      if (origin === this.o.origin) return;
      // Another schema's change; a payload without one comes from an older replica of this one.
      if (schema.length && schema.join(" ") !== this.schema) return;
      this.o.onChange({ origin, type, datetimeMs: Number(datetime) });
    });
    try {
      await client.connect();
      const { rows } = await client.query<{ schema: string }>(
        "select coalesce(current_schema(), '') as schema",
      );
      this.schema = rows[0]?.schema;
      await client.query(`LISTEN ${CHANGE_CHANNEL}`);
      if (this.client !== client) return;
      this.ok = true;
      this.backoffMs = this.o.minBackoffMs ?? 250;
      // Changes committed while nobody listened: one wake-up makes readers catch up from the feed.
      this.o.onChange({ origin: "", type: "", datetimeMs: Date.now() });
    } catch (err) {
      lost(err);
    }
  }

  private schedule(): void {
    if (this.stopped || this.retry) return;
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, this.o.maxBackoffMs ?? 5000);
    this.retry = setTimeout(() => {
      this.retry = undefined;
      void this.connect();
    }, delay);
    this.retry.unref();
  }
}
