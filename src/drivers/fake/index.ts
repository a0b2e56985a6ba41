// The in-memory engine: simulated nodes and fast tests use it wherever a real Docker engine would be.

export { FakeEngine } from "./fake-engine.ts";
export {
  FAKE_BUSYBOX,
  type FakeEngineOptions,
  type FakeImage,
  type FakeRegistryImage,
} from "./fake-model.ts";
export { DEFAULT_FAKE_USAGE, type FakeUsage } from "./stats.ts";
