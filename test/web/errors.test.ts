// Errors that help, in a real Chromium: a refused scale in words next to the Containers field (no
// notice naming API fields), gone when the number is edited; error notices dismiss themselves and
// stay on the page they were raised on; a refusal of the cluster form goes with the next edit; the
// account page's profile, email, key and organization forms say theirs next to the field; so do
// the alert and trigger forms.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ADMIN_PASSWORD, browserSuite, browserUnavailable, openPage, signInAs } from "./browser.ts";

const unavailable = browserUnavailable();

describe("errors in Chromium", { skip: unavailable }, () => {
  const suite = browserSuite();

  test("a refused scale: in words next to the field, no notice, gone after an edit", async () => {
    const svc = await suite.berth.api("POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: "scaled",
    });
    assert.equal(svc.status, 201);
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.goto(`/#/services/${svc.body.uuid}`);
    const field = page.locator('input[name="target_num_containers"]');
    await field.fill("500");
    await page.getByRole("button", { name: "Scale" }).click();
    const problem = page.locator('[data-field="target_num_containers"] .field-error');
    await problem.waitFor();
    assert.match(await problem.innerText(), /^Containers must be/);
    assert.equal(await page.locator(".notice.error").count(), 0, "no notice");
    assert.doesNotMatch(await page.locator("main").innerText(), /target_num_containers/);
    await field.fill("2");
    await problem.waitFor({ state: "detached" });
    assert.deepEqual(
      errors.filter((e) => !/status of 400/.test(e)),
      [],
    );
    await context.close();
  });

  test("the alert and trigger forms: a refusal next to its field, no notice, gone once it is edited", async () => {
    const svc = await suite.berth.api("POST", "/api/app/v1/service/", {
      image: "busybox:local",
      name: "hooked",
    });
    assert.equal(svc.status, 201);
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.goto("/#/alerts");
    const form = page.getByRole("form", { name: "New alert rule" });
    await form.getByLabel("Name").fill("down");
    await form.getByLabel("URL").fill("http://127.0.0.1:9/hook");
    await form.getByRole("button", { name: "Create alert" }).click();
    const urlProblem = form.locator('[data-field="channels"] .field-error');
    await urlProblem.waitFor();
    assert.match(await urlProblem.innerText(), /loopback/);
    assert.equal(await page.locator(".notice.error").count(), 0, "no notice");
    await form.getByLabel("URL").fill("http://hooks.example.test/x");
    await urlProblem.waitFor({ state: "detached" });

    await page.goto(`/#/services/${svc.body.uuid}`);
    const trigger = page.getByRole("form", { name: "New trigger" });
    await trigger.getByLabel("Trigger name").fill("x".repeat(300));
    await trigger.getByRole("button", { name: "Create trigger" }).click();
    const nameProblem = trigger.locator('[data-field="name"] .field-error');
    await nameProblem.waitFor();
    assert.equal(await page.locator(".notice.error").count(), 0, "no notice");
    await trigger.getByLabel("Trigger name").fill("deploy");
    await nameProblem.waitFor({ state: "detached" });
    assert.deepEqual(
      errors.filter((e) => !/status of 4\d\d/.test(e)),
      [],
    );
    await context.close();
  });

  test("an error notice leaves with its page, and dismisses itself", async () => {
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.goto("/#/users");
    // An administrator cannot deactivate itself: the refusal is an error notice.
    const deactivate = async () => {
      await page.locator("tr", { hasText: "admin@" }).getByRole("button", { name: "Deactivate" }).click();
      await page.locator(".notice.error").waitFor();
    };
    await deactivate();
    await page.getByRole("link", { name: "Overview", exact: true }).click();
    await page.locator(".notice.error").waitFor({ state: "detached", timeout: 2000 });
    await page.getByRole("link", { name: "Users", exact: true }).click();
    await deactivate();
    const raised = Date.now();
    await page.locator(".notice.error").waitFor({ state: "detached", timeout: 20_000 });
    assert.ok(Date.now() - raised > 5000, "long enough to read");
    assert.deepEqual(
      errors.filter((e) => !/status of 409/.test(e)),
      [],
    );
    await context.close();
  });

  test("a wrong current password: said in the password form, gone once it is edited", async () => {
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.goto("/#/account");
    const form = page.getByRole("form", { name: "Change password" });
    await form.locator('[data-field="old_password"] input').fill("not-the-password");
    await form.locator('[data-field="new_password"] input').fill("another-password-1");
    await form.getByLabel(/^New password again/).fill("another-password-1");
    await form.getByRole("button", { name: "Change password" }).click();
    const refusal = form.locator("[role=alert]");
    await refusal.first().waitFor();
    assert.equal(await page.locator(".notice.error").count(), 0, "in the form, not a notice");
    await form.locator('[data-field="old_password"] input').fill("still-not-it");
    await refusal.first().waitFor({ state: "detached" });
    assert.deepEqual(
      errors.filter((e) => !/status of 4\d\d/.test(e)),
      [],
    );
    await context.close();
  });

  test("the cluster form's refusal of a taken name goes with the next edit", async () => {
    const first = await suite.berth.api("POST", "/api/infra/v1/nodecluster/", {
      name: "taken",
      region: "/api/infra/v1/region/digitalocean/nyc1/",
      node_type: "/api/infra/v1/nodetype/digitalocean/1gb/",
    });
    assert.equal(first.status, 201);
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.goto("/#/nodeclusters/new");
    await page.getByLabel("Name", { exact: true }).fill("taken");
    await page.locator('select[name="provider"]').selectOption("/api/infra/v1/provider/digitalocean/");
    await page.locator('select[name="region"]').selectOption("/api/infra/v1/region/digitalocean/nyc1/");
    await page.locator('select[name="node_type"] option').nth(1).waitFor({ state: "attached" });
    await page.locator('select[name="node_type"]').selectOption("/api/infra/v1/nodetype/digitalocean/1gb/");
    await page.getByLabel("Deploy it now").uncheck();
    await page.getByRole("button", { name: "Create", exact: true }).click();
    const refusal = page.locator("form [role=alert]", { hasText: /taken/ });
    await refusal.waitFor();
    await page.getByLabel("Name", { exact: true }).fill("taken-2");
    await refusal.waitFor({ state: "detached" });
    assert.deepEqual(
      errors.filter((e) => !/status of 409/.test(e)),
      [],
    );
    await context.close();
  });

  test("the account page's forms: each refusal next to its field, no notice, gone once it is edited", async () => {
    const { page, errors, context } = await openPage(suite.browser, suite.berth.url);
    await signInAs(page, "admin", ADMIN_PASSWORD);
    await page.goto("/#/account");
    const admin = (await suite.berth.api("GET", "/api/v1.1/users/admin/")).body as { email: string };
    const cases: { form: string; field: string; value: string; says: RegExp }[] = [
      { form: "Profile", field: "profile_url", value: "not a link", says: /http:\/\/ or https:\/\// },
      { form: "Add an address", field: "email", value: admin.email, says: /already has the address/ },
      { form: "Confirm an address", field: "token", value: "no-such-token", says: /unknown, already used/ },
      { form: "Create an API key", field: "label", value: "k".repeat(201), says: /200/ },
      { form: "Create an organization", field: "name", value: "service", says: /reserved/ },
    ];
    for (const c of cases) {
      const form = page.getByRole("form", { name: c.form });
      const input = form.locator(`[data-field="${c.field}"] input`);
      await input.fill(c.value);
      await form.getByRole("button").last().click();
      const said = form.locator(`[data-field="${c.field}"] .field-error`);
      await said.waitFor();
      assert.match(await said.innerText(), c.says, `${c.form}: ${await said.innerText()}`);
      assert.equal(await page.locator(".notice.error").count(), 0, `${c.form}: in the form, not a notice`);
      assert.equal(
        await form.locator("[role=alert]", { hasText: c.says }).count(),
        1,
        `${c.form}: said once`,
      );
      await input.fill(`${c.value}x`);
      await said.waitFor({ state: "detached" });
      assert.equal(await form.locator("[role=alert]").count(), 0, `${c.form}: gone after the edit`);
    }
    // The last owner made a member: refused next to the username.
    await page.getByRole("form", { name: "Create an organization" }).locator("input").fill("crew");
    await page.getByRole("button", { name: "Create organization" }).click();
    const invite = page.getByRole("form", { name: "Invite to crew" });
    await invite.locator('[data-field="username"] input').fill("admin");
    await invite.getByRole("button", { name: "Invite" }).click();
    const said = invite.locator('[data-field="username"] .field-error');
    await said.getByText(/last owner/).waitFor();
    assert.equal(await page.locator(".notice.error").count(), 0);
    await invite.locator('[data-field="username"] input').fill("admin2");
    await said.waitFor({ state: "detached" });
    assert.deepEqual(
      errors.filter((e) => !/status of 4\d\d/.test(e)),
      [],
    );
    await context.close();
  });
});
