// Backups (issue 31): the namespace's volume backups (all of them, or one service's with
// `#/backups?service=<uuid>`) with back up now, restore into the same service and delete; for
// administrators also the control-plane backups (with "Back up now"; a restore runs with Berth
// stopped, by `berth admin restore`) and the S3-compatible backup targets (add, delete; the
// secret key is sent once and never shown).
import { useEffect, useState } from "preact/hooks";
import type { BackupTarget } from "../../../src/contract/backup-target.ts";
import type { VolumeBackup as VolumeBackupView } from "../../../src/contract/volume-backup.ts";
import { call, get, nsPath, query, session } from "../api.ts";
import { type Resource, useList } from "../live.ts";
import { route, routeQuery } from "../router.ts";
import { Table } from "../table.tsx";
import { When } from "../time.tsx";
import {
  ErrorLine,
  Field,
  FormError,
  inputValue,
  Op,
  Page,
  ProblemsProvider,
  perform,
  StateBadge,
  submitForm,
  useFormProblems,
} from "../ui.tsx";

type VolumeBackup = VolumeBackupView & Resource;
type Target = BackupTarget & Resource;
interface ControlEntry {
  name: string;
  size_bytes: number;
  created_datetime: string;
  status: string;
  error: string | null;
}
interface ControlListing {
  enabled: boolean;
  every_hours: number | null;
  keep: number | null;
  keep_daily: number | null;
  keep_weekly: number | null;
  target: string | null;
  error: string | null;
  objects: ControlEntry[];
}

function bytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i]}`;
}

export function BackupsPage() {
  const admin = session.value?.is_admin === true;
  return (
    <Page title="Backups">
      <VolumeBackups service={routeQuery(route.value).get("service") ?? undefined} />
      {admin && <ControlBackups />}
      {admin && <Targets />}
    </Page>
  );
}

function VolumeBackups({ service }: { service?: string }) {
  const list = useList<VolumeBackup>(query(nsPath("app", "volumebackup"), { limit: 100, service }), [
    "action",
  ]);
  const [serviceName, setServiceName] = useState("");
  const [target, setTarget] = useState("");
  const backUp = async (e: Event) => {
    e.preventDefault();
    const r = await perform("Back up volumes", async () => {
      const found = await get<{ objects: { resource_uri: string }[] }>(
        query(nsPath("app", "service"), { name: serviceName, state__not: "Terminated" }),
      );
      const uri = found.objects[0]?.resource_uri ?? `${nsPath("app", "service")}${serviceName}/`;
      return call("POST", `${uri}volumebackup/`, target ? { target } : {});
    });
    if (r) list.reload();
  };
  return (
    <section aria-label="Volume backups">
      <h2>Volume backups{service ? " of one service" : ""}</h2>
      <ErrorLine error={list.error} />
      {list.data && (
        <Table<VolumeBackup>
          label="Volume backups"
          rows={list.data.objects}
          empty="No volume backups."
          columns={[
            {
              label: "Service",
              render: (b) => <a href={`#/services/${b.service.split("/").at(-2)}`}>{b.service_name}</a>,
            },
            { label: "State", render: (b) => <StateBadge state={b.state} bad={b.state === "Failed"} /> },
            { label: "Made", render: (b) => <When at={b.created_datetime} /> },
            { label: "Size", render: (b) => bytes(b.size_bytes) },
            { label: "Where", render: (b) => b.target ?? "data directory" },
            { label: "Error", render: (b) => b.error ?? "" },
            {
              label: "",
              render: (b) => (
                <>
                  <Op
                    label="Restore"
                    allowed={{ allowed: b.state === "Success", reason: `the backup is ${b.state}` }}
                    confirm={`Restore ${b.service_name}'s volumes from this backup? Their files are overwritten.`}
                    run={() => call("POST", `${b.resource_uri}restore/`, {})}
                    done={() => list.reload()}
                  />{" "}
                  <Op
                    label="Delete"
                    danger
                    confirm="Delete this volume backup and its archives?"
                    run={() => call("DELETE", b.resource_uri)}
                    done={() => list.reload()}
                  />
                </>
              ),
            },
          ]}
        />
      )}
      <form class="inline-form" aria-label="Back up a service" onSubmit={(e) => void backUp(e)}>
        <Field label="Service name">
          <input value={serviceName} onInput={(e) => setServiceName(inputValue(e))} />
        </Field>
        <Field label="Backup target" hint="empty: the data directory">
          <input value={target} onInput={(e) => setTarget(inputValue(e))} />
        </Field>
        <button type="submit">Back up volumes</button>
      </form>
    </section>
  );
}

function ControlBackups() {
  const [listing, setListing] = useState<ControlListing | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    get<ControlListing>("/api/v1.1/backups/").then(setListing, setError);
  }, [tick]);
  const l = listing;
  return (
    <section aria-label="Control-plane backups">
      <h2>Control-plane backups</h2>
      <ErrorLine error={error} />
      {l && !l.enabled && (
        <p>
          Scheduled backups are off: set BERTH_BACKUP_DIR or BERTH_BACKUP_TARGET, and a passphrase or key
          file.
        </p>
      )}
      {l?.enabled && (
        <p>
          Every {l.every_hours} h to {l.target ? `backup target ${l.target}` : "the backup directory"}; kept:
          the last {l.keep}
          {l.keep_daily ? `, ${l.keep_daily} daily` : ""}
          {l.keep_weekly ? `, ${l.keep_weekly} weekly` : ""}. A restore runs with Berth stopped:{" "}
          <code>berth admin restore &lt;name&gt;{l.target ? " --target-file <target.json>" : ""}</code>.
        </p>
      )}
      {l?.error && <p class="error">{l.error}</p>}
      {l && (
        <Table<ControlEntry & Resource>
          label="Control-plane backups"
          rows={l.objects.map((o) => ({ ...o, resource_uri: o.name }))}
          empty="No control-plane backups."
          columns={[
            { label: "Name", render: (o) => o.name },
            { label: "Status", render: (o) => <StateBadge state={o.status} bad={o.status === "Failed"} /> },
            { label: "Made", render: (o) => <When at={o.created_datetime} /> },
            { label: "Size", render: (o) => bytes(o.size_bytes) },
            { label: "Error", render: (o) => o.error ?? "" },
          ]}
        />
      )}
      {l?.enabled && (
        <Op
          label="Back up now"
          run={() => call("POST", "/api/v1.1/backups/")}
          done={() => setTick((t) => t + 1)}
        />
      )}
    </section>
  );
}

const EMPTY = { name: "", endpoint: "", bucket: "", prefix: "", region: "", access_key: "", secret_key: "" };
/** The fields the form shows (a problem of another, the region, is said under the form). */
const TARGET_FIELDS = ["name", "endpoint", "bucket", "prefix", "access_key", "secret_key"] as const;

function Targets() {
  const [data, setData] = useState<Target[] | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [tick, setTick] = useState(0);
  const [form, setForm] = useState(EMPTY);
  const problems = useFormProblems();
  useEffect(() => {
    get<{ objects: Target[] }>("/api/v1.1/backuptargets/").then((d) => setData(d.objects), setError);
  }, [tick]);
  // Berth checks the target before adding it: a wrong key or bucket shows at its field.
  const create = async (e: Event) => {
    e.preventDefault();
    const body = Object.fromEntries(Object.entries(form).filter(([, v]) => v !== ""));
    const added = await submitForm(
      "Add backup target",
      problems,
      () => call("POST", "/api/v1.1/backuptargets/", body),
      "name",
    );
    if (added) {
      setForm(EMPTY);
      setTick((t) => t + 1);
    }
  };
  const set = (key: keyof typeof EMPTY) => (e: Event) => setForm({ ...form, [key]: inputValue(e) });
  const input = (key: keyof typeof EMPTY, label: string) => (
    <Field label={label} field={key}>
      {key === "secret_key" ? (
        <input type="password" autoComplete="new-password" value={form[key]} onInput={set(key)} />
      ) : (
        <input value={form[key]} onInput={set(key)} />
      )}
    </Field>
  );
  return (
    <section aria-label="Backup targets">
      <h2>Backup targets</h2>
      <ErrorLine error={error} />
      {data && (
        <Table<Target>
          label="Backup targets"
          rows={data}
          empty="No backup targets."
          columns={[
            { label: "Name", render: (t) => t.name },
            { label: "Endpoint", render: (t) => t.endpoint },
            { label: "Bucket", render: (t) => `${t.bucket}/${t.prefix}` },
            { label: "Access key", render: (t) => t.access_key },
            {
              label: "",
              render: (t) => (
                <Op
                  label="Delete"
                  danger
                  confirm={`Delete backup target ${t.name}? Its objects stay in the bucket.`}
                  run={() => call("DELETE", t.resource_uri)}
                  done={() => setTick((x) => x + 1)}
                />
              ),
            },
          ]}
        />
      )}
      <ProblemsProvider value={problems}>
        <form
          class="inline-form"
          aria-label="New backup target"
          onInput={problems.edited}
          onSubmit={(e) => void create(e)}
        >
          {input("name", "Name")}
          {input("endpoint", "Endpoint")}
          {input("bucket", "Bucket")}
          {input("prefix", "Prefix")}
          {input("access_key", "Access key")}
          {input("secret_key", "Secret key")}
          <button type="submit">Add target</button>
          <FormError problems={problems} fields={TARGET_FIELDS} />
        </form>
      </ProblemsProvider>
    </section>
  );
}
