// Creating a node cluster from the catalogue: provider → region → node type, with the provider's
// own options and disk rules.
import { useEffect, useState } from "preact/hooks";
import type { NodeTypeView, ProviderView, RegionView } from "../../../../src/contract/catalogue.ts";
import { call, get, type ListPage, nsPath, query } from "../../api.ts";
import { navigate } from "../../router.ts";
import {
  ErrorLine,
  Field,
  FormError,
  inputValue,
  notify,
  Page,
  ProblemsProvider,
  Select,
  useFormProblems,
} from "../../ui.tsx";
import { type Cluster, tagList } from "./shared.ts";

type Provider = ProviderView;
type Region = RegionView;
type NodeType = NodeTypeView;

const FIELDS = ["name", "provider", "region", "node_type", "target_num_nodes", "disk", "tags"] as const;

export function ClusterCreate() {
  const [providers, setProviders] = useState<Provider[]>([]);
  const [regions, setRegions] = useState<Region[]>([]);
  const [types, setTypes] = useState<NodeType[]>([]);
  const [provider, setProvider] = useState("");
  const [region, setRegion] = useState("");
  const [nodeType, setNodeType] = useState("");
  const [name, setName] = useState("");
  const [count, setCount] = useState("1");
  const [disk, setDisk] = useState("");
  const [tags, setTags] = useState("");
  const [vpcId, setVpcId] = useState("");
  const [subnets, setSubnets] = useState("");
  const [groups, setGroups] = useState("");
  const [profile, setProfile] = useState("");
  const [deployNow, setDeployNow] = useState(true);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const problems = useFormProblems();

  useEffect(() => {
    get<ListPage<Provider>>("/api/infra/v1/provider/?limit=100").then(
      (p) => setProviders(p.objects),
      setError,
    );
  }, []);
  useEffect(() => {
    setRegion("");
    setRegions([]);
    setDisk("");
    if (!provider) return;
    get<ListPage<Region>>(query("/api/infra/v1/region/", { provider, limit: 100 })).then(
      (r) => setRegions(r.objects),
      setError,
    );
  }, [provider]);
  useEffect(() => {
    setNodeType("");
    setTypes([]);
    if (!region) return;
    get<ListPage<NodeType>>(query("/api/infra/v1/nodetype/", { regions: region, limit: 100 })).then(
      (t) => setTypes(t.objects),
      setError,
    );
  }, [region]);

  const rules = providers.find((p) => p.resource_uri === provider)?.node_cluster_rules;
  const submit = async (e: Event) => {
    e.preventDefault();
    problems.set(undefined);
    setBusy(true);
    try {
      const body: Record<string, unknown> = {
        name: name.trim(),
        region,
        node_type: nodeType,
        target_num_nodes: Number(count),
        tags: tagList(tags),
      };
      if (rules?.disk !== "none" && disk) body.disk = Number(disk);
      if (rules?.provider_options) {
        const po: Record<string, unknown> = {};
        if (vpcId.trim()) {
          const list = (s: string) =>
            s
              .split(",")
              .map((x) => x.trim())
              .filter(Boolean);
          po.vpc = {
            id: vpcId.trim(),
            ...(subnets ? { subnets: list(subnets) } : {}),
            ...(groups ? { security_groups: list(groups) } : {}),
          };
        }
        if (profile.trim()) po.iam = { instance_profile_name: profile.trim() };
        if (Object.keys(po).length) body.provider_options = po;
      }
      const r = await call<Cluster>("POST", nsPath("infra", "nodecluster"), body);
      notify({ kind: "ok", text: `Node cluster ${r.data.name} created.`, actionUri: r.actionUri });
      if (deployNow) {
        const d = await call("POST", `${r.data.resource_uri}deploy/`);
        notify({ kind: "ok", text: `Deploying ${r.data.name}.`, actionUri: d.actionUri });
      }
      navigate(`/nodeclusters/${r.data.uuid}`);
    } catch (err) {
      problems.set(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <Page title="Create a node cluster">
      <ProblemsProvider value={problems}>
        <form
          class="form"
          onSubmit={(e) => void submit(e)}
          onInput={problems.edited}
          onChange={problems.edited}
        >
          <div class="grid">
            <Field label="Name" field="name">
              <input name="cluster-name" required value={name} onInput={(e) => setName(inputValue(e))} />
            </Field>
            <Field label="Provider" field="provider">
              <Select
                name="provider"
                value={provider}
                onChange={setProvider}
                options={[
                  { value: "", label: "choose a provider…" },
                  ...providers.map((p) => ({
                    value: p.resource_uri,
                    label: p.label,
                    disabled: !p.available,
                  })),
                ]}
              />
            </Field>
            <Field label="Region" field="region">
              <Select
                name="region"
                value={region}
                onChange={setRegion}
                options={[
                  { value: "", label: provider ? "choose a region…" : "choose a provider first" },
                  ...regions.map((r) => ({
                    value: r.resource_uri,
                    label: r.label || r.name,
                    disabled: !r.available,
                  })),
                ]}
              />
            </Field>
            <Field label="Node type" field="node_type">
              <Select
                name="node_type"
                value={nodeType}
                onChange={setNodeType}
                options={[
                  { value: "", label: region ? "choose a node type…" : "choose a region first" },
                  ...types.map((t) => ({
                    value: t.resource_uri,
                    label: t.label || t.name,
                    disabled: !t.available,
                  })),
                ]}
              />
            </Field>
            <Field label="Nodes" field="target_num_nodes">
              <input
                name="target_num_nodes"
                type="number"
                min={1}
                value={count}
                onInput={(e) => setCount(inputValue(e))}
              />
            </Field>
            {rules?.disk === "any" && (
              <Field label="Disk (GB)" field="disk" hint={`default ${rules.default_disk}`}>
                <input type="number" min={1} value={disk} onInput={(e) => setDisk(inputValue(e))} />
              </Field>
            )}
            {rules?.disk === "fixed" && (
              <Field label="Disk (GB)" field="disk" hint="this provider offers these sizes only">
                <Select
                  name="disk"
                  value={disk}
                  onChange={setDisk}
                  options={[
                    { value: "", label: `default (${rules.default_disk})` },
                    ...rules.disk_sizes.map(String),
                  ]}
                />
              </Field>
            )}
            {rules?.disk === "none" && (
              <Field label="Disk">
                <span class="hint">This provider sets the disk size itself.</span>
              </Field>
            )}
            <Field label="Tags" field="tags" hint="comma-separated">
              <input value={tags} onInput={(e) => setTags(inputValue(e))} />
            </Field>
          </div>
          {rules?.provider_options && (
            <fieldset data-field="provider_options">
              <legend>Provider options</legend>
              <div class="grid">
                <Field label="VPC id">
                  <input value={vpcId} onInput={(e) => setVpcId(inputValue(e))} />
                </Field>
                <Field label="Subnets" hint="comma-separated; nodes are balanced among them">
                  <input value={subnets} onInput={(e) => setSubnets(inputValue(e))} />
                </Field>
                <Field label="Security groups" hint="comma-separated">
                  <input value={groups} onInput={(e) => setGroups(inputValue(e))} />
                </Field>
                <Field label="IAM instance profile">
                  <input value={profile} onInput={(e) => setProfile(inputValue(e))} />
                </Field>
              </div>
            </fieldset>
          )}
          <div class="checks">
            <label>
              <input
                type="checkbox"
                checked={deployNow}
                onChange={(e) => setDeployNow((e.target as HTMLInputElement).checked)}
              />{" "}
              Deploy it now
            </label>
          </div>
          <ErrorLine error={error} />
          <FormError problems={problems} fields={FIELDS} />
          <div class="form-actions">
            <button type="submit" class="primary" disabled={busy || !region || !nodeType}>
              Create
            </button>
          </div>
        </form>
      </ProblemsProvider>
    </Page>
  );
}
