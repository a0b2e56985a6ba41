// Alerts (issue 32): the namespace's rules with what fires now, a form to create one (its kind,
// thresholds and one channel: a webhook, a Slack-compatible webhook or an address), and one rule
// with its incidents and delivery log.
import { useState } from "preact/hooks";
import type { AlertKind, AlertView } from "../../../src/contract/alert.ts";
import { call, nsPath, query } from "../api.ts";
import { type Resource, useList, useObject } from "../live.ts";
import { Table } from "../table.tsx";
import {
  ErrorLine,
  Field,
  FormError,
  inputValue,
  Loading,
  Op,
  Page,
  ProblemsProvider,
  Select,
  submitForm,
  useFormProblems,
} from "../ui.tsx";

type Alert = AlertView & Resource;
interface Row extends Resource {
  uuid: string;
}
interface Incident extends Row {
  subject: string;
  summary: string;
  state: string;
  started: string | null;
  resolved: string | null;
}
interface Delivery extends Row {
  event: string;
  target: string;
  state: string;
  attempts: number;
  last_error: string;
  created: string | null;
}

// Listed here rather than imported: the contract's module brings TypeBox into the first load.
const ALERT_KINDS = [
  "container_exited",
  "crash_looping",
  "unhealthy",
  "memory_high",
  "node_unreachable",
  "action_failed",
  "certificate_expiring",
] as const satisfies readonly AlertKind[];

const PARAMS: Record<string, [key: string, label: string][]> = {
  memory_high: [
    ["threshold_percent", "Percent of the memory limit"],
    ["for_minutes", "For minutes"],
  ],
  crash_looping: [
    ["restarts", "Restarts"],
    ["window_minutes", "Within minutes"],
  ],
  certificate_expiring: [["days", "Days before expiry"]],
};

export function AlertList() {
  const base = nsPath("app", "alert");
  const list = useList<Alert>(query(base, { limit: 100 }), []);
  const [name, setName] = useState("");
  const [kind, setKind] = useState<string>("container_exited");
  const [channel, setChannel] = useState("webhook");
  const [target, setTarget] = useState("");
  const [params, setParams] = useState<Record<string, string>>({});
  const problems = useFormProblems();
  const create = async (e: Event) => {
    e.preventDefault();
    const numbers = Object.fromEntries(
      Object.entries(params)
        .filter(([k, v]) => v !== "" && (PARAMS[kind] ?? []).some(([p]) => p === k))
        .map(([k, v]) => [k, Number(v)]),
    );
    const ch =
      channel === "email"
        ? { type: "email", to: target }
        : { type: "webhook", url: target, format: channel === "slack" ? "slack" : "json" };
    // A refusal shows at its field (a webhook Berth does not contact: at the URL), once.
    const r = await submitForm(
      "Create alert",
      problems,
      () => call("POST", base, { name, kind, params: numbers, channels: [ch] }),
      "name",
    );
    if (r) {
      setName("");
      setTarget("");
      list.reload();
    }
  };
  return (
    <Page title="Alerts">
      <ErrorLine error={list.error} />
      {list.data ? (
        <Table<Alert>
          label="Alert rules"
          rows={list.data.objects}
          empty="No alert rules."
          columns={[
            { label: "Name", render: (a) => <a href={`#/alerts/${a.uuid}`}>{a.name}</a> },
            { label: "Kind", render: (a) => a.kind },
            { label: "Firing", render: (a) => (a.firing ? <strong>{a.firing}</strong> : "0") },
            {
              label: "Channels",
              render: (a) => a.channels.map((c: { target: string }) => c.target).join(", "),
            },
            {
              label: "",
              render: (a) => (
                <Op
                  label={a.enabled ? "Turn off" : "Turn on"}
                  run={() => call("PATCH", a.resource_uri, { enabled: !a.enabled })}
                  done={() => list.reload()}
                />
              ),
            },
          ]}
        />
      ) : (
        <Loading />
      )}
      <ProblemsProvider value={problems}>
        <form
          class="inline-form"
          aria-label="New alert rule"
          onInput={problems.edited}
          onChange={problems.edited}
          onSubmit={(e) => void create(e)}
        >
          <Field label="Name" field="name">
            <input value={name} required onInput={(e) => setName(inputValue(e))} />
          </Field>
          <Field label="When" field="kind">
            <Select value={kind} onChange={setKind} options={[...ALERT_KINDS]} />
          </Field>
          {(PARAMS[kind] ?? []).map(([key, label]) => (
            <Field key={key} label={label} field="params">
              <input
                type="number"
                min={1}
                value={params[key] ?? ""}
                onInput={(e) => setParams({ ...params, [key]: inputValue(e) })}
              />
            </Field>
          ))}
          <Field label="Send to">
            <Select
              value={channel}
              onChange={setChannel}
              options={[
                { value: "webhook", label: "Webhook (JSON)" },
                { value: "slack", label: "Slack-compatible webhook" },
                { value: "email", label: "Email" },
              ]}
            />
          </Field>
          <Field label={channel === "email" ? "Address" : "URL"} field="channels">
            <input value={target} required onInput={(e) => setTarget(inputValue(e))} />
          </Field>
          <button type="submit">Create alert</button>
          <FormError problems={problems} fields={["name", "kind", "params", "channels"]} />
        </form>
      </ProblemsProvider>
    </Page>
  );
}

export function AlertDetail({ uuid }: { uuid: string }) {
  const url = `${nsPath("app", "alert")}${uuid}/`;
  const { data: a, error } = useObject<Alert>(url);
  const incidents = useList<Incident>(query(`${url}incidents/`, { limit: 50 }), []);
  const deliveries = useList<Delivery>(query(`${url}deliveries/`, { limit: 50 }), []);
  if (error) return <ErrorLine error={error} />;
  if (!a) return <Loading />;
  return (
    <Page title={`Alert ${a.name}`}>
      <div class="ops">
        <Op
          label="Delete"
          danger
          confirm={`Delete alert ${a.name} with its incidents and delivery log?`}
          run={() => call("DELETE", url)}
          done={() => {
            location.hash = "#/alerts";
          }}
        />
      </div>
      <h2>Incidents</h2>
      <Table<Incident>
        label="Incidents"
        rows={incidents.data?.objects ?? []}
        empty="Its condition has not held yet."
        columns={[
          { label: "State", render: (i) => i.state },
          { label: "Summary", render: (i) => i.summary },
          { label: "Started", render: (i) => i.started ?? "" },
          { label: "Resolved", render: (i) => i.resolved ?? "" },
        ]}
      />
      <h2>Deliveries</h2>
      <Table<Delivery>
        label="Deliveries"
        rows={deliveries.data?.objects ?? []}
        empty="Nothing sent yet."
        columns={[
          { label: "Event", render: (d) => d.event },
          { label: "To", render: (d) => d.target },
          { label: "State", render: (d) => d.state },
          { label: "Attempts", render: (d) => d.attempts },
          { label: "Error", render: (d) => d.last_error },
        ]}
      />
    </Page>
  );
}
