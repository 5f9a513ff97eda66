// `pnpm env:doc`: the environment table of every process, generated from their env schemas.
//   node scripts/env-doc.ts           print the markdown table
//   node scripts/env-doc.ts --write   replace the table between the markers in infra/README.md
//   node scripts/env-doc.ts --check   exit 1 when infra/README.md's table differs (CI, infra/test/env-doc.test.ts)
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { z } from 'zod';
import { adminEnvSchema } from '../apps/admin-api/src/env.ts';
import { ADMIN_ENV_DOC } from '../apps/admin-api/src/env-doc.ts';
import { dataplaneEnvSchema } from '../apps/dataplane/src/env.ts';
import { DATAPLANE_ENV_DOC } from '../apps/dataplane/src/env-doc.ts';
import { SIM_ENV_DOC } from '../packages/runtime-sim/src/cli-env-doc.ts';
import { SIM_FAULT_FLAGS, SIM_NUMERIC_FLAGS } from '../packages/runtime-sim/src/cli-options.ts';
import { resolveSimOptions } from '../packages/runtime-sim/src/options.ts';
import { startEnvSchema } from './start-env.ts';
import { START_ENV_DOC } from './start-env-doc.ts';

export const README = fileURLToPath(new URL('../infra/README.md', import.meta.url));
export const BEGIN = '<!-- env-table:begin (generated from the env schemas by `pnpm env:doc --write`; do not edit by hand) -->';
export const END = '<!-- env-table:end -->';

interface Row {
  readonly process: string;
  readonly name: string;
  readonly default: string;
  readonly meaning: string;
}

type Doc = Readonly<Record<string, { readonly meaning: string; readonly default?: string }>>;

interface Def {
  readonly type: string;
  readonly in?: { _zod: { def: Def } };
  readonly innerType?: { _zod: { def: Def } };
  readonly defaultValue?: unknown;
}

/** The schema's own default, looking through optional/catch/pipe wrappers (zod 4 definitions). */
function schemaDefault(field: z.ZodType): unknown {
  let def = (field as unknown as { _zod: { def: Def } })._zod.def;
  for (;;) {
    if (def.type === 'default') return def.defaultValue;
    const next = def.type === 'pipe' ? def.in : def.innerType;
    if (!next) return undefined;
    def = next._zod.def;
  }
}

const code = (v: unknown): string => `\`${String(v)}\``;

/** Rows of one schema-driven process; throws when the schema and the doc list disagree. */
export function schemaRows(process: string, shape: Readonly<Record<string, z.ZodType>>, doc: Doc): Row[] {
  const problems = [
    ...Object.keys(shape)
      .filter((k) => !(k in doc))
      .map((k) => `${process}: ${k} is in the env schema but has no description in its env-doc file`),
    ...Object.keys(doc)
      .filter((k) => !(k in shape))
      .map((k) => `${process}: ${k} is described but not in the env schema`),
  ];
  if (problems.length > 0) throw new Error(problems.join('\n'));
  return Object.entries(shape).map(([name, field]) => {
    const d = doc[name]!;
    const value = schemaDefault(field);
    const required = !field.safeParse(undefined).success;
    return { process, name, default: d.default ?? (value !== undefined ? code(value) : required ? '**required**' : 'unset'), meaning: d.meaning };
  });
}

/** runtime-sim reads flags with `SIM_*` fallbacks; its defaults are those resolveSimOptions fills in. */
function simRows(): Row[] {
  const tableVars = [...Object.values(SIM_NUMERIC_FLAGS), ...Object.values(SIM_FAULT_FLAGS)].map(([envName]) => envName);
  // The variables read outside those tables (port, host, models, switches) are found in the source as 'SIM_…' literals.
  const source = readFileSync(fileURLToPath(new URL('../packages/runtime-sim/src/cli-options.ts', import.meta.url)), 'utf8');
  const literals = [...source.matchAll(/'(SIM_[A-Z_]+)'/g)].map((m) => m[1]!);
  const known = new Set([...tableVars, ...literals]);
  const problems = [
    ...[...known].filter((k) => !(k in SIM_ENV_DOC)).map((k) => `runtime-sim: ${k} is read by cli-options.ts but has no description in cli-env-doc.ts`),
    ...Object.keys(SIM_ENV_DOC)
      .filter((k) => !known.has(k))
      .map((k) => `runtime-sim: ${k} is described but cli-options.ts does not read it`),
  ];
  if (problems.length > 0) throw new Error(problems.join('\n'));
  const defaults = resolveSimOptions({}) as unknown as Readonly<Record<string, unknown>>;
  return Object.entries(SIM_ENV_DOC).map(([name, d]) => ({
    process: 'runtime-sim',
    name,
    default: d.default ?? (d.option !== undefined ? code(defaults[d.option]) : 'unset'),
    meaning: d.meaning,
  }));
}

const cell = (s: string): string => s.replace(/\|/g, '\\|');

/** The markdown table of every variable of every process. */
export function envTable(): string {
  const rows = [
    ...schemaRows('control plane', adminEnvSchema.shape, ADMIN_ENV_DOC),
    ...schemaRows('data plane', dataplaneEnvSchema.shape, DATAPLANE_ENV_DOC),
    ...simRows(),
    ...schemaRows('`pnpm start`', startEnvSchema.shape, START_ENV_DOC),
  ];
  const lines = [
    '| process | variable | default | meaning |',
    '|---|---|---|---|',
    ...rows.map((r) => `| ${r.process} | \`${r.name}\` | ${cell(r.default)} | ${cell(r.meaning)} |`),
  ];
  return `${lines.join('\n')}\n`;
}

/** The table currently between the markers of infra/README.md (null when the markers are missing). */
export function readmeTable(text: string = readFileSync(README, 'utf8')): string | null {
  const begin = text.indexOf(BEGIN);
  const end = text.indexOf(END);
  if (begin < 0 || end < begin) return null;
  return text.slice(begin + BEGIN.length, end).replace(/^\n/, '');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const table = envTable();
  const mode = process.argv[2];
  if (mode === '--write') {
    const text = readFileSync(README, 'utf8');
    const current = readmeTable(text);
    if (current === null) throw new Error(`${README} lacks the markers ${BEGIN} … ${END}`);
    const begin = text.indexOf(BEGIN) + BEGIN.length;
    writeFileSync(README, `${text.slice(0, begin)}\n${table}${text.slice(text.indexOf(END))}`);
    console.log(`wrote the environment table into ${README}`);
  } else if (mode === '--check') {
    if (readmeTable() !== table) {
      console.error(`${README}'s environment table is out of date: run pnpm env:doc --write`);
      process.exit(1);
    }
  } else {
    process.stdout.write(table);
  }
}
