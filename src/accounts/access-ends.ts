// Access ends everywhere it was granted (issue 26 item 3): a password change, a deactivation, a
// sign-out everywhere and a member's removal end, at once and on every replica, what they held:
//
// - sessions and Bearer access tokens (their rows are deleted; the identity change is announced,
//   so open streams of those sessions close with 1008 here and on the other replicas);
// - what a removed member made in the organization: its unused registration tokens and its
//   triggers are revoked (deleted: simpler and safer than making them act as someone else); until
//   then, and for a deactivated creator, they refuse at use (identity/creators.ts);
// - the service keys (PLATFORM_AUTH of role-global services) of the organization, which the member
//   could read from its containers: each is rotated (the old key refused from now on, a new one
//   sealed in its place), with an action on the service saying so; the containers get the new key
//   at their next redeploy, and until then the service shows `synchronized: false`.
//
// Accounts-API calls leave no action (CONTRACT §7 audits the platform API); the rotations they
// cause are recorded as actions of the namespace they happen in.
import { randomUUID } from "node:crypto";
import type { ActionEngine } from "../actions/engine.ts";
import { ApiError, conflict, invalidField } from "../domain/errors.ts";
import { nsUri, serviceUri } from "../domain/uri.ts";
import { creatorMayUse } from "../identity/creators.ts";
import { hashPassword, verifyPassword } from "../identity/secrets.ts";
import type { IdentityService, Principal } from "../identity/service.ts";
import type { Store, UserRow } from "../store/store.ts";
import type { LoginLimiter } from "./limiter.ts";

export const MIN_PASSWORD_LENGTH = 8;

export interface AccessEndsOptions {
  store: Store;
  identity: IdentityService;
  logins: LoginLimiter;
  actions: ActionEngine;
  /** Replaces a service's PLATFORM_AUTH key with one of `owner` (none: only revokes it); false when it had none. */
  rotateServiceKey(serviceUuid: string, owner: UserRow | undefined): Promise<boolean>;
}

/** What a call ended. */
interface Ended {
  sessions_ended: number;
  access_tokens_ended: number;
}

/** The action metadata of what Berth does on its own because of an accounts call. */
function metaOf(by: Principal | undefined, what: string) {
  return {
    method: "POST",
    path: what,
    user: by?.user.username ?? "",
    userAgent: "berth",
    ip: "",
    isUserAction: false,
  };
}

export class AccessEnds {
  constructor(private readonly o: AccessEndsOptions) {
    o.identity.onMembershipEnd((org, username, by) => this.membershipEnded(org, username, by));
  }

  /**
   * Changes a password. A user changing its own gives the old one (a wrong one counts as a failed
   * sign-in, so it cannot be guessed here faster than at sign-in); administrators reset another
   * user's without it. Every session and access token of the user ends, but the session the
   * change was made from.
   */
  async changePassword(
    p: Principal,
    username: string,
    body: { old_password?: string; new_password: string },
    address: string,
  ): Promise<Ended & { username: string }> {
    const user = await this.o.identity.userForCaller(p, username);
    if (body.new_password.length < MIN_PASSWORD_LENGTH)
      throw invalidField("new_password", `must be at least ${MIN_PASSWORD_LENGTH} characters`);
    if (user.id === p.user.id) {
      const old = body.old_password;
      if (!old) throw invalidField("old_password", "is required to change your own password");
      const ok = await this.o.logins.guard(user.username, address, async () =>
        (await verifyPassword(old, user.password_hash)) ? true : undefined,
      );
      if (!ok)
        throw new ApiError("forbidden", "wrong_password", "old_password is not the current password.", [
          { field: "old_password", problem: "is not the current password" },
        ]);
    }
    const keep = user.id === p.user.id && p.via === "session" ? p.sessionHash : undefined;
    const ended = await this.o.store.accounts.changePassword(
      user.id,
      await hashPassword(body.new_password),
      keep,
    );
    return { username: user.username, ...ended };
  }

  /**
   * Deactivates or activates a user (administrators). A deactivated user's keys, sessions, tokens
   * and streams refuse at once (sessions and access tokens are deleted; API keys stay and work
   * again on activation), sign-in answers as for a wrong password, what they made refuses at use,
   * and the service keys of their organizations are rotated (they could read them).
   */
  async setActive(p: Principal, username: string, active: boolean): Promise<UserRow> {
    const user = await this.o.identity.userForCaller(p, username);
    if (!active && user.id === p.user.id)
      throw conflict("You cannot deactivate yourself; another administrator can.", "cannot_deactivate_self");
    const was = user.is_active === 1;
    const row = await this.o.store.accounts.setActive(user.id, active);
    if (!row) throw new ApiError("not_found", "not_found", "No such user.");
    if (was && !active) {
      for (const org of await this.o.store.identity.orgsOf(user.username))
        await this.rotateServiceKeys(org, `${user.username} was deactivated`, p);
    }
    return row;
  }

  /** Ends every session and access token of a user (sign out everywhere). */
  async signOutEverywhere(p: Principal, username: string): Promise<Ended> {
    const user = await this.o.identity.userForCaller(p, username);
    return this.o.store.transaction(async (tx) => ({
      sessions_ended: await tx.accounts.deleteSessionsOf(user.id),
      access_tokens_ended: await tx.accounts.deleteAccessTokensOf(user.id),
    }));
  }

  /**
   * A member left an organization: the registration tokens and triggers it made there are
   * revoked, and the organization's service keys rotated.
   */
  async membershipEnded(org: string, username: string, by: Principal): Promise<void> {
    const user = await this.o.store.identity.findUserByName(username);
    if (!user) return;
    const why = `${username} was removed from ${org}`;
    const tokens = await this.o.store.agents.deleteUnusedTokensOf(user.id, org);
    for (const t of tokens) {
      await this.o.actions.recordSync({
        uuid: randomUUID(),
        namespace: org,
        object: nsUri("infra", org, "token", t.uuid),
        name: "Token Revoke",
        meta: metaOf(by, `/api/v1.1/orgs/${org}/members/${username}/`),
        state: "Success",
        logLine: `Registration token ${t.uuid} was revoked: ${why}, who created it; no node registers with it`,
      });
    }
    const triggers = await this.o.store.registries.deleteTriggersOf(user.id, org);
    for (const t of triggers) {
      await this.o.actions.recordSync({
        uuid: randomUUID(),
        namespace: org,
        object: serviceUri({ namespace: org, uuid: t.service_uuid }),
        name: "Trigger Revoke",
        meta: metaOf(by, `/api/v1.1/orgs/${org}/members/${username}/`),
        state: "Success",
        logLine: `Trigger "${t.name}" (${t.uuid}) was revoked: ${why}, who created it; its URL answers 404 from now on`,
      });
    }
    await this.rotateServiceKeys(org, why, by);
  }

  /**
   * Rotates the service key of every live role-global service of an organization. The new key
   * belongs to the old key's user while that user may still use the namespace, else to the
   * first active owner of the organization (none: the key is only revoked).
   */
  private async rotateServiceKeys(org: string, why: string, by: Principal | undefined): Promise<void> {
    const services = (await this.o.store.services.liveServices({ namespace: org })).filter(
      (s) => s.auth_secret !== null,
    );
    if (services.length === 0) return;
    const keyUsers = await this.o.store.accounts.serviceKeyUsers(services.map((s) => s.uuid));
    let fallback: UserRow | null | undefined;
    const ownerOf = async (serviceUuid: string): Promise<UserRow | undefined> => {
      const id = keyUsers.get(serviceUuid);
      if (id !== undefined && (await creatorMayUse(this.o.store, id, org)))
        return this.o.store.identity.findUserById(id);
      if (fallback === undefined) {
        fallback = null;
        for (const m of await this.o.store.identity.orgMembers(org)) {
          if (m.role !== "owner") continue;
          const u = await this.o.store.identity.findUserByName(m.username);
          if (u?.is_active) {
            fallback = u;
            break;
          }
        }
      }
      return fallback ?? undefined;
    };
    for (const s of services) {
      const owner = await ownerOf(s.uuid);
      if (!(await this.o.rotateServiceKey(s.uuid, owner))) continue;
      await this.o.actions.recordSync({
        uuid: randomUUID(),
        namespace: org,
        object: serviceUri(s),
        name: "Service Key Rotate",
        meta: metaOf(by, `/api/v1.1/orgs/${org}/`),
        state: "Success",
        logLine: owner
          ? `The service key (PLATFORM_AUTH) of ${s.name} was replaced because ${why} and could read it: the old key is refused from now on; redeploy the service to give its containers the new one (until then it is not synchronized)`
          : `The service key (PLATFORM_AUTH) of ${s.name} was revoked because ${why} and could read it; no active owner of ${org} remains to hold a new one`,
      });
    }
  }
}
