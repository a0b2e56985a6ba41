// JSON already made for a value that will not change any more: whoever builds an answer (a view, a
// list envelope, a cached answer) notes its JSON once, and whoever sends or embeds it reuses that
// JSON instead of serializing the value again (api/serialize.ts, api/lists.ts). A value whose JSON
// is noted is never changed afterwards (the ones shared between answers are frozen: deepFreeze).
//
// JSON sent or embedded many times is kept encoded too: its UTF-8 bytes go to the socket as they
// are, or are copied into a page's bytes, where a string would be encoded into a new buffer every
// time (for a page of a few megabytes, fresh memory costs more than the rest of the request).

interface Made {
  text?: string;
  bytes?: Uint8Array;
}

const made = new WeakMap<object, Made>();
const decoder = new TextDecoder();

/** Freezes a value and everything in it (already frozen parts are not walked again). */
export function deepFreeze<T>(value: T): T {
  if (typeof value !== "object" || value === null || Object.isFrozen(value)) return value;
  Object.freeze(value);
  for (const v of Object.values(value)) deepFreeze(v);
  return value;
}

/**
 * Notes the JSON of `value`, which must not change any more: its text, its UTF-8 bytes or both
 * (what is not given is let go: a cached answer keeps only its bytes).
 */
export function madeJson<T extends object>(value: T, json: Made): T {
  made.set(value, json);
  return value;
}

/** The JSON text of `value`: the one noted for it, or made now. */
export function jsonOf(value: unknown): string {
  const m = typeof value === "object" && value !== null ? made.get(value) : undefined;
  if (m?.text !== undefined) return m.text;
  return m?.bytes !== undefined ? decoder.decode(m.bytes) : JSON.stringify(value);
}

/** The UTF-8 bytes of `value`'s JSON when they are noted. */
export function bytesOf(value: unknown): Uint8Array | undefined {
  return typeof value === "object" && value !== null ? made.get(value)?.bytes : undefined;
}

/** What to send for `value`: its bytes when noted, otherwise its JSON text. */
export function encodedOf(value: unknown): string | Uint8Array {
  return bytesOf(value) ?? jsonOf(value);
}
