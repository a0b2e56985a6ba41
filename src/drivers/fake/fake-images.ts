// The fake engine's images (fake-engine.ts): present by id and tags, and the registry they are pulled
// from and pushed to, with Docker's answers and errors; `docker save` and `docker load` archives.
import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import {
  EngineError,
  envToRecord,
  normalizeImageRef,
  type PullImageOptions,
  type PushImageOptions,
  splitImageTag,
} from "../engine.ts";
import {
  configJson,
  defaultPrograms,
  type FakeImage,
  type FakeRegistryImage,
  type ImageConfig,
  imageConfig,
  type StoredImage,
} from "./fake-model.ts";
import { readTar, writeTar } from "./tar.ts";

export class FakeImageStore {
  private readonly images = new Map<string, StoredImage>();
  /** Normalized reference → image id. */
  private readonly tags = new Map<string, string>();
  private readonly registry = new Map<string, FakeRegistryImage>();

  /** The image stored under this id. */
  get(id: string): StoredImage | undefined {
    return this.images.get(id);
  }

  /** An image another copy of this engine has (drivers/fake/synced.ts): the same config, the same id. */
  keep(image: StoredImage): StoredImage {
    const known = this.images.get(image.id);
    if (known) return known;
    this.images.set(image.id, image);
    return image;
  }

  /** Offers an image in the engine's registry (to be pulled). */
  offer(image: FakeRegistryImage): void {
    this.registry.set(normalizeImageRef(image.ref), image);
  }

  /** Makes an image present, as if built or loaded on the node. Returns its id. */
  add(image: FakeImage): string {
    const config = imageConfig(image);
    return this.store(
      config,
      [image.ref],
      image.programs ? new Set(image.programs) : defaultPrograms(config),
    );
  }

  /** A `docker save` archive of an image, for loading into another engine. */
  save(ref: string): Readable {
    const imageId = this.resolveImage(ref);
    const image = imageId ? this.images.get(imageId) : undefined;
    if (!image) throw new EngineError("image_not_found", `No such image: ${ref}`, 404);
    const hex = image.id.slice("sha256:".length);
    const layer = writeTar([]);
    const repoTags = [...this.tags].filter(([, id]) => id === image.id).map(([tag]) => tag);
    const archive = writeTar([
      { name: `${hex}.json`, data: Buffer.from(configJson(image.config)) },
      { name: `${hex}/layer.tar`, data: layer },
      {
        name: "manifest.json",
        data: Buffer.from(
          JSON.stringify([{ Config: `${hex}.json`, RepoTags: repoTags, Layers: [`${hex}/layer.tar`] }]),
        ),
      },
    ]);
    return Readable.from([archive]);
  }

  store(config: ImageConfig, refs: string[], programs: Set<string>): string {
    const json = configJson(config);
    // Like Docker, the id is the digest of the config, so the same image has the same id on every engine.
    const id = `sha256:${createHash("sha256").update(json).digest("hex")}`;
    const existing = this.images.get(id);
    if (existing) for (const program of programs) existing.programs.add(program);
    else this.images.set(id, { id, config, programs });
    for (const ref of refs) this.tags.set(normalizeImageRef(ref), id);
    return id;
  }

  resolveImage(ref: string): string | undefined {
    const tagged = this.tags.get(normalizeImageRef(ref));
    if (tagged) return tagged;
    const hex = ref.replace(/^sha256:/, "");
    if (!/^[0-9a-f]{4,64}$/.test(hex)) return undefined;
    const matches = [...this.images.keys()].filter((id) => id.slice("sha256:".length).startsWith(hex));
    return matches.length === 1 ? matches[0] : undefined;
  }

  async pull(ref: string, options: PullImageOptions = {}): Promise<void> {
    const normalized = normalizeImageRef(ref);
    const image = this.registry.get(normalized);
    const [repository, tag] = [
      normalized.slice(0, normalized.lastIndexOf(":")),
      normalized.split(":").at(-1),
    ];
    if (!image) {
      throw new EngineError(
        "image_not_found",
        `manifest for ${normalized} not found: manifest unknown: manifest unknown`,
        404,
      );
    }
    if (image.auth) {
      const given = options.auth;
      if (!given || given.username !== image.auth.username || given.password !== image.auth.password) {
        throw new EngineError(
          "other",
          `Head "https://${repository}/manifests/${tag}": unauthorized: authentication required`,
          500,
        );
      }
    }
    const wasPresent = this.tags.has(normalized);
    const id = this.add(image);
    options.onProgress?.(`${tag}: Pulling from ${repository}`);
    options.onProgress?.(`Digest: ${id}`);
    options.onProgress?.(
      wasPresent
        ? `Status: Image is up to date for ${normalized}`
        : `Status: Downloaded newer image for ${normalized}`,
    );
  }

  tag(source: string, target: string): void {
    const id = this.resolveImage(source);
    if (!id) throw new EngineError("image_not_found", `No such image: ${source}`, 404);
    this.tags.set(normalizeImageRef(target), id);
  }

  /** Puts the image into this engine's registry, under the same credentials as what it replaces. */
  async push(ref: string, options: PushImageOptions = {}): Promise<void> {
    const normalized = normalizeImageRef(ref);
    const [repository, tag] = splitImageTag(ref);
    const id = this.tags.get(normalized);
    const image = id ? this.images.get(id) : undefined;
    if (!image) {
      throw new EngineError(
        "image_not_found",
        `An image does not exist locally with the tag: ${repository}`,
        404,
      );
    }
    const wanted = this.registry.get(normalized)?.auth;
    const given = options.auth;
    if (wanted && (given?.username !== wanted.username || given.password !== wanted.password)) {
      throw new EngineError("other", "unauthorized: authentication required");
    }
    const c = image.config;
    this.registry.set(normalized, {
      ref: normalized,
      cmd: c.Cmd ?? undefined,
      entrypoint: c.Entrypoint ?? undefined,
      env: c.Env ? envToRecord(c.Env) : undefined,
      exposedPorts: c.ExposedPorts
        ? Object.keys(c.ExposedPorts).map((key) => {
            const [port, protocol] = key.split("/");
            return { containerPort: Number(port), protocol: protocol === "udp" ? "udp" : "tcp" };
          })
        : undefined,
      workingDir: c.WorkingDir || undefined,
      labels: c.Labels ?? undefined,
      programs: [...image.programs],
      ...(c.Healthcheck ? { healthcheck: c.Healthcheck } : {}),
      ...(c.Serves ? { serves: c.Serves } : {}),
      ...(wanted ? { auth: wanted } : {}),
    });
    options.onProgress?.(`The push refers to repository [${repository}]`);
    options.onProgress?.(`${tag}: digest: ${id} size: 0`);
  }

  async load(tar: Readable): Promise<string[]> {
    const chunks: Buffer[] = [];
    for await (const chunk of tar)
      chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : (chunk as Buffer));
    const entries = new Map(readTar(Buffer.concat(chunks)).map((entry) => [entry.name, entry.data]));
    const manifestData = entries.get("manifest.json");
    if (!manifestData) {
      throw new EngineError(
        "other",
        "Error processing tar file: open manifest.json: no such file or directory",
        500,
      );
    }
    const manifest = JSON.parse(manifestData.toString("utf8")) as Array<{
      Config: string;
      RepoTags?: string[] | null;
    }>;
    const loaded: string[] = [];
    for (const entry of manifest) {
      const configData = entries.get(entry.Config);
      if (!configData)
        throw new EngineError("other", `Error processing tar file: missing ${entry.Config}`, 500);
      const config = (JSON.parse(configData.toString("utf8")) as { config?: ImageConfig }).config ?? {};
      const refs = entry.RepoTags ?? [];
      const id = this.store(config, refs, defaultPrograms(config));
      loaded.push(...(refs.length > 0 ? refs : [id]));
    }
    return loaded;
  }
}
