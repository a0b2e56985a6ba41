// kill -9 of the server in the middle of a multi-step action: after a restart the action
// finishes (resumed at the step it was on) instead of staying In progress.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { openDatabase } from "../../src/store/db.ts";
import { Store } from "../../src/store/store.ts";
import { basic, waitFor } from "../support/harness.ts";

const root = path.resolve(import.meta.dirname, "../..");
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-crash-"));
const auth = basic("admin", "crash-test-admin-key-0123");
let child: ChildProcess | undefined;

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/**
 * Starts the server on a free port. Another test file running at the same time may take the port
 * between freePort() and the server's listen: then it starts again on another.
 */
async function startServer(): Promise<{ proc: ChildProcess; port: number }> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    try {
      return { proc: await startServerOn(port), port };
    } catch (error) {
      if (attempt >= 3 || !String(error).includes("EADDRINUSE")) throw error;
    }
  }
}

async function startServerOn(port: number): Promise<ChildProcess> {
  const proc = spawn(process.execPath, ["--import", "tsx", "test/support/server-with-test-kinds.ts"], {
    cwd: root,
    env: {
      ...process.env,
      BERTH_LISTEN: `127.0.0.1:${port}`,
      BERTH_DATA_DIR: dataDir,
      BERTH_ADMIN_USERNAME: "admin",
      BERTH_ADMIN_PASSWORD: "admin-password",
      BERTH_ADMIN_API_KEY: "crash-test-admin-key-0123",
      BERTH_ACTION_LEASE_MS: "1500",
      BERTH_ACTION_POLL_MS: "200",
      BERTH_LOG_LEVEL: "warn",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  proc.stderr?.on("data", (d) => (stderr += d));
  // A server that ends before it answers (its port taken) is an error at once, with its output.
  const ended = new Promise<never>((_, reject) =>
    proc.once("close", () => reject(new Error(`server exited: ${stderr}`))),
  );
  ended.catch(() => undefined);
  await Promise.race([
    ended,
    waitFor(
      `server on ${port}`,
      async () => {
        const res = await fetch(`http://127.0.0.1:${port}/auth/`, { headers: { authorization: auth } });
        return res.status === 200;
      },
      30_000,
      100,
    ),
  ]);
  return proc;
}

after(() => {
  child?.kill("SIGKILL");
  fs.rmSync(dataDir, { recursive: true, force: true });
});

test("an action interrupted by SIGKILL of the server finishes after a restart", async () => {
  let port: number;
  ({ proc: child, port } = await startServer());
  const res = await fetch(`http://127.0.0.1:${port}/api/app/v1/widget/crash/work/`, {
    method: "POST",
    headers: { authorization: auth, "content-type": "application/json" },
    body: JSON.stringify({ steps: 5, stepMs: 700 }),
  });
  assert.equal(res.status, 202);
  const actionUri = res.headers.get("x-platform-action-uri")!;
  const uuid = actionUri.split("/").filter(Boolean).pop()!;

  // Read the log straight from the database file, as a second reader would.
  const db = openDatabase(`sqlite:${path.join(dataDir, "berth.sqlite")}`);
  const store = new Store(db.kysely, db.dialect);
  try {
    await waitFor("step 2 to begin", async () =>
      (await store.actions.actionLogTail(uuid, 50)).some((l) => l.line === "step 2 begins"),
    );
    child.kill("SIGKILL");
    await new Promise((r) => child!.once("exit", r));
    assert.equal((await store.actions.findAction(uuid))?.state, "In progress", "the kill left it unfinished");

    ({ proc: child, port } = await startServer());
    const done = await waitFor(
      "the action to finish",
      async () => {
        const r = await fetch(`http://127.0.0.1:${port}${actionUri}`, { headers: { authorization: auth } });
        const a = (await r.json()) as { state: string };
        return a.state === "Success" || a.state === "Failed" ? a : undefined;
      },
      60_000,
      100,
    );
    assert.equal(done.state, "Success");
    const lines = (await store.actions.actionLogTail(uuid, 50)).map((l) => l.line);
    assert.ok(
      lines.some((l) => l.startsWith("Resuming at step 2")),
      lines.join("\n"),
    );
    assert.ok(lines.includes("step 5 done"));
  } finally {
    await db.close();
  }
});
