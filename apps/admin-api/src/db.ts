import type { Kysely } from 'kysely';
import type { DB } from '@infer/db';

/** The database or a transaction on it; every service takes one first. */
export type Db = Kysely<DB>;
export type DbKind = 'pglite' | 'postgres';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Ids are uuids; anything else cannot name a row (and would be a SQL type error). */
export const isUuid = (value: string): boolean => UUID.test(value);
