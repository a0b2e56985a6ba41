// The load generator's process (bench/load.ts forks it: its memory and CPU are not the server's,
// so the server's RSS is its own). Each of `connections` keep-alive sockets sends one
// request, reads the whole answer, and sends the next. It writes a request built once and parses
// only what it must (status, Content-Length or chunked framing): Node's HTTP client costs about as
// much CPU per request as the server it measures, and on a 2-core machine the client's cost would
// otherwise be the figure measured at 100 connections.
import net from "node:net";

const { url, headers, connections, durationMs, warmupMs, requests } = JSON.parse(
  process.env.BERTH_LOAD_OPTIONS ?? "{}",
);
const target = new URL(url);
/** A request built once: `GET url` by default, or each of `requests` ({method, path, body}). */
const build = ({ method, path, body }) => {
  const payload = body === undefined ? undefined : Buffer.from(body);
  const head = Buffer.from(
    [
      `${method} ${path} HTTP/1.1`,
      `Host: ${target.host}`,
      ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
      ...(payload ? ["Content-Type: application/json", `Content-Length: ${payload.length}`] : []),
      "",
      "",
    ].join("\r\n"),
    "latin1",
  );
  return payload ? Buffer.concat([head, payload]) : head;
};
// Connection i sends requests[i], requests[i + connections], … round the list.
const built = (requests ?? [{ method: "GET", path: `${target.pathname}${target.search}` }]).map(build);
const CRLF2 = Buffer.from("\r\n\r\n");

const latencies = [];
let errors = 0;
let bad = 0;
let bytes = 0;
let lastEnd = 0;
let measuring = false;
let stop = false;

/** Reads one answer at a time from `socket`; `done(status, bodyBytes)` after each, `fail()` on error. */
function answers(socket, done, fail) {
  let buf = Buffer.alloc(0);
  let head; // { status, length } or { status, chunked: true }
  let bodyAt = 0;
  // Bytes of a Content-Length body still to come: counted as they arrive, never kept (joining a
  // large body's chunks would cost the client more than the server's answer).
  let remaining = 0;
  /** Counts `chunk`'s bytes of the body under way; answers what follows it. */
  const skip = (chunk) => {
    const n = Math.min(remaining, chunk.length);
    remaining -= n;
    if (remaining > 0) return undefined;
    const { status, length } = head;
    head = undefined;
    done(status, length);
    return chunk.subarray(n);
  };
  socket.on("data", (data) => {
    let chunk = data;
    if (head && !head.chunked) {
      chunk = skip(chunk);
      if (!chunk?.length) return;
    }
    buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
    for (;;) {
      if (!head) {
        const end = buf.indexOf(CRLF2);
        if (end < 0) return;
        const text = buf.toString("latin1", 0, end);
        const status = Number(text.slice(9, 12));
        const cl = /\r\ncontent-length: *(\d+)/i.exec(text);
        head = cl
          ? { status, length: Number(cl[1]) }
          : { status, chunked: /\r\ntransfer-encoding: *chunked/i.test(text), length: 0 };
        bodyAt = end + 4;
      }
      if (!head.chunked) {
        remaining = head.length;
        const rest = skip(buf.subarray(bodyAt));
        buf = rest ?? Buffer.alloc(0);
        if (!rest?.length) return;
        continue;
      }
      // Chunked: walk the chunks from bodyAt; the answer ends with a zero-size chunk.
      let at = bodyAt;
      for (;;) {
        const eol = buf.indexOf("\r\n", at);
        if (eol < 0) return;
        const n = Number.parseInt(buf.toString("latin1", at, eol), 16);
        if (Number.isNaN(n)) return fail();
        if (n === 0) {
          const end = buf.indexOf(CRLF2, eol);
          if (end < 0) return;
          const status = head.status;
          buf = buf.subarray(end + 4);
          head = undefined;
          done(status, end + 4 - bodyAt);
          break;
        }
        if (buf.length < eol + 2 + n + 2) return;
        at = eol + 2 + n + 2;
      }
    }
  });
  socket.on("error", fail);
  socket.on("close", fail);
}

// A request counts when it was sent inside the window, even if its answer ends after it; a
// connection whose requests all outlast the window sends one more, counted, so a slow answer
// shows as its latency and a low rate, never as "0 req/s".
function loop(_, index) {
  return new Promise((resolve) => {
    let measured = false;
    let counted = false;
    let t0 = 0n;
    let finished = false;
    let next = index;
    const socket = net.connect({ host: target.hostname, port: Number(target.port), noDelay: true });
    const finish = () => {
      if (finished) return;
      finished = true;
      socket.destroy();
      resolve();
    };
    const send = () => {
      if (stop && measured) return finish();
      counted = measuring || stop;
      t0 = process.hrtime.bigint();
      socket.write(built[next % built.length]);
      next += connections;
    };
    answers(
      socket,
      (status, body) => {
        if (counted) {
          latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
          bytes += body;
          lastEnd = Date.now();
          if (status < 200 || status >= 300) bad++;
          measured = true;
        }
        send();
      },
      () => {
        if (finished) return;
        if (counted || stop) errors++;
        finish();
      },
    );
    socket.once("connect", send);
  });
}

const loops = Array.from({ length: connections }, loop);
setTimeout(() => {
  measuring = true;
  const startedAt = Date.now();
  setTimeout(async () => {
    measuring = false;
    stop = true;
    await Promise.all(loops);
    // The window, or longer when answers to requests sent inside it ended after it.
    const elapsed = Math.max(durationMs, lastEnd - startedAt);
    process.send({ latencies, errors, bad, bytes, elapsed }, () => process.exit(0));
  }, durationMs);
}, warmupMs);
