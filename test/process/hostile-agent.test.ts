// A node registered with a token, whose self-written agent speaks the tunnel protocol and answers
// Berth's engine calls with hostile bodies: GET /info of 300 MiB as one JSON string, 300 MiB of
// small JSON objects, and answers that never end. Against the real server process (src/main.ts,
// with its process guard): it keeps answering /healthz within 2 s throughout, its resident memory
// (VmHWM, the peak) stays under 1 GB, each health check ends in a bounded time that does not grow
// with the hanging calls before it, and the node turns Unreachable with a reason naming the bound.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import WebSocket from "ws";
import { forwardToEngineSocket } from "../../src/drivers/tunnel/forwarder.ts";
import type { TunnelMux } from "../../src/drivers/tunnel/mux.ts";
import { engineFacts } from "../agent/support.ts";
import { basic, waitFor } from "../support/harness.ts";

const root = path.resolve(import.meta.dirname, "../..");
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-hostile-"));
const engineSocket = path.join(dir, "engine.sock");
const auth = basic("admin", "hostile-agent-admin-key-0123");
const MiB = 1024 * 1024;
const GB = 1e9;

let child: ChildProcess | undefined;
let base = "";
let engine: http.Server | undefined;
let ws: WebSocket | undefined;
let mux: TunnelMux | undefined;

/** How the agent's engine answers GET /info. */
let mode: "normal" | "one-string" | "many-objects" | "never-ends" = "normal";

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** Writes `total` bytes of `piece` as fast as the reader takes them. */
function pour(res: http.ServerResponse, piece: Buffer, total: number, prefix: string, suffix: string) {
  let left = total;
  res.write(prefix);
  const more = () => {
    while (left > 0 && !res.destroyed) {
      const chunk = left >= piece.length ? piece : piece.subarray(0, left);
      left -= chunk.length;
      if (!res.write(chunk)) {
        res.once("drain", more);
        return;
      }
    }
    if (left === 0 && !res.destroyed) res.end(suffix);
  };
  more();
}

const smallObjects = (() => {
  const item = Buffer.from(`${JSON.stringify({ Id: "f".repeat(64), Names: ["/web-1"], State: "running" })},`);
  return Buffer.concat(Array.from({ length: Math.floor(MiB / item.length) }, () => item));
})();

function hostileEngine(): http.Server {
  return http.createServer((req, res) => {
    const p = (req.url ?? "/").split("?")[0];
    const send = (body: unknown) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (p === "/version") return send({ Version: "27.0.0", ApiVersion: "1.46" });
    if (p === "/info") {
      if (mode === "normal")
        return send({ ID: "HOSTILE:ENGINE", Name: "hostile", NCPU: 2, MemTotal: 2 * 1024 * MiB });
      res.writeHead(200, { "content-type": "application/json" });
      if (mode === "one-string") return pour(res, Buffer.alloc(MiB, "a"), 300 * MiB, '{"ID":"', '"}');
      if (mode === "many-objects") return pour(res, smallObjects, 300 * MiB, "[", "{}]");
      res.write('{"ID":"'); // and never more
      return;
    }
    if (p === "/containers/json") return send([]);
    if (p === "/events") {
      res.writeHead(200, { "content-type": "application/json" });
      return; // open, silent: like an engine with nothing to report
    }
    res.writeHead(404, { "content-type": "application/json" });
    res.end(JSON.stringify({ message: "not here" }));
  });
}

/** The self-written agent: the tunnel WebSocket, each stream Berth opens connected to the engine above. */
function connectAgent(nodeUuid: string, nodeKey: string): Promise<void> {
  return new Promise((resolve, reject) => {
    ws = new WebSocket(`${base.replace(/^http/, "ws")}/api/agent/v1/node/${nodeUuid}/tunnel/`, {
      headers: { authorization: `Bearer ${nodeKey}` },
      maxPayload: 1024 * 1024,
    });
    ws.once("error", reject);
    ws.once("open", () => {
      const socket = ws!;
      mux = forwardToEngineSocket(
        {
          send: (frame) => {
            if (socket.readyState === WebSocket.OPEN) socket.send(frame);
          },
          close: (reason) => {
            if (socket.readyState === WebSocket.OPEN) socket.close(1000, reason.slice(0, 120));
          },
        },
        engineSocket,
      );
      socket.on("message", (data, isBinary) => {
        if (isBinary) mux!.receive(Buffer.isBuffer(data) ? data : Buffer.from(data as ArrayBuffer));
      });
      socket.once("close", () => mux?.close("closed"));
      resolve();
    });
  });
}

/** Resident memory of the server process, from /proc: now and its peak so far. */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) * 1024;
  return { rss: kb("VmRSS"), peak: kb("VmHWM") };
}

/** /healthz asked every 200 ms while the test runs: the slowest answer, and whether any failed. */
const watch = { slowestMs: 0, failures: [] as string[], samples: 0, stop: () => {} };
function watchHealth() {
  let stopped = false;
  const loop = async () => {
    while (!stopped) {
      const started = Date.now();
      try {
        const res = await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(5000) });
        await res.arrayBuffer();
        if (res.status !== 200) watch.failures.push(`HTTP ${res.status}`);
      } catch (err) {
        watch.failures.push((err as Error).message);
      }
      watch.slowestMs = Math.max(watch.slowestMs, Date.now() - started);
      watch.samples++;
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  void loop();
  watch.stop = () => {
    stopped = true;
  };
}

async function api(method: string, url: string, body?: unknown) {
  const res = await fetch(`${base}${url}`, {
    method,
    headers: { authorization: auth, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
}

/** The lines of an action's log, read from its log stream as a client would. */
function actionLog(actionUri: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const lines: string[] = [];
    const socket = new WebSocket(`${base.replace(/^http/, "ws")}${actionUri}logs/`, {
      headers: { authorization: auth },
    });
    socket.on("message", (data) => {
      const frame = JSON.parse(String(data)) as { type: string; log?: string };
      if (frame.type === "log") lines.push(frame.log ?? "");
    });
    socket.once("close", () => resolve(lines.join("\n")));
    socket.once("error", reject);
  });
}

before(async () => {
  engine = hostileEngine();
  await new Promise<void>((resolve) => engine!.listen(engineSocket, resolve));
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    cwd: root,
    env: {
      ...process.env,
      BERTH_LISTEN: `127.0.0.1:${port}`,
      BERTH_PUBLIC_URL: base,
      BERTH_DATA_DIR: path.join(dir, "data"),
      BERTH_ADMIN_USERNAME: "admin",
      BERTH_ADMIN_PASSWORD: "admin-password",
      BERTH_ADMIN_API_KEY: "hostile-agent-admin-key-0123",
      BERTH_AUTO_ATTACH_ENGINE: "false",
      BERTH_NODE_HEALTH_INTERVAL_MS: "1000",
      BERTH_NODE_UNREACHABLE_GRACE_MS: "3000",
      BERTH_LOG_LEVEL: "warn",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (d) => {
    stderr = (stderr + d).slice(-20_000);
  });
  child.stdout?.resume();
  await waitFor(
    "the server",
    async () => {
      if (child!.exitCode !== null) throw new Error(`server exited: ${stderr}`);
      return (
        (await fetch(`${base}/auth/`, { headers: { authorization: auth } }).catch(() => undefined))
          ?.status === 200
      );
    },
    30_000,
    100,
  );
});

after(async () => {
  watch.stop();
  ws?.terminate();
  child?.kill("SIGKILL");
  engine?.closeAllConnections();
  await new Promise((r) => engine?.close(r));
  fs.rmSync(dir, { recursive: true, force: true });
});

test("an agent answering 300 MiB or never ending leaves Berth serving, under 1 GB, its node Unreachable with the bound", async (t) => {
  const token = await api("POST", "/api/infra/v1/token/");
  assert.equal(token.status, 201);
  const reg = await fetch(`${base}/api/agent/v1/register/`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ token: token.body.token, engine: engineFacts() }),
  });
  assert.equal(reg.status, 201);
  const node = (await reg.json()) as { uuid: string; node_key: string };
  await connectAgent(node.uuid, node.node_key);
  const nodeUrl = `/api/infra/v1/node/${node.uuid}/`;
  await waitFor(
    "the node to join",
    async () => (await api("GET", nodeUrl)).body.state === "Deployed",
    20_000,
  );
  watchHealth();

  /** A health check: its answer, how long it took, and the log of the action it recorded. */
  const healthCheck = async () => {
    const started = Date.now();
    const r = await api("POST", `${nodeUrl}health-check/`);
    const ms = Date.now() - started;
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return {
      state: r.body.state as string,
      ms,
      logs: await actionLog(r.headers.get("x-platform-action-uri")!),
    };
  };

  /** What must hold at every point: the server runs, under 1 GB at its peak, /healthz fast and 200. */
  const assertServing = (when: string) => {
    assert.equal(child!.exitCode, null, `${when}: the server is still running`);
    const memory = memoryOf(child!.pid!);
    t.diagnostic(
      `${when}: peak RSS ${(memory.peak / MiB).toFixed(0)} MiB, slowest /healthz ${watch.slowestMs} ms`,
    );
    assert.ok(memory.peak < GB, `${when}: the server's peak RSS was ${(memory.peak / MiB).toFixed(0)} MiB`);
    assert.deepEqual(watch.failures, [], `${when}: every /healthz answered 200`);
    assert.ok(watch.slowestMs < 2000, `${when}: the slowest /healthz took ${watch.slowestMs} ms`);
    return memory;
  };

  for (const hostile of ["one-string", "many-objects"] as const) {
    mode = hostile;
    // The health watcher (every second) finds it out by itself, within its grace (3 s)…
    await waitFor(
      `${hostile}: the node to turn Unreachable`,
      async () => (await api("GET", nodeUrl)).body.state === "Unreachable",
      20_000,
      200,
    );
    // …and a health check (allowed once Unreachable) says why in its action's log.
    const check = await healthCheck();
    assert.equal(check.state, "Unreachable", hostile);
    assert.match(
      check.logs,
      /The node's engine did not answer: .*the answer to GET \/info was larger than 8 MiB/,
      hostile,
    );
    assert.ok(check.ms < 10_000, `${hostile}: the health check took ${check.ms} ms`);
    // The watcher keeps probing meanwhile (every second): nothing piles up.
    await new Promise((r) => setTimeout(r, 3000));
    assertServing(hostile);
    if (hostile === "one-string") {
      mode = "normal";
      assert.equal((await healthCheck()).state, "Deployed");
    }
  }

  mode = "never-ends";
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const check = await healthCheck();
    assertServing(`never-ending answers, health check ${i + 1}`);
    assert.equal(check.state, "Unreachable");
    assert.match(check.logs, /no answer within 4000 ms/);
    times.push(check.ms);
  }
  assert.ok(
    times.every((t) => t < 6000) && times.at(-1)! < times[0]! + 1500,
    `each health check ends at the probe's timeout, later ones no slower: ${times.join(", ")} ms`,
  );

  // The agent answers properly again: the node is Deployed again, the server none the worse.
  mode = "normal";
  const back = await healthCheck();
  assert.equal(back.state, "Deployed");
  assert.ok(back.ms < 2000, `a healthy answer took ${back.ms} ms`);
  await new Promise((r) => setTimeout(r, 1000));
  watch.stop();

  const memory = assertServing("the end");
  t.diagnostic(
    `peak RSS ${(memory.peak / MiB).toFixed(0)} MiB (now ${(memory.rss / MiB).toFixed(0)} MiB); slowest /healthz ${watch.slowestMs} ms of ${watch.samples}; never-ending health checks ${times.join(", ")} ms`,
  );
  assert.ok(watch.samples > 20, `healthz was asked ${watch.samples} times`);
});
