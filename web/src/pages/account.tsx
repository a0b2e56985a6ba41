// The account: profile, email addresses (verification, primary), API keys (shown once),
// organizations and their members, and (administrators) new users.
import { useEffect, useState } from "preact/hooks";
import { call, get, loadSession, session } from "../api.ts";
import { ErrorLine, Facts, Field, inputValue, Loading, Op, Page, perform, Select } from "../ui.tsx";

interface Profile {
  username: string;
  full_name: string;
  email: string;
  location: string;
  company: string;
  profile_url: string;
  date_joined: string;
}
interface Email {
  email: string;
  verified: boolean;
  primary: boolean;
}
interface ApiKey {
  id: number;
  label: string;
  created: string;
}
interface Org {
  name: string;
  members: { username: string; role: string }[];
}

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

function OrgCard({ name, me }: { name: string; me: string }) {
  const org = useLoad<Org>(`/api/v1.1/orgs/${name}/`);
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
            <Op
              label="Remove"
              danger
              allowed={notOwner}
              confirm={`Remove ${m.username} from ${name}?`}
              run={() => call("DELETE", `/api/v1.1/orgs/${name}/members/${m.username}/`)}
              done={() => org.reload()}
            />
          </li>
        ))}
      </ul>
      {owner && (
        <form
          class="inline-form"
          onSubmit={(e) => {
            e.preventDefault();
            void perform(`Add ${user} to ${name}`, () =>
              call("POST", `/api/v1.1/orgs/${name}/members/`, { username: user, role }),
            ).then((r) => {
              if (r) {
                setUser("");
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
          <button type="submit">Add member</button>
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
    </section>
  );
}

export function AccountPage() {
  const s = session.value;
  if (!s) return null;
  return (
    <Page title="Account">
      <ProfileSection me={s.username} />
      <EmailSection me={s.username} />
      <KeySection me={s.username} />
      <OrgSection me={s.username} namespaces={s.namespaces} />
      {s.is_admin && <UsersSection />}
    </Page>
  );
}
