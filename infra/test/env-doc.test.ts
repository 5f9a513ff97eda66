// infra/README.md's environment table is the one generated from the env schemas (scripts/env-doc.ts),
// and the generator refuses a variable without a description: the table cannot drift from the code.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { adminEnvSchema } from '../../apps/admin-api/src/env.ts';
import { dataplaneEnvSchema } from '../../apps/dataplane/src/env.ts';
import { envTable, readmeTable, schemaRows } from '../../scripts/env-doc.ts';

describe('environment table', () => {
  it('infra/README.md holds the table generated from the env schemas (run `pnpm env:doc --write` after adding a variable)', () => {
    expect(readmeTable()).toBe(envTable());
  });

  it('lists every variable of every process, with the schema defaults', () => {
    const table = envTable();
    for (const name of [...Object.keys(adminEnvSchema.shape), ...Object.keys(dataplaneEnvSchema.shape)]) expect(table).toContain(`\`${name}\``);
    expect(table).toMatch(/^\| control plane \| `ADMIN_PORT` \| `4000` \|/m);
    expect(table).toMatch(/^\| control plane \| `NODE_TOKEN` \| unset \|/m); // optional: unset means per-node credentials only
    expect(table).toMatch(/^\| data plane \| `METRICS_PORT` \| `9464` \|/m);
    expect(table).toMatch(/^\| runtime-sim \| `SIM_TTFT_MS` \| `0` \|/m);
    expect(table).toMatch(/^\| `pnpm start` \| `SIM_BASE_PORT` \| `9100` \|/m);
  });

  it('refuses a variable the schema has and the descriptions lack, and one described but gone', () => {
    const shape = { KNOWN: z.string().default('x'), ADDED_WITHOUT_DOC: z.string().optional() };
    expect(() => schemaRows('p', shape, { KNOWN: { meaning: 'm' } })).toThrow(/ADDED_WITHOUT_DOC is in the env schema but has no description/);
    expect(() => schemaRows('p', { KNOWN: shape.KNOWN }, { KNOWN: { meaning: 'm' }, GONE: { meaning: 'm' } })).toThrow(
      /GONE is described but not in the env schema/,
    );
    expect(schemaRows('p', { KNOWN: shape.KNOWN }, { KNOWN: { meaning: 'm' } })).toEqual([{ process: 'p', name: 'KNOWN', default: '`x`', meaning: 'm' }]);
  });
});
