// Errors of the store that callers tell apart, in a module of their own so store sections can
// raise them without importing the store (which imports them).

/** A write would give a name or key that must be unique to a second row. */
export class UniqueViolation extends Error {}

/** Whether a database error is a unique-constraint violation, on SQLite or PostgreSQL. */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return (
    e?.code === "23505" ||
    e?.code === "SQLITE_CONSTRAINT_UNIQUE" ||
    e?.code === "SQLITE_CONSTRAINT_PRIMARYKEY"
  );
}
