// The overview, kept live: per kind what is running, what is stopped and what failed (terminated
// objects left out), the latest failed actions, and first steps when the namespace is empty.
import { useEffect, useState } from "preact/hooks";
import { get, type ListPage, namespace, nsPath, query } from "../api.ts";
import { onEvent } from "../live.ts";
import { ObjectLink } from "../names.tsx";
import { When } from "../time.tsx";
import { ErrorLine, Page } from "../ui.tsx";

interface Kind {
  label: string;
  sub: "app" | "infra";
  res: string;
  page: string;
  /** States counted as up, as down (a failing one counts as failing whatever its state). */
  up: string[];
  down: string[];
}

const KINDS: Kind[] = [
  {
    label: "Node clusters",
    sub: "infra",
    res: "nodecluster",
    page: "nodeclusters",
    up: ["Deployed"],
    down: ["Init", "Empty cluster"],
  },
  {
    label: "Nodes",
    sub: "infra",
    res: "node",
    page: "nodes",
    up: ["Deployed"],
    down: [],
  },
  {
    label: "Stacks",
    sub: "app",
    res: "stack",
    page: "stacks",
    up: ["Running"],
    down: ["Stopped", "Not Running"],
  },
  {
    label: "Services",
    sub: "app",
    res: "service",
    page: "services",
    up: ["Running"],
    down: ["Stopped", "Not running"],
  },
  {
    label: "Containers",
    sub: "app",
    res: "container",
    page: "containers",
    up: ["Running"],
    down: ["Stopped"],
  },
];

/** One count of the overview answer (GET …/overview/, src/api/routes/overview.ts). */
interface CountRow {
  state: string;
  reason: string | null;
  n: number;
}
type Answer = Record<string, CountRow[]>;

interface Counts {
  total: number;
  up: number;
  down: number;
  bad: number;
  /** Failing ones by reason ("crashed", "unhealthy", "partly running"…). */
  reasons: [string, number][];
}

/**
 * A kind's tile figures: a failing object (a reason in the answer, the rule of store/overview.ts
 * that the lists' `failing=true` applies too) counts as failing, whatever its state says.
 */
export function countsOf(k: Kind, rows: CountRow[]): Counts {
  const c: Counts = { total: 0, up: 0, down: 0, bad: 0, reasons: [] };
  const reasons = new Map<string, number>();
  for (const r of rows) {
    c.total += r.n;
    const reason = r.reason;
    if (reason !== null) {
      c.bad += r.n;
      reasons.set(reason, (reasons.get(reason) ?? 0) + r.n);
    } else if (k.up.includes(r.state)) c.up += r.n;
    else if (k.down.includes(r.state)) c.down += r.n;
  }
  c.reasons = [...reasons].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  return c;
}

/**
 * Runs `fn` now, and again when events of `types` arrive: at once when it is not already running,
 * else once more as soon as the run in flight ends (a burst costs one more run, never a wait).
 */
function useLive(fn: () => Promise<unknown>, types: string[], deps: unknown[]): void {
  useEffect(() => {
    let alive = true;
    let running = false;
    let again = false;
    const run = () => {
      running = true;
      void fn()
        .catch(() => undefined)
        .then(() => {
          running = false;
          if (alive && again) {
            again = false;
            run();
          }
        });
    };
    run();
    const off = onEvent((e) => {
      if (!types.includes(e.type)) return;
      if (running) again = true;
      else run();
    });
    return () => {
      alive = false;
      off();
    };
  }, deps);
}

/**
 * The namespace's counts, kept current: one grouped-count answer for every tile, asked again at
 * once when an event of a counted kind arrives, one question at a time (answers arrive in order).
 */
function useOverview(ns: string): { data: Answer | undefined; error: unknown } {
  const [data, setData] = useState<Answer | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  useLive(
    () =>
      get<Answer>(nsPath("app", "overview")).then(
        (a) => {
          setData(a);
          setError(undefined);
        },
        (e: unknown) => setError(e),
      ),
    KINDS.map((k) => k.res),
    [ns],
  );
  return { data, error };
}

function Tile({ k, rows }: { k: Kind; rows: CountRow[] | undefined }) {
  const c = rows ? countsOf(k, rows) : undefined;
  return (
    <a class="tile" href={`#/${k.page}`} data-kind={k.res}>
      <span class="tile-n">{c ? c.total : "…"}</span>
      <span>{k.label}</span>
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

/** What fails now, kind by kind, with why and a link to the list of exactly those. */
function Failing({ data }: { data: Answer }) {
  const lines = KINDS.map((k) => ({ k, c: countsOf(k, data[k.res] ?? []) })).filter(({ c }) => c.bad > 0);
  if (lines.length === 0) return null;
  return (
    <section class="failing" aria-label="Failing now">
      <h2>Failing now</h2>
      <ul class="failures">
        {lines.map(({ k, c }) => (
          <li key={k.res}>
            <a href={failingHref(k)}>
              {c.bad} {k.label.toLowerCase()}
            </a>
            : {c.reasons.map(([why, n]) => `${n} ${why}`).join(", ")}
          </li>
        ))}
      </ul>
    </section>
  );
}

/** The list of exactly a kind's failing objects (the API's `failing=true`). */
function failingHref(k: Kind): string {
  return `#/${k.page}?failing=true`;
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
      get<ListPage<FailedAction>>(
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
  const { data, error } = useOverview(ns);
  const empty = data !== undefined && KINDS.every((k) => (data[k.res] ?? []).length === 0);
  return (
    <Page title={`Namespace ${ns}`}>
      {empty && <FirstSteps />}
      <ErrorLine error={error} />
      <div class="tiles">
        {KINDS.map((k) => (
          <Tile key={`${ns}-${k.res}`} k={k} rows={data?.[k.res]} />
        ))}
      </div>
      <p class="hint">
        Terminated objects are not counted; a crashed or unhealthy one counts as failing, whatever its state.
        The counts follow changes as they happen.
      </p>
      {data && <Failing data={data} />}
      <RecentFailures />
    </Page>
  );
}
