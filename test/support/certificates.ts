// Self-signed certificates made by Debian's openssl for the router tests: uploaded certificates
// (test/router) and the local ACME server's own HTTPS certificate (test/real/router-local).
import { execFileSync } from "node:child_process";
import fs from "node:fs";

/** Writes a self-signed certificate and its key (PEM) to the two files; answers their texts. */
export function selfSignedCertificate(opts: {
  commonName: string;
  /** openssl's subjectAltName value, e.g. "DNS:own.test" or "IP:10.0.0.1,IP:127.0.0.1". */
  subjectAltName: string;
  days: number;
  /** A certificate authority too (a trust anchor for the clients of its server). */
  ca?: boolean;
  keyFile: string;
  certFile: string;
}): { certificate: string; key: string } {
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-days",
      String(opts.days),
      "-subj",
      `/CN=${opts.commonName}`,
      "-addext",
      `subjectAltName=${opts.subjectAltName}`,
      ...(opts.ca ? ["-addext", "basicConstraints=critical,CA:TRUE"] : []),
      "-keyout",
      opts.keyFile,
      "-out",
      opts.certFile,
    ],
    { stdio: "ignore" },
  );
  return { certificate: fs.readFileSync(opts.certFile, "utf8"), key: fs.readFileSync(opts.keyFile, "utf8") };
}
