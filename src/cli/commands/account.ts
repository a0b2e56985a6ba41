// Credentials and accounts: login (stores URL, user and API key in the config file, mode 0600),
// logout, whoami, API keys and organizations.

import os from "node:os";
import type { Command } from "commander";
import type { ApiKey, Auth, CreatedApiKey, Invitation, Organization } from "../../contract/account.ts";
import { Client } from "../client.ts";
import { type Credentials, credentials, readConfig, removeConfig, writeConfig } from "../config.ts";
import type { Ctx } from "../context.ts";
import { CliError, usageError } from "../errors.ts";
import { quietOption } from "./common.ts";

/** Reads a secret: hidden typing on a terminal, the first line of standard input otherwise. */
export async function readSecret(prompt: string): Promise<string> {
  const stdin = process.stdin;
  if (!stdin.isTTY) {
    const chunks: Buffer[] = [];
    for await (const chunk of stdin) chunks.push(chunk as Buffer);
    return (Buffer.concat(chunks).toString("utf8").split(/\r?\n/)[0] ?? "").trim();
  }
  process.stderr.write(prompt);
  stdin.setRawMode(true);
  stdin.resume();
  return new Promise((resolve, reject) => {
    let value = "";
    const onData = (chunk: Buffer) => {
      for (const ch of chunk.toString("utf8")) {
        if (ch === "\r" || ch === "\n") {
          done();
          resolve(value);
          return;
        }
        if (ch === "\u0003") {
          done();
          reject(new CliError("interrupted", 130));
          return;
        }
        if (ch === "\u007f" || ch === "\b") value = value.slice(0, -1);
        else value += ch;
      }
    };
    const done = () => {
      stdin.off("data", onData);
      stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write("\n");
    };
    stdin.on("data", onData);
  });
}

async function readLine(prompt: string): Promise<string> {
  const readline = await import("node:readline/promises");
  const rl = readline.createInterface({ input: process.stdin, output: process.stderr });
  try {
    return (await rl.question(prompt)).trim();
  } finally {
    rl.close();
  }
}

interface LoginOptions {
  url?: string;
  username?: string;
  apikey?: string;
  passwordStdin?: boolean;
}

export function registerAccount(program: Command, ctx: (cmd: Command) => Ctx): void {
  program
    .command("login")
    .description("sign in: stores the server URL, user and an API key in the config file (mode 0600)")
    .option("--url <url>", "server URL (default: BERTH_URL, the stored one, or http://127.0.0.1:8000)")
    .option("-u, --username <user>", "user name")
    .option("--apikey <key>", "an API key to store (without it, a new key is made with your password)")
    .option("--password-stdin", "read the password from standard input")
    .action(async (o: LoginOptions, cmd: Command) => {
      const c = ctx(cmd);
      const url = (o.url ?? c.client.creds.url).replace(/\/+$/, "");
      const user = o.username ?? (process.stdin.isTTY ? await readLine("Username: ") : undefined);
      if (!user) throw usageError("login: give --username (and --apikey or --password-stdin)");
      let apikey = o.apikey;
      let keyId: number | undefined;
      if (!apikey) {
        const password = await readSecret("Password: ");
        if (!password) throw usageError("login: no password given");
        const withPassword = new Client({ ...c.client.creds, url, user, apiKey: password }, undefined);
        const made = await withPassword.request<CreatedApiKey>(
          "POST",
          `/api/v1.1/users/${encodeURIComponent(user)}/apikeys/`,
          {
            body: { label: `berth CLI on ${os.hostname()}` },
          },
        );
        apikey = made.body.key;
        keyId = made.body.id;
      }
      const creds: Credentials = { ...c.client.creds, url, user, apiKey: apikey };
      const me = await new Client(creds, undefined).get<Auth>("/auth/");
      const stored = readConfig(c.configFile);
      writeConfig(c.configFile, {
        ...stored,
        url,
        user,
        apikey,
        apikey_id: keyId,
      });
      if (c.out.opts.json) return c.out.json({ url, ...me, config: c.configFile });
      c.out.line(`Signed in to ${url} as ${me.username} (credentials in ${c.configFile})`);
    });

  program
    .command("logout")
    .description("forget the stored credentials (and revoke the key login made)")
    .option(
      "--everywhere",
      "also end every dashboard session and access token of the user, on every browser (API keys stay)",
    )
    .action(async (o: { everywhere?: boolean }, cmd: Command) => {
      const c = ctx(cmd);
      if (o.everywhere) {
        const user = c.client.creds.user ?? (await c.client.get<Auth>("/auth/")).username;
        await c.client.request("DELETE", `/api/v1.1/users/${encodeURIComponent(user)}/sessions/`);
        c.out.line(`Every session of ${user} ended`);
      }
      const stored = readConfig(c.configFile);
      if (typeof stored.apikey_id === "number" && stored.user && stored.apikey) {
        const own = new Client(credentials({}, stored), undefined);
        try {
          await own.request(
            "DELETE",
            `/api/v1.1/users/${encodeURIComponent(stored.user)}/apikeys/${stored.apikey_id}/`,
          );
        } catch (err) {
          c.out.note(`the key was not revoked: ${(err as Error).message}`);
        }
      }
      const removed = removeConfig(c.configFile);
      c.out.line(removed ? `Signed out (removed ${c.configFile})` : "Not signed in");
    });

  program
    .command("whoami")
    .description("the user the CLI acts as, its namespaces and the server")
    .action(async (_o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const me = await c.client.get<Auth>("/auth/");
      const creds = c.client.creds;
      if (c.out.opts.json) return c.out.json({ ...me, url: creds.url, source: creds.source });
      c.out.line(`${me.username} at ${creds.url} (namespaces: ${(me.namespaces ?? []).join(", ")})`);
    });

  const userOf = async (c: Ctx): Promise<string> => {
    if (c.client.creds.user) return c.client.creds.user;
    return (await c.client.get<Auth>("/auth/")).username;
  };
  const apikey = program.command("apikey").description("your API keys");
  apikey
    .command("ls")
    .description("list API keys (never their secrets)")
    .addOption(quietOption())
    .action(async (_o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const page = await c.client.get<{ objects: ApiKey[] }>(
        `/api/v1.1/users/${encodeURIComponent(await userOf(c))}/apikeys/`,
      );
      c.out.list(
        page,
        [
          { header: "ID", value: (k) => k.id },
          { header: "LABEL", value: (k) => k.label },
          { header: "CREATED", value: (k) => k.created },
        ],
        (k) => String(k.id),
      );
    });
  apikey
    .command("create")
    .description("create an API key (shown once)")
    .option("--label <label>", "what the key is for")
    .action(async (o: { label?: string }, cmd: Command) => {
      const c = ctx(cmd);
      const made = await c.client.request<CreatedApiKey>(
        "POST",
        `/api/v1.1/users/${encodeURIComponent(await userOf(c))}/apikeys/`,
        {
          body: o.label ? { label: o.label } : {},
        },
      );
      if (c.out.opts.json) return c.out.json(made.body);
      c.out.line(made.body.key);
    });
  apikey
    .command("rm <id...>")
    .description("revoke API keys")
    .action(async (ids: string[], _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const user = encodeURIComponent(await userOf(c));
      for (const id of ids) {
        if (!/^\d+$/.test(id)) throw usageError(`apikey rm: ${id} is not a key id (see berth apikey ls)`);
        await c.client.request("DELETE", `/api/v1.1/users/${user}/apikeys/${id}/`);
        c.out.line(id);
      }
    });

  const org = program.command("org").description("organizations: shared namespaces");
  org
    .command("ls")
    .description("the namespaces you can use")
    .addOption(quietOption())
    .action(async (_o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const me = await c.client.get<Auth>("/auth/");
      const rows = (me.namespaces ?? []).map((name: string) => ({
        name,
        kind: name === me.username ? "user" : "organization",
      }));
      if (c.out.opts.json) return c.out.json(rows);
      c.out.list(
        rows,
        [
          { header: "NAMESPACE", value: (r) => r.name },
          { header: "KIND", value: (r) => r.kind },
        ],
        (r) => r.name,
      );
    });
  org
    .command("create <name>")
    .description("create an organization (you become its owner)")
    .action(async (name: string, _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const made = await c.client.request<Organization>("POST", "/api/v1.1/orgs/", { body: { name } });
      if (c.out.opts.json) return c.out.json(made.body);
      c.out.line(made.body.name ?? name);
    });
  org
    .command("inspect <name>")
    .description("an organization and its members")
    .action(async (name: string, _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const o = await c.client.get<Organization>(`/api/v1.1/orgs/${encodeURIComponent(name)}/`);
      if (c.out.opts.json) return c.out.json(o);
      c.out.table(
        [
          { header: "MEMBER", value: (m) => m.username },
          { header: "ROLE", value: (m) => m.role },
        ],
        o.members ?? [],
      );
    });
  const invite = async (
    cmd: Command,
    name: string,
    username: string,
    o: { role: string; direct?: boolean },
  ): Promise<void> => {
    const c = ctx(cmd);
    const made = await c.client.request<Invitation>(
      "POST",
      `/api/v1.1/orgs/${encodeURIComponent(name)}/members/`,
      {
        body: { username, role: o.role, ...(o.direct ? { direct: true } : {}) },
      },
    );
    if (c.out.opts.json) return c.out.json(made.body);
    c.out.line(`${username} ${made.body.state ?? ""}`.trim());
  };
  const orgPath = (name: string) => `/api/v1.1/orgs/${encodeURIComponent(name)}`;
  const invitationPath = async (c: Ctx, name: string) =>
    `/api/v1.1/users/${encodeURIComponent(await userOf(c))}/invitations/${encodeURIComponent(name)}`;
  const invitationColumns = [
    { header: "ORGANIZATION", value: (i: Invitation) => i.org },
    { header: "USER", value: (i: Invitation) => i.username },
    { header: "ROLE", value: (i: Invitation) => i.role },
    { header: "INVITED BY", value: (i: Invitation) => i.invited_by },
    { header: "CREATED", value: (i: Invitation) => i.created },
  ];
  org
    .command("invite <org> <username>")
    .description("invite a user (owners); the user becomes a member on accepting")
    .option("--role <role>", "owner or member", "member")
    .option("--direct", "add at once, without an invitation (administrators only)")
    .action((name: string, username: string, o: { role: string; direct?: boolean }, cmd: Command) =>
      invite(cmd, name, username, o),
    );
  org
    .command("invitations [org]")
    .description("your pending invitations; with an organization, its pending invitations (owners)")
    .addOption(quietOption())
    .action(async (name: string | undefined, _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const page = await c.client.get<{ objects: Invitation[] }>(
        name
          ? `${orgPath(name)}/invitations/`
          : `/api/v1.1/users/${encodeURIComponent(await userOf(c))}/invitations/`,
      );
      c.out.list(page, invitationColumns, (i: Invitation) => (name ? i.username : i.org));
    });
  org
    .command("accept <org>")
    .description("accept an invitation: become a member of the organization")
    .action(async (name: string, _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const joined = await c.client.request("POST", `${await invitationPath(c, name)}/accept/`);
      if (c.out.opts.json) return c.out.json(joined.body);
      c.out.line(name);
    });
  org
    .command("decline <org>")
    .description("decline an invitation")
    .action(async (name: string, _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      await c.client.request("POST", `${await invitationPath(c, name)}/decline/`);
      c.out.line(name);
    });
  org
    .command("uninvite <org> <username>")
    .description("withdraw a pending invitation (owners)")
    .action(async (name: string, username: string, _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      await c.client.request("DELETE", `${orgPath(name)}/invitations/${encodeURIComponent(username)}/`);
      c.out.line(username);
    });
  org
    .command("leave <org>")
    .description("leave an organization (its last owner cannot)")
    .action(async (name: string, _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      await c.client.request("DELETE", `${orgPath(name)}/members/${encodeURIComponent(await userOf(c))}/`);
      c.out.line(name);
    });
  const member = org.command("member").description("members of an organization");
  member
    .command("add <org> <username>")
    .description("invite a user (owners; same as org invite)")
    .option("--role <role>", "owner or member", "member")
    .option("--direct", "add at once, without an invitation (administrators only)")
    .action((name: string, username: string, o: { role: string; direct?: boolean }, cmd: Command) =>
      invite(cmd, name, username, o),
    );
  member
    .command("rm <org> <username>")
    .description("remove a member (owners only)")
    .action(async (name: string, username: string, _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      await c.client.request(
        "DELETE",
        `/api/v1.1/orgs/${encodeURIComponent(name)}/members/${encodeURIComponent(username)}/`,
      );
      c.out.line(username);
    });
}
