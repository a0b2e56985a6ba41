// The account page's profile (name, company, …) and email addresses (verification, primary).
import { useState } from "preact/hooks";
import type { Email, Profile } from "../../../../src/contract/account.ts";
import { call } from "../../api.ts";
import {
  ErrorLine,
  Facts,
  Field,
  FormError,
  inputValue,
  Loading,
  Op,
  ProblemForm,
  submitForm,
  useFormProblems,
} from "../../ui.tsx";
import { useLoad } from "./load.ts";

export function ProfileSection({ me }: { me: string }) {
  const p = useLoad<Profile>(`/api/v1.1/users/${me}/`);
  const [edit, setEdit] = useState<Partial<Profile>>({});
  const problems = useFormProblems();
  if (p.error) return <ErrorLine error={p.error} />;
  if (!p.data) return <Loading />;
  const v = { ...p.data, ...edit };
  return (
    <section>
      <h2>Profile</h2>
      <Facts
        items={[
          ["Username", p.data.username],
          ["Name", p.data.full_name],
          ["Primary email", p.data.email],
          ["Joined", p.data.date_joined],
        ]}
      />
      <ProblemForm
        label="Profile"
        problems={problems}
        noValidate
        onSubmit={() => {
          // A refusal shows next to its field and goes when that field is edited.
          void submitForm("Profile", problems, () =>
            call("PATCH", `/api/v1.1/users/${me}/`, {
              location: v.location,
              company: v.company,
              profile_url: v.profile_url,
            }),
          ).then((r) => {
            if (r) {
              setEdit({});
              p.reload();
            }
          });
        }}
      >
        <Field label="Location" field="location">
          <input value={v.location} onInput={(e) => setEdit({ ...edit, location: inputValue(e) })} />
        </Field>
        <Field label="Company" field="company">
          <input value={v.company} onInput={(e) => setEdit({ ...edit, company: inputValue(e) })} />
        </Field>
        <Field label="Profile URL" field="profile_url">
          <input
            type="url"
            value={v.profile_url}
            onInput={(e) => setEdit({ ...edit, profile_url: inputValue(e) })}
          />
        </Field>
        <button type="submit">Save profile</button>
        <FormError problems={problems} fields={["location", "company", "profile_url"]} />
      </ProblemForm>
    </section>
  );
}

export function EmailSection({ me }: { me: string }) {
  const list = useLoad<Email[]>(`/api/v1.1/users/${me}/emails/`);
  const [address, setAddress] = useState("");
  const [token, setToken] = useState("");
  const adding = useFormProblems();
  const confirming = useFormProblems();
  const base = `/api/v1.1/users/${me}/emails/`;
  return (
    <section>
      <h2>Email addresses</h2>
      <ErrorLine error={list.error} />
      {list.data && (
        <ul class="plain">
          {list.data.map((m) => (
            <li key={m.email} class="email-row">
              <span>{m.email}</span>
              <span class="hint">
                {m.primary ? "primary" : ""} {m.verified ? "verified" : "not verified"}
              </span>
              {!m.verified && (
                <Op
                  label="Send confirmation"
                  run={() => call("POST", `${base}verify/`, { email: m.email })}
                />
              )}
              <Op
                label="Make primary"
                allowed={{
                  allowed: m.verified && !m.primary,
                  reason: m.primary ? "already the primary address" : "verify the address first",
                }}
                run={() => call("PATCH", base, { email: m.email, primary: true })}
                done={() => list.reload()}
              />
              <Op
                label="Delete"
                danger
                allowed={{ allowed: !m.primary, reason: "the primary address cannot be deleted" }}
                confirm={`Delete ${m.email}?`}
                run={() => call("DELETE", base, { email: m.email })}
                done={() => list.reload()}
              />
            </li>
          ))}
        </ul>
      )}
      <ProblemForm
        label="Add an address"
        problems={adding}
        noValidate
        onSubmit={() => {
          void submitForm(
            `Add ${address}`,
            adding,
            () => call("POST", base, { email: address }),
            "email",
          ).then((r) => {
            if (r) {
              setAddress("");
              list.reload();
            }
          });
        }}
      >
        <Field label="New address" field="email">
          <input type="email" required value={address} onInput={(e) => setAddress(inputValue(e))} />
        </Field>
        <button type="submit">Add address</button>
        <FormError problems={adding} fields={["email"]} />
      </ProblemForm>
      <ProblemForm
        label="Confirm an address"
        problems={confirming}
        onSubmit={() => {
          void submitForm(
            "Confirm address",
            confirming,
            () => call("POST", "/api/v1.1/emails/confirm/", { token: token.trim() }),
            "token",
          ).then((r) => {
            if (r) {
              setToken("");
              list.reload();
            }
          });
        }}
      >
        <Field label="Confirmation token" field="token" hint="from the confirmation message">
          <input value={token} autocomplete="off" onInput={(e) => setToken(inputValue(e))} />
        </Field>
        <button type="submit">Confirm</button>
        <FormError problems={confirming} fields={["token"]} />
      </ProblemForm>
    </section>
  );
}
