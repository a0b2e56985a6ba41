// The routers' route resolver (drivers/router/dns.ts), asked over UDP by a real resolver (c-ares,
// node:dns) as Caddy asks it: a route's name answers its upstreams' addresses now, a route with
// none answers no address, a name it does not hold is NXDOMAIN, any other name is REFUSED (it
// never recurses), a router is answered only its own routes (by the address it asks from), and
// an answer stays within a UDP message however many upstreams a route has.
import assert from "node:assert/strict";
import dns from "node:dns";
import { after, before, test } from "node:test";
import { RouteResolver, routeDnsName } from "../../src/drivers/router/dns.ts";
import type { Route } from "../../src/drivers/router/router.ts";

const resolver = new RouteResolver({ host: "127.0.0.1", port: 0 });
let server = "";

function route(id: string, ips: string[]): Route {
  return {
    id,
    namespace: "alice",
    service: id,
    service_name: id,
    host: `${id}.test`,
    path: "/",
    port: 8080,
    tls: "off",
    redirect_https: false,
    sticky: false,
    weight: 0,
    source: "domains",
    upstreams: ips.map((ip, i) => ({
      container: `c${i}`,
      name: `c${i}`,
      address: `${ip}:8080`,
      node: "",
      held: false,
    })),
  };
}

/** A resolver asking from `from` (a loopback address), as a router in a node's namespace would. */
function asker(from: string): dns.promises.Resolver {
  const r = new dns.promises.Resolver({ timeout: 2000, tries: 1 });
  r.setServers([server]);
  r.setLocalAddress(from);
  return r;
}

const code = (p: Promise<unknown>) =>
  p.then(
    () => "answered",
    (err: NodeJS.ErrnoException) => err.code,
  );

before(async () => {
  server = (await resolver.listen()).slice("udp/".length);
  const many = Array.from({ length: 200 }, (_, i) => `10.9.${Math.floor(i / 250)}.${(i % 250) + 1}`);
  resolver
    .forSource("127.0.0.1")
    .publish([route("web", ["10.0.0.5", "10.0.0.6"]), route("idle", []), route("wide", many)]);
  resolver.forSource("127.0.0.2").publish([route("bobs", ["10.0.1.5"])]);
});
after(() => resolver.close());

test("a route's name answers its upstreams; a route without any, no address; other names are refused", async () => {
  const r = asker("127.0.0.1");
  assert.deepEqual((await r.resolve4(routeDnsName("web"))).sort(), ["10.0.0.5", "10.0.0.6"]);
  assert.equal(await code(r.resolve4(routeDnsName("idle"))), "ENODATA");
  assert.equal(
    await code(r.resolve6(routeDnsName("web"))),
    "ENODATA",
    "no AAAA: the answer is empty, not an error",
  );
  assert.equal(await code(r.resolve4(routeDnsName("gone"))), "ENOTFOUND");
  assert.equal(await code(r.resolve4("example.com")), "EREFUSED", "never recursive");
  assert.equal(await code(r.resolve4("routes.berth.internal.example.com")), "EREFUSED");

  // A new set of upstreams is the next answer (what a scale or a redeploy changes).
  resolver.forSource("127.0.0.1").publish([route("web", ["10.0.0.7"])]);
  assert.deepEqual(await r.resolve4(routeDnsName("web")), ["10.0.0.7"]);
});

test("a router is answered only its own routes, by the address it asks from", async () => {
  const other = asker("127.0.0.2");
  assert.deepEqual(await other.resolve4(routeDnsName("bobs")), ["10.0.1.5"]);
  assert.equal(await code(other.resolve4(routeDnsName("web"))), "ENOTFOUND");
  // An address no router asks from (a container's) is refused every name.
  assert.equal(await code(asker("127.0.0.3").resolve4(routeDnsName("web"))), "EREFUSED");
});

test("an answer fits one UDP message, and a route of many upstreams gives each its turn", async () => {
  const r = asker("127.0.0.1");
  resolver.forSource("127.0.0.1").publish([
    route(
      "wide",
      Array.from({ length: 200 }, (_, i) => `10.9.${Math.floor(i / 250)}.${(i % 250) + 1}`),
    ),
  ]);
  const seen = new Set<string>();
  for (let i = 0; i < 12; i++) {
    const answer = await r.resolve4(routeDnsName("wide"));
    assert.ok(answer.length > 0 && answer.length <= 64, `addresses in one answer: ${answer.length}`);
    for (const ip of answer) seen.add(ip);
  }
  assert.ok(seen.size > 64, `addresses answered over 12 lookups: ${seen.size}`);
});
