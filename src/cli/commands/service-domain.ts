// `berth service domain add|ls|rm` (issue 30): the host names a service serves through the router,
// with their certificates, changed by PATCHing the service's `domains` (no redeploy needed).
import { type Command, InvalidArgumentError } from "commander";
import type { DomainView } from "../../contract/router.ts";
import type { DomainBody, Service } from "../../contract/service.ts";
import type { Ctx } from "../context.ts";
import { CliError } from "../errors.ts";
import { KINDS, resolve } from "../resolve.ts";

const TLS = ["acme", "uploaded", "off"] as const;

function bodyOf(d: DomainView): DomainBody {
  return {
    host: d.host,
    path: d.path,
    port: d.port,
    tls: d.tls as DomainBody["tls"],
    redirect_https: d.redirect_https,
    sticky: d.sticky,
    weight: d.weight,
  };
}

export function registerServiceDomain(service: Command, ctx: (cmd: Command) => Ctx): void {
  const kind = KINDS.service;
  const domain = service.command("domain").description("host names a service serves through the router");
  const patch = async (c: Ctx, s: Service, domains: DomainBody[]) => {
    const reply = await c.client.request<Service>("PATCH", `${s.resource_uri}`, { body: { domains } });
    return reply.body;
  };
  const show = (c: Ctx, domains: DomainView[]) => {
    if (c.out.opts.json) return c.out.json(domains);
    c.out.table(
      [
        { header: "HOST", value: (d) => d.host },
        { header: "PATH", value: (d) => d.path },
        { header: "PORT", value: (d) => (d.port === null ? "auto" : String(d.port)) },
        { header: "TLS", value: (d) => d.tls },
        { header: "CERTIFICATE", value: (d) => d.certificate?.state ?? "-" },
        { header: "EXPIRES", value: (d) => d.certificate?.expires ?? "" },
        { header: "ERROR", value: (d) => d.certificate?.error ?? "" },
      ],
      domains,
    );
  };

  domain
    .command("ls <identifier>")
    .description("list a service's host names with their certificates")
    .action(async (ref: string, _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      const s = (await resolve(c.client, kind, ref)) as Service;
      show(c, s.domains);
    });

  domain
    .command("add <identifier> <host>")
    .description("serve a host name (and path prefix) through the router")
    .option("--path <prefix>", "path prefix (default /)")
    .option("--port <port>", "the containers' port (default: the service's first TCP port)", (v) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1 || n > 65535) throw new InvalidArgumentError("must be a port number");
      return n;
    })
    .option("--tls <mode>", `certificate: ${TLS.join(", ")} (default acme)`, (v) => {
      if (!(TLS as readonly string[]).includes(v))
        throw new InvalidArgumentError(`must be one of ${TLS.join(", ")}`);
      return v;
    })
    .option("--no-redirect", "do not redirect plain HTTP to HTTPS")
    .option("--sticky", "send a client back to the same container")
    .action(
      async (
        ref: string,
        host: string,
        o: { path?: string; port?: number; tls?: DomainBody["tls"]; redirect: boolean; sticky?: boolean },
        cmd: Command,
      ) => {
        const c = ctx(cmd);
        const s = (await resolve(c.client, kind, ref)) as Service;
        const path = o.path ?? "/";
        const others = s.domains
          .filter((d) => !(d.host === host.toLowerCase() && d.path === path))
          .map(bodyOf);
        const added: DomainBody = { host, path, tls: o.tls ?? "acme", sticky: o.sticky ?? false };
        if (o.port !== undefined) added.port = o.port;
        if ((o.tls ?? "acme") !== "off") added.redirect_https = o.redirect;
        show(c, (await patch(c, s, [...others, added])).domains);
      },
    );

  domain
    .command("rm <identifier> <host>")
    .description("stop serving a host name (every path of it, or --path)")
    .option("--path <prefix>", "only this path prefix")
    .action(async (ref: string, host: string, o: { path?: string }, cmd: Command) => {
      const c = ctx(cmd);
      const s = (await resolve(c.client, kind, ref)) as Service;
      const h = host.toLowerCase();
      const gone = (d: DomainView) => d.host === h && (o.path === undefined || d.path === o.path);
      if (!s.domains.some(gone))
        throw new CliError(`service ${s.name} does not serve ${host}${o.path ?? ""}`);
      show(c, (await patch(c, s, s.domains.filter((d) => !gone(d)).map(bodyOf))).domains);
    });
}
