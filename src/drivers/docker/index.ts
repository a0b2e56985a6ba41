// The Engine implementation for real Docker engines (Engine API 1.41+, through dockerode).
export { DockerEngine, type DockerEngineOptions } from "./docker-engine.ts";
export { type DockerEndpoint, type DockerTls, describeEndpoint, parseDockerEndpoint } from "./endpoint.ts";
