// Benchmark (not a test): the same Docker engine driven directly over TCP and through an agent's
// tunnel (a WebSocket on loopback, drivers/tunnel on both ends, the agent's end on the engine's
// unix socket). Prints engine-call latency (ping, info, list), container create/start/remove times
// and a log-read throughput for both, and the tunnel/direct ratio. Needs root and dockerd:
//   flock /tmp/berth-real.lock npx tsx bench/tunnel.ts [--rounds N]
import http from "node:http";
import { parseArgs } from "node:util";
import { WebSocket, WebSocketServer } from "ws";
import { DockerEngine } from "../src/drivers/docker/docker-engine.ts";
import type { Engine } from "../src/drivers/engine.ts";
import { forwardToEngineSocket } from "../src/drivers/tunnel/forwarder.ts";
import { TunnelHub } from "../src/drivers/tunnel/hub.ts";
import { startPrivateDockerd } from "../test/support/dockerd.ts";

const { values } = parseArgs({ options: { rounds: { type: "string" } } });
const rounds = Number(values.rounds ?? 20);
const NODE = "00000000-0000-4000-8000-00000000bench";

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
}
function p95(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * 0.95))] ?? Number.NaN;
}
async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

interface Figures {
  [metric: string]: number[];
}

/**
 * Every measurement alternates between the two engines clients (direct, then tunnel, in each
 * round), so that a machine whose load changes during the run biases neither side.
 */
async function measure(engines: [Engine, Engine], image: string): Promise<[Figures, Figures]> {
  const figures: [Figures, Figures] = [{}, {}];
  const add = (side: number, metric: string, ms: number) => {
    const f = figures[side]!;
    f[metric] ??= [];
    f[metric].push(ms);
  };
  const both = async (metric: string, times: number, fn: (e: Engine) => Promise<unknown>) => {
    for (let i = 0; i < times; i++)
      for (const [side, e] of engines.entries()) add(side, metric, await timed(() => fn(e)));
  };
  for (const e of engines) for (let i = 0; i < 5; i++) await e.ping(); // warm-up
  await both("ping", rounds * 5, (e) => e.ping());
  await both("info", rounds, (e) => e.info());
  await both("list", rounds, (e) => e.listContainers({ all: true }));
  for (let i = 0; i < rounds; i++) {
    for (const [side, e] of engines.entries()) {
      let id = "";
      add(
        side,
        "create",
        await timed(async () => {
          id = await e.createContainer({ image, cmd: ["sleep", "1000"], labels: { "io.berth.bench": "1" } });
        }),
      );
      add(side, "start", await timed(() => e.startContainer(id)));
      add(side, "remove", await timed(() => e.removeContainer(id, { force: true })));
    }
  }
  const id = await engines[0].createContainer({
    image,
    cmd: ["seq", "1", "100000"],
    labels: { "io.berth.bench": "1" },
  });
  await engines[0].startContainer(id);
  await new Promise((r) => setTimeout(r, 1500));
  await both("logs 100k lines", Math.max(3, Math.floor(rounds / 4)), async (e) => {
    let n = 0;
    for await (const _ of e.logs(id)) n++;
    if (n !== 100000) throw new Error(`read ${n} lines`);
  });
  await engines[0].removeContainer(id, { force: true });
  return figures;
}

const engineProc = await startPrivateDockerd({ tls: false });
const server = http.createServer();
const wss = new WebSocketServer({ server });
const hub = new TunnelHub({ pingIntervalMs: 5000 });
wss.on("connection", (ws) => hub.attach(NODE, ws, "127.0.0.1", Date.now()));
await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
const address = server.address();
if (!address || typeof address === "string") throw new Error("no address");
const agentWs = new WebSocket(`ws://127.0.0.1:${address.port}/`);
await new Promise((r) => agentWs.once("open", r));
const mux = forwardToEngineSocket(
  { send: (f) => agentWs.send(f), close: () => agentWs.close() },
  engineProc.socketPath,
);
agentWs.on("message", (d, isBinary) => {
  if (isBinary) mux.receive(d as Buffer);
});
while (!hub.isConnected(NODE)) await new Promise((r) => setTimeout(r, 10));

try {
  const [direct, tunnel] = await measure(
    [new DockerEngine({ endpoint: engineProc.tcp.address }), hub.engineFor(NODE)],
    engineProc.image,
  );
  const rows = Object.keys(direct).map((metric) => {
    const d = median(direct[metric]!);
    const t = median(tunnel[metric]!);
    return [
      metric,
      d.toFixed(2),
      p95(direct[metric]!).toFixed(2),
      t.toFixed(2),
      p95(tunnel[metric]!).toFixed(2),
      (t / d).toFixed(2),
    ];
  });
  const head = ["engine call (ms)", "direct p50", "direct p95", "tunnel p50", "tunnel p95", "tunnel/direct"];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) =>
    r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  process.stdout.write(
    `Docker engine over TCP vs through the agent tunnel (WebSocket on loopback), ${rounds} rounds\n`,
  );
  process.stdout.write(`${line(head)}\n${rows.map(line).join("\n")}\n`);
  const startD = median(direct.create!) + median(direct.start!);
  const startT = median(tunnel.create!) + median(tunnel.start!);
  process.stdout.write(
    `container start (create + start): direct ${startD.toFixed(1)} ms, tunnel ${startT.toFixed(1)} ms, ratio ${(startT / startD).toFixed(2)}\n`,
  );
} finally {
  agentWs.close();
  hub.closeAll("bench done");
  wss.close();
  server.close();
  await engineProc.stop();
}
