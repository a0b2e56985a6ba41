// Checks repository credentials against a registry's v2 API, the way engines authenticate:
// `GET /v2/` answers 401 with a challenge; Basic registries take the username and password on
// the next call, token registries (`Bearer realm=…,service=…`) hand out a token for them at the
// realm, scoped to pulling the repository. Messages never contain the password.
import { splitHost } from "../domain/images.ts";
import { type OutboundPolicy, OutboundRefused, outboundRequest, usesPlainHttp } from "./outbound.ts";

export interface Credentials {
  username: string;
  password: string;
}

export type CheckFailure = "bad_credentials" | "not_a_registry" | "unreachable" | "refused";

/** The check failed; `code` says whose problem it is, the message says what to do. */
export class RegistryCheckError extends Error {
  constructor(
    readonly code: CheckFailure,
    message: string,
  ) {
    super(message);
  }
}

export interface Challenge {
  scheme: "basic" | "bearer";
  params: Record<string, string>;
}

/** Parses `Bearer realm="https://auth.example.com/token",service="registry.example.com"`. */
export function parseChallenge(header: string | undefined): Challenge | undefined {
  const m = /^\s*(Basic|Bearer)\b(.*)$/i.exec(header ?? "");
  if (!m) return undefined;
  const params: Record<string, string> = {};
  for (const p of m[2]!.matchAll(/([A-Za-z_]+)\s*=\s*(?:"([^"]*)"|([^,\s]*))/g)) {
    params[p[1]!.toLowerCase()] = p[2] ?? p[3] ?? "";
  }
  return { scheme: m[1]!.toLowerCase() as "basic" | "bearer", params };
}

/** Docker Hub's registry API lives on another name than the one in image references. */
export function apiHostOf(registryHost: string): string {
  return registryHost === "docker.io" || registryHost === "index.docker.io"
    ? "registry-1.docker.io"
    : registryHost;
}

function basicHeader(c: Credentials): string {
  return `Basic ${Buffer.from(`${c.username}:${c.password}`).toString("base64")}`;
}

export interface CheckInput {
  /** The registry host, with its port when it has one. */
  host: string;
  /** The repository path inside the registry (for the token's scope). */
  path: string;
  credentials?: Credentials;
}

/**
 * Resolves when the registry accepts the credentials for pulling the repository (or needs none when
 * none are given); throws RegistryCheckError otherwise.
 */
export async function checkCredentials(policy: OutboundPolicy, input: CheckInput): Promise<void> {
  const host = apiHostOf(input.host);
  const scheme = usesPlainHttp(policy, host) ? "http" : "https";
  const base = `${scheme}://${host}`;
  const call = async (url: URL, headers: Record<string, string> = {}) => {
    try {
      return await outboundRequest(policy, url, { headers });
    } catch (err) {
      if (err instanceof OutboundRefused) throw new RegistryCheckError("refused", err.message);
      throw new RegistryCheckError(
        "unreachable",
        `Berth could not check the repository on ${input.host}: ${(err as Error).message}`,
      );
    }
  };
  const v2 = new URL(`${base}/v2/`);
  const first = await call(v2);
  if (first.status === 200 && !input.credentials) return;
  if (first.status !== 200 && first.status !== 401) {
    throw new RegistryCheckError(
      "not_a_registry",
      `${input.host} does not answer like a registry (GET /v2/ answered ${first.status})`,
    );
  }
  const refused = (how: string) =>
    new RegistryCheckError(
      "bad_credentials",
      `The registry ${input.host} refused the ${how} for ${input.host}/${input.path}; check the username and password.`,
    );
  if (first.status === 200) {
    // No authentication needed; credentials, when given, must still not be refused.
    const again = await call(v2, { authorization: basicHeader(input.credentials!) });
    if (again.status === 200) return;
    throw refused("credentials");
  }
  const challenge = parseChallenge(
    Array.isArray(first.headers["www-authenticate"])
      ? first.headers["www-authenticate"][0]
      : first.headers["www-authenticate"],
  );
  if (!challenge) {
    throw new RegistryCheckError(
      "not_a_registry",
      `${input.host} asks for authentication Berth does not know`,
    );
  }
  if (challenge.scheme === "basic") {
    if (!input.credentials) {
      throw new RegistryCheckError(
        "bad_credentials",
        `The registry ${input.host} requires a username and password; add them to the repository.`,
      );
    }
    const authed = await call(v2, { authorization: basicHeader(input.credentials) });
    if (authed.status === 200) return;
    if (authed.status === 401 || authed.status === 403) throw refused("username and password");
    throw new RegistryCheckError("not_a_registry", `${input.host} answered ${authed.status} to GET /v2/`);
  }
  const token = await bearerToken(policy, input, challenge, call);
  const authed = await call(v2, { authorization: `Bearer ${token}` });
  if (authed.status === 200) return;
  throw refused("token issued for the credentials");
}

async function bearerToken(
  policy: OutboundPolicy,
  input: CheckInput,
  challenge: Challenge,
  call: (url: URL, headers?: Record<string, string>) => ReturnType<typeof outboundRequest>,
): Promise<string> {
  let realm: URL;
  try {
    realm = new URL(challenge.params.realm ?? "");
  } catch {
    throw new RegistryCheckError("not_a_registry", `${input.host} names no valid token realm`);
  }
  if (realm.protocol !== "https:" && !(realm.protocol === "http:" && usesPlainHttp(policy, realm.host))) {
    const { hostname } = splitHost(realm.host);
    throw new RegistryCheckError(
      "refused",
      `${input.host} wants credentials sent to ${realm.protocol}//${hostname} without TLS; Berth sends them only over https (or to hosts in BERTH_INSECURE_REGISTRIES)`,
    );
  }
  if (challenge.params.service) realm.searchParams.set("service", challenge.params.service);
  realm.searchParams.set("scope", `repository:${input.path}:pull`);
  const res = await call(realm, input.credentials ? { authorization: basicHeader(input.credentials) } : {});
  if (res.status === 401 || res.status === 403) {
    throw new RegistryCheckError(
      "bad_credentials",
      input.credentials
        ? `The registry ${input.host} refused the username and password for ${input.host}/${input.path}; check them.`
        : `The registry ${input.host} requires a username and password for ${input.host}/${input.path}; add them to the repository.`,
    );
  }
  if (res.status !== 200) {
    throw new RegistryCheckError(
      "not_a_registry",
      `the token service of ${input.host} answered ${res.status}`,
    );
  }
  let body: { token?: unknown; access_token?: unknown };
  try {
    body = JSON.parse(res.body) as typeof body;
  } catch {
    throw new RegistryCheckError("not_a_registry", `the token service of ${input.host} did not answer JSON`);
  }
  const token = typeof body.token === "string" ? body.token : body.access_token;
  if (typeof token !== "string" || token === "") {
    throw new RegistryCheckError("not_a_registry", `the token service of ${input.host} gave no token`);
  }
  return token;
}
