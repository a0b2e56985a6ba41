// Berth as an operator runs it, for the real-engine tier's backup tests: `src/main.ts` as a child
// process on a data directory, called over HTTP as the admin, stopped with SIGTERM (or killed), and
// the logs of its actions read from its database (the API streams them).
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { openDatabase } from "../../src/store/db.ts";
import { Store } from "../../src/store/store.ts";
import { basic, waitFor } from "./harness.ts";
import { freeLoopbackPort } from "./real-api.ts";

// biome-ignore lint/suspicious/noExplicitAny: the API's JSON.
export type Json = any;

const ROOT = path.resolve(import.meta.dirname, "../..");

export class BerthProcess {
  private constructor(
    readonly dataDir: string,
    readonly port: number,
    private readonly proc: ChildProcess,
    private readonly auth: string,
    readonly stderr: () => string,
  ) {}

  static async start(dataDir: string, env: Record<string, string>, port?: number): Promise<BerthProcess> {
    const key = "berth-process-admin-key-0123";
    const listen = port ?? (await freeLoopbackPort());
    let stderr = "";
    const proc = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
      cwd: ROOT,
      env: {
        ...process.env,
        BERTH_LISTEN: `127.0.0.1:${listen}`,
        BERTH_DATA_DIR: dataDir,
        BERTH_DATABASE_URL: `sqlite:${path.join(dataDir, "berth.sqlite")}`,
        BERTH_ADMIN_USERNAME: "admin",
        BERTH_ADMIN_PASSWORD: "admin-password",
        BERTH_ADMIN_API_KEY: key,
        BERTH_ACTION_POLL_MS: "200",
        BERTH_RECONCILE_INTERVAL_MS: "1000",
        BERTH_CONTAINER_STOP_TIMEOUT_S: "1",
        BERTH_AUTO_ATTACH_ENGINE: "false",
        BERTH_LOG_LEVEL: "warn",
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    proc.stdout?.resume();
    proc.stderr?.on("data", (d) => (stderr += d));
    const auth = basic("admin", key);
    await waitFor(
      `Berth on ${listen}`,
      async () => {
        if (proc.exitCode !== null) throw new Error(`Berth exited: ${stderr}`);
        const res = await fetch(`http://127.0.0.1:${listen}/auth/`, {
          headers: { authorization: auth },
        }).catch(() => undefined);
        return res?.status === 200;
      },
      60_000,
      100,
    );
    return new BerthProcess(dataDir, listen, proc, auth, () => stderr);
  }

  async api(method: string, uri: string, body?: unknown) {
    const res = await fetch(`http://127.0.0.1:${this.port}${uri}`, {
      method,
      headers: {
        authorization: this.auth,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(10_000),
    });
    const text = await res.text();
    return {
      status: res.status,
      body: text ? (JSON.parse(text) as Json) : undefined,
      raw: text,
      headers: res.headers,
    };
  }

  async get(uri: string): Promise<Json> {
    const res = await this.api("GET", uri);
    assert.equal(res.status, 200, res.raw);
    return res.body;
  }

  /** Waits for the action at `uri` to end; answers it. */
  finished(uri: string, timeoutMs = 120_000): Promise<Json> {
    return waitFor(
      `${uri} to end`,
      async () => {
        const a = await this.get(uri);
        return ["Success", "Failed", "Canceled"].includes(a.state) ? a : undefined;
      },
      timeoutMs,
      200,
    );
  }

  /** The logs of these actions, from the database. */
  async logs(uuids: string[]): Promise<string> {
    return actionLogs(this.dataDir, uuids);
  }

  get running(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  async stop(signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
    if (!this.running) return;
    const exited = new Promise((resolve) => this.proc.once("exit", resolve));
    this.proc.kill(signal);
    await exited;
  }
}

/** The logs of these actions, read from a data directory's database. */
export async function actionLogs(dataDir: string, uuids: string[]): Promise<string> {
  const db = openDatabase(`sqlite:${path.join(dataDir, "berth.sqlite")}`);
  try {
    const store = new Store(db.kysely, db.dialect);
    const out: string[] = [];
    for (const uuid of uuids) out.push(...(await store.actions.actionLogTail(uuid, 100)).map((l) => l.line));
    return out.join("\n");
  } finally {
    await db.close();
  }
}
