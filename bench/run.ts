// `npm run bench`: runs the benchmarks (not tests; nothing fails on a slow machine) and prints
// their figures. Without options, the events fan-out runs twice with 1,000 subscribers: at a
// steady rate (delay under normal load) and as fast as it goes (throughput when saturated).
// Options run one scenario: --subscribers N, --events N, --rate N (events per second), --batch N.
import { parseArgs } from "node:util";
import { type FanoutOptions, formatFanout, runEventsFanout } from "./events-fanout.ts";

const { values } = parseArgs({
  options: {
    subscribers: { type: "string" },
    events: { type: "string" },
    rate: { type: "string" },
    batch: { type: "string" },
  },
});

const positive = (name: string, text: string | undefined, fallback: number): number => {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name} must be a positive integer, got "${text}"`);
  return n;
};

const scenarios: FanoutOptions[] = Object.values(values).some((v) => v !== undefined)
  ? [
      {
        subscribers: positive("subscribers", values.subscribers, 1000),
        events: positive("events", values.events, 1000),
        ratePerS: positive("rate", values.rate, 100),
        batch: positive("batch", values.batch, 1),
      },
    ]
  : [
      { subscribers: 1000, events: 500, ratePerS: 50, batch: 1 },
      { subscribers: 1000, events: 3000, ratePerS: 100_000, batch: 50 },
    ];

for (const scenario of scenarios) {
  process.stdout.write(`${formatFanout(await runEventsFanout(scenario))}\n`);
}
