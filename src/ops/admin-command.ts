// `npm run admin -- backup <file>` / `npm run admin -- restore <file>` from a checkout (admin.ts;
// the berth command line runs the same as `berth admin backup|restore <file>`).
import { admin } from "./admin.ts";

process.exitCode = await admin(
  process.argv.slice(2),
  process.env,
  undefined,
  "usage: npm run admin -- backup <file> | restore <file>",
);
