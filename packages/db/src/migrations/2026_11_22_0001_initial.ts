import { sql, type Kysely } from 'kysely';

// Written against plain snake_case names and no table types, so it stays valid as the types move on.

const uuidPk = sql`gen_random_uuid()`;

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('tenants')
    .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(uuidPk))
    .addColumn('slug', 'text', (c) => c.notNull().unique())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('rpm_limit', 'integer')
    .addColumn('tpm_limit', 'integer')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addCheckConstraint('tenants_slug_format', sql`slug ~ '^[a-z0-9][a-z0-9-]*$'`)
    .execute();

  await db.schema
    .createTable('users')
    .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(uuidPk))
    .addColumn('email', 'text', (c) => c.notNull().unique())
    .addColumn('password_hash', 'text', (c) => c.notNull())
    .addColumn('display_name', 'text')
    .addColumn('is_platform_admin', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addCheckConstraint('users_email_lowercase', sql`email = lower(email)`)
    .execute();

  await db.schema
    .createTable('memberships')
    .addColumn('tenant_id', 'uuid', (c) => c.notNull().references('tenants.id').onDelete('cascade'))
    .addColumn('user_id', 'uuid', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('role', 'text', (c) => c.notNull().check(sql`role in ('owner', 'member')`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('memberships_pkey', ['tenant_id', 'user_id'])
    .execute();
  await db.schema.createIndex('memberships_user_id_idx').on('memberships').column('user_id').execute();

  await db.schema
    .createTable('sessions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'uuid', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('sessions_user_id_idx').on('sessions').column('user_id').execute();

  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(uuidPk))
    .addColumn('tenant_id', 'uuid', (c) => c.notNull().references('tenants.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('prefix', 'text', (c) => c.notNull())
    .addColumn('hash', 'text', (c) => c.notNull().unique())
    .addColumn('created_by', 'uuid', (c) => c.references('users.id').onDelete('set null'))
    .addColumn('last_used_at', 'timestamptz')
    .addColumn('expires_at', 'timestamptz')
    .addColumn('revoked_at', 'timestamptz')
    .addColumn('rpm_limit', 'integer')
    .addColumn('tpm_limit', 'integer')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('api_keys_tenant_id_idx').on('api_keys').column('tenant_id').execute();

  await db.schema
    .createTable('admin_tokens')
    .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(uuidPk))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('prefix', 'text')
    .addColumn('hash', 'text', (c) => c.notNull().unique())
    .addColumn('user_id', 'uuid', (c) => c.references('users.id').onDelete('cascade'))
    .addColumn('tenant_id', 'uuid', (c) => c.references('tenants.id').onDelete('cascade'))
    .addColumn('last_used_at', 'timestamptz')
    .addColumn('expires_at', 'timestamptz')
    .addColumn('revoked_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('catalog_entries')
    .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(uuidPk))
    .addColumn('name', 'text', (c) => c.notNull().unique())
    .addColumn('provider', 'text')
    .addColumn('parameter_size_b', 'double precision')
    .addColumn('gpu_count', 'integer')
    .addColumn('context_length', 'integer')
    .addColumn('concurrency', 'double precision')
    .addColumn('cold_start_seconds', 'double precision')
    .addColumn('price_input_per_m', 'double precision')
    .addColumn('price_output_per_m', 'double precision')
    .addColumn('use_cases', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .addColumn('summary', 'text')
    .addColumn('detailed_intro', 'text')
    .addColumn('tags', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .addColumn('offered_shared', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('offered_dedicated', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('published', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('catalog_entries_provider_idx').on('catalog_entries').column('provider').execute();
  await db.schema.createIndex('catalog_entries_tags_idx').on('catalog_entries').using('gin').column('tags').execute();
  await db.schema.createIndex('catalog_entries_use_cases_idx').on('catalog_entries').using('gin').column('use_cases').execute();

  await db.schema
    .createTable('endpoint_upstreams')
    .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(uuidPk))
    .addColumn('entry_id', 'uuid', (c) => c.notNull().references('catalog_entries.id').onDelete('cascade'))
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull().check(sql`kind in ('sim', 'vllm', 'sglang', 'tgi', 'ollama', 'openai')`))
    .addColumn('served_model', 'text', (c) => c.notNull())
    .addColumn('api_key', 'text')
    .addColumn('weight', 'integer', (c) =>
      c
        .notNull()
        .defaultTo(1)
        .check(sql`weight >= 0`),
    )
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('endpoint_upstreams_entry_id_idx').on('endpoint_upstreams').column('entry_id').execute();

  await db.schema
    .createTable('deployments')
    .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(uuidPk))
    .addColumn('tenant_id', 'uuid', (c) => c.notNull().references('tenants.id').onDelete('cascade'))
    .addColumn('entry_id', 'uuid', (c) => c.notNull().references('catalog_entries.id').onDelete('restrict'))
    .addColumn('state', 'text', (c) => c.notNull().check(sql`state in ('pending', 'provisioning', 'running', 'stopped', 'failed')`))
    .addColumn('min_replicas', 'integer', (c) =>
      c
        .notNull()
        .defaultTo(1)
        .check(sql`min_replicas >= 0`),
    )
    .addColumn('max_replicas', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('provisioner', 'text', (c) => c.notNull().defaultTo('local'))
    .addColumn('external_url', 'text')
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('deployments_tenant_entry_key', ['tenant_id', 'entry_id'])
    .addCheckConstraint('deployments_replica_bounds', sql`max_replicas >= min_replicas`)
    .execute();
  await db.schema.createIndex('deployments_entry_id_idx').on('deployments').column('entry_id').execute();

  await db.schema
    .createTable('deployment_replicas')
    .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(uuidPk))
    .addColumn('deployment_id', 'uuid', (c) => c.notNull().references('deployments.id').onDelete('cascade'))
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('served_model', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull().check(sql`state in ('starting', 'ready', 'failed', 'stopped')`))
    .addColumn('pid', 'integer')
    .addColumn('port', 'integer')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('deployment_replicas_deployment_id_idx').on('deployment_replicas').column('deployment_id').execute();

  await db.schema
    .createTable('config_outbox')
    .addColumn('seq', 'bigserial', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull().check(sql`kind in ('tenant', 'key', 'endpoint', 'deployment')`))
    .addColumn('entity_id', 'text', (c) => c.notNull())
    .addColumn('op', 'text', (c) => c.notNull().check(sql`op in ('upsert', 'delete')`))
    .addColumn('payload', 'jsonb')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('usage_records')
    .addColumn('request_id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'uuid', (c) => c.notNull())
    .addColumn('key_id', 'uuid')
    .addColumn('entry_id', 'uuid')
    .addColumn('deployment_id', 'uuid')
    .addColumn('mode', 'text', (c) => c.notNull().check(sql`mode in ('shared', 'dedicated')`))
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('prompt_tokens', 'integer', (c) => c.notNull())
    .addColumn('completion_tokens', 'integer', (c) => c.notNull())
    .addColumn('estimated', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('status', 'integer', (c) => c.notNull())
    .addColumn('ttft_ms', 'double precision')
    .addColumn('latency_ms', 'double precision', (c) => c.notNull())
    .addColumn('cost_usd', 'double precision', (c) => c.notNull().defaultTo(0))
    .addColumn('started_at', 'timestamptz', (c) => c.notNull())
    .addColumn('received_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('usage_records_tenant_started_idx').on('usage_records').columns(['tenant_id', 'started_at']).execute();
  await db.schema.createIndex('usage_records_entry_started_idx').on('usage_records').columns(['entry_id', 'started_at']).execute();

  await db.schema
    .createTable('audit_log')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('actor_user_id', 'uuid')
    .addColumn('actor_token_id', 'uuid')
    .addColumn('tenant_id', 'uuid')
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('target_type', 'text', (c) => c.notNull())
    .addColumn('target_id', 'text')
    .addColumn('detail', 'jsonb')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('audit_log_tenant_created_idx').on('audit_log').columns(['tenant_id', 'created_at']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  // Reverse dependency order: children before the tables they reference.
  for (const table of [
    'audit_log',
    'usage_records',
    'config_outbox',
    'deployment_replicas',
    'deployments',
    'endpoint_upstreams',
    'catalog_entries',
    'admin_tokens',
    'api_keys',
    'sessions',
    'memberships',
    'users',
    'tenants',
  ]) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}
