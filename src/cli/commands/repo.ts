// `berth repository …` (ls, inspect, register, update, rm) and `berth registry …` (ls, inspect).
import type { Command } from "commander";
import type { Registry, Repository, RepositoryUpdateBody } from "../../contract/registry.ts";
import { API } from "../client.ts";
import type { Ctx } from "../context.ts";
import { usageError } from "../errors.ts";
import { type Column, lastSegment } from "../output.ts";
import { quietOption } from "./common.ts";

type ListedRepository = Repository & { registry_host?: string };
const REPOSITORY_COLUMNS: Column<ListedRepository>[] = [
  { header: "NAME", value: (r) => r.name },
  { header: "IN USE", value: (r) => r.in_use },
  { header: "REGISTRY", value: (r) => r.registry_host ?? "" },
];
const REGISTRY_COLUMNS: Column<Registry>[] = [
  { header: "NAME", value: (r) => r.name },
  { header: "HOST", value: (r) => r.host },
  { header: "PORT", value: (r) => r.port },
  { header: "SSL", value: (r) => r.is_ssl },
  { header: "BERTH'S OWN", value: (r) => r.is_native_registry },
];

interface CredentialOptions {
  username?: string;
  password?: string;
  passwordStdin?: boolean;
}

async function credentialsBody(o: CredentialOptions): Promise<RepositoryUpdateBody> {
  const body: RepositoryUpdateBody = {};
  if (o.username !== undefined) body.username = o.username;
  if (o.passwordStdin) {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    body.password = (Buffer.concat(chunks).toString("utf8").split(/\r?\n/)[0] ?? "").trim();
  } else if (o.password !== undefined) body.password = o.password;
  return body;
}

const credentialOptions = (cmd: Command) =>
  cmd
    .option("-u, --username <user>", "user name on the registry")
    .option(
      "-p, --password <password>",
      "password on the registry (visible to other local users: prefer --password-stdin)",
    )
    .option("--password-stdin", "read the password from standard input");

export function registerRepo(program: Command, ctx: (cmd: Command) => Ctx): void {
  const repository = program
    .command("repository")
    .description("external repositories: images on other registries");
  const base = (c: Ctx) => c.client.collection(API.repo, "repository");
  // Repository names hold slashes and are sent raw in paths.
  const one = (c: Ctx, name: string) => `${base(c)}${name.replace(/^\/+|\/+$/g, "")}/`;

  repository
    .command("ls")
    .description("list repositories")
    .addOption(quietOption())
    .action(async (_o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const objects = await c.client.all<ListedRepository>(base(c));
      if (c.out.opts.json) return c.out.json({ meta: { total_count: objects.length }, objects });
      for (const r of objects) r.registry_host = lastSegment(r.registry);
      c.out.list(objects, REPOSITORY_COLUMNS, (r) => r.name);
    });
  repository
    .command("inspect <name...>")
    .description("show repositories as JSON")
    .action(async (names: string[], _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const found = [];
      for (const n of names) found.push(await c.client.get(one(c, n)));
      c.out.json(found.length === 1 ? found[0] : found);
    });
  credentialOptions(
    repository.command("register <name>").description("add a repository (<registry host>/<path>)"),
  ).action(async (name: string, o: CredentialOptions, cmd: Command) => {
    const c = ctx(cmd);
    const made = await c.client.request<Repository>("POST", base(c), {
      body: { name, ...(await credentialsBody(o)) },
    });
    const repo: Repository = made.body;
    if (c.out.opts.json) return c.out.json(repo);
    c.out.line(repo.name);
  });
  credentialOptions(
    repository.command("update <name>").description("change a repository's credentials"),
  ).action(async (name: string, o: CredentialOptions, cmd: Command) => {
    const c = ctx(cmd);
    const body = await credentialsBody(o);
    if (Object.keys(body).length === 0)
      throw usageError("repository update: give --username and/or a password");
    const updated: Repository = (await c.client.request<Repository>("PATCH", one(c, name), { body })).body;
    if (c.out.opts.json) return c.out.json(updated);
    c.out.line(updated.name);
  });
  repository
    .command("rm <name...>")
    .description("remove repositories from Berth (they stay on their registry)")
    .action(async (names: string[], _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      for (const n of names) {
        await c.client.request("DELETE", one(c, n));
        c.out.line(n);
      }
    });

  const registry = program.command("registry").description("registries Berth knows");
  const registries = (c: Ctx) => c.client.collection(API.repo, "registry");
  registry
    .command("ls")
    .description("list registries")
    .addOption(quietOption())
    .action(async (_o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const objects = await c.client.all<Registry>(registries(c));
      c.out.list(objects, REGISTRY_COLUMNS, (r) => r.host);
    });
  registry
    .command("inspect <host...>")
    .description("show registries as JSON")
    .action(async (hosts: string[], _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const found = [];
      for (const h of hosts) found.push(await c.client.get(`${registries(c)}${encodeURIComponent(h)}/`));
      c.out.json(found.length === 1 ? found[0] : found);
    });
}
