// A service's domains on its page (issue 30): host names with their certificates (state, expiry,
// the ACME server's error when one could not be obtained), added and removed by PATCHing the
// service's `domains`.
import { useState } from "preact/hooks";
import type { DomainView } from "../../../src/contract/router.ts";
import { call } from "../api.ts";
import { Op } from "../ui.tsx";
import type { Service } from "./service-model.ts";

const bodyOf = (d: DomainView) => ({
  host: d.host,
  path: d.path,
  port: d.port,
  tls: d.tls,
  redirect_https: d.redirect_https,
  sticky: d.sticky,
  weight: d.weight,
});

export function Domains({ service, url }: { service: Service; url: string }) {
  const [host, setHost] = useState("");
  const [tls, setTls] = useState("acme");
  const domains = service.domains;
  return (
    <section aria-label="Domains">
      <h2>Domains</h2>
      {domains.length === 0 ? (
        <p class="empty">No domain: the service is reached only by its nodes' ports.</p>
      ) : (
        <div class="table-wrap">
          <table aria-label="Domains">
            <thead>
              <tr>
                <th scope="col">Host</th>
                <th scope="col">Path</th>
                <th scope="col">TLS</th>
                <th scope="col">Certificate</th>
                <th scope="col">Expires</th>
                <th scope="col" />
              </tr>
            </thead>
            <tbody>
              {domains.map((d) => (
                <tr key={`${d.host}${d.path}`}>
                  <td>{d.host}</td>
                  <td>{d.path}</td>
                  <td>{d.tls}</td>
                  <td>
                    {d.certificate?.state ?? "-"}
                    {d.certificate?.error ? (
                      <p class="error" role="alert">
                        {d.certificate.error}
                      </p>
                    ) : null}
                  </td>
                  <td>{d.certificate?.expires ?? ""}</td>
                  <td>
                    <Op
                      label={`Remove ${d.host}${d.path === "/" ? "" : d.path}`}
                      run={() => call("PATCH", url, { domains: domains.filter((x) => x !== d).map(bodyOf) })}
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <span class="inline-form">
        <label>
          Host name{" "}
          <input
            value={host}
            placeholder="app.example.com"
            onInput={(e) => setHost((e.target as HTMLInputElement).value)}
          />
        </label>
        <label>
          TLS{" "}
          <select value={tls} onChange={(e) => setTls((e.target as HTMLSelectElement).value)}>
            <option value="acme">certificate from ACME</option>
            <option value="uploaded">uploaded certificate</option>
            <option value="off">off (plain HTTP)</option>
          </select>
        </label>
        <Op
          label="Add domain"
          allowed={host.trim() ? undefined : { allowed: false, reason: "Type a host name first." }}
          run={() => call("PATCH", url, { domains: [...domains.map(bodyOf), { host: host.trim(), tls }] })}
          done={() => setHost("")}
        />
      </span>
    </section>
  );
}
