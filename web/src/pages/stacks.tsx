// Stacks: the list, create and update from a stack file (YAML or JSON) in an editor, export,
// start, stop, redeploy and terminate, with the services turning state live.

import { useState } from "preact/hooks";
import type { Stack as StackView } from "../../../src/contract/stack.ts";
import { STACK_OPERATIONS, STACK_STATES } from "../../../src/domain/stack.ts";
import { call, get, nsPath, query } from "../api.ts";
import { BulkBar, useSelection } from "../bulk.tsx";
import { type Resource, useList, useObject } from "../live.ts";
import { ObjectLink } from "../names.tsx";
import { navigate } from "../router.ts";
import { PagedTable, SearchBox, StateFilter, Table, useListControls } from "../table.tsx";
import { HideTerminated, stateNot } from "../terminated.tsx";
import { When } from "../time.tsx";
import {
  ErrorLine,
  Facts,
  Field,
  gate,
  inputValue,
  LifecycleOps,
  Loading,
  notify,
  Page,
  StateBadge,
} from "../ui.tsx";
import { ActionsOf } from "./actions.tsx";
import type { Service } from "./service-model.ts";
import { Topology } from "./topology.tsx";

type Stack = StackView & Resource;

const PAGE = 50;

const EXAMPLE = `# A stack file: one entry per service (YAML or JSON)
web:
  image: busybox:local
  command: httpd -f -p 80
  ports:
    - "80"
  links:
    - db:database
db:
  image: busybox:local
  command: httpd -f -p 5432
  expose:
    - "5432"
`;

/** The YAML parser, loaded when a stack file is read or written (it is not needed elsewhere). */
const yaml = () => import("yaml");

/** A stack file (map of service name to definition, or a list of services) → `services` items. */
export async function servicesOfStackFile(text: string): Promise<Record<string, unknown>[]> {
  const parsed: unknown = (await yaml()).parse(text);
  if (Array.isArray(parsed)) return parsed as Record<string, unknown>[];
  if (!parsed || typeof parsed !== "object")
    throw new Error("The stack file must map service names to their definitions.");
  return Object.entries(parsed as Record<string, unknown>).map(([name, def]) =>
    def && typeof def === "object" && !Array.isArray(def)
      ? { name, ...(def as Record<string, unknown>) }
      : { name, [name]: def },
  );
}

export function StackList() {
  const [state, setState] = useState("");
  const lc = useListControls();
  const selection = useSelection();
  const list = useList<Stack>(
    query(nsPath("app", "stack"), { limit: PAGE, state, state__not: stateNot(state), ...lc.params }),
    ["stack"],
  );
  return (
    <Page
      title="Stacks"
      actions={
        <a class="button primary" href="#/stacks/new">
          Create stack
        </a>
      }
    >
      <div class="filters">
        <SearchBox value={lc.search} onSearch={lc.setSearch} placeholder="shop" />
        <StateFilter
          value={state}
          states={STACK_STATES}
          onChange={(v) => {
            setState(v);
            lc.setOffset(0);
          }}
        />
        <HideTerminated onChange={() => lc.setOffset(0)} />
      </div>
      <BulkBar
        selection={selection}
        stateOf={(u) => list.data?.objects.find((o) => o.resource_uri === u)?.state}
        table={STACK_OPERATIONS}
        what="stacks"
      />
      <PagedTable<Stack>
        selection={selection}
        list={list}
        offset={lc.offset}
        limit={PAGE}
        go={lc.setOffset}
        order={lc.order}
        label="Stacks"
        empty="No stacks yet: create one from a stack file."
        columns={[
          {
            label: "Name",
            sort: "name",
            render: (s) => <a href={`#/stacks/${s.uuid}`}>{s.nickname || s.name}</a>,
          },
          { label: "State", sort: "state", render: (s) => <StateBadge state={s.state} /> },
          { label: "Services", render: (s) => s.services.length },
          { label: "Deployed", render: (s) => <When at={s.deployed_datetime} /> },
        ]}
      />
    </Page>
  );
}

function StackFileEditor(props: {
  initial: string;
  withName: boolean;
  submitLabel: string;
  submit(name: string, services: Record<string, unknown>[]): Promise<void>;
}) {
  const [name, setName] = useState("");
  const [text, setText] = useState(props.initial);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const save = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    setBusy(true);
    try {
      await props.submit(name.trim(), await servicesOfStackFile(text));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    // A refusal goes with the next edit of the form.
    <form class="form" onSubmit={(e) => void save(e)} onInput={() => setError(undefined)}>
      {props.withName && (
        <Field label="Stack name">
          <input name="stack-name" required value={name} onInput={(e) => setName(inputValue(e))} />
        </Field>
      )}
      <Field label="Stack file (YAML or JSON)">
        <textarea
          name="stackfile"
          class="code"
          rows={18}
          spellcheck={false}
          value={text}
          onInput={(e) => setText(inputValue(e))}
          onKeyDown={(e) => {
            // Tab indents inside the editor; Escape then Tab leaves it (keyboard users are not trapped).
            if (e.key === "Tab" && !e.shiftKey && !(e.target as HTMLTextAreaElement).dataset.escaped) {
              e.preventDefault();
              const t = e.target as HTMLTextAreaElement;
              const at = t.selectionStart;
              setText(`${text.slice(0, at)}  ${text.slice(t.selectionEnd)}`);
              requestAnimationFrame(() => t.setSelectionRange(at + 2, at + 2));
            }
            if (e.key === "Escape") (e.target as HTMLTextAreaElement).dataset.escaped = "1";
          }}
          onBlur={(e) => delete (e.target as HTMLTextAreaElement).dataset.escaped}
        />
      </Field>
      <ErrorLine error={error} />
      <div class="form-actions">
        <button type="submit" class="primary" disabled={busy}>
          {props.submitLabel}
        </button>
      </div>
    </form>
  );
}

export function StackCreate() {
  return (
    <Page title="Create a stack">
      <p class="hint">
        Paste a stack file. Services may link to each other by name. The stack is created without starting it.
      </p>
      <StackFileEditor
        initial={EXAMPLE}
        withName
        submitLabel="Create stack"
        submit={async (name, services) => {
          const r = await call<Stack>("POST", nsPath("app", "stack"), { name, services });
          notify({ kind: "ok", text: `Stack ${r.data.name} created.`, actionUri: r.actionUri });
          navigate(`/stacks/${r.data.uuid}`);
        }}
      />
    </Page>
  );
}

export function StackDetail({ uuid }: { uuid: string }) {
  const url = `${nsPath("app", "stack")}${uuid}/`;
  const { data: st, error, reload } = useObject<Stack>(url);
  const [exported, setExported] = useState<string | undefined>(undefined);
  const [editing, setEditing] = useState<string | undefined>(undefined);
  if (error) return <ErrorLine error={error} />;
  if (!st) return <Loading />;
  const g = (op: string) => gate(STACK_OPERATIONS, op, st.state, `stack ${st.name}`);
  const loadExport = async () => (await yaml()).stringify(await get<unknown>(`${url}export/`));
  return (
    <Page title={`Stack ${st.nickname || st.name}`}>
      <LifecycleOps
        url={url}
        state={st.state}
        what={`stack ${st.name}`}
        table={STACK_OPERATIONS}
        terminateWarning="All its services and their containers are terminated."
      >
        <button
          type="button"
          onClick={() =>
            void loadExport().then(setExported, (e: unknown) => notify({ kind: "error", text: String(e) }))
          }
        >
          Export
        </button>
        <span title={g("update").reason || undefined}>
          <button
            type="button"
            disabled={!g("update").allowed}
            onClick={() =>
              void loadExport().then(setEditing, (e: unknown) => notify({ kind: "error", text: String(e) }))
            }
          >
            Edit stack file
          </button>
        </span>
      </LifecycleOps>
      <Facts
        items={[
          ["Synchronized", st.synchronized ? "yes" : "no"],
          ["Deployed", <When key="d" at={st.deployed_datetime} />],
        ]}
      />
      {exported !== undefined && (
        <section>
          <h2>Stack file</h2>
          {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard. */}
          <pre class="code" tabIndex={0}>
            {exported}
          </pre>
          <button type="button" onClick={() => setExported(undefined)}>
            Close
          </button>
        </section>
      )}
      {editing !== undefined && (
        <section>
          <h2>Update the stack</h2>
          <StackFileEditor
            initial={editing}
            withName={false}
            submitLabel="Update stack"
            submit={async (_name, services) => {
              const r = await call("PATCH", url, { services });
              notify({ kind: "ok", text: "Stack updated.", actionUri: r.actionUri });
              setEditing(undefined);
              reload();
            }}
          />
        </section>
      )}
      <ActionsOf objectUri={st.resource_uri} />
      <h2>Services</h2>
      <StackServices stackUri={st.resource_uri} />
    </Page>
  );
}

function StackServices({ stackUri }: { stackUri: string }) {
  const list = useList<Service>(query(nsPath("app", "service"), { stack: stackUri, limit: 200 }), [
    "service",
  ]);
  if (!list.data) return <Loading />;
  return (
    <>
      <Topology services={list.data.objects} />
      <Table<Service>
        label="Services of the stack"
        rows={list.data.objects}
        empty="This stack has no services."
        columns={[
          { label: "Name", render: (s) => <a href={`#/services/${s.uuid}`}>{s.name}</a> },
          { label: "State", render: (s) => <StateBadge state={s.state} /> },
          { label: "Image", render: (s) => s.image_name },
          {
            label: "Containers",
            render: (s) => `${s.running_num_containers} running / ${s.target_num_containers}`,
          },
          {
            label: "Links",
            render: (s) =>
              s.linked_to_service.map((l) => (
                <span key={l.name}>
                  {l.name} → <ObjectLink uri={l.to_service} />{" "}
                </span>
              )),
          },
        ]}
      />
    </>
  );
}
