// What a router's report of a certificate means (issue 30): when its renewal is overdue, and when
// two reports are of the same certificate (router/controller.ts records what changed).
import { DEFAULT_RENEWAL_WINDOW_RATIO } from "../config/router.ts";
import { type CertificateStatus, RENEWAL_OVERDUE_MS } from "../drivers/router/router.ts";

/**
 * An issued certificate whose renewal is overdue is shown as expiring, saying when: within
 * RENEWAL_OVERDUE_MS of its expiry, or for a short-lived one (its lifetime known), once half of its
 * renewal window (the router renews at `ratio` of its lifetime before expiry) has passed.
 */
export function overdue(
  st: CertificateStatus,
  now: number,
  ratio = DEFAULT_RENEWAL_WINDOW_RATIO,
): CertificateStatus {
  if (st.state !== "issued" || st.expiresAt === null) return st;
  const lifetime = st.issuedAt !== undefined ? st.expiresAt - st.issuedAt : undefined;
  const limit =
    lifetime !== undefined && lifetime > 0
      ? Math.min(RENEWAL_OVERDUE_MS, (lifetime * ratio) / 2)
      : RENEWAL_OVERDUE_MS;
  if (st.expiresAt - now > limit) return st;
  const when = new Date(st.expiresAt).toISOString();
  const due =
    lifetime !== undefined && lifetime > 0
      ? `renewal was due ${Math.round(ratio * 100)}% of its lifetime before expiry`
      : `renewal is due ${Math.round(ratio * 100)}% of its lifetime before expiry`;
  return {
    ...st,
    state: "expiring",
    error:
      st.error ??
      `the certificate expires at ${when} and the router has not renewed it (${due}): check that the ACME server reaches this host name on ports 80 and 443`,
  };
}

/** Expiries read a minute apart are the same certificate's (a probe's clock is not the issuer's). */
export function sameExpiry(a: number | null, b: number | null): boolean {
  return a === b || (a !== null && b !== null && Math.abs(a - b) < 60_000);
}
