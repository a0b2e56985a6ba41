// The dashboard's entry: sign-in, the frame (navigation, namespace switcher, live status) and the
// hash routes of every page.
import "@xterm/xterm/css/xterm.css";
import "./styles.css";
import { effect } from "@preact/signals";
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { chooseNamespace, loadSession, namespace, session, signIn, signOut } from "./api.ts";
import { liveStatus, startLive, stopLive } from "./live.ts";
import { UsersPage } from "./pages/account/users.tsx";
import { AccountPage } from "./pages/account.tsx";
import { ActionDetail, ActionList } from "./pages/actions.tsx";
import { AlertDetail, AlertList } from "./pages/alerts.tsx";
import { BackupsPage } from "./pages/backups.tsx";
import { ContainerDetail, ContainerList } from "./pages/containers.tsx";
import { ClusterCreate, ClusterDetail, ClusterList, NodeDetail, NodeList } from "./pages/infra.tsx";
import { Overview } from "./pages/overview.tsx";
import { RegistryPage } from "./pages/registries.tsx";
import { ServiceCreate, ServiceDetail, ServiceEdit, ServiceList } from "./pages/services.tsx";
import { StackCreate, StackDetail, StackList } from "./pages/stacks.tsx";
import { match, route } from "./router.ts";
import { ThemeToggle } from "./theme.tsx";
import { dismissErrors, errorText, Notices, Page } from "./ui.tsx";

function SignIn() {
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  return (
    <main class="signin">
      <form
        class="form card"
        onSubmit={(e) => {
          e.preventDefault();
          setBusy(true);
          setError(undefined);
          signIn(username, password).then(
            () => setPassword(""),
            (err: unknown) => {
              setError(err);
              setBusy(false);
            },
          );
        }}
      >
        <h1>Sign in to Berth</h1>
        <label class="field">
          <span class="field-label">Username</span>
          <input
            name="username"
            autocomplete="username"
            required
            value={username}
            onInput={(e) => setUsername((e.target as HTMLInputElement).value)}
          />
        </label>
        <label class="field">
          <span class="field-label">Password</span>
          <input
            name="password"
            type="password"
            autocomplete="current-password"
            required
            value={password}
            onInput={(e) => setPassword((e.target as HTMLInputElement).value)}
          />
        </label>
        {error !== undefined && (
          <p class="error" role="alert">
            {errorText(error)}
          </p>
        )}
        <button type="submit" class="primary" disabled={busy}>
          Sign in
        </button>
      </form>
    </main>
  );
}

const NAV: [string, string][] = [
  ["/", "Overview"],
  ["/nodeclusters", "Node clusters"],
  ["/nodes", "Nodes"],
  ["/stacks", "Stacks"],
  ["/services", "Services"],
  ["/containers", "Containers"],
  ["/actions", "Actions"],
  ["/alerts", "Alerts"],
  ["/backups", "Backups"],
  ["/registries", "Registries"],
  ["/account", "Account"],
];

type Route = [string, (p: Record<string, string>) => preact.JSX.Element];
const ROUTES: Route[] = [
  ["/", () => <Overview />],
  ["/nodeclusters", () => <ClusterList />],
  ["/nodeclusters/new", () => <ClusterCreate />],
  ["/nodeclusters/:uuid", (p) => <ClusterDetail uuid={p.uuid!} />],
  ["/nodes", () => <NodeList />],
  ["/nodes/:uuid", (p) => <NodeDetail uuid={p.uuid!} />],
  ["/services", () => <ServiceList />],
  ["/services/new", () => <ServiceCreate />],
  ["/services/:uuid", (p) => <ServiceDetail uuid={p.uuid!} />],
  ["/services/:uuid/edit", (p) => <ServiceEdit uuid={p.uuid!} />],
  ["/containers", () => <ContainerList />],
  ["/containers/:uuid", (p) => <ContainerDetail uuid={p.uuid!} />],
  ["/stacks", () => <StackList />],
  ["/stacks/new", () => <StackCreate />],
  ["/stacks/:uuid", (p) => <StackDetail uuid={p.uuid!} />],
  ["/actions", () => <ActionList />],
  ["/actions/:uuid", (p) => <ActionDetail uuid={p.uuid!} />],
  ["/alerts", () => <AlertList />],
  ["/alerts/:uuid", (p) => <AlertDetail uuid={p.uuid!} />],
  ["/backups", () => <BackupsPage />],
  ["/registries", () => <RegistryPage />],
  ["/account", () => <AccountPage />],
  ["/users", () => <UsersPage />],
];

function Content() {
  const path = route.value;
  for (const [pattern, view] of ROUTES) {
    const params = match(pattern, path);
    if (params) return view(params);
  }
  return (
    <Page title="Not found">
      <p>
        There is no page at {path}. <a href="#/">Go to the overview</a>.
      </p>
    </Page>
  );
}

function Frame() {
  const s = session.value!;
  const path = route.value;
  const [menu, setMenu] = useState(false);
  useEffect(() => setMenu(false), [path]);
  const section = `/${path.split("/")[1] ?? ""}`;
  return (
    <div class="frame">
      <button type="button" class="skip" onClick={() => document.getElementById("content")?.focus()}>
        Skip to content
      </button>
      <header class="top">
        <button
          type="button"
          class="menu-toggle"
          aria-expanded={menu}
          aria-controls="nav"
          onClick={() => setMenu(!menu)}
        >
          Menu
        </button>
        <a class="brand" href="#/">
          Berth
        </a>
        <label class="ns">
          <span class="sr-only">Namespace</span>
          <select
            name="namespace"
            value={namespace.value}
            onChange={(e) => chooseNamespace((e.target as HTMLSelectElement).value)}
          >
            {s.namespaces.map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
        </label>
        <span class={`live ${liveStatus.value}`} title="Changes arrive over the events stream">
          {liveStatus.value}
        </span>
        <ThemeToggle />
        <span class="who">{s.username}</span>
        <button type="button" onClick={() => void signOut()}>
          Sign out
        </button>
      </header>
      <nav id="nav" class={menu ? "open" : undefined} aria-label="Sections">
        {[...NAV, ...(s.is_admin ? ([["/users", "Users"]] as [string, string][]) : [])].map(([to, label]) => (
          <a key={to} href={`#${to}`} aria-current={section === to ? "page" : undefined}>
            {label}
          </a>
        ))}
      </nav>
      <main id="content" tabIndex={-1} key={namespace.value}>
        <Content />
      </main>
      <Notices />
    </div>
  );
}

function App() {
  const s = session.value;
  if (s === undefined) return <p class="loading">Loading…</p>;
  if (s === null) return <SignIn />;
  return <Frame />;
}

// Error notices stay on the page they were raised on.
let shownRoute = route.peek();
effect(() => {
  const now = route.value;
  if (now.split("?")[0] !== shownRoute.split("?")[0]) dismissErrors();
  shownRoute = now;
});

// One events socket for the page while signed in.
effect(() => {
  if (session.value) startLive();
  else stopLive();
});

void loadSession();
render(<App />, document.getElementById("app")!);
