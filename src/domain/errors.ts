// Coded errors. The HTTP layer maps them to status codes in one place (api/errors.ts);
// domain and store code throw them without knowing about HTTP.

export interface FieldProblem {
  field: string;
  problem: string;
}

export type ErrorKind =
  | "bad_request"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "method_not_allowed"
  | "conflict"
  | "payload_too_large"
  | "rate_limited";

export class ApiError extends Error {
  constructor(
    readonly kind: ErrorKind,
    readonly code: string,
    message: string,
    readonly details?: FieldProblem[],
    readonly headers?: Record<string, string>,
  ) {
    super(message);
  }
}

export const badRequest = (message: string, details?: FieldProblem[], code = "invalid_request") =>
  new ApiError("bad_request", code, message, details);

export function invalidField(field: string, problem: string): ApiError {
  return new ApiError("bad_request", "invalid_field", `${field}: ${problem}`, [{ field, problem }]);
}

export const notFound = (what = "object") => new ApiError("not_found", "not_found", `No such ${what}.`);

export const conflict = (message: string, code = "conflict") => new ApiError("conflict", code, message);

export const forbidden = (message: string, code = "forbidden") => new ApiError("forbidden", code, message);

export const unauthorized = (message = "Authentication credentials were not provided or are invalid.") =>
  new ApiError("unauthorized", "unauthorized", message);

/** A state-table refusal: names the state and what is allowed in it (CONTRACT §6). */
export function stateConflict(what: string, state: string, operation: string, allowedIn: string[]): ApiError {
  const where = allowedIn.length
    ? `${operation} is allowed in ${allowedIn.join(", ")}`
    : `${operation} is not allowed`;
  return new ApiError("conflict", "invalid_state", `${what} is ${state}; ${where}`);
}

/** Raised by the store when an optimistic version check fails. */
export class VersionConflict extends Error {
  constructor(what: string) {
    super(`${what} was changed concurrently`);
  }
}
