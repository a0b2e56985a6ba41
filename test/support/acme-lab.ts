// The ACME side of a real router test (issue 30): pebble (Debian's, 2.4) with its own HTTPS
// certificate, and pebble-challtestsrv as the only DNS pebble asks, answering every name with the
// node's address. Each test file gives its own addresses and ports (its lab's), never another's.
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import https from "node:https";
import path from "node:path";
import { selfSignedCertificate } from "./certificates.ts";
import { waitFor } from "./harness.ts";

export interface AcmeLabOptions {
  /** Files (certificates, configuration, logs) go here; the caller removes it. */
  dir: string;
  /** The lab bridge's host address pebble listens on (`<address>:<port>`). */
  pebble: string;
  /** Pebble's management interface on loopback (its roots). */
  pebbleManagement: string;
  /** pebble-challtestsrv's DNS and management addresses on loopback. */
  dns: string;
  dnsManagement: string;
  /** Seconds a certificate pebble issues is valid (pebble's `certificateValidityPeriod`); its default (5 years) when absent. */
  validitySeconds?: number;
}

export interface AcmeLab {
  /** Pebble's own HTTPS certificate: BERTH_ROUTER_ACME_CA_ROOT. */
  caRootFile: string;
  directory: string;
  /** Starts the DNS answering `address` and pebble; answers pebble's issuing root (PEM). */
  start(address: string): Promise<string>;
  /** Ends the processes it started. */
  stop(): void;
}

/** Writes pebble's HTTPS certificate now (Berth is given its path before it starts); starts nothing yet. */
export function acmeLab(o: AcmeLabOptions): AcmeLab {
  const [hostAddress] = o.pebble.split(":");
  const caRootFile = path.join(o.dir, "pebble.pem");
  selfSignedCertificate({
    commonName: "pebble",
    subjectAltName: `IP:${hostAddress},IP:127.0.0.1`,
    days: 2,
    ca: true,
    keyFile: path.join(o.dir, "pebble.key"),
    certFile: caRootFile,
  });
  const processes: ChildProcess[] = [];
  const run = (file: string, args: string[], env: Record<string, string> = {}) => {
    const p = spawn(file, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    const log = fs.createWriteStream(path.join(o.dir, `${path.basename(file)}.log`));
    p.stdout?.pipe(log);
    p.stderr?.pipe(log);
    processes.push(p);
  };
  return {
    caRootFile,
    directory: `https://${o.pebble}/dir`,
    async start(address: string) {
      run("pebble-challtestsrv", [
        ...["-dns01", o.dns, "-management", o.dnsManagement],
        ...["-http01", "", "-https01", "", "-tlsalpn01", ""],
        ...["-defaultIPv4", address, "-defaultIPv6", ""],
      ]);
      const config = path.join(o.dir, "pebble.json");
      fs.writeFileSync(
        config,
        JSON.stringify({
          pebble: {
            listenAddress: o.pebble,
            managementListenAddress: o.pebbleManagement,
            certificate: caRootFile,
            privateKey: path.join(o.dir, "pebble.key"),
            httpPort: 80,
            tlsPort: 443,
            ocspResponderURL: "",
            externalAccountBindingRequired: false,
            ...(o.validitySeconds ? { certificateValidityPeriod: o.validitySeconds } : {}),
          },
        }),
      );
      run("pebble", ["-config", config, "-dnsserver", o.dns], {
        PEBBLE_VA_NOSLEEP: "1",
        PEBBLE_WFE_NONCEREJECT: "0",
      });
      return waitFor("pebble's root", () => root(o.pebbleManagement, caRootFile), 15_000, 200);
    },
    stop() {
      for (const p of processes) p.kill("SIGTERM");
    },
  };
}

function root(management: string, caRootFile: string): Promise<string | undefined> {
  const [host, port] = management.split(":");
  return new Promise((resolve) => {
    https
      .get({ host, port: Number(port), path: "/roots/0", ca: fs.readFileSync(caRootFile) }, (res) => {
        let b = "";
        res.on("data", (c) => (b += c));
        res.on("end", () =>
          resolve(res.statusCode === 200 && b.includes("BEGIN CERTIFICATE") ? b : undefined),
        );
      })
      .on("error", () => resolve(undefined));
  });
}
