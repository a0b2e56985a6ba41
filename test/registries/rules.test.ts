// The pure rules under registries: image references and repository names, which addresses Berth
// refuses to contact, registry challenges, the registry settings, the engines' insecure registries,
// and tag/push on the fake engine.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ConfigError, loadConfig } from "../../src/config/index.ts";
import { parseImageRef, parseRepositoryName } from "../../src/domain/images.ts";
import type { EngineError } from "../../src/drivers/engine.ts";
import { FakeEngine } from "../../src/drivers/fake/index.ts";
import { daemonConfig } from "../../src/drivers/local/engine.ts";
import type { NodeRecord } from "../../src/drivers/local/state.ts";
import {
  allowListed,
  forbiddenReason,
  OutboundRefused,
  resolveAllowed,
  usesPlainHttp,
} from "../../src/registry/outbound.ts";
import { apiHostOf, parseChallenge } from "../../src/registry/v2.ts";

describe("image references and repository names", () => {
  test("an image's registry and repository follow Docker's rules", () => {
    const cases: [string, string, string, string | undefined][] = [
      ["nginx", "docker.io", "docker.io/library/nginx", undefined],
      ["team/app:1", "docker.io", "docker.io/team/app", "1"],
      [
        "reg.example.test:5000/team/app:1.2",
        "reg.example.test:5000",
        "reg.example.test:5000/team/app",
        "1.2",
      ],
      ["localhost/app", "localhost", "localhost/app", undefined],
      ["10.0.0.1:5000/a/b/c@sha256:abc", "10.0.0.1:5000", "10.0.0.1:5000/a/b/c", undefined],
      ["busybox:local", "docker.io", "docker.io/library/busybox", "local"],
    ];
    for (const [ref, registry, repository, tag] of cases) {
      const r = parseImageRef(ref);
      assert.equal(r.registry, registry, ref);
      assert.equal(r.repository, repository, ref);
      assert.equal(r.tag, tag, ref);
    }
    assert.equal(parseImageRef("10.0.0.1:5000/a@sha256:abc").digest, "sha256:abc");
  });

  test("repository names are <registry host>/<path>", () => {
    assert.deepEqual(parseRepositoryName("reg.example.test/team/app"), {
      host: "reg.example.test",
      path: "team/app",
    });
    assert.deepEqual(parseRepositoryName("127.0.0.1:5000/app"), { host: "127.0.0.1:5000", path: "app" });
    assert.deepEqual(parseRepositoryName("[::1]:5000/app"), { host: "[::1]:5000", path: "app" });
    assert.deepEqual(parseRepositoryName("localhost/a__b/c-d.e"), { host: "localhost", path: "a__b/c-d.e" });
    for (const bad of [
      "app",
      "team/app",
      "reg.example.test",
      "reg.example.test/",
      "reg.example.test/App",
      "reg.example.test/app:1",
      "reg.example.test//app",
      "reg_example.test/app",
      "reg.example.test:0/app",
      "999.1.1.1:5000/app",
      `reg.example.test/${"a".repeat(260)}`,
    ]) {
      assert.ok("problem" in parseRepositoryName(bad), bad);
    }
  });
});

describe("outbound safety rules", () => {
  test("loopback, link-local, metadata, private and reserved addresses are refused; public ones are not", () => {
    const refused: [string, RegExp][] = [
      ["127.0.0.1", /loopback/],
      ["127.255.0.9", /loopback/],
      ["169.254.169.254", /metadata/],
      ["169.254.1.1", /link-local/],
      ["10.222.0.1", /private/],
      ["172.16.5.5", /private/],
      ["172.31.255.255", /private/],
      ["192.168.0.1", /private/],
      ["100.64.0.1", /shared/],
      ["0.0.0.0", /reserved/],
      ["224.0.0.1", /multicast/],
      ["255.255.255.255", /reserved/],
      ["::1", /loopback/],
      ["::", /reserved/],
      ["fe80::1", /link-local/],
      ["fd00::2", /private/],
      ["fd00:ec2::254", /private/],
      ["::ffff:127.0.0.1", /loopback/],
      ["::ffff:a9fe:a9fe", /metadata/],
      ["::127.0.0.1", /IPv4-compatible address of 127\.0\.0\.1, a loopback/],
      ["::ffff:0:7f00:1", /IPv4-translated address of 127\.0\.0\.1, a loopback/],
      ["2002:7f00:1::", /6to4 address of 127\.0\.0\.1, a loopback/],
      ["2002:0a00:0001::1", /6to4 address of 10\.0\.0\.1, a private/],
      ["64:ff9b::a9fe:a9fe", /NAT64 address of 169\.254\.169\.254, the cloud metadata/],
      ["64:ff9b::808:808", /NAT64/],
      ["64:ff9b:1::1", /local NAT64/],
      ["2001::1", /Teredo/],
      ["100::1", /discard/],
      ["fc00::1", /unique local/],
      ["fec0::1", /site-local/],
      ["ff02::1", /multicast/],
      ["::8.8.8.8", /IPv4-compatible/],
      ["2001:db8::1", /documentation/],
    ];
    for (const [address, why] of refused) assert.match(forbiddenReason(address) ?? "", why, address);
    for (const address of [
      "93.184.216.34",
      "172.32.0.1",
      "8.8.8.8",
      "2a00:1450:4001::1",
      "::ffff:8.8.8.8",
      "2002:808:808::1",
    ]) {
      assert.equal(forbiddenReason(address), undefined, address);
    }
  });

  test("the allow-list names hosts, addresses and CIDRs", () => {
    const allow = ["registry.internal", "127.0.0.1", "10.222.0.0/16", "fd00::/8"];
    assert.ok(allowListed(allow, "registry.internal", "10.9.9.9"));
    assert.ok(allowListed(allow, "REGISTRY.internal", "10.9.9.9"));
    assert.ok(allowListed(allow, "x", "127.0.0.1"));
    assert.ok(allowListed(allow, "x", "::ffff:127.0.0.1"));
    assert.ok(!allowListed(allow, "x", "127.0.0.2"));
    assert.ok(allowListed(allow, "x", "10.222.3.4"));
    assert.ok(!allowListed(allow, "x", "10.223.0.1"));
    assert.ok(allowListed(allow, "x", "fd00::2"));
    assert.ok(!allowListed(allow, "x", "169.254.169.254"));
  });

  test("an IPv6 form of an internal address is refused unless the allow-list names it", async () => {
    const policy = {
      allow: ["2002:7f00:1::/48", "::127.0.0.1", "six.lab.test"],
      insecure: [],
      timeoutMs: 1000,
    };
    // Named by CIDR, by address (in another spelling) and by host name: allowed, nothing dialled here.
    assert.equal((await resolveAllowed(policy, "2002:7f00:1::5")).address, "2002:7f00:1::5");
    assert.equal((await resolveAllowed(policy, "::7f00:1")).address, "::7f00:1");
    const named = { ...policy, lookup: async () => [{ address: "::ffff:0:7f00:1", family: 6 as const }] };
    assert.equal((await resolveAllowed(named, "six.lab.test")).address, "::ffff:0:7f00:1");
    // Allowing 127.0.0.1 does not allow the forms that only carry it (they are other addresses).
    const v4only = { allow: ["127.0.0.1"], insecure: [], timeoutMs: 1000 };
    for (const address of ["::7f00:1", "::ffff:0:7f00:1", "2002:7f00:1::", "64:ff9b::7f00:1"])
      await assert.rejects(resolveAllowed(v4only, address), OutboundRefused, address);
    assert.equal((await resolveAllowed(v4only, "::ffff:7f00:1")).address, "::ffff:7f00:1");
  });

  test("plain HTTP only for listed registries and loopback addresses", () => {
    const policy = { allow: [], insecure: ["10.222.0.1:5000", "reg.lab"], timeoutMs: 1000 };
    assert.ok(usesPlainHttp(policy, "10.222.0.1:5000"));
    assert.ok(!usesPlainHttp(policy, "10.222.0.1:5001"));
    assert.ok(usesPlainHttp(policy, "reg.lab:443"));
    assert.ok(usesPlainHttp(policy, "127.0.0.1:5000"));
    assert.ok(usesPlainHttp(policy, "[::1]:5000"));
    assert.ok(!usesPlainHttp(policy, "reg.example.test"));
  });

  test("registry challenges are parsed", () => {
    assert.deepEqual(
      parseChallenge('Bearer realm="https://auth.docker.io/token",service="registry.docker.io"'),
      {
        scheme: "bearer",
        params: { realm: "https://auth.docker.io/token", service: "registry.docker.io" },
      },
    );
    assert.deepEqual(parseChallenge('Basic realm="Registry Realm"'), {
      scheme: "basic",
      params: { realm: "Registry Realm" },
    });
    assert.equal(parseChallenge("Negotiate"), undefined);
    assert.equal(apiHostOf("docker.io"), "registry-1.docker.io");
    assert.equal(apiHostOf("reg.example.test"), "reg.example.test");
  });
});

describe("registry settings", () => {
  const base = { BERTH_DATA_DIR: "/tmp/berth-config-test" };

  test("Berth's own registry needs a data folder and an address together", () => {
    assert.equal(loadConfig(base).registry.native, undefined);
    const c = loadConfig({
      ...base,
      BERTH_REGISTRY_DATA_DIR: "/tmp/r",
      BERTH_REGISTRY_LISTEN: "10.222.0.1:5000",
    });
    assert.deepEqual(c.registry.native, {
      dataDir: "/tmp/r",
      listen: "10.222.0.1:5000",
      host: "10.222.0.1:5000",
      binary: "/usr/bin/docker-registry",
    });
    assert.throws(() => loadConfig({ ...base, BERTH_REGISTRY_DATA_DIR: "/tmp/r" }), ConfigError);
    assert.throws(
      () => loadConfig({ ...base, BERTH_REGISTRY_DATA_DIR: "/tmp/r", BERTH_REGISTRY_LISTEN: "0.0.0.0:5000" }),
      /BERTH_REGISTRY_HOST/,
    );
    assert.equal(
      loadConfig({
        ...base,
        BERTH_REGISTRY_DATA_DIR: "/tmp/r",
        BERTH_REGISTRY_LISTEN: "0.0.0.0:5000",
        BERTH_REGISTRY_HOST: "registry.lab:5000",
      }).registry.native?.host,
      "registry.lab:5000",
    );
    assert.throws(
      () => loadConfig({ ...base, BERTH_REGISTRY_DATA_DIR: "/tmp/r", BERTH_REGISTRY_LISTEN: "nope" }),
      /BERTH_REGISTRY_LISTEN/,
    );
  });

  test("the allow-list and the insecure registries are checked", () => {
    const c = loadConfig({
      ...base,
      BERTH_REGISTRY_ALLOW: "127.0.0.1, 10.222.0.0/16,registry.internal",
      BERTH_INSECURE_REGISTRIES: "10.222.0.1:5000",
    });
    assert.deepEqual(c.registry.allow, ["127.0.0.1", "10.222.0.0/16", "registry.internal"]);
    assert.deepEqual(c.registry.insecure, ["10.222.0.1:5000"]);
    assert.equal(c.registry.timeoutMs, 10_000);
    assert.throws(() => loadConfig({ ...base, BERTH_REGISTRY_ALLOW: "10.0.0.0/99" }), /BERTH_REGISTRY_ALLOW/);
    assert.throws(() => loadConfig({ ...base, BERTH_REGISTRY_ALLOW: "http://x/" }), /BERTH_REGISTRY_ALLOW/);
    assert.throws(
      () => loadConfig({ ...base, BERTH_INSECURE_REGISTRIES: "a b" }),
      /BERTH_INSECURE_REGISTRIES/,
    );
  });

  test("local nodes' engines trust the insecure registries", () => {
    const record = { keyFilePath: "/k", cgroupPath: "/berth-0123456789ab" } as NodeRecord;
    assert.deepEqual(
      daemonConfig(record, { insecureRegistries: ["10.222.0.1:5000"] })["insecure-registries"],
      ["10.222.0.1:5000"],
    );
    assert.equal("insecure-registries" in daemonConfig(record), false);
  });
});

describe("tag and push on the fake engine", () => {
  test("a tagged image is pushed to the engine's registry and pulled back elsewhere by its new name", async () => {
    const engine = new FakeEngine({
      registry: [{ ref: "reg.lab:5000/team/locked:1", auth: { username: "u", password: "p" } }],
    });
    await assert.rejects(
      engine.tagImage("nope:1", "reg.lab:5000/team/x:1"),
      (e: EngineError) => e.kind === "image_not_found",
    );
    await engine.tagImage("busybox:local", "reg.lab:5000/team/app:1");
    assert.equal(await engine.imageId("reg.lab:5000/team/app:1"), await engine.imageId("busybox:local"));
    await assert.rejects(engine.pushImage("reg.lab:5000/team/other:1"), /does not exist locally/);
    const progress: string[] = [];
    await engine.pushImage("reg.lab:5000/team/app:1", { onProgress: (l) => progress.push(l) });
    assert.ok(progress.some((l) => l.includes("digest:")));
    // A protected repository takes the push only with its credentials.
    await engine.tagImage("busybox:local", "reg.lab:5000/team/locked:1");
    await assert.rejects(engine.pushImage("reg.lab:5000/team/locked:1"), /authentication required/);
    await engine.pushImage("reg.lab:5000/team/locked:1", {
      auth: { username: "u", password: "p", serverAddress: "reg.lab:5000" },
    });
    await engine.pullImage("reg.lab:5000/team/app:1");
    assert.equal(await engine.hasImage("reg.lab:5000/team/app"), false, "no latest tag was pushed");
  });
});
