// Namespace settings: `berth namespace inspect <ns>` shows what a namespace's containers may do
// that reaches their node (domain/privileges.ts); `allow` and `deny` change it (administrators).
import type { Command } from "commander";
import type { NamespaceSettingsView } from "../../contract/namespace.ts";
import { PRIVILEGE_KEYS, type Privileges } from "../../domain/privileges.ts";
import { QUOTA_RESOURCES } from "../../domain/quotas.ts";
import type { Ctx } from "../context.ts";
import { usageError } from "../errors.ts";

interface PrivilegeFlags {
  privileged?: boolean;
  hostNetwork?: boolean;
  hostPid?: boolean;
  devices?: boolean;
  securityOpt?: boolean;
  cgroupParent?: boolean;
  localNodes?: boolean;
  cap?: string[];
  allCaps?: boolean;
  hostPath?: string[];
  all?: boolean;
}

const SWITCHES: [keyof PrivilegeFlags, keyof Privileges][] = [
  ["privileged", "privileged"],
  ["hostNetwork", "host_network"],
  ["hostPid", "host_pid"],
  ["devices", "devices"],
  ["securityOpt", "security_opt"],
  ["cgroupParent", "cgroup_parent"],
  ["localNodes", "local_nodes"],
];

const collect = (value: string, previous: string[] = []) => [...previous, value];

function privilegeOptions(cmd: Command, verb: "allow" | "deny"): Command {
  return cmd
    .option("--privileged", `${verb} privileged containers`)
    .option("--host-network", `${verb} the node's network (net host)`)
    .option("--host-pid", `${verb} the node's processes (pid host)`)
    .option("--cap <capability>", `${verb} a capability beyond Docker's default set (repeatable)`, collect)
    .option("--all-caps", `${verb} every capability (cap_add ALL)`)
    .option("--devices", `${verb} devices of the node`)
    .option("--security-opt", `${verb} security options (security_opt)`)
    .option("--cgroup-parent", `${verb} cgroup_parent`)
    .option(
      "--host-path <path>",
      `${verb} bind mounts of a host path and what lies under it (repeatable)`,
      collect,
    )
    .option("--local-nodes", `${verb} node clusters of provider local (nodes on the Berth host)`);
}

const shown = (v: Privileges[keyof Privileges]): string =>
  typeof v === "boolean" ? (v ? "yes" : "no") : v === "all" ? "all" : v.length ? v.join(", ") : "-";

function print(c: Ctx, ns: NamespaceSettingsView): void {
  if (c.out.opts.json) {
    c.out.json(ns);
    return;
  }
  const privileges = ns.privileges as unknown as Privileges;
  c.out.table(
    [
      { header: "PRIVILEGE", value: (r: { key: string; value: string }) => r.key },
      { header: "ALLOWED", value: (r: { key: string; value: string }) => r.value },
    ],
    PRIVILEGE_KEYS.map((key) => ({ key, value: shown(privileges[key]) })),
  );
  if (ns.administrator) c.out.line(`(${ns.name} is an administrator's own namespace: everything is allowed)`);
}

/** The change `allow` or `deny` asks for, from the current policy. */
function change(current: Privileges, o: PrivilegeFlags, allow: boolean): Partial<Privileges> {
  const patch: Partial<Privileges> = {};
  if (!allow && o.all) {
    for (const [, key] of SWITCHES) (patch as Record<string, unknown>)[key] = false;
    return { ...patch, capabilities: [], host_paths: [] };
  }
  for (const [flag, key] of SWITCHES) if (o[flag]) (patch as Record<string, unknown>)[key] = allow;
  if (o.allCaps) patch.capabilities = allow ? "all" : [];
  else if (o.cap?.length) {
    const caps = o.cap.map((x) => x.toUpperCase().replace(/^CAP_/, ""));
    if (current.capabilities === "all") {
      if (!allow)
        throw usageError("every capability is allowed: deny --all-caps first, then allow the ones to keep");
    } else {
      patch.capabilities = allow
        ? [...new Set([...current.capabilities, ...caps])]
        : current.capabilities.filter((x) => !caps.includes(x));
    }
  }
  if (o.hostPath?.length) {
    patch.host_paths = allow
      ? [...new Set([...current.host_paths, ...o.hostPath])]
      : current.host_paths.filter((p) => !o.hostPath!.includes(p));
  }
  if (Object.keys(patch).length === 0) throw usageError("say what to change: see berth namespace --help");
  return patch;
}

export function registerNamespace(program: Command, ctx: (cmd: Command) => Ctx): void {
  const namespace = program
    .command("namespace")
    .description("namespace settings: what its containers may do that reaches their node, and its quotas");
  const url = (name: string) => `/api/v1.1/namespaces/${encodeURIComponent(name)}/`;

  namespace
    .command("inspect <namespace>")
    .description("a namespace's privileges (its members and administrators)")
    .action(async (name: string, _o: unknown, cmd: Command) => {
      const c = ctx(cmd);
      print(c, await c.client.get<NamespaceSettingsView>(url(name)));
    });

  for (const verb of ["allow", "deny"] as const) {
    const sub = namespace
      .command(`${verb} <namespace>`)
      .description(
        verb === "allow"
          ? "allow a namespace options that reach the node (administrators)"
          : "take back options that reach the node (administrators); --all takes back everything",
      );
    privilegeOptions(sub, verb);
    if (verb === "deny") sub.option("--all", "deny everything");
    sub.action(async (name: string, o: PrivilegeFlags, cmd: Command) => {
      const c = ctx(cmd);
      const current = await c.client.get<NamespaceSettingsView>(url(name));
      const privileges = change(current.privileges as unknown as Privileges, o, verb === "allow");
      const res = await c.client.request("PATCH", url(name), { body: { privileges } });
      print(c, res.body as NamespaceSettingsView);
    });
  }

  // Quotas (domain/quotas.ts): each limit in force and the namespace's usage; administrators set
  // limits with one option per quota (`none`: no limit).
  const quota = namespace
    .command("quota <namespace>")
    .description("a namespace's quotas: limit and usage; with options, set limits (administrators)");
  for (const r of QUOTA_RESOURCES)
    quota.option(`--${r.replaceAll("_", "-")} <n>`, `limit of ${r} (a whole number, or none)`);
  quota.action(async (name: string, o: Record<string, string | undefined>, cmd: Command) => {
    const c = ctx(cmd);
    const limits: Record<string, number | null> = {};
    for (const r of QUOTA_RESOURCES) {
      const v = o[r.replace(/_(.)/g, (_m, ch: string) => ch.toUpperCase())];
      if (v === undefined) continue;
      if (v === "none") limits[r] = null;
      else if (/^\d+$/.test(v)) limits[r] = Number(v);
      else throw usageError(`--${r.replaceAll("_", "-")}: give a whole number, or none`);
    }
    const ns = Object.keys(limits).length
      ? ((await c.client.request("PATCH", url(name), { body: { limits } })).body as NamespaceSettingsView)
      : await c.client.get<NamespaceSettingsView>(url(name));
    if (c.out.opts.json) return c.out.json(ns.quotas);
    c.out.table(
      [
        { header: "QUOTA", value: (r: { key: string }) => r.key },
        { header: "LIMIT", value: (r: { limit: number | null }) => (r.limit === null ? "none" : r.limit) },
        { header: "USAGE", value: (r: { usage: number }) => r.usage },
      ],
      Object.entries(ns.quotas).map(([key, q]) => ({ key, ...q })),
    );
  });
}
