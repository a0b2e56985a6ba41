// Users, API keys, organizations and namespace access (CONTRACT §2, §3).

import { ApiError, conflict, forbidden, invalidField, notFound } from "../domain/errors.ts";
import { namespaceNameProblem } from "../domain/names.ts";
import type { Clock } from "../domain/time.ts";
import {
  type ApiKeyRow,
  type InvitationRow,
  type Store,
  UniqueViolation,
  type UserRow,
} from "../store/store.ts";
import {
  generateApiKey,
  generatePassword,
  hashApiKey,
  hashPassword,
  verifyAgainstDummy,
  verifyPassword,
} from "./secrets.ts";

/** Who is calling, as established by authentication. */
export interface Principal {
  user: UserRow;
  /** "apikey", "password" (accounts API only), "token" (accounts API bearer) or "session" (dashboard cookie). */
  via: "apikey" | "password" | "token" | "session";
  /** Set for service keys (role global): the only namespace the key may address. */
  namespaceLimit: string | null;
  /** Scopes held (accounts API); Basic credentials hold all. */
  scopes: string[];
  /** The stored hash of the API key used (via "apikey"): open streams re-check that it still exists. */
  keyHash?: string;
  /** The stored hash of the dashboard session (via "session"): open streams re-check that it still exists. */
  sessionHash?: string;
  /** When the session ends (epoch ms, via "session"): open streams close then. */
  expiresMs?: number;
}

/** See IdentityService.onMembershipEnd. */
export type MembershipEndListener = (org: string, username: string, by: Principal) => Promise<void>;

export const ALL_SCOPES = ["profile_read", "profile_write", "email_read", "email_write"];

const EMAIL_RE = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export interface NewUser {
  username: string;
  email: string;
  password: string;
  full_name?: string;
  is_admin?: boolean;
}

/**
 * How long a cached API key or membership is trusted without a notification. In this process a
 * revocation or membership change drops the caches at once (Store.onIdentityChange); the bound
 * only matters for changes committed by another process sharing the database.
 */
export const IDENTITY_CACHE_TTL_MS = 2000;
const IDENTITY_CACHE_MAX = 10_000;

interface Cached<T> {
  value: T;
  until: number;
}

export class IdentityService {
  // Authentication and namespace access are read on every request: kept here, and dropped as a
  // whole on any identity change (they are rare; correctness beats a clever partial invalidation).
  private readonly keys = new Map<string, Cached<{ key: ApiKeyRow; user: UserRow }>>();
  private readonly members = new Map<string, Cached<boolean>>();
  /** How long an entry is trusted without a notification (see IDENTITY_CACHE_TTL_MS). */
  cacheTtlMs = IDENTITY_CACHE_TTL_MS;
  /** Bumped on every change, so a lookup that raced with one does not store what it read. */
  private generation = 0;
  private readonly accessListeners = new Set<() => void>();
  private readonly membershipEndListeners = new Set<MembershipEndListener>();

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {
    store.onIdentityChange(() => {
      this.generation += 1;
      this.keys.clear();
      this.members.clear();
      // Open streams re-check their callers on the same signal (api/streams/access.ts).
      this.accessChanged();
    });
  }

  private async cached<T>(
    cache: Map<string, Cached<T>>,
    key: string,
    load: () => Promise<T | undefined>,
  ): Promise<T | undefined> {
    const now = performance.now();
    const hit = cache.get(key);
    if (hit && hit.until > now) return hit.value;
    const generation = this.generation;
    const value = await load();
    if (value !== undefined && value !== false && generation === this.generation) {
      if (cache.size >= IDENTITY_CACHE_MAX) cache.clear();
      cache.set(key, { value, until: now + this.cacheTtlMs });
    } else {
      cache.delete(key);
    }
    return value;
  }

  /**
   * Called after any change that can end someone's access: a key revoked, a member removed, a
   * service key deleted. Open streams re-check their callers (api/streams/access.ts).
   */
  onAccessChange(listener: () => void): () => void {
    this.accessListeners.add(listener);
    return () => this.accessListeners.delete(listener);
  }

  accessChanged(): void {
    for (const listener of this.accessListeners) listener();
  }

  /**
   * Told once a user's membership of an organization ended, before the call that ended it answers:
   * what the member made there, or could read there, ends too (accounts/access-ends.ts).
   */
  onMembershipEnd(listener: MembershipEndListener): () => void {
    this.membershipEndListeners.add(listener);
    return () => this.membershipEndListeners.delete(listener);
  }

  /** Tells the membership-end listeners; every path that ends a membership calls it after the commit. */
  async membershipEnded(org: string, username: string, by: Principal): Promise<void> {
    for (const listener of this.membershipEndListeners) await listener(org, username, by);
  }

  /** Revokes a user's API key; false when the user has no such key. */
  async revokeApiKey(user: UserRow, id: number): Promise<boolean> {
    const deleted = await this.store.identity.deleteApiKey(user.id, id);
    if (deleted) this.accessChanged();
    return deleted;
  }

  /** Revokes the key Berth made for a service's PLATFORM_AUTH (the service is terminated). */
  async revokeServiceKeys(serviceUuid: string): Promise<void> {
    await this.store.identity.deleteServiceApiKeys(serviceUuid);
    this.accessChanged();
  }

  /**
   * Whether a principal established earlier still holds: its user exists and is active, and the
   * API key it came with is not revoked. Returns the principal with a fresh user row, or why not.
   */
  async recheck(p: Principal): Promise<{ principal?: Principal; reason: string }> {
    if (p.via === "apikey" && p.keyHash) {
      const found = await this.store.identity.findApiKeyByHash(p.keyHash);
      if (!found || found.user.id !== p.user.id) return { reason: "the API key was revoked" };
      if (!found.user.is_active) return { reason: `user ${p.user.username} is no longer active` };
      return { principal: { ...p, user: found.user }, reason: "" };
    }
    if (p.via === "session" && p.sessionHash) {
      const session = await this.store.accounts.findSession(p.sessionHash);
      if (!session || session.user_id !== p.user.id) return { reason: "the session was signed out" };
      if (session.expires <= this.clock.now()) return { reason: "the session expired" };
    }
    const user = await this.store.identity.findUserByName(p.user.username);
    if (!user || user.id !== p.user.id || !user.is_active)
      return { reason: `user ${p.user.username} no longer exists or is not active` };
    return { principal: { ...p, user }, reason: "" };
  }

  async createUser(input: NewUser): Promise<UserRow> {
    const problem = namespaceNameProblem(input.username);
    if (problem) throw invalidField("username", problem);
    if (!EMAIL_RE.test(input.email)) throw invalidField("email", "must be an email address");
    if (input.password.length < 8) throw invalidField("password", "must be at least 8 characters");
    try {
      return await this.store.identity.createUser({
        username: input.username,
        email: input.email,
        password_hash: await hashPassword(input.password),
        full_name: input.full_name ?? "",
        is_admin: input.is_admin ? 1 : 0,
        is_active: 1,
        location: "",
        company: "",
        profile_url: "",
        date_joined: this.clock.now(),
      });
    } catch (err) {
      if (err instanceof UniqueViolation)
        throw conflict(`The name "${input.username}" is already taken.`, "name_taken");
      throw err;
    }
  }

  /** Creates an API key and returns it with its secret, which is never available again. */
  async createApiKey(
    user: UserRow,
    opts: {
      label?: string;
      key?: string;
      namespaceLimit?: string;
      serviceUuid?: string;
      /** The caller's transaction (a service's key is written with the service). */
      tx?: Store;
    } = {},
  ): Promise<{ row: ApiKeyRow; key: string }> {
    const key = opts.key ?? generateApiKey();
    const now = this.clock.now();
    const row = await (opts.tx ?? this.store).transaction(async (tx) => {
      // A user's own keys are counted (quota apikeys); the keys Berth makes for services are not.
      if (!opts.serviceUuid) await tx.quotas.enforce(user.username, "apikeys", 1, { now });
      return tx.identity.insertApiKey({
        user_id: user.id,
        label: opts.label ?? "",
        key_hash: hashApiKey(key),
        created: now,
        namespace_limit: opts.namespaceLimit ?? null,
        service_uuid: opts.serviceUuid ?? null,
      });
    });
    return { row, key };
  }

  /**
   * First start on an empty database: the configured admin, or an `admin` with random
   * credentials that are returned once so the caller can print them.
   */
  async bootstrapAdmin(admin: {
    username?: string;
    password?: string;
    apiKey?: string;
  }): Promise<{ username: string; password: string; apiKey: string; generated: boolean } | undefined> {
    if ((await this.store.identity.countUsers()) > 0) return undefined;
    const generated = !admin.username;
    const username = admin.username ?? "admin";
    const password = admin.password ?? generatePassword();
    let user: Awaited<ReturnType<IdentityService["createUser"]>>;
    try {
      user = await this.createUser({
        username,
        email: `${username}@localhost.localdomain`,
        password,
        full_name: "Administrator",
        is_admin: true,
      });
    } catch (err) {
      // Replicas started together on an empty database: another one created the administrator.
      if (err instanceof ApiError && err.code === "name_taken") return undefined;
      throw err;
    }
    const { key } = await this.createApiKey(user, { label: "bootstrap", key: admin.apiKey });
    return { username, password, apiKey: key, generated };
  }

  /** Verifies Basic credentials; the secret is an API key, or a password where allowed. */
  async authenticateBasic(
    username: string,
    secret: string,
    opts: { allowPassword: boolean },
  ): Promise<Principal | undefined> {
    const hash = hashApiKey(secret);
    const found = await this.cached(this.keys, hash, () => this.store.identity.findApiKeyByHash(hash));
    if (found && found.user.username === username && found.user.is_active) {
      return {
        user: found.user,
        via: "apikey",
        namespaceLimit: found.key.namespace_limit,
        scopes: ALL_SCOPES,
        keyHash: found.key.key_hash,
      };
    }
    if (!opts.allowPassword) return undefined;
    const user = await this.store.identity.findUserByName(username);
    // Unknown and inactive users cost one scrypt check too, so timing does not tell who exists.
    const ok = user?.is_active
      ? await verifyPassword(secret, user.password_hash)
      : await verifyAgainstDummy(secret);
    if (user && ok) return { user, via: "password", namespaceLimit: null, scopes: ALL_SCOPES };
    return undefined;
  }

  /** Namespaces the principal may read and write: its own and its organizations'. */
  async namespacesOf(p: Principal): Promise<string[]> {
    if (p.namespaceLimit) return [p.namespaceLimit];
    return [p.user.username, ...(await this.store.identity.orgsOf(p.user.username))];
  }

  /** Resolves the namespace of a path; a namespace the caller cannot use is a 404 (no existence leak). */
  async resolveNamespace(p: Principal, requested: string | undefined): Promise<string> {
    const ns = requested ?? p.namespaceLimit ?? p.user.username;
    if (p.namespaceLimit && ns !== p.namespaceLimit) throw notFound();
    if (ns === p.user.username) return ns;
    const member = await this.cached(
      this.members,
      `${ns}\u0000${p.user.username}`,
      async () => (await this.store.identity.membership(ns, p.user.username)) !== undefined,
    );
    if (!member) throw notFound();
    return ns;
  }

  async createOrg(p: Principal, name: string): Promise<void> {
    const problem = namespaceNameProblem(name);
    if (problem) throw invalidField("name", problem);
    try {
      await this.store.identity.createOrg(name, p.user.username, this.clock.now());
    } catch (err) {
      if (err instanceof UniqueViolation)
        throw conflict(`The name "${name}" is already taken.`, "name_taken");
      throw err;
    }
  }

  /** An organization visible to the caller (members and admins), or 404. */
  async getOrg(p: Principal, name: string) {
    const ns = await this.store.identity.findNamespace(name);
    if (ns?.kind !== "org") throw notFound("organization");
    const members = await this.store.identity.orgMembers(name);
    if (!p.user.is_admin && !members.some((m) => m.username === p.user.username))
      throw notFound("organization");
    return { name, members: members.map((m) => ({ username: m.username, role: m.role })) };
  }

  private async requireOwner(p: Principal, org: string): Promise<void> {
    const view = await this.getOrg(p, org);
    const mine = view.members.find((m) => m.username === p.user.username);
    if (!p.user.is_admin && mine?.role !== "owner") {
      throw forbidden(`Only owners of ${org} can change its members.`, "not_an_owner");
    }
  }

  /**
   * Invites a user to an organization (owners). The answer is the same whether or not the name is
   * a user, and so is the work (one lookup, one write): an invitation to a name that is no user
   * stays pending and never becomes acceptable, so the answer tells nobody who exists. A member's
   * role is changed at once (owners see the members anyway); an administrator may add a member
   * directly (`direct`), which nobody else may.
   */
  async invite(
    p: Principal,
    org: string,
    input: { username: string; role: "owner" | "member"; direct?: boolean },
  ): Promise<{ invitation: InvitationRow; state: "pending" | "accepted" }> {
    await this.requireOwner(p, org);
    const { username, role } = input;
    if (input.direct) {
      if (!p.user.is_admin || p.namespaceLimit)
        throw forbidden(
          "Only administrators can add a member directly; invite the user instead.",
          "admin_only",
        );
      const user = await this.store.identity.findUserByName(username);
      if (!user) throw invalidField("username", `no user named "${username}"`);
      await this.store.identity.putMember(org, username, role);
      return { invitation: this.invitationOf(org, username, user.id, role, p), state: "accepted" };
    }
    // Both lookups run for every name, so a known name costs what an unknown one does.
    const [user, member] = await Promise.all([
      this.store.identity.findUserByName(username),
      this.store.identity.membership(org, username),
    ]);
    if (user && member) {
      if (member.role === "owner" && role === "member") {
        const owners = (await this.store.identity.orgMembers(org)).filter((m) => m.role === "owner");
        if (owners.length === 1)
          throw new ApiError(
            "conflict",
            "last_owner",
            `${username} is the last owner of ${org}; make another member an owner first.`,
          );
      }
      await this.store.identity.putMember(org, username, role);
      await this.store.identity.deleteInvitation(org, username);
      return { invitation: this.invitationOf(org, username, user.id, role, p), state: "accepted" };
    }
    const invitation = await this.store.identity.putInvitation(
      this.invitationOf(org, username, user?.id ?? null, role, p),
    );
    return { invitation, state: "pending" };
  }

  private invitationOf(
    org: string,
    username: string,
    userId: number | null,
    role: "owner" | "member",
    p: Principal,
  ): InvitationRow {
    return { org, username, user_id: userId, role, invited_by: p.user.username, created: this.clock.now() };
  }

  /** Pending invitations of an organization (owners). */
  async orgInvitations(p: Principal, org: string): Promise<InvitationRow[]> {
    await this.requireOwner(p, org);
    return this.store.identity.orgInvitations(org);
  }

  /** Withdraws a pending invitation (owners); false when there is none. */
  async revokeInvitation(p: Principal, org: string, username: string): Promise<boolean> {
    await this.requireOwner(p, org);
    return this.store.identity.deleteInvitation(org, username);
  }

  /** The user's invitations (only those it may accept). */
  invitationsOf(user: UserRow): Promise<InvitationRow[]> {
    return this.store.identity.invitationsOf(user);
  }

  /** Accepts an invitation: the user becomes a member with its role. 404 when it has none to `org`. */
  async acceptInvitation(user: UserRow, org: string): Promise<void> {
    const inv = await this.store.identity.acceptInvitation(org, user);
    if (!inv) throw notFound("invitation");
    this.accessChanged();
  }

  /** Declines an invitation (the user's own); 404 when it has none to `org`. */
  async declineInvitation(user: UserRow, org: string): Promise<void> {
    const mine = (await this.store.identity.invitationsOf(user)).some((i) => i.org === org);
    if (!mine || !(await this.store.identity.deleteInvitation(org, user.username)))
      throw notFound("invitation");
  }

  /**
   * Removes a member: owners remove anyone, and a member may leave by removing itself. The last
   * owner can neither leave nor be removed (409): the organization would have nobody to manage it.
   */
  async removeMember(p: Principal, org: string, username: string): Promise<void> {
    const leaving = username === p.user.username && !p.namespaceLimit;
    if (leaving) await this.getOrg(p, org);
    else await this.requireOwner(p, org);
    const result = await this.store.identity.removeMemberKeepingOwner(org, username);
    if (result === "missing") throw notFound("member");
    if (result === "last_owner") {
      throw new ApiError(
        "conflict",
        "last_owner",
        leaving
          ? `You are the last owner of ${org}, so you cannot leave it; make another member an owner first.`
          : `${username} is the last owner of ${org}; add another owner first.`,
      );
    }
    this.accessChanged();
    await this.membershipEnded(org, username, p);
  }

  /** The user named in an accounts path, if the caller may manage it (itself, or any for admins); else 404. */
  async userForCaller(p: Principal, username: string): Promise<UserRow> {
    if (p.user.username === username) return p.user;
    if (p.user.is_admin && !p.namespaceLimit) {
      const u = await this.store.identity.findUserByName(username);
      if (u) return u;
    }
    throw notFound("user");
  }
}
