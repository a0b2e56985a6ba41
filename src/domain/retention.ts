// Which backups retention keeps (issue 31): the newest `last`, and besides them the newest backup
// of each of the last `daily` days and of each of the last `weekly` weeks that have one (UTC days;
// weeks start on Monday), as restic's and borg's keep-daily/keep-weekly do. A tier of 0 keeps none.
// Pure: the backups' own times decide, so an injected clock in tests decides too.

export interface RetentionPolicy {
  last: number;
  daily: number;
  weekly: number;
}

const DAY_MS = 86_400_000;

const dayOf = (ms: number) => Math.floor(ms / DAY_MS);
/** Days since the epoch's Monday (1970-01-05 is day 4), divided into weeks. */
const weekOf = (ms: number) => Math.floor((dayOf(ms) - 4) / 7);

/** The ids retention keeps, of backups given with their times (any order). */
export function retained<T extends { id: string; time: number }>(
  backups: readonly T[],
  policy: RetentionPolicy,
): Set<string> {
  const newestFirst = [...backups].sort((a, b) => b.time - a.time || b.id.localeCompare(a.id));
  const keep = new Set(newestFirst.slice(0, Math.max(0, policy.last)).map((b) => b.id));
  const tier = (count: number, period: (ms: number) => number) => {
    const seen = new Set<number>();
    for (const b of newestFirst) {
      if (seen.size >= count) break;
      const p = period(b.time);
      if (seen.has(p)) continue;
      seen.add(p);
      keep.add(b.id);
    }
  };
  tier(policy.daily, dayOf);
  tier(policy.weekly, weekOf);
  return keep;
}

/** How the policy reads in a log line: "the last 3, 7 daily, 4 weekly". */
export function describeRetention(p: RetentionPolicy): string {
  return [
    `the last ${p.last}`,
    ...(p.daily ? [`${p.daily} daily`] : []),
    ...(p.weekly ? [`${p.weekly} weekly`] : []),
  ].join(", ");
}
