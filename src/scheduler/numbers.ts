// Container numbering: containers are named `<service>-<number>`.

/**
 * Numbers for `count` new containers: the lowest positive numbers not in `existing` (the numbers
 * of live containers), so numbers freed by terminated containers are reused and names stay short.
 */
export function nextContainerNumbers(existing: number[], count: number): number[] {
  const taken = new Set(existing);
  const numbers: number[] = [];
  for (let candidate = 1; numbers.length < count; candidate++) {
    if (!taken.has(candidate)) numbers.push(candidate);
  }
  return numbers;
}
