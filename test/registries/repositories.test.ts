// External repositories through the API: names with raw slashes, credentials checked against a
// fake v2 registry on 127.0.0.1 (Basic and the Bearer token flow), refusals of hosts Berth must
// not contact, secrecy of the password, and pulls that use the repository's credentials.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  actionOf,
  call,
  closeSim,
  createUser,
  deployCluster,
  type FakeRegistry,
  finishedAction,
  runningService,
  type SimHarness,
  startFakeRegistry,
  startSimHarness,
} from "./support.ts";

const USER = "ci-robot";
const PASSWORD = "s3cret-Passw0rd-that-must-never-leak";
const WRONG = "not-the-password";

let basicReg: FakeRegistry;
let bearerReg: FakeRegistry;
let openReg: FakeRegistry;
let s: SimHarness;

before(async () => {
  basicReg = await startFakeRegistry({ auth: "basic", username: USER, password: PASSWORD });
  bearerReg = await startFakeRegistry({ auth: "bearer", username: USER, password: PASSWORD });
  openReg = await startFakeRegistry({ auth: "none" });
  s = await startSimHarness({
    env: { BERTH_REGISTRY_ALLOW: "127.0.0.1", BERTH_REGISTRY_TIMEOUT_MS: "1500" },
    registry: () => [
      {
        ref: `${basicReg.host}/team/app:1`,
        cmd: ["sleep", "100000"],
        auth: { username: USER, password: PASSWORD },
      },
    ],
  });
});

after(async () => {
  await closeSim(s);
  await Promise.all([basicReg?.close(), bearerReg?.close(), openReg?.close()]);
});

const base = "/api/repo/v1/repository/";

describe("external repositories", () => {
  test("a repository on a Basic registry is added with the right credentials and refused with wrong ones", async () => {
    const wrong = await call(s.h, s.alice, "POST", base, {
      name: `${basicReg.host}/team/app`,
      username: USER,
      password: WRONG,
    });
    assert.equal(wrong.status, 400, wrong.raw);
    assert.equal(wrong.body.code, "bad_credentials");
    assert.match(wrong.body.error, /refused the username and password/);

    const missing = await call(s.h, s.alice, "POST", base, { name: `${basicReg.host}/team/app` });
    assert.equal(missing.status, 400, missing.raw);
    assert.equal(missing.body.code, "bad_credentials");
    assert.match(missing.body.error, /requires a username and password/);

    const ok = await call(s.h, s.alice, "POST", base, {
      name: `${basicReg.host}/team/app`,
      username: USER,
      password: PASSWORD,
    });
    assert.equal(ok.status, 201, ok.raw);
    assert.deepEqual(Object.keys(ok.body).sort(), ["in_use", "name", "registry", "resource_uri", "uuid"]);
    assert.equal(ok.body.name, `${basicReg.host}/team/app`);
    assert.equal(ok.body.resource_uri, `/api/repo/v1/alice/repository/${basicReg.host}/team/app/`);
    assert.equal(ok.body.registry, `/api/repo/v1/alice/registry/${basicReg.host}/`);
    assert.equal(ok.body.in_use, false);
    assert.ok(
      basicReg.requests.some((r) => r.url === "/v2/" && r.authorization?.startsWith("Basic ")),
      "Berth checked the credentials with the registry",
    );

    const again = await call(s.h, s.alice, "POST", base, {
      name: `${basicReg.host}/team/app`,
      username: USER,
      password: PASSWORD,
    });
    assert.equal(again.status, 409, again.raw);
    assert.equal(again.body.code, "name_taken");
  });

  test("a repository on a token registry goes through the Bearer flow", async () => {
    const wrong = await call(s.h, s.alice, "POST", base, {
      name: `${bearerReg.host}/team/api`,
      username: USER,
      password: WRONG,
    });
    assert.equal(wrong.status, 400, wrong.raw);
    assert.equal(wrong.body.code, "bad_credentials");
    const ok = await call(s.h, s.alice, "POST", base, {
      name: `${bearerReg.host}/team/api`,
      username: USER,
      password: PASSWORD,
    });
    assert.equal(ok.status, 201, ok.raw);
    const tokenCall = bearerReg.requests.find(
      (r) => r.url.startsWith("/token?") && r.authorization?.startsWith("Basic "),
    );
    assert.ok(tokenCall, "Berth asked the realm for a token with the credentials");
    const q = new URL(tokenCall.url, "http://x").searchParams;
    assert.equal(q.get("service"), "fake-registry");
    assert.equal(q.get("scope"), "repository:team/api:pull");
    assert.ok(
      bearerReg.requests.some((r) => r.url === "/v2/" && r.authorization === "Bearer fake-token-0123456789"),
      "and used the token on /v2/",
    );
  });

  test("a public repository needs no credentials", async () => {
    const ok = await call(s.h, s.alice, "POST", base, { name: `${openReg.host}/library/tool` });
    assert.equal(ok.status, 201, ok.raw);
    const half = await call(s.h, s.alice, "POST", base, {
      name: `${openReg.host}/library/other`,
      username: "x",
    });
    assert.equal(half.status, 400, half.raw);
    assert.equal(half.body.details[0].field, "password");
  });

  test("names travel with raw slashes, %2F and in the namespaced form; the list filters by name, a name's part and registry", async () => {
    const name = `${basicReg.host}/team/app`;
    for (const url of [
      `${base}${name}/`,
      `${base}${name}`,
      `${base}${name.replaceAll("/", "%2F")}/`,
      `/api/repo/v1/alice/repository/${name}/`,
      `//api/repo/v1//repository/${name}//`,
    ]) {
      const r = await call(s.h, s.alice, "GET", url);
      assert.equal(r.status, 200, `${url}: ${r.raw}`);
      assert.equal(r.body.name, name);
    }
    const list = await call(s.h, s.alice, "GET", base);
    assert.equal(list.status, 200);
    assert.equal(list.body.meta.total_count, 3);
    const byName = await call(s.h, s.alice, "GET", `${base}?name=${encodeURIComponent(name)}`);
    assert.deepEqual(
      byName.body.objects.map((o: { name: string }) => o.name),
      [name],
    );
    // A search (name__icontains, any case): the dashboard's search box on the repositories list.
    const searched = await call(s.h, s.alice, "GET", `${base}?name__icontains=TEAM%2FAPP`);
    assert.ok(searched.body.objects.some((o: { name: string }) => o.name === name));
    const none = await call(s.h, s.alice, "GET", `${base}?name__icontains=no-such-repo`);
    assert.equal(none.body.meta.total_count, 0);
    for (const registry of [
      `/api/repo/v1/alice/registry/${bearerReg.host}/`,
      `/api/repo/v1/registry/${bearerReg.host}/`,
      bearerReg.host,
    ]) {
      const r = await call(s.h, s.alice, "GET", `${base}?registry=${encodeURIComponent(registry)}`);
      assert.deepEqual(
        r.body.objects.map((o: { name: string }) => o.name),
        [`${bearerReg.host}/team/api`],
        registry,
      );
    }
    const missing = await call(s.h, s.alice, "GET", `${base}${basicReg.host}/team/nope/`);
    assert.equal(missing.status, 404);
    const post = await call(s.h, s.alice, "POST", `${base}${name}/`);
    assert.equal(post.status, 405);
    assert.equal(post.headers.allow, "GET, PATCH, DELETE");
    const put = await call(s.h, s.alice, "PUT", base);
    assert.equal(put.status, 405);
  });

  test("the registries of the namespace's repositories are listed and found by host", async () => {
    const list = await call(s.h, s.alice, "GET", "/api/repo/v1/registry/");
    assert.equal(list.status, 200, list.raw);
    const hosts = list.body.objects.map((r: { host: string }) => r.host).sort();
    assert.deepEqual(hosts, [basicReg.host, bearerReg.host, openReg.host].sort());
    const one = await call(s.h, s.alice, "GET", `/api/repo/v1/registry/${basicReg.host}/`);
    assert.equal(one.status, 200, one.raw);
    assert.equal(one.body.resource_uri, `/api/repo/v1/alice/registry/${basicReg.host}/`);
    assert.equal(one.body.is_native_registry, false);
    assert.equal(one.body.is_tutum_registry, false);
    assert.equal(one.body.is_ssl, false, "a loopback registry is reached over plain HTTP");
    assert.equal(one.body.port, Number(basicReg.host.split(":")[1]));
    assert.equal(one.body.name, basicReg.host);
    assert.match(one.body.uuid, /^[0-9a-f-]{36}$/);
    const byUuid = await call(s.h, s.alice, "GET", `/api/repo/v1/registry/?uuid=${one.body.uuid}`);
    assert.equal(byUuid.body.meta.total_count, 1);
    const natives = await call(s.h, s.alice, "GET", "/api/repo/v1/registry/?is_native_registry=true");
    assert.equal(natives.body.meta.total_count, 0, "no registry of Berth's own is configured here");
    const bad = await call(s.h, s.alice, "GET", "/api/repo/v1/registry/?is_native_registry=maybe");
    assert.equal(bad.status, 400, bad.raw);
    const other = await createUser(s.h, "bob");
    const hidden = await call(s.h, other, "GET", `/api/repo/v1/registry/${basicReg.host}/`);
    assert.equal(hidden.status, 404, "another namespace does not see alice's registries");
    const hiddenRepo = await call(
      s.h,
      other,
      "GET",
      `/api/repo/v1/alice/repository/${basicReg.host}/team/app/`,
    );
    assert.equal(hiddenRepo.status, 404);
  });

  test("PATCH checks the new credentials; DELETE removes the repository from Berth only", async () => {
    const uri = `${base}${bearerReg.host}/team/api/`;
    const wrong = await call(s.h, s.alice, "PATCH", uri, { username: USER, password: WRONG });
    assert.equal(wrong.status, 400, wrong.raw);
    assert.equal(wrong.body.code, "bad_credentials");
    const empty = await call(s.h, s.alice, "PATCH", uri, {});
    assert.equal(empty.status, 400, empty.raw);
    const ok = await call(s.h, s.alice, "PATCH", uri, { password: PASSWORD });
    assert.equal(ok.status, 200, ok.raw);
    assert.equal(ok.body.name, `${bearerReg.host}/team/api`);
    const del = await call(s.h, s.alice, "DELETE", uri);
    assert.equal(del.status, 204, del.raw);
    assert.equal(del.raw, "");
    assert.equal(del.headers["content-length"], "0");
    assert.ok(del.headers["x-platform-action-uri"], "the delete is an action");
    assert.equal((await call(s.h, s.alice, "GET", uri)).status, 404);
    assert.equal((await call(s.h, s.alice, "DELETE", uri)).status, 404);
  });

  test("names that are not <registry host>/<path> are refused with the field named", async () => {
    for (const name of [
      "app",
      "team/app",
      "reg.example.test/Team/app",
      "reg.example.test/team/app:1",
      "reg.example.test/",
      "300.1.1.1:5000/app",
      "reg.example.test:99999/app",
    ]) {
      const r = await call(s.h, s.alice, "POST", base, { name, username: USER, password: PASSWORD });
      assert.equal(r.status, 400, `${name}: ${r.raw}`);
      assert.equal(r.body.code, "invalid_field", name);
      assert.equal(r.body.details[0].field, "name", name);
    }
    const noName = await call(s.h, s.alice, "POST", base, { username: USER });
    assert.equal(noName.status, 400);
  });
});

describe("outbound safety", () => {
  test("with 127.0.0.1 allow-listed, 127.0.0.2 is still refused", async () => {
    const r = await call(s.h, s.alice, "POST", base, { name: "127.0.0.2:5000/team/app" });
    assert.equal(r.status, 400, r.raw);
    assert.equal(r.body.code, "registry_refused");
  });

  test("a redirect to another host is not followed", async () => {
    const redirecting = await startFakeRegistry({
      auth: "none",
      override: (req, res) => {
        res.writeHead(302, { location: `http://127.0.0.2:${req.socket.localPort}/v2/` });
        res.end();
        return true;
      },
    });
    try {
      const r = await call(s.h, s.alice, "POST", base, { name: `${redirecting.host}/team/app` });
      assert.equal(r.status, 400, r.raw);
      assert.equal(r.body.code, "registry_refused");
      assert.match(r.body.error, /redirected to another host/);
    } finally {
      await redirecting.close();
    }
  });

  test("a registry that does not answer is given up after the configured timeout", async () => {
    const silent = await startFakeRegistry({ auth: "none", override: () => true });
    try {
      const startedAt = Date.now();
      const r = await call(s.h, s.alice, "POST", base, { name: `${silent.host}/team/app` });
      assert.equal(r.status, 400, r.raw);
      assert.equal(r.body.code, "registry_unreachable");
      assert.match(r.body.error, /did not answer within 1500 ms/);
      assert.ok(Date.now() - startedAt < 5000);
    } finally {
      await silent.close();
    }
  });

  test("something that is not a registry is refused", async () => {
    const web = await startFakeRegistry({
      auth: "none",
      override: (_req, res) => {
        res.writeHead(404);
        res.end("not here");
        return true;
      },
    });
    try {
      const r = await call(s.h, s.alice, "POST", base, { name: `${web.host}/team/app` });
      assert.equal(r.status, 400, r.raw);
      assert.equal(r.body.code, "not_a_registry");
    } finally {
      await web.close();
    }
  });
});

describe("pulls with the repository's credentials", () => {
  test("a node that lacks the image pulls it with the credentials; the action log shows the pull; in_use follows", async () => {
    await deployCluster(s, 1);
    const image = `${basicReg.host}/team/app:1`;
    const svc = await runningService(s, { image, name: "private-app" });
    assert.equal(svc.running_num_containers, 1);
    const start = (
      await s.h.store.actions.listActions({
        namespaces: ["alice"],
        objects: [svc.resource_uri],
        limit: 10,
        offset: 0,
      })
    ).rows.find((a) => a.action === "Service Start");
    assert.ok(start);
    const log = (await finishedAction(s, start.uuid)).log;
    assert.ok(log.includes(`Pulling image ${image}`), log.join("\n"));
    assert.ok(log.includes(`Pulled image ${image}`), log.join("\n"));

    const repo = await call(s.h, s.alice, "GET", `${base}${basicReg.host}/team/app/`);
    assert.equal(repo.body.in_use, true);
    const terminate = await call(s.h, s.alice, "DELETE", svc.resource_uri);
    assert.equal(terminate.status, 202);
    assert.equal((await finishedAction(s, actionOf(terminate))).state, "Success");
    const after = await call(s.h, s.alice, "GET", `${base}${basicReg.host}/team/app/`);
    assert.equal(after.body.in_use, false, "not in use once the service is terminated");
  });

  test("another namespace's credentials are never used: without a repository the pull is refused", async () => {
    const carol = await createUser(s.h, "carol");
    await deployCluster(s, 1, carol);
    const created = await call(s.h, carol, "POST", "/api/app/v1/service/", {
      image: `${basicReg.host}/team/app:1`,
      name: "borrowed",
      run_command: "sleep 100000",
    });
    assert.equal(created.status, 201, created.raw);
    const start = await call(s.h, carol, "POST", `${created.body.resource_uri}start/`);
    const a = await finishedAction(s, actionOf(start));
    assert.equal(a.state, "Failed");
    assert.ok(
      a.log.some((l) => /could not pull .*authentication required/.test(l)),
      a.log.join("\n"),
    );
  });
});

describe("the password stays secret", () => {
  test("it is sealed at rest and never appears in a response, the log or an action", async () => {
    // Every response of this file went through call(); look at the stored state and the log too.
    const row = await s.h.store.registries.findRepository("alice", `${basicReg.host}/team/app`);
    assert.ok(row?.credentials);
    assert.match(row.credentials, /^v1\./, "sealed with the secret box");
    assert.ok(!row.credentials.includes(PASSWORD));

    const responses = [
      await call(s.h, s.alice, "GET", base),
      await call(s.h, s.alice, "GET", `${base}${basicReg.host}/team/app/`),
      await call(s.h, s.alice, "PATCH", `${base}${basicReg.host}/team/app/`, {
        username: USER,
        password: PASSWORD,
      }),
      await call(s.h, s.alice, "PATCH", `${base}${basicReg.host}/team/app/`, {
        username: USER,
        password: WRONG,
      }),
      await call(s.h, s.alice, "GET", "/api/audit/v1/action/?limit=1000"),
    ];
    const secretForms = [PASSWORD, WRONG, Buffer.from(`${USER}:${PASSWORD}`).toString("base64")];
    for (const r of responses) {
      for (const secret of secretForms) assert.ok(!r.raw.includes(secret), `response ${r.raw.slice(0, 200)}`);
    }
    const { rows } = await s.h.store.actions.listActions({
      namespaces: ["alice", "carol"],
      limit: 1000,
      offset: 0,
    });
    assert.ok(
      rows.some((a) => a.action === "Repository Create"),
      "repository calls are actions",
    );
    assert.ok(rows.some((a) => a.action === "Repository Update" && a.state === "Failed"));
    for (const a of rows) {
      const text = JSON.stringify(a) + JSON.stringify(await s.h.store.actions.actionLogTail(a.uuid, 1000));
      for (const secret of secretForms) assert.ok(!text.includes(secret), `action ${a.action}`);
    }
    assert.ok(s.log.text.length > 1000, "the server log was captured");
    assert.match(s.log.text, /repo\/v1\/repository/, "the log holds the repository calls");
    for (const secret of secretForms)
      assert.ok(!s.log.text.includes(secret), "the log never holds the password");
  });
});
