// The shared engine suite against a real Docker engine: a private dockerd started for this file.
// Without dockerd or root the tests are skipped with the reason, except in CI, where they must run.
import assert from "node:assert/strict";
import { createServer, type Socket } from "node:net";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { after, before, describe, test } from "node:test";
import Docker from "dockerode";
import { DockerEngine, describeEndpoint, parseDockerEndpoint } from "../../src/drivers/docker/index.ts";
import {
  dockerdUnavailable,
  type PrivateDockerd,
  startEmptyRegistry,
  startPrivateDockerd,
} from "../support/dockerd.ts";
import { healthSuite } from "./engine-health.ts";
import { engineSuite, rejectsWith, waitFor } from "./engine-suite.ts";

describe("docker endpoint addresses", () => {
  test("unix sockets, tcp and TLS material are read; anything else is refused", () => {
    assert.deepEqual(parseDockerEndpoint("unix:///var/run/docker.sock"), {
      socketPath: "/var/run/docker.sock",
    });
    assert.deepEqual(parseDockerEndpoint("/run/berth/docker.sock"), { socketPath: "/run/berth/docker.sock" });
    assert.deepEqual(parseDockerEndpoint("tcp://10.0.0.5:2375"), { host: "10.0.0.5", port: 2375 });
    assert.deepEqual(parseDockerEndpoint("tcp://[fd00::5]:2376"), { host: "fd00::5", port: 2376 });
    const tls = { ca: "CA", cert: "CERT", key: "KEY" };
    assert.deepEqual(parseDockerEndpoint("tcp://node-1:2376", tls), { host: "node-1", port: 2376, tls });
    assert.equal(describeEndpoint({ host: "fd00::5", port: 2376, tls }), "tcp://[fd00::5]:2376 (TLS)");
    for (const bad of [
      "tcp://host",
      "http://host:2375",
      "unix://relative.sock",
      "tcp://host:70000",
      "host:2375",
    ]) {
      assert.throws(() => parseDockerEndpoint(bad), /engine address|absolute path/, bad);
    }
  });
});

const unavailable = dockerdUnavailable();
const inCi = process.env.CI === "true";

if (unavailable && inCi) {
  // CI must never pass by skipping the only tier that talks to a real engine.
  test("docker engine tests run in CI", () => {
    assert.fail(`the Docker engine tests cannot run: ${unavailable}`);
  });
}

describe("DockerEngine against a private dockerd", {
  skip: unavailable && !inCi ? `skipped: ${unavailable}` : false,
}, () => {
  let dockerd: PrivateDockerd | undefined;
  let registry: Awaited<ReturnType<typeof startEmptyRegistry>> | undefined;
  let engine: DockerEngine;

  before(async () => {
    dockerd = await startPrivateDockerd();
    registry = await startEmptyRegistry();
    engine = new DockerEngine({ endpoint: `unix://${dockerd.socketPath}` });
  });

  after(async () => {
    await registry?.close();
    await dockerd?.stop();
  });

  engineSuite("engine suite", async () => {
    assert.ok(dockerd && registry, "dockerd is running");
    const { socketPath, dir, image } = dockerd;
    return {
      engine,
      image,
      // The empty registry on 127.0.0.1 answers "manifest unknown": a real refusal, no outside traffic.
      missingImageRef: `${registry.address}/berth-nonexistent:latest`,
      unreachableEngine: () => new DockerEngine({ endpoint: { socketPath: join(dir, "nothing-here.sock") } }),
      saveImage: async () => (await new Docker({ socketPath }).getImage(image).get()) as unknown as Readable,
      close: async () => {},
    };
  });

  healthSuite("DockerEngine", () => ({ engine, image: dockerd!.image }));

  describe("docker only", () => {
    test("a published port reaches the container's server from the host", async () => {
      const id = await engine.createContainer({
        image: dockerd!.image,
        cmd: ["httpd", "-f", "-p", "80", "-h", "/var/www"],
        portBindings: [{ containerPort: 80 }],
        labels: { "berth.test": "http" },
      });
      try {
        await engine.startContainer(id);
        const view = await engine.inspectContainer(id);
        const port = view?.ports["80/tcp"];
        assert.ok(port, "a host port was published");
        assert.ok(view?.ipAddress?.startsWith(dockerd!.subnet.replace(/0\/24$/, "")), view?.ipAddress);
        const body = await waitFor("the HTTP answer", async () => {
          try {
            const response = await fetch(`http://127.0.0.1:${port}/index.html`, {
              signal: AbortSignal.timeout(2000),
            });
            return response.ok ? await response.text() : undefined;
          } catch {
            return undefined;
          }
        });
        assert.equal(body, "hello from busybox\n");
      } finally {
        await engine.removeContainer(id, { force: true });
      }
    });

    test("the engine answers over TCP (with mutual TLS when available) as the same engine", async () => {
      const { address, tls } = dockerd!.tcp;
      const overTcp = new DockerEngine({ endpoint: address, tls });
      await overTcp.ping();
      const [local, remote] = await Promise.all([engine.info(), overTcp.info()]);
      assert.equal(remote.id, local.id);
      assert.equal(remote.diskGb, undefined, "disk size is only measured for local engines");
      assert.ok(local.diskGb !== undefined && local.diskGb > 0);
      if (tls) {
        // Without the client certificate the engine refuses the connection.
        const anonymous = new DockerEngine({ endpoint: address, tls: { ...tls, cert: "", key: "" } });
        await assert.rejects(anonymous.ping(), (error: Error) => error.name === "EngineError");
      }
    });

    test("an engine that accepts connections but never answers fails ping within its timeout", async () => {
      const sockets: Socket[] = [];
      const silent = createServer((socket) => sockets.push(socket));
      await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
      const { port } = silent.address() as { port: number };
      try {
        const mute = new DockerEngine({ endpoint: `tcp://127.0.0.1:${port}`, pingTimeoutMs: 1000 });
        const t0 = Date.now();
        const error = await rejectsWith("unreachable", () => mute.ping());
        assert.ok(Date.now() - t0 < 3000);
        assert.match(error.message, /did not answer within 1000 ms/);
      } finally {
        for (const socket of sockets) socket.destroy();
        await new Promise<void>((resolve) => silent.close(() => resolve()));
      }
    });
  });
});
