// The account page's profile (name, company, …) and email addresses (verification, primary).
import { useState } from "preact/hooks";
import type { Email, Profile } from "../../../../src/contract/account.ts";
import { call } from "../../api.ts";
import { ErrorLine, Facts, Field, inputValue, Loading, Op, perform } from "../../ui.tsx";
import { useLoad } from "./load.ts";

export function ProfileSection({ me }: { me: string }) {
  const p = useLoad<Profile>(`/api/v1.1/users/${me}/`);
  const [edit, setEdit] = useState<Partial<Profile>>({});
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
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void perform("Profile", () =>
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
        <Field label="Location">
          <input value={v.location} onInput={(e) => setEdit({ ...edit, location: inputValue(e) })} />
        </Field>
        <Field label="Company">
          <input value={v.company} onInput={(e) => setEdit({ ...edit, company: inputValue(e) })} />
        </Field>
        <Field label="Profile URL">
          <input
            type="url"
            value={v.profile_url}
            onInput={(e) => setEdit({ ...edit, profile_url: inputValue(e) })}
          />
        </Field>
        <button type="submit">Save profile</button>
      </form>
    </section>
  );
}

export function EmailSection({ me }: { me: string }) {
  const list = useLoad<Email[]>(`/api/v1.1/users/${me}/emails/`);
  const [address, setAddress] = useState("");
  const [token, setToken] = useState("");
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
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void perform(`Add ${address}`, () => call("POST", base, { email: address })).then((r) => {
            if (r) {
              setAddress("");
              list.reload();
            }
          });
        }}
      >
        <Field label="New address">
          <input type="email" required value={address} onInput={(e) => setAddress(inputValue(e))} />
        </Field>
        <button type="submit">Add address</button>
      </form>
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void perform("Confirm address", () =>
            call("POST", "/api/v1.1/emails/confirm/", { token: token.trim() }),
          ).then((r) => {
            if (r) {
              setToken("");
              list.reload();
            }
          });
        }}
      >
        <Field label="Confirmation token" hint="from the confirmation message">
          <input value={token} autocomplete="off" onInput={(e) => setToken(inputValue(e))} />
        </Field>
        <button type="submit">Confirm</button>
      </form>
    </section>
  );
}
