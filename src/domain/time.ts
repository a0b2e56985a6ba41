// Timestamp forms of the wire (CONTRACT §4, §11). The store keeps epoch milliseconds.

/** REST form: `Sun, 22 Nov 2026 03:17:08 +0000`, or null. */
export function restTime(ms: number | null | undefined): string | null {
  if (ms === null || ms === undefined) return null;
  return new Date(ms).toUTCString().replace(/GMT$/, "+0000");
}

/** Accounts form: ISO 8601 UTC with microseconds and a trailing Z. */
export function accountsTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

/** Event form: ISO 8601 UTC. */
export function eventTime(ms: number): string {
  return new Date(ms).toISOString();
}

/** Parses a date filter value: REST form, ISO 8601 or a date; undefined when it is not a date. */
export function parseDateFilter(value: string): number | undefined {
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
}

export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
