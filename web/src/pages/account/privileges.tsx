// The account page's namespaces: each one's privileges and quotas (privileges editable by
// administrators).
import { useState } from "preact/hooks";
import type { NamespaceSettingsView } from "../../../../src/contract/namespace.ts";
import { PRIVILEGE_KEYS, type Privileges } from "../../../../src/domain/privileges.ts";
import { call } from "../../api.ts";
import { ErrorLine, Facts, Field, inputValue, Loading } from "../../ui.tsx";
import { useLoad } from "./load.ts";

/** How each privilege reads on the page. */
const PRIVILEGE_LABELS: Record<keyof Privileges, string> = {
  privileged: "Privileged containers",
  host_network: "Host network (net host)",
  host_pid: "Host processes (pid host)",
  capabilities: "Capabilities beyond the default set",
  devices: "Devices of the node",
  security_opt: "Security options (security_opt)",
  cgroup_parent: "Cgroup parent",
  host_paths: "Host paths (bind mounts)",
  local_nodes: "Nodes on the Berth host (provider local)",
};
type Switch = Exclude<keyof Privileges, "capabilities" | "host_paths">;
const SWITCHES = PRIVILEGE_KEYS.filter((k) => k !== "capabilities" && k !== "host_paths") as Switch[];

const listText = (v: string[] | "all") => (v === "all" ? "all" : v.join(", "));
const splitList = (text: string) =>
  text
    .split(/[\s,]+/)
    .map((x) => x.trim())
    .filter(Boolean);

const PER_ITEM_QUOTAS = new Set(["streams_per_key", "envvars_per_service", "env_bytes_per_service"]);

/** A namespace's privileges: what its containers may do that reaches their node; administrators change them. */
function PrivilegesCard({ name, admin }: { name: string; admin: boolean }) {
  const ns = useLoad<NamespaceSettingsView>(`/api/v1.1/namespaces/${name}/`);
  const [edit, setEdit] = useState<{
    switches?: Partial<Record<Switch, boolean>>;
    caps?: string;
    paths?: string;
  }>({});
  const [error, setError] = useState<unknown>(undefined);
  if (ns.error) return <ErrorLine error={ns.error} />;
  if (!ns.data) return <Loading />;
  const p = ns.data.privileges as unknown as Privileges;
  const shown = (k: keyof Privileges) => {
    const v = p[k];
    return typeof v === "boolean" ? (v ? "allowed" : "no") : listText(v) || "none";
  };
  return (
    <div class="card">
      <h3>{name}</h3>
      {ns.data.administrator && <p class="hint">An administrator's own namespace: everything is allowed.</p>}
      <Facts items={PRIVILEGE_KEYS.map((k) => [PRIVILEGE_LABELS[k], shown(k)])} />
      <h4>Quotas</h4>
      <Facts
        items={Object.entries(ns.data.quotas).map(([k, q]) => [
          k,
          // Streams and environment sizes are bounds per key or per service, not a namespace's count.
          PER_ITEM_QUOTAS.has(k)
            ? q.limit === null
              ? "no limit"
              : `at most ${q.limit}`
            : q.limit === null
              ? `${q.usage} (no limit)`
              : `${q.usage} of ${q.limit}`,
        ])}
      />
      {admin && !ns.data.administrator && (
        <form
          class="inline-form privileges-form"
          onSubmit={(e) => {
            e.preventDefault();
            const privileges: Partial<Privileges> = { ...edit.switches };
            if (edit.caps !== undefined)
              privileges.capabilities = edit.caps.trim() === "all" ? "all" : splitList(edit.caps);
            if (edit.paths !== undefined) privileges.host_paths = splitList(edit.paths);
            setError(undefined);
            void call("PATCH", `/api/v1.1/namespaces/${name}/`, { privileges }).then(
              () => {
                setEdit({});
                ns.reload();
              },
              (err: unknown) => setError(err),
            );
          }}
        >
          <div class="checks">
            {SWITCHES.map((k) => (
              <label key={k}>
                <input
                  type="checkbox"
                  name={k}
                  checked={edit.switches?.[k] ?? p[k]}
                  onChange={(e) =>
                    setEdit({
                      ...edit,
                      switches: { ...edit.switches, [k]: (e.target as HTMLInputElement).checked },
                    })
                  }
                />{" "}
                {PRIVILEGE_LABELS[k]}
              </label>
            ))}
          </div>
          <Field label="Capabilities" hint='beyond the default set, comma-separated (NET_ADMIN), or "all"'>
            <input
              name="capabilities"
              value={edit.caps ?? listText(p.capabilities)}
              onInput={(e) => setEdit({ ...edit, caps: inputValue(e) })}
            />
          </Field>
          <Field label="Host paths" hint="absolute, comma-separated; each allows what lies under it">
            <input
              name="host_paths"
              value={edit.paths ?? listText(p.host_paths)}
              onInput={(e) => setEdit({ ...edit, paths: inputValue(e) })}
            />
          </Field>
          <button type="submit">Save privileges</button>
          <ErrorLine error={error} />
        </form>
      )}
    </div>
  );
}

export function PrivilegesSection({ namespaces, admin }: { namespaces: string[]; admin: boolean }) {
  const [other, setOther] = useState("");
  const [opened, setOpened] = useState<string[]>([]);
  const names = [...new Set([...namespaces, ...opened])];
  return (
    <section>
      <h2>Privileges</h2>
      <p class="hint">
        What containers of a namespace may do that reaches their node. Administrators allow it per namespace;
        nothing is allowed by default.
      </p>
      {names.map((n) => (
        <PrivilegesCard key={n} name={n} admin={admin} />
      ))}
      {admin && (
        <form
          class="inline-form"
          onSubmit={(e) => {
            e.preventDefault();
            const n = other.trim();
            if (n) setOpened([...opened, n]);
            setOther("");
          }}
        >
          <Field label="Another namespace">
            <input name="namespace" value={other} onInput={(e) => setOther(inputValue(e))} />
          </Field>
          <button type="submit">Show privileges</button>
        </form>
      )}
    </section>
  );
}
