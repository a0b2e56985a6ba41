// One behavioural suite for every Engine implementation: the fake must do what Docker does, so the
// same assertions run against a private dockerd and against the in-memory engine.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import type { Readable } from "node:stream";
import { after, before, describe, test } from "node:test";
import {
  type ContainerEvent,
  type ContainerSpec,
  type ContainerView,
  type Engine,
  EngineError,
  type EngineErrorKind,
  type ExecOutput,
  type LogLine,
  normalizeImageRef,
} from "../../src/drivers/engine.ts";

export interface EngineHarness {
  engine: Engine;
  /** A busybox-like image present on the engine (sh, echo, seq, sleep, cat). */
  image: string;
  /** A reference no registry has; pulling it must not send traffic beyond this machine. */
  missingImageRef: string;
  /** An engine of the same kind at an address where nothing answers. */
  unreachableEngine(): Engine;
  /** A `docker save` archive of `image`. */
  saveImage(): Promise<Readable>;
  close(): Promise<void>;
}

export interface SuiteOptions {
  /** A reason to skip every test (the engine cannot run here). */
  skip?: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls until `check` returns a value other than undefined, or fails with what was last seen. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined>,
  { timeoutMs = 10_000, intervalMs = 50 } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/** Reads an async iterable until `done` says so, it ends, or the time is up (then it fails). */
export async function collect<T>(
  iterable: AsyncIterable<T>,
  { done = () => false, timeoutMs = 10_000 }: { done?: (items: T[]) => boolean; timeoutMs?: number } = {},
): Promise<T[]> {
  const items: T[] = [];
  const iterator = iterable[Symbol.asyncIterator]();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), timeoutMs);
  });
  try {
    for (;;) {
      const next = await Promise.race([iterator.next(), timeout]);
      if (next === "timeout") {
        throw new Error(`timed out after ${timeoutMs} ms; got ${JSON.stringify(items).slice(0, 500)}`);
      }
      if (next.done) return items;
      items.push(next.value);
      if (done(items)) return items;
    }
  } finally {
    clearTimeout(timer);
    void iterator.return?.();
  }
}

export async function rejectsWith(
  kind: EngineErrorKind,
  action: () => Promise<unknown>,
): Promise<EngineError> {
  try {
    await action();
  } catch (error) {
    assert.ok(error instanceof EngineError, `expected an EngineError, got ${String(error)}`);
    assert.equal(error.kind, kind, `expected kind ${kind}, got ${error.kind}: ${error.message}`);
    assert.ok(error.message.length > 0, "the error carries the engine's reason");
    return error;
  }
  assert.fail(`expected an EngineError of kind ${kind}, but the call succeeded`);
}

const text = (lines: LogLine[]) => lines.map((line) => line.line);
const outputOf = (chunks: ExecOutput[], stream: "stdout" | "stderr") =>
  Buffer.concat(chunks.filter((chunk) => chunk.stream === stream).map((chunk) => chunk.data)).toString(
    "utf8",
  );

export function engineSuite(
  name: string,
  setup: () => Promise<EngineHarness>,
  options: SuiteOptions = {},
): void {
  describe(name, { skip: options.skip ?? false }, () => {
    let h: EngineHarness;
    let engine: Engine;
    const run = randomBytes(4).toString("hex");
    const suiteLabel = { "berth.test.run": run };
    let counter = 0;
    const uniqueName = (what: string) => `berth-${run}-${what}-${++counter}`;

    /** Creates a container from the harness image, labelled so the suite can clean up after itself. */
    async function create(spec: Partial<ContainerSpec> & { cmd?: string[] }): Promise<string> {
      return engine.createContainer({
        image: h.image,
        name: uniqueName("c"),
        ...spec,
        labels: { ...suiteLabel, ...spec.labels },
      });
    }

    async function run_(spec: Partial<ContainerSpec>): Promise<string> {
      const id = await create(spec);
      await engine.startContainer(id);
      return id;
    }

    async function view(id: string): Promise<ContainerView> {
      const found = await engine.inspectContainer(id);
      assert.ok(found, `container ${id} exists`);
      return found;
    }

    async function logLines(id: string, count: number): Promise<LogLine[]> {
      return waitFor(`${count} log lines`, async () => {
        const lines = await collect(engine.logs(id));
        return lines.length >= count ? lines : undefined;
      });
    }

    before(async () => {
      h = await setup();
      engine = h.engine;
    });

    after(async () => {
      if (!h) return;
      try {
        const mine = await engine.listContainers({ labels: suiteLabel, all: true });
        await Promise.all(mine.map((c) => engine.removeContainer(c.id, { force: true }).catch(() => {})));
      } finally {
        await h.close();
      }
    });

    test("ping answers and info describes the engine", async () => {
      await engine.ping();
      const info = await engine.info();
      assert.ok(info.id.length > 0);
      assert.ok(info.name.length > 0);
      assert.ok(info.cpus >= 1);
      assert.ok(info.memoryMb > 0);
      assert.ok(info.diskGb === undefined || info.diskGb > 0);
      assert.match(info.engineVersion, /^\d+\.\d+/);
      assert.match(info.apiVersion, /^\d+\.\d+$/);
      assert.ok(info.storageDriver.length > 0);
      assert.ok(info.execDriver.length > 0);
      assert.ok(info.operatingSystem.length > 0);
    });

    test("an image on the engine has an id; a missing one has none", async () => {
      assert.equal(await engine.hasImage(h.image), true);
      assert.match((await engine.imageId(h.image)) ?? "", /^sha256:[0-9a-f]{64}$/);
      assert.equal(await engine.hasImage(h.missingImageRef), false);
      assert.equal(await engine.imageId(h.missingImageRef), undefined);
    });

    test("a created container starts running with an address", async () => {
      const name = uniqueName("run");
      const id = await create({ name, cmd: ["sleep", "3600"] });
      const created = await view(id);
      assert.equal(created.state, "created");
      assert.equal(created.running, false);
      assert.equal(created.exitCode, undefined);
      assert.equal(created.startedAt, undefined);
      assert.equal(created.ipAddress, undefined);

      await engine.startContainer(id);
      await engine.startContainer(id); // starting a running container changes nothing
      const running = await view(id);
      assert.equal(running.id, id);
      assert.equal(running.name, name);
      assert.equal(running.state, "running");
      assert.equal(running.running, true);
      assert.equal(running.exitCode, undefined);
      assert.ok(running.startedAt !== undefined && running.startedAt >= running.createdAt - 1000);
      assert.match(running.ipAddress ?? "", /^\d+\.\d+\.\d+\.\d+$/);
      assert.equal(running.image, h.image);
      assert.equal(running.imageId, await engine.imageId(h.image));
      assert.equal(running.restartCount, 0);
      assert.deepEqual(running.restartPolicy, { name: "no" });
      // The name and an id prefix find the same container.
      assert.equal((await engine.inspectContainer(name))?.id, id);
      assert.equal((await engine.inspectContainer(id.slice(0, 12)))?.id, id);
    });

    test("published ports report the host port the engine chose", async () => {
      const id = await run_({
        cmd: ["sleep", "3600"],
        exposedPorts: [{ containerPort: 81 }],
        portBindings: [{ containerPort: 80 }, { containerPort: 53, protocol: "udp" }],
      });
      const { ports } = await view(id);
      const tcp = ports["80/tcp"];
      const udp = ports["53/udp"];
      assert.ok(tcp !== undefined && Number.isInteger(tcp) && tcp > 0 && tcp < 65536, `80/tcp → ${tcp}`);
      assert.ok(udp !== undefined && udp > 0, `53/udp → ${udp}`);
      assert.equal(ports["81/tcp"], undefined, "an exposed port without a binding is not published");
      await engine.stopContainer(id, { timeoutS: 0 });
      assert.deepEqual((await view(id)).ports, {}, "a stopped container publishes nothing");
    });

    test("env and labels are visible in inspect and to the process", async () => {
      const id = await run_({
        env: { GREETING: "hello world", EMPTY: "" },
        labels: { "berth.service": "web", tier: "front" },
        cmd: ["sh", "-c", 'echo "$GREETING"; sleep 3600'],
      });
      const container = await view(id);
      assert.equal(container.env.GREETING, "hello world");
      assert.equal(container.env.EMPTY, "");
      assert.equal(container.labels["berth.service"], "web");
      assert.equal(container.labels.tier, "front");
      assert.equal(container.labels["berth.test.run"], run);
      assert.deepEqual(text(await logLines(id, 1)), ["hello world\n"]);
    });

    test("listing by label returns only the labelled containers", async () => {
      const group = `g-${randomBytes(3).toString("hex")}`;
      const started = await run_({ cmd: ["sleep", "3600"], labels: { "berth.group": group } });
      const idle = await create({ cmd: ["sleep", "3600"], labels: { "berth.group": group } });
      await run_({ cmd: ["sleep", "3600"], labels: { "berth.group": "other" } });
      const all = await engine.listContainers({ labels: { "berth.group": group }, all: true });
      assert.deepEqual(all.map((c) => c.id).sort(), [started, idle].sort());
      const runningOnly = await engine.listContainers({ labels: { "berth.group": group } });
      assert.deepEqual(
        runningOnly.map((c) => c.id),
        [started],
      );
      const summary = all.find((c) => c.id === started)!;
      assert.equal(summary.state, "running");
      assert.equal(summary.labels["berth.group"], group);
      assert.equal(summary.image, h.image);
      assert.ok(summary.name.startsWith(`berth-${run}`));
      assert.equal(all.find((c) => c.id === idle)?.state, "created");
    });

    test("stop sends SIGTERM and a process that handles it exits with its own code", async () => {
      const id = await run_({ cmd: ["sh", "-c", "trap 'exit 7' TERM; echo ready; sleep 3600 & wait"] });
      await logLines(id, 1); // the trap is set once "ready" is printed
      const t0 = Date.now();
      const outcome = await engine.stopContainer(id, { timeoutS: 10 });
      assert.ok(Date.now() - t0 < 5000, "the process exited on SIGTERM, without waiting for the timeout");
      assert.deepEqual(outcome, { killed: false });
      const stopped = await view(id);
      assert.equal(stopped.state, "exited");
      assert.equal(stopped.running, false);
      assert.equal(stopped.exitCode, 7);
      assert.ok(stopped.finishedAt !== undefined && stopped.finishedAt >= (stopped.startedAt ?? 0));
      assert.equal(stopped.ipAddress, undefined);
      await engine.stopContainer(id); // stopping a stopped container changes nothing
      assert.equal((await view(id)).exitCode, 7);
    });

    test("stop kills a PID 1 that ignores SIGTERM once the timeout has passed", async () => {
      const id = await run_({ cmd: ["sleep", "3600"] });
      const t0 = Date.now();
      const outcome = await engine.stopContainer(id, { timeoutS: 1 });
      const elapsed = Date.now() - t0;
      assert.ok(elapsed >= 900 && elapsed < 8000, `stop took ${elapsed} ms`);
      assert.deepEqual(outcome, { killed: true }, "the stop says the engine had to kill");
      const stopped = await view(id);
      assert.equal(stopped.state, "exited");
      assert.equal(stopped.exitCode, 137);
    });

    test("stop sends the container's stop signal (StopSignal at create) instead of SIGTERM", async () => {
      const id = await run_({
        cmd: ["sh", "-c", "trap 'exit 5' USR1; echo ready; sleep 3600 & wait"],
        stopSignal: "SIGUSR1",
        stopTimeoutS: 30,
      });
      await logLines(id, 1);
      const t0 = Date.now();
      const outcome = await engine.stopContainer(id, { timeoutS: 10 });
      assert.ok(Date.now() - t0 < 5000, "the process exited on SIGUSR1, without waiting for the timeout");
      assert.deepEqual(outcome, { killed: false });
      assert.equal((await view(id)).exitCode, 5, "its USR1 handler ran");
    });

    test("kill ends the container with 137 and its restart policy does not bring it back", async () => {
      const id = await run_({ cmd: ["sleep", "3600"], restartPolicy: { name: "always" } });
      await engine.killContainer(id);
      const killed = await view(id);
      assert.equal(killed.state, "exited");
      assert.equal(killed.exitCode, 137);
      await sleep(600);
      const later = await view(id);
      assert.equal(later.state, "exited", "a container killed through the engine stays down");
      assert.equal(later.restartCount, 0);
      await rejectsWith("conflict", () => engine.killContainer(id));
    });

    test("restart policy always restarts a process that exits by itself", async () => {
      const id = await run_({ cmd: ["sh", "-c", "sleep 1; exit 3"], restartPolicy: { name: "always" } });
      const restarted = await waitFor(
        "a restart",
        async () => {
          const c = await view(id);
          return c.restartCount >= 1 && c.state === "running" ? c : undefined;
        },
        { timeoutMs: 10_000 },
      );
      assert.equal(restarted.running, true);
      assert.equal(restarted.exitCode, undefined, "a running container has no exit code yet");
      assert.deepEqual(restarted.restartPolicy, { name: "always" });
      await engine.removeContainer(id, { force: true });
    });

    test("on-failure with a retry limit stops restarting after that many restarts", async () => {
      const id = await run_({
        cmd: ["sh", "-c", "exit 3"],
        restartPolicy: { name: "on-failure", maximumRetryCount: 1 },
      });
      const done = await waitFor("the retry limit", async () => {
        const c = await view(id);
        return c.state === "exited" && c.restartCount === 1 ? c : undefined;
      });
      assert.equal(done.exitCode, 3);
      await sleep(500);
      const later = await view(id);
      assert.equal(later.state, "exited");
      assert.equal(later.restartCount, 1);
      assert.deepEqual(later.restartPolicy, { name: "on-failure", maximumRetryCount: 1 });
    });

    test("a process that exits by itself without a restart policy stays exited with its code", async () => {
      const id = await run_({ cmd: ["sh", "-c", "exit 5"] });
      const done = await waitFor("the exit", async () => {
        const c = await view(id);
        return c.state === "exited" ? c : undefined;
      });
      assert.equal(done.exitCode, 5);
      assert.equal(done.restartCount, 0);
    });

    test("remove refuses a running container unless forced, and then it is gone", async () => {
      const id = await run_({ cmd: ["sleep", "3600"] });
      await rejectsWith("conflict", () => engine.removeContainer(id));
      assert.equal((await view(id)).state, "running");
      await engine.removeContainer(id, { force: true, removeVolumes: true });
      assert.equal(await engine.inspectContainer(id), undefined);
      await rejectsWith("not_found", () => engine.removeContainer(id));
      const stopped = await create({ cmd: ["true"] });
      await engine.removeContainer(stopped);
      assert.equal(await engine.inspectContainer(stopped), undefined);
    });

    test("a name already in use is a conflict", async () => {
      const name = uniqueName("dup");
      await create({ name, cmd: ["true"] });
      const error = await rejectsWith("conflict", () => create({ name, cmd: ["true"] }));
      assert.match(error.message, new RegExp(name));
    });

    test("unknown containers: inspect finds nothing, other calls fail with not_found", async () => {
      const missing = `berth-${run}-never-created`;
      assert.equal(await engine.inspectContainer(missing), undefined);
      await rejectsWith("not_found", () => engine.startContainer(missing));
      await rejectsWith("not_found", () => engine.stopContainer(missing));
      await rejectsWith("not_found", () => engine.killContainer(missing));
      await rejectsWith("not_found", () => collect(engine.logs(missing)));
      await rejectsWith("not_found", () => engine.exec(missing, { cmd: ["true"] }));
    });

    test("logs with tail give exactly the last lines", async () => {
      const t0 = Date.now();
      const id = await run_({ cmd: ["sh", "-c", "seq 1 20; sleep 3600"] });
      const all = await logLines(id, 20);
      assert.deepEqual(
        text(all),
        Array.from({ length: 20 }, (_, i) => `${i + 1}\n`),
      );
      const last = await collect(engine.logs(id, { tail: 5 }));
      assert.deepEqual(text(last), ["16\n", "17\n", "18\n", "19\n", "20\n"]);
      for (const line of last) {
        assert.equal(line.stream, "stdout");
        assert.ok(
          line.timestampMs >= t0 - 2000 && line.timestampMs <= Date.now() + 2000,
          "timestamps are real",
        );
      }
      assert.deepEqual(await collect(engine.logs(id, { tail: 0 })), []);
    });

    test("follow delivers lines printed later and ends when the container stops", async () => {
      const id = await run_({ cmd: ["sh", "-c", "echo one; sleep 1; echo two; sleep 0.5"] });
      const arrivals: number[] = [];
      const lines: LogLine[] = [];
      for await (const line of engine.logs(id, { follow: true })) {
        lines.push(line);
        arrivals.push(Date.now());
        assert.ok(lines.length <= 2, `unexpected line ${line.line}`);
      }
      assert.deepEqual(text(lines), ["one\n", "two\n"]);
      assert.ok(arrivals[1]! - arrivals[0]! >= 500, "the second line arrived while following");
      assert.equal((await view(id)).state, "exited");
    });

    test("aborting a follow ends it", async () => {
      const id = await run_({ cmd: ["sh", "-c", "echo first; sleep 3600"] });
      const controller = new AbortController();
      const lines = await collect(engine.logs(id, { follow: true, signal: controller.signal }), {
        done: (items) => {
          if (items.length === 1) setTimeout(() => controller.abort(), 100);
          return false;
        },
        timeoutMs: 5000,
      });
      assert.deepEqual(text(lines), ["first\n"]);
    });

    test("stdout and stderr are told apart", async () => {
      const id = await run_({ cmd: ["sh", "-c", "echo out; echo err >&2; sleep 3600"] });
      const lines = await logLines(id, 2);
      assert.deepEqual(lines.map((l) => [l.stream, l.line]).sort(), [
        ["stderr", "err\n"],
        ["stdout", "out\n"],
      ]);
    });

    test("with a tty everything arrives as stdout, with terminal line endings", async () => {
      const id = await run_({ tty: true, cmd: ["sh", "-c", "echo out; echo err >&2; sleep 3600"] });
      const lines = await logLines(id, 2);
      assert.deepEqual(
        lines.map((l) => l.stream),
        ["stdout", "stdout"],
      );
      assert.deepEqual(lines.map((l) => l.line).sort(), ["err\r\n", "out\r\n"]);
    });

    test("exec passes stdin through cat and reports exit codes", async () => {
      const id = await run_({ cmd: ["sleep", "3600"] });
      const cat = await engine.exec(id, { cmd: ["cat"] });
      cat.write("hello\n");
      cat.write(Buffer.from("second line\n"));
      cat.end();
      assert.equal(await cat.exitCode, 0);
      const echoed = await collect(cat.output);
      assert.equal(outputOf(echoed, "stdout"), "hello\nsecond line\n");

      const script = await engine.exec(id, {
        cmd: ["sh", "-c", 'echo "out $WHO"; echo err >&2; exit 5'],
        env: { WHO: "exec" },
      });
      const output = await collect(script.output);
      assert.equal(await script.exitCode, 5);
      assert.equal(outputOf(output, "stdout"), "out exec\n");
      assert.equal(outputOf(output, "stderr"), "err\n");

      await engine.stopContainer(id, { timeoutS: 0 });
      await rejectsWith("conflict", () => engine.exec(id, { cmd: ["true"] }));
    });

    test("exec with a tty echoes what is typed and ends at Ctrl-D", async () => {
      const id = await run_({ cmd: ["sleep", "3600"] });
      const session = await engine.exec(id, { cmd: ["cat"], tty: true });
      session.write("abc\n");
      session.write("\x04");
      const output = await collect(session.output);
      assert.equal(await session.exitCode, 0);
      assert.deepEqual(
        output.map((chunk) => chunk.stream),
        output.map(() => "stdout"),
      );
      assert.equal(outputOf(output, "stdout"), "abc\r\nabc\r\n", "the terminal's echo, then cat's copy");
    });

    test("exec of a program the image lacks finishes with 126 and says why", async () => {
      const id = await run_({ cmd: ["sleep", "3600"] });
      const session = await engine.exec(id, { cmd: ["berth-no-such-program"] });
      const output = await collect(session.output);
      assert.equal(await session.exitCode, 126);
      assert.match(outputOf(output, "stdout"), /executable file not found/);
    });

    test("a failed start leaves the container created, with code 127 and the engine's reason", async () => {
      const id = await create({ cmd: ["berth-no-such-program"] });
      const error = await rejectsWith("other", () => engine.startContainer(id));
      assert.match(error.message, /executable file not found/);
      const failed = await view(id);
      assert.equal(failed.state, "created");
      assert.equal(failed.running, false);
      assert.equal(failed.exitCode, 127);
      assert.match(failed.error, /executable file not found/);
    });

    test("events report create, start and die with the exit code", async () => {
      const since = Date.now() - 1000;
      const controller = new AbortController();
      const id = await run_({ cmd: ["sh", "-c", "exit 4"], labels: { "berth.event-test": "yes" } });
      const events = await collect(engine.events({ since, signal: controller.signal }), {
        done: (items) => items.some((e) => e.id === id && e.action === "die"),
      });
      controller.abort();
      const mine = events.filter((e: ContainerEvent) => e.id === id);
      assert.deepEqual(
        mine.map((e) => e.action),
        ["create", "start", "die"],
      );
      const die = mine[2]!;
      assert.equal(die.type, "container");
      assert.equal(die.exitCode, 4);
      assert.equal(die.labels["berth.event-test"], "yes");
      assert.equal(die.image, h.image);
      assert.ok(die.name.startsWith(`berth-${run}`));
      assert.ok(die.timeMs >= since && die.timeMs <= Date.now() + 1000);
    });

    test("events report kill and die for a killed container, and destroy on removal", async () => {
      const since = Date.now() - 1000;
      const id = await run_({ cmd: ["sleep", "3600"] });
      await engine.removeContainer(id, { force: true });
      const controller = new AbortController();
      const events = await collect(engine.events({ since, signal: controller.signal }), {
        done: (items) => items.some((e) => e.id === id && e.action === "destroy"),
      });
      controller.abort();
      const mine = events.filter((e) => e.id === id);
      assert.deepEqual(
        mine.map((e) => e.action),
        ["create", "start", "kill", "die", "destroy"],
      );
      assert.equal(mine[2]!.signal, "9");
      assert.equal(mine[3]!.exitCode, 137);
    });

    test("pulling an image no registry has fails with image_not_found", async () => {
      const progress: string[] = [];
      await rejectsWith("image_not_found", () =>
        engine.pullImage(h.missingImageRef, { onProgress: (line) => progress.push(line) }),
      );
      assert.equal(await engine.hasImage(h.missingImageRef), false);
    });

    test("creating a container from a missing image fails with image_not_found", async () => {
      const error = await rejectsWith("image_not_found", () =>
        engine.createContainer({ image: h.missingImageRef, labels: suiteLabel }),
      );
      assert.match(error.message, /no such image/i);
    });

    test("a saved image loads and is reported by reference", async () => {
      const loaded = await engine.loadImage(await h.saveImage());
      assert.ok(
        loaded.map(normalizeImageRef).includes(normalizeImageRef(h.image)),
        `loaded ${loaded.join(", ")}`,
      );
      assert.equal(await engine.hasImage(h.image), true);
    });

    test("an unreachable engine fails fast with kind unreachable", async () => {
      const unreachable = h.unreachableEngine();
      const t0 = Date.now();
      await rejectsWith("unreachable", () => unreachable.ping());
      await rejectsWith("unreachable", () => unreachable.listContainers({ all: true }));
      assert.ok(Date.now() - t0 < 8000, "failed within a few seconds");
    });
  });
}
