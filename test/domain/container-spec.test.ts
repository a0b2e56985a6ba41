// What one container of a service asks of an engine, and the environment it sees (CONTRACT §10).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  buildContainerSpec,
  type ContainerSpecInput,
  calculatedEnvvars,
  ENV_PREFIXES,
  engineContainerName,
  environmentFromEngine,
  linkHostsFromEngine,
  volumesFromRefs,
} from "../../src/domain/container-spec.ts";
import type { LinkTarget } from "../../src/domain/links.ts";
import { DEFAULT_SPEC, type ServiceSpec } from "../../src/domain/service.ts";

const SERVICE_URI = "/api/app/v1/alice/service/5e1f0c2a-0000-4000-8000-000000000001/";
const CONTAINER_URI = "/api/app/v1/alice/container/c0ffee12-3456-4789-8abc-def012345678/";
const NODE_URI = "/api/infra/v1/alice/node/3fa4b2c1-0000-4000-8000-000000000002/";
const NODE_FQDN = "3fa4b2c1.alice.node.berth.internal";

const pg = (n: number, ip: string): LinkTarget => ({
  name: `postgres-${n}`,
  resource_uri: `/api/app/v1/alice/container/pg-${n}/`,
  private_ip: ip,
  ports: [{ inner_port: 5432, protocol: "tcp" }],
  envvars: [{ key: "POSTGRES_DB", value: "app" }],
});

function input(spec: Partial<ServiceSpec> = {}, extra: Partial<ContainerSpecInput> = {}): ContainerSpecInput {
  return {
    spec: { ...DEFAULT_SPEC, image_name: "team/web:1.2", ...spec },
    service: { uuid: "svc-uuid", name: "web", resource_uri: SERVICE_URI, namespace: "alice" },
    container: {
      uuid: "c0ffee12-3456-4789-8abc-def012345678",
      name: "web-1",
      number: 1,
      resource_uri: CONTAINER_URI,
    },
    node: { uuid: "node-uuid", resource_uri: NODE_URI, external_fqdn: NODE_FQDN },
    links: [],
    volumesFrom: [],
    platform: {
      restHost: "http://berth.example:8000",
      streamHost: "ws://berth.example:8000",
      auth: "Basic c2VjcmV0",
    },
    imageEnv: { PATH: "/usr/bin", MODE: "image" },
    ...extra,
  };
}

const PLATFORM_NAMES = [
  "CONTAINER_API_URI",
  "SERVICE_API_URI",
  "NODE_API_URI",
  "CONTAINER_FQDN",
  "SERVICE_FQDN",
  "NODE_FQDN",
  "REST_HOST",
  "STREAM_HOST",
];

describe("buildContainerSpec", () => {
  test("a default service: image, identity, labels, host name and engine defaults", () => {
    const spec = buildContainerSpec(input());
    const platform = Object.fromEntries(
      ENV_PREFIXES.flatMap((prefix) => [
        [`${prefix}CONTAINER_API_URI`, CONTAINER_URI],
        [`${prefix}SERVICE_API_URI`, SERVICE_URI],
        [`${prefix}NODE_API_URI`, NODE_URI],
        [`${prefix}CONTAINER_FQDN`, "web-1.alice.cont.berth.internal"],
        [`${prefix}SERVICE_FQDN`, "web.alice.svc.berth.internal"],
        [`${prefix}NODE_FQDN`, NODE_FQDN],
        [`${prefix}REST_HOST`, "http://berth.example:8000"],
        [`${prefix}STREAM_HOST`, "ws://berth.example:8000"],
      ]),
    );
    assert.deepEqual(spec, {
      name: "web-1-c0ffee12",
      image: "team/web:1.2",
      env: platform,
      cmd: undefined,
      entrypoint: undefined,
      labels: {
        "io.berth.platform-env": Object.keys(platform).join(","),
        "io.berth.link-hosts": "[]",
        "io.berth.container": "c0ffee12-3456-4789-8abc-def012345678",
        "io.berth.service": "svc-uuid",
        "io.berth.namespace": "alice",
        "io.berth.node": "node-uuid",
      },
      exposedPorts: undefined,
      portBindings: undefined,
      binds: undefined,
      volumesFrom: undefined,
      capAdd: undefined,
      capDrop: undefined,
      devices: undefined,
      dns: undefined,
      dnsSearch: undefined,
      extraHosts: undefined,
      cpuShares: undefined,
      cpuset: undefined,
      memoryMb: undefined,
      memorySwapMb: undefined,
      privileged: false,
      readOnly: false,
      networkMode: "bridge",
      pidMode: undefined,
      workingDir: undefined,
      user: undefined,
      hostname: "web-1",
      domainname: undefined,
      macAddress: undefined,
      tty: false,
      openStdin: false,
      cgroupParent: undefined,
      securityOpt: undefined,
      restartPolicy: { name: "no" },
    });
  });

  test("every field of a full definition is mapped", () => {
    const spec = buildContainerSpec(
      input(
        {
          run_command: 'sh -c "echo hi"',
          entrypoint: "/sbin/tini --",
          container_ports: [
            { protocol: "tcp", inner_port: 80, outer_port: null, published: true },
            { protocol: "tcp", inner_port: 443, outer_port: 8443, published: true },
            { protocol: "udp", inner_port: 53, outer_port: null, published: false },
          ],
          container_envvars: [{ key: "MODE", value: "prod" }],
          bindings: [
            { host_path: "/srv/www", container_path: "/var/www", rewritable: false, volumes_from: null },
            { host_path: "/srv/logs", container_path: "/logs", rewritable: true, volumes_from: null },
            { host_path: null, container_path: "/data", rewritable: true, volumes_from: null },
            { host_path: null, container_path: null, rewritable: true, volumes_from: "data-uuid" },
          ],
          autorestart: "ON_FAILURE",
          privileged: true,
          pid: "host",
          working_dir: "/app",
          user: "www-data",
          hostname: "front",
          domainname: "example.com",
          mac_address: "02:42:ac:11:00:02",
          cgroup_parent: "/berth",
          tty: true,
          stdin_open: true,
          dns: ["1.1.1.1"],
          dns_search: ["example.com"],
          cap_add: ["NET_ADMIN"],
          cap_drop: ["MKNOD"],
          devices: ["/dev/fuse:/dev/fuse:rwm", "/dev/sda:/dev/xvda"],
          extra_hosts: ["api.example:10.1.0.5"],
          security_opt: ["label:disable"],
          cpu_shares: 512,
          cpuset: "0-1",
          memory: 256,
          memory_swap: 512,
          labels: { team: "web", "io.berth.node": "forged" },
          read_only: true,
        },
        {
          links: [{ alias: "db", targets: [pg(1, "10.0.0.2"), pg(2, "10.0.0.3")] }],
          volumesFrom: ["0123456789ab:ro"],
        },
      ),
    );
    assert.equal(spec.name, "web-1-c0ffee12");
    assert.deepEqual(spec.cmd, ["sh", "-c", "echo hi"]);
    assert.deepEqual(spec.entrypoint, ["/sbin/tini", "--"]);
    assert.deepEqual(spec.exposedPorts, [
      { containerPort: 80, protocol: "tcp" },
      { containerPort: 443, protocol: "tcp" },
      { containerPort: 53, protocol: "udp" },
    ]);
    // Published without outer_port: no hostPort, so the engine picks one.
    assert.deepEqual(spec.portBindings, [
      { containerPort: 80, protocol: "tcp" },
      { containerPort: 443, protocol: "tcp", hostPort: 8443 },
    ]);
    assert.deepEqual(spec.binds, ["/srv/www:/var/www:ro", "/srv/logs:/logs", "/data"]);
    assert.deepEqual(spec.volumesFrom, ["0123456789ab:ro"]);
    assert.deepEqual(spec.restartPolicy, { name: "on-failure", maximumRetryCount: 0 });
    assert.deepEqual(spec.devices, [
      { pathOnHost: "/dev/fuse", pathInContainer: "/dev/fuse", cgroupPermissions: "rwm" },
      { pathOnHost: "/dev/sda", pathInContainer: "/dev/xvda" },
    ]);
    assert.deepEqual(spec.extraHosts, [
      "api.example:10.1.0.5",
      "db:10.0.0.2",
      "postgres-1:10.0.0.2",
      "postgres-2:10.0.0.3",
    ]);
    // Berth's record of how the container was made: the variables it injected (not the user's MODE)
    // and the link host entries.
    const injected = spec.labels?.["io.berth.platform-env"]?.split(",") ?? [];
    assert.ok(injected.includes("DB_PORT_5432_TCP") && injected.includes("PLATFORM_CONTAINER_API_URI"));
    assert.ok(!injected.includes("MODE"));
    assert.deepEqual(JSON.parse(spec.labels?.["io.berth.link-hosts"] ?? ""), [
      "db:10.0.0.2",
      "postgres-1:10.0.0.2",
      "postgres-2:10.0.0.3",
    ]);
    assert.deepEqual(spec.labels, {
      "io.berth.platform-env": injected.join(","),
      "io.berth.link-hosts": spec.labels?.["io.berth.link-hosts"],
      team: "web",
      "io.berth.node": "node-uuid",
      "io.berth.container": "c0ffee12-3456-4789-8abc-def012345678",
      "io.berth.service": "svc-uuid",
      "io.berth.namespace": "alice",
    });
    assert.deepEqual(
      [spec.capAdd, spec.capDrop, spec.dns, spec.dnsSearch, spec.securityOpt],
      [["NET_ADMIN"], ["MKNOD"], ["1.1.1.1"], ["example.com"], ["label:disable"]],
    );
    assert.deepEqual([spec.cpuShares, spec.cpuset, spec.memoryMb, spec.memorySwapMb], [512, "0-1", 256, 512]);
    assert.deepEqual(
      [spec.privileged, spec.readOnly, spec.tty, spec.openStdin, spec.networkMode, spec.pidMode],
      [true, true, true, true, "bridge", "host"],
    );
    assert.deepEqual(
      [spec.workingDir, spec.user, spec.hostname, spec.domainname, spec.macAddress, spec.cgroupParent],
      ["/app", "www-data", "front", "example.com", "02:42:ac:11:00:02", "/berth"],
    );
    assert.equal(spec.env?.MODE, "prod");
    assert.equal(spec.env?.DB_PORT_5432_TCP, "tcp://10.0.0.2:5432");
    assert.equal(spec.env?.DB_2_ENV_POSTGRES_DB, "app");
    assert.equal(spec.env?.DB_NAME, "/web-1/db");
  });

  test("autorestart ALWAYS and OFF map to Docker's restart policies; unlimited swap passes as -1", () => {
    assert.deepEqual(buildContainerSpec(input({ autorestart: "ALWAYS" })).restartPolicy, { name: "always" });
    assert.deepEqual(buildContainerSpec(input({ autorestart: "OFF" })).restartPolicy, { name: "no" });
    assert.equal(buildContainerSpec(input({ memory: 64, memory_swap: -1 })).memorySwapMb, -1);
  });

  test("stop_signal and stop_grace_period become the engine's StopSignal and StopTimeout; unset, neither", () => {
    const spec = buildContainerSpec(input({ stop_signal: "SIGQUIT", stop_grace_period: 0 }));
    assert.deepEqual([spec.stopSignal, spec.stopTimeoutS], ["SIGQUIT", 0]);
    const plain = buildContainerSpec(input());
    assert.ok(
      !("stopSignal" in plain) && !("stopTimeoutS" in plain),
      "the image's and the engine's defaults",
    );
  });

  test("on the host network there are no port bindings and the host name is the node's", () => {
    const spec = buildContainerSpec(
      input({
        net: "host",
        container_ports: [{ protocol: "tcp", inner_port: 80, outer_port: 80, published: true }],
      }),
    );
    assert.equal(spec.networkMode, "host");
    assert.equal(spec.portBindings, undefined);
    assert.deepEqual(spec.exposedPorts, [{ containerPort: 80, protocol: "tcp" }]);
    assert.equal(spec.hostname, undefined);
  });

  test("the engine name carries the uuid's first 8 characters", () => {
    assert.equal(engineContainerName({ name: "web-12", uuid: "abcdef0123456789" }), "web-12-abcdef01");
  });

  test("volumes_from bindings become engine references, read-only when not rewritable", () => {
    const spec: ServiceSpec = {
      ...DEFAULT_SPEC,
      image_name: "x:latest",
      bindings: [
        { host_path: null, container_path: null, rewritable: true, volumes_from: "a" },
        { host_path: null, container_path: "/x", rewritable: true, volumes_from: null },
        { host_path: null, container_path: null, rewritable: false, volumes_from: "b" },
      ],
    };
    const ids: Record<string, string[]> = { a: ["id-a1"], b: ["id-b1", "id-b2"] };
    assert.deepEqual(
      volumesFromRefs(spec, (uuid) => ids[uuid] ?? []),
      ["id-a1", "id-b1:ro", "id-b2:ro"],
    );
  });
});

describe("injected environment", () => {
  test("every PLATFORM_* variable also exists as DOCKERCLOUD_*", () => {
    const env = buildContainerSpec(input()).env ?? {};
    for (const name of PLATFORM_NAMES) {
      assert.ok(env[`PLATFORM_${name}`], `PLATFORM_${name} is set`);
      assert.equal(env[`DOCKERCLOUD_${name}`], env[`PLATFORM_${name}`]);
    }
  });

  test("PLATFORM_AUTH only with role global", () => {
    const plain = buildContainerSpec(input()).env ?? {};
    assert.ok(!("PLATFORM_AUTH" in plain));
    assert.ok(!("DOCKERCLOUD_AUTH" in plain));
    const global = buildContainerSpec(input({ roles: ["global"] })).env ?? {};
    assert.equal(global.PLATFORM_AUTH, "Basic c2VjcmV0");
    assert.equal(global.DOCKERCLOUD_AUTH, "Basic c2VjcmV0");
    const noKey = input({ roles: ["global"] }, { platform: { restHost: "http://h", streamHost: "ws://h" } });
    assert.ok(!("PLATFORM_AUTH" in (buildContainerSpec(noKey).env ?? {})));
  });

  test("precedence: link variables < platform identity < the user's variables", () => {
    const targets = [pg(1, "10.0.0.2")];
    const env =
      buildContainerSpec(
        input(
          {
            container_envvars: [
              { key: "PLATFORM_REST_HOST", value: "http://proxy" },
              { key: "DB_PORT", value: "mine" },
            ],
          },
          { links: [{ alias: "db", targets }] },
        ),
      ).env ?? {};
    assert.equal(env.PLATFORM_REST_HOST, "http://proxy");
    assert.equal(env.DOCKERCLOUD_REST_HOST, "http://berth.example:8000");
    assert.equal(env.DB_PORT, "mine");
    assert.equal(env.DB_PORT_5432_TCP_ADDR, "10.0.0.2");
    assert.ok(!("PATH" in env), "image variables are left to the engine");
  });

  test("calculated_envvars: one entry per variable with the origin that wins (image < platform < user)", () => {
    const vars = calculatedEnvvars(
      input(
        { roles: ["global"], container_envvars: [{ key: "MODE", value: "user" }] },
        { links: [{ alias: "db", targets: [pg(1, "10.0.0.2")] }] },
      ),
    );
    const byKey = new Map(vars.map((v) => [v.key, v]));
    assert.deepEqual(byKey.get("PATH"), { key: "PATH", value: "/usr/bin", origin: "image" });
    assert.deepEqual(byKey.get("MODE"), { key: "MODE", value: "user", origin: "user" });
    assert.deepEqual(byKey.get("PLATFORM_NODE_FQDN"), {
      key: "PLATFORM_NODE_FQDN",
      value: NODE_FQDN,
      origin: "platform",
    });
    assert.equal(byKey.get("DB_PORT")?.origin, "platform");
    assert.equal(vars.filter((v) => v.key === "MODE").length, 1);
    // The credential is not shown in views unless asked for.
    assert.ok(!byKey.has("PLATFORM_AUTH"));
    const secret = calculatedEnvvars(input({ roles: ["global"] }), { includeSecrets: true });
    assert.ok(secret.some((v) => v.key === "DOCKERCLOUD_AUTH" && v.value === "Basic c2VjcmV0"));
  });

  test("a service's calculated_envvars have no container or node variables", () => {
    const { container: _c, node: _n, volumesFrom: _v, ...serviceInput } = input();
    const keys = calculatedEnvvars(serviceInput).map((v) => v.key);
    assert.ok(keys.includes("PLATFORM_SERVICE_API_URI"));
    assert.ok(keys.includes("DOCKERCLOUD_SERVICE_FQDN"));
    assert.ok(!keys.some((k) => /CONTAINER_|NODE_/.test(k)));
  });
});

describe("what an engine container says of how it was made", () => {
  test("its environment with origins from Berth's label; PLATFORM_AUTH never recorded", () => {
    const env = environmentFromEngine(
      { PATH: "/bin", MODE: "prod", DB_PORT: "tcp://10.0.0.2:5432", PLATFORM_AUTH: "Basic x" },
      { "io.berth.platform-env": "DB_PORT,PLATFORM_AUTH" },
      [{ key: "MODE", value: "prod" }],
    );
    assert.deepEqual(env, [
      { key: "PATH", value: "/bin", origin: "image" },
      { key: "MODE", value: "prod", origin: "user" },
      { key: "DB_PORT", value: "tcp://10.0.0.2:5432", origin: "platform" },
    ]);
  });

  test("its link host entries from the label; unknown (null) for a container made before the label", () => {
    assert.equal(linkHostsFromEngine({ "io.berth.link-hosts": '["db:10.0.0.2"]' }), '["db:10.0.0.2"]');
    assert.equal(linkHostsFromEngine({}), null);
    assert.equal(linkHostsFromEngine({ "io.berth.link-hosts": "{oops" }), null);
  });
});
