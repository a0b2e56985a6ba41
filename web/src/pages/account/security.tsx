// The account page's password, sign-out everywhere and API keys (a key is shown once).
import { useState } from "preact/hooks";
import type { ApiKey } from "../../../../src/contract/account.ts";
import { call, loadSession } from "../../api.ts";
import { When } from "../../time.tsx";
import {
  ErrorLine,
  Field,
  FormError,
  inputValue,
  notify,
  Op,
  ProblemForm,
  submitForm,
  useFormProblems,
} from "../../ui.tsx";
import { useLoad } from "./load.ts";

export function SecuritySection({ me }: { me: string }) {
  const empty = { old: "", fresh: "", again: "" };
  const [pw, setPw] = useState(empty);
  const [ended, setEnded] = useState<string | undefined>(undefined);
  const differ = pw.again !== "" && pw.again !== pw.fresh;
  const problems = useFormProblems();
  return (
    <section>
      <h2>Password and sessions</h2>
      <p class="hint">
        Changing the password signs out every other browser and ends every access token; API keys stay.
      </p>
      <ProblemForm
        label="Change password"
        problems={problems}
        onSubmit={() => {
          if (differ) return;
          problems.set(undefined);
          // A refusal shows next to its field (or under the form) and goes when that is edited.
          call<{ sessions_ended: number; access_tokens_ended: number }>(
            "POST",
            `/api/v1.1/users/${me}/password/`,
            { old_password: pw.old, new_password: pw.fresh },
          ).then((r) => {
            const d = r.data;
            notify({ kind: "ok", text: "Password changed." });
            setPw(empty);
            setEnded(
              `${d.sessions_ended} other session(s) and ${d.access_tokens_ended} access token(s) ended.`,
            );
          }, problems.set);
        }}
      >
        <Field label="Current password" field="old_password">
          <input
            type="password"
            autocomplete="current-password"
            required
            value={pw.old}
            onInput={(e) => setPw({ ...pw, old: inputValue(e) })}
          />
        </Field>
        <Field label="New password" field="new_password" hint="at least 8 characters">
          <input
            type="password"
            autocomplete="new-password"
            required
            minLength={8}
            value={pw.fresh}
            onInput={(e) => setPw({ ...pw, fresh: inputValue(e) })}
          />
        </Field>
        <Field label="New password again" hint={differ ? "the two new passwords differ" : undefined}>
          <input
            type="password"
            autocomplete="new-password"
            required
            value={pw.again}
            onInput={(e) => setPw({ ...pw, again: inputValue(e) })}
          />
        </Field>
        <button type="submit" disabled={differ}>
          Change password
        </button>
        <FormError problems={problems} fields={["old_password", "new_password"]} />
      </ProblemForm>
      {ended && (
        <p class="hint" role="status">
          {ended}
        </p>
      )}
      <Op
        label="Sign out everywhere"
        danger
        confirm="Sign out of every browser, this one included, and end every access token?"
        run={() => call("DELETE", `/api/v1.1/users/${me}/sessions/`)}
        done={() => void loadSession()}
      />
    </section>
  );
}

export function KeySection({ me }: { me: string }) {
  const keys = useLoad<{ objects?: ApiKey[] } | ApiKey[]>(`/api/v1.1/users/${me}/apikeys/`);
  const [label, setLabel] = useState("");
  const [fresh, setFresh] = useState<{ label: string; key: string } | undefined>(undefined);
  const problems = useFormProblems();
  const rows = Array.isArray(keys.data) ? keys.data : (keys.data?.objects ?? []);
  return (
    <section>
      <h2>API keys</h2>
      <p class="hint">For programs (the CLI, SDKs). A key is shown once, when it is created.</p>
      {fresh && (
        <div class="secret-once" role="status">
          <p>
            Key <strong>{fresh.label || "(no label)"}</strong>: copy it now, it is not shown again.
          </p>
          <code class="secret">{fresh.key}</code>{" "}
          <button type="button" onClick={() => void navigator.clipboard?.writeText(fresh.key)}>
            Copy
          </button>{" "}
          <button type="button" class="link" onClick={() => setFresh(undefined)}>
            Done
          </button>
        </div>
      )}
      <ErrorLine error={keys.error} />
      <ul class="plain">
        {rows.map((k) => (
          <li key={k.id} class="email-row">
            <span>{k.label || "(no label)"}</span>
            <span class="hint">
              created <When at={k.created} />
            </span>
            <Op
              label="Revoke"
              danger
              confirm={`Revoke key ${k.label}? Programs using it stop working.`}
              run={() => call("DELETE", `/api/v1.1/users/${me}/apikeys/${k.id}/`)}
              done={() => keys.reload()}
            />
          </li>
        ))}
      </ul>
      <ProblemForm
        label="Create an API key"
        problems={problems}
        onSubmit={() => {
          void submitForm(
            "Create API key",
            problems,
            () => call<{ key: string; label: string }>("POST", `/api/v1.1/users/${me}/apikeys/`, { label }),
            "label",
          ).then((r) => {
            if (!r) return;
            setFresh(r.data as { key: string; label: string });
            setLabel("");
            keys.reload();
          });
        }}
      >
        <Field label="Label" field="label">
          <input value={label} onInput={(e) => setLabel(inputValue(e))} />
        </Field>
        <button type="submit">Create key</button>
        <FormError problems={problems} fields={["label"]} />
      </ProblemForm>
    </section>
  );
}
