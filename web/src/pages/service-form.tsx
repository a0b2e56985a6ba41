// The service definition form, for create and edit: ports, environment, links, volumes,
// strategy, restart and destroy policies, roles, resources, stopping, tags, the health check and
// the redeploy strategy (service-deploy-fields.tsx). What it sends, and
// which fields of the contract it leaves out and why, is service-body.ts.
import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import { ApiFailure, type Reply } from "../api.ts";
import {
  errorText,
  Field,
  FormError,
  type FormProblems,
  inputValue,
  notify,
  ProblemsProvider,
  Select,
  useFormProblems,
} from "../ui.tsx";
import {
  type FormBinding,
  type FormEnv,
  type FormHealth,
  type FormLink,
  type FormPort,
  type FormRollout,
  formBody,
} from "./service-body.ts";
import { HealthFields, healthOf, RolloutFields, rolloutOf } from "./service-deploy-fields.tsx";
import { type Service, serviceChoices } from "./service-model.ts";

function Rows<T>(props: {
  legend: string;
  /** The API's name of the list (its problems show here, and go when the list is edited). */
  field: string;
  problems: FormProblems;
  rows: T[];
  set(rows: T[]): void;
  blank: T;
  render(row: T, update: (patch: Partial<T>) => void): ComponentChildren;
  disabled?: boolean;
}) {
  const problem = props.problems.of(props.field);
  const set = (rows: T[]) => {
    props.problems.clear(props.field);
    props.set(rows);
  };
  return (
    <fieldset class="rows" disabled={props.disabled} data-field={props.field}>
      <legend>{props.legend}</legend>
      {problem && (
        <p class="field-error" role="alert">
          {problem}
        </p>
      )}
      {props.rows.map((r, i) => (
        <div class="row" key={i}>
          {props.render(r, (patch) => set(props.rows.map((x, j) => (j === i ? { ...x, ...patch } : x))))}
          <button type="button" class="link" onClick={() => set(props.rows.filter((_, j) => j !== i))}>
            Remove
          </button>
        </div>
      ))}
      <button type="button" onClick={() => set([...props.rows, { ...props.blank }])}>
        Add
      </button>
    </fieldset>
  );
}

/** The API fields this form shows a `Field` or a list for (their problems show there). */
const PLACED = [
  "image",
  "name",
  "nickname",
  "target_num_containers",
  "deployment_strategy",
  "run_command",
  "entrypoint",
  "autorestart",
  "autodestroy",
  "memory",
  "cpu_shares",
  "net",
  "pid",
  "working_dir",
  "stop_signal",
  "stop_grace_period",
  "tags",
  "container_ports",
  "container_envvars",
  "linked_to_service",
  "bindings",
  "health_check",
  "rollout",
] as const;

export function ServiceForm(props: {
  initial?: Service;
  submit(body: Record<string, unknown>): Promise<Reply<Service>>;
  onSaved(uri: string): void;
}) {
  const i = props.initial;
  const editing = i !== undefined;
  const [image, setImage] = useState(i?.image_name ?? "");
  const [name, setName] = useState(i?.name ?? "");
  const [nickname, setNickname] = useState(i && i.nickname !== i.name ? i.nickname : "");
  const [target, setTarget] = useState(String(i?.target_num_containers ?? 1));
  const [runCommand, setRunCommand] = useState(i?.run_command ?? "");
  const [entrypoint, setEntrypoint] = useState(i?.entrypoint ?? "");
  const [strategy, setStrategy] = useState(i?.deployment_strategy ?? "EMPTIEST_NODE");
  const [autorestart, setAutorestart] = useState(i?.autorestart ?? "OFF");
  const [autodestroy, setAutodestroy] = useState(i?.autodestroy ?? "OFF");
  const [autoredeploy, setAutoredeploy] = useState(i?.autoredeploy ?? false);
  const [global, setGlobal] = useState(i?.roles.includes("global") ?? false);
  const [privileged, setPrivileged] = useState(i?.privileged ?? false);
  const [sequential, setSequential] = useState(i?.sequential_deployment ?? false);
  const [memory, setMemory] = useState(i?.memory ? String(i.memory) : "");
  const [cpuShares, setCpuShares] = useState(i?.cpu_shares ? String(i.cpu_shares) : "");
  const [net, setNet] = useState(i?.net ?? "bridge");
  const [pid, setPid] = useState(i?.pid ?? "none");
  const [workingDir, setWorkingDir] = useState(i?.working_dir ?? "");
  const [stopSignal, setStopSignal] = useState(i?.stop_signal ?? "");
  const [stopGracePeriod, setStopGracePeriod] = useState(
    i?.stop_grace_period == null ? "" : String(i.stop_grace_period),
  );
  const [tags, setTags] = useState((i?.tags ?? []).map((t) => t.name).join(", "));
  const [ports, setPorts] = useState<FormPort[]>(
    (i?.container_ports ?? []).map((p) => ({
      protocol: p.protocol,
      inner_port: String(p.inner_port),
      outer_port: p.outer_port ? String(p.outer_port) : "",
      published: p.published,
    })),
  );
  const [envs, setEnvs] = useState<FormEnv[]>(
    i?.container_envvars.map((e) => ({ key: e.key, value: e.value })) ?? [],
  );
  const [links, setLinks] = useState<FormLink[]>(
    i?.linked_to_service.map((l) => ({ to_service: l.to_service, name: l.name })) ?? [],
  );
  const [bindings, setBindings] = useState<FormBinding[]>(
    i?.bindings.map((b) => ({
      host_path: b.host_path ?? "",
      container_path: b.container_path ?? "",
      rewritable: b.rewritable,
      volumes_from: b.volumes_from ?? "",
    })) ?? [],
  );
  const [health, setHealth] = useState<FormHealth>(healthOf(i));
  const [rollout, setRollout] = useState<FormRollout>(rolloutOf(i));
  const [choices, setChoices] = useState<{ value: string; label: string }[]>([]);
  const problems = useFormProblems();
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    serviceChoices().then(setChoices, () => setChoices([]));
  }, []);

  const body = () =>
    formBody(
      {
        image,
        name,
        nickname,
        target,
        runCommand,
        entrypoint,
        strategy,
        autorestart,
        autodestroy,
        autoredeploy,
        global,
        privileged,
        sequential,
        memory,
        cpuShares,
        net,
        pid,
        workingDir,
        tags,
        stopSignal,
        stopGracePeriod,
        ports,
        envs,
        links,
        bindings,
        health,
        rollout,
      },
      editing,
    );

  const save = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    problems.set(undefined);
    try {
      const r = await props.submit(body());
      notify({ kind: "ok", text: editing ? "Service updated." : "Service created.", actionUri: r.actionUri });
      props.onSaved(r.data.resource_uri);
    } catch (err) {
      problems.set(err);
      if (!(err instanceof ApiFailure)) notify({ kind: "error", text: errorText(err) });
    } finally {
      setBusy(false);
    }
  };

  const others = choices.filter((c) => c.value !== i?.resource_uri);
  return (
    <form
      class="form"
      onSubmit={(e) => void save(e)}
      onInput={(e) => problems.edited(e)}
      onChange={(e) => problems.edited(e)}
    >
      <ProblemsProvider value={problems}>
        <div class="grid">
          <Field field="image" label="Image" hint="name[:tag], for example busybox:local">
            <input name="image" required value={image} onInput={(e) => setImage(inputValue(e))} />
          </Field>
          <Field
            field="name"
            label="Name"
            hint={editing ? "a service keeps its name" : "defaults to the image name"}
          >
            <input name="name" value={name} disabled={editing} onInput={(e) => setName(inputValue(e))} />
          </Field>
          <Field field="nickname" label="Nickname" hint="display name (default: the name)">
            <input name="nickname" value={nickname} onInput={(e) => setNickname(inputValue(e))} />
          </Field>
          <Field field="target_num_containers" label="Containers">
            <input
              name="target_num_containers"
              type="number"
              min={0}
              value={target}
              onInput={(e) => setTarget(inputValue(e))}
            />
          </Field>
          <Field field="deployment_strategy" label="Deployment strategy">
            <Select
              value={strategy}
              onChange={setStrategy}
              options={["EMPTIEST_NODE", "HIGH_AVAILABILITY", "EVERY_NODE"]}
            />
          </Field>
          <Field field="run_command" label="Run command">
            <input name="run_command" value={runCommand} onInput={(e) => setRunCommand(inputValue(e))} />
          </Field>
          <Field field="entrypoint" label="Entrypoint">
            <input name="entrypoint" value={entrypoint} onInput={(e) => setEntrypoint(inputValue(e))} />
          </Field>
          <Field field="autorestart" label="Autorestart">
            <Select value={autorestart} onChange={setAutorestart} options={["OFF", "ON_FAILURE", "ALWAYS"]} />
          </Field>
          <Field field="autodestroy" label="Autodestroy">
            <Select value={autodestroy} onChange={setAutodestroy} options={["OFF", "ON_SUCCESS", "ALWAYS"]} />
          </Field>
          <Field field="memory" label="Memory (MB)">
            <input type="number" min={4} value={memory} onInput={(e) => setMemory(inputValue(e))} />
          </Field>
          <Field field="cpu_shares" label="CPU shares">
            <input type="number" min={2} value={cpuShares} onInput={(e) => setCpuShares(inputValue(e))} />
          </Field>
          <Field field="net" label="Network">
            <Select value={net} onChange={setNet} options={["bridge", "host"]} />
          </Field>
          <Field field="pid" label="PID namespace">
            <Select value={pid} onChange={setPid} options={["none", "host"]} />
          </Field>
          <Field field="working_dir" label="Working directory">
            <input value={workingDir} placeholder="/" onInput={(e) => setWorkingDir(inputValue(e))} />
          </Field>
          <Field field="stop_signal" label="Stop signal" hint="default: the image's, or SIGTERM">
            <input
              name="stop_signal"
              value={stopSignal}
              placeholder="SIGTERM"
              onInput={(e) => setStopSignal(inputValue(e))}
            />
          </Field>
          <Field
            field="stop_grace_period"
            label="Stop grace period (s)"
            hint="seconds before the engine kills (default 10)"
          >
            <input
              name="stop_grace_period"
              type="number"
              min={0}
              max={3600}
              value={stopGracePeriod}
              onInput={(e) => setStopGracePeriod(inputValue(e))}
            />
          </Field>
          <Field
            field="tags"
            label="Node tags"
            hint="comma-separated; containers go only to nodes with all of them"
          >
            <input value={tags} onInput={(e) => setTags(inputValue(e))} />
          </Field>
        </div>
        <div class="checks">
          <label>
            <input
              type="checkbox"
              checked={autoredeploy}
              onChange={(e) => setAutoredeploy((e.target as HTMLInputElement).checked)}
            />{" "}
            Autoredeploy on image push
          </label>
          <label>
            <input
              type="checkbox"
              checked={global}
              onChange={(e) => setGlobal((e.target as HTMLInputElement).checked)}
            />{" "}
            Role global (API access from the containers)
          </label>
          <label>
            <input
              type="checkbox"
              checked={privileged}
              onChange={(e) => setPrivileged((e.target as HTMLInputElement).checked)}
            />{" "}
            Privileged
          </label>
          <label>
            <input
              type="checkbox"
              checked={sequential}
              onChange={(e) => setSequential((e.target as HTMLInputElement).checked)}
            />{" "}
            Sequential deployment
          </label>
        </div>
        <Rows<FormPort>
          legend="Ports"
          field="container_ports"
          problems={problems}
          rows={ports}
          set={setPorts}
          blank={{ protocol: "tcp", inner_port: "", outer_port: "", published: false }}
          render={(p, up) => (
            <>
              <input
                aria-label="Inner port"
                placeholder="inner port"
                type="number"
                value={p.inner_port}
                onInput={(e) => up({ inner_port: inputValue(e) })}
              />
              <Select value={p.protocol} onChange={(v) => up({ protocol: v })} options={["tcp", "udp"]} />
              <label>
                <input
                  type="checkbox"
                  checked={p.published}
                  onChange={(e) => up({ published: (e.target as HTMLInputElement).checked })}
                />{" "}
                published
              </label>
              <input
                aria-label="Outer port"
                placeholder="outer port (any)"
                type="number"
                value={p.outer_port}
                onInput={(e) => up({ outer_port: inputValue(e) })}
              />
            </>
          )}
        />
        <Rows<FormEnv>
          legend="Environment"
          field="container_envvars"
          problems={problems}
          rows={envs}
          set={setEnvs}
          blank={{ key: "", value: "" }}
          render={(v, up) => (
            <>
              <input
                aria-label="Variable"
                placeholder="KEY"
                value={v.key}
                onInput={(e) => up({ key: inputValue(e) })}
              />
              <input
                aria-label="Value"
                placeholder="value"
                value={v.value}
                onInput={(e) => up({ value: inputValue(e) })}
              />
            </>
          )}
        />
        <Rows<FormLink>
          legend="Links"
          field="linked_to_service"
          problems={problems}
          rows={links}
          set={setLinks}
          blank={{ to_service: "", name: "" }}
          render={(l, up) => (
            <>
              <Select
                value={l.to_service}
                onChange={(v) => up({ to_service: v })}
                options={[{ value: "", label: "service…" }, ...others]}
              />
              <input
                aria-label="Link name"
                placeholder="link name (default: its name)"
                value={l.name}
                onInput={(e) => up({ name: inputValue(e) })}
              />
            </>
          )}
        />
        <Rows<FormBinding>
          legend={editing ? "Volumes (set at creation)" : "Volumes"}
          field="bindings"
          problems={problems}
          rows={bindings}
          set={setBindings}
          disabled={editing}
          blank={{ host_path: "", container_path: "", rewritable: true, volumes_from: "" }}
          render={(b, up) => (
            <>
              <input
                aria-label="Container path"
                placeholder="container path"
                value={b.container_path}
                onInput={(e) => up({ container_path: inputValue(e) })}
              />
              <input
                aria-label="Host path"
                placeholder="host path (optional)"
                value={b.host_path}
                onInput={(e) => up({ host_path: inputValue(e) })}
              />
              <label>
                <input
                  type="checkbox"
                  checked={b.rewritable}
                  onChange={(e) => up({ rewritable: (e.target as HTMLInputElement).checked })}
                />{" "}
                writable
              </label>
              <Select
                value={b.volumes_from}
                onChange={(v) => up({ volumes_from: v })}
                options={[{ value: "", label: "or volumes from…" }, ...others]}
              />
            </>
          )}
        />
        <HealthFields value={health} set={setHealth} />
        <RolloutFields value={rollout} set={setRollout} />
        <FormError problems={problems} fields={PLACED} />
        <div class="form-actions">
          <button type="submit" class="primary" disabled={busy}>
            {editing ? "Save" : "Create"}
          </button>
          <a class="button" href={i ? `#/services/${i.uuid}` : "#/services"}>
            Cancel
          </a>
        </div>
      </ProblemsProvider>
    </form>
  );
}
