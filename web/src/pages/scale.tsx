// Scaling a service from its page: the number of containers, and a refusal in words next to that
// field (not a notice naming API fields), gone as soon as the number is edited.
import { useState } from "preact/hooks";
import { ApiFailure, call } from "../api.ts";
import { errorText, notify } from "../ui.tsx";

export function ScaleControl(props: {
  url: string;
  current: number;
  allowed: { allowed: boolean; reason: string };
}) {
  const [target, setTarget] = useState("");
  const [problem, setProblem] = useState<string | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  const value = target === "" ? String(props.current) : target;
  const scale = async () => {
    setBusy(true);
    setProblem(undefined);
    try {
      const n = Number(value);
      if (value.trim() === "" || !Number.isInteger(n)) throw new Error("must be a whole number");
      if (n !== props.current) await call("PATCH", props.url, { target_num_containers: n });
      const r = await call("POST", `${props.url}scale/`);
      notify({ kind: "ok", text: `Scaling to ${n} containers.`, actionUri: r.actionUri });
      setTarget("");
    } catch (e) {
      const own =
        e instanceof ApiFailure
          ? e.details.find((d) => d.field === "target_num_containers")?.problem
          : undefined;
      setProblem(own ?? errorText(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <span class={problem ? "op-group invalid" : "op-group"} data-field="target_num_containers">
      <label>
        Containers{" "}
        <input
          type="number"
          name="target_num_containers"
          min={0}
          class="narrow"
          value={value}
          aria-invalid={problem ? true : undefined}
          aria-describedby={problem ? "scale-problem" : undefined}
          onInput={(e) => {
            setTarget((e.target as HTMLInputElement).value);
            setProblem(undefined);
          }}
        />
      </label>
      <span class="op" title={props.allowed.allowed ? undefined : props.allowed.reason}>
        <button
          type="button"
          disabled={!props.allowed.allowed || busy}
          aria-description={props.allowed.allowed ? undefined : props.allowed.reason}
          onClick={() => void scale()}
        >
          Scale
        </button>
      </span>
      {problem && (
        <span id="scale-problem" class="field-error" role="alert">
          Containers {problem}
        </span>
      )}
    </span>
  );
}
