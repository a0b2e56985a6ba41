// Stacks (spec "Stacks", "Stack states"; CONTRACT §12): groups of linked services created,
// updated, started, stopped, redeployed and terminated together. What the API and the
// composition root see of them, made of three parts:
// - definitions.ts: create, update and export (stack files in either dialect);
// - operations.ts: the stack action kinds and the follower that records a stack's state;
// - views.ts: stack views and `include_related`;
// with state.ts holding what they share (a stack's state from its services, start order).
import type { ActionEngine } from "../actions/engine.ts";
import type { StackCreateBody, StackUpdateBody } from "../contract/stack.ts";
import type { Clock } from "../domain/time.ts";
import type { Principal } from "../identity/service.ts";
import type { ServiceManager } from "../orchestrator/manager.ts";
import type { Orchestrator } from "../orchestrator/services.ts";
import type { StackRow } from "../store/stacks.ts";
import type { Store } from "../store/store.ts";
import { StackDefinitions } from "./definitions.ts";
import { StackOperations } from "./operations.ts";
import { StackViews } from "./views.ts";

export interface StackDeps {
  store: Store;
  clock: Clock;
  services: ServiceManager;
  orchestrator: Orchestrator;
  /** How often the change feed is read besides the in-process wake-ups (other processes' changes). */
  pollMs?: number;
  onError?(err: unknown): void;
}

export class StackService {
  private readonly definitions: StackDefinitions;
  private readonly operations: StackOperations;
  private readonly views_: StackViews;

  constructor(d: StackDeps) {
    this.definitions = new StackDefinitions(d);
    this.operations = new StackOperations(d);
    this.views_ = new StackViews(d.store);
  }

  view = (st: StackRow, read?: Set<string>) => this.views_.view(st, read);
  views = (rows: StackRow[], read?: Set<string>) => this.views_.views(rows, read);
  get related() {
    return this.views_.related;
  }

  checkBody = (body: unknown) => this.definitions.checkBody(body);
  create = (namespace: string, principal: Principal, body: StackCreateBody) =>
    this.definitions.create(namespace, principal, body);
  update = (st: StackRow, principal: Principal, body: StackUpdateBody) =>
    this.definitions.update(st, principal, body);
  exportStack = (st: StackRow) => this.definitions.exportStack(st);

  register = (actions: ActionEngine) => this.operations.register(actions);
  settle = (uuid: string) => this.operations.settle(uuid);
  /** Follows the change feed (stacks/follower.ts): service changes and ended actions settle their stack. */
  start = () => this.operations.start();
  stop = () => this.operations.stop();
}
