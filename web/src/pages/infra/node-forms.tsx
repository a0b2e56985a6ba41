// The forms that add a node to Berth: bring your own node (an agent command), or attach an engine
// Berth can reach.
import { useState } from "preact/hooks";
import { call, nsPath, query } from "../../api.ts";
import { useList } from "../../live.ts";
import { navigate } from "../../router.ts";
import { Table } from "../../table.tsx";
import { When } from "../../time.tsx";
import { ErrorLine, Field, inputValue, notify, Op } from "../../ui.tsx";
import { type Node, tagList } from "./shared.ts";

/**
 * A registration token for a server of one's own (issue 15): the command to run there, shown once
 * (the token is stored hashed), and the tokens not used yet, which can be revoked.
 */
export function BringYourOwn() {
  const tokens = useList<{
    uuid: string;
    resource_uri: string;
    created: string;
    created_by: string;
    expires: string;
  }>(query(nsPath("infra", "token"), { limit: 50 }), []);
  const [command, setCommand] = useState<string | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const create = async () => {
    setError(undefined);
    try {
      const r = await call<{ command: string }>("POST", nsPath("infra", "token"));
      setCommand(r.data.command);
      tokens.reload();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section class="form">
      <h2>Bring your own server</h2>
      <p>
        Run the command on a server with Docker: the Berth agent registers it as a node of this namespace and
        keeps an outbound tunnel, so the server needs no open port. A token works once.
      </p>
      <div class="form-actions">
        <button type="button" class="primary" onClick={() => void create()}>
          Create a registration command
        </button>
      </div>
      <ErrorLine error={error} />
      {command && (
        <>
          <p>Shown once; run it on the server:</p>
          <figure aria-label="Registration command">
            <pre class="code">{command}</pre>
          </figure>
        </>
      )}
      {tokens.data && tokens.data.objects.length > 0 && (
        <Table
          label="Unused registration tokens"
          rows={tokens.data.objects}
          empty="No unused tokens."
          columns={[
            { label: "Token", render: (t) => t.uuid.slice(0, 8) },
            { label: "By", render: (t) => t.created_by },
            { label: "Created", render: (t) => <When at={t.created} /> },
            { label: "Expires", render: (t) => <When at={t.expires} /> },
            {
              label: "",
              render: (t) => (
                <Op
                  label="Revoke"
                  danger
                  confirm="Revoke this registration token? A server not yet registered with it cannot use it."
                  run={() => call("DELETE", t.resource_uri)}
                  done={() => tokens.reload()}
                />
              ),
            },
          ]}
        />
      )}
    </section>
  );
}

/** Attaching a Docker engine Berth can reach (tcp with TLS, or a local socket): admins, or users where allowed. */
export function AttachEngine() {
  const [engineUrl, setEngineUrl] = useState("");
  const [nickname, setNickname] = useState("");
  const [tags, setTags] = useState("");
  const [tls, setTls] = useState({ ca: "", cert: "", key: "" });
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    setBusy(true);
    try {
      const body: Record<string, unknown> = { engine_url: engineUrl.trim(), tags: tagList(tags) };
      if (nickname.trim()) body.nickname = nickname.trim();
      if (tls.ca || tls.cert || tls.key) body.tls = tls;
      const r = await call<Node>("POST", nsPath("infra", "node"), body);
      notify({ kind: "ok", text: "Engine attached; Berth is checking it.", actionUri: r.actionUri });
      navigate(`/nodes/${r.data.uuid}`);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const pem = (part: keyof typeof tls, label: string) => (
    <Field label={label} hint="PEM, for tcp:// engines with TLS">
      <textarea
        class="code"
        rows={3}
        value={tls[part]}
        onInput={(e) => setTls({ ...tls, [part]: inputValue(e) })}
      />
    </Field>
  );
  return (
    // A refusal goes with the next edit of the form.
    <form class="form" onSubmit={(e) => void submit(e)} onInput={() => setError(undefined)}>
      <h2>Attach a Docker engine</h2>
      <div class="grid">
        <Field label="Engine URL" hint="tcp://host:2376 or unix:///var/run/docker.sock">
          <input name="engine_url" required value={engineUrl} onInput={(e) => setEngineUrl(inputValue(e))} />
        </Field>
        <Field label="Nickname">
          <input value={nickname} onInput={(e) => setNickname(inputValue(e))} />
        </Field>
        <Field label="Tags" hint="comma-separated">
          <input value={tags} onInput={(e) => setTags(inputValue(e))} />
        </Field>
        {pem("ca", "TLS CA certificate")}
        {pem("cert", "TLS client certificate")}
        {pem("key", "TLS client key")}
      </div>
      <ErrorLine error={error} />
      <div class="form-actions">
        <button type="submit" class="primary" disabled={busy}>
          Attach engine
        </button>
      </div>
    </form>
  );
}
