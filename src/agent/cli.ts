// Entry of the agent bundle (src/agent/bundle.ts): runs the command line and exits with its status.
import { main } from "./main.ts";

process.exit(await main(process.argv.slice(2)));
