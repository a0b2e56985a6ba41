// Helpers of the accounts API tests: an outbox that records messages, tokens, bearer callers.
import assert from "node:assert/strict";
import type { MailMessage, Outbox } from "../../src/accounts/outbox.ts";
import type { Caller, Harness } from "../support/harness.ts";

/** Keeps every message instead of sending it; tests read the confirmation tokens from it. */
export class RecordingOutbox implements Outbox {
  readonly messages: MailMessage[] = [];

  async send(message: MailMessage): Promise<void> {
    this.messages.push(message);
  }

  /** The confirmation token of the last message to `to`, as a person would copy it. */
  tokenFor(to: string): string {
    const m = this.messages.filter((x) => x.to === to).at(-1);
    assert.ok(m, `a message to ${to}`);
    return tokenInText(m.text);
  }
}

export function tokenInText(text: string): string {
  const match = /Confirmation token: (\S+)/.exec(text);
  assert.ok(match, `a token in the message:\n${text}`);
  return match[1]!;
}

/** POST /oauth/token with the password grant; returns the whole answer. */
export async function requestToken(
  h: Harness,
  params: Record<string, string>,
  opts: { form?: boolean; remoteAddress?: string } = {},
) {
  const res = await h.app.inject({
    method: "POST",
    url: "/oauth/token",
    ...(opts.remoteAddress ? { remoteAddress: opts.remoteAddress } : {}),
    ...(opts.form
      ? {
          headers: { "content-type": "application/x-www-form-urlencoded" },
          payload: new URLSearchParams(params).toString(),
        }
      : { payload: params }),
  });
  return { status: res.statusCode, body: res.json(), headers: res.headers };
}

/** A caller that authenticates with a new access token holding `scope` (space-separated). */
export async function withToken(h: Harness, who: Caller, scope: string): Promise<Caller> {
  const res = await requestToken(h, {
    grant_type: "password",
    username: who.username,
    password: who.password,
    scope,
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return { ...who, auth: `Bearer ${res.body.access_token}` };
}
