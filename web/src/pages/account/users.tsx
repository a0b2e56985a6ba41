// Users, for administrators: the list (search by username), a new user (problems next to their
// fields), and deactivating or activating each user from its row.
import { useState } from "preact/hooks";
import type { Profile } from "../../../../src/contract/account.ts";
import { call, query } from "../../api.ts";
import { useList } from "../../live.ts";
import { PagedTable, SearchBox } from "../../table.tsx";
import { When } from "../../time.tsx";
import {
  Field,
  FormError,
  inputValue,
  notify,
  Op,
  Page,
  ProblemForm,
  StateBadge,
  useFormProblems,
} from "../../ui.tsx";

type UserRow = Profile & { is_admin: boolean; resource_uri: string; state?: string };

const PAGE = 50;
const FIELDS = ["username", "email", "password"] as const;

function NewUser(props: { created(): void }) {
  const empty = { username: "", email: "", password: "" };
  const [form, setForm] = useState(empty);
  const [busy, setBusy] = useState(false);
  const problems = useFormProblems();
  return (
    <ProblemForm
      label="New user"
      problems={problems}
      onSubmit={() => {
        setBusy(true);
        problems.set(undefined);
        call("POST", "/api/v1.1/users/", form)
          .then(
            () => {
              notify({ kind: "ok", text: `User ${form.username} created.` });
              setForm(empty);
              props.created();
            },
            (err: unknown) => problems.set(err),
          )
          .finally(() => setBusy(false));
      }}
    >
      <Field label="Username" field="username">
        <input
          name="username"
          value={form.username}
          onInput={(e) => setForm({ ...form, username: inputValue(e) })}
        />
      </Field>
      <Field label="Email" field="email">
        <input
          name="email"
          type="email"
          value={form.email}
          onInput={(e) => setForm({ ...form, email: inputValue(e) })}
        />
      </Field>
      <Field label="Password" field="password">
        <input
          name="password"
          type="password"
          autocomplete="new-password"
          value={form.password}
          onInput={(e) => setForm({ ...form, password: inputValue(e) })}
        />
      </Field>
      <button type="submit" disabled={busy}>
        Create user
      </button>
      <FormError problems={problems} fields={FIELDS} />
    </ProblemForm>
  );
}

export function UsersPage() {
  const [offset, setOffset] = useState(0);
  const [search, setSearch] = useState("");
  const list = useList<UserRow>(
    query("/api/v1.1/users/", { limit: PAGE, offset, username__icontains: search.trim() || undefined }),
    [],
  );
  const rows = list.data
    ? {
        ...list.data,
        objects: list.data.objects.map((u) => ({
          ...u,
          resource_uri: u.url,
          state: u.is_active ? "Active" : "Deactivated",
        })),
      }
    : undefined;
  return (
    <Page title="Users">
      <h2>New user</h2>
      <NewUser created={list.reload} />
      <h2>All users</h2>
      <div class="filters">
        <SearchBox
          value={search}
          onSearch={(v) => {
            setSearch(v);
            setOffset(0);
          }}
          placeholder="username contains…"
        />
      </div>
      <PagedTable<UserRow>
        list={{ data: rows, error: list.error }}
        offset={offset}
        limit={PAGE}
        go={setOffset}
        label="Users"
        empty="No users match."
        columns={[
          { label: "Username", render: (u) => u.username },
          { label: "Email", render: (u) => u.email },
          { label: "Role", render: (u) => (u.is_admin ? "administrator" : "user") },
          {
            label: "State",
            render: (u) => <StateBadge state={u.state} bad={!u.is_active} />,
          },
          { label: "Joined", render: (u) => <When at={u.date_joined} /> },
          {
            label: "Access",
            render: (u) =>
              u.is_active ? (
                <Op
                  label="Deactivate"
                  danger
                  confirm={`Deactivate ${u.username}? Their sessions, tokens and streams end at once; their keys are refused.`}
                  run={() => call("POST", `/api/v1.1/users/${encodeURIComponent(u.username)}/deactivate/`)}
                  done={list.reload}
                />
              ) : (
                <Op
                  label="Activate"
                  run={() => call("POST", `/api/v1.1/users/${encodeURIComponent(u.username)}/activate/`)}
                  done={list.reload}
                />
              ),
          },
        ]}
      />
    </Page>
  );
}
