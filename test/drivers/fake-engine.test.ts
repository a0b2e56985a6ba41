// The shared engine suite against the in-memory engine, plus the fake's own test hooks.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { FakeEngine } from "../../src/drivers/fake/index.ts";
import { healthSuite } from "./engine-health.ts";
import { collect, engineSuite, rejectsWith, waitFor } from "./engine-suite.ts";

engineSuite("FakeEngine", async () => {
  const fake = new FakeEngine({ name: "fake-suite" });
  return {
    engine: fake,
    image: "busybox:local",
    missingImageRef: "127.0.0.1:1/berth-nonexistent:latest",
    unreachableEngine: () => {
      const down = new FakeEngine();
      down.setReachable(false);
      return down;
    },
    saveImage: async () => fake.saveImage("busybox:local"),
    close: async () => fake.close(),
  };
});

const healthFake = new FakeEngine({ name: "fake-health" });
after(() => healthFake.close());
healthSuite("FakeEngine", () => ({ engine: healthFake, image: "busybox:local" }));

describe("FakeEngine hooks", () => {
  const running = async (fake: FakeEngine, spec: Parameters<FakeEngine["createContainer"]>[0]) => {
    const id = await fake.createContainer(spec);
    await fake.startContainer(id);
    return id;
  };

  test("exitProcess lets the restart policy act: always restarts, no leaves it exited", async () => {
    const fake = new FakeEngine();
    try {
      const always = await running(fake, {
        image: "busybox:local",
        cmd: ["sleep", "3600"],
        restartPolicy: { name: "always" },
      });
      const never = await running(fake, { image: "busybox:local", cmd: ["sleep", "3600"] });
      fake.exitProcess(always, 1);
      fake.exitProcess(never, 42);
      const back = await waitFor("the restart", async () => {
        const c = await fake.inspectContainer(always);
        return c?.state === "running" && c.restartCount === 1 ? c : undefined;
      });
      assert.equal(back.running, true);
      const down = await waitFor("the exit", async () => {
        const c = await fake.inspectContainer(never);
        return c?.state === "exited" ? c : undefined;
      });
      assert.equal(down.exitCode, 42);
    } finally {
      fake.close();
    }
  });

  test("print writes to the container's logs on the chosen stream", async () => {
    const fake = new FakeEngine();
    try {
      const id = await running(fake, { image: "busybox:local", cmd: ["sleep", "3600"] });
      fake.print(id, "stderr", "warning: low disk\nsecond\n");
      fake.print(id, "stdout", "partial");
      const lines = await collect(fake.logs(id));
      assert.deepEqual(
        lines.map((l) => [l.stream, l.line]),
        [
          ["stderr", "warning: low disk\n"],
          ["stderr", "second\n"],
        ],
        "a line without its newline is held back, as Docker does",
      );
      fake.print(id, "stdout", " line\n");
      assert.equal((await collect(fake.logs(id, { tail: 1 })))[0]?.line, "partial line\n");
    } finally {
      fake.close();
    }
  });

  test("setReachable(false) refuses calls and breaks open event streams", async () => {
    const fake = new FakeEngine();
    try {
      const stream = fake.events();
      const reading = collect(stream, { timeoutMs: 5000 });
      await new Promise((resolve) => setTimeout(resolve, 10));
      fake.setReachable(false);
      await rejectsWith("unreachable", () => reading);
      await rejectsWith("unreachable", () => fake.ping());
      await rejectsWith("unreachable", () => fake.createContainer({ image: "busybox:local" }));
      fake.setReachable(true);
      await fake.ping();
    } finally {
      fake.close();
    }
  });

  test("pull fetches images the fake registry has, with progress, and honours credentials", async () => {
    const fake = new FakeEngine({
      registry: [
        { ref: "nginx:alpine", cmd: ["nginx", "-g", "daemon off;"], exposedPorts: [{ containerPort: 80 }] },
        { ref: "registry.example:5000/private/app:1", cmd: ["app"], auth: { username: "u", password: "p" } },
      ],
    });
    try {
      const progress: string[] = [];
      await fake.pullImage("nginx:alpine", { onProgress: (line) => progress.push(line) });
      assert.ok(progress.some((line) => line.startsWith("Status: Downloaded newer image for nginx:alpine")));
      assert.equal(await fake.hasImage("nginx:alpine"), true);
      // The image's own program runs until stopped, and exits 0 on SIGTERM like a server.
      const id = await running(fake, {
        image: "nginx:alpine",
        portBindings: [{ containerPort: 80, hostPort: 8080 }],
      });
      assert.equal((await fake.inspectContainer(id))?.ports["80/tcp"], 8080);
      await fake.stopContainer(id, { timeoutS: 5 });
      assert.equal((await fake.inspectContainer(id))?.exitCode, 0);

      const denied = await rejectsWith("other", () => fake.pullImage("registry.example:5000/private/app:1"));
      assert.match(denied.message, /unauthorized/);
      await fake.pullImage("registry.example:5000/private/app:1", {
        auth: { username: "u", password: "p", serverAddress: "registry.example:5000" },
      });
      assert.equal(await fake.hasImage("registry.example:5000/private/app:1"), true);
    } finally {
      fake.close();
    }
  });

  test("addresses come from the configured subnet and are released on stop", async () => {
    const fake = new FakeEngine({ subnet: "10.99.7.0/24" });
    try {
      const a = await running(fake, { image: "busybox:local", cmd: ["sleep", "3600"] });
      const b = await running(fake, { image: "busybox:local", cmd: ["sleep", "3600"] });
      assert.equal((await fake.inspectContainer(a))?.ipAddress, "10.99.7.2");
      assert.equal((await fake.inspectContainer(b))?.ipAddress, "10.99.7.3");
      await fake.stopContainer(a, { timeoutS: 0 });
      const c = await running(fake, { image: "busybox:local", cmd: ["sleep", "3600"] });
      assert.equal((await fake.inspectContainer(c))?.ipAddress, "10.99.7.2");
      const none = await running(fake, {
        image: "busybox:local",
        cmd: ["sleep", "3600"],
        networkMode: "none",
      });
      assert.equal((await fake.inspectContainer(none))?.ipAddress, undefined);
    } finally {
      fake.close();
    }
  });

  test("published ports come from the configured range; a taken host port fails the start", async () => {
    const fake = new FakeEngine({ portRange: [40000, 40001] });
    try {
      const spec = { image: "busybox:local", cmd: ["sleep", "3600"], portBindings: [{ containerPort: 80 }] };
      const a = await running(fake, spec);
      const b = await running(fake, spec);
      assert.equal((await fake.inspectContainer(a))?.ports["80/tcp"], 40000);
      assert.equal((await fake.inspectContainer(b))?.ports["80/tcp"], 40001);
      const fixed = await fake.createContainer({
        ...spec,
        portBindings: [{ containerPort: 80, hostPort: 40000 }],
      });
      const error = await rejectsWith("other", () => fake.startContainer(fixed));
      assert.match(error.message, /port is already allocated/);
      const after = await fake.inspectContainer(fixed);
      assert.equal(after?.state, "created");
      assert.match(after?.error ?? "", /port is already allocated/);
    } finally {
      fake.close();
    }
  });

  test("oom kills the container with 137, marks it and reports an oom event", async () => {
    const fake = new FakeEngine();
    try {
      const since = Date.now();
      const id = await running(fake, { image: "busybox:local", cmd: ["sleep", "3600"] });
      fake.oom(id);
      const dead = await waitFor("the oom kill", async () => {
        const c = await fake.inspectContainer(id);
        return c?.state === "exited" ? c : undefined;
      });
      assert.equal(dead.exitCode, 137);
      assert.equal(dead.oomKilled, true);
      const events = await collect(fake.events({ since }), {
        done: (e) => e.some((x) => x.action === "die"),
      });
      assert.deepEqual(
        events.map((e) => e.action),
        ["create", "start", "oom", "die"],
      );
    } finally {
      fake.close();
    }
  });

  test("a program the image does not have fails the start like Docker", async () => {
    const fake = new FakeEngine();
    try {
      const id = await fake.createContainer({ image: "busybox:local", cmd: ["nginx"] });
      const error = await rejectsWith("other", () => fake.startContainer(id));
      assert.match(error.message, /executable file not found/);
      const c = await fake.inspectContainer(id);
      assert.equal(c?.state, "created");
      assert.equal(c?.exitCode, 127);
    } finally {
      fake.close();
    }
  });

  test("shell syntax the fake cannot run is refused loudly, not ignored", async () => {
    const fake = new FakeEngine();
    try {
      const id = await fake.createContainer({
        image: "busybox:local",
        cmd: ["sh", "-c", "for i in 1 2; do echo $i; done"],
      });
      await fake.startContainer(id);
      const done = await waitFor("the exit", async () => {
        const c = await fake.inspectContainer(id);
        return c?.state === "exited" ? c : undefined;
      });
      assert.equal(done.exitCode, 2);
      const [line] = await collect(fake.logs(id));
      assert.equal(line?.stream, "stderr");
      assert.match(line?.line ?? "", /does not support/);
    } finally {
      fake.close();
    }
  });

  test("an image saved from one fake loads into another with the same id", async () => {
    const source = new FakeEngine({ images: [{ ref: "app:1", cmd: ["app"], env: { MODE: "prod" } }] });
    const target = new FakeEngine({ images: [] });
    try {
      assert.deepEqual(await target.loadImage(source.saveImage("app:1")), ["app:1"]);
      assert.equal(await target.imageId("app:1"), await source.imageId("app:1"));
      const id = await target.createContainer({ image: "app:1" });
      await target.startContainer(id);
      const c = await target.inspectContainer(id);
      assert.equal(c?.state, "running", "the image's own program runs on the new engine");
      assert.equal(c?.env.MODE, "prod");
    } finally {
      source.close();
      target.close();
    }
  });
});
