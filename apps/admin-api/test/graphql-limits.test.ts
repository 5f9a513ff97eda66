import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, testBackends, type TestDatabase } from '@infer/db/testing';
import { parse } from 'graphql';
import { asServiceError } from '../src/errors.ts';
import { createEntry } from '../src/modules/catalog/catalog.service.ts';
import { createDeployment, registerReplica, type Deployment } from '../src/modules/deployments/deployment-store.ts';
import { operationSize } from '../src/graphql/operation-limits.ts';
import { encodeCursor } from '../src/graphql/schema/page-info.ts';
import { createRequestDb } from '../src/request-db.ts';
import { appOn, gql, type RunningApp } from './app-on.ts';
import { buildWorld, trpc, type World } from './trpc-fixtures.ts';

/** Finding 5: 620 aliases of `usage` fitted the cost budget; one request ran 4.9 s and stalled others. */
describe.each(testBackends())('GraphQL operation limits (%s)', (kind) => {
  let database: TestDatabase;
  let w: World;
  let t: RunningApp;
  /** Queries on usage_records the app ran (a Kysely plugin on the app's database handle). */
  let usageQueries = 0;
  /** Queries on cold_starts (Endpoint.observedColdStart). */
  let coldStartQueries = 0;
  /** Queries on replica_intervals (the GPU ledger) and deployment_replicas. */
  let ledgerQueries = 0;
  let replicaQueries = 0;
  /** Queries on catalog_entries: whether each read detailed_intro, and how many rows it returned. */
  let catalogQueries: { id: string; introduced: boolean; rows?: number }[] = [];

  beforeAll(async () => {
    database = await createTestDb(kind);
    w = await buildWorld(database.db);
    const counted = database.db.withPlugin({
      transformQuery(args) {
        const node = JSON.stringify(args.node);
        if (/usage_?records/i.test(node)) usageQueries++;
        if (/cold_?starts/i.test(node)) coldStartQueries++;
        if (/replica_?intervals/i.test(node)) ledgerQueries++;
        if (/deployment_?replicas/i.test(node)) replicaQueries++;
        if (/catalog_?entries/i.test(node)) catalogQueries.push({ id: args.queryId.queryId, introduced: /detailed_?intro/i.test(node) });
        return args.node;
      },
      transformResult: async (args) => {
        const q = catalogQueries.find((c) => c.id === args.queryId.queryId);
        if (q) q.rows = args.result.rows.length;
        return args.result;
      },
    });
    // No separate timeout pool, so that API queries go through the counting handle on PostgreSQL too.
    t = await appOn({ ...database, db: counted }, { apiStatementTimeoutMs: 0 });
  }, 60_000);
  afterAll(async () => {
    await t?.close();
    await database?.close();
  });

  const owner = () => ({ cookie: w.parties.ownerA.cookie!, origin: t.baseUrl });
  const usageAliases = (n: number) =>
    `query { tenant(id: "${w.tenantA.id}") { ${Array.from({ length: n }, (_, i) => `u${i}: usage { totals { requests costUsd } }`).join(' ')} } }`;

  it('refuses 620 aliases of usage with a clear 400 before running anything', async () => {
    const res = await gql(t.baseUrl, usageAliases(620), owner());
    expect(res.status).toBe(400);
    expect(res.body.data).toBeUndefined();
    expect(res.body.errors?.[0]?.extensions?.code).toBe('too_many_aliases');
    expect(res.body.errors?.[0]?.message).toMatch(/too many aliases: (at least )?\d+ \(the maximum is 30\)/);
    expect(usageQueries).toBe(0);
  });

  it('gives usage a realistic cost: 25 aliases (under the alias cap) exceed the budget', async () => {
    const before = usageQueries;
    const res = await gql(t.baseUrl, usageAliases(25), owner());
    // The cost is checked before the root field resolves: no tenant, no usage read; the whole request is refused.
    expect(res.status).toBe(400);
    expect(res.body.data?.tenant ?? null).toBeNull();
    expect(res.body.errors?.[0]?.extensions).toMatchObject({ code: 'invalid', param: null });
    expect(res.body.errors?.[0]?.message).toMatch(/too costly: cost \d+ exceeds the budget of 5000/);
    expect(usageQueries).toBe(before);
    // A handful is fine.
    const ok = await gql(t.baseUrl, usageAliases(3), owner());
    expect(ok.status).toBe(200);
    expect(ok.body.data?.tenant?.u0?.totals?.requests).toBe(0);
    expect(usageQueries).toBeGreaterThan(before); // the counter does see usage reads
  });

  // Under 1 KB, anonymous: F0 spreads F1 twice, F1 spreads F2 twice... The depth and field walks took each path, 2^n.
  const diamond = (n: number, leaf: string) =>
    `query { ...F0 } ${Array.from({ length: n }, (_, i) => `fragment F${i} on Query { ...F${i + 1} ...F${i + 1} }`).join(' ')} fragment F${n} on Query { ${leaf} }`;

  it('measures a diamond of fragments once per fragment: refused or answered at once, never walked per path', async () => {
    // Ending in a field: 2^40 selections of __typename, too many fields (the depth is one).
    const wide = await gql(t.baseUrl, diamond(40, '__typename'));
    expect(wide.status).toBe(400);
    expect(wide.body.errors?.map((e) => e.extensions?.code)).toContain('too_many_fields');
    // Ending in a fragment that does not exist: no field is ever counted, so only the selections bound the walk.
    const missing = await gql(t.baseUrl, diamond(40, '...Missing'));
    expect(missing.status).toBe(400);
    expect(missing.body.errors?.map((e) => e.message).join(' ')).toMatch(/Unknown fragment "Missing"/);
    // A few levels are an ordinary (if odd) query: 2^4 spreads of __typename merge into one field.
    const small = await gql(t.baseUrl, diamond(4, '__typename'));
    expect(small.status).toBe(200);
    expect(small.body.data).toEqual({ __typename: 'Query' });
  });

  it("reads a page's observed cold starts in one query, not one per endpoint", async () => {
    for (let i = 0; i < 4; i++) await createEntry(database.db, { name: `Batch-${kind}-${i}`, published: true, offeredDedicated: true });
    const before = coldStartQueries;
    const res = await gql(t.baseUrl, '{ endpoints(first: 50) { edges { node { name observedColdStart { samples p50Seconds } } } } }');
    expect(res.status).toBe(200);
    const nodes = (res.body.data as { endpoints: { edges: { node: { name: string; observedColdStart: { samples: number } } }[] } }).endpoints.edges;
    expect(nodes.length).toBeGreaterThanOrEqual(4);
    expect(nodes.every((e) => e.node.observedColdStart.samples === 0)).toBe(true);
    expect(coldStartQueries - before).toBe(1);
  });

  it('pages endpoints in the database: a page reads its own rows only, and detailed intros once, only when asked', async () => {
    for (let i = 0; i < 6; i++) {
      await createEntry(database.db, { name: `Paged-${kind}-${i}`, published: true, detailedIntro: `Intro ${i}. ${'x'.repeat(1000)}` });
    }
    const query = (fields: string, after: string | null) =>
      gql(
        t.baseUrl,
        `query($after: String) { endpoints(first: 2, after: $after, filter: { search: "Paged-${kind}" }) { totalCount edges { cursor node { ${fields} } } pageInfo { hasNextPage } } }`,
        {},
        { after },
      );
    type Page = { totalCount: number; edges: { cursor: string; node: { name: string; detailedIntro?: string } }[]; pageInfo: { hasNextPage: boolean } };

    catalogQueries = [];
    const first = (await query('name', null)).body.data as { endpoints: Page };
    expect(first.endpoints.totalCount).toBe(6);
    expect(first.endpoints.edges.map((e) => e.node.name)).toEqual([`Paged-${kind}-0`, `Paged-${kind}-1`]);
    expect(first.endpoints.pageInfo.hasNextPage).toBe(true);
    // No query returned more rows than the page holds, and none read an intro nobody asked for.
    expect(catalogQueries.length).toBeGreaterThan(0);
    expect(Math.max(...catalogQueries.map((q) => q.rows ?? 0))).toBeLessThanOrEqual(2);
    expect(catalogQueries.filter((q) => q.introduced)).toEqual([]);
    // The page and its total come from one statement (one snapshot: an entry published between two reads could
    // otherwise be counted but not listed, or listed but not counted).
    expect(catalogQueries).toHaveLength(1);

    catalogQueries = [];
    // After the fourth: the last page.
    const last = (await query('name detailedIntro', encodeCursor(3))).body.data as { endpoints: Page };
    expect(last.endpoints.edges.map((e) => [e.node.name, e.node.detailedIntro?.slice(0, 8)])).toEqual([
      [`Paged-${kind}-4`, 'Intro 4.'],
      [`Paged-${kind}-5`, 'Intro 5.'],
    ]);
    expect(last.endpoints.pageInfo.hasNextPage).toBe(false);
    expect(catalogQueries.filter((q) => q.introduced)).toHaveLength(1);
    expect(Math.max(...catalogQueries.map((q) => q.rows ?? 0))).toBeLessThanOrEqual(2);

    // tRPC's list leaves the intros out (an entry's page reads them with byName).
    const listed = await trpc<{ name: string }[]>(t.baseUrl, 'catalog.list', { input: { search: `Paged-${kind}-3` } });
    expect(listed.body.result?.data.map((e) => e.name)).toEqual([`Paged-${kind}-3`]);
    expect(JSON.stringify(listed.body)).not.toContain('Intro 3.');
  });

  it('looks up no Name longer than any entry may have (anyone may ask): GraphQL answers null, tRPC a 400, and no query runs', async () => {
    // Review finding: endpoint(name:) and catalog.byName took names up to the body limit to the database.
    const long = 'x'.repeat(100_000);
    catalogQueries = [];
    const res = await gql(t.baseUrl, 'query($n: String!) { endpoint(name: $n) { name } }', {}, { n: long });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ endpoint: null });
    expect(catalogQueries).toEqual([]);
    // (A GET's input rides in its URL: a shorter long name, under the head's limit.)
    const byName = await trpc(t.baseUrl, 'catalog.byName', { input: { name: long.slice(0, 1000) } });
    expect(byName.status).toBe(400);
    expect(catalogQueries).toEqual([]);
  });

  it("reads a tenant's deployments' GPU time and replicas in one query each, not one per deployment", async () => {
    // A tenant deploys an entry once: four entries, one deployment each.
    const made: Deployment[] = [];
    for (let i = 0; i < 4; i++) {
      const entry = await createEntry(database.db, { name: `Gpu-batch-${kind}-${i}`, published: true, offeredDedicated: true, gpuCount: 2 });
      made.push(await createDeployment(database.db, { tenantId: w.tenantA.id, entryName: entry.name, minReplicas: 0, maxReplicas: 1, provisioner: 'local' }));
    }
    const day = new Date(Date.UTC(2026, 0, 5));
    const at = (sec: number) => new Date(day.getTime() + sec * 1000);
    // Deployment i ran (i + 1) x 100 s on 2 GPUs; the last one never ran. Another tenant's interval on a deployment id of A's is not A's.
    const interval = (deploymentId: string, tenantId: string, seconds: number) => ({
      replicaId: randomUUID(),
      deploymentId,
      tenantId,
      entryId: made[0]!.entryId,
      gpuCount: 2,
      phase: 'serving' as const,
      startedAt: at(0),
      endedAt: at(seconds),
      lastHeartbeatAt: at(seconds),
    });
    await database.db
      .insertInto('replicaIntervals')
      .values([...made.slice(0, 3).map((d, i) => interval(d.id, w.tenantA.id, (i + 1) * 100)), interval(made[3]!.id, w.tenantB.id, 999)])
      .execute();
    for (const d of made.slice(0, 2)) {
      await registerReplica(database.db, { deploymentId: d.id, url: 'http://127.0.0.1:9', kind: 'sim', servedModel: d.entryName });
    }

    const ledger = ledgerQueries;
    const replicas = replicaQueries;
    const res = await gql(
      t.baseUrl,
      `query($t: ID!, $from: DateTime, $to: DateTime) { tenant(id: $t) { deployments { id gpuSeconds(from: $from, to: $to) replicas { id } } } }`,
      owner(),
      { t: w.tenantA.id, from: day.toISOString(), to: at(86_400).toISOString() },
    );
    expect(res.status).toBe(200);
    expect(res.body.errors).toBeUndefined();
    const rows = (res.body.data as { tenant: { deployments: { id: string; gpuSeconds: number; replicas: { id: string }[] }[] } }).tenant.deployments;
    const byId = new Map(rows.map((r) => [r.id, r]));
    expect(made.map((d) => byId.get(d.id)?.gpuSeconds)).toEqual([200, 400, 600, 0]);
    expect(made.map((d) => byId.get(d.id)?.replicas.length)).toEqual([1, 1, 0, 0]);
    expect(ledgerQueries - ledger).toBe(1);
    expect(replicaQueries - replicas).toBe(1);
  });

  it('caps the fields of one operation, fragments counted where they are spread', async () => {
    const spreads = Array.from({ length: 40 }, () => '...T').join(' ');
    const query = `query { tenant(id: "${w.tenantA.id}") { ${spreads} } } fragment T on Tenant { id slug name rpmLimit tpmLimit createdAt viewerRole }`;
    // 40 spreads of 7 fields: 280 fields, under the cap of 1000.
    expect((await gql(t.baseUrl, query, owner())).status).toBe(200);
    const wide = `query { tenant(id: "${w.tenantA.id}") { ${Array.from({ length: 200 }, () => '...W').join(' ')} } } fragment W on Tenant { id slug name rpmLimit tpmLimit createdAt }`;
    const res = await gql(t.baseUrl, wide, owner());
    expect(res.status).toBe(400);
    expect(res.body.errors?.[0]?.extensions?.code).toBe('too_many_fields');
  });

  it('rate-limits each principal, on GraphQL and tRPC alike', async () => {
    const limited = await appOn(database, { principalPointsPerMinute: 4 });
    try {
      const q = `query { tenant(id: "${w.tenantA.id}") { name } }`;
      const headers = { cookie: w.parties.ownerB.cookie!, origin: limited.baseUrl };
      for (let i = 0; i < 2; i++) expect((await gql(limited.baseUrl, q.replace(w.tenantA.id, w.tenantB.id), headers)).status).toBe(200);
      for (let i = 0; i < 2; i++) expect((await trpc(limited.baseUrl, 'tenants.mine', { headers })).status).toBe(200);
      const refusedGql = await gql(limited.baseUrl, q.replace(w.tenantA.id, w.tenantB.id), headers);
      expect(refusedGql.status).toBe(429);
      expect(refusedGql.body.errors?.[0]?.extensions?.code).toBe('rate_limited');
      const refusedTrpc = await trpc(limited.baseUrl, 'tenants.mine', { headers });
      expect(refusedTrpc.status).toBe(429);
      // Both say when to retry: whole seconds, at least 1, the wait the message names (4 points a minute: 15 s a point).
      for (const [refused, message] of [
        [refusedGql.headers, refusedGql.body.errors?.[0]?.message],
        [refusedTrpc.headers, refusedTrpc.body.error?.message],
      ] as const) {
        const retryAfter = refused.get('retry-after');
        expect(retryAfter).toMatch(/^[1-9]\d*$/);
        expect(Number(retryAfter)).toBeLessThanOrEqual(15);
        expect(message).toBe(`too many requests from this caller; retry in ${retryAfter} s`);
      }
      expect(JSON.stringify(refusedGql.body)).not.toMatch(/"http"/);
      // Another principal has its own budget.
      expect((await trpc(limited.baseUrl, 'tenants.mine', { headers: { cookie: w.parties.ownerA.cookie!, origin: limited.baseUrl } })).status).toBe(200);
    } finally {
      await limited.close();
    }
  });

  it('a token, and every token it mints, draws on the budget of the user who minted them', async () => {
    // Red-team finding: each token had a bucket of its own, and a token mints more: 64 tokens in two seconds ran 64
    // times the usage aggregates a caller may.
    const limited = await appOn(database, { principalPointsPerMinute: 6 });
    try {
      const session = { cookie: w.parties.ownerB.cookie!, origin: limited.baseUrl };
      const mint = async (headers: Record<string, string>) => {
        const res = await trpc<{ secret: string }>(limited.baseUrl, 'adminTokens.create', {
          mutation: true,
          input: { name: 'child', tenantId: w.tenantB.id },
          headers,
        });
        expect(res.status).toBe(200);
        return { authorization: `Bearer ${res.body.result!.data.secret}`, origin: limited.baseUrl };
      };
      const first = await mint(session); // 1 point
      const second = await mint(first); // 2
      const third = await mint(second); // 3
      for (let i = 0; i < 3; i++) expect((await trpc(limited.baseUrl, 'tenants.mine', { headers: third })).status).toBe(200); // 6
      expect((await trpc(limited.baseUrl, 'tenants.mine', { headers: third })).status).toBe(429);
      expect((await trpc(limited.baseUrl, 'tenants.mine', { headers: first })).status).toBe(429);
      expect((await trpc(limited.baseUrl, 'tenants.mine', { headers: session })).status).toBe(429);
      // Another user's budget is their own.
      expect((await trpc(limited.baseUrl, 'tenants.mine', { headers: { cookie: w.parties.ownerA.cookie!, origin: limited.baseUrl } })).status).toBe(200);
    } finally {
      await limited.close();
    }
  });

  it('charges a usage aggregate 50 points on GraphQL and tRPC alike (an ordinary call costs one)', async () => {
    const limited = await appOn(database, { principalPointsPerMinute: 120 });
    try {
      const headers = { cookie: w.parties.ownerA.cookie!, origin: limited.baseUrl };
      const usage = `query { tenant(id: "${w.tenantA.id}") { usage { totals { requests } } } }`;
      expect((await gql(limited.baseUrl, usage, headers)).status).toBe(200); // 51 points
      expect((await trpc(limited.baseUrl, 'usage.summary', { input: { tenantId: w.tenantA.id }, headers })).status).toBe(200); // 50
      // 19 points left: no third aggregate on either transport, but an ordinary call still fits.
      expect((await trpc(limited.baseUrl, 'usage.summary', { input: { tenantId: w.tenantA.id }, headers })).status).toBe(429);
      expect((await gql(limited.baseUrl, usage, headers)).status).toBe(429);
      expect((await trpc(limited.baseUrl, 'tenants.mine', { headers })).status).toBe(200);
    } finally {
      await limited.close();
    }
  });

  it('charges tRPC calls refused for their origin (CSRF) to the caller’s budget too', async () => {
    const limited = await appOn(database, { principalPointsPerMinute: 4 });
    try {
      // A session cookie with no Origin on a mutation: refused, but the session was looked up all the same.
      const cookieOnly = { cookie: w.parties.ownerB.cookie! };
      for (let i = 0; i < 4; i++) {
        const r = await trpc(limited.baseUrl, 'keys.create', { mutation: true, input: { tenantId: w.tenantB.id, name: 'x' }, headers: cookieOnly });
        expect(r.status).toBe(403);
      }
      const spent = await trpc(limited.baseUrl, 'keys.create', { mutation: true, input: { tenantId: w.tenantB.id, name: 'x' }, headers: cookieOnly });
      expect(spent.status).toBe(429);
      expect((await trpc(limited.baseUrl, 'tenants.mine', { headers: { ...cookieOnly, origin: limited.baseUrl } })).status).toBe(429);
    } finally {
      await limited.close();
    }
  });

  it('charges documents refused at parse or validation to the caller’s budget, before parsing', async () => {
    const limited = await appOn(database, { principalPointsPerMinute: 4 });
    try {
      const headers = { cookie: w.parties.ownerB.cookie!, origin: limited.baseUrl };
      const refused = ['{ viewer { ', '{ nope }', `query { ${'{'.repeat(5000)} }`, 'query($x: Nope) { viewer { kind } }'];
      for (const query of refused) {
        const r = await gql(limited.baseUrl, query, headers);
        expect(r.status, query.slice(0, 40)).toBe(400);
        expect(r.body.errors?.[0]?.extensions?.code).not.toBe('rate_limited');
      }
      // The budget is spent: another invalid document, and a valid query, are refused before any parsing.
      const syntax = await gql(limited.baseUrl, '{ viewer { ', headers);
      expect(syntax.status).toBe(429);
      expect(syntax.body.errors?.[0]?.extensions).toMatchObject({ code: 'rate_limited', param: null });
      expect(syntax.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
      const valid = await gql(limited.baseUrl, '{ viewer { kind } }', headers);
      expect(valid.status).toBe(429);
      // Anonymous callers are charged by address, the same way.
      for (let i = 0; i < 4; i++) expect((await gql(limited.baseUrl, '{ nope }')).status).toBe(400);
      expect((await gql(limited.baseUrl, '{ nope }')).status).toBe(429);
      // Another principal has its own budget.
      expect((await gql(limited.baseUrl, '{ viewer { kind } }', { cookie: w.parties.ownerA.cookie!, origin: limited.baseUrl })).status).toBe(200);
    } finally {
      await limited.close();
    }
  });

  it('charges an executed operation its size once, the point taken before parsing included', async () => {
    // 30 points a minute; an operation of 51-75 fields costs 3 points (25 fields a point): ten of them spend the budget.
    const limited = await appOn(database, { principalPointsPerMinute: 30 });
    try {
      const headers = { cookie: w.parties.ownerB.cookie!, origin: limited.baseUrl };
      const wide = `query { tenant(id: "${w.tenantB.id}") { ${Array.from({ length: 9 }, () => '...T').join(' ')} } } fragment T on Tenant { id slug name rpmLimit tpmLimit createdAt viewerRole }`;
      expect(Math.ceil(operationSize(parse(wide), null, 1000).fields / 25)).toBe(3);
      for (let i = 0; i < 10; i++) expect((await gql(limited.baseUrl, wide, headers)).status, `call ${i}`).toBe(200);
      expect((await gql(limited.baseUrl, '{ viewer { kind } }', headers)).status).toBe(429);
    } finally {
      await limited.close();
    }
  });

  // PGlite cannot interrupt a running statement: the timeout exists on PostgreSQL only, so only there is it tested.
  if (kind === 'postgres')
    it('stops an API caller’s statement at the statement timeout (PostgreSQL)', async () => {
      const requestDb = createRequestDb({ db: database.db, kind: database.kind, pool: database.pool, timeoutMs: 200 });
      try {
        const err = await sql`select pg_sleep(5)`.execute(requestDb.db).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect((err as { code?: string }).code).toBe('57014');
        expect(asServiceError(err)?.message).toMatch(/statement timeout/);
        // The app's own pool has no such limit.
        await expect(sql`select pg_sleep(0.3)`.execute(database.db)).resolves.toBeDefined();
      } finally {
        await requestDb.close();
      }
    });
});
