import type { MembershipRole } from '@infer/db';
import type { Db } from '../../db.ts';
import { isUniqueViolation, notFound, ServiceError } from '../../errors.ts';
import { withTransaction } from '../snapshots/outbox.ts';
import { recordChange } from '../snapshots/snapshots.service.ts';

export interface Tenant {
  id: string;
  slug: string;
  name: string;
  rpmLimit: number | null;
  tpmLimit: number | null;
  createdAt: Date;
}

export interface Membership {
  tenantId: string;
  userId: string;
  role: MembershipRole;
}

const tenantColumns = ['id', 'slug', 'name', 'rpmLimit', 'tpmLimit', 'createdAt'] as const;
const SLUG = /^[a-z0-9][a-z0-9-]{0,62}$/;

export interface CreateTenantInput {
  readonly slug: string;
  readonly name: string;
  readonly rpmLimit?: number | null;
  readonly tpmLimit?: number | null;
}

/** Creates a tenant; the slug is the <tenant> segment of its dedicated URLs. */
export async function createTenant(db: Db, input: CreateTenantInput): Promise<Tenant> {
  if (!SLUG.test(input.slug)) {
    throw new ServiceError('invalid', 'slug must be lowercase letters, digits and dashes (max 63)', 'slug');
  }
  try {
    return await withTransaction(db, async (trx) => {
      const tenant = await trx
        .insertInto('tenants')
        .values({ slug: input.slug, name: input.name.trim() || input.slug, rpmLimit: input.rpmLimit ?? null, tpmLimit: input.tpmLimit ?? null })
        .returning(tenantColumns)
        .executeTakeFirstOrThrow();
      await recordChange(trx, 'tenant', tenant.id);
      return tenant;
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw new ServiceError('conflict', `tenant ${input.slug} already exists`, 'slug');
    throw err;
  }
}

export async function getTenantBySlug(db: Db, slug: string): Promise<Tenant | null> {
  return (await db.selectFrom('tenants').select(tenantColumns).where('slug', '=', slug).executeTakeFirst()) ?? null;
}

export async function getTenantById(db: Db, id: string): Promise<Tenant | null> {
  return (await db.selectFrom('tenants').select(tenantColumns).where('id', '=', id).executeTakeFirst()) ?? null;
}

export async function listTenants(db: Db): Promise<Tenant[]> {
  return db.selectFrom('tenants').select(tenantColumns).orderBy('slug').execute();
}

/** Sets a tenant's rate limits (null: no limit). */
export async function setTenantLimits(
  db: Db,
  tenantId: string,
  limits: { rpmLimit: number | null; tpmLimit: number | null },
): Promise<Tenant> {
  return withTransaction(db, async (trx) => {
    const tenant = await trx.updateTable('tenants').set(limits).where('id', '=', tenantId).returning(tenantColumns).executeTakeFirst();
    if (!tenant) throw notFound('tenant');
    await recordChange(trx, 'tenant', tenantId);
    return tenant;
  });
}

/** Adds a user to a tenant, or changes their role if already a member. */
export async function addMember(db: Db, input: Membership): Promise<Membership> {
  return db
    .insertInto('memberships')
    .values(input)
    .onConflict((oc) => oc.columns(['tenantId', 'userId']).doUpdateSet({ role: input.role }))
    .returning(['tenantId', 'userId', 'role'])
    .executeTakeFirstOrThrow();
}

/** The tenants a user belongs to, with their role. */
export async function listTenantsOfUser(db: Db, userId: string): Promise<(Tenant & { role: MembershipRole })[]> {
  return db
    .selectFrom('memberships as m')
    .innerJoin('tenants as t', 't.id', 'm.tenantId')
    .select(['t.id', 't.slug', 't.name', 't.rpmLimit', 't.tpmLimit', 't.createdAt', 'm.role'])
    .where('m.userId', '=', userId)
    .orderBy('t.slug')
    .execute();
}

export async function getMembership(db: Db, tenantId: string, userId: string): Promise<Membership | null> {
  return (
    (await db
      .selectFrom('memberships')
      .select(['tenantId', 'userId', 'role'])
      .where('tenantId', '=', tenantId)
      .where('userId', '=', userId)
      .executeTakeFirst()) ?? null
  );
}
