// One place that maps errors to HTTP: coded ApiErrors, schema validation, body parsing, size.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ApiError, type ErrorKind, type FieldProblem, VersionConflict } from "../domain/errors.ts";
import { isDatabaseBusy } from "../store/open-errors.ts";
import { isDashboardCall } from "./session.ts";

const STATUS: Record<ErrorKind, number> = {
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  payload_too_large: 413,
  rate_limited: 429,
};

interface AjvError {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
}

/** `/container_ports/0/inner_port` → `container_ports[0].inner_port` */
export function fieldPath(instancePath: string, extra?: string): string {
  const parts = instancePath.split("/").filter(Boolean);
  if (extra) parts.push(extra);
  return parts.reduce((acc, p) => (/^\d+$/.test(p) ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), "");
}

function problemOf(e: AjvError): FieldProblem {
  const extra =
    e.keyword === "required"
      ? String(e.params.missingProperty)
      : e.keyword === "additionalProperties"
        ? String(e.params.additionalProperty)
        : undefined;
  let problem = e.message ?? "is invalid";
  if (e.keyword === "required") problem = "is required";
  else if (e.keyword === "additionalProperties") problem = "is not a known field";
  else if (e.keyword === "enum")
    problem = `must be one of ${(e.params.allowedValues as unknown[]).join(", ")}`;
  else if (e.keyword === "type")
    problem = `must be ${e.params.type === "integer" ? "an integer" : `of type ${e.params.type}`}`;
  else if (e.keyword === "maxLength") problem = `must be at most ${String(e.params.limit)} characters`;
  else if (e.keyword === "minLength") problem = `must be at least ${String(e.params.limit)} characters`;
  else if (e.keyword === "maxItems") problem = `must have at most ${String(e.params.limit)} items`;
  else if (e.keyword === "maxProperties") problem = `must have at most ${String(e.params.limit)} keys`;
  else if (e.keyword === "maximum" || e.keyword === "minimum")
    problem = `must be ${e.keyword === "maximum" ? "at most" : "at least"} ${String(e.params.limit)}`;
  return { field: fieldPath(e.instancePath, extra) || "body", problem };
}

/**
 * A value that fits no branch of a union (`null` or an integer) makes ajv report every branch and
 * the union itself; the bound it broke says more than "must be of type null".
 */
function usefulErrors(errors: AjvError[]): AjvError[] {
  const telling = errors.filter((e) => e.keyword !== "anyOf" && e.keyword !== "type");
  const out = errors.filter(
    (e) =>
      (e.keyword !== "anyOf" && e.keyword !== "type") ||
      !telling.some((t) => t.instancePath === e.instancePath),
  );
  return out.length ? out : errors;
}

export function sendError(request: FastifyRequest, reply: FastifyReply, err: ApiError): FastifyReply {
  request.audit.failure = err.message;
  const body: Record<string, unknown> = { error: err.message, code: err.code };
  if (err.details?.length) body.details = err.details;
  // The dashboard handles a 401 itself; a Basic challenge would make the browser open its dialog.
  if (err.kind === "unauthorized" && !isDashboardCall(request))
    reply.header("WWW-Authenticate", 'Basic realm="berth"');
  for (const [k, v] of Object.entries(err.headers ?? {})) reply.header(k, v);
  return reply.status(STATUS[err.kind]).send(body);
}

export interface ErrorHandlingOptions {
  /** The methods a path defines, when some route matches it (405 instead of 404 for the others). */
  allowedMethods?: (path: string) => string[] | undefined;
}

export function installErrorHandling(app: FastifyInstance, options: ErrorHandlingOptions = {}): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error instanceof ApiError) return sendError(request, reply, error);
    // A version check still lost after its retries: the object keeps changing under the call.
    if (error instanceof VersionConflict) {
      return sendError(
        request,
        reply,
        new ApiError("conflict", "changed_concurrently", `${error.message}; send the request again`),
      );
    }
    if (error.validation) {
      const where = error.validationContext === "querystring" ? "query parameter" : error.validationContext;
      const details = usefulErrors(error.validation as AjvError[]).map(problemOf);
      const first = details[0];
      const message = first
        ? `Invalid ${where}: ${first.field || where} ${first.problem}.`
        : "Invalid request.";
      return sendError(request, reply, new ApiError("bad_request", "invalid_field", message, details));
    }
    if (error.code === "FST_ERR_CTP_BODY_TOO_LARGE") {
      return sendError(
        request,
        reply,
        new ApiError("payload_too_large", "body_too_large", "The body is larger than 1 MiB."),
      );
    }
    if (error instanceof SyntaxError || error.code === "FST_ERR_CTP_INVALID_JSON_BODY") {
      return sendError(
        request,
        reply,
        new ApiError("bad_request", "invalid_json", "The body is not valid JSON."),
      );
    }
    // Overload, not a fault: the database had no connection (or lock) to give within its wait.
    if (isDatabaseBusy(error)) {
      return sendError(
        request,
        reply,
        new ApiError(
          "rate_limited",
          "database_busy",
          "The platform's database is busy; send the request again in a second.",
          undefined,
          { "Retry-After": "1" },
        ),
      );
    }
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      const code = (error.code ?? "bad_request").toLowerCase().replace(/^fst_err_/, "");
      request.audit.failure = error.message;
      return reply.status(status).send({ error: error.message, code });
    }
    request.log.error({ err: error }, "unhandled error");
    request.audit.failure = "Internal error";
    return reply
      .status(500)
      .send({ error: "Internal error; the server log has the details.", code: "internal" });
  });

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split("?")[0]!;
    // Any method the router has no route for (OPTIONS, TRACE, PROPFIND, …) on a path that exists.
    const allow = options.allowedMethods?.(path);
    if (allow?.length) {
      reply.header("Allow", allow.join(", "));
      return sendError(request, reply, methodNotAllowed(request.method, allow));
    }
    return sendError(request, reply, new ApiError("not_found", "not_found", `No such path: ${path}`));
  });
}

export function methodNotAllowed(method: string, allow: string[]): ApiError {
  return new ApiError(
    "method_not_allowed",
    "method_not_allowed",
    `${method} is not allowed here; use ${allow.join(", ")}.`,
  );
}

/** What the HTTP layer refused before any route ran, as `{error, code}` with its status. */
export interface EarlyRefusal {
  status: number;
  error: string;
  code: string;
  headers?: Record<string, string>;
}

/** Errors Fastify raises while routing (`frameworkErrors`): a bad percent-escape, an overlong parameter. */
export function frameworkRefusal(error: FastifyError): EarlyRefusal {
  if (error.code === "FST_ERR_MAX_PARAM_LENGTH")
    return {
      status: 414,
      error: "A path segment is too long (at most 100 characters).",
      code: "uri_too_long",
    };
  if (error.code === "FST_ERR_BAD_URL")
    return {
      status: 400,
      error: "The path has an invalid percent-escape (% must be followed by two hex digits).",
      code: "bad_url",
    };
  return { status: error.statusCode ?? 400, error: "The request cannot be routed.", code: "bad_request" };
}

/**
 * Errors Node's HTTP parser raises before Fastify sees a request (`clientErrorHandler`); `allow`
 * gives the methods of a path when the request line could still be read.
 */
export function clientRefusal(
  error: NodeJS.ErrnoException,
  requestLine?: { method: string; allow?: string[] },
): EarlyRefusal {
  switch (error.code) {
    case "HPE_HEADER_OVERFLOW":
      return {
        status: 431,
        error: "The request line and headers are larger than 16 KiB.",
        code: "headers_too_large",
      };
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return { status: 408, error: "The request took too long to arrive.", code: "request_timeout" };
    case "HPE_INVALID_METHOD":
      if (requestLine?.allow?.length)
        return {
          status: 405,
          error: `${requestLine.method} is not allowed here; use ${requestLine.allow.join(", ")}.`,
          code: "method_not_allowed",
          headers: { Allow: requestLine.allow.join(", ") },
        };
      return { status: 400, error: "The request method is not an HTTP method.", code: "invalid_method" };
    default:
      return { status: 400, error: "The request is not valid HTTP/1.1.", code: "bad_request" };
  }
}

/** Tries of the answer's read after a committed write (answerOfWritten), and the wait between them. */
const WRITTEN_ANSWER_TRIES = 4;
const WRITTEN_ANSWER_WAIT_MS = 250;

/**
 * The answer of a call whose write has committed. A read that finds the database busy (no pool
 * connection within its wait) is tried again, a few times: the caller must not be told to send
 * the call again (429 database_busy) for work that was done, nor its action be marked failed
 * (a create sent again would meet its own name).
 */
export async function answerOfWritten<T>(read: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await read();
    } catch (error) {
      if (!isDatabaseBusy(error) || attempt >= WRITTEN_ANSWER_TRIES) throw error;
      await new Promise((resolve) => setTimeout(resolve, WRITTEN_ANSWER_WAIT_MS));
    }
  }
}
