// The events subscribers of bench/writes-fanout.ts, in a process of their own (forked), so that
// their CPU is theirs and the server's CPU figures are the server's. Each of `subscribers` raw TCP
// sockets upgrades to the events stream and parses only frame headers, and every tenth socket each
// text frame's `datetime` too (the delay from the write to its arrival; a pass writes the sockets
// in the order they joined, so every tenth samples early and late ones alike): a full WebSocket
// client per socket, or a date parsed per delivery, would cost this process more than the server's
// fan-out, and on a 2-core machine that CPU would be taken from the server it measures.
// Messages: → {kind:"ready"} once all are open; ← "mark" (CPU counted from now), {expected}
// (deliveries to wait for) or "report"; → {kind:"done", delivered, closes, closeCodes, histogram
// (of the sampled deliveries), sampled, cpuMs}.
import net from "node:net";

const { port, path, auth, subscribers } = JSON.parse(process.env.BERTH_SUBSCRIBERS_OPTIONS ?? "{}");
const histogram = new Uint32Array(60001);
const DATETIME = Buffer.from('"datetime":"');
const CRLF2 = Buffer.from("\r\n\r\n");
const PONG = Buffer.from([0x8a, 0x80, 0, 0, 0, 0]);
const request = Buffer.from(
  `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
    `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: ${auth}\r\n\r\n`,
  "latin1",
);
let delivered = 0;
let expected = Number.POSITIVE_INFINITY;
let open = 0;
let closes = 0;
const closeCodes = {};
let finished = false;
let sampled = 0;
let cpu0 = process.cpuUsage();

function finish() {
  if (finished) return;
  finished = true;
  const cpu = process.cpuUsage(cpu0);
  process.send(
    {
      kind: "done",
      delivered,
      closes,
      closeCodes,
      histogram: Array.from(histogram),
      sampled,
      cpuMs: (cpu.user + cpu.system) / 1000,
    },
    () => process.exit(0),
  );
}

/** Parses the frames in `buf` from `at`; answers where the first incomplete frame starts. */
function frames(buf, now, socket, timed) {
  let at = 0;
  for (;;) {
    if (buf.length - at < 2) return at;
    const opcode = buf[at] & 0x0f;
    let length = buf[at + 1] & 0x7f;
    let offset = at + 2;
    if (length === 126) {
      if (buf.length - at < 4) return at;
      length = buf.readUInt16BE(at + 2);
      offset = at + 4;
    } else if (length === 127) {
      if (buf.length - at < 10) return at;
      length = Number(buf.readBigUInt64BE(at + 2));
      offset = at + 10;
    }
    const end = offset + length;
    if (buf.length < end) return at;
    if (opcode === 1) {
      const d = timed ? buf.indexOf(DATETIME, offset) : -1;
      if (d >= 0 && d < end) {
        const sent = Date.parse(buf.toString("latin1", d + DATETIME.length, d + DATETIME.length + 24));
        histogram[Math.min(60000, Math.max(0, now - sent))]++;
        sampled++;
      }
      delivered++;
    } else if (opcode === 9) {
      // The server's ping (dead peers are dropped): an empty pong, masked with a zero key.
      socket.write(PONG);
    } else if (opcode === 8 && length >= 2) {
      const code = buf.readUInt16BE(offset);
      closeCodes[code] = (closeCodes[code] ?? 0) + 1;
    }
    at = end;
  }
}

for (let i = 0; i < subscribers; i++) {
  const timed = i % 10 === 0;
  const socket = net.connect({ host: "127.0.0.1", port, noDelay: true });
  let upgraded = false;
  let rest = null;
  socket.on("connect", () => socket.write(request));
  socket.on("error", (err) => process.send({ kind: "error", message: String(err) }));
  socket.on("close", () => {
    closes++;
  });
  socket.on("data", (data) => {
    let buf = rest ? Buffer.concat([rest, data]) : data;
    rest = null;
    if (!upgraded) {
      const end = buf.indexOf(CRLF2);
      if (end < 0) {
        rest = buf;
        return;
      }
      const head = buf.toString("latin1", 0, end);
      if (!head.startsWith("HTTP/1.1 101")) {
        process.send({ kind: "error", message: head.split("\r\n")[0] });
        return;
      }
      upgraded = true;
      buf = buf.subarray(end + 4);
      if (++open === subscribers) process.send({ kind: "ready" });
    }
    const used = frames(buf, timed ? Date.now() : 0, socket, timed);
    if (used < buf.length) rest = Buffer.from(buf.subarray(used));
    if (delivered >= expected) finish();
  });
}

process.on("message", (m) => {
  if (m === "report") return finish();
  if (m === "mark") {
    cpu0 = process.cpuUsage();
    return;
  }
  expected = m.expected;
  if (delivered >= expected) finish();
});
