// Linux signals as the fake engine and its shell name them.
import { SIGNALS } from "../../domain/stop.ts";

/** Linux's signal numbers (a container's stop signal may be any of them). */
export const SIGNAL_NUMBERS: Record<string, number> = Object.fromEntries(
  SIGNALS.map((name, i) => [name, i + 1]),
);

/** Accepts "SIGTERM", "TERM", "term" or "15"; undefined for an unknown signal. */
export function normalizeSignal(signal: string): string | undefined {
  const upper = signal.trim().toUpperCase();
  if (/^\d+$/.test(upper)) {
    return Object.entries(SIGNAL_NUMBERS).find(([, number]) => String(number) === upper)?.[0];
  }
  const name = upper.startsWith("SIG") ? upper : `SIG${upper}`;
  return name in SIGNAL_NUMBERS ? name : undefined;
}
