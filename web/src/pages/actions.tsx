// The audit log: every call as an action, with the spec's filters, each action's live log,
// cancel and retry.

import { useEffect, useRef, useState } from "preact/hooks";
import type { Action as ActionView } from "../../../src/contract/action.ts";
import { ACTION_STATES, actionEnded } from "../../../src/domain/states.ts";
import { call, nsPath, query, uuidOf } from "../api.ts";
import { type Resource, useList, useObject } from "../live.ts";
import { LogView } from "../logs.tsx";
import { findObjects, type Match, ObjectLink } from "../names.tsx";
import { navigate } from "../router.ts";
import { PagedTable, Table } from "../table.tsx";
import { When } from "../time.tsx";
import { ErrorLine, Facts, inputValue, Loading, Op, Page, Select, StateBadge } from "../ui.tsx";
import { Outcome, useRetry } from "./action-outcome.tsx";

/** The action answer of the API (src/contract/action.ts), as a live resource. */
export type Action = ActionView & Resource;

const PAGE = 50;

/** A datetime-local value (the browser's time zone) as ISO 8601 UTC. */
const iso = (local: string) => (local ? new Date(local).toISOString() : undefined);

/** Picks the object whose actions to list by its name (not its URI): matches as one types. */
function ObjectPicker(props: { onPick(uri: string): void }) {
  const [text, setText] = useState("");
  const [matches, setMatches] = useState<Match[]>([]);
  const [chosen, setChosen] = useState("");
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  useEffect(() => () => clearTimeout(timer.current), []);
  const choose = (uri: string) => {
    setChosen(uri);
    props.onPick(uri);
  };
  return (
    <span class="object-picker">
      <label>
        Object{" "}
        <input
          type="search"
          name="object"
          value={text}
          placeholder="name of a service, container…"
          onInput={(e) => {
            const v = (e.target as HTMLInputElement).value;
            setText(v);
            clearTimeout(timer.current);
            if (!v.trim()) {
              setMatches([]);
              choose("");
              return;
            }
            timer.current = setTimeout(() => {
              void findObjects(v.trim()).then((m) => {
                setMatches(m);
                choose(m[0]?.uri ?? "");
              });
            }, 150);
          }}
        />
      </label>
      {text.trim() && (
        <label>
          Matching{" "}
          <Select
            name="object_match"
            value={chosen}
            onChange={choose}
            options={
              matches.length
                ? matches.map((m) => ({ value: m.uri, label: `${m.kind} ${m.name}` }))
                : [{ value: "", label: "nothing matches", disabled: true }]
            }
          />
        </label>
      )}
    </span>
  );
}

export function ActionList() {
  const [offset, setOffset] = useState(0);
  const [state, setState] = useState("");
  const [startGte, setStartGte] = useState("");
  const [startLte, setStartLte] = useState("");
  const [endGte, setEndGte] = useState("");
  const [endLte, setEndLte] = useState("");
  const [object, setObject] = useState("");
  const [related, setRelated] = useState(false);
  const url = query(nsPath("audit", "action"), {
    limit: PAGE,
    offset,
    order_by: "-start_date",
    state,
    start_date__gte: iso(startGte),
    start_date__lte: iso(startLte),
    end_date__gte: iso(endGte),
    end_date__lte: iso(endLte),
    object: object.trim() || undefined,
    include_related: object.trim() ? related : undefined,
  });
  const list = useList<Action>(url, ["action"]);
  const reset = () => setOffset(0);
  return (
    <Page title="Actions">
      <form class="filters" onSubmit={(e) => e.preventDefault()}>
        <label>
          State{" "}
          <Select
            value={state}
            onChange={(v) => {
              setState(v);
              reset();
            }}
            options={[{ value: "", label: "any" }, ...ACTION_STATES]}
          />
        </label>
        <label>
          Started after{" "}
          <input
            type="datetime-local"
            value={startGte}
            onChange={(e) => {
              setStartGte(inputValue(e));
              reset();
            }}
          />
        </label>
        <label>
          Started before{" "}
          <input
            type="datetime-local"
            value={startLte}
            onChange={(e) => {
              setStartLte(inputValue(e));
              reset();
            }}
          />
        </label>
        <label>
          Ended after{" "}
          <input
            type="datetime-local"
            value={endGte}
            onChange={(e) => {
              setEndGte(inputValue(e));
              reset();
            }}
          />
        </label>
        <label>
          Ended before{" "}
          <input
            type="datetime-local"
            value={endLte}
            onChange={(e) => {
              setEndLte(inputValue(e));
              reset();
            }}
          />
        </label>
        <ObjectPicker
          onPick={(uri) => {
            setObject(uri);
            reset();
          }}
        />
        <label>
          <input
            type="checkbox"
            checked={related}
            onChange={(e) => {
              setRelated((e.target as HTMLInputElement).checked);
              reset();
            }}
          />{" "}
          with related objects
        </label>
      </form>
      <PagedTable<Action>
        list={list}
        offset={offset}
        limit={PAGE}
        go={setOffset}
        label="Actions"
        empty="No actions match."
        columns={[
          { label: "Action", render: (a) => <a href={`#/actions/${a.uuid}`}>{a.action}</a> },
          { label: "State", render: (a) => <StateBadge state={a.state} /> },
          {
            label: "Object",
            render: (a) => <ObjectLink uri={a.object} />,
          },
          { label: "User", render: (a) => a.user },
          { label: "Started", render: (a) => <When at={a.start_date} /> },
        ]}
      />
    </Page>
  );
}

export function ActionDetail({ uuid }: { uuid: string }) {
  // Actions have one URI, without a namespace (CONTRACT §4): events name them so.
  const url = `/api/audit/v1/action/${uuid}/`;
  const { data: fetched, error } = useObject<Action>(url);
  // The cancel's answer is shown at once (Canceling or Canceled), before any event arrives.
  const [canceled, setCanceled] = useState<Action | undefined>(undefined);
  const a =
    fetched && canceled && !actionEnded(fetched.state) && fetched.state !== "Canceling" ? canceled : fetched;
  const retry = useRetry(a);
  if (error) return <ErrorLine error={error} />;
  if (!a) return <Loading />;
  const requested = canceled !== undefined || a.state === "Canceling";
  return (
    <Page title={`Action ${a.action}`}>
      <div class="ops">
        <StateBadge state={a.state} />
        <Op
          label="Cancel"
          allowed={{
            allowed: a.can_be_canceled,
            reason: `action is ${a.state}; cancel is allowed in Pending, In progress`,
          }}
          run={() => call("POST", `${url}cancel/`)}
          done={(r) => setCanceled(r.data as Action)}
        />
        <Op
          label="Retry"
          allowed={retry}
          run={() => call("POST", `${url}retry/`)}
          done={(r) => {
            const next =
              (r.data as { uuid?: string } | null)?.uuid ?? (r.actionUri ? uuidOf(r.actionUri) : undefined);
            if (next) navigate(`/actions/${next}`);
          }}
        />
      </div>
      <Outcome state={a.state} requested={requested} />
      <Facts
        items={[
          ["Object", <ObjectLink key="o" uri={a.object} />],
          ["Call", `${a.method} ${a.path}`],
          ["User", a.user],
          ["User agent", a.user_agent],
          ["From", `${a.ip}${a.location ? ` (${a.location})` : ""}`],
          ["Started", <When key="s" at={a.start_date} />],
          ["Ended", <When key="e" at={a.end_date} />],
        ]}
      />
      <LogView key={url} streamPath={`${url}logs/`} title="Action log" />
    </Page>
  );
}

/** The latest actions of an object and its related objects: long operations show here with their state. */
export function ActionsOf({ objectUri }: { objectUri: string }) {
  const list = useList<Action>(
    query(nsPath("audit", "action"), {
      object: objectUri,
      include_related: true,
      order_by: "-start_date",
      limit: 5,
    }),
    ["action"],
  );
  if (!list.data) return null;
  return (
    <section>
      <h2>Recent actions</h2>
      <Table<Action>
        label="Recent actions"
        rows={list.data.objects}
        empty="None yet."
        columns={[
          { label: "Action", render: (a) => <a href={`#/actions/${a.uuid}`}>{a.action}</a> },
          { label: "State", render: (a) => <StateBadge state={a.state} /> },
          { label: "Object", render: (a) => <ObjectLink uri={a.object} /> },
          { label: "Started", render: (a) => <When at={a.start_date} /> },
        ]}
      />
    </section>
  );
}
