// Health checks on the wire (issue 29): the `health_check` of Create and Update service (and of
// the views of services and containers), and a container's observed `health`. Additive fields
// (CONTRACT: historical clients ignore what they do not know, and send nothing of it).
import { Type } from "typebox";
import { Nullable, View } from "./common.ts";

const Seconds = (description: string, minimum: number) =>
  Type.Optional(Type.Union([Type.Null(), Type.Number({ minimum, maximum: 3600 })], { description }));

export const HealthCheckBody = Type.Union(
  [
    Type.Null(),
    Type.Object(
      {
        type: Type.Enum(["command", "http", "tcp", "none"], {
          description:
            "command: a shell command run inside the container (exit 0 is healthy); http: GET path on port inside the container answers status; tcp: port inside the container accepts connections; none: turn off the image's HEALTHCHECK",
        }),
        command: Type.Optional(
          Type.Union([Type.Null(), Type.String({ maxLength: 4096 })], {
            description: "command: run with the image's sh, as compose's CMD-SHELL",
          }),
        ),
        port: Type.Optional(
          Type.Union([Type.Null(), Type.Integer({ minimum: 1, maximum: 65535 })], {
            description: "http and tcp: the port inside the container",
          }),
        ),
        path: Type.Optional(
          Type.Union([Type.Null(), Type.String({ maxLength: 1024 })], {
            description: "http: the path asked with GET (default /)",
          }),
        ),
        status: Type.Optional(
          Type.Union([Type.Null(), Type.Integer({ minimum: 100, maximum: 599 })], {
            description: "http: the status that means healthy (default 200)",
          }),
        ),
        interval: Seconds("seconds between checks (default 5; fractions allowed)", 0.1),
        timeout: Seconds("seconds one check may take (default 3)", 0.1),
        retries: Type.Optional(
          Type.Union([Type.Null(), Type.Integer({ minimum: 1, maximum: 100 })], {
            description: "consecutive failures that make a container unhealthy (default 3)",
          }),
        ),
        start_period: Seconds("seconds after a start during which failures do not count (default 0)", 0),
      },
      { additionalProperties: false },
    ),
  ],
  {
    description:
      "the containers' health check, run by their engine inside each container; null: the image's HEALTHCHECK, if it has one",
  },
);

export const HealthCheckView = Nullable(
  View(
    {
      type: Type.String({ description: "command, http, tcp or none" }),
      command: Nullable(Type.String()),
      port: Nullable(Type.Integer()),
      path: Nullable(Type.String()),
      status: Nullable(Type.Integer()),
      interval: Type.Number({ description: "seconds" }),
      timeout: Type.Number({ description: "seconds" }),
      retries: Type.Integer(),
      start_period: Type.Number({ description: "seconds" }),
    },
    "the service's own health check; null: the image's HEALTHCHECK applies, if it has one",
  ),
);

/** How a redeploy replaces the containers (domain/rollout.ts); null: all at once, as before. */
export const RolloutBody = Type.Union(
  [
    Type.Null(),
    Type.Object(
      {
        order: Type.Optional(
          Type.Enum(["stop-first", "start-first"], {
            description:
              "stop-first: a container goes, then its replacement starts; start-first: the replacement starts and is ready before the old one goes (default stop-first)",
          }),
        ),
        max_unavailable: Type.Optional(
          Type.Integer({
            minimum: 0,
            maximum: 100,
            description: "stop-first: containers replaced at once (default 1)",
          }),
        ),
        max_surge: Type.Optional(
          Type.Integer({
            minimum: 0,
            maximum: 100,
            description: "start-first: new containers started beside the old at once (default 1)",
          }),
        ),
        delay: Type.Optional(
          Type.Number({ minimum: 0, maximum: 3600, description: "seconds between two batches (default 0)" }),
        ),
        failure_action: Type.Optional(
          Type.Enum(["rollback", "pause", "continue"], {
            description:
              "when a batch's containers fail to start or to be healthy: rollback to the previous definition, pause the rollout, or continue (default rollback)",
          }),
        ),
      },
      { additionalProperties: false },
    ),
  ],
  { description: "how a redeploy replaces the containers, in batches; null: all at once, as before" },
);

export const RolloutView = Nullable(
  View({
    order: Type.String(),
    max_unavailable: Type.Integer(),
    max_surge: Type.Integer(),
    delay: Type.Number(),
    failure_action: Type.String(),
  }),
);

/** What a service's containers say of its health, worst first (domain/health.ts serviceHealth). */
export const ServiceHealthField = Type.Enum(["crashing", "unhealthy", "starting", "healthy", "none"], {
  description:
    "crashing: a container that should run exited with an error, or its engine has restarted it since Berth started it; unhealthy: a container's health check fails; starting: a check has not decided yet; healthy: every checked container passes; none: no container has a check",
});

/** A container's health as its engine last reported it. */
export const HealthField = Type.Enum(["starting", "healthy", "unhealthy", "none"], {
  description:
    "the container's health check as its engine last reported it: starting, healthy, unhealthy, or none when it has no check",
});
