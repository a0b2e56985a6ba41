// Registries: users' registries and repositories, and Berth's own registry when configured (one
// replica runs it: the one leading the "registry" job); their action kinds and routes.
import type { ActionEngine } from "../actions/engine.ts";
import { REGISTRY_WEBHOOK_PATH, registryRoutes } from "../api/routes/registries.ts";
import type { Core, Routes } from "../composition.ts";
import type { ReplicasModule } from "../ops/module.ts";
import { NativeRegistry } from "./native.ts";
import type { HostLookup } from "./outbound.ts";
import { RegistryService } from "./service.ts";

export type RegistryModule = ReturnType<typeof registryModule>;

export function registryModule(
  core: Core,
  parts: {
    actions: ActionEngine;
    replicas: ReplicasModule;
    /** Replaces the resolver of registry hosts users name (tests: no outside DNS). */
    resolveRegistryHost?: HostLookup;
  },
) {
  const { config, store, clock, box, log, onError } = core;
  const { replicas } = parts;
  const native = config.registry.native;
  const nativeRegistry = native
    ? new NativeRegistry({
        binary: native.binary,
        dataDir: native.dataDir,
        listen: native.listen,
        notifyUrl: `${config.publicUrl}${REGISTRY_WEBHOOK_PATH}`,
        // Any replica may receive the registry's notifications: they all derive the same token.
        token: core.replicated ? box.derive("native-registry-webhook") : undefined,
        log: { info: (line) => log.info(line), warn: (line) => log.warn(line) },
      })
    : undefined;
  const registries = new RegistryService({
    store,
    clock,
    box,
    actions: parts.actions,
    outbound: {
      allow: config.registry.allow,
      insecure: core.insecureRegistries,
      timeoutMs: config.registry.timeoutMs,
      lookup: parts.resolveRegistryHost,
    },
    nativeHost: native?.host,
    log: { warn: (line) => log.warn(line) },
  });
  replicas.onLeadChanged((job, leading) => {
    if (job !== "registry" || !nativeRegistry) return;
    const change = leading && !replicas.stopping ? nativeRegistry.start() : nativeRegistry.stop();
    void change.catch(onError("native registry"));
  });
  const routes: Routes = [
    (a) => registryRoutes(a, { store, registries, webhookToken: nativeRegistry?.token }),
  ];
  return {
    registries,
    nativeRegistry,
    routes,
    /** Without replicas this process runs Berth's own registry; with them, the leader does. */
    async start(): Promise<void> {
      if (!replicas.coordinator) await nativeRegistry?.start();
    },
    async stop(): Promise<void> {
      await nativeRegistry?.stop();
    },
  };
}
