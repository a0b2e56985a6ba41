// Every answer of an engine is bounded before Berth buffers or parses it (drivers/bounds.ts): the
// Docker engine client against a fake engine on 127.0.0.1 that answers with huge bodies, bodies
// that never end, frames and lines without end, and output nobody reads. Each call fails with an
// error naming the answer and the bound, the fake engine manages to send only about that much, and
// the process's memory does not grow with what it offered.
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { Readable } from "node:stream";
import { after, before, describe, test } from "node:test";
import { ENGINE_ANSWER_BYTES, readBounded, withinTime } from "../../src/drivers/bounds.ts";
import { DockerEngine } from "../../src/drivers/docker/docker-engine.ts";
import { EngineError } from "../../src/drivers/engine.ts";

const MiB = 1024 * 1024;

type Route = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/** What the fake engine managed to hand to the kernel (it writes only as fast as Berth reads). */
const sent = { bytes: 0 };

/** Writes `total` bytes of `piece`, as fast as the reader takes them; `end: false` leaves the body open. */
function pour(
  out: http.ServerResponse | Socket,
  piece: Buffer,
  total: number,
  opts: { prefix?: string; suffix?: string; end?: boolean } = {},
) {
  let left = total;
  if (opts.prefix) out.write(opts.prefix);
  const more = () => {
    while (left > 0 && !out.destroyed) {
      const chunk = left >= piece.length ? piece : piece.subarray(0, left);
      left -= chunk.length;
      sent.bytes += chunk.length;
      if (!out.write(chunk)) {
        out.once("drain", more);
        return;
      }
    }
    if (left === 0 && opts.end !== false && !out.destroyed) out.end(opts.suffix ?? "");
  };
  more();
}

const json = (res: http.ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
};

const INFO = {
  ID: "ABCD:EFGH",
  Name: "fake-host",
  NCPU: 2,
  MemTotal: 2 * 1024 * MiB,
  ServerVersion: "27.0.0",
  Driver: "overlay2",
  OperatingSystem: "Fake OS",
};

let routes: Record<string, Route> = {};
let upgrade: ((socket: Socket) => void) | undefined;
let server: http.Server;
let port: number;
const openSockets = new Set<Socket>();

before(async () => {
  server = http.createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    const route = routes[`${req.method} ${path}`];
    if (route) route(req, res);
    else if (path === "/version") json(res, 200, { Version: "27.0.0", ApiVersion: "1.46" });
    else if (path === "/info") json(res, 200, INFO);
    else json(res, 404, { message: `no route ${req.method} ${path}` });
  });
  server.on("connection", (s: Socket) => {
    openSockets.add(s);
    s.once("close", () => openSockets.delete(s));
  });
  server.on("upgrade", (_req, socket: Socket) => {
    socket.write(
      "HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n",
    );
    upgrade?.(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});

after(async () => {
  for (const s of openSockets) s.destroy();
  await new Promise((resolve) => server.close(resolve));
});

function engine(opts: Partial<ConstructorParameters<typeof DockerEngine>[0]> = {}) {
  return new DockerEngine({ endpoint: `tcp://127.0.0.1:${port}`, callTimeoutMs: 10_000, ...opts });
}

/** Runs `work` while sampling the RSS; resolves with its outcome and the RSS growth. */
async function measured<T>(
  work: () => Promise<T>,
): Promise<{ result: T | Error; grewMiB: number; ms: number }> {
  global.gc?.();
  const base = process.memoryUsage().rss;
  let peak = base;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 20);
  const started = Date.now();
  let result: T | Error;
  try {
    result = await work();
  } catch (err) {
    result = err as Error;
  } finally {
    clearInterval(sampler);
  }
  peak = Math.max(peak, process.memoryUsage().rss);
  return { result, grewMiB: (peak - base) / MiB, ms: Date.now() - started };
}

function assertBound(result: unknown, pattern: RegExp) {
  assert.ok(result instanceof EngineError, `expected an EngineError, got ${String(result)}`);
  assert.equal(result.kind, "unreachable");
  assert.match(result.message, pattern);
  assert.match(result.message, new RegExp(`127\\.0\\.0\\.1:${port}`), "the error names the engine");
}

describe("JSON answers", () => {
  test("GET /info answering 300 MiB as one JSON string fails at 8 MiB; memory stays flat", async () => {
    routes = {
      "GET /info": (_req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        pour(res, Buffer.alloc(MiB, "a"), 300 * MiB, { prefix: '{"ID":"', suffix: '"}' });
      },
    };
    sent.bytes = 0;
    const { result, grewMiB, ms } = await measured(() => engine().info());
    assertBound(result, /the answer to GET \/info was larger than 8 MiB/);
    assert.ok(sent.bytes < 40 * MiB, `the engine got to send ${sent.bytes} bytes`);
    assert.ok(grewMiB < 150, `RSS grew by ${grewMiB.toFixed(0)} MiB`);
    assert.ok(ms < 5000, `took ${ms} ms`);
  });

  test("a declared Content-Length past the bound fails before the body is read", async () => {
    routes = {
      "GET /info": (_req, res) => {
        res.writeHead(200, { "content-type": "application/json", "content-length": String(300 * MiB) });
        pour(res, Buffer.alloc(MiB, " "), 300 * MiB);
      },
    };
    sent.bytes = 0;
    const { result } = await measured(() => engine().info());
    assertBound(result, /larger than 8 MiB/);
    assert.ok(sent.bytes < 40 * MiB, `the engine got to send ${sent.bytes} bytes`);
  });

  test("a container list of 300 MiB of small objects fails at its own bound", async () => {
    const item = Buffer.from(`${JSON.stringify({ Id: "c".repeat(64), Names: ["/x"], Labels: {} })},`);
    const piece = Buffer.concat(Array.from({ length: Math.floor(MiB / item.length) }, () => item));
    routes = {
      "GET /containers/json": (_req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        pour(res, piece, 300 * MiB, { prefix: "[", suffix: "{}]" });
      },
    };
    sent.bytes = 0;
    const { result, grewMiB } = await measured(() => engine().listContainers({ all: true }));
    assertBound(result, /the answer to GET \/containers\/json was larger than 48 MiB/);
    assert.ok(sent.bytes < 90 * MiB, `the engine got to send ${sent.bytes} bytes`);
    assert.ok(grewMiB < 250, `RSS grew by ${grewMiB.toFixed(0)} MiB`);
  });

  test("answers that never end fail at the call timeout, and later calls take no longer", async () => {
    routes = {
      "GET /info": (_req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.write('{"ID":"');
      },
    };
    const e = engine({ callTimeoutMs: 300 });
    const times: number[] = [];
    for (let i = 0; i < 8; i++) {
      const { result, ms } = await measured(() => e.info());
      assertBound(result, /did not answer within 300 ms/);
      times.push(ms);
    }
    // Forty more left hanging at once do not slow the next one either.
    await Promise.allSettled(Array.from({ length: 40 }, () => e.info()));
    const { ms: last } = await measured(() => e.info());
    times.push(last);
    assert.ok(
      times.every((t) => t < 1000),
      `each call ends at its timeout: ${times.join(", ")} ms`,
    );
  });

  test("a probe's signal ends the call and its answer at once", async () => {
    let closed = false;
    routes = {
      "GET /info": (_req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.write("{");
        res.once("close", () => {
          closed = true;
        });
      },
    };
    const call = new AbortController();
    const pending = engine().info({ signal: call.signal });
    await new Promise((r) => setTimeout(r, 100));
    call.abort(new Error("probe timeout"));
    await assert.rejects(pending);
    await new Promise((r) => setTimeout(r, 100));
    assert.ok(closed, "the engine's connection was closed");
  });

  test("ordinary answers still pass: info, a list, an engine's refusal with its message", async () => {
    routes = {
      "GET /containers/json": (_req, res) =>
        json(res, 200, [{ Id: "abc", Names: ["/one"], Labels: {}, State: "running" }]),
      "POST /containers/nope/start": (_req, res) => json(res, 404, { message: "No such container: nope" }),
    };
    const e = engine();
    const info = await e.info();
    assert.equal(info.id, "ABCD:EFGH");
    assert.equal(info.cpus, 2);
    assert.equal(info.memoryMb, 2048);
    const list = await e.listContainers({ all: true });
    assert.equal(list.length, 1);
    await assert.rejects(e.startContainer("nope"), (err: EngineError) => {
      assert.equal(err.kind, "not_found");
      assert.equal(err.message, "No such container: nope");
      return true;
    });
  });

  test("facts an engine reports are cut to size before Berth stores them", async () => {
    routes = {
      "GET /info": (_req, res) =>
        json(res, 200, { ...INFO, Name: "n".repeat(100_000), NCPU: "many", MemTotal: -5 }),
    };
    const info = await engine().info();
    assert.equal(info.name.length, 256);
    assert.equal(info.cpus, 0);
    assert.equal(info.memoryMb, 0);
  });
});

describe("streams", () => {
  test("an event stream with a line that never ends fails at 1 MiB", async () => {
    routes = {
      "GET /events": (_req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        pour(res, Buffer.alloc(64 * 1024, "x"), 300 * MiB, { prefix: '{"Type":"container","Actor":"' });
      },
    };
    sent.bytes = 0;
    const { result, grewMiB } = await measured(async () => {
      for await (const _ of engine().events()) {
        // nothing arrives
      }
    });
    assert.ok(result instanceof Error, String(result));
    assert.match(result.message, /a line of a JSON stream was larger than 1 MiB/);
    assert.ok(sent.bytes < 40 * MiB, `the engine got to send ${sent.bytes} bytes`);
    assert.ok(grewMiB < 150, `RSS grew by ${grewMiB.toFixed(0)} MiB`);
  });

  const inspectRoute =
    (tty: boolean): Route =>
    (_req, res) =>
      json(res, 200, { Id: "c1", Name: "/c1", Config: { Tty: tty, Labels: {} }, State: { Running: true } });

  test("a log frame whose header claims 1 GiB fails at once", async () => {
    routes = {
      "GET /containers/c1/json": inspectRoute(false),
      "GET /containers/c1/logs": (_req, res) => {
        res.writeHead(200, { "content-type": "application/vnd.docker.raw-stream" });
        const header = Buffer.alloc(8);
        header[0] = 1;
        header.writeUInt32BE(1024 * MiB, 4);
        res.write(header);
        pour(res, Buffer.alloc(64 * 1024, "y"), 300 * MiB);
      },
    };
    sent.bytes = 0;
    const { result } = await measured(async () => {
      for await (const _ of engine().logs("c1", { follow: true })) {
        // nothing arrives
      }
    });
    assert.ok(result instanceof Error, String(result));
    assert.match(result.message, /an output frame of 1073741824 bytes was larger than 1 MiB/);
    assert.ok(sent.bytes < 40 * MiB, `the engine got to send ${sent.bytes} bytes`);
  });

  test("tty logs without a newline come in pieces of 256 KiB, never held whole", async () => {
    routes = {
      "GET /containers/c1/json": inspectRoute(true),
      "GET /containers/c1/logs": (_req, res) => {
        res.writeHead(200, { "content-type": "application/vnd.docker.raw-stream" });
        pour(res, Buffer.alloc(64 * 1024, "z"), 20 * MiB);
      },
    };
    let lines = 0;
    let longest = 0;
    let chars = 0;
    for await (const line of engine().logs("c1")) {
      lines++;
      chars += line.line.length;
      longest = Math.max(longest, line.line.length);
    }
    assert.equal(chars, 20 * MiB);
    assert.equal(longest, ENGINE_ANSWER_BYTES.logLine);
    assert.equal(lines, (20 * MiB) / ENGINE_ANSWER_BYTES.logLine);
  });

  test("exec output nobody reads holds the engine back; read later, it all arrives", async () => {
    let execSent = 0;
    const frame = Buffer.alloc(8 + 32 * 1024, "o");
    frame.writeUInt32BE(0x01000000, 0);
    frame.writeUInt32BE(32 * 1024, 4);
    const total = 200 * MiB;
    routes = {
      "POST /containers/c1/exec": (_req, res) => json(res, 201, { Id: "e1" }),
      "GET /exec/e1/json": (_req, res) => json(res, 200, { Running: false, ExitCode: 0 }),
    };
    upgrade = (socket) => {
      let left = total / (32 * 1024);
      const more = () => {
        while (left > 0 && !socket.destroyed) {
          left--;
          execSent += 32 * 1024;
          if (!socket.write(frame)) {
            socket.once("drain", more);
            return;
          }
        }
        if (left === 0) socket.end();
      };
      more();
    };
    const session = await engine().exec("c1", { cmd: ["yes"] });
    await new Promise((r) => setTimeout(r, 1500));
    assert.ok(execSent < 40 * MiB, `unread, the engine got to send ${execSent} bytes`);
    let got = 0;
    for await (const out of session.output) got += out.data.length;
    assert.equal(got, total);
    assert.equal(await session.exitCode, 0);
    upgrade = undefined;
  });

  test("a pull whose progress goes silent, or whose line never ends, is given up", async () => {
    routes = {
      "POST /images/create": (_req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.write('{"status":"Pulling from library/busybox"}\n');
      },
    };
    const e = engine({ progressTimeoutsMs: { idleMs: 300, totalMs: 60_000 } });
    const started = Date.now();
    await assert.rejects(
      e.pullImage("busybox:latest"),
      /the progress of pulling busybox:latest said nothing for 300 ms/,
    );
    assert.ok(Date.now() - started < 3000);

    routes = {
      "POST /images/create": (_req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        pour(res, Buffer.alloc(64 * 1024, "p"), 300 * MiB, { prefix: '{"status":"' });
      },
    };
    sent.bytes = 0;
    await assert.rejects(e.pullImage("busybox:latest"), /a line of a JSON stream was larger than 1 MiB/);
    assert.ok(sent.bytes < 40 * MiB, `the engine got to send ${sent.bytes} bytes`);
  });

  test("a pull that keeps talking is still given up at its total time", async () => {
    routes = {
      "POST /images/create": (_req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        const t = setInterval(() => res.write('{"status":"Downloading"}\n'), 50);
        res.once("close", () => clearInterval(t));
      },
    };
    const e = engine({ progressTimeoutsMs: { idleMs: 300, totalMs: 800 } });
    const started = Date.now();
    await assert.rejects(e.pullImage("busybox:latest"), /took longer than/);
    const ms = Date.now() - started;
    assert.ok(ms >= 700 && ms < 3000, `gave up after ${ms} ms`);
  });

  test("an image load whose answer never ends a line fails at 1 MiB", async () => {
    routes = {
      "POST /images/load": (req, res) => {
        req.resume();
        req.once("end", () => {
          res.writeHead(200, { "content-type": "application/json" });
          pour(res, Buffer.alloc(64 * 1024, "l"), 300 * MiB, { prefix: '{"stream":"' });
        });
      },
    };
    sent.bytes = 0;
    await assert.rejects(
      engine().loadImage(Readable.from([Buffer.alloc(1024)])),
      /a line of a JSON stream was larger than 1 MiB/,
    );
    assert.ok(sent.bytes < 40 * MiB, `the engine got to send ${sent.bytes} bytes`);
  });
});

describe("the bounded readers", () => {
  test("readBounded keeps at most its limit and destroys the source past it", async () => {
    let pulled = 0;
    const source = new Readable({
      read() {
        pulled += 64 * 1024;
        this.push(Buffer.alloc(64 * 1024));
      },
    });
    await assert.rejects(readBounded(source, MiB, "the answer"), /the answer was larger than 1 MiB/);
    assert.ok(source.destroyed);
    assert.ok(pulled < 2 * MiB, `pulled ${pulled}`);
    assert.equal((await readBounded(Readable.from([Buffer.from("ok")]), 2, "x")).toString(), "ok");
  });

  test("withinTime destroys a silent source (which ends the stream under it)", async () => {
    let destroyed: Error | undefined;
    const silent = {
      async *[Symbol.asyncIterator]() {
        yield 1;
        await new Promise(() => {});
      },
    };
    const items: number[] = [];
    void (async () => {
      const limits = { idleMs: 100, totalMs: 10_000 };
      for await (const n of withinTime(silent, { destroy: (e) => (destroyed = e) }, limits, "the stream"))
        items.push(n);
    })();
    await new Promise((r) => setTimeout(r, 250));
    assert.deepEqual(items, [1]);
    assert.match(destroyed?.message ?? "", /the stream said nothing for 100 ms; Berth gave up/);
  });
});
