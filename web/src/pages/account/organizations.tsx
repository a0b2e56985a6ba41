// The account page's organizations: invitations waiting for the user (accept, decline), each
// organization's members and its pending invitations.
import { useState } from "preact/hooks";
import type { Invitation as InvitationRow, Organization as Org } from "../../../../src/contract/account.ts";
import { call, loadSession } from "../../api.ts";
import {
  ErrorLine,
  Field,
  FormError,
  inputValue,
  Loading,
  Op,
  ProblemForm,
  Select,
  submitForm,
  useFormProblems,
} from "../../ui.tsx";
import { useLoad } from "./load.ts";

/** Invitations waiting for the user: accepting makes it a member, declining drops the invitation. */
export function InvitationSection({ me }: { me: string }) {
  const list = useLoad<{ objects: InvitationRow[] }>(`/api/v1.1/users/${me}/invitations/`);
  const rows = list.data?.objects ?? [];
  if (!list.error && rows.length === 0) return null;
  const base = `/api/v1.1/users/${me}/invitations/`;
  return (
    <section>
      <h2>Invitations</h2>
      <ErrorLine error={list.error} />
      <ul class="plain invitations">
        {rows.map((i) => (
          <li key={i.org} class="email-row">
            <span>{i.org}</span>
            <span class="hint">
              as {i.role}, invited by {i.invited_by}
            </span>
            <Op
              label="Accept"
              run={() => call("POST", `${base}${i.org}/accept/`)}
              done={() => {
                list.reload();
                void loadSession();
              }}
            />
            <Op
              label="Decline"
              danger
              confirm={`Decline the invitation to ${i.org}?`}
              run={() => call("POST", `${base}${i.org}/decline/`)}
              done={() => list.reload()}
            />
          </li>
        ))}
      </ul>
    </section>
  );
}

/** An organization's pending invitations (owners), each of which an owner may withdraw. */
function PendingInvitations({ name }: { name: string }) {
  const list = useLoad<{ objects: InvitationRow[] }>(`/api/v1.1/orgs/${name}/invitations/`);
  const rows = list.data?.objects ?? [];
  if (rows.length === 0) return <ErrorLine error={list.error} />;
  return (
    <ul class="plain">
      {rows.map((i) => (
        <li key={i.username} class="email-row">
          <span>{i.username}</span>
          <span class="hint">invited as {i.role}, pending</span>
          <Op
            label="Withdraw"
            danger
            run={() => call("DELETE", `/api/v1.1/orgs/${name}/invitations/${i.username}/`)}
            done={() => list.reload()}
          />
        </li>
      ))}
    </ul>
  );
}

function OrgCard({ name, me }: { name: string; me: string }) {
  const org = useLoad<Org>(`/api/v1.1/orgs/${name}/`);
  const [invited, setInvited] = useState(0);
  const [user, setUser] = useState("");
  const [role, setRole] = useState("member");
  const problems = useFormProblems();
  if (org.error) return <ErrorLine error={org.error} />;
  if (!org.data) return <Loading />;
  const owner = org.data.members.some((m) => m.username === me && m.role === "owner");
  const notOwner = { allowed: owner, reason: "only owners manage members" };
  return (
    <div class="card">
      <h3>{name}</h3>
      <ul class="plain">
        {org.data.members.map((m) => (
          <li key={m.username} class="email-row">
            <span>{m.username}</span>
            <span class="hint">{m.role}</span>
            {m.username === me ? (
              <Op
                label="Leave"
                danger
                confirm={`Leave ${name}? You lose access to its namespace.`}
                run={() => call("DELETE", `/api/v1.1/orgs/${name}/members/${me}/`)}
                done={() => void loadSession()}
              />
            ) : (
              <Op
                label="Remove"
                danger
                allowed={notOwner}
                confirm={`Remove ${m.username} from ${name}?`}
                run={() => call("DELETE", `/api/v1.1/orgs/${name}/members/${m.username}/`)}
                done={() => org.reload()}
              />
            )}
          </li>
        ))}
      </ul>
      {owner && <PendingInvitations key={invited} name={name} />}
      {owner && (
        <ProblemForm
          label={`Invite to ${name}`}
          problems={problems}
          onSubmit={() => {
            void submitForm(
              `Invite ${user} to ${name}`,
              problems,
              () => call("POST", `/api/v1.1/orgs/${name}/members/`, { username: user, role }),
              "username",
            ).then((r) => {
              if (r) {
                setUser("");
                setInvited((n) => n + 1);
                org.reload();
              }
            });
          }}
        >
          <Field label="Username" field="username">
            <input placeholder="username" value={user} onInput={(e) => setUser(inputValue(e))} />
          </Field>
          <Field label="Role" field="role">
            <Select value={role} onChange={setRole} options={["member", "owner"]} />
          </Field>
          <button type="submit">Invite</button>
          <FormError problems={problems} fields={["username", "role"]} />
        </ProblemForm>
      )}
    </div>
  );
}

export function OrgSection({ me, namespaces }: { me: string; namespaces: string[] }) {
  const [name, setName] = useState("");
  const problems = useFormProblems();
  return (
    <section>
      <h2>Organizations</h2>
      {namespaces
        .filter((n) => n !== me)
        .map((n) => (
          <OrgCard key={n} name={n} me={me} />
        ))}
      <ProblemForm
        label="Create an organization"
        problems={problems}
        onSubmit={() => {
          void submitForm(
            `Create organization ${name}`,
            problems,
            () => call("POST", "/api/v1.1/orgs/", { name: name.trim() }),
            "name",
          ).then((r) => {
            if (r) {
              setName("");
              void loadSession();
            }
          });
        }}
      >
        <Field label="New organization" field="name">
          <input value={name} onInput={(e) => setName(inputValue(e))} />
        </Field>
        <button type="submit">Create organization</button>
        <FormError problems={problems} fields={["name"]} />
      </ProblemForm>
    </section>
  );
}
