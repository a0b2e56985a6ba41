// The fake engine's container events (fake-engine.ts): recorded as they happen, the last few kept
// for `since`, and handed to every open events stream.
import { AsyncQueue, type ContainerEvent, type EventsOptions } from "../engine.ts";
import { EVENTS_REMEMBERED, type FakeContainer } from "./fake-model.ts";

/**
 * One frozen copy of a container's labels for all its events: a simulated node keeps its last
 * EVENTS_REMEMBERED events, and a copy per event was most of what a node held (issue 34).
 */
const frozenLabels = new WeakMap<object, Readonly<Record<string, string>>>();

const NO_LABELS: Record<string, string> = Object.freeze({}) as Record<string, string>;

function labelsOf(container: FakeContainer): Record<string, string> {
  const labels = container.spec.labels ?? NO_LABELS;
  // The engine's own copy of a create request's labels is frozen already (fake-model.ts copySpec).
  if (Object.isFrozen(labels)) return labels;
  let frozen = frozenLabels.get(labels);
  if (!frozen) {
    frozen = Object.freeze({ ...labels });
    frozenLabels.set(labels, frozen);
  }
  return frozen as Record<string, string>;
}

export class FakeEvents {
  private readonly history: ContainerEvent[] = [];
  private readonly subscribers = new Set<AsyncQueue<ContainerEvent>>();

  constructor(
    private readonly now: () => number,
    /** Told of every event, after its subscribers. */
    private readonly emitted: (container: FakeContainer, action: string) => void = () => {},
  ) {}

  /** Whether an events stream is open. */
  get watched(): boolean {
    return this.subscribers.size > 0;
  }

  /** Breaks every open stream, as when the engine's host goes away. */
  fail(error: Error): void {
    for (const subscriber of this.subscribers) subscriber.fail(error);
    this.subscribers.clear();
  }

  /** Ends every open stream (the engine closes). */
  end(): void {
    for (const subscriber of this.subscribers) subscriber.end();
    this.subscribers.clear();
  }

  emit(
    container: FakeContainer,
    action: string,
    extra: { exitCode?: number; signal?: string; execID?: string } = {},
  ): void {
    const event: ContainerEvent = {
      type: "container",
      action,
      id: container.id,
      name: container.name,
      image: container.spec.image,
      labels: labelsOf(container),
      timeMs: this.now(),
    };
    if (extra.exitCode !== undefined) event.exitCode = extra.exitCode;
    if (extra.signal !== undefined) event.signal = extra.signal;
    this.history.push(event);
    if (this.history.length > EVENTS_REMEMBERED) this.history.shift();
    for (const subscriber of this.subscribers) subscriber.push(event);
    this.emitted(container, action);
  }

  async *follow(options: EventsOptions): AsyncGenerator<ContainerEvent> {
    if (options.signal?.aborted) return;
    const since = options.since;
    const past = since === undefined ? [] : this.history.filter((event) => event.timeMs >= since);
    const live: AsyncQueue<ContainerEvent> = new AsyncQueue<ContainerEvent>(() =>
      this.subscribers.delete(live),
    );
    this.subscribers.add(live);
    const onAbort = () => {
      live.end();
      this.subscribers.delete(live);
    };
    options.signal?.addEventListener("abort", onAbort, { once: true });
    try {
      for (const event of past) yield event;
      yield* live;
    } finally {
      options.signal?.removeEventListener("abort", onAbort);
      onAbort();
    }
  }
}
