// The `local` node provider: real Docker engines on this host, one per node, each in a network
// namespace of its own on the lab bridge. See README.md for what it creates and removes.
export { AddressPlanError, MAX_NODE_INDEX } from "./addresses.ts";
export { type CommandResult, type CommandRunner, createCommandRunner } from "./commands.ts";
export { BUSYBOX_IMAGE } from "./images.ts";
export {
  type DeployNodeOptions,
  type LocalNode,
  LocalProvider,
  LocalProviderError,
  type LocalProviderOptions,
  type Prerequisites,
  type RecoveredNode,
} from "./local-provider.ts";
