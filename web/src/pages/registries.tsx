// Registries and external repositories. Credentials are write-only: the form sends them, the
// API never returns them, and the page forgets them once sent.
import { useState } from "preact/hooks";
import type {
  Registry as RegistryView,
  Repository as RepositoryView,
} from "../../../src/contract/registry.ts";
import { call, nsPath, query } from "../api.ts";
import { type Resource, useList } from "../live.ts";
import { SearchBox, Table } from "../table.tsx";
import {
  ErrorLine,
  Field,
  FormError,
  inputValue,
  Loading,
  Op,
  Page,
  ProblemsProvider,
  perform,
  submitForm,
  useFormProblems,
} from "../ui.tsx";

type Registry = RegistryView & Resource;
type Repository = RepositoryView & Resource;

function Credentials(props: { repo: Repository; done(): void }) {
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  return (
    <form
      class="inline-form"
      onSubmit={(e) => {
        e.preventDefault();
        void perform(`Credentials of ${props.repo.name}`, () =>
          call("PATCH", props.repo.resource_uri, { username, password }),
        ).then((r) => {
          if (r) {
            setUsername("");
            setPassword("");
            props.done();
          }
        });
      }}
    >
      <input
        aria-label="Username"
        placeholder="username"
        autocomplete="off"
        value={username}
        onInput={(e) => setUsername(inputValue(e))}
      />
      <input
        aria-label="Password"
        type="password"
        placeholder="password"
        autocomplete="new-password"
        value={password}
        onInput={(e) => setPassword(inputValue(e))}
      />
      <button type="submit">Replace credentials</button>
    </form>
  );
}

export function RegistryPage() {
  const registries = useList<Registry>(query(nsPath("repo", "registry"), { limit: 100 }), []);
  const [search, setSearch] = useState("");
  const repos = useList<Repository>(
    query(nsPath("repo", "repository"), { limit: 200, name__icontains: search.trim() || undefined }),
    [],
  );
  const [name, setName] = useState("");
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [editing, setEditing] = useState<string | undefined>(undefined);
  const problems = useFormProblems();
  const add = async (e: Event) => {
    e.preventDefault();
    const body: Record<string, string> = { name: name.trim() };
    if (username) body.username = username;
    if (password) body.password = password;
    const r = await submitForm(
      `Add repository ${name}`,
      problems,
      () => call("POST", nsPath("repo", "repository"), body),
      "name",
    );
    if (r) {
      setName("");
      setUsername("");
      setPassword("");
      repos.reload();
      registries.reload();
    }
  };
  return (
    <Page title="Registries and repositories">
      <h2>Registries</h2>
      <ErrorLine error={registries.error} />
      {!registries.data ? (
        <Loading />
      ) : (
        <Table<Registry>
          label="Registries"
          rows={registries.data.objects}
          empty="No registries yet: adding a repository adds its registry."
          columns={[
            { label: "Name", render: (r) => r.name },
            { label: "Host", render: (r) => `${r.host}${r.port ? `:${r.port}` : ""}` },
            { label: "Berth's own", render: (r) => (r.is_native_registry ? "yes" : "no") },
            { label: "TLS", render: (r) => (r.is_ssl ? "yes" : "no") },
          ]}
        />
      )}
      <h2>External repositories</h2>
      <div class="filters">
        <SearchBox value={search} onSearch={setSearch} placeholder="team/app" />
      </div>
      <ErrorLine error={repos.error} />
      {repos.data && (
        <Table<Repository>
          label="Repositories"
          rows={repos.data.objects}
          empty="No repositories."
          columns={[
            { label: "Name", render: (r) => r.name },
            { label: "In use", render: (r) => (r.in_use ? "yes" : "no") },
            {
              label: "",
              render: (r) =>
                editing === r.resource_uri ? (
                  <Credentials repo={r} done={() => setEditing(undefined)} />
                ) : (
                  <span class="op-group">
                    <button type="button" onClick={() => setEditing(r.resource_uri)}>
                      Credentials…
                    </button>
                    <Op
                      label="Remove"
                      danger
                      confirm={`Remove ${r.name} from Berth? It stays on its registry.`}
                      run={() => call("DELETE", r.resource_uri)}
                      done={() => repos.reload()}
                    />
                  </span>
                ),
            },
          ]}
        />
      )}
      <ProblemsProvider value={problems}>
        <form
          class="form"
          aria-label="Add a repository"
          onInput={problems.edited}
          onSubmit={(e) => void add(e)}
        >
          <h2>Add a repository</h2>
          <div class="grid">
            <Field
              label="Repository"
              field="name"
              hint="registry host and path, e.g. registry.example.com/team/app"
            >
              <input required value={name} onInput={(e) => setName(inputValue(e))} />
            </Field>
            <Field label="Username" field="username">
              <input autocomplete="off" value={username} onInput={(e) => setUsername(inputValue(e))} />
            </Field>
            <Field label="Password" field="password" hint="sent once; never shown again">
              <input
                type="password"
                autocomplete="new-password"
                value={password}
                onInput={(e) => setPassword(inputValue(e))}
              />
            </Field>
          </div>
          <div class="form-actions">
            <button type="submit" class="primary">
              Add repository
            </button>
          </div>
          <FormError problems={problems} fields={["name", "username", "password"]} />
        </form>
      </ProblemsProvider>
    </Page>
  );
}
