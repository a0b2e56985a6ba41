// Docker-link-style variables, container links and host entries (CONTRACT §10).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  envPrefix,
  hostsFor,
  type LinkTarget,
  linkedToContainer,
  linkVariables,
  linkVariablesOf,
} from "../../src/domain/links.ts";

const pg = (n: number, ip: string | null): LinkTarget => ({
  name: `postgres-${n}`,
  resource_uri: `/api/app/v1/alice/container/uuid-pg-${n}/`,
  private_ip: ip,
  ports: [{ inner_port: 5432, protocol: "tcp" }],
  envvars: [{ key: "POSTGRES_USER", value: "app" }],
});

// Given out of order on purpose: "the first" is the lowest container number.
const TARGETS = [pg(2, "10.0.0.3"), pg(1, "10.0.0.2")];

describe("link variables", () => {
  test("a link named db to a 2-container service gives exactly Docker's variables, per container too", () => {
    assert.deepEqual(linkVariables("db", TARGETS, { clientName: "web-1" }), {
      DB_PORT: "tcp://10.0.0.2:5432",
      DB_PORT_5432_TCP: "tcp://10.0.0.2:5432",
      DB_PORT_5432_TCP_ADDR: "10.0.0.2",
      DB_PORT_5432_TCP_PORT: "5432",
      DB_PORT_5432_TCP_PROTO: "tcp",
      DB_NAME: "/web-1/db",
      DB_ENV_POSTGRES_USER: "app",
      DB_1_PORT: "tcp://10.0.0.2:5432",
      DB_1_PORT_5432_TCP: "tcp://10.0.0.2:5432",
      DB_1_PORT_5432_TCP_ADDR: "10.0.0.2",
      DB_1_PORT_5432_TCP_PORT: "5432",
      DB_1_PORT_5432_TCP_PROTO: "tcp",
      DB_1_NAME: "/web-1/db_1",
      DB_1_ENV_POSTGRES_USER: "app",
      DB_2_PORT: "tcp://10.0.0.3:5432",
      DB_2_PORT_5432_TCP: "tcp://10.0.0.3:5432",
      DB_2_PORT_5432_TCP_ADDR: "10.0.0.3",
      DB_2_PORT_5432_TCP_PORT: "5432",
      DB_2_PORT_5432_TCP_PROTO: "tcp",
      DB_2_NAME: "/web-1/db_2",
      DB_2_ENV_POSTGRES_USER: "app",
    });
  });

  test("the service's own link_variables: its name as the alias, no NAME variables", () => {
    const vars = linkVariablesOf("postgres", TARGETS);
    assert.equal(vars.POSTGRES_PORT_5432_TCP, "tcp://10.0.0.2:5432");
    assert.equal(vars.POSTGRES_2_PORT_5432_TCP_ADDR, "10.0.0.3");
    assert.equal(vars.POSTGRES_1_ENV_POSTGRES_USER, "app");
    assert.equal(Object.keys(vars).length, 18);
    assert.ok(!Object.keys(vars).some((k) => k.endsWith("_NAME")));
  });

  test("the alias is upper-cased and anything but letters and digits becomes _", () => {
    assert.equal(envPrefix("my-db.main"), "MY_DB_MAIN");
    assert.ok("MY_DB_PORT" in linkVariables("my-db", TARGETS));
  });

  test("numbering follows the container name; targets without an address are left out", () => {
    const vars = linkVariables("db", [pg(3, "10.0.0.4"), pg(1, null)]);
    assert.equal(vars.DB_PORT, "tcp://10.0.0.4:5432");
    assert.ok("DB_3_PORT" in vars);
    assert.ok(!("DB_1_PORT" in vars));
    assert.deepEqual(linkVariables("db", [pg(1, null)]), {});
  });

  test("<ALIAS>_PORT is the lowest port, tcp before udp (Docker's rule)", () => {
    const dns: LinkTarget = {
      name: "dns-1",
      resource_uri: "/c/",
      private_ip: "10.0.0.9",
      ports: [
        { inner_port: 8080, protocol: "tcp" },
        { inner_port: 53, protocol: "udp" },
        { inner_port: 53, protocol: "tcp" },
      ],
      envvars: [],
    };
    const vars = linkVariables("dns", [dns]);
    assert.equal(vars.DNS_PORT, "tcp://10.0.0.9:53");
    assert.equal(vars.DNS_PORT_53_UDP, "udp://10.0.0.9:53");
    assert.equal(vars.DNS_PORT_53_UDP_PROTO, "udp");
    assert.equal(vars.DNS_1_PORT_8080_TCP_PORT, "8080");
  });
});

describe("linked_to_container and host entries", () => {
  test("one container link per reachable target, with the address of every port", () => {
    const from = "/api/app/v1/alice/container/uuid-web-1/";
    assert.deepEqual(linkedToContainer(from, "db", TARGETS), [
      {
        name: "DB_1",
        from_container: from,
        to_container: "/api/app/v1/alice/container/uuid-pg-1/",
        endpoints: { "5432/tcp": "tcp://10.0.0.2:5432" },
      },
      {
        name: "DB_2",
        from_container: from,
        to_container: "/api/app/v1/alice/container/uuid-pg-2/",
        endpoints: { "5432/tcp": "tcp://10.0.0.3:5432" },
      },
    ]);
  });

  test("the alias resolves to the first target, each container name to its own address", () => {
    assert.deepEqual(hostsFor("db", TARGETS), ["db:10.0.0.2", "postgres-1:10.0.0.2", "postgres-2:10.0.0.3"]);
    assert.deepEqual(hostsFor("db", [pg(1, null)]), []);
    // Linked under its own container name, the alias entry is not repeated.
    assert.deepEqual(hostsFor("postgres-1", [pg(1, "10.0.0.2")]), ["postgres-1:10.0.0.2"]);
  });
});
