// The in-memory engine: simulated nodes and fast tests use it wherever a real Docker engine would be.
export {
  FAKE_BUSYBOX,
  FakeEngine,
  type FakeEngineOptions,
  type FakeImage,
  type FakeRegistryImage,
} from "./fake-engine.ts";
