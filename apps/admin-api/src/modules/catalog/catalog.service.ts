import { sql } from 'kysely';
import type { RuntimeKind } from '@infer/shared';
import { trimTrailingSlashes } from '@infer/shared';
import { isUuid, type Db } from '../../db.ts';
import { checkName, checkNameCharacters, checkUrlLength, MAX_ENTRY_NAME_LENGTH } from '../../check-name.ts';
import { isUniqueViolation, notFound, ServiceError } from '../../errors.ts';
import { requirePlatformAdmin } from '../access/access.ts';
import { actorOf, type Principal } from '../access/principal.ts';
import { writeAudit } from '../audit/audit.service.ts';
import { repriceOpenIntervals } from '../deployments/gpu-ledger.ts';
import { withTransaction } from '../snapshots/outbox.ts';
import { recordChange } from '../snapshots/snapshots.service.ts';
import { parseEntryInput, type CatalogEntryInput } from './catalog-input.ts';
import { sealStoredSecret } from '../secrets/secret-keyring.ts';

/** A catalog entry with structured values (render string forms with `toCatalogView`). */
export interface CatalogEntry {
  id: string;
  name: string;
  provider: string | null;
  parameterSizeB: number | null;
  gpuCount: number | null;
  contextLength: number | null;
  concurrency: number | null;
  coldStartSeconds: number | null;
  priceInputPerM: number | null;
  priceOutputPerM: number | null;
  /** Dedicated deployments: USD per GPU-hour. */
  dedicatedPricePerGpuHour: number | null;
  useCases: string[];
  summary: string | null;
  detailedIntro: string | null;
  tags: string[];
  offeredShared: boolean;
  offeredDedicated: boolean;
  published: boolean;
  createdAt: Date;
  updatedAt: Date;
}

export interface Upstream {
  id: string;
  entryId: string;
  url: string;
  kind: RuntimeKind;
  servedModel: string;
  weight: number;
  hasApiKey: boolean;
  createdAt: Date;
}

export type EntryFields = Partial<Omit<CatalogEntry, 'id' | 'name' | 'createdAt' | 'updatedAt'>>;
export type CreateEntryInput = { name: string } & EntryFields;
export type UpdateEntryInput = Partial<{ name: string } & EntryFields>;

export interface EntryFilter {
  readonly provider?: string;
  readonly tag?: string;
  readonly useCase?: string;
  /** Case-insensitive match on name, provider and summary. */
  readonly search?: string;
  readonly publishedOnly?: boolean;
  /** 'shared' or 'dedicated': only entries offered on that surface. */
  readonly mode?: 'shared' | 'dedicated';
}

const entryColumns = [
  'id',
  'name',
  'provider',
  'parameterSizeB',
  'gpuCount',
  'contextLength',
  'concurrency',
  'coldStartSeconds',
  'priceInputPerM',
  'priceOutputPerM',
  'dedicatedPricePerGpuHour',
  'useCases',
  'summary',
  'detailedIntro',
  'tags',
  'offeredShared',
  'offeredDedicated',
  'published',
  'createdAt',
  'updatedAt',
] as const;

/** An entry as lists show it: all but the detailed intro (up to 50,000 characters; an entry's own page reads it). */
export type CatalogListEntry = Omit<CatalogEntry, 'detailedIntro'>;
const listColumns = entryColumns.filter((c): c is Exclude<(typeof entryColumns)[number], 'detailedIntro'> => c !== 'detailedIntro');

/** A catalog Name is the <endpoint_name> segment of inference URLs. */
const validateName = (name: string): string => checkName(name, 'name', { max: MAX_ENTRY_NAME_LENGTH, noSpaces: true });

function cleanLabels(list: readonly string[] | undefined): string[] | undefined {
  if (list === undefined) return undefined;
  return [...new Set(list.map((s) => s.trim()).filter((s) => s.length > 0))];
}

/** Adds a catalog entry; shared only unless `offeredDedicated`. */
export async function createEntry(db: Db, input: CreateEntryInput): Promise<CatalogEntry> {
  const name = validateName(input.name);
  try {
    return await withTransaction(db, async (trx) => {
      const entry = await trx
        .insertInto('catalogEntries')
        .values({
          ...input,
          name,
          useCases: cleanLabels(input.useCases),
          tags: cleanLabels(input.tags),
        })
        .returning(entryColumns)
        .executeTakeFirstOrThrow();
      await recordChange(trx, 'endpoint', entry.id);
      return entry;
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw new ServiceError('conflict', `an entry named ${name} already exists`, 'name');
    throw err;
  }
}

/**
 * Changes an entry's fields; a rename or provider change also re-publishes its deployments, and a
 * dedicated price change splits its replicas' running GPU-time intervals there (past time keeps its price).
 */
export async function updateEntry(db: Db, id: string, patch: UpdateEntryInput): Promise<CatalogEntry> {
  const values = {
    ...patch,
    ...(patch.name !== undefined ? { name: validateName(patch.name) } : {}),
    ...(patch.useCases !== undefined ? { useCases: cleanLabels(patch.useCases) } : {}),
    ...(patch.tags !== undefined ? { tags: cleanLabels(patch.tags) } : {}),
  };
  try {
    return await withTransaction(db, async (trx) => {
      const entry = await trx
        .updateTable('catalogEntries')
        .set({ ...values, updatedAt: sql<Date>`now()` })
        .where('id', '=', id)
        .returning(entryColumns)
        .executeTakeFirst();
      if (!entry) throw notFound('catalog entry');
      if (patch.dedicatedPricePerGpuHour !== undefined) await repriceOpenIntervals(trx, id);
      await recordChange(trx, 'endpoint', id);
      if (patch.name !== undefined || patch.provider !== undefined) {
        const deployments = await trx.selectFrom('deployments').select('id').where('entryId', '=', id).execute();
        for (const d of deployments) await recordChange(trx, 'deployment', d.id);
      }
      return entry;
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw new ServiceError('conflict', 'an entry with that name already exists', 'name');
    throw err;
  }
}

export const setPublished = (db: Db, id: string, published: boolean): Promise<CatalogEntry> => updateEntry(db, id, { published });

export interface AddUpstreamInput {
  readonly entryId: string;
  readonly url: string;
  readonly kind: RuntimeKind;
  readonly servedModel: string;
  readonly apiKey?: string | null;
  readonly weight?: number;
}

/** Adds a shared-surface replica to an entry. */
export async function addUpstream(db: Db, input: AddUpstreamInput): Promise<Upstream> {
  checkUrlLength(input.url, 'url');
  let url: URL;
  try {
    url = new URL(input.url);
  } catch {
    throw new ServiceError('invalid', 'url must be an absolute http(s) URL', 'url');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ServiceError('invalid', 'url must be http(s)', 'url');
  // Credentials in the URL would be stored and listed in clear (apiKey is sealed); a query or fragment is never sent.
  if (url.username || url.password || url.search || url.hash) {
    throw new ServiceError('invalid', 'url must not carry credentials, a query or a fragment (give a key as apiKey)', 'url');
  }
  // The key goes out as an `authorization: Bearer` header on every request: a CR, LF, space or byte outside
  // printable ASCII would fail each one at the data plane, or split the header, so it is refused here.
  if (input.apiKey && !/^[\x21-\x7e]+$/.test(input.apiKey)) {
    throw new ServiceError('invalid', 'apiKey must be printable ASCII with no spaces or line breaks', 'apiKey');
  }
  return withTransaction(db, async (trx) => {
    const entry = await trx.selectFrom('catalogEntries').select('id').where('id', '=', input.entryId).executeTakeFirst();
    if (!entry) throw notFound('catalog entry');
    const row = await trx
      .insertInto('endpointUpstreams')
      .values({
        entryId: input.entryId,
        url: trimTrailingSlashes(input.url),
        kind: input.kind,
        servedModel: input.servedModel,
        // Sealed at rest (finding 8): the database, its WAL and the config outbox never hold the key in clear.
        apiKey: input.apiKey ? sealStoredSecret(input.apiKey) : null,
        weight: input.weight,
      })
      .returning(['id', 'entryId', 'url', 'kind', 'servedModel', 'weight', 'apiKey', 'createdAt'])
      .executeTakeFirstOrThrow();
    await recordChange(trx, 'endpoint', input.entryId);
    const { apiKey, ...rest } = row;
    return { ...rest, hasApiKey: apiKey !== null };
  });
}

/** Removes a shared-surface replica. */
export async function removeUpstream(db: Db, upstreamId: string): Promise<void> {
  await withTransaction(db, async (trx) => {
    const row = await trx.deleteFrom('endpointUpstreams').where('id', '=', upstreamId).returning('entryId').executeTakeFirst();
    if (!row) throw notFound('upstream');
    await recordChange(trx, 'endpoint', row.entryId);
  });
}

export async function listUpstreams(db: Db, entryId: string): Promise<Upstream[]> {
  const rows = await db
    .selectFrom('endpointUpstreams')
    .select(['id', 'entryId', 'url', 'kind', 'servedModel', 'weight', 'apiKey', 'createdAt'])
    .where('entryId', '=', entryId)
    .orderBy('createdAt')
    .execute();
  return rows.map(({ apiKey, ...rest }) => ({ ...rest, hasApiKey: apiKey !== null }));
}

/** The entries matching the filter (no columns chosen yet). */
function entriesWhere(db: Db, filter: EntryFilter) {
  let q = db.selectFrom('catalogEntries');
  if (filter.publishedOnly) q = q.where('published', '=', true);
  if (filter.provider) q = q.where(sql<string>`lower(coalesce(provider, ''))`, '=', filter.provider.toLowerCase());
  if (filter.tag) q = q.where(sql<boolean>`${filter.tag} = any(tags)`);
  if (filter.useCase) q = q.where(sql<boolean>`${filter.useCase} = any(use_cases)`);
  if (filter.mode === 'shared') q = q.where('offeredShared', '=', true);
  if (filter.mode === 'dedicated') q = q.where('offeredDedicated', '=', true);
  if (filter.search) {
    const like = `%${filter.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    q = q.where((eb) => eb.or([eb('name', 'ilike', like), eb('provider', 'ilike', like), eb('summary', 'ilike', like)]));
  }
  return q;
}

/** Entries matching the filter, ordered by name. */
export async function listEntries(db: Db, filter: EntryFilter = {}): Promise<CatalogEntry[]> {
  return entriesWhere(db, filter).select(entryColumns).orderBy('name').execute();
}

export async function getEntryByName(db: Db, name: string): Promise<CatalogEntry | null> {
  checkNameCharacters(name, 'name'); // no entry has such a name; a NUL would reach the database as an error
  if (name.length > MAX_ENTRY_NAME_LENGTH) return null; // nor a longer one: not worth a query (anyone may ask)
  return (await db.selectFrom('catalogEntries').select(entryColumns).where('name', '=', name).executeTakeFirst()) ?? null;
}

export async function getEntryById(db: Db, id: string): Promise<CatalogEntry | null> {
  return (await db.selectFrom('catalogEntries').select(entryColumns).where('id', '=', id).executeTakeFirst()) ?? null;
}

/** Distinct providers, tags and use cases of published entries, for browsing. */
export async function listFacets(db: Db): Promise<{ providers: string[]; tags: string[]; useCases: string[] }> {
  const f = await countFacets(db);
  const values = (counts: FacetCount[]) => counts.map((c) => c.value);
  return { providers: values(f.providers), tags: values(f.tags), useCases: values(f.useCases) };
}

export interface FacetCount {
  value: string;
  count: number;
}

/**
 * Providers, tags and use cases of published entries with how many entries carry each, by label: counted in the
 * database (one row per label, not one per entry).
 */
export async function countFacets(db: Db): Promise<{ providers: FacetCount[]; tags: FacetCount[]; useCases: FacetCount[] }> {
  const { rows } = await sql<{ facet: 'provider' | 'tag' | 'useCase'; value: string; n: string | number }>`
    select 'provider' as facet, provider as value, count(*) as n from catalog_entries
      where published and coalesce(provider, '') <> '' group by provider
    union all
    select 'tag', v, count(distinct id) from catalog_entries, unnest(tags) as v where published group by v
    union all
    select 'useCase', v, count(distinct id) from catalog_entries, unnest(use_cases) as v where published group by v`.execute(db);
  const out = { providers: [] as FacetCount[], tags: [] as FacetCount[], useCases: [] as FacetCount[] };
  const into = { provider: out.providers, tag: out.tags, useCase: out.useCases };
  for (const r of rows) into[r.facet].push({ value: r.value, count: Number(r.n) });
  for (const list of Object.values(out)) list.sort((a, b) => a.value.localeCompare(b.value));
  return out;
}

// Platform-admin operations: both transports call these. Each checks the caller, validates, and
// writes the row, the outbox change and the audit row in one transaction.

const entryKey = (id: string): string => {
  if (!isUuid(id)) throw notFound('catalog entry');
  return id;
};

/** Adds an entry from API input (string forms or structured values); unpublished unless `published`. */
export async function adminCreateEntry(
  db: Db,
  principal: Principal,
  input: CatalogEntryInput & { readonly name: string; readonly published?: boolean | null },
): Promise<CatalogEntry> {
  requirePlatformAdmin(principal);
  const { name, published, ...fields } = input;
  const parsed = parseEntryInput(fields);
  return withTransaction(db, async (trx) => {
    const entry = await createEntry(trx, { name, ...parsed, published: published ?? false });
    await writeAudit(trx, {
      actor: actorOf(principal),
      tenantId: null,
      action: 'catalog.create',
      targetType: 'catalog_entry',
      targetId: entry.id,
      detail: { name: entry.name, published: entry.published },
    });
    return entry;
  });
}

/** Changes an entry from API input: absent fields stay, `null` clears; the name cannot be cleared. */
export async function adminUpdateEntry(
  db: Db,
  principal: Principal,
  id: string,
  input: CatalogEntryInput & { readonly name?: string | null },
): Promise<CatalogEntry> {
  requirePlatformAdmin(principal);
  const { name, ...fields } = input;
  if (name === null) throw new ServiceError('invalid', 'name: cannot be cleared', 'name');
  const patch: UpdateEntryInput = { ...parseEntryInput(fields), ...(name !== undefined ? { name } : {}) };
  return withTransaction(db, async (trx) => {
    const entry = await updateEntry(trx, entryKey(id), patch);
    await writeAudit(trx, {
      actor: actorOf(principal),
      tenantId: null,
      action: 'catalog.update',
      targetType: 'catalog_entry',
      targetId: entry.id,
      detail: { fields: Object.keys(patch) },
    });
    return entry;
  });
}

/** Shows or hides an entry in the public catalog. */
export async function adminSetPublished(db: Db, principal: Principal, id: string, published: boolean): Promise<CatalogEntry> {
  requirePlatformAdmin(principal);
  return withTransaction(db, async (trx) => {
    const entry = await setPublished(trx, entryKey(id), published);
    await writeAudit(trx, {
      actor: actorOf(principal),
      tenantId: null,
      action: published ? 'catalog.publish' : 'catalog.unpublish',
      targetType: 'catalog_entry',
      targetId: entry.id,
    });
    return entry;
  });
}

/** Adds a shared-surface replica to an entry. */
export async function adminAddUpstream(db: Db, principal: Principal, input: AddUpstreamInput): Promise<Upstream> {
  requirePlatformAdmin(principal);
  entryKey(input.entryId);
  return withTransaction(db, async (trx) => {
    const upstream = await addUpstream(trx, input);
    await writeAudit(trx, {
      actor: actorOf(principal),
      tenantId: null,
      action: 'upstream.add',
      targetType: 'upstream',
      targetId: upstream.id,
      detail: { entryId: input.entryId, kind: input.kind },
    });
    return upstream;
  });
}

/** Removes a shared-surface replica. */
export async function adminRemoveUpstream(db: Db, principal: Principal, upstreamId: string): Promise<void> {
  requirePlatformAdmin(principal);
  if (!isUuid(upstreamId)) throw notFound('upstream');
  await withTransaction(db, async (trx) => {
    await removeUpstream(trx, upstreamId);
    await writeAudit(trx, { actor: actorOf(principal), tenantId: null, action: 'upstream.remove', targetType: 'upstream', targetId: upstreamId });
  });
}

/** Platform admins: every entry matching the filter, unpublished ones included. */
export async function adminListEntries(db: Db, principal: Principal, filter: Omit<EntryFilter, 'publishedOnly'> = {}): Promise<CatalogEntry[]> {
  requirePlatformAdmin(principal);
  return listEntries(db, { ...checkFilter(filter), publishedOnly: false });
}

/** Platform admins: an entry's shared-surface upstreams (whether each has an API key, never the key). */
export async function adminListUpstreams(db: Db, principal: Principal, entryId: string): Promise<Upstream[]> {
  requirePlatformAdmin(principal);
  return listUpstreams(db, entryKey(entryId));
}

/** Published entries matching the filter, without their detailed intros (anyone: browsing needs no login). */
export async function browseEntries(db: Db, filter: Omit<EntryFilter, 'publishedOnly'> = {}): Promise<CatalogListEntry[]> {
  return entriesWhere(db, { ...checkFilter(filter), publishedOnly: true })
    .select(listColumns)
    .orderBy('name')
    .execute();
}

/**
 * One page of `browseEntries` (`limit` entries from `offset`, by name) and how many match in all, read in one statement
 * (one snapshot: an entry published meanwhile cannot be in the page but not the total). Only a page past the end, or
 * one of no entries, counts apart.
 */
export async function browseEntriesPage(
  db: Db,
  filter: Omit<EntryFilter, 'publishedOnly'>,
  page: { readonly offset: number; readonly limit: number },
): Promise<{ entries: CatalogListEntry[]; total: number }> {
  const matching = entriesWhere(db, { ...checkFilter(filter), publishedOnly: true });
  if (page.limit > 0) {
    const rows = await matching
      .select(listColumns)
      .select(sql<string>`count(*) over ()`.as('matchingTotal'))
      .orderBy('name')
      .offset(page.offset)
      .limit(page.limit)
      .execute();
    const first = rows[0];
    if (first !== undefined) return { entries: rows.map(({ matchingTotal: _, ...entry }) => entry), total: Number(first.matchingTotal) };
    if (page.offset === 0) return { entries: [], total: 0 };
  }
  const count = await matching.select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
  return { entries: [], total: Number(count.n) };
}

/** The detailed intros of published entries by id ('' where unset), for a page of entries that asks for them. */
export async function detailedIntrosOf(db: Db, ids: readonly string[]): Promise<Map<string, string>> {
  const valid = ids.filter(isUuid);
  if (valid.length === 0) return new Map();
  const rows = await db.selectFrom('catalogEntries').select(['id', 'detailedIntro']).where('id', 'in', valid).where('published', '=', true).execute();
  return new Map(rows.map((r) => [r.id, r.detailedIntro ?? '']));
}

const MAX_FILTER_LENGTH = 200;

/** Filter values as callers give them: empty means unset; over 200 characters is refused, naming the field. */
function checkFilter(filter: Omit<EntryFilter, 'publishedOnly'>): Omit<EntryFilter, 'publishedOnly'> {
  const out: { -readonly [K in keyof EntryFilter]?: EntryFilter[K] } = {};
  for (const field of ['provider', 'tag', 'useCase', 'search'] as const) {
    const v = filter[field];
    if (v == null || v === '') continue;
    if (v.length > MAX_FILTER_LENGTH) throw new ServiceError('invalid', `${field} must be at most ${MAX_FILTER_LENGTH} characters`, field);
    out[field] = v;
  }
  if (filter.mode !== undefined) out.mode = filter.mode;
  return out;
}

/** Platform admins: any entry (published or not) by id or Name, with its upstreams when asked. */
export async function adminGetEntry(
  db: Db,
  principal: Principal,
  by: { readonly id?: string | null; readonly name?: string | null },
): Promise<CatalogEntry | null> {
  requirePlatformAdmin(principal);
  if (by.id != null) return isUuid(by.id) ? getEntryById(db, by.id) : null;
  return by.name ? getEntryByName(db, by.name) : null;
}
