// The service form's health check and rollout inputs (issue 29): what the form holds of a
// service's `health_check` and `rollout`, and their fieldsets. Only the inputs the chosen kind or
// order uses are shown; empty inputs take the server's defaults. Problems the server names
// (`health_check.port`, `rollout.max_surge`) show under the kind or order.

import { Field, inputValue, Select } from "../ui.tsx";
import { type FormHealth, type FormRollout, NO_HEALTH, NO_ROLLOUT } from "./service-body.ts";
import type { Service } from "./service-model.ts";

const text = (v: number | string | null | undefined) => (v === null || v === undefined ? "" : String(v));

/** The inputs' values for a service's check (none: the image's own). */
export function healthOf(s: Service | undefined): FormHealth {
  const h = s?.health_check;
  if (!h) return NO_HEALTH;
  return {
    type: h.type,
    command: text(h.command),
    port: text(h.port),
    path: text(h.path),
    status: text(h.status),
    interval: text(h.interval),
    timeout: text(h.timeout),
    retries: text(h.retries),
    startPeriod: text(h.start_period),
  };
}

/** The inputs' values for a service's strategy (none: every container at once). */
export function rolloutOf(s: Service | undefined): FormRollout {
  const r = s?.rollout;
  if (!r) return NO_ROLLOUT;
  return {
    order: r.order,
    maxUnavailable: text(r.max_unavailable),
    maxSurge: text(r.max_surge),
    delay: text(r.delay),
    failureAction: r.failure_action,
  };
}

const HEALTH_KINDS = [
  { value: "", label: "the image's HEALTHCHECK, if any" },
  { value: "http", label: "HTTP GET" },
  { value: "tcp", label: "TCP connect" },
  { value: "command", label: "command" },
  { value: "none", label: "none (turn the image's off)" },
];

export function HealthFields(props: { value: FormHealth; set(v: FormHealth): void }) {
  const h = props.value;
  const up = (patch: Partial<FormHealth>) => props.set({ ...h, ...patch });
  const num = (key: keyof FormHealth, label: string, hint: string) => (
    <Field label={label} hint={hint}>
      <input
        name={`health_${key}`}
        type="number"
        min={0}
        step="any"
        value={h[key]}
        onInput={(e) => up({ [key]: inputValue(e) })}
      />
    </Field>
  );
  const checks = h.type !== "" && h.type !== "none";
  return (
    <fieldset class="grid" data-field="health_check">
      <legend>Health check</legend>
      <Field
        field="health_check"
        label="Kind"
        hint="run by the engine inside each container; a start, redeploy or rollback waits until it passes"
      >
        <Select name="health_type" value={h.type} onChange={(v) => up({ type: v })} options={HEALTH_KINDS} />
      </Field>
      {h.type === "command" && (
        <Field label="Command" hint="run with sh; exit 0 is healthy">
          <input name="health_command" value={h.command} onInput={(e) => up({ command: inputValue(e) })} />
        </Field>
      )}
      {(h.type === "http" || h.type === "tcp") && num("port", "Port", "inside the container")}
      {h.type === "http" && (
        <>
          <Field label="Path" hint="default /">
            <input name="health_path" value={h.path} onInput={(e) => up({ path: inputValue(e) })} />
          </Field>
          {num("status", "Status", "that means healthy (default 200)")}
        </>
      )}
      {checks && num("interval", "Interval (s)", "between checks (default 5)")}
      {checks && num("timeout", "Timeout (s)", "for one check (default 3)")}
      {checks && num("retries", "Retries", "failures in a row that make it unhealthy (default 3)")}
      {checks && num("startPeriod", "Start period (s)", "failures that do not count yet (default 0)")}
    </fieldset>
  );
}

const ORDERS = [
  { value: "", label: "every container at once" },
  { value: "stop-first", label: "stop-first (batches)" },
  { value: "start-first", label: "start-first (new beside old)" },
];

export function RolloutFields(props: { value: FormRollout; set(v: FormRollout): void }) {
  const r = props.value;
  const up = (patch: Partial<FormRollout>) => props.set({ ...r, ...patch });
  return (
    <fieldset class="grid" data-field="rollout">
      <legend>Redeploy strategy</legend>
      <Field field="rollout" label="Order" hint="how a redeploy or rollback replaces the containers">
        <Select name="rollout_order" value={r.order} onChange={(v) => up({ order: v })} options={ORDERS} />
      </Field>
      {r.order === "stop-first" && (
        <Field label="Max unavailable" hint="containers replaced at once (default 1)">
          <input
            name="rollout_max_unavailable"
            type="number"
            min={1}
            value={r.maxUnavailable}
            onInput={(e) => up({ maxUnavailable: inputValue(e) })}
          />
        </Field>
      )}
      {r.order === "start-first" && (
        <Field label="Max surge" hint="new containers beside the old at once (default 1)">
          <input
            name="rollout_max_surge"
            type="number"
            min={1}
            value={r.maxSurge}
            onInput={(e) => up({ maxSurge: inputValue(e) })}
          />
        </Field>
      )}
      {r.order !== "" && (
        <>
          <Field label="Delay (s)" hint="between two batches (default 0)">
            <input
              name="rollout_delay"
              type="number"
              min={0}
              step="any"
              value={r.delay}
              onInput={(e) => up({ delay: inputValue(e) })}
            />
          </Field>
          <Field label="When a batch fails" hint="its containers do not start or stay unhealthy">
            <Select
              name="rollout_failure_action"
              value={r.failureAction}
              onChange={(v) => up({ failureAction: v })}
              options={[
                { value: "rollback", label: "roll back to the previous revision" },
                { value: "pause", label: "pause (the rest keep the old definition)" },
                { value: "continue", label: "continue" },
              ]}
            />
          </Field>
        </>
      )}
    </fieldset>
  );
}
