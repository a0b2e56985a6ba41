// Secrets never reach the log: stream credentials (`?user=…&token=…`, CONTRACT §2) and trigger
// calls carry them in the query string, and a client may percent-encode the parameter's name
// (`%74oken=`, which the query parser decodes to `token`), change its case or repeat it. The
// decision is made on the name as the parser would read it, never on its raw spelling.

/**
 * Parameter names whose value is a secret, compared once decoded, lower-cased and stripped of
 * separators (`access_token`, `api-key`, `X-Api-Key` → `accesstoken`, `apikey`, `xapikey`).
 * A substring match: over-redacting a harmless parameter costs nothing.
 */
const SECRET_NAME = /token|key|pass|pwd|secret|auth|credential|session|cookie|signature|sig$/;

/** A percent-decoding that never throws: each %XX is one byte (ASCII names are all that matter). */
function decodeLoosely(text: string): string {
  return text
    .replace(/\+/g, " ")
    .replace(/%([0-9a-f]{2})/gi, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}

/** The name as a secret is recognised: decoded until it no longer changes (bounded), normalised. */
function normalisedName(raw: string): string {
  let name = raw;
  for (let i = 0; i < 4; i++) {
    const next = decodeLoosely(name);
    if (next === name) break;
    name = next;
  }
  return name.toLowerCase().replace(/[^a-z0-9]/g, "");
}

export function isSecretParameter(rawName: string): boolean {
  return SECRET_NAME.test(normalisedName(rawName));
}

/**
 * The URL with the value of every secret query parameter replaced by `***`. Parameters are split
 * on `&` and `;` (some parsers take both), and a parameter without `=` is kept as it is: it has no
 * value to hide. The path is kept: no secret rides in a path Berth serves.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf("?");
  if (q < 0) return url;
  const query = url.slice(q + 1);
  const redacted = query.replace(/[^&;]+/g, (part) => {
    const eq = part.indexOf("=");
    if (eq < 0) return isSecretParameter(part) ? "***" : part;
    return isSecretParameter(part.slice(0, eq)) ? `${part.slice(0, eq)}=***` : part;
  });
  return `${url.slice(0, q + 1)}${redacted}`;
}
