// The log of the action a piece of work belongs to: one line at a time, in order.
export type Log = (line: string) => Promise<void>;
