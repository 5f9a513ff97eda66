import type { ColumnType, Generated } from 'kysely';

/** `created_at timestamptz not null default now()`: read as Date, never updated. */
export type CreatedAt = ColumnType<Date, Date | string | undefined, never>;
/** A timestamptz with a `now()` default that updates may set. */
export type UpdatedAt = ColumnType<Date, Date | string | undefined, Date | string>;
/** A required timestamptz without default. */
export type Timestamp = ColumnType<Date, Date | string, Date | string>;
/** A nullable timestamptz. */
export type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
/** `text[] not null default '{}'`. */
export type TextArray = ColumnType<string[], readonly string[] | undefined, readonly string[]>;
/** `bigserial`: comes back as a JS number on both backends. */
export type Serial = Generated<number>;

export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };
/**
 * A nullable jsonb column. Writes take an object: node-postgres would turn a top-level JS array
 * into a Postgres array literal, so arrays must be wrapped in an object.
 */
export type NullableJson = ColumnType<JsonValue | null, JsonObject | null | undefined, JsonObject | null>;
