// One place that maps errors to HTTP: coded ApiErrors, schema validation, body parsing, size.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ApiError, type ErrorKind, type FieldProblem } from "../domain/errors.ts";
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
  return { field: fieldPath(e.instancePath, extra) || "body", problem };
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

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error instanceof ApiError) return sendError(request, reply, error);
    if (error.validation) {
      const where = error.validationContext === "querystring" ? "query parameter" : error.validationContext;
      const details = (error.validation as AjvError[]).map(problemOf);
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

  app.setNotFoundHandler((request, reply) =>
    sendError(
      request,
      reply,
      new ApiError("not_found", "not_found", `No such path: ${request.url.split("?")[0]}`),
    ),
  );
}
