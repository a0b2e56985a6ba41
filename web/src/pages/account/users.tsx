// The account page for administrators: new users, and deactivating or activating a user.
import { useState } from "preact/hooks";
import { call } from "../../api.ts";
import { Field, inputValue, perform } from "../../ui.tsx";

export function UsersSection() {
  const [form, setForm] = useState({ username: "", email: "", password: "" });
  return (
    <section>
      <h2>New user</h2>
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void perform(`Create user ${form.username}`, () => call("POST", "/api/v1.1/users/", form)).then(
            (r) => r && setForm({ username: "", email: "", password: "" }),
          );
        }}
      >
        <Field label="Username">
          <input value={form.username} onInput={(e) => setForm({ ...form, username: inputValue(e) })} />
        </Field>
        <Field label="Email">
          <input
            type="email"
            value={form.email}
            onInput={(e) => setForm({ ...form, email: inputValue(e) })}
          />
        </Field>
        <Field label="Password">
          <input
            type="password"
            autocomplete="new-password"
            value={form.password}
            onInput={(e) => setForm({ ...form, password: inputValue(e) })}
          />
        </Field>
        <button type="submit">Create user</button>
      </form>
      <UserAccessForm />
    </section>
  );
}

/** Deactivates or activates a user by name (there is no list of users to pick from). */
function UserAccessForm() {
  const [name, setName] = useState("");
  const act = (verb: "deactivate" | "activate") =>
    void perform(`${verb === "deactivate" ? "Deactivate" : "Activate"} ${name}`, () =>
      call("POST", `/api/v1.1/users/${encodeURIComponent(name.trim())}/${verb}/`),
    ).then((r) => r && setName(""));
  return (
    <form class="inline-form" onSubmit={(e) => e.preventDefault()}>
      <Field
        label="User"
        hint="deactivating refuses the user's keys, sessions, tokens and streams at once; activating lets the keys work again"
      >
        <input value={name} onInput={(e) => setName(inputValue(e))} />
      </Field>
      <button type="button" class="danger" disabled={!name.trim()} onClick={() => act("deactivate")}>
        Deactivate
      </button>
      <button type="button" disabled={!name.trim()} onClick={() => act("activate")}>
        Activate
      </button>
    </form>
  );
}
