// Light or dark: the system's setting unless this browser chose one with the toggle (kept in
// localStorage, set as data-theme on <html> before the first paint by main.tsx's first import).
import { signal } from "@preact/signals";

export type Theme = "system" | "light" | "dark";
const KEY = "berth.theme";

function stored(): Theme {
  try {
    const v = globalThis.localStorage?.getItem(KEY);
    return v === "light" || v === "dark" ? v : "system";
  } catch {
    return "system";
  }
}

export const theme = signal<Theme>(stored());

function apply(t: Theme): void {
  const root = document.documentElement;
  if (t === "system") delete root.dataset.theme;
  else root.dataset.theme = t;
}
apply(theme.value);

/** The theme in effect: the chosen one, or the system's. */
export function effectiveTheme(): "light" | "dark" {
  if (theme.value !== "system") return theme.value;
  return globalThis.matchMedia?.("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

export function setTheme(t: Theme): void {
  theme.value = t;
  apply(t);
  try {
    if (t === "system") globalThis.localStorage?.removeItem(KEY);
    else globalThis.localStorage?.setItem(KEY, t);
  } catch {
    // Without storage the choice lasts for this page.
  }
}

const NEXT: Record<Theme, Theme> = { system: "dark", dark: "light", light: "system" };
const LABEL: Record<Theme, string> = { system: "Theme: system", dark: "Theme: dark", light: "Theme: light" };

/** Cycles system → dark → light. */
export function ThemeToggle() {
  const t = theme.value;
  return (
    <button
      type="button"
      class="theme-toggle"
      title={`${LABEL[t]} (click for ${NEXT[t]})`}
      aria-label={LABEL[t]}
      onClick={() => setTheme(NEXT[t])}
    >
      {t === "dark" ? "☾" : t === "light" ? "☀" : "◐"}
    </button>
  );
}
