// The real-engine tier for streams: on a `local` node (a real Docker engine on this host), a
// busybox container prints numbered lines; its log stream over a real WebSocket honours tail and
// follow and tells stdout from stderr, and exec runs commands fed through stdin.
//
// Needs root, dockerd, iproute2, iptables and busybox-static. Without them the file is skipped
// locally, but fails when CI=true so a CI run never passes by skipping.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { drain, type Frame, listen, openStream } from "../streams/support.ts";
import { type Caller, call, createUser, type Harness, startHarness, waitFor } from "../support/harness.ts";
import { deployLocalCluster, localNodesUnavailable, tearDownLocalLab } from "../support/local-lab.ts";

// A lab range and bridge of this file's own (nodes-local: 10.227/berth-r0, services-local:
// 10.226/berth-v0, attach: 10.221, provider test: 10.229/berth-t0, a real install: 10.231/berth0).
const LAB_RANGE = "10.224.0.0/16";
const BRIDGE = "berth-s0";

const unavailable = await localNodesUnavailable({ labRange: LAB_RANGE, bridgeName: BRIDGE });

/** Numbered lines, ten a second, every fifth one also on stderr. */
const COUNTER =
  `sh -c 'i=0; while true; do i=$((i+1)); echo "line $i"; ` +
  `if [ $((i % 5)) -eq 0 ]; then echo "err $i" >&2; fi; sleep 0.1; done'`;

const numberOf = (f: Frame) => Number(/^line (\d+)\n$/.exec(f.log)?.[1]);

describe("streams on a real engine", { skip: unavailable ?? false }, () => {
  let h: Harness;
  let base: string;
  let alice: Caller;
  let container: string;
  const nodeUuids: string[] = [];

  before(async () => {
    h = await startHarness({
      env: {
        BERTH_LOCAL_LAB_RANGE: LAB_RANGE,
        BERTH_LOCAL_BRIDGE: BRIDGE,
        BERTH_CONTAINER_STOP_TIMEOUT_S: "1",
        BERTH_RECONCILE_INTERVAL_MS: "300",
      },
    });
    base = await listen(h);
    alice = await createUser(h, "alice");
  });

  after(async () => {
    // Runs even when a test failed: nothing may act on the engines while they are taken down.
    await tearDownLocalLab(h, { nodeUuids });
  });

  test("a busybox container printing numbered lines runs on a local node", { timeout: 90_000 }, async (t) => {
    const startedAtMs = Date.now();
    const deployed = await deployLocalCluster(h, alice, {
      name: "streams",
      targetNumNodes: 1,
      intervalMs: 200,
    });
    nodeUuids.push(...deployed.nodeUuids);
    t.diagnostic(`node deployed in ${Date.now() - startedAtMs} ms`);

    const service = await call(h, alice, "POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: "counter",
      run_command: COUNTER,
    });
    assert.equal(service.status, 201, service.raw);
    assert.equal((await call(h, alice, "POST", `${service.body.resource_uri}start/`)).status, 202);
    const running = await waitFor(
      "the service running",
      async () => {
        const s = (await call(h, alice, "GET", service.body.resource_uri)).body;
        return s.state === "Running" ? s : undefined;
      },
      30_000,
      100,
    );
    container = running.containers[0];
    // Enough history for a tail of 5 to be a real cut.
    await waitFor(
      "a dozen lines",
      async () => {
        const { frames } = await drain(`${base}${container}logs/?tail=20&follow=false`, alice.auth);
        return frames.filter((f) => f.streamType === "stdout").length >= 12;
      },
      20_000,
      300,
    );
  });

  test("tail=5&follow=false returns the engine's last 5 lines and closes normally", async () => {
    const { frames, closed } = await drain(`${base}${container}logs/?tail=5&follow=false`, alice.auth);
    assert.equal(closed.code, 1000);
    assert.equal(frames.length, 5, JSON.stringify(frames));
    const stdout = frames.filter((f) => f.streamType === "stdout").map(numberOf);
    for (let i = 1; i < stdout.length; i++) assert.equal(stdout[i], stdout[i - 1]! + 1, "consecutive lines");
    for (const f of frames) {
      assert.equal(f.type, "log");
      assert.ok(f.log.endsWith("\n"), "the text keeps its newline");
      assert.ok(Number.isInteger(f.timestamp));
    }
  });

  test("follow continues from the tail without a gap or a repeat, stdout and stderr told apart", {
    timeout: 30_000,
  }, async () => {
    const stream = await openStream(`${base}${container}logs/?tail=1`, { auth: alice.auth });
    await stream.until("ten more lines and an error line", (fs) => {
      const out = fs.filter((f) => f.streamType === "stdout");
      return out.length >= 11 && fs.some((f, i) => i > 0 && f.streamType === "stderr");
    });
    stream.close();
    const out = stream.frames.filter((f) => f.streamType === "stdout").map(numberOf);
    for (let i = 1; i < out.length; i++) assert.equal(out[i], out[i - 1]! + 1, `no gap: ${out.join(",")}`);
    const err = stream.frames.find((f, i) => i > 0 && f.streamType === "stderr");
    assert.match(err.log, /^err \d*[05]\n$/);
  });

  test("exec runs a shell fed through stdin and closes when it exits", { timeout: 30_000 }, async () => {
    const shell = await openStream(`${base}${container}exec/`, { auth: alice.auth });
    shell.send("echo hello from $(hostname)\n");
    shell.send("echo oops >&2\n");
    await shell.until("both answers", (fs) => {
      const text = (type: string) =>
        fs
          .filter((f) => f.streamType === type)
          .map((f) => f.output)
          .join("");
      return /^hello from \S+\n$/.test(text("stdout")) && text("stderr") === "oops\n";
    });
    shell.send("\u0004");
    const closed = await shell.closed;
    assert.equal(closed.code, 1000);
    assert.equal(closed.reason, "exit_code=0");

    const failing = await openStream(
      `${base}${container}exec/?command=${encodeURIComponent("cat; exit 4")}`,
      {
        auth: alice.auth,
      },
    );
    failing.send("through cat\n");
    await failing.until("cat's echo", (fs) => fs.map((f) => f.output).join("") === "through cat\n");
    failing.send("\u0004");
    assert.equal((await failing.closed).reason, "exit_code=4");
  });
});
