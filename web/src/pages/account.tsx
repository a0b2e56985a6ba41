// The account: profile, email addresses (verification, primary), the password and sign-out
// everywhere, API keys (shown once), invitations to organizations (accept, decline), organizations,
// their members and pending invitations, each namespace's privileges and quotas (privileges editable
// by administrators), and (administrators) new users and deactivating or activating a user.// Each part is a module of ./account/; this page assembles them.
import { session } from "../api.ts";
import { Page } from "../ui.tsx";
import { InvitationSection, OrgSection } from "./account/organizations.tsx";
import { PrivilegesSection } from "./account/privileges.tsx";
import { EmailSection, ProfileSection } from "./account/profile.tsx";
import { KeySection, SecuritySection } from "./account/security.tsx";

export function AccountPage() {
  const s = session.value;
  if (!s) return null;
  return (
    <Page title="Account">
      <ProfileSection me={s.username} />
      <EmailSection me={s.username} />
      <SecuritySection me={s.username} />
      <KeySection me={s.username} />
      <InvitationSection me={s.username} />
      <OrgSection me={s.username} namespaces={s.namespaces} />
      <PrivilegesSection namespaces={s.namespaces} admin={s.is_admin} />
      {s.is_admin && (
        <section>
          <h2>Users</h2>
          <p>
            <a href="#/users">List, create, deactivate and activate users</a>.
          </p>
        </section>
      )}
    </Page>
  );
}
