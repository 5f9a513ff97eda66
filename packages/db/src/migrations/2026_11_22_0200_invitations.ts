import { sql, type Kysely } from 'kysely';

// Membership needs the invitee's consent: an owner invites an email, the user with that email accepts.

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('invitations')
    .addColumn('id', 'uuid', (c) => c.primaryKey().defaultTo(sql`gen_random_uuid()`))
    .addColumn('tenant_id', 'uuid', (c) => c.notNull().references('tenants.id').onDelete('cascade'))
    .addColumn('email', 'text', (c) => c.notNull())
    .addColumn('role', 'text', (c) => c.notNull().check(sql`role in ('owner', 'member')`))
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('invited_by', 'uuid', (c) => c.references('users.id').onDelete('set null'))
    .addColumn('status', 'text', (c) =>
      c
        .notNull()
        .defaultTo('pending')
        .check(sql`status in ('pending', 'accepted', 'declined', 'revoked')`),
    )
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('responded_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addCheckConstraint('invitations_email_lowercase', sql`email = lower(email)`)
    .execute();
  // One open invitation per tenant and email: inviting again renews it.
  await db.schema
    .createIndex('invitations_pending_uniq')
    .on('invitations')
    .columns(['tenant_id', 'email'])
    .unique()
    .where(sql.ref('status'), '=', 'pending')
    .execute();
  await db.schema.createIndex('invitations_email_idx').on('invitations').column('email').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('invitations').ifExists().execute();
}
