// Accounts: profiles, emails, tokens and sessions with their limiters and mail outbox, and what
// ends when access ends; their routes (sessions, accounts, namespaces, access).
import type { ActionEngine } from "../actions/engine.ts";
import { accessRoutes } from "../api/routes/access.ts";
import { accountsRoutes } from "../api/routes/accounts.ts";
import { namespaceRoutes } from "../api/routes/namespaces.ts";
import { sessionRoutes } from "../api/routes/session.ts";
import type { Core, Routes } from "../composition.ts";
import type { NamespacePolicies } from "../identity/privileges.ts";
import type { IdentityService } from "../identity/service.ts";
import type { ServiceManager } from "../orchestrator/manager.ts";
import { AccessEnds } from "./access-ends.ts";
import { DatabaseCounters, LoginLimiter, MailLimiter, MemoryCounters } from "./limiter.ts";
import { LogOutbox, type Outbox, SmtpOutbox } from "./outbox.ts";
import { AccountsService } from "./service.ts";
import { SessionService } from "./sessions.ts";

export function accountsModule(
  core: Core,
  parts: {
    identity: IdentityService;
    policies: NamespacePolicies;
    actions: ActionEngine;
    /** Rotates a service's key when its owner loses access. */
    services: Pick<ServiceManager, "rotateServiceKey">;
    /** Replaces the mail outbox of confirmation messages (tests record them). */
    outbox?: Outbox;
  },
) {
  const { config, store, clock, log } = core;
  const { identity, policies } = parts;
  // Replicas share their counters, so that the limits hold whichever replica a request reaches.
  const counters = core.replicated ? new DatabaseCounters(store) : new MemoryCounters();
  const logins = new LoginLimiter(
    {
      maxFailuresPerUser: config.accounts.loginMaxFailuresPerUser,
      maxFailuresPerAddress: config.accounts.loginMaxFailuresPerAddress,
      windowS: config.accounts.loginWindowS,
    },
    clock,
    counters,
  );
  const mails = new MailLimiter(
    {
      maxPerUser: config.accounts.verifyMaxPerUser,
      maxPerAddress: config.accounts.verifyMaxPerAddress,
      windowS: 3600,
    },
    clock,
    counters,
  );
  const outbox =
    parts.outbox ??
    (config.accounts.smtpUrl
      ? new SmtpOutbox({ url: config.accounts.smtpUrl, from: config.accounts.mailFrom })
      : new LogOutbox((line) => log.info(line)));
  const accounts = new AccountsService({
    store,
    identity,
    clock,
    outbox,
    logins,
    mails,
    publicUrl: config.publicUrl,
    tokenTtlS: config.accounts.tokenTtlS,
    emailTokenTtlS: config.accounts.emailTokenTtlS,
    verifyIntervalS: config.accounts.verifyIntervalS,
    maxUnverifiedEmails: config.accounts.maxUnverifiedEmails,
  });
  // Password changes, deactivations, sign-out everywhere and ended memberships end what they held.
  const accessEnds = new AccessEnds({
    store,
    identity,
    logins,
    actions: parts.actions,
    rotateServiceKey: (uuid, owner) => parts.services.rotateServiceKey(uuid, owner),
  });
  const sessions = new SessionService({ store, identity, clock, logins, ttlS: config.accounts.sessionTtlS });
  const routes: Routes = [
    (a) =>
      sessionRoutes(a, {
        sessions,
        identity,
        secureCookies: config.publicUrl.startsWith("https:"),
        ttlS: config.accounts.sessionTtlS,
      }),
    (a) => accountsRoutes(a, { accounts, publicUrl: config.publicUrl }),
    (a) => namespaceRoutes(a, { identity, policies, store, clock }),
    (a) => accessRoutes(a, { access: accessEnds, publicUrl: config.publicUrl }),
  ];
  return { accounts, logins, sessions, outbox, routes };
}
