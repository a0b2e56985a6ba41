// Schema migrations, dialect-neutral except for the auto-increment id column.
// Long because it is an append-only history: a migration, once released, is never edited or
// removed (a database that ran it must keep matching it), so the file only grows.
import type {
  ColumnDefinitionBuilder,
  CreateTableBuilder,
  Kysely,
  Migration,
  MigrationProvider,
} from "kysely";
import { Migrator, sql } from "kysely";
import { specLinks } from "./codec.ts";
import type { Dialect } from "./db.ts";

// biome-ignore lint/suspicious/noExplicitAny: migrations work on the untyped schema by design.
type AnyDb = Kysely<any>;

function migrations(dialect: Dialect): Record<string, Migration> {
  // The only dialect difference: how an auto-increment primary key is declared.
  // biome-ignore lint/suspicious/noExplicitAny: builder of an untyped table.
  const serial = <T extends CreateTableBuilder<any, any>>(t: T, name: string): T =>
    (dialect === "postgres"
      ? t.addColumn(name, "serial", (c: ColumnDefinitionBuilder) => c.primaryKey())
      : t.addColumn(name, "integer", (c: ColumnDefinitionBuilder) => c.primaryKey().autoIncrement())) as T;

  return {
    "0001_core": {
      async up(db: AnyDb) {
        await db.schema
          .createTable("namespaces")
          .addColumn("name", "text", (c) => c.primaryKey())
          .addColumn("kind", "text", (c) => c.notNull())
          .addColumn("created", "bigint", (c) => c.notNull())
          .execute();
        await serial(db.schema.createTable("users"), "id")
          .addColumn("username", "text", (c) => c.notNull().unique())
          .addColumn("email", "text", (c) => c.notNull())
          .addColumn("password_hash", "text", (c) => c.notNull())
          .addColumn("full_name", "text", (c) => c.notNull().defaultTo(""))
          .addColumn("is_admin", "integer", (c) => c.notNull().defaultTo(0))
          .addColumn("is_active", "integer", (c) => c.notNull().defaultTo(1))
          .addColumn("location", "text", (c) => c.notNull().defaultTo(""))
          .addColumn("company", "text", (c) => c.notNull().defaultTo(""))
          .addColumn("profile_url", "text", (c) => c.notNull().defaultTo(""))
          .addColumn("date_joined", "bigint", (c) => c.notNull())
          .execute();
        await db.schema
          .createTable("emails")
          .addColumn("user_id", "integer", (c) => c.notNull())
          .addColumn("email", "text", (c) => c.notNull())
          .addColumn("verified", "integer", (c) => c.notNull())
          .addColumn("primary", "integer", (c) => c.notNull())
          .addColumn("created", "bigint", (c) => c.notNull())
          .addPrimaryKeyConstraint("emails_pk", ["user_id", "email"])
          .execute();
        await db.schema
          .createTable("org_members")
          .addColumn("org", "text", (c) => c.notNull())
          .addColumn("username", "text", (c) => c.notNull())
          .addColumn("role", "text", (c) => c.notNull())
          .addPrimaryKeyConstraint("org_members_pk", ["org", "username"])
          .execute();
        await serial(db.schema.createTable("api_keys"), "id")
          .addColumn("user_id", "integer", (c) => c.notNull())
          .addColumn("label", "text", (c) => c.notNull().defaultTo(""))
          .addColumn("key_hash", "text", (c) => c.notNull().unique())
          .addColumn("created", "bigint", (c) => c.notNull())
          .addColumn("namespace_limit", "text")
          .addColumn("service_uuid", "text")
          .execute();
        await serial(db.schema.createTable("actions"), "id")
          .addColumn("uuid", "text", (c) => c.notNull().unique())
          .addColumn("namespace", "text", (c) => c.notNull())
          .addColumn("object", "text", (c) => c.notNull())
          .addColumn("action", "text", (c) => c.notNull())
          .addColumn("kind", "text")
          .addColumn("params", "text")
          .addColumn("method", "text", (c) => c.notNull())
          .addColumn("path", "text", (c) => c.notNull())
          .addColumn("user", "text", (c) => c.notNull())
          .addColumn("user_agent", "text", (c) => c.notNull())
          .addColumn("ip", "text", (c) => c.notNull())
          .addColumn("location", "text", (c) => c.notNull())
          .addColumn("start_date", "bigint", (c) => c.notNull())
          .addColumn("end_date", "bigint")
          .addColumn("state", "text", (c) => c.notNull())
          .addColumn("is_user_action", "integer", (c) => c.notNull())
          .addColumn("step", "integer", (c) => c.notNull().defaultTo(0))
          .addColumn("attempts", "integer", (c) => c.notNull().defaultTo(0))
          .addColumn("lease_owner", "text")
          .addColumn("lease_until", "bigint")
          .addColumn("version", "integer", (c) => c.notNull().defaultTo(1))
          .execute();
        await db.schema.createIndex("actions_ns").on("actions").columns(["namespace", "id"]).execute();
        await db.schema.createIndex("actions_object").on("actions").columns(["object", "state"]).execute();
        await db.schema.createIndex("actions_state").on("actions").columns(["state"]).execute();
        await serial(db.schema.createTable("action_logs"), "id")
          .addColumn("action_uuid", "text", (c) => c.notNull())
          .addColumn("ts", "bigint", (c) => c.notNull())
          .addColumn("line", "text", (c) => c.notNull())
          .execute();
        await db.schema
          .createIndex("action_logs_action")
          .on("action_logs")
          .columns(["action_uuid", "id"])
          .execute();
        await serial(db.schema.createTable("changes"), "revision")
          .addColumn("namespace", "text", (c) => c.notNull())
          .addColumn("type", "text", (c) => c.notNull())
          .addColumn("action", "text", (c) => c.notNull())
          .addColumn("resource_uri", "text", (c) => c.notNull())
          .addColumn("state", "text", (c) => c.notNull())
          .addColumn("parents", "text", (c) => c.notNull())
          .addColumn("datetime", "bigint", (c) => c.notNull())
          .execute();
      },
    },
    "0002_nodes": {
      async up(db: AnyDb) {
        await serial(db.schema.createTable("nodeclusters"), "id")
          .addColumn("uuid", "text", (c) => c.notNull().unique())
          .addColumn("namespace", "text", (c) => c.notNull())
          .addColumn("name", "text", (c) => c.notNull())
          .addColumn("nickname", "text", (c) => c.notNull())
          .addColumn("state", "text", (c) => c.notNull())
          .addColumn("provider", "text", (c) => c.notNull())
          .addColumn("region", "text", (c) => c.notNull())
          .addColumn("node_type", "text", (c) => c.notNull())
          .addColumn("disk", "integer")
          .addColumn("target_num_nodes", "integer", (c) => c.notNull())
          .addColumn("tags", "text", (c) => c.notNull())
          .addColumn("provider_options", "text")
          .addColumn("deployed_at", "bigint")
          .addColumn("destroyed_at", "bigint")
          .addColumn("created", "bigint", (c) => c.notNull())
          .addColumn("version", "integer", (c) => c.notNull())
          .execute();
        await db.schema
          .createIndex("nodeclusters_ns")
          .on("nodeclusters")
          .columns(["namespace", "id"])
          .execute();
        await serial(db.schema.createTable("nodes"), "id")
          .addColumn("uuid", "text", (c) => c.notNull().unique())
          .addColumn("namespace", "text", (c) => c.notNull())
          .addColumn("cluster_uuid", "text")
          .addColumn("provider", "text", (c) => c.notNull())
          .addColumn("region", "text", (c) => c.notNull())
          .addColumn("node_type", "text", (c) => c.notNull())
          .addColumn("availability_zone", "text")
          .addColumn("state", "text", (c) => c.notNull())
          .addColumn("external_fqdn", "text", (c) => c.notNull())
          .addColumn("nickname", "text", (c) => c.notNull())
          .addColumn("engine_url", "text", (c) => c.notNull())
          .addColumn("engine_tls", "text")
          .addColumn("engine_id", "text", (c) => c.notNull())
          .addColumn("engine_execdriver", "text", (c) => c.notNull())
          .addColumn("engine_graphdriver", "text", (c) => c.notNull())
          .addColumn("engine_version", "text", (c) => c.notNull())
          .addColumn("cpu", "integer", (c) => c.notNull())
          .addColumn("memory", "integer", (c) => c.notNull())
          .addColumn("disk", "integer", (c) => c.notNull())
          .addColumn("public_ip", "text", (c) => c.notNull())
          .addColumn("tunnel", "text")
          .addColumn("private_subnet", "text", (c) => c.notNull())
          .addColumn("slot", "integer", (c) => c.notNull())
          .addColumn("last_seen", "bigint")
          .addColumn("unreachable_since", "bigint")
          .addColumn("deployed_at", "bigint")
          .addColumn("destroyed_at", "bigint")
          .addColumn("tags", "text", (c) => c.notNull())
          .addColumn("created", "bigint", (c) => c.notNull())
          .addColumn("version", "integer", (c) => c.notNull())
          .execute();
        await db.schema.createIndex("nodes_ns").on("nodes").columns(["namespace", "id"]).execute();
        await db.schema.createIndex("nodes_cluster").on("nodes").columns(["cluster_uuid"]).execute();
      },
    },
    "0003_services": {
      async up(db: AnyDb) {
        await serial(db.schema.createTable("services"), "id")
          .addColumn("uuid", "text", (c) => c.notNull().unique())
          .addColumn("namespace", "text", (c) => c.notNull())
          .addColumn("name", "text", (c) => c.notNull())
          .addColumn("nickname", "text", (c) => c.notNull())
          .addColumn("state", "text", (c) => c.notNull())
          .addColumn("stack_uuid", "text")
          .addColumn("target_num_containers", "integer", (c) => c.notNull())
          .addColumn("spec", "text", (c) => c.notNull())
          .addColumn("spec_version", "integer", (c) => c.notNull())
          .addColumn("auth_secret", "text")
          .addColumn("deployed_at", "bigint")
          .addColumn("started_at", "bigint")
          .addColumn("stopped_at", "bigint")
          .addColumn("destroyed_at", "bigint")
          .addColumn("created", "bigint", (c) => c.notNull())
          .addColumn("version", "integer", (c) => c.notNull())
          .execute();
        await db.schema.createIndex("services_ns").on("services").columns(["namespace", "id"]).execute();
        await serial(db.schema.createTable("containers"), "id")
          .addColumn("uuid", "text", (c) => c.notNull().unique())
          .addColumn("namespace", "text", (c) => c.notNull())
          .addColumn("service_uuid", "text", (c) => c.notNull())
          .addColumn("node_uuid", "text", (c) => c.notNull())
          .addColumn("name", "text", (c) => c.notNull())
          .addColumn("number", "integer", (c) => c.notNull())
          .addColumn("state", "text", (c) => c.notNull())
          .addColumn("desired", "text", (c) => c.notNull())
          .addColumn("engine_id", "text")
          .addColumn("exit_code", "integer")
          .addColumn("exit_code_msg", "text")
          .addColumn("private_ip", "text", (c) => c.notNull())
          .addColumn("ports", "text", (c) => c.notNull())
          .addColumn("spec", "text", (c) => c.notNull())
          .addColumn("spec_version", "integer", (c) => c.notNull())
          .addColumn("generation", "text", (c) => c.notNull())
          .addColumn("deployed_at", "bigint")
          .addColumn("started_at", "bigint")
          .addColumn("stopped_at", "bigint")
          .addColumn("destroyed_at", "bigint")
          .addColumn("created", "bigint", (c) => c.notNull())
          .addColumn("version", "integer", (c) => c.notNull())
          .execute();
        await db.schema.createIndex("containers_ns").on("containers").columns(["namespace", "id"]).execute();
        await db.schema
          .createIndex("containers_service")
          .on("containers")
          .columns(["service_uuid"])
          .execute();
        await db.schema
          .createIndex("containers_node")
          .on("containers")
          .columns(["node_uuid", "state"])
          .execute();
        await serial(db.schema.createTable("stacks"), "id")
          .addColumn("uuid", "text", (c) => c.notNull().unique())
          .addColumn("namespace", "text", (c) => c.notNull())
          .addColumn("name", "text", (c) => c.notNull())
          .addColumn("nickname", "text", (c) => c.notNull())
          .addColumn("state", "text", (c) => c.notNull())
          .addColumn("deployed_at", "bigint")
          .addColumn("destroyed_at", "bigint")
          .addColumn("created", "bigint", (c) => c.notNull())
          .addColumn("version", "integer", (c) => c.notNull())
          .execute();
        await db.schema.createIndex("stacks_ns").on("stacks").columns(["namespace", "id"]).execute();
      },
    },
    "0004_accounts": {
      async up(db: AnyDb) {
        await serial(db.schema.createTable("access_tokens"), "id")
          .addColumn("token_hash", "text", (c) => c.notNull().unique())
          .addColumn("user_id", "integer", (c) => c.notNull())
          .addColumn("scopes", "text", (c) => c.notNull())
          .addColumn("created", "bigint", (c) => c.notNull())
          .addColumn("expires", "bigint", (c) => c.notNull())
          .execute();
        await db.schema
          .createIndex("access_tokens_expires")
          .on("access_tokens")
          .columns(["expires"])
          .execute();
        await db.schema
          .createTable("email_tokens")
          .addColumn("token_hash", "text", (c) => c.primaryKey())
          .addColumn("user_id", "integer", (c) => c.notNull())
          .addColumn("email", "text", (c) => c.notNull())
          .addColumn("created", "bigint", (c) => c.notNull())
          .addColumn("expires", "bigint", (c) => c.notNull())
          .execute();
        await db.schema
          .createIndex("email_tokens_address")
          .on("email_tokens")
          .columns(["user_id", "email"])
          .execute();
      },
    },
    "0005_registries": {
      async up(db: AnyDb) {
        await serial(db.schema.createTable("repositories"), "id")
          .addColumn("uuid", "text", (c) => c.notNull().unique())
          .addColumn("namespace", "text", (c) => c.notNull())
          .addColumn("name", "text", (c) => c.notNull())
          .addColumn("registry_host", "text", (c) => c.notNull())
          .addColumn("credentials", "text")
          .addColumn("created", "bigint", (c) => c.notNull())
          .addColumn("updated", "bigint", (c) => c.notNull())
          .addUniqueConstraint("repositories_ns_name", ["namespace", "name"])
          .execute();
        await serial(db.schema.createTable("triggers"), "id")
          .addColumn("uuid", "text", (c) => c.notNull().unique())
          .addColumn("namespace", "text", (c) => c.notNull())
          .addColumn("service_uuid", "text", (c) => c.notNull())
          .addColumn("name", "text", (c) => c.notNull())
          .addColumn("operation", "text", (c) => c.notNull())
          .addColumn("secret_hash", "text", (c) => c.notNull())
          .addColumn("created_by", "text", (c) => c.notNull())
          .addColumn("created", "bigint", (c) => c.notNull())
          .execute();
        await db.schema
          .createIndex("triggers_service")
          .on("triggers")
          .columns(["service_uuid", "id"])
          .execute();
      },
    },
    "0007_sessions": {
      async up(db: AnyDb) {
        // Dashboard sign-in sessions: the cookie's token is kept only as its SHA-256.
        await serial(db.schema.createTable("sessions"), "id")
          .addColumn("token_hash", "text", (c) => c.notNull().unique())
          .addColumn("user_id", "integer", (c) => c.notNull())
          .addColumn("created", "bigint", (c) => c.notNull())
          .addColumn("expires", "bigint", (c) => c.notNull())
          .addColumn("user_agent", "text", (c) => c.notNull())
          .execute();
        await db.schema.createIndex("sessions_expires").on("sessions").columns(["expires"]).execute();
      },
    },
    "0009_agents": {
      async up(db: AnyDb) {
        await serial(db.schema.createTable("registration_tokens"), "id")
          .addColumn("uuid", "text", (c) => c.notNull().unique())
          .addColumn("namespace", "text", (c) => c.notNull())
          .addColumn("token_hash", "text", (c) => c.notNull().unique())
          .addColumn("created_by", "text", (c) => c.notNull())
          .addColumn("created", "bigint", (c) => c.notNull())
          .addColumn("expires", "bigint", (c) => c.notNull())
          .addColumn("used_at", "bigint")
          .addColumn("node_uuid", "text")
          .execute();
        await db.schema
          .createIndex("registration_tokens_ns")
          .on("registration_tokens")
          .columns(["namespace", "id"])
          .execute();
        await db.schema
          .createTable("agent_keys")
          .addColumn("node_uuid", "text", (c) => c.primaryKey())
          .addColumn("namespace", "text", (c) => c.notNull())
          .addColumn("key_hash", "text", (c) => c.notNull().unique())
          .addColumn("created", "bigint", (c) => c.notNull())
          .addColumn("revoked_at", "bigint")
          .execute();
      },
    },
    // Replicas on one PostgreSQL (issue 16): live replicas and their heartbeats, named leases on
    // work that must happen once (a node's watchers, the periodic reconcile), failed sign-in
    // counters every replica shares, and control-plane facts such as "restored from a backup".
    "0010_replicas": {
      async up(db: AnyDb) {
        await db.schema
          .createTable("replicas")
          .addColumn("id", "text", (c) => c.primaryKey())
          .addColumn("started_at", "bigint", (c) => c.notNull())
          .addColumn("heartbeat_at", "bigint", (c) => c.notNull())
          .addColumn("stopping", "integer", (c) => c.notNull().defaultTo(0))
          .execute();
        await db.schema
          .createTable("leases")
          .addColumn("name", "text", (c) => c.primaryKey())
          .addColumn("owner", "text", (c) => c.notNull())
          .addColumn("until", "bigint", (c) => c.notNull())
          .addColumn("acquired_at", "bigint", (c) => c.notNull())
          .execute();
        await db.schema
          .createTable("login_failures")
          .addColumn("key", "text", (c) => c.primaryKey())
          .addColumn("failures", "integer", (c) => c.notNull())
          .addColumn("reset_at", "bigint", (c) => c.notNull())
          .execute();
        await db.schema
          .createTable("control_facts")
          .addColumn("name", "text", (c) => c.primaryKey())
          .addColumn("value", "text", (c) => c.notNull())
          .execute();
      },
    },
    "0011_perf_indexes": {
      async up(db: AnyDb) {
        // Every filter and ordering the list routes offer has an index that starts with the
        // namespace and ends with the id (the order of every page), so a page seeks instead of
        // scanning, whatever the namespace holds.
        const index = (name: string, table: string, columns: string[]) =>
          db.schema.createIndex(name).on(table).columns(columns).execute();
        await index("services_ns_state", "services", ["namespace", "state", "id"]);
        await index("services_ns_name", "services", ["namespace", "name", "id"]);
        await index("services_stack", "services", ["stack_uuid", "id"]);
        await index("containers_ns_state", "containers", ["namespace", "state", "id"]);
        await index("containers_ns_name", "containers", ["namespace", "name", "id"]);
        await index("containers_ns_node", "containers", ["namespace", "node_uuid", "id"]);
        await index("containers_service_state", "containers", ["service_uuid", "state", "number"]);
        await index("nodes_ns_state", "nodes", ["namespace", "state", "id"]);
        await index("nodes_ns_cluster", "nodes", ["namespace", "cluster_uuid", "id"]);
        await index("nodeclusters_ns_state", "nodeclusters", ["namespace", "state", "id"]);
        await index("stacks_ns_name", "stacks", ["namespace", "name", "id"]);
        await index("stacks_ns_state", "stacks", ["namespace", "state", "id"]);
        await index("actions_ns_state", "actions", ["namespace", "state", "id"]);
        await index("actions_ns_object", "actions", ["namespace", "object", "id"]);
        await index("actions_pending", "actions", ["state", "object", "id"]);
        await index("api_keys_user", "api_keys", ["user_id", "id"]);
        await index("api_keys_service", "api_keys", ["service_uuid"]);
        await index("org_members_user", "org_members", ["username", "org"]);
        await db.schema
          .createTable("service_links")
          .addColumn("from_uuid", "text", (c) => c.notNull())
          .addColumn("to_uuid", "text", (c) => c.notNull())
          .addColumn("name", "text", (c) => c.notNull())
          .addColumn("position", "integer", (c) => c.notNull())
          .addPrimaryKeyConstraint("service_links_pk", ["from_uuid", "position"])
          .execute();
        await index("service_links_to", "service_links", ["to_uuid", "from_uuid"]);
        const services = (await db.selectFrom("services").select(["uuid", "spec"]).execute()) as {
          uuid: string;
          spec: string;
        }[];
        for (const s of services) {
          const rows = specLinks(s.uuid, s.spec);
          if (rows.length) await db.insertInto("service_links").values(rows).execute();
        }
      },
    },
    "0012_container_environment": {
      async up(db: AnyDb) {
        // What each engine container was really created with: its environment (calculated_envvars
        // tells the truth) and the link host entries last written into it (links follow).
        await db.schema.alterTable("containers").addColumn("environment", "text").execute();
        await db.schema.alterTable("containers").addColumn("link_hosts", "text").execute();
      },
    },
    "0014_changes_ns": {
      async up(db: AnyDb) {
        // The latest revision of a namespace in one seek: cached views are checked against it on
        // every request (api/answer-cache.ts, Store.namespaceRevision).
        await db.schema.createIndex("changes_ns").on("changes").columns(["namespace", "revision"]).execute();
      },
    },
    "0016_container_versions": {
      async up(db: AnyDb) {
        // The versions of a page's containers in one index-only read (ServiceStore.containerVersions:
        // cached service views are checked against them). Its first column serves every lookup
        // `containers_service` served, so that one goes: a container write still updates as many indexes.
        await db.schema
          .createIndex("containers_versions")
          .on("containers")
          .columns(["service_uuid", "uuid", "version", "state", "namespace"])
          .execute();
        await db.schema.dropIndex("containers_service").execute();
      },
    },
    "0017_live_containers_per_node": {
      async up(db: AnyDb) {
        // The live containers of a page of nodes, counted from an index that holds live containers
        // only (ServiceStore.countLiveContainersOnNodes, ServiceStore.liveContainers of a node):
        // terminated containers stay in the table for good, and `containers_node` kept every one
        // of them under its node, so a count of a node's live ones read its whole history. Its
        // columns answer the count alone, with the namespaces counted (cached node answers check
        // them). It replaces `containers_node`, which served only these lookups.
        await db.schema
          .createIndex("containers_live_node")
          .on("containers")
          .columns(["node_uuid", "namespace", "state"])
          .where(sql.ref("state"), "<>", sql.lit("Terminated"))
          .execute();
        await db.schema.dropIndex("containers_node").execute();
      },
    },
    "0013_state_owners": {
      async up(db: AnyDb) {
        // One writer per piece of state: actions write `phase`, engines and health checks
        // `observed`, and the store derives `state` from both (domain/states.ts). Backfilled from
        // `state` so that the derivation gives every row the state it had.
        await db.schema.alterTable("containers").addColumn("phase", "text").execute();
        await db.schema
          .alterTable("containers")
          .addColumn("observed", "text", (c) => c.notNull().defaultTo("none"))
          .execute();
        await sql`update containers set
          phase = case
            when state = 'Starting' and engine_id is null then 'starting'
            when state = 'Stopping' then 'stopping'
            when state = 'Terminating' then 'terminating'
          end,
          observed = case
            when state = 'Running' then 'running'
            when state = 'Starting' and engine_id is not null then 'restarting'
            when state = 'Terminated' then 'missing'
            when engine_id is null then (case when state = 'Stopped' then 'missing' else 'none' end)
            when state = 'Stopped' then 'exited'
            else 'running'
          end,
          destroyed_at = case
            when state = 'Terminated' then coalesce(destroyed_at, stopped_at, created)
            else destroyed_at
          end`.execute(db);
        await db.schema.alterTable("nodes").addColumn("phase", "text").execute();
        await db.schema
          .alterTable("nodes")
          .addColumn("observed", "text", (c) => c.notNull().defaultTo("reachable"))
          .execute();
        await sql`update nodes set
          phase = case
            when state = 'Deploying' then 'deploying'
            when state = 'Upgrading' then 'upgrading'
            when state = 'Terminating' then 'terminating'
          end,
          observed = case when state = 'Unreachable' then 'unreachable' else 'reachable' end,
          destroyed_at = case
            when state = 'Terminated' then coalesce(destroyed_at, created)
            else destroyed_at
          end`.execute(db);
      },
    },
    "0018_namespace_settings": {
      async up(db: AnyDb) {
        // What administrators decide per namespace: privileges of its containers (issue 26) and,
        // reserved for quotas, its limits. JSON objects; a namespace without a row has the defaults.
        await db.schema
          .createTable("namespace_settings")
          .addColumn("namespace", "text", (c) => c.primaryKey())
          .addColumn("privileges", "text", (c) => c.notNull().defaultTo("{}"))
          .addColumn("limits", "text", (c) => c.notNull().defaultTo("{}"))
          .execute();
      },
    },
    "0019_access_ends": {
      async up(db: AnyDb) {
        // Access ends where it was granted (issue 26 item 3): registration tokens and triggers name
        // the user who made them by id, so that what a removed member made in an organization is
        // found and revoked, and what a user who lost the namespace (or was deactivated) made
        // refuses at use. Backfilled from `created_by` (the username, unique and never reused);
        // null: unknown creator, and the token or trigger keeps working as before.
        for (const table of ["registration_tokens", "triggers"]) {
          await db.schema.alterTable(table).addColumn("creator_id", "integer").execute();
          await sql`update ${sql.table(table)} set creator_id =
            (select u.id from users u where u.username = ${sql.ref(`${table}.created_by`)})`.execute(db);
          await db.schema
            .createIndex(`${table}_creator`)
            .on(table)
            .columns(["creator_id", "namespace"])
            .execute();
        }
        // Sessions and access tokens of one user end together (password change, deactivation,
        // sign-out everywhere).
        await db.schema.createIndex("sessions_user").on("sessions").columns(["user_id"]).execute();
        await db.schema.createIndex("access_tokens_user").on("access_tokens").columns(["user_id"]).execute();
      },
    },
    // Organization invitations (issue 26): an owner invites, the invited user accepts or declines.
    // Quotas count rows that exist already; their limits live in namespace_settings.limits (0018).
    "0020_invitations_quotas": {
      async up(db: AnyDb) {
        await db.schema
          .createTable("org_invitations")
          .ifNotExists()
          .addColumn("org", "text", (c) => c.notNull())
          .addColumn("username", "text", (c) => c.notNull())
          .addColumn("user_id", "integer")
          .addColumn("role", "text", (c) => c.notNull())
          .addColumn("invited_by", "text", (c) => c.notNull())
          .addColumn("created", "bigint", (c) => c.notNull())
          .addPrimaryKeyConstraint("org_invitations_pk", ["org", "username"])
          .execute();
        await db.schema
          .createIndex("org_invitations_user")
          .ifNotExists()
          .on("org_invitations")
          .columns(["username", "org"])
          .execute();
      },
    },
    "0022_plan_guard": {
      async up(db: AnyDb) {
        // Each node's placement generation (orchestrator/plan-applier.ts): every commit of
        // placements moves the generation of the nodes it placed on, and a plan made over a
        // snapshot that read an older one is refused at commit (another replica placed there
        // meanwhile). A node without a row has generation 0.
        await db.schema
          .createTable("placement_guards")
          .addColumn("node_uuid", "text", (c) => c.primaryKey())
          .addColumn("namespace", "text", (c) => c.notNull())
          .addColumn("generation", "integer", (c) => c.notNull())
          .execute();
        await db.schema
          .createIndex("placement_guards_namespace")
          .on("placement_guards")
          .column("namespace")
          .execute();
      },
    },
    "0024_rollout": {
      async up(db: AnyDb) {
        // A container's health as its engine last reported it (domain/health.ts): starting,
        // healthy or unhealthy; null when it has no check.
        await db.schema.alterTable("containers").addColumn("health", "text").execute();
      },
    },
    // The router (issue 30): host names held by namespaces, and the certificates of routed ones.
    "0026_router": {
      async up(db: AnyDb) {
        await db.schema
          .createTable("host_claims")
          .addColumn("host", "text", (c) => c.primaryKey())
          .addColumn("namespace", "text", (c) => c.notNull())
          .addColumn("reserved", "integer", (c) => c.notNull().defaultTo(0))
          .addColumn("created", "bigint", (c) => c.notNull())
          .execute();
        await db.schema.createIndex("host_claims_namespace").on("host_claims").column("namespace").execute();
        await db.schema
          .createTable("router_certificates")
          .addColumn("host", "text", (c) => c.primaryKey())
          .addColumn("namespace", "text", (c) => c.notNull())
          .addColumn("state", "text", (c) => c.notNull())
          .addColumn("issuer", "text", (c) => c.notNull().defaultTo(""))
          .addColumn("expires_at", "bigint")
          .addColumn("error", "text")
          .addColumn("sealed_cert", "text")
          .addColumn("sealed_key", "text")
          .addColumn("updated", "bigint", (c) => c.notNull())
          .execute();
      },
    },
    // Backups of services' volumes (issue 31, ops/volume-backups.ts): one row per
    // backup with its archives (a file per container and volume path), and a schedule per service.
    "0027_backups": {
      async up(db: AnyDb) {
        await serial(db.schema.createTable("volume_backups"), "id")
          .addColumn("uuid", "text", (c) => c.notNull().unique())
          .addColumn("namespace", "text", (c) => c.notNull())
          .addColumn("service_uuid", "text", (c) => c.notNull())
          .addColumn("service_name", "text", (c) => c.notNull())
          .addColumn("state", "text", (c) => c.notNull())
          .addColumn("trigger", "text", (c) => c.notNull())
          .addColumn("created", "bigint", (c) => c.notNull())
          .addColumn("finished", "bigint")
          .addColumn("size_bytes", "bigint", (c) => c.notNull().defaultTo(0))
          .addColumn("archives", "text", (c) => c.notNull().defaultTo("[]"))
          .addColumn("action_uuid", "text")
          .addColumn("error", "text")
          .execute();
        await db.schema
          .createIndex("volume_backups_service")
          .on("volume_backups")
          .columns(["service_uuid", "id"])
          .execute();
        await db.schema
          .createIndex("volume_backups_namespace")
          .on("volume_backups")
          .columns(["namespace", "id"])
          .execute();
        await db.schema
          .createTable("volume_backup_schedules")
          .addColumn("service_uuid", "text", (c) => c.primaryKey())
          .addColumn("namespace", "text", (c) => c.notNull())
          .addColumn("every_hours", "integer", (c) => c.notNull())
          .addColumn("keep", "integer", (c) => c.notNull())
          .addColumn("pause", "integer", (c) => c.notNull())
          .addColumn("pre_command", "text")
          .addColumn("next_at", "bigint", (c) => c.notNull())
          .execute();
      },
    },
    // Stats and alerts (issue 32). Stats points are short-retention series (the collection step,
    // and minutes rolled up from it), one row per container or node per step, not objects with
    // events. Alert rules, their incidents (one open incident per rule and subject: fires once)
    // and the delivery log of each notification.
    "0028_stats_alerts": {
      async up(db: AnyDb) {
        const num = "double precision";
        await db.schema
          .createTable("stat_points")
          .addColumn("kind", "text", (c) => c.notNull())
          .addColumn("uuid", "text", (c) => c.notNull())
          .addColumn("namespace", "text", (c) => c.notNull())
          .addColumn("service_uuid", "text")
          .addColumn("node_uuid", "text")
          .addColumn("step", "integer", (c) => c.notNull())
          .addColumn("at", "bigint", (c) => c.notNull())
          .addColumn("cpu", num, (c) => c.notNull())
          .addColumn("cpus", num, (c) => c.notNull())
          .addColumn("memory", num, (c) => c.notNull())
          .addColumn("memory_limit", num, (c) => c.notNull())
          .addColumn("net_rx", num, (c) => c.notNull())
          .addColumn("net_tx", num, (c) => c.notNull())
          .addColumn("block_read", num, (c) => c.notNull())
          .addColumn("block_write", num, (c) => c.notNull())
          .addColumn("pids", num, (c) => c.notNull())
          .addColumn("restarts", num, (c) => c.notNull())
          .addColumn("containers", num, (c) => c.notNull())
          .addPrimaryKeyConstraint("stat_points_pk", ["uuid", "step", "at"])
          .execute();
        await db.schema
          .createIndex("stat_points_service")
          .on("stat_points")
          .columns(["service_uuid", "step", "at"])
          .execute();
        await db.schema.createIndex("stat_points_at").on("stat_points").columns(["step", "at"]).execute();
        await db.schema
          .createTable("alert_rules")
          .addColumn("uuid", "text", (c) => c.primaryKey())
          .addColumn("namespace", "text", (c) => c.notNull())
          .addColumn("name", "text", (c) => c.notNull())
          .addColumn("kind", "text", (c) => c.notNull())
          .addColumn("params", "text", (c) => c.notNull())
          .addColumn("channels", "text", (c) => c.notNull())
          .addColumn("enabled", "integer", (c) => c.notNull())
          .addColumn("created_by", "text", (c) => c.notNull())
          .addColumn("created", "bigint", (c) => c.notNull())
          .execute();
        await db.schema
          .createIndex("alert_rules_namespace")
          .on("alert_rules")
          .columns(["namespace"])
          .execute();
        await db.schema
          .createTable("alert_incidents")
          .addColumn("uuid", "text", (c) => c.primaryKey())
          .addColumn("rule_uuid", "text", (c) => c.notNull())
          .addColumn("namespace", "text", (c) => c.notNull())
          .addColumn("subject", "text", (c) => c.notNull())
          .addColumn("summary", "text", (c) => c.notNull())
          .addColumn("started", "bigint", (c) => c.notNull())
          .addColumn("resolved", "bigint")
          .execute();
        // One open incident per rule and subject: a condition that holds fires once.
        await db.schema
          .createIndex("alert_incidents_open")
          .unique()
          .on("alert_incidents")
          .columns(["rule_uuid", "subject"])
          .where(sql.ref("resolved"), "is", null)
          .execute();
        await db.schema
          .createIndex("alert_incidents_rule")
          .on("alert_incidents")
          .columns(["rule_uuid", "started"])
          .execute();
        await db.schema
          .createTable("alert_deliveries")
          .addColumn("uuid", "text", (c) => c.primaryKey())
          .addColumn("incident_uuid", "text", (c) => c.notNull())
          .addColumn("rule_uuid", "text", (c) => c.notNull())
          .addColumn("namespace", "text", (c) => c.notNull())
          .addColumn("channel", "integer", (c) => c.notNull())
          .addColumn("target", "text", (c) => c.notNull())
          .addColumn("event", "text", (c) => c.notNull())
          .addColumn("state", "text", (c) => c.notNull())
          .addColumn("attempts", "integer", (c) => c.notNull())
          .addColumn("next_at", "bigint", (c) => c.notNull())
          .addColumn("last_error", "text", (c) => c.notNull())
          .addColumn("created", "bigint", (c) => c.notNull())
          .addColumn("delivered", "bigint")
          .execute();
        await db.schema
          .createIndex("alert_deliveries_due")
          .on("alert_deliveries")
          .columns(["state", "next_at"])
          .execute();
        await db.schema
          .createIndex("alert_deliveries_rule")
          .on("alert_deliveries")
          .columns(["rule_uuid", "created"])
          .execute();
      },
    },
    "0029_dashboard": {
      async up(db: AnyDb) {
        // The dashboard's name search (`name__icontains`) reads names from an index that also
        // holds the state (hide terminated), never the wide rows: at 30,000 containers a search
        // answers in milliseconds.
        const index = (name: string, table: string, columns: string[]) =>
          db.schema.createIndex(name).on(table).columns(columns).execute();
        await index("containers_ns_state_name", "containers", ["namespace", "state", "name", "id"]);
        await index("services_ns_state_name", "services", ["namespace", "state", "name", "id"]);
      },
    },
    "0030_perf": {
      async up(db: AnyDb) {
        // The engines of simulated nodes, shared by every replica (nodes/simulated-engines.ts):
        // each container as its engine last recorded it, with the tail of its logs. Every write
        // moves the one clock row, whose row lock orders the writers' commits, so a replica
        // following `seq` never skips a commit that lands late. A removed container stays as a
        // tombstone (`removed` = 1) until its node's engine is dropped.
        await db.schema
          .createTable("simulated_containers")
          .addColumn("engine_id", "text", (c) => c.primaryKey())
          .addColumn("node_uuid", "text", (c) => c.notNull())
          .addColumn("seq", "bigint", (c) => c.notNull())
          .addColumn("removed", "integer", (c) => c.notNull().defaultTo(0))
          .addColumn("data", "text", (c) => c.notNull())
          .execute();
        await db.schema
          .createIndex("simulated_containers_node")
          .on("simulated_containers")
          .columns(["node_uuid", "seq"])
          .execute();
        await db.schema
          .createIndex("simulated_containers_seq")
          .on("simulated_containers")
          .column("seq")
          .execute();
        await db.schema
          .createTable("simulated_clock")
          .addColumn("id", "integer", (c) => c.primaryKey())
          .addColumn("seq", "bigint", (c) => c.notNull())
          .execute();
      },
    },
    "0025_rollout_revisions": {
      async up(db: AnyDb) {
        // How often its engine restarted a container since Berth started it (a crash loop shows
        // as a service's health "crashing", domain/health.ts).
        await db.schema
          .alterTable("containers")
          .addColumn("restart_count", "integer", (c) => c.notNull().defaultTo(0))
          .execute();
      },
    },
    // Kept definitions of services (issue 29, store/revisions.ts): every definition a service was
    // given, numbered by its spec_version, so a rollback can return to it. Services that exist
    // already keep the definition they have now as their first revision (cause "existing").
    "0031_revisions": {
      async up(db: AnyDb) {
        await db.schema
          .createTable("service_revisions")
          .addColumn("service_uuid", "text", (c) => c.notNull())
          .addColumn("number", "integer", (c) => c.notNull())
          .addColumn("namespace", "text", (c) => c.notNull())
          .addColumn("spec", "text", (c) => c.notNull())
          .addColumn("cause", "text", (c) => c.notNull())
          .addColumn("action_uuid", "text")
          .addColumn("created", "bigint", (c) => c.notNull())
          .addPrimaryKeyConstraint("service_revisions_pk", ["service_uuid", "number"])
          .execute();
        await sql`insert into service_revisions (service_uuid, number, namespace, spec, cause, action_uuid, created)
          select uuid, spec_version, namespace, spec, 'existing', null, created from services
          where state <> 'Terminated'`.execute(db);
      },
    },
    // Engine containers drained from the routers, or held routed while their records move (issue
    // 30, router/drains.ts): in the database, so every replica builds the same routes.
    "0032_router_drains": {
      async up(db: AnyDb) {
        await db.schema
          .createTable("router_drains")
          .addColumn("key", "text", (c) => c.primaryKey())
          .addColumn("namespace", "text", (c) => c.notNull())
          .addColumn("container_uuid", "text", (c) => c.notNull())
          .addColumn("kind", "text", (c) => c.notNull())
          .addColumn("container", "text")
          .addColumn("until", "bigint", (c) => c.notNull())
          .execute();
        await db.schema
          .createIndex("router_drains_namespace")
          .on("router_drains")
          .column("namespace")
          .execute();
      },
    },
    // S3-compatible backup targets (issue 31, ops/backup-targets.ts): the secret key sealed; volume
    // backups and their schedules name the target they go to (null: the data directory), and
    // schedules keep daily and weekly tiers besides the newest `keep`.
    "0033_backup_targets": {
      async up(db: AnyDb) {
        await db.schema
          .createTable("backup_targets")
          .addColumn("uuid", "text", (c) => c.primaryKey())
          .addColumn("name", "text", (c) => c.notNull().unique())
          .addColumn("endpoint", "text", (c) => c.notNull())
          .addColumn("bucket", "text", (c) => c.notNull())
          .addColumn("prefix", "text", (c) => c.notNull())
          .addColumn("region", "text", (c) => c.notNull())
          .addColumn("access_key", "text", (c) => c.notNull())
          .addColumn("sealed_secret", "text", (c) => c.notNull())
          .addColumn("path_style", "integer", (c) => c.notNull())
          .addColumn("created", "bigint", (c) => c.notNull())
          .execute();
        await db.schema.alterTable("volume_backups").addColumn("target_uuid", "text").execute();
        await db.schema.alterTable("volume_backup_schedules").addColumn("target_uuid", "text").execute();
        for (const column of ["keep_daily", "keep_weekly"])
          await db.schema
            .alterTable("volume_backup_schedules")
            .addColumn(column, "integer", (c) => c.notNull().defaultTo(0))
            .execute();
      },
    },
    "0035_dashboard": {
      async up(db: AnyDb) {
        // What its health check printed when a container's health last changed (why it is
        // unhealthy, issue 33); null: no check.
        await db.schema.alterTable("containers").addColumn("health_output", "text").execute();
      },
    },
    "0036_sim_claims": {
      async up(db: AnyDb) {
        // The private addresses and published host ports that simulated nodes' containers hold,
        // one row per node and value (store/simulated.ts): two replicas starting containers on
        // one node at once cannot both hand out the same one (the primary key refuses the second).
        await db.schema
          .createTable("simulated_claims")
          .addColumn("node_uuid", "text", (c) => c.notNull())
          .addColumn("claim", "text", (c) => c.notNull())
          .addColumn("engine_id", "text", (c) => c.notNull())
          .addPrimaryKeyConstraint("simulated_claims_pk", ["node_uuid", "claim"])
          .execute();
        await db.schema
          .createIndex("simulated_claims_engine")
          .on("simulated_claims")
          .column("engine_id")
          .execute();
      },
    },
    "0037_router_serials": {
      async up(db: AnyDb) {
        // The serial of the certificate each node's router last served for each host name (issue
        // 30, router/controller.ts): a new one is a renewal, also after a restart of Berth.
        await db.schema
          .createTable("router_serials")
          .addColumn("node_uuid", "text", (c) => c.notNull())
          .addColumn("host", "text", (c) => c.notNull())
          .addColumn("serial", "text", (c) => c.notNull())
          .addColumn("updated", "bigint", (c) => c.notNull())
          .addPrimaryKeyConstraint("router_serials_pk", ["node_uuid", "host"])
          .execute();
      },
    },
    "0040_replica_placement": {
      async up(db: AnyDb) {
        // A clock per simulated node instead of one for all (issue 34, item 4): writers of one
        // node take its row's lock and commit in the order of its `seq`; writers of other nodes
        // no longer wait for each other. Each node's clock starts where its containers were
        // written. `written_at`: when a row was written (tombstones are forgotten by age).
        await db.schema
          .createTable("simulated_node_clocks")
          .addColumn("node_uuid", "text", (c) => c.primaryKey())
          .addColumn("seq", "bigint", (c) => c.notNull())
          .execute();
        await sql`insert into simulated_node_clocks (node_uuid, seq)
          select node_uuid, max(seq) from simulated_containers group by node_uuid`.execute(db);
        await db.schema
          .alterTable("simulated_containers")
          .addColumn("written_at", "bigint", (c) => c.notNull().defaultTo(0))
          .execute();
      },
    },
  };
}

/**
 * Brings the schema to the latest version. Several replicas may start together against one
 * PostgreSQL: a session advisory lock, held on its own connection around the whole migrator
 * (Kysely creates its bookkeeping tables before taking its own lock), makes one of them migrate
 * while the others wait and then find nothing left to do. The lock is per schema, so databases in
 * other schemas of the same server (tests, several installations) never queue behind each other.
 */
export async function migrateToLatest(db: AnyDb, dialect: Dialect): Promise<void> {
  if (dialect !== "postgres") return migrate(db, dialect);
  await db.connection().execute(async (conn) => {
    await sql`select pg_advisory_lock(${sql.lit(MIGRATION_LOCK)}, hashtext(current_schema()))`.execute(conn);
    try {
      await migrate(db, dialect);
    } finally {
      await sql`select pg_advisory_unlock(${sql.lit(MIGRATION_LOCK)}, hashtext(current_schema()))`.execute(
        conn,
      );
    }
  });
}

/** Advisory lock key of the migrator (the change feed uses 7340071). */
const MIGRATION_LOCK = 7340072;

/**
 * Brings the schema to `name` and no further: a database as an older Berth left it, on which the
 * tests of a later migration's backfill write rows of that time.
 */
export async function migrateUpTo(db: AnyDb, dialect: Dialect, name: string): Promise<void> {
  return migrate(db, dialect, name);
}

async function migrate(db: AnyDb, dialect: Dialect, upTo?: string): Promise<void> {
  const provider: MigrationProvider = { getMigrations: async () => migrations(dialect) };
  // Migration numbers are handed out per piece of work, not in landing order: a database that
  // already ran 0009 must still take a 0007 that lands later (each migration is independent).
  // On PostgreSQL the migration tables live in the schema the connection works in (its search_path):
  // left to itself, Kysely would find another schema's tables and skip creating its own.
  const migrationTableSchema =
    dialect === "postgres"
      ? (await sql<{ schema: string }>`select current_schema() as schema`.execute(db)).rows[0]?.schema
      : undefined;
  const migrator = new Migrator({
    db,
    provider,
    allowUnorderedMigrations: true,
    ...(migrationTableSchema ? { migrationTableSchema } : {}),
  });
  const { error, results } = await (upTo ? migrator.migrateTo(upTo) : migrator.migrateToLatest());
  const failed = results?.find((r) => r.status === "Error");
  if (error || failed) {
    throw new Error(`database migration ${failed?.migrationName ?? ""} failed: ${String(error)}`);
  }
}
