#!/usr/bin/env node
// The Berth agent from a checkout (`berth-agent --url <Berth URL> --token <token>`): makes this
// server a node of Berth through an outbound tunnel. Runs the TypeScript sources through tsx; the
// single-file form that needs only Node is served by Berth at /api/agent/v1/berth-agent.mjs.
import { register } from "tsx/esm/api";

register();
await import("../src/agent/cli.ts");
