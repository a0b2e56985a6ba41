// Triggers of a service: secret call URLs that redeploy or scale it up. The URL is shown once,
// right after creation, with a copy button; the list shows only names.
import { useState } from "preact/hooks";
import type { Trigger as TriggerView } from "../../../src/contract/trigger.ts";
import { call, query } from "../api.ts";
import { type Resource, useList } from "../live.ts";
import { Table } from "../table.tsx";
import {
  ErrorLine,
  Field,
  FormError,
  inputValue,
  Op,
  ProblemsProvider,
  Select,
  submitForm,
  useFormProblems,
} from "../ui.tsx";

type Trigger = TriggerView & Resource;

export function Triggers({ serviceUrl }: { serviceUrl: string }) {
  const list = useList<Trigger>(query(`${serviceUrl}trigger/`, { limit: 100 }), []);
  const [name, setName] = useState("");
  const [operation, setOperation] = useState("REDEPLOY");
  const [created, setCreated] = useState<Trigger | undefined>(undefined);
  const [copied, setCopied] = useState(false);
  const problems = useFormProblems();
  const create = async (e: Event) => {
    e.preventDefault();
    const r = await submitForm(
      "Create trigger",
      problems,
      () => call<Trigger>("POST", `${serviceUrl}trigger/`, { name, operation }),
      "name",
    );
    if (r) {
      setCreated(r.data as Trigger);
      setCopied(false);
      setName("");
      list.reload();
    }
  };
  return (
    <section class="triggers">
      <h2>Triggers</h2>
      {created && (
        <div class="secret-once" role="status">
          <p>
            Trigger <strong>{created.name}</strong> calls this URL with POST. Copy it now: the dashboard does
            not show it again.
          </p>
          <code class="secret">{created.url}</code>{" "}
          <button
            type="button"
            onClick={() =>
              void navigator.clipboard?.writeText(created.url).then(
                () => setCopied(true),
                () => setCopied(false),
              )
            }
          >
            {copied ? "Copied" : "Copy URL"}
          </button>{" "}
          <button type="button" class="link" onClick={() => setCreated(undefined)}>
            Done
          </button>
        </div>
      )}
      <ErrorLine error={list.error} />
      {list.data && (
        <Table<Trigger>
          label="Triggers"
          rows={list.data.objects}
          empty="No triggers."
          columns={[
            { label: "Name", render: (t) => t.name },
            { label: "Operation", render: (t) => t.operation },
            {
              label: "",
              render: (t) => (
                <Op
                  label="Delete"
                  danger
                  confirm={`Delete trigger ${t.name}? Its URL stops working.`}
                  run={() => call("DELETE", t.resource_uri)}
                  done={() => list.reload()}
                />
              ),
            },
          ]}
        />
      )}
      <ProblemsProvider value={problems}>
        <form
          class="inline-form"
          aria-label="New trigger"
          onInput={problems.edited}
          onChange={problems.edited}
          onSubmit={(e) => void create(e)}
        >
          <Field label="Trigger name" field="name">
            <input value={name} onInput={(e) => setName(inputValue(e))} />
          </Field>
          <Field label="Operation" field="operation">
            <Select value={operation} onChange={setOperation} options={["REDEPLOY", "SCALEUP"]} />
          </Field>
          <button type="submit">Create trigger</button>
          <FormError problems={problems} fields={["name", "operation"]} />
        </form>
      </ProblemsProvider>
    </section>
  );
}
