// Hide terminated: lists leave out terminated objects (kept for their history) unless asked for,
// through the API's `state__not` filter, so paging and counts are right at any size.
import { signal } from "@preact/signals";

const HIDE_KEY = "berth.hideTerminated";
/** Whether lists leave out terminated objects (on unless turned off; kept in this browser). */
export const hideTerminated = signal<boolean>(readHide());
function readHide(): boolean {
  try {
    return globalThis.localStorage?.getItem(HIDE_KEY) !== "0";
  } catch {
    return true;
  }
}

/** The list query's `state__not`: Terminated while hidden, unless a state is chosen. */
export const stateNot = (state: string): string | undefined =>
  hideTerminated.value && !state ? "Terminated" : undefined;

/** The "Hide terminated" switch of a list (one setting for every list). */
export function HideTerminated(props: { onChange?(): void }) {
  return (
    <label>
      <input
        type="checkbox"
        name="hide_terminated"
        checked={hideTerminated.value}
        onChange={(e) => {
          hideTerminated.value = (e.target as HTMLInputElement).checked;
          try {
            globalThis.localStorage?.setItem(HIDE_KEY, hideTerminated.value ? "1" : "0");
          } catch {
            // A browser without storage keeps the setting for this page only.
          }
          props.onChange?.();
        }}
      />{" "}
      Hide terminated
    </label>
  );
}
