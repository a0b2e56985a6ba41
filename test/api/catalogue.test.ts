// The infrastructure catalogue (spec "Infrastructure catalogue"; CONTRACT §4): read-only lists
// and objects of providers, regions, availability zones and node types, with their filters.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Caller, call, createUser, type Harness, startHarness } from "../support/harness.ts";

let h: Harness;
let alice: Caller;

before(async () => {
  h = await startHarness();
  alice = await createUser(h, "alice");
});

after(async () => {
  await h.close();
});

// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON.
async function list(url: string): Promise<any[]> {
  const sep = url.includes("?") ? "&" : "?";
  const res = await call(h, alice, "GET", `${url}${sep}limit=1000`);
  assert.equal(res.status, 200, `${url}: ${res.raw}`);
  assert.equal(res.body.meta.total_count, res.body.objects.length);
  return res.body.objects;
}

const uris = (objects: { resource_uri: string }[]) => objects.map((o) => o.resource_uri).sort();

describe("providers", () => {
  test("the providers are local and three simulated ones, labelled simulated", async () => {
    const providers = await list("/api/infra/v1/provider/");
    const names = providers.map((p) => p.name);
    assert.ok(names.includes("local"), `providers: ${names.join(", ")}`);
    const simulated = providers.filter((p) => /simulated/i.test(p.label));
    assert.deepEqual(simulated.map((p) => p.name).sort(), ["aws", "digitalocean", "softlayer"]);
    const local = providers.find((p) => p.name === "local");
    assert.doesNotMatch(local.label, /simulated/i);
  });

  test("a provider has every field of the spec, with its regions as URIs", async () => {
    const res = await call(h, alice, "GET", "/api/infra/v1/provider/aws/");
    assert.equal(res.status, 200);
    assert.deepEqual(Object.keys(res.body).sort(), [
      "available",
      "label",
      "name",
      "node_cluster_rules",
      "regions",
      "resource_uri",
    ]);
    // Berth extension: what node clusters of the provider accept (the dashboard's form follows it).
    assert.deepEqual(res.body.node_cluster_rules, {
      provider_options: true,
      disk: "any",
      disk_sizes: [],
      default_disk: 60,
    });
    assert.equal(res.body.resource_uri, "/api/infra/v1/provider/aws/");
    assert.equal(res.body.name, "aws");
    assert.equal(typeof res.body.available, "boolean");
    assert.ok(res.body.regions.length > 0);
    for (const r of res.body.regions) assert.match(r, /^\/api\/infra\/v1\/region\/aws\/[^/]+\/$/);
  });

  test("the name filter selects one provider", async () => {
    const found = await list("/api/infra/v1/provider/?name=digitalocean");
    assert.deepEqual(uris(found), ["/api/infra/v1/provider/digitalocean/"]);
    assert.deepEqual(await list("/api/infra/v1/provider/?name=nosuch"), []);
  });
});

describe("objects by URI", () => {
  test("every listed object is readable at its resource_uri, which equals the path", async () => {
    for (const collection of ["provider", "region", "az", "nodetype"]) {
      const objects = await list(`/api/infra/v1/${collection}/`);
      assert.ok(objects.length > 0, `${collection} list is not empty`);
      for (const o of objects) {
        const res = await call(h, alice, "GET", o.resource_uri);
        assert.equal(res.status, 200, o.resource_uri);
        assert.equal(res.body.resource_uri, o.resource_uri);
        assert.deepEqual(res.body, o);
      }
    }
  });

  test("catalogue URIs have exactly the forms of the contract", async () => {
    const checks: [string, RegExp][] = [
      ["provider", /^\/api\/infra\/v1\/provider\/[^/]+\/$/],
      ["region", /^\/api\/infra\/v1\/region\/[^/]+\/[^/]+\/$/],
      ["az", /^\/api\/infra\/v1\/az\/[^/]+\/[^/]+\/[^/]+\/$/],
      ["nodetype", /^\/api\/infra\/v1\/nodetype\/[^/]+\/[^/]+\/$/],
    ];
    for (const [collection, form] of checks) {
      for (const o of await list(`/api/infra/v1/${collection}/`)) assert.match(o.resource_uri, form);
    }
  });

  test("a region, zone and node type are addressed by provider, region and name", async () => {
    const region = await call(h, alice, "GET", "/api/infra/v1/region/aws/us-east-1/");
    assert.equal(region.status, 200);
    assert.equal(region.body.resource_uri, "/api/infra/v1/region/aws/us-east-1/");
    assert.equal(region.body.name, "us-east-1");
    assert.equal(region.body.provider, "/api/infra/v1/provider/aws/");
    assert.ok(region.body.availability_zones.includes("/api/infra/v1/az/aws/us-east-1/us-east-1a/"));
    assert.ok(region.body.node_types.includes("/api/infra/v1/nodetype/aws/t2.micro/"));

    const az = await call(h, alice, "GET", "/api/infra/v1/az/aws/us-east-1/us-east-1a/");
    assert.equal(az.status, 200);
    assert.deepEqual(Object.keys(az.body).sort(), ["available", "name", "region", "resource_uri"]);
    assert.equal(az.body.resource_uri, "/api/infra/v1/az/aws/us-east-1/us-east-1a/");
    assert.equal(az.body.region, "/api/infra/v1/region/aws/us-east-1/");

    const nt = await call(h, alice, "GET", "/api/infra/v1/nodetype/aws/t2.micro/");
    assert.equal(nt.status, 200);
    assert.deepEqual(Object.keys(nt.body).sort(), [
      "availability_zones",
      "available",
      "label",
      "name",
      "provider",
      "regions",
      "resource_uri",
    ]);
    assert.equal(nt.body.resource_uri, "/api/infra/v1/nodetype/aws/t2.micro/");
    assert.equal(nt.body.provider, "/api/infra/v1/provider/aws/");
    assert.ok(nt.body.regions.includes("/api/infra/v1/region/aws/us-east-1/"));
  });

  test("the objects reference each other consistently", async () => {
    const providers = await list("/api/infra/v1/provider/");
    const regions = await list("/api/infra/v1/region/");
    const azs = await list("/api/infra/v1/az/");
    const nodetypes = await list("/api/infra/v1/nodetype/");
    const regionUris = new Set(regions.map((r) => r.resource_uri));
    const azUris = new Set(azs.map((z) => z.resource_uri));
    const ntUris = new Set(nodetypes.map((n) => n.resource_uri));
    for (const p of providers) {
      for (const r of p.regions) assert.ok(regionUris.has(r), `${p.name} → ${r}`);
    }
    for (const r of regions) {
      assert.ok(providers.some((p) => p.resource_uri === r.provider));
      for (const z of r.availability_zones) assert.ok(azUris.has(z), `${r.resource_uri} → ${z}`);
      for (const n of r.node_types) assert.ok(ntUris.has(n), `${r.resource_uri} → ${n}`);
    }
    for (const z of azs) assert.ok(regionUris.has(z.region));
  });

  test("unknown catalogue objects are 404 with a JSON error", async () => {
    for (const url of [
      "/api/infra/v1/provider/nosuch/",
      "/api/infra/v1/region/aws/nosuch/",
      "/api/infra/v1/region/nosuch/us-east-1/",
      "/api/infra/v1/region/digitalocean/us-east-1/",
      "/api/infra/v1/az/aws/us-east-1/nosuch/",
      "/api/infra/v1/az/aws/us-west-2/us-east-1a/",
      "/api/infra/v1/nodetype/aws/nosuch/",
      "/api/infra/v1/nodetype/digitalocean/t2.micro/",
    ]) {
      const res = await call(h, alice, "GET", url);
      assert.equal(res.status, 404, url);
      assert.equal(typeof res.body.error, "string");
      assert.equal(res.body.code, "not_found");
    }
  });
});

describe("filters", () => {
  for (const slash of ["/", ""]) {
    const label = slash ? "with" : "without";
    test(`regions filter by provider URI (${label} trailing slash)`, async () => {
      const found = await list(`/api/infra/v1/region/?provider=/api/infra/v1/provider/aws${slash}`);
      assert.ok(found.length > 1);
      for (const r of found) assert.equal(r.provider, "/api/infra/v1/provider/aws/");
      const aws = await call(h, alice, "GET", "/api/infra/v1/provider/aws/");
      assert.deepEqual(uris(found), [...aws.body.regions].sort());
    });

    test(`zones filter by region URI (${label} trailing slash)`, async () => {
      const found = await list(`/api/infra/v1/az/?region=/api/infra/v1/region/aws/us-east-1${slash}`);
      const region = await call(h, alice, "GET", "/api/infra/v1/region/aws/us-east-1/");
      assert.ok(found.length > 0);
      assert.deepEqual(uris(found), [...region.body.availability_zones].sort());
      for (const z of found) assert.equal(z.region, "/api/infra/v1/region/aws/us-east-1/");
    });

    test(`node types filter by region URI (${label} trailing slash)`, async () => {
      const found = await list(`/api/infra/v1/nodetype/?regions=/api/infra/v1/region/aws/us-east-1${slash}`);
      const region = await call(h, alice, "GET", "/api/infra/v1/region/aws/us-east-1/");
      assert.ok(found.length > 0);
      assert.deepEqual(uris(found), [...region.body.node_types].sort());
      for (const n of found) assert.ok(n.regions.includes("/api/infra/v1/region/aws/us-east-1/"));
    });

    test(`node types filter by availability zone URI (${label} trailing slash)`, async () => {
      const zone = "/api/infra/v1/az/aws/us-east-1/us-east-1a/";
      const found = await list(`/api/infra/v1/nodetype/?availability_zones=${zone.slice(0, -1)}${slash}`);
      assert.ok(found.length > 0);
      for (const n of found) {
        assert.ok(n.availability_zones.includes(zone));
        assert.equal(n.provider, "/api/infra/v1/provider/aws/");
      }
      const all = await list("/api/infra/v1/nodetype/");
      assert.deepEqual(uris(found), uris(all.filter((n) => n.availability_zones.includes(zone))));
    });
  }

  test("filters select nothing for an unknown URI, and never mix providers", async () => {
    assert.deepEqual(await list("/api/infra/v1/region/?provider=/api/infra/v1/provider/nosuch/"), []);
    assert.deepEqual(await list("/api/infra/v1/az/?region=/api/infra/v1/region/digitalocean/nyc1/"), []);
    const doTypes = await list("/api/infra/v1/nodetype/?regions=/api/infra/v1/region/digitalocean/nyc1/");
    assert.ok(doTypes.length > 0);
    for (const n of doTypes) assert.equal(n.provider, "/api/infra/v1/provider/digitalocean/");
  });

  test("regions and zones filter by name", async () => {
    assert.deepEqual(uris(await list("/api/infra/v1/region/?name=us-west-2")), [
      "/api/infra/v1/region/aws/us-west-2/",
    ]);
    assert.deepEqual(uris(await list("/api/infra/v1/az/?name=us-east-1b")), [
      "/api/infra/v1/az/aws/us-east-1/us-east-1b/",
    ]);
    assert.deepEqual(uris(await list("/api/infra/v1/nodetype/?name=t2.nano")), [
      "/api/infra/v1/nodetype/aws/t2.nano/",
    ]);
  });

  test("filters combine with pagination", async () => {
    const res = await call(
      h,
      alice,
      "GET",
      "/api/infra/v1/az/?region=/api/infra/v1/region/aws/us-east-1/&limit=3",
    );
    assert.equal(res.status, 200);
    assert.equal(res.body.objects.length, 3);
    const region = await call(h, alice, "GET", "/api/infra/v1/region/aws/us-east-1/");
    assert.equal(res.body.meta.total_count, region.body.availability_zones.length);
  });
});

describe("read only", () => {
  for (const [method, url] of [
    ["POST", "/api/infra/v1/provider/"],
    ["POST", "/api/infra/v1/region/"],
    ["POST", "/api/infra/v1/az/"],
    ["POST", "/api/infra/v1/nodetype/"],
    ["PUT", "/api/infra/v1/provider/aws/"],
    ["PATCH", "/api/infra/v1/region/aws/us-east-1/"],
    ["DELETE", "/api/infra/v1/az/aws/us-east-1/us-east-1a/"],
    ["DELETE", "/api/infra/v1/nodetype/aws/t2.micro/"],
  ] as const) {
    test(`${method} ${url} is 405, allowing only GET`, async () => {
      const res = await call(h, alice, method, url, method === "DELETE" ? undefined : { name: "mine" });
      assert.equal(res.status, 405);
      assert.equal(res.headers.allow, "GET");
      assert.equal(res.body.code, "method_not_allowed");
      assert.equal(typeof res.body.error, "string");
    });
  }

  test("a refused write changes nothing", async () => {
    const before = await list("/api/infra/v1/provider/");
    await call(h, alice, "POST", "/api/infra/v1/provider/", { name: "mine", label: "Mine" });
    assert.deepEqual(await list("/api/infra/v1/provider/"), before);
  });
});
