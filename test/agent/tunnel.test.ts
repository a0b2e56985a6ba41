// The tunnel protocol (drivers/tunnel) between two in-process ends, with a plain HTTP server on a
// unix socket behind the agent's end: many requests at once, upgraded streams, large bodies under
// flow control, and a far end that breaks the rules (it is untrusted: the tunnel closes, nothing
// else happens).
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { forwardToEngineSocket } from "../../src/drivers/tunnel/forwarder.ts";
import { TunnelHttpAgent } from "../../src/drivers/tunnel/hub.ts";
import {
  FRAME,
  MAX_STREAMS,
  STREAM_WINDOW_BYTES,
  TunnelMux,
  type TunnelStream,
} from "../../src/drivers/tunnel/mux.ts";

/** Two muxes joined back to back; messages cross asynchronously, as over a socket. */
function pair(socketPath: string) {
  const log = { toAgent: 0, toBerth: 0, bytesToBerth: 0 };
  let agent: TunnelMux;
  const berth = new TunnelMux(
    {
      send: (f) => {
        log.toAgent++;
        setImmediate(() => agent.receive(f));
      },
      close: () => setImmediate(() => agent.close("peer closed")),
    },
    { role: "opener" },
  );
  agent = forwardToEngineSocket(
    {
      send: (f) => {
        log.toBerth++;
        log.bytesToBerth += f.length;
        setImmediate(() => berth.receive(f));
      },
      close: () => setImmediate(() => berth.close("peer closed")),
    },
    socketPath,
  );
  const httpAgent = new TunnelHttpAgent(() => berth.open());
  return { berth, agent, httpAgent, log };
}

function request(
  agent: http.Agent,
  opts: { method?: string; path: string; body?: Buffer; headers?: http.OutgoingHttpHeaders },
): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: "engine",
        port: 2375,
        agent,
        method: opts.method ?? "GET",
        path: opts.path,
        headers: opts.headers,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(opts.body);
  });
}

describe("the tunnel", () => {
  let dir: string;
  let socketPath: string;
  let server: http.Server;
  const big = Buffer.alloc(3 * 1024 * 1024 + 17, "abcdefghij");

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "berth-tunnel-"));
    socketPath = path.join(dir, "engine.sock");
    server = http.createServer((req, res) => {
      if (req.url === "/big") {
        res.writeHead(200, { "content-length": big.length }).end(big);
        return;
      }
      if (req.url?.startsWith("/slow/")) {
        const ms = Number(req.url.slice("/slow/".length));
        setTimeout(() => res.end(`slept ${ms}`), ms);
        return;
      }
      if (req.url === "/echo") {
        const chunks: Buffer[] = [];
        req.on("data", (c: Buffer) => chunks.push(c));
        req.on("end", () => res.end(Buffer.concat(chunks)));
        return;
      }
      res.writeHead(404).end("nothing here");
    });
    // An upgraded connection, as Docker's attach and exec: raw bytes both ways after a 101.
    server.on("upgrade", (req, socket) => {
      socket.write("HTTP/1.1 101 UPGRADED\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n");
      socket.on("data", (d: Buffer) => socket.write(d.toString().toUpperCase()));
      socket.on("end", () => socket.end("bye\n"));
      void req;
    });
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  test("many requests at once each get their own stream and their own answer", async () => {
    const { httpAgent, berth } = pair(socketPath);
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) => request(httpAgent, { path: `/slow/${(i * 7) % 50}` })),
    );
    answers.forEach((a, i) => {
      assert.equal(a.status, 200);
      assert.equal(a.body.toString(), `slept ${(i * 7) % 50}`);
    });
    const missing = await request(httpAgent, { path: "/nope" });
    assert.equal(missing.status, 404);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(berth.openStreams, 0, "every stream is closed once its request is done");
  });

  test("large bodies cross whole both ways, within the flow-control window", async () => {
    const { httpAgent, log } = pair(socketPath);
    const down = await request(httpAgent, { path: "/big" });
    assert.equal(down.body.length, big.length);
    assert.ok(down.body.equals(big));
    assert.ok(log.toBerth > big.length / (32 * 1024), "split into frames of at most 32 KiB");
    const up = await request(httpAgent, { method: "POST", path: "/echo", body: big });
    assert.ok(up.body.equals(big));
  });

  test("a slow reader holds the far end back instead of letting data pile up", async () => {
    const { httpAgent, log } = pair(socketPath);
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = http.request({ host: "engine", path: "/big", agent: httpAgent }, resolve);
      req.on("error", reject);
      req.end();
    });
    res.pause();
    await new Promise((r) => setTimeout(r, 300));
    // Without reading, no more than the window (plus the reader's own buffers) has crossed.
    assert.ok(
      log.bytesToBerth < STREAM_WINDOW_BYTES + 256 * 1024,
      `${log.bytesToBerth} bytes crossed while nobody read`,
    );
    const chunks: Buffer[] = [];
    res.on("data", (c: Buffer) => chunks.push(c));
    res.resume();
    await new Promise((r) => res.on("end", r));
    assert.equal(Buffer.concat(chunks).length, big.length);
  });

  test("an upgraded request keeps its stream for raw bytes both ways (attach, exec)", async () => {
    const { httpAgent } = pair(socketPath);
    const socket = await new Promise<import("node:stream").Duplex>((resolve, reject) => {
      const req = http.request({
        host: "engine",
        path: "/exec/123/start",
        method: "POST",
        agent: httpAgent,
        headers: { Connection: "Upgrade", Upgrade: "tcp" },
      });
      req.on("upgrade", (_res, s, head) => {
        if (head.length) s.unshift(head);
        resolve(s);
      });
      req.on("error", reject);
      req.end();
    });
    const received: Buffer[] = [];
    socket.on("data", (d: Buffer) => received.push(d));
    socket.write("hello ");
    socket.write("tunnel\n");
    socket.end();
    await new Promise((r) => socket.on("end", r));
    assert.equal(Buffer.concat(received).toString(), "HELLO TUNNEL\nbye\n");
  });

  test("when the tunnel is gone, calls fail at once as a connection error", async () => {
    const { httpAgent, berth } = pair(socketPath);
    berth.close("agent disconnected");
    await assert.rejects(request(httpAgent, { path: "/slow/1" }), (err: NodeJS.ErrnoException) => {
      assert.equal(err.code, "ECONNREFUSED");
      return true;
    });
  });

  test("an agent whose engine socket is missing resets the stream; Berth sees a connection error", async () => {
    const { httpAgent } = pair(path.join(dir, "missing.sock"));
    await assert.rejects(request(httpAgent, { path: "/_ping" }), /closed the stream|ENOENT|socket hang up/);
  });

  test("a stream may name another target the agent offers (its router); one it does not offer is reset", async () => {
    let agent: TunnelMux;
    const berth = new TunnelMux(
      { send: (f) => setImmediate(() => agent.receive(f)), close: () => {} },
      { role: "opener" },
    );
    const router = http.createServer((_req, res) => res.end("router here"));
    agent = forwardToEngineSocket(
      { send: (f) => setImmediate(() => berth.receive(f)), close: () => {} },
      socketPath,
      { router: (stream) => router.emit("connection", stream) },
    );
    const to = (target: string) => new TunnelHttpAgent(() => berth.open(target));
    assert.equal((await request(to("router"), { path: "/" })).body.toString(), "router here");
    assert.equal(
      (await request(to(""), { path: "/slow/1" })).body.toString(),
      "slept 1",
      "the engine as before",
    );
    await assert.rejects(request(to("shell"), { path: "/" }), /offers no shell/);
    assert.equal(berth.closed, false, "an unknown target ends its stream, not the tunnel");
  });
});

describe("a far end that breaks the rules closes the tunnel, and only the tunnel", () => {
  /** Berth's end, and what the untrusted agent end can send into it. */
  function berthEnd() {
    const closed: string[] = [];
    const berth = new TunnelMux(
      { send: () => {}, close: (reason) => closed.push(reason) },
      { role: "opener" },
    );
    const frame = (type: number, id: number, payload = Buffer.alloc(0)) => {
      const h = Buffer.alloc(5);
      h.writeUInt8(type, 0);
      h.writeUInt32BE(id, 1);
      berth.receive(Buffer.concat([h, payload]));
    };
    return { berth, closed, frame };
  }

  const cases: [string, (e: ReturnType<typeof berthEnd>, first: TunnelStream) => void][] = [
    ["opening a stream (only Berth opens streams)", (e) => e.frame(FRAME.OPEN, 7)],
    ["a frame for a stream Berth never opened", (e) => e.frame(FRAME.DATA, 99, Buffer.from("x"))],
    ["a frame shorter than its header", (e) => e.berth.receive(Buffer.from([2, 0]))],
    ["an unknown frame type", (e) => e.frame(42, 1)],
    ["a data frame larger than 32 KiB", (e) => e.frame(FRAME.DATA, 1, Buffer.alloc(32 * 1024 + 1))],
    [
      "more data than the window allows",
      (e, first) => {
        first.pause();
        for (let i = 0; i <= STREAM_WINDOW_BYTES / (32 * 1024); i++)
          e.frame(FRAME.DATA, 1, Buffer.alloc(32 * 1024));
      },
    ],
    [
      "a window grant beyond what was sent",
      (e) => {
        const p = Buffer.alloc(4);
        p.writeUInt32BE(1, 0);
        e.frame(FRAME.WINDOW, 1, p);
      },
    ],
    [
      "data after the end of a stream",
      (e, first) => {
        first.resume();
        e.frame(FRAME.END, 1);
        e.frame(FRAME.DATA, 1, Buffer.from("late"));
      },
    ],
  ];
  for (const [what, act] of cases) {
    test(what, () => {
      const e = berthEnd();
      const streams = [e.berth.open(), e.berth.open()];
      const errors: Error[] = [];
      for (const s of streams) s.on("error", (err) => errors.push(err));
      // Streams 1 and 2 exist now; the case's frames address stream 1 (or none).
      act(e, streams[0]!);
      assert.equal(e.closed.length, 1, "the tunnel is closed");
      assert.match(e.closed[0]!, /^protocol error: /);
      assert.ok(e.berth.closed);
      assert.throws(() => e.berth.open(), /protocol error/);
      assert.ok(
        streams.every((s) => s.destroyed),
        "every stream of that tunnel ends",
      );
    });
  }

  test("more than the stream limit at once is refused on Berth's side", () => {
    const e = berthEnd();
    for (let i = 0; i < MAX_STREAMS; i++) e.berth.open().on("error", () => {});
    assert.throws(() => e.berth.open(), /already carries/);
    assert.equal(e.closed.length, 0);
  });
});
