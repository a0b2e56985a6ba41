// The account: profile, email addresses (verification, primary), the password and sign-out
// everywhere, API keys (shown once), invitations to organizations (accept, decline), organizations,
// their members and pending invitations, each namespace's privileges and quotas (privileges editable
// by administrators), and (administrators) new users and deactivating or activating a user.
import { useEffect, useState } from "preact/hooks";
import type {
  ApiKey,
  Email,
  Invitation as InvitationRow,
  Organization as Org,
  Profile,
} from "../../../src/contract/account.ts";
import type { NamespaceSettingsView } from "../../../src/contract/namespace.ts";
import { PRIVILEGE_KEYS, type Privileges } from "../../../src/domain/privileges.ts";
import { call, get, loadSession, session } from "../api.ts";
import { ErrorLine, Facts, Field, inputValue, Loading, Op, Page, perform, Select } from "../ui.tsx";

function useLoad<T>(url: string): { data?: T; error?: unknown; reload(): void } {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    get<T>(url).then(
      (d) => {
        setData(d);
        setError(undefined);
      },
      (e: unknown) => setError(e),
    );
  }, [url, tick]);
  return { data, error, reload: () => setTick((t) => t + 1) };
}

function ProfileSection({ me }: { me: string }) {
  const p = useLoad<Profile>(`/api/v1.1/users/${me}/`);
  const [edit, setEdit] = useState<Partial<Profile>>({});
  if (p.error) return <ErrorLine error={p.error} />;
  if (!p.data) return <Loading />;
  const v = { ...p.data, ...edit };
  return (
    <section>
      <h2>Profile</h2>
      <Facts
        items={[
          ["Username", p.data.username],
          ["Name", p.data.full_name],
          ["Primary email", p.data.email],
          ["Joined", p.data.date_joined],
        ]}
      />
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void perform("Profile", () =>
            call("PATCH", `/api/v1.1/users/${me}/`, {
              location: v.location,
              company: v.company,
              profile_url: v.profile_url,
            }),
          ).then((r) => {
            if (r) {
              setEdit({});
              p.reload();
            }
          });
        }}
      >
        <Field label="Location">
          <input value={v.location} onInput={(e) => setEdit({ ...edit, location: inputValue(e) })} />
        </Field>
        <Field label="Company">
          <input value={v.company} onInput={(e) => setEdit({ ...edit, company: inputValue(e) })} />
        </Field>
        <Field label="Profile URL">
          <input
            type="url"
            value={v.profile_url}
            onInput={(e) => setEdit({ ...edit, profile_url: inputValue(e) })}
          />
        </Field>
        <button type="submit">Save profile</button>
      </form>
    </section>
  );
}

function EmailSection({ me }: { me: string }) {
  const list = useLoad<Email[]>(`/api/v1.1/users/${me}/emails/`);
  const [address, setAddress] = useState("");
  const [token, setToken] = useState("");
  const base = `/api/v1.1/users/${me}/emails/`;
  return (
    <section>
      <h2>Email addresses</h2>
      <ErrorLine error={list.error} />
      {list.data && (
        <ul class="plain">
          {list.data.map((m) => (
            <li key={m.email} class="email-row">
              <span>{m.email}</span>
              <span class="hint">
                {m.primary ? "primary" : ""} {m.verified ? "verified" : "not verified"}
              </span>
              {!m.verified && (
                <Op
                  label="Send confirmation"
                  run={() => call("POST", `${base}verify/`, { email: m.email })}
                />
              )}
              <Op
                label="Make primary"
                allowed={{
                  allowed: m.verified && !m.primary,
                  reason: m.primary ? "already the primary address" : "verify the address first",
                }}
                run={() => call("PATCH", base, { email: m.email, primary: true })}
                done={() => list.reload()}
              />
              <Op
                label="Delete"
                danger
                allowed={{ allowed: !m.primary, reason: "the primary address cannot be deleted" }}
                confirm={`Delete ${m.email}?`}
                run={() => call("DELETE", base, { email: m.email })}
                done={() => list.reload()}
              />
            </li>
          ))}
        </ul>
      )}
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void perform(`Add ${address}`, () => call("POST", base, { email: address })).then((r) => {
            if (r) {
              setAddress("");
              list.reload();
            }
          });
        }}
      >
        <Field label="New address">
          <input type="email" required value={address} onInput={(e) => setAddress(inputValue(e))} />
        </Field>
        <button type="submit">Add address</button>
      </form>
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void perform("Confirm address", () =>
            call("POST", "/api/v1.1/emails/confirm/", { token: token.trim() }),
          ).then((r) => {
            if (r) {
              setToken("");
              list.reload();
            }
          });
        }}
      >
        <Field label="Confirmation token" hint="from the confirmation message">
          <input value={token} autocomplete="off" onInput={(e) => setToken(inputValue(e))} />
        </Field>
        <button type="submit">Confirm</button>
      </form>
    </section>
  );
}

function SecuritySection({ me }: { me: string }) {
  const empty = { old: "", fresh: "", again: "" };
  const [pw, setPw] = useState(empty);
  const [ended, setEnded] = useState<string | undefined>(undefined);
  const differ = pw.again !== "" && pw.again !== pw.fresh;
  return (
    <section>
      <h2>Password and sessions</h2>
      <p class="hint">
        Changing the password signs out every other browser and ends every access token; API keys stay.
      </p>
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          if (differ) return;
          void perform("Change password", () =>
            call<{ sessions_ended: number; access_tokens_ended: number }>(
              "POST",
              `/api/v1.1/users/${me}/password/`,
              { old_password: pw.old, new_password: pw.fresh },
            ),
          ).then((r) => {
            if (!r) return;
            const d = r.data as { sessions_ended: number; access_tokens_ended: number };
            setPw(empty);
            setEnded(
              `${d.sessions_ended} other session(s) and ${d.access_tokens_ended} access token(s) ended.`,
            );
          });
        }}
      >
        <Field label="Current password">
          <input
            type="password"
            autocomplete="current-password"
            required
            value={pw.old}
            onInput={(e) => setPw({ ...pw, old: inputValue(e) })}
          />
        </Field>
        <Field label="New password" hint="at least 8 characters">
          <input
            type="password"
            autocomplete="new-password"
            required
            minLength={8}
            value={pw.fresh}
            onInput={(e) => setPw({ ...pw, fresh: inputValue(e) })}
          />
        </Field>
        <Field label="New password again" hint={differ ? "the two new passwords differ" : undefined}>
          <input
            type="password"
            autocomplete="new-password"
            required
            value={pw.again}
            onInput={(e) => setPw({ ...pw, again: inputValue(e) })}
          />
        </Field>
        <button type="submit" disabled={differ}>
          Change password
        </button>
      </form>
      {ended && (
        <p class="hint" role="status">
          {ended}
        </p>
      )}
      <Op
        label="Sign out everywhere"
        danger
        confirm="Sign out of every browser, this one included, and end every access token?"
        run={() => call("DELETE", `/api/v1.1/users/${me}/sessions/`)}
        done={() => void loadSession()}
      />
    </section>
  );
}

function KeySection({ me }: { me: string }) {
  const keys = useLoad<{ objects?: ApiKey[] } | ApiKey[]>(`/api/v1.1/users/${me}/apikeys/`);
  const [label, setLabel] = useState("");
  const [fresh, setFresh] = useState<{ label: string; key: string } | undefined>(undefined);
  const rows = Array.isArray(keys.data) ? keys.data : (keys.data?.objects ?? []);
  return (
    <section>
      <h2>API keys</h2>
      <p class="hint">For programs (the CLI, SDKs). A key is shown once, when it is created.</p>
      {fresh && (
        <div class="secret-once" role="status">
          <p>
            Key <strong>{fresh.label || "(no label)"}</strong>: copy it now, it is not shown again.
          </p>
          <code class="secret">{fresh.key}</code>{" "}
          <button type="button" onClick={() => void navigator.clipboard?.writeText(fresh.key)}>
            Copy
          </button>{" "}
          <button type="button" class="link" onClick={() => setFresh(undefined)}>
            Done
          </button>
        </div>
      )}
      <ErrorLine error={keys.error} />
      <ul class="plain">
        {rows.map((k) => (
          <li key={k.id} class="email-row">
            <span>{k.label || "(no label)"}</span>
            <span class="hint">created {k.created}</span>
            <Op
              label="Revoke"
              danger
              confirm={`Revoke key ${k.label}? Programs using it stop working.`}
              run={() => call("DELETE", `/api/v1.1/users/${me}/apikeys/${k.id}/`)}
              done={() => keys.reload()}
            />
          </li>
        ))}
      </ul>
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void perform("Create API key", () =>
            call<{ key: string; label: string }>("POST", `/api/v1.1/users/${me}/apikeys/`, { label }),
          ).then((r) => {
            if (!r) return;
            setFresh(r.data as { key: string; label: string });
            setLabel("");
            keys.reload();
          });
        }}
      >
        <Field label="Label">
          <input value={label} onInput={(e) => setLabel(inputValue(e))} />
        </Field>
        <button type="submit">Create key</button>
      </form>
    </section>
  );
}

/** Invitations waiting for the user: accepting makes it a member, declining drops the invitation. */
function InvitationSection({ me }: { me: string }) {
  const list = useLoad<{ objects: InvitationRow[] }>(`/api/v1.1/users/${me}/invitations/`);
  const rows = list.data?.objects ?? [];
  if (!list.error && rows.length === 0) return null;
  const base = `/api/v1.1/users/${me}/invitations/`;
  return (
    <section>
      <h2>Invitations</h2>
      <ErrorLine error={list.error} />
      <ul class="plain invitations">
        {rows.map((i) => (
          <li key={i.org} class="email-row">
            <span>{i.org}</span>
            <span class="hint">
              as {i.role}, invited by {i.invited_by}
            </span>
            <Op
              label="Accept"
              run={() => call("POST", `${base}${i.org}/accept/`)}
              done={() => {
                list.reload();
                void loadSession();
              }}
            />
            <Op
              label="Decline"
              danger
              confirm={`Decline the invitation to ${i.org}?`}
              run={() => call("POST", `${base}${i.org}/decline/`)}
              done={() => list.reload()}
            />
          </li>
        ))}
      </ul>
    </section>
  );
}

/** An organization's pending invitations (owners), each of which an owner may withdraw. */
function PendingInvitations({ name }: { name: string }) {
  const list = useLoad<{ objects: InvitationRow[] }>(`/api/v1.1/orgs/${name}/invitations/`);
  const rows = list.data?.objects ?? [];
  if (rows.length === 0) return <ErrorLine error={list.error} />;
  return (
    <ul class="plain">
      {rows.map((i) => (
        <li key={i.username} class="email-row">
          <span>{i.username}</span>
          <span class="hint">invited as {i.role}, pending</span>
          <Op
            label="Withdraw"
            danger
            run={() => call("DELETE", `/api/v1.1/orgs/${name}/invitations/${i.username}/`)}
            done={() => list.reload()}
          />
        </li>
      ))}
    </ul>
  );
}

function OrgCard({ name, me }: { name: string; me: string }) {
  const org = useLoad<Org>(`/api/v1.1/orgs/${name}/`);
  const [invited, setInvited] = useState(0);
  const [user, setUser] = useState("");
  const [role, setRole] = useState("member");
  if (org.error) return <ErrorLine error={org.error} />;
  if (!org.data) return <Loading />;
  const owner = org.data.members.some((m) => m.username === me && m.role === "owner");
  const notOwner = { allowed: owner, reason: "only owners manage members" };
  return (
    <div class="card">
      <h3>{name}</h3>
      <ul class="plain">
        {org.data.members.map((m) => (
          <li key={m.username} class="email-row">
            <span>{m.username}</span>
            <span class="hint">{m.role}</span>
            {m.username === me ? (
              <Op
                label="Leave"
                danger
                confirm={`Leave ${name}? You lose access to its namespace.`}
                run={() => call("DELETE", `/api/v1.1/orgs/${name}/members/${me}/`)}
                done={() => void loadSession()}
              />
            ) : (
              <Op
                label="Remove"
                danger
                allowed={notOwner}
                confirm={`Remove ${m.username} from ${name}?`}
                run={() => call("DELETE", `/api/v1.1/orgs/${name}/members/${m.username}/`)}
                done={() => org.reload()}
              />
            )}
          </li>
        ))}
      </ul>
      {owner && <PendingInvitations key={invited} name={name} />}
      {owner && (
        <form
          class="inline-form"
          onSubmit={(e) => {
            e.preventDefault();
            void perform(`Invite ${user} to ${name}`, () =>
              call("POST", `/api/v1.1/orgs/${name}/members/`, { username: user, role }),
            ).then((r) => {
              if (r) {
                setUser("");
                setInvited((n) => n + 1);
                org.reload();
              }
            });
          }}
        >
          <input
            aria-label="Username"
            placeholder="username"
            value={user}
            onInput={(e) => setUser(inputValue(e))}
          />
          <Select value={role} onChange={setRole} options={["member", "owner"]} />
          <button type="submit">Invite</button>
        </form>
      )}
    </div>
  );
}

function OrgSection({ me, namespaces }: { me: string; namespaces: string[] }) {
  const [name, setName] = useState("");
  return (
    <section>
      <h2>Organizations</h2>
      {namespaces
        .filter((n) => n !== me)
        .map((n) => (
          <OrgCard key={n} name={n} me={me} />
        ))}
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void perform(`Create organization ${name}`, () =>
            call("POST", "/api/v1.1/orgs/", { name: name.trim() }),
          ).then((r) => {
            if (r) {
              setName("");
              void loadSession();
            }
          });
        }}
      >
        <Field label="New organization">
          <input value={name} onInput={(e) => setName(inputValue(e))} />
        </Field>
        <button type="submit">Create organization</button>
      </form>
    </section>
  );
}

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

function PrivilegesSection({ namespaces, admin }: { namespaces: string[]; admin: boolean }) {
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

function UsersSection() {
  const [form, setForm] = useState({ username: "", email: "", password: "" });
  return (
    <section>
      <h2>New user</h2>
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void perform(`Create user ${form.username}`, () => call("POST", "/api/v1.1/users/", form)).then(
            (r) => r && setForm({ username: "", email: "", password: "" }),
          );
        }}
      >
        <Field label="Username">
          <input value={form.username} onInput={(e) => setForm({ ...form, username: inputValue(e) })} />
        </Field>
        <Field label="Email">
          <input
            type="email"
            value={form.email}
            onInput={(e) => setForm({ ...form, email: inputValue(e) })}
          />
        </Field>
        <Field label="Password">
          <input
            type="password"
            autocomplete="new-password"
            value={form.password}
            onInput={(e) => setForm({ ...form, password: inputValue(e) })}
          />
        </Field>
        <button type="submit">Create user</button>
      </form>
      <UserAccessForm />
    </section>
  );
}

/** Deactivates or activates a user by name (there is no list of users to pick from). */
function UserAccessForm() {
  const [name, setName] = useState("");
  const act = (verb: "deactivate" | "activate") =>
    void perform(`${verb === "deactivate" ? "Deactivate" : "Activate"} ${name}`, () =>
      call("POST", `/api/v1.1/users/${encodeURIComponent(name.trim())}/${verb}/`),
    ).then((r) => r && setName(""));
  return (
    <form class="inline-form" onSubmit={(e) => e.preventDefault()}>
      <Field
        label="User"
        hint="deactivating refuses the user's keys, sessions, tokens and streams at once; activating lets the keys work again"
      >
        <input value={name} onInput={(e) => setName(inputValue(e))} />
      </Field>
      <button type="button" class="danger" disabled={!name.trim()} onClick={() => act("deactivate")}>
        Deactivate
      </button>
      <button type="button" disabled={!name.trim()} onClick={() => act("activate")}>
        Activate
      </button>
    </form>
  );
}

export function AccountPage() {
  const s = session.value;
  if (!s) return null;
  return (
    <Page title="Account">
      <ProfileSection me={s.username} />
      <EmailSection me={s.username} />
      <SecuritySection me={s.username} />
      <KeySection me={s.username} />
      <InvitationSection me={s.username} />
      <OrgSection me={s.username} namespaces={s.namespaces} />
      <PrivilegesSection namespaces={s.namespaces} admin={s.is_admin} />
      {s.is_admin && <UsersSection />}
    </Page>
  );
}
