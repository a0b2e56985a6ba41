// The last-resort process guard (src/main.ts `guardProcess`, drivers/io-errors.ts): an exception or
// rejection nobody handled that comes from one node's I/O is logged and the real server process
// keeps serving; a programming error still ends it. And which errors count as a node's I/O.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { AnswerBoundError } from "../../src/drivers/bounds.ts";
import { EngineError } from "../../src/drivers/engine.ts";
import { isNodeIoError } from "../../src/drivers/io-errors.ts";
import { TunnelProtocolError } from "../../src/drivers/tunnel/mux.ts";
import { basic, waitFor } from "../support/harness.ts";

const root = path.resolve(import.meta.dirname, "../..");
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-guard-"));
const auth = basic("admin", "guard-test-admin-key-0123");
let child: ChildProcess | undefined;

after(() => {
  child?.kill("SIGKILL");
  fs.rmSync(dataDir, { recursive: true, force: true });
});

/** An error as Node would throw it, with a stack through the given file. */
function thrownIn(file: string, error: Error): Error {
  error.stack = `${error.name}: ${error.message}\n    at IncomingMessage.<anonymous> (${file}:10:5)\n    at IncomingMessage.emit (node:events:519:28)`;
  return error;
}

describe("which errors come from a node's I/O", () => {
  test("the drivers' errors of a node do", () => {
    assert.ok(isNodeIoError(new EngineError("unreachable", "gone")));
    assert.ok(isNodeIoError(new TunnelProtocolError("bad frame")));
    assert.ok(isNodeIoError(new AnswerBoundError("too big", "ERR_BERTH_ANSWER_TOO_LARGE")));
  });

  test("Node's errors thrown while an engine client reads an answer do", () => {
    const tooLong = Object.assign(new Error("Cannot create a string longer than 0x1fffffe8 characters"), {
      code: "ERR_STRING_TOO_LONG",
    });
    assert.ok(isNodeIoError(thrownIn("/srv/berth/node_modules/docker-modem/lib/modem.js", tooLong)));
    assert.ok(
      isNodeIoError(
        thrownIn("/srv/berth/src/drivers/docker/streams.ts", new RangeError("Invalid array length")),
      ),
    );
    assert.ok(
      isNodeIoError(
        thrownIn(
          "/srv/berth/src/drivers/tunnel/mux.ts",
          Object.assign(new Error("reset"), { code: "ECONNRESET" }),
        ),
      ),
    );
  });

  test("the same errors elsewhere, programming errors anywhere, and non-errors do not", () => {
    const reset = Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" });
    assert.ok(!isNodeIoError(thrownIn("/srv/berth/node_modules/pg/lib/client.js", reset)));
    assert.ok(!isNodeIoError(thrownIn("/srv/berth/src/api/app.ts", new RangeError("Invalid array length"))));
    assert.ok(
      !isNodeIoError(
        thrownIn("/srv/berth/src/drivers/docker/docker-engine.ts", new TypeError("x is undefined")),
      ),
    );
    assert.ok(
      !isNodeIoError(thrownIn("/srv/berth/src/drivers/docker/docker-engine.ts", new ReferenceError("y"))),
    );
    const assertion = Object.assign(new Error("expected"), { code: "ERR_ASSERTION" });
    assert.ok(!isNodeIoError(thrownIn("/srv/berth/src/drivers/tunnel/mux.ts", assertion)));
    assert.ok(!isNodeIoError("a string"));
    assert.ok(!isNodeIoError(undefined));
  });
});

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

test("the server process logs a node's I/O error it was not meant to see and keeps serving; a bug still ends it", async () => {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  child = spawn(process.execPath, ["--import", "tsx", "test/support/server-with-faults.ts"], {
    cwd: root,
    env: {
      ...process.env,
      BERTH_LISTEN: `127.0.0.1:${port}`,
      BERTH_DATA_DIR: dataDir,
      BERTH_ADMIN_USERNAME: "admin",
      BERTH_ADMIN_PASSWORD: "admin-password",
      BERTH_ADMIN_API_KEY: "guard-test-admin-key-0123",
      BERTH_AUTO_ATTACH_ENGINE: "false",
      BERTH_LOG_LEVEL: "warn",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (d) => (output += d));
  child.stderr?.on("data", (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => child!.once("exit", (code) => resolve(code)));
  await waitFor(
    "the server",
    async () => {
      if (child!.exitCode !== null) throw new Error(`server exited: ${output}`);
      return (await fetch(`${base}/healthz`).catch(() => undefined))?.status === 200;
    },
    30_000,
    100,
  );
  const fault = (kind: string) =>
    fetch(`${base}/api/app/v1/test-fault/`, {
      method: "POST",
      headers: { authorization: auth, "content-type": "application/json" },
      body: JSON.stringify({ kind }),
    });

  for (const kind of ["node-io-throw", "node-io-rejection", "node-io-throw"]) {
    assert.equal((await fault(kind)).status, 202);
    await new Promise((r) => setTimeout(r, 300));
    const health = await fetch(`${base}/healthz`);
    assert.equal(health.status, 200, `${kind}: the server still answers`);
    assert.equal(child.exitCode, null, `${kind}: the server still runs`);
  }
  await waitFor(
    "the log lines",
    async () => (output.match(/from a node's I\/O; Berth keeps serving/g) ?? []).length >= 3,
  );
  assert.match(output, /uncaught exception from a node's I\/O; Berth keeps serving/);
  assert.match(output, /unhandled rejection from a node's I\/O; Berth keeps serving/);
  assert.match(output, /broke the rules/);

  assert.equal((await fault("bug")).status, 202);
  const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r("still running"), 10_000))]);
  assert.equal(code, 1, "a programming error ends the process with status 1");
  assert.match(output, /uncaught exception: TypeError/);
});
