// Loading one resource for a section of the account page, with a reload after a change.
import { useEffect, useState } from "preact/hooks";
import { get } from "../../api.ts";

export function useLoad<T>(url: string): { data?: T; error?: unknown; reload(): void } {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    get<T>(url).then(
      (d) => {
        setData(d);
        setError(undefined);
      },
      (e: unknown) => setError(e),
    );
  }, [url, tick]);
  return { data, error, reload: () => setTick((t) => t + 1) };
}
