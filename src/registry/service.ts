// Registries and external repositories (spec "Registry", "External repository"): the registries a
// namespace sees (Berth's own, when it runs one, and those of its repositories), repositories with
// credentials checked against the registry and sealed at rest, the credentials a pull uses, and
// auto-redeploy when an image is pushed to Berth's registry.
import { createHash, randomUUID } from "node:crypto";
import type { ActionEngine } from "../actions/engine.ts";
import type { CallMeta } from "../actions/types.ts";
import { ApiError, badRequest, conflict, invalidField } from "../domain/errors.ts";
import { parseImageRef, parseRepositoryName, splitHost } from "../domain/images.ts";
import type { Clock } from "../domain/time.ts";
import { registryUri, serviceUri } from "../domain/uri.ts";
import type { RegistryAuth } from "../drivers/engine.ts";
import type { SecretBox } from "../identity/secret-box.ts";
import { decodeCredentials, specOf } from "../store/codec.ts";
import type { RepositoryRow } from "../store/registries.ts";
import { type Store, UniqueViolation } from "../store/store.ts";
import { type OutboundPolicy, usesPlainHttp } from "./outbound.ts";
import { type Credentials, checkCredentials, RegistryCheckError } from "./v2.ts";

export interface RegistryServiceDeps {
  store: Store;
  clock: Clock;
  box: SecretBox;
  actions: ActionEngine;
  outbound: OutboundPolicy;
  /** host[:port] of Berth's own registry, when it runs one. */
  nativeHost?: string;
  log: { warn(line: string): void };
}

export interface RegistryView {
  uuid: string;
  resource_uri: string;
  name: string;
  host: string;
  is_native_registry: boolean;
  is_ssl: boolean;
  port: number;
}

export interface RepositoryView {
  uuid: string;
  resource_uri: string;
  name: string;
  in_use: boolean;
  registry: string;
}

export { registryUri };
export const repositoryUri = (namespace: string, name: string) =>
  `/api/repo/v1/${namespace}/repository/${name}/`;

/** A stable uuid per registry host, so `uuid` filters keep working across restarts. */
function hostUuid(host: string): string {
  const h = createHash("sha1").update(`berth-registry:${host}`).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((Number.parseInt(h[16]!, 16) & 3) | 8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** Calls Berth makes on its own behalf (auto-redeploy), recorded as actions that no user started. */
const AUTOREDEPLOY: CallMeta = {
  method: "POST",
  path: "",
  user: "berth",
  userAgent: "berth-autoredeploy",
  ip: "",
  isUserAction: false,
};

const CHECK_CODES: Record<RegistryCheckError["code"], string> = {
  bad_credentials: "bad_credentials",
  not_a_registry: "not_a_registry",
  unreachable: "registry_unreachable",
  refused: "registry_refused",
};

export interface RepositoryBody {
  name?: string;
  username?: string;
  password?: string;
}

export class RegistryService {
  constructor(private readonly d: RegistryServiceDeps) {}

  get nativeHost(): string | undefined {
    return this.d.nativeHost;
  }

  private registryView(namespace: string, host: string): RegistryView {
    const native = host === this.d.nativeHost;
    const ssl = !native && !usesPlainHttp(this.d.outbound, host);
    return {
      uuid: hostUuid(host),
      resource_uri: registryUri(namespace, host),
      name: native ? "Berth registry" : host,
      host,
      is_native_registry: native,
      is_ssl: ssl,
      port: splitHost(host).port ?? (ssl ? 443 : 80),
    };
  }

  /** Berth's registry first, then the registries of the namespace's repositories by host. */
  async registries(namespace: string): Promise<RegistryView[]> {
    const hosts = new Set(
      (await this.d.store.registries.repositoriesOf(namespace)).map((r) => r.registry_host),
    );
    if (this.d.nativeHost) hosts.delete(this.d.nativeHost);
    return [
      ...(this.d.nativeHost ? [this.registryView(namespace, this.d.nativeHost)] : []),
      ...[...hosts].sort().map((h) => this.registryView(namespace, h)),
    ];
  }

  async findRegistry(namespace: string, host: string): Promise<RegistryView | undefined> {
    return (await this.registries(namespace)).find((r) => r.host === host);
  }

  // ---- repositories ---------------------------------------------------------------------------

  /** Names of the repositories that live services of the namespace take images from. */
  private async repositoriesInUse(namespace: string): Promise<Set<string>> {
    const used = new Set<string>();
    for (const s of await this.d.store.services.liveServices({ namespace })) {
      used.add(parseImageRef(specOf(s).image_name).repository);
    }
    return used;
  }

  async views(rows: RepositoryRow[]): Promise<RepositoryView[]> {
    const namespaces = [...new Set(rows.map((r) => r.namespace))];
    const used = new Map(
      await Promise.all(namespaces.map(async (ns) => [ns, await this.repositoriesInUse(ns)] as const)),
    );
    return rows.map((r) => ({
      uuid: r.uuid,
      resource_uri: repositoryUri(r.namespace, r.name),
      name: r.name,
      in_use: used.get(r.namespace)?.has(r.name) ?? false,
      registry: registryUri(r.namespace, r.registry_host),
    }));
  }

  async view(row: RepositoryRow): Promise<RepositoryView> {
    return (await this.views([row]))[0]!;
  }

  private credentialsOf(body: RepositoryBody, current?: Credentials): Credentials | undefined {
    const username = body.username ?? current?.username;
    const password = body.password ?? current?.password;
    if (username === undefined && password === undefined) return undefined;
    if (!username) throw invalidField("username", "is required with a password");
    if (password === undefined || password === "")
      throw invalidField("password", "is required with a username");
    return { username, password };
  }

  /** Checks the credentials against the registry; every failure is a 400 that says what went wrong. */
  private async check(host: string, path: string, credentials: Credentials | undefined): Promise<void> {
    try {
      await checkCredentials(this.d.outbound, { host, path, credentials });
    } catch (err) {
      if (err instanceof RegistryCheckError) throw badRequest(err.message, undefined, CHECK_CODES[err.code]);
      throw err;
    }
  }

  private sealed(credentials: Credentials | undefined): string | null {
    return credentials ? this.d.box.seal(JSON.stringify(credentials)) : null;
  }

  private opened(row: RepositoryRow): Credentials | undefined {
    return row.credentials ? decodeCredentials(this.d.box.open(row.credentials)) : undefined;
  }

  async create(namespace: string, body: RepositoryBody): Promise<RepositoryRow> {
    const name = body.name ?? "";
    const parsed = parseRepositoryName(name);
    if ("problem" in parsed) throw invalidField("name", parsed.problem);
    if (parsed.host === this.d.nativeHost) {
      throw invalidField(
        "name",
        `is on Berth's own registry (${parsed.host}); its images need no external repository`,
      );
    }
    const credentials = this.credentialsOf(body);
    const taken = () => conflict(`The repository ${name} is already added to ${namespace}.`, "name_taken");
    if (await this.d.store.registries.findRepository(namespace, name)) throw taken();
    await this.check(parsed.host, parsed.path, credentials);
    const now = this.d.clock.now();
    try {
      return await this.d.store.registries.insertRepository({
        uuid: randomUUID(),
        namespace,
        name,
        registry_host: parsed.host,
        credentials: this.sealed(credentials),
        created: now,
        updated: now,
      });
    } catch (err) {
      if (err instanceof UniqueViolation) throw taken();
      throw err;
    }
  }

  async update(row: RepositoryRow, body: RepositoryBody): Promise<RepositoryRow> {
    if (body.username === undefined && body.password === undefined) {
      throw badRequest("Give a username and password to update the repository's credentials.", [
        { field: "password", problem: "is required" },
      ]);
    }
    const credentials = this.credentialsOf(body, this.opened(row));
    const parsed = parseRepositoryName(row.name);
    if ("problem" in parsed)
      throw new ApiError("conflict", "invalid_state", `repository ${row.name} is invalid`);
    await this.check(parsed.host, parsed.path, credentials);
    const updated = await this.d.store.registries.updateRepository(row.uuid, {
      credentials: this.sealed(credentials),
      updated: this.d.clock.now(),
    });
    return updated ?? row;
  }

  async remove(row: RepositoryRow): Promise<void> {
    await this.d.store.registries.deleteRepository(row.uuid);
  }

  // ---- pulls ----------------------------------------------------------------------------------

  /** The repository of the namespace an image comes from: the exact one, else one on the same registry with credentials. */
  private async repositoryOf(image: string, namespace: string): Promise<RepositoryRow | undefined> {
    const ref = parseImageRef(image);
    const repos = await this.d.store.registries.repositoriesOf(namespace);
    return (
      repos.find((r) => r.name === ref.repository) ??
      repos.find((r) => r.registry_host === ref.registry && r.credentials !== null)
    );
  }

  /** Credentials for pulling an image into a node of the namespace, when one of its repositories has some. */
  async pullAuth(image: string, namespace: string): Promise<RegistryAuth | undefined> {
    const ref = parseImageRef(image);
    if (ref.registry === this.d.nativeHost) return undefined;
    const repo = await this.repositoryOf(image, namespace);
    const credentials = repo ? this.opened(repo) : undefined;
    if (!credentials) return undefined;
    const serverAddress = ref.registry === "docker.io" ? "https://index.docker.io/v1/" : ref.registry;
    return { ...credentials, serverAddress };
  }

  /**
   * Whether a redeploy pulls the image again although the node has it: images of Berth's registry
   * and of the namespace's repositories, whose tags move. Others (images only on the nodes, such as
   * busybox:local) are used as they are.
   */
  async refreshesOnRedeploy(image: string, namespace: string): Promise<boolean> {
    const ref = parseImageRef(image);
    if (ref.registry === this.d.nativeHost) return true;
    return (await this.repositoryOf(image, namespace)) !== undefined;
  }

  // ---- auto-redeploy --------------------------------------------------------------------------

  /**
   * A notification from Berth's registry: every push of a tagged manifest redeploys the running
   * services with `autoredeploy` whose image is that repository and tag on Berth's registry.
   * Returns the uuids of the actions started.
   */
  async onRegistryNotification(envelope: unknown): Promise<string[]> {
    const native = this.d.nativeHost;
    if (!native) return [];
    const events = (envelope as { events?: unknown })?.events;
    if (!Array.isArray(events)) return [];
    const pushed = new Set<string>();
    for (const e of events as {
      action?: unknown;
      target?: { repository?: unknown; tag?: unknown; mediaType?: unknown };
    }[]) {
      const t = e?.target;
      if (e?.action !== "push" || typeof t?.repository !== "string" || typeof t.tag !== "string" || !t.tag)
        continue;
      if (typeof t.mediaType === "string" && !/manifest|image\.index/.test(t.mediaType)) continue;
      pushed.add(`${native}/${t.repository}:${t.tag}`);
    }
    const started: string[] = [];
    if (pushed.size === 0) return started;
    for (const s of await this.d.store.services.liveServices()) {
      if (s.state !== "Running" && s.state !== "Partly running") continue;
      const spec = specOf(s);
      const ref = parseImageRef(spec.image_name);
      const image = `${ref.repository}:${ref.tag ?? "latest"}`;
      if (!spec.autoredeploy || ref.digest || !pushed.has(image)) continue;
      try {
        const a = await this.d.store.transaction(async (tx) => {
          const row = await this.d.actions.enqueue(tx, {
            kind: "service.redeploy",
            params: { service: s.uuid, reuse_volumes: true },
            namespace: s.namespace,
            object: serviceUri(s),
            meta: AUTOREDEPLOY,
          });
          await tx.actions.appendActionLog(
            row.uuid,
            this.d.clock.now(),
            `Autoredeploy: ${image} was pushed to Berth's registry`,
          );
          return row;
        });
        started.push(a.uuid);
      } catch (err) {
        this.d.log.warn(
          `autoredeploy of service ${s.uuid} after a push of ${image}: ${(err as Error).message}`,
        );
      }
    }
    return started;
  }
}
