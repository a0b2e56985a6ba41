// Exec over a real WebSocket (CONTRACT §9) on a simulated node: stdin frames, the end-of-input
// frame, output frames per stream, the close when the command exits; refusals on the upgrade.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Caller, call, createUser, type Harness, startHarness } from "../support/harness.ts";
import {
  type Frame,
  inState,
  listen,
  openStream,
  refusal,
  runningService,
  simulatedCluster,
} from "./support.ts";

let h: Harness;
let base: string;
let alice: Caller;
let bob: Caller;
let container: string;

before(async () => {
  h = await startHarness({
    env: { BERTH_RECONCILE_INTERVAL_MS: "200", BERTH_CONTAINER_STOP_TIMEOUT_S: "1" },
  });
  base = await listen(h);
  alice = await createUser(h, "alice");
  bob = await createUser(h, "bob");
  await simulatedCluster(h, alice, 1);
  container = (await runningService(h, alice, { name: "shell" })).containers[0];
});
after(() => h.close());

const output = (frames: Frame[], streamType = "stdout") =>
  frames
    .filter((f) => f.type === "exec" && f.streamType === streamType)
    .map((f) => f.output)
    .join("");

describe("exec", () => {
  test("stdin frames reach the command and its output comes back; \\u0004 ends the input and the socket closes", async () => {
    const s = await openStream(`${base}${container}exec/?command=cat`, { auth: alice.auth });
    s.send("hello\n");
    await s.until("the echo", (fs) => output(fs) === "hello\n");
    s.send("again\n");
    await s.until("the second echo", (fs) => output(fs) === "hello\nagain\n");
    assert.deepEqual(Object.keys(s.frames[0]), ["type", "output", "streamType"]);
    s.send("\u0004");
    const closed = await s.closed;
    assert.equal(closed.code, 1000);
    assert.equal(closed.reason, "exit_code=0");
  });

  test("the default command is a shell: stdout and stderr told apart, a non-zero exit closes the socket", async () => {
    const s = await openStream(`${base}${container}exec/`, { auth: alice.auth });
    s.send("echo out\n");
    s.send("echo err >&2\n");
    await s.until("both streams", (fs) => output(fs) === "out\n" && output(fs, "stderr") === "err\n");
    s.send("exit 3\n");
    const closed = await s.closed;
    assert.equal(closed.code, 1000);
    assert.equal(closed.reason, "exit_code=3");
  });

  test("a command that needs no input runs and closes by itself", async () => {
    const s = await openStream(`${base}${container}exec/?command=${encodeURIComponent("echo one; exit 7")}`, {
      auth: alice.auth,
    });
    const closed = await s.closed;
    assert.equal(output(s.frames), "one\n");
    assert.equal(closed.reason, "exit_code=7");
  });

  test("tty=true: a terminal echoes what is typed (all on stdout); a resize frame is not stdin; the exit code closes", async () => {
    const s = await openStream(`${base}${container}exec/?command=sh&tty=true&rows=30&cols=100`, {
      auth: alice.auth,
    });
    s.ws.send(Buffer.from(JSON.stringify({ type: "resize", rows: 40, cols: 120 })), { binary: true });
    s.send("echo hi\n");
    await s.until("the echo and the output", (fs) => output(fs).includes("echo hi\r\nhi\r\n"));
    assert.ok(!output(s.frames).includes("resize"), "a resize frame is not typed into the terminal");
    assert.equal(output(s.frames, "stderr"), "");
    s.send("exit 5\n");
    const closed = await s.closed;
    assert.equal(closed.code, 1000);
    assert.equal(closed.reason, "exit_code=5");
  });

  test("a terminal size out of range, or rows without cols, is a 400 on the upgrade naming the field", async () => {
    const big = await refusal(`${base}${container}exec/?tty=true&rows=5000&cols=80`, alice.auth);
    assert.equal(big.status, 400);
    const half = await refusal(`${base}${container}exec/?tty=true&rows=24`, alice.auth);
    assert.equal(half.status, 400);
    assert.equal(half.body.details[0].field, "cols");
  });

  test("no credentials: 401; another user's container: 404 — both on the upgrade", async () => {
    const none = await refusal(`${base}${container}exec/?command=id`);
    assert.equal(none.status, 401);
    assert.equal(none.headers["www-authenticate"], 'Basic realm="berth"');
    assert.equal((await refusal(`${base}${container}exec/?command=id`, bob.auth)).status, 404);
    const missing = container.replace(/[^/]+\/$/, "00000000-0000-0000-0000-000000000000/");
    assert.equal((await refusal(`${base}${missing}exec/`, alice.auth)).status, 404);
  });

  test("a container that is not Running is a 409 on the upgrade, naming its state", async () => {
    assert.equal((await call(h, alice, "POST", `${container}stop/`)).status, 202);
    await inState(h, alice, container, "Stopped");
    const r = await refusal(`${base}${container}exec/?command=id`, alice.auth);
    assert.equal(r.status, 409);
    assert.equal(r.body.code, "invalid_state");
    assert.match(r.body.error, /container shell-1 is Stopped; exec is allowed in Running/);
  });
});
