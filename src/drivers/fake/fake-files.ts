// The fake engine's container files, for volume backups (Engine.readArchive / writeArchive): a
// map of absolute paths to contents per container, read and written as tar archives named the way
// Docker names them (`/data` gives `data/…`). Tests write a container's files with `writeFile`.
import path from "node:path/posix";
import { Readable } from "node:stream";
import { EngineError } from "../engine.ts";
import type { FakeContainer } from "./fake-model.ts";
import { readTar, writeTar } from "./tar.ts";

export class FakeFiles {
  private readonly files = new Map<string, Map<string, Buffer>>();

  /** `container(id)` answers the engine's container (reachable, existing) or throws as the engine does. */
  constructor(private readonly container: (id: string) => FakeContainer) {}

  readonly readArchive = async (id: string, dir: string): Promise<Readable> =>
    this.archive(this.container(id).id, dir);
  readonly writeArchive = (id: string, dir: string, tar: Readable): Promise<void> =>
    this.extract(this.container(id).id, dir, tar);
  readonly pause = async (id: string): Promise<void> => {
    const c = this.container(id);
    if (c.state !== "running") throw new EngineError("conflict", `Container ${c.id} is not running`, 409);
  };
  readonly unpause = async (id: string): Promise<void> => {
    this.container(id);
  };

  private of(id: string): Map<string, Buffer> {
    let m = this.files.get(id);
    if (!m) {
      m = new Map();
      this.files.set(id, m);
    }
    return m;
  }

  write(id: string, file: string, data: Buffer): void {
    this.of(id).set(path.normalize(file), data);
  }

  read(id: string, file: string): Buffer | undefined {
    return this.files.get(id)?.get(path.normalize(file));
  }

  archive(id: string, dir: string): Readable {
    const root = path.normalize(dir);
    const base = path.dirname(root);
    const entries = [...this.of(id)]
      .filter(([f]) => f === root || f.startsWith(`${root}/`))
      .map(([f, data]) => ({ name: path.relative(base, f), data }));
    if (entries.length === 0 && ![...this.of(id).keys()].some((f) => f.startsWith(`${root}/`)))
      // An empty volume archives as its directory alone; the fake keeps no directories.
      return Readable.from([writeTar([])]);
    return Readable.from([writeTar(entries)]);
  }

  async extract(id: string, dir: string, tar: Readable): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of tar) chunks.push(Buffer.from(chunk as Buffer));
    let entries: ReturnType<typeof readTar>;
    try {
      entries = readTar(Buffer.concat(chunks));
    } catch (err) {
      throw new EngineError("other", `not a tar archive: ${(err as Error).message}`, 400);
    }
    for (const e of entries) this.write(id, path.join(dir, e.name), e.data);
  }

  forget(id: string): void {
    this.files.delete(id);
  }
}
