import { type Kysely } from 'kysely';

// An admin token minted by another admin token records its parent, so revoking a token ends every token
// minted through it (a leaked token's holder cannot keep access by minting a successor first).
// Tokens minted before this have no parent recorded; they end as before, by their own revocation or expiry.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('admin_tokens')
    .addColumn('parent_token_id', 'uuid', (c) => c.references('admin_tokens.id').onDelete('cascade'))
    .execute();
  await db.schema.createIndex('admin_tokens_parent').on('admin_tokens').column('parent_token_id').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('admin_tokens_parent').ifExists().execute();
  await db.schema.alterTable('admin_tokens').dropColumn('parent_token_id').execute();
}
