// What the local provider's flows share (its state files, lab plan, host tools and locks), so
// that flows in modules of their own (host-lab.ts, terminate.ts) act as the provider does.
import type { LabPlan } from "./addresses.ts";
import type { CommandRunner } from "./commands.ts";
import type { HostNet, KeyedMutex } from "./host-net.ts";
import type { HostTools } from "./host-tools.ts";
import type { IptablesSetup } from "./iptables.ts";
import type { StateFiles } from "./state.ts";

export interface Setup {
  tools: HostTools;
  iptables: IptablesSetup;
  enginePath: string;
}

export interface ProviderParts {
  readonly state: StateFiles;
  readonly lab: LabPlan;
  readonly bridgeName: string;
  readonly log: (line: string) => void;
  readonly commands: CommandRunner;
  readonly insecureRegistries: string[];
  readonly net: HostNet;
  readonly locks: KeyedMutex;
  setup(): Promise<Setup>;
}
