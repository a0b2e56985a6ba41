// `berth node byo` (bring your own node: a single-use registration token and the commands that
// make a server a node, as the historical CLI printed them) and `berth node token ls|rm`.
import type { Command } from "commander";
import type { CreatedRegistrationToken, RegistrationToken } from "../../contract/token.ts";
import { API } from "../client.ts";
import type { Ctx } from "../context.ts";
import { CliError, usageError } from "../errors.ts";
import { ago, type Column, short } from "../output.ts";
import { quietOption } from "./common.ts";

export const TOKEN_COLUMNS: Column<RegistrationToken>[] = [
  { header: "UUID", value: (t) => short(t.uuid) },
  { header: "CREATED", value: (t) => ago(t.created) },
  { header: "EXPIRES", value: (t) => ago(t.expires) },
  { header: "CREATED BY", value: (t) => t.created_by },
];

/**
 * The `berth agent` form of the server's command: the same Berth address (the server's public
 * URL, which the new node must reach; the CLI's own URL may be another one) and token.
 */
export function berthAgentCommand(
  created: Pick<CreatedRegistrationToken, "command" | "token">,
  fallbackUrl: string,
): string {
  const url = /--url\s+(\S+)/.exec(String(created.command ?? ""))?.[1] ?? fallbackUrl;
  return `sudo berth agent --url ${url} --token ${created.token} --install-systemd`;
}

export function registerNodeTokens(node: Command, ctx: (cmd: Command) => Ctx): void {
  const tokens = (c: Ctx) => c.client.collection(API.infra, "token");

  node
    .command("byo")
    .description("bring your own node: a registration token and the command to run on your server")
    .option("-q, --quiet", "print only the token")
    .action(async (o: { quiet?: boolean }, cmd: Command) => {
      const c = ctx(cmd);
      const created: CreatedRegistrationToken = (
        await c.client.request<CreatedRegistrationToken>("POST", tokens(c))
      ).body;
      if (c.out.opts.json) return c.out.json(created);
      if (o.quiet) return c.out.line(created.token);
      c.out.line(
        [
          "Berth can use your own servers as nodes: the Berth agent connects the server's Docker engine",
          "to Berth through an outbound tunnel (no open port). Run this on the server (it needs Node 20",
          "and Docker):",
          "",
          `    ${created.command}`,
          "",
          "or, where the berth command is installed:",
          "",
          `    ${berthAgentCommand(created, c.client.creds.url)}`,
          "",
          `Token: ${created.token}`,
          `It registers one server${created.expires ? ` and expires ${ago(created.expires)}` : ""}; revoke it with: berth node token rm ${short(created.uuid)}`,
        ].join("\n"),
      );
    });

  const token = node.command("token").description("registration tokens of bring-your-own nodes");
  token
    .command("ls")
    .description("list the registration tokens that can still be used (never their secret)")
    .addOption(quietOption())
    .action(async (_o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const objects = await c.client.all<RegistrationToken>(tokens(c));
      c.out.list(objects, TOKEN_COLUMNS);
    });
  token
    .command("rm <token-uuid...>")
    .alias("revoke")
    .description("revoke unused registration tokens (by uuid or uuid prefix)")
    .action(async (refs: string[], _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const all = await c.client.all<RegistrationToken>(tokens(c));
      for (const ref of refs) {
        if (ref === "") throw usageError("a token uuid must not be empty");
        const matches = all.filter((t) => t.uuid.startsWith(ref.toLowerCase()));
        if (matches.length !== 1)
          throw new CliError(
            matches.length
              ? `token ${ref} is ambiguous; use more of its uuid`
              : `token ${ref} not found (used, expired or revoked tokens are gone)`,
          );
        const [match] = matches as [RegistrationToken];
        await c.client.request("DELETE", `${tokens(c)}${match.uuid}/`);
        c.out.done(match);
      }
    });
}
