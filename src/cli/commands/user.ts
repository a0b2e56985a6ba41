// Users' access (issue 26): `berth user passwd` changes a password (your own needs the current one;
// administrators reset another user's without it) and ends every other session and access token;
// `berth user deactivate|activate <username>` (administrators) ends or restores a user's access.
import type { Command } from "commander";
import type { PasswordChanged } from "../../contract/access.ts";
import type { Auth, Profile } from "../../contract/account.ts";
import type { Ctx } from "../context.ts";
import { usageError } from "../errors.ts";
import { readSecret } from "./account.ts";

/** Secrets one after the other: hidden prompts on a terminal, else one line of standard input each. */
async function readSecrets(prompts: string[]): Promise<string[]> {
  if (process.stdin.isTTY) {
    const out: string[] = [];
    for (const p of prompts) out.push(await readSecret(p));
    return out;
  }
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const lines = Buffer.concat(chunks).toString("utf8").split(/\r?\n/);
  return prompts.map((_, i) => (lines[i] ?? "").trim());
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

export function registerUser(program: Command, ctx: (cmd: Command) => Ctx): void {
  const user = program.command("user").description("users: passwords, and deactivation (administrators)");
  user
    .command("passwd [username]")
    .description(
      "change a password (yours needs the current one; administrators reset others'); every session and access token of the user ends (API keys stay). Without a terminal, standard input gives the current password then the new one (only the new one for another user)",
    )
    .action(async (username: string | undefined, _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const me = c.client.creds.user ?? (await c.client.get<Auth>("/auth/")).username;
      const target = username ?? me;
      const own = target === me;
      const secrets = await readSecrets(
        own
          ? ["Current password: ", "New password: ", "New password again: "]
          : ["New password: ", "Again: "],
      );
      const [oldPassword, newPassword, again] = own ? secrets : [undefined, secrets[0], secrets[1]];
      if (!newPassword) throw usageError("user passwd: no new password given");
      if (process.stdin.isTTY && again !== newPassword)
        throw usageError("user passwd: the new passwords differ");
      const res = await c.client.request<PasswordChanged>(
        "POST",
        `/api/v1.1/users/${encodeURIComponent(target)}/password/`,
        {
          body: own
            ? { old_password: oldPassword, new_password: newPassword }
            : { new_password: newPassword },
        },
      );
      if (c.out.opts.json) return c.out.json(res.body);
      c.out.line(
        `Password of ${target} changed; ${plural(res.body.sessions_ended, "session")} and ${plural(res.body.access_tokens_ended, "access token")} ended`,
      );
    });
  for (const [verb, what] of [
    ["deactivate", "its API keys, sessions, tokens and streams refuse at once; it cannot sign in"],
    ["activate", "its API keys work again; it signs in anew"],
  ] as const) {
    user
      .command(`${verb} <username>`)
      .description(`${verb} a user (administrators): ${what}`)
      .action(async (username: string, _o: unknown, cmd: Command) => {
        const c = ctx(cmd);
        const res = await c.client.request<Profile>(
          "POST",
          `/api/v1.1/users/${encodeURIComponent(username)}/${verb}/`,
        );
        if (c.out.opts.json) return c.out.json(res.body);
        c.out.line(`${res.body.username} ${res.body.is_active ? "active" : "inactive"}`);
      });
  }
}
