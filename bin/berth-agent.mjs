#!/usr/bin/env node
// The Berth agent (`berth-agent --url <Berth URL> --token <token>`): makes this server a node of
// Berth through an outbound tunnel. Registers tsx so the TypeScript sources run as they are.
import { register } from "tsx/esm/api";

register();
const { main } = await import("../src/agent/main.ts");
process.exit(await main(process.argv.slice(2)));
