// The local provisioner takes a runtime as ready when it says so on stdout ('ready on <url>', as runtime-sim
// prints), without waiting for a /health poll; a runtime that prints no such line is still found by /health.
import { afterEach, describe, expect, it } from 'vitest';
import { createLocalProvisioner } from '../src/modules/deployments/provisioners/local/local-provisioner.ts';
import type { Provisioner, StartedReplica } from '../src/modules/deployments/provisioners/provisioner.ts';

/**
 * A stand-in runtime: answers /health with 503 until HEALTHY_AFTER_MS (never, when absent), counts the probes
 * (GET /probes), prints its address, then its ready line after READY_LINE_MS unless that is absent.
 */
const RUNTIME = `
const http = require('node:http');
const healthyAfter = process.env.HEALTHY_AFTER_MS ? Number(process.env.HEALTHY_AFTER_MS) : Infinity;
const readyLine = process.env.READY_LINE_MS ? Number(process.env.READY_LINE_MS) : null;
const t0 = Date.now();
let probes = 0;
const server = http.createServer((req, res) => {
  if (req.url === '/probes') return res.end(String(probes));
  probes++;
  res.writeHead(Date.now() - t0 >= healthyAfter ? 200 : 503).end();
});
server.listen(0, '127.0.0.1', () => {
  const url = 'http://127.0.0.1:' + server.address().port;
  process.stdout.write('listening on ' + url + '\\n');
  if (readyLine !== null) setTimeout(() => process.stdout.write('runtime ready on ' + url + '\\n'), readyLine);
});
process.on('SIGTERM', () => process.exit(0));
`;

const spec = { replicaId: 'r', deploymentId: 'd', tenantId: 't', entryName: 'E', servedModel: 'm', coldStartSeconds: null, externalUrl: null };

describe('local provisioner readiness', () => {
  let provisioner: Provisioner | null = null;
  afterEach(async () => {
    await provisioner?.close?.();
    delete process.env['READY_LINE_MS'];
    delete process.env['HEALTHY_AFTER_MS'];
  });

  it("resolves on the runtime's ready line while /health still refuses", async () => {
    process.env['READY_LINE_MS'] = '300';
    provisioner = createLocalProvisioner({ command: [process.execPath, '-e', RUNTIME, '--'], readyTimeoutMs: 20_000 });
    const started: StartedReplica = await provisioner.start(spec);
    const health = await fetch(`${started.url}/health`);
    expect(health.status).toBe(503);
    expect(started.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  it("starts runtime-sim with the entry's Context Length as its window (its own default is 32768)", async () => {
    provisioner = createLocalProvisioner({ readyTimeoutMs: 20_000 });
    const started = await provisioner.start({ ...spec, contextLength: 131_072 });
    const models = (await (await fetch(`${started.url}/v1/models`)).json()) as { data: { id: string; max_model_len: number }[] };
    expect(models.data).toMatchObject([{ id: 'm', max_model_len: 131_072 }]);
  });

  it('falls back to /health for a runtime that prints no ready line', async () => {
    process.env['HEALTHY_AFTER_MS'] = '300';
    provisioner = createLocalProvisioner({ command: [process.execPath, '-e', RUNTIME, '--'], readyTimeoutMs: 20_000 });
    const started = await provisioner.start(spec);
    expect((await fetch(`${started.url}/health`)).status).toBe(200);
    expect(Number(await (await fetch(`${started.url}/probes`)).text())).toBeGreaterThan(1);
  });
});
