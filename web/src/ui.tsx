// Shared pieces of every page: notices, operation buttons that follow the state tables, tables,
// pagination, form fields.
import { signal } from "@preact/signals";
import { type ComponentChildren, createContext } from "preact";
import { useContext, useEffect, useRef, useState } from "preact/hooks";
import { ApiFailure, call, type Reply, uuidOf } from "./api.ts";
import { fieldWords, inWords } from "./words.ts";

export interface Notice {
  id: number;
  kind: "ok" | "error";
  text: string;
  actionUri?: string;
}
export const notices = signal<Notice[]>([]);
let noticeId = 0;

/** How long a notice stays: long enough to read an error, then it goes by itself. */
export const NOTICE_MS = { ok: 8000, error: 12_000 };

export function notify(n: Omit<Notice, "id">): void {
  const id = ++noticeId;
  notices.value = [...notices.value.slice(-4), { ...n, id }];
  setTimeout(() => dismiss(id), NOTICE_MS[n.kind]);
}
/** Error notices belong to the page they were raised on: leaving it dismisses them. */
export function dismissErrors(): void {
  if (notices.value.some((n) => n.kind === "error"))
    notices.value = notices.value.filter((n) => n.kind !== "error");
}
export function dismiss(id: number): void {
  notices.value = notices.value.filter((n) => n.id !== id);
}

export function Notices() {
  return (
    <div class="notices" aria-live="polite">
      {notices.value.map((n) => (
        <div key={n.id} class={`notice ${n.kind}`} role={n.kind === "error" ? "alert" : "status"}>
          <span class="notice-text">{n.text}</span>
          {n.actionUri && (
            <a href={`#/actions/${uuidOf(n.actionUri)}`} onClick={() => dismiss(n.id)}>
              Follow the action
            </a>
          )}
          <button type="button" class="link" aria-label="Dismiss" onClick={() => dismiss(n.id)}>
            ×
          </button>
        </div>
      ))}
    </div>
  );
}

/** The API's sentence for a refused call (or what went wrong on the way). */
export function errorText(e: unknown): string {
  if (e instanceof ApiFailure) {
    // The API's sentence names its first problem ("image: must be…"): add only the others.
    const d = e.details
      .map((x) => `${x.field}: ${x.problem}`)
      .filter((x) => !e.message.includes(x))
      .map(inWords)
      .join("; ");
    return d ? `${inWords(e.message)} (${d})` : inWords(e.message);
  }
  return e instanceof Error ? e.message : String(e);
}

/** Runs a call and reports its outcome: the action to follow, or the API's error sentence. */
export async function perform(
  label: string,
  run: () => Promise<Reply<unknown>>,
): Promise<Reply<unknown> | undefined> {
  try {
    const r = await run();
    notify({
      kind: "ok",
      text: `${label}: ${r.status === 202 ? "accepted" : "done"}.`,
      actionUri: r.actionUri,
    });
    return r;
  } catch (e) {
    notify({ kind: "error", text: `${label}: ${errorText(e)}` });
    return undefined;
  }
}

/**
 * Whether a state table allows an operation, with the API's own refusal sentence as the reason.
 */
export function gate(
  table: Record<string, string[]>,
  operation: string,
  state: string | undefined,
  what: string,
): { allowed: boolean; reason: string } {
  const allowed = table[operation] ?? [];
  if (state !== undefined && allowed.includes(state)) return { allowed: true, reason: "" };
  const where = allowed.length
    ? `${operation} is allowed in ${allowed.join(", ")}`
    : `${operation} is not allowed`;
  return { allowed: false, reason: `${what} is ${state ?? "unknown"}; ${where}` };
}

export function Op(props: {
  label: string;
  run: () => Promise<Reply<unknown>>;
  allowed?: { allowed: boolean; reason: string };
  confirm?: string;
  danger?: boolean;
  done?: (r: Reply<unknown>) => void;
}) {
  const [busy, setBusy] = useState(false);
  const allowed = props.allowed ?? { allowed: true, reason: "" };
  const click = async () => {
    if (props.confirm && !window.confirm(props.confirm)) return;
    setBusy(true);
    const r = await perform(props.label, props.run);
    setBusy(false);
    if (r) props.done?.(r);
  };
  return (
    <span class="op" title={allowed.allowed ? undefined : allowed.reason}>
      <button
        type="button"
        class={props.danger ? "danger" : undefined}
        disabled={!allowed.allowed || busy}
        aria-disabled={!allowed.allowed}
        aria-description={allowed.allowed ? undefined : allowed.reason}
        onClick={() => void click()}
      >
        {props.label}
      </button>
    </span>
  );
}

const STATE_CLASS: Record<string, string> = {
  Running: "good",
  Deployed: "good",
  Success: "good",
  "Partly running": "warn",
  "Partly deployed": "warn",
  Unreachable: "bad",
  Failed: "bad",
  Stopped: "idle",
  "Not running": "idle",
  "Not Running": "idle",
  Terminated: "gone",
  Canceled: "gone",
  Init: "idle",
  "Empty cluster": "idle",
};

export function StateBadge({ state, bad }: { state?: string; bad?: boolean }) {
  const s = state ?? "";
  return <span class={`state ${bad ? "bad" : (STATE_CLASS[s] ?? "busy")}`}>{s}</span>;
}

/** The top-level name of an API field ("container_ports[0].inner_port" → "container_ports"). */
const topField = (field: string) => field.split(/[.[]/)[0] ?? field;

/**
 * The problems of a refused form: each shown once, next to its `Field` (the API's
 * `details: [{field, problem}]`), and forgotten when that field is edited.
 */
export interface FormProblems {
  error: unknown;
  /** The problem of a field (its top-level API name) not edited since the refusal. */
  of(field: string): string | undefined;
  set(error: unknown): void;
  /** Forgets the problem of a field (it was edited). */
  clear(field: string): void;
  /** The form's onInput/onChange: forgets the problem of the field edited (its `data-field`). */
  edited(e: Event): void;
}

export function useFormProblems(): FormProblems {
  const [error, setError] = useState<unknown>(undefined);
  const [problems, setProblems] = useState<Record<string, string>>({});
  const clear = (field: string) => {
    if (problems[field] === undefined) return;
    setProblems((was) => {
      const { [field]: _, ...rest } = was;
      return rest;
    });
  };
  return {
    error,
    of: (field) => problems[field],
    set(e) {
      setError(e);
      const p: Record<string, string> = {};
      if (e instanceof ApiFailure) {
        for (const d of e.details) {
          const key = topField(d.field);
          const text = d.field === key ? d.problem : `${fieldWords(d.field)}: ${d.problem}`;
          p[key] = p[key] ? `${p[key]}; ${text}` : text;
        }
      }
      setProblems(p);
    },
    clear,
    edited(e) {
      // A refusal about no field in particular (a name taken, a conflict) goes with any edit.
      if (error !== undefined && !(error instanceof ApiFailure && error.details.length > 0)) {
        setError(undefined);
        return;
      }
      const target = e.target as Element | null;
      const field = target?.closest?.("[data-field]")?.getAttribute("data-field");
      if (field) clear(field);
    },
  };
}

const ProblemsContext = createContext<FormProblems | undefined>(undefined);
/** Gives the `Field`s inside it their problems. */
export const ProblemsProvider = ProblemsContext.Provider;

/**
 * A form whose refusals show next to its fields (`Field`, `FormError`) and go when a field is
 * edited: the provider, the edit hook and the default submit kept in one place.
 */
export function ProblemForm(props: {
  label: string;
  problems: FormProblems;
  onSubmit: () => void;
  class?: string;
  noValidate?: boolean;
  children: ComponentChildren;
}) {
  return (
    <ProblemsProvider value={props.problems}>
      <form
        class={props.class ?? "inline-form"}
        aria-label={props.label}
        noValidate={props.noValidate}
        onInput={props.problems.edited}
        onSubmit={(e) => {
          e.preventDefault();
          props.onSubmit();
        }}
      >
        {props.children}
      </form>
    </ProblemsProvider>
  );
}

export function Field(props: { label: string; hint?: string; field?: string; children: ComponentChildren }) {
  const problems = useContext(ProblemsContext);
  const problem = props.field ? problems?.of(props.field) : undefined;
  return (
    // biome-ignore lint/a11y/noLabelWithoutControl: the control is the child passed in.
    <label class={problem ? "field invalid" : "field"} data-field={props.field}>
      <span class="field-label">{props.label}</span>
      {props.children}
      {problem ? (
        <span class="field-error" role="alert">
          {problem}
        </span>
      ) : (
        props.hint && <span class="hint">{props.hint}</span>
      )}
    </label>
  );
}

/**
 * A form's call: done → an ok notice; refused → the problems next to their `Field`s (not a
 * notice), forgotten as each field is edited. A refusal about no field in particular (a name
 * taken, an unknown token) goes next to `field`, the form's own field, when it has one.
 */
export async function submitForm<T>(
  label: string,
  problems: FormProblems,
  run: () => Promise<Reply<T>>,
  field?: string,
): Promise<Reply<T> | undefined> {
  problems.set(undefined);
  try {
    const r = await run();
    notify({ kind: "ok", text: `${label}: done.` });
    return r;
  } catch (e) {
    const own = field && e instanceof ApiFailure && e.details.length === 0;
    problems.set(
      own ? new ApiFailure(e.status, e.code, e.message, [{ field, problem: inWords(e.message) }]) : e,
    );
    return undefined;
  }
}

/**
 * The line under a form: what no `Field` of `fields` shows (problems of other fields, a refusal
 * that is not about a field), or a pointer to the fields marked above; nothing once all are edited.
 */
export function FormError(props: { problems: FormProblems; fields: readonly string[] }) {
  const { error } = props.problems;
  if (!error) return null;
  if (!(error instanceof ApiFailure) || error.details.length === 0) return <ErrorLine error={error} />;
  const placed = new Set(props.fields);
  const elsewhere = error.details.filter(
    (d) => !placed.has(topField(d.field)) && props.problems.of(topField(d.field)) !== undefined,
  );
  const marked = props.fields.filter((f) => props.problems.of(f) !== undefined).length;
  // A form of one field has its problem right there: no pointer to it.
  if (elsewhere.length === 0 && (marked === 0 || props.fields.length === 1)) return null;
  return (
    <p class="error" role="alert">
      {elsewhere.length > 0
        ? elsewhere.map((d) => `${fieldWords(d.field)}: ${d.problem}`).join("; ")
        : `Correct the field${marked === 1 ? "" : "s"} marked above.`}
    </p>
  );
}

export function Select(props: {
  value: string;
  onChange(v: string): void;
  options: (string | { value: string; label: string; disabled?: boolean })[];
  name?: string;
}) {
  return (
    <select
      name={props.name}
      value={props.value}
      onChange={(e) => props.onChange((e.target as HTMLSelectElement).value)}
    >
      {props.options.map((o) => {
        const opt = typeof o === "string" ? { value: o, label: o } : o;
        return (
          <option key={opt.value} value={opt.value} disabled={opt.disabled}>
            {opt.label}
          </option>
        );
      })}
    </select>
  );
}

export const inputValue = (e: { currentTarget: EventTarget | null; target: EventTarget | null }) =>
  (e.target as HTMLInputElement).value;

export function ErrorLine({ error }: { error?: unknown }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {errorText(error)}
    </p>
  );
}

export function Loading() {
  return <p class="loading">Loading…</p>;
}

/** A short name for a resource URI: the last segment, shortened when it is a uuid. */
export function short(uri: string | null | undefined): string {
  if (!uri) return "";
  const id = uriTail(uri);
  return /^[0-9a-f-]{36}$/.test(id) ? id.slice(0, 8) : id;
}
export const uriTail = (uri: string) => uri.split("/").filter(Boolean).at(-1) ?? "";

/** The route whose heading last took the focus: a page takes it once, when it is navigated to. */
let focusedRoute: string | undefined;

export function Page(props: { title: string; actions?: ComponentChildren; children: ComponentChildren }) {
  const heading = useRef<HTMLHeadingElement>(null);
  // Every page has its own title, and after a navigation the focus moves to its heading (where a
  // screen reader or the keyboard goes on from), not to <body>.
  useEffect(() => {
    document.title = `${props.title} · Berth`;
  }, [props.title]);
  useEffect(() => {
    const here = location.hash || "#/";
    if (focusedRoute === here) return;
    const first = focusedRoute === undefined;
    focusedRoute = here;
    if (!first || document.activeElement === document.body) heading.current?.focus({ preventScroll: first });
  }, []);
  return (
    <section class="page">
      <header class="page-head">
        <h1 tabIndex={-1} ref={heading}>
          {props.title}
        </h1>
        <div class="page-actions">{props.actions}</div>
      </header>
      {props.children}
    </section>
  );
}

export function Facts(props: { items: [string, ComponentChildren][] }) {
  return (
    <dl class="facts">
      {props.items.map(([k, v]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd>{v === "" || v === null || v === undefined ? "—" : v}</dd>
        </div>
      ))}
    </dl>
  );
}

/**
 * The operations services, containers and stacks share: start, stop, redeploy (with or without
 * reusing volumes) and terminate, each enabled exactly where the state table allows it.
 */
export function LifecycleOps(props: {
  url: string;
  state: string;
  what: string;
  table: Record<string, string[]>;
  terminateWarning: string;
  children?: ComponentChildren;
  /** Shown instead of the plain state badge (a crashed container's exit code…). */
  badge?: ComponentChildren;
}) {
  const [reuse, setReuse] = useState(true);
  const g = (op: string) => gate(props.table, op, props.state, props.what);
  return (
    <div class="ops">
      {props.badge ?? <StateBadge state={props.state} />}
      <Op label="Start" allowed={g("start")} run={() => call("POST", `${props.url}start/`)} />
      <Op label="Stop" allowed={g("stop")} run={() => call("POST", `${props.url}stop/`)} />
      <span class="op-group">
        <label>
          Reuse volumes{" "}
          <input
            type="checkbox"
            checked={reuse}
            onChange={(e) => setReuse((e.target as HTMLInputElement).checked)}
          />
        </label>
        <Op
          label="Redeploy"
          allowed={g("redeploy")}
          run={() => call("POST", `${props.url}redeploy/?reuse_volumes=${reuse}`)}
        />
      </span>
      {props.children}
      <Op
        label="Terminate"
        danger
        allowed={g("terminate")}
        confirm={`Terminate ${props.what}? ${props.terminateWarning}`}
        run={() => call("DELETE", props.url)}
      />
    </div>
  );
}
