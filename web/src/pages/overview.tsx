// The overview, kept live: per kind what is running, what is stopped and what failed (terminated
// objects left out), the latest failed actions, and first steps when the namespace is empty.
import { useEffect, useState } from "preact/hooks";
import { get, type ListPage, namespace, nsPath, query } from "../api.ts";
import { crashed, type ExitFacts } from "../crash.tsx";
import { onEvent } from "../live.ts";
import { ObjectLink } from "../names.tsx";
import { When } from "../time.tsx";
import { ErrorLine, Page } from "../ui.tsx";

interface Kind {
  label: string;
  sub: "app" | "infra";
  res: string;
  page: string;
  /** States counted as up, as down, as failing. */
  up: string[];
  down: string[];
  bad: string[];
}

const KINDS: Kind[] = [
  {
    label: "Node clusters",
    sub: "infra",
    res: "nodecluster",
    page: "nodeclusters",
    up: ["Deployed"],
    down: ["Init", "Empty cluster"],
    bad: ["Partly deployed"],
  },
  {
    label: "Nodes",
    sub: "infra",
    res: "node",
    page: "nodes",
    up: ["Deployed"],
    down: [],
    bad: ["Unreachable"],
  },
  {
    label: "Stacks",
    sub: "app",
    res: "stack",
    page: "stacks",
    up: ["Running"],
    down: ["Stopped", "Not Running"],
    bad: ["Partly running"],
  },
  {
    label: "Services",
    sub: "app",
    res: "service",
    page: "services",
    up: ["Running"],
    down: ["Stopped", "Not running"],
    bad: ["Partly running"],
  },
  {
    label: "Containers",
    sub: "app",
    res: "container",
    page: "containers",
    up: ["Running"],
    down: ["Stopped"],
    bad: [],
  },
];

interface Counts {
  total: number;
  up: number;
  down: number;
  bad: number;
}

const count = async (url: string, params: Record<string, string>) =>
  (await get<ListPage<unknown>>(query(url, { ...params, limit: 1 }))).meta.total_count;
const sum = async (url: string, states: string[]) =>
  (await Promise.all(states.map((state) => count(url, { state })))).reduce((a, b) => a + b, 0);

async function countsOf(k: Kind): Promise<Counts> {
  const url = nsPath(k.sub, k.res);
  const [total, up, down, bad] = await Promise.all([
    count(url, { state__not: "Terminated" }),
    sum(url, k.up),
    sum(url, k.down),
    sum(url, k.bad),
  ]);
  if (k.res !== "container") return { total, up, down, bad };
  // Containers fail by exiting with an error: among the latest stopped, those that crashed.
  const stopped = await get<ListPage<ExitFacts>>(query(url, { state: "Stopped", limit: 200 }));
  const failed = stopped.objects.filter(crashed).length;
  return { total, up, down: down - failed, bad: failed };
}

/** Runs `fn` now and again (at most every 150 ms) while events of `types` arrive. */
function useLive(fn: () => void, types: string[], deps: unknown[]): void {
  useEffect(() => {
    fn();
    let t: ReturnType<typeof setTimeout> | undefined;
    const off = onEvent((e) => {
      if (!types.includes(e.type) || t) return;
      t = setTimeout(() => {
        t = undefined;
        fn();
      }, 150);
    });
    return () => {
      off();
      clearTimeout(t);
    };
  }, deps);
}

function Tile({ k }: { k: Kind }) {
  const [c, setC] = useState<Counts | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  useLive(() => void countsOf(k).then(setC, setError), [k.res], [namespace.value]);
  return (
    <a class="tile" href={`#/${k.page}`}>
      <span class="tile-n">{c ? c.total : "…"}</span>
      <span>{k.label}</span>
      {error !== undefined && <ErrorLine error={error} />}
      {c && c.total > 0 && (
        <span class="tile-parts">
          <span class="part good">{c.up} up</span>
          {c.down > 0 && <span class="part idle">{c.down} stopped</span>}
          {c.bad > 0 && <span class="part bad">{c.bad} failing</span>}
        </span>
      )}
    </a>
  );
}

interface FailedAction {
  uuid: string;
  action: string;
  object: string;
  end_date: string | null;
  resource_uri: string;
}

function RecentFailures() {
  const [rows, setRows] = useState<FailedAction[] | undefined>(undefined);
  useLive(
    () =>
      void get<ListPage<FailedAction>>(
        query(nsPath("audit", "action"), { state: "Failed", order_by: "-start_date", limit: 5 }),
      ).then((p) => setRows(p.objects)),
    ["action"],
    [namespace.value],
  );
  if (!rows || rows.length === 0) return null;
  return (
    <section aria-label="Recent failures">
      <h2>Recent failures</h2>
      <ul class="failures">
        {rows.map((a) => (
          <li key={a.uuid}>
            <a href={`#/actions/${a.uuid}`}>{a.action}</a> of <ObjectLink uri={a.object} />{" "}
            <When at={a.end_date} />
          </li>
        ))}
      </ul>
    </section>
  );
}

function FirstSteps() {
  return (
    <section class="first-steps" aria-label="First steps">
      <h2>First steps</h2>
      <ol>
        <li>
          <a href="#/nodeclusters/new">Create a node cluster</a> on a provider, or bring a server of your own
          from the <a href="#/nodes">nodes page</a>.
        </li>
        <li>
          <a href="#/services/new">Create a service</a> from an image, or a <a href="#/stacks/new">stack</a>{" "}
          from a stack file, and start it.
        </li>
        <li>
          Follow what happens in the <a href="#/actions">actions</a>: every change has its log, cancel and
          retry.
        </li>
      </ol>
    </section>
  );
}

export function Overview() {
  const ns = namespace.value;
  const [empty, setEmpty] = useState(false);
  useLive(
    () =>
      void Promise.all(KINDS.map((k) => count(nsPath(k.sub, k.res), { state__not: "Terminated" }))).then(
        (n) => setEmpty(n.every((x) => x === 0)),
      ),
    KINDS.map((k) => k.res),
    [ns],
  );
  return (
    <Page title={`Namespace ${ns}`}>
      {empty && <FirstSteps />}
      <div class="tiles">
        {KINDS.map((k) => (
          <Tile key={`${ns}-${k.res}`} k={k} />
        ))}
      </div>
      <p class="hint">Terminated objects are not counted. The counts follow changes as they happen.</p>
      <RecentFailures />
    </Page>
  );
}
