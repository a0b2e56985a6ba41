// Answer schemas of users, API keys, organizations and email addresses (accounts API, CONTRACT §3, §11).
import { type Static, Type } from "typebox";
import { View } from "./common.ts";

/** `GET /auth/` (CONTRACT §2): who the credentials are, and the namespaces they may use. */
export const AuthView = View(
  { username: Type.String(), namespaces: Type.Array(Type.String()) },
  "the caller and its namespaces",
);
export type Auth = Static<typeof AuthView>;

export const ProfileView = Type.Object({
  id: Type.Integer(),
  username: Type.String(),
  url: Type.String({ description: "absolute URL of this profile" }),
  date_joined: Type.String({
    description: "ISO 8601 UTC with microseconds, e.g. 2026-11-22T03:17:08.123456Z",
  }),
  type: Type.String(),
  full_name: Type.String(),
  location: Type.String(),
  company: Type.String(),
  profile_url: Type.String(),
  avatar_url: Type.String(),
  email: Type.String({ description: "the primary address" }),
  is_active: Type.Boolean(),
});
export type Profile = Static<typeof ProfileView>;

export const EmailView = Type.Object({
  email: Type.String(),
  verified: Type.Boolean(),
  primary: Type.Boolean(),
});
export type Email = Static<typeof EmailView>;

/** An API key as listed: never its secret. */
export const ApiKeyView = View({
  id: Type.Integer(),
  label: Type.String(),
  created: Type.String({ description: "ISO 8601 UTC with microseconds" }),
});
export type ApiKey = Static<typeof ApiKeyView>;

export const CreatedApiKeyView = View({
  ...ApiKeyView.properties,
  key: Type.String({ description: "the key; shown only in this answer" }),
});
export type CreatedApiKey = Static<typeof CreatedApiKeyView>;

export const OrganizationView = View({
  name: Type.String(),
  members: Type.Array(
    View({ username: Type.String(), role: Type.String({ description: "owner or member" }) }),
  ),
});
export type Organization = Static<typeof OrganizationView>;

/**
 * An invitation to an organization. An owner's `POST …/members/` answers one, `state: "pending"`,
 * the same for every name (a name that is no user gets an invitation that is never accepted);
 * `"accepted"` when the user was already a member (its role changed) or an administrator added it
 * directly.
 */
export const InvitationView = View(
  {
    org: Type.String(),
    username: Type.String(),
    role: Type.String({ description: "owner or member" }),
    state: Type.String({ description: "pending, or accepted" }),
    invited_by: Type.String(),
    created: Type.String({ description: "ISO 8601 UTC with microseconds" }),
  },
  "an invitation to an organization",
);
export type Invitation = Static<typeof InvitationView>;

export const InvitationList = View({ objects: Type.Array(InvitationView) }, "invitations");
