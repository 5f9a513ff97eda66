/**
 * What one usage batch POST costs the data-plane node: the reporter's request (undici, JSON body of N records, the
 * answer read) against bench/control-plane-stub.ts in its own process, CPU of this process per POST and per record,
 * for each batch size. The reporter sends whole batches when busy (apps/dataplane/src/usage/usage-reporter.ts).
 *
 * usage: node bench/usage-post.ts [--batches 81,500] [--posts 2000]
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { freePort, startNode, waitReady } from './processes.ts';

const { values } = parseArgs({ options: { batches: { type: 'string', default: '81,500' }, posts: { type: 'string', default: '2000' } } });
const sizes = values.batches.split(',').map(Number);
const posts = Number(values.posts);
if (sizes.some((n) => !Number.isInteger(n) || n < 1) || !Number.isInteger(posts) || posts < 1) throw new Error('--batches and --posts take positive integers');

const dir = mkdtempSync(join(tmpdir(), 'infer-usage-post-'));
const snapshotFile = join(dir, 'snapshot.json');
writeFileSync(snapshotFile, JSON.stringify({ version: 1 }));
const port = await freePort();
const stub = startNode('stub', fileURLToPath(new URL('./control-plane-stub.ts', import.meta.url)), [String(port), snapshotFile]);
const base = `http://127.0.0.1:${port}`;
try {
  await waitReady(stub, `${base}/healthz`);
  // A record as the node writes it (apps/dataplane/src/proxy/forward-chat.ts), serialised once per record.
  const record = (i: number): string =>
    JSON.stringify({
      requestId: `${crypto.randomUUID()}-${i}`,
      tenantId: 'tenant-w',
      keyId: 'key-w',
      endpointId: 'endpoint-w',
      deploymentId: null,
      mode: 'shared',
      model: 'weight-model',
      promptTokens: 10,
      completionTokens: 16,
      estimated: false,
      status: 200,
      ttftMs: 1.234567891,
      latencyMs: 2.3456789123,
      startedAt: new Date().toISOString(),
    });
  console.log('| records per POST | body bytes | CPU µs per POST | of which kernel | CPU µs per record |');
  console.log('|--:|--:|--:|--:|--:|');
  for (const n of sizes) {
    const queued = Array.from({ length: n }, (_, i) => record(i));
    // As the reporter sends a batch: the queued records' JSON joined into one body (per POST), the answer read.
    const body = (): string => `{"records":[${queued.join(',')}]}`;
    const post = async (): Promise<void> => {
      const res = await request(`${base}/internal/v1/usage`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer bench' },
        body: body(),
      });
      await res.body.text();
      if (res.statusCode !== 200) throw new Error(`stub answered ${res.statusCode}`);
    };
    for (let i = 0; i < Math.min(200, posts); i++) await post();
    const t0 = process.cpuUsage();
    for (let i = 0; i < posts; i++) await post();
    const t = process.cpuUsage(t0);
    const perPost = (t.user + t.system) / posts;
    const bytes = Buffer.byteLength(body());
    console.log(`| ${n} | ${bytes} | ${Math.round(perPost)} | ${Math.round(t.system / posts)} | ${(perPost / n).toFixed(2)} |`);
  }
} finally {
  stub.proc.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
}
