// The Engine's calls on a container's files (volume backups, issue 31), declared beside the
// Engine interface (engine.ts) as a module augmentation so that file stays short. Both drivers
// implement them: docker (the Engine API's archive and pause calls) and fake (fake-files.ts).
import type { Readable } from "node:stream";

declare module "./engine.ts" {
  interface Engine {
    /**
     * A tar stream of `path` in the container (`GET /containers/{id}/archive`), its entries named
     * from the path's last segment (`/data` gives `data/…`); it fails past VOLUME_ARCHIVE.bytes or
     * after VOLUME_ARCHIVE.idleMs of silence (bounds.ts).
     */
    readArchive(id: string, path: string): Promise<Readable>;
    /** Extracts a tar stream into the directory `path` of the container (`PUT /containers/{id}/archive`). */
    writeArchive(id: string, path: string, tar: Readable): Promise<void>;
    /** Freezes a running container's processes (a consistent copy of its files); unpause thaws them. */
    pauseContainer(id: string): Promise<void>;
    unpauseContainer(id: string): Promise<void>;
  }
}
