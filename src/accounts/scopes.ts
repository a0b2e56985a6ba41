// OAuth-style scopes of the accounts API (spec "Authentication", CONTRACT §11) and the one rule
// that decides whether a caller may use an accounts route. Routes declare their scope in
// `config.scope`; the auth hook (api/auth.ts) applies `authorizeAccountsCall` to every call.
import { ApiError } from "../domain/errors.ts";
import { ALL_SCOPES, type Principal } from "../identity/service.ts";

export type Scope = "profile_read" | "profile_write" | "email_read" | "email_write";

export const SCOPES: readonly Scope[] = ALL_SCOPES as Scope[];

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

/**
 * Parses the space-separated `scope` parameter of a token request (RFC 6749 §3.3). Returns the
 * scopes in canonical order without duplicates, or the first unknown one.
 */
export function parseScopeParam(text: string): { scopes: Scope[] } | { unknown: string } {
  const words = text.split(/[\s]+/).filter(Boolean);
  for (const w of words) if (!isScope(w)) return { unknown: w };
  return { scopes: SCOPES.filter((s) => words.includes(s)) };
}

function insufficientScope(message: string, scope?: Scope): ApiError {
  const challenge = scope
    ? `Bearer error="insufficient_scope", scope="${scope}"`
    : `Bearer error="insufficient_scope"`;
  return new ApiError("forbidden", "insufficient_scope", message, undefined, {
    "WWW-Authenticate": challenge,
  });
}

/**
 * Whether the principal may call an accounts route that needs `scope` (undefined: a route of
 * CONTRACT §3, such as API keys or organizations, which no scope covers). Throws 403
 * insufficient_scope otherwise. Which account the call may reach is decided by the handler
 * (IdentityService.userForCaller: its own, or any for admins).
 */
export function authorizeAccountsCall(p: Principal, scope: Scope | undefined): void {
  // A service key (PLATFORM_AUTH of a role-global service) is confined to one namespace of the
  // platform API; it holds no right over the account of the user who owns the service.
  const held = p.namespaceLimit ? [] : p.scopes;
  if (scope) {
    if (!held.includes(scope))
      throw insufficientScope(
        `This call needs the ${scope} scope, which these credentials do not hold.`,
        scope,
      );
    return;
  }
  // The routes of CONTRACT §3 can mint API keys and change memberships: more than any scope
  // grants, so they need the user's own Basic credentials.
  if (p.via === "token" || p.namespaceLimit) {
    throw insufficientScope(
      "This call needs Basic credentials (a password or a full API key); access tokens and service keys cannot make it.",
    );
  }
}
