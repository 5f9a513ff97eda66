// Issue 13 items 9-11: the model forms each route accepts, "did you mean" on the shared route's 404, and
// `/models` with the entries' creation times. Each chat case runs on the fast path and on Fastify's.
import { request } from 'node:http';
import type { ConfigSnapshot } from '@infer/shared';
import { dedicatedModelName } from '@infer/shared';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NAME, SECRET_A, chatBody, deadUrl, makeSnapshot, memorySink, startDataplane, startSim } from './helpers.ts';
import type { StartedApp, StartedSim } from './helpers.ts';

const LLAMA = 'Llama-3.3-70B-Instruct';
const CREATED = '2026-03-01T12:00:00.000Z';

let sim: StartedSim;
let dp: StartedApp;

/** The helpers' snapshot plus a catalog-like entry (provider 'Meta', served under its Hugging Face id) and a deployment of it. */
function snapshot(urls: { sim: string; faulty: string; dead: string }): ConfigSnapshot {
  const s = makeSnapshot(urls);
  const upstream = { id: 'u-llama33', url: urls.sim, kind: 'sim' as const, servedModel: 'sim-llama', apiKey: null };
  s.endpoints.push({
    ...s.endpoints[0]!,
    id: 'e-llama33',
    name: LLAMA,
    provider: 'Meta',
    createdAt: CREATED,
    upstreams: [upstream, { ...upstream, id: 'u-llama33-hf', servedModel: 'meta-llama/Llama-3.3-70B-Instruct', url: urls.dead }],
  });
  s.deployments.push({
    ...s.deployments[0]!,
    id: 'd-llama33',
    endpointId: 'e-llama33',
    endpointName: LLAMA,
    provider: 'Meta',
    replicas: [{ ...upstream, id: 'r-llama33' }],
  });
  return s;
}

beforeAll(async () => {
  sim = await startSim();
  dp = await startDataplane(snapshot({ sim: sim.url, faulty: sim.url, dead: await deadUrl() }), memorySink());
});
afterAll(async () => {
  await dp.app.close();
  await sim.sim.close();
});

interface Answer {
  readonly status: number;
  readonly body: { model?: string; error?: { message: string; code: string; param: string | null } };
}

/** A POST over a real socket; `chunked` (no Content-Length) makes the fast path leave it to Fastify. */
function send(path: string, body: unknown, chunked: boolean): Promise<Answer> {
  const text = JSON.stringify(body);
  const headers: Record<string, string> = { 'content-type': 'application/json', authorization: `Bearer ${SECRET_A}` };
  if (!chunked) headers['content-length'] = String(Buffer.byteLength(text));
  return new Promise((resolve, reject) => {
    const req = request(`${dp.url}${path}`, { method: 'POST', headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Answer['body'] }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (chunked) {
      req.write(text.slice(0, 10));
      req.end(text.slice(10));
    } else req.end(text);
  });
}

const SHARED = '/endpoints/v1/chat/completions';
const DEDICATED = `/funccall/acme/endpoints/${LLAMA}/v1/chat/completions`;

describe.each([
  { label: 'fast path', chunked: false },
  { label: 'Fastify path', chunked: true },
])('model names on the $label', ({ chunked }) => {
  it("dedicated: the Name, the console's <provider>/<Name> (provider in any case) or no model; answers with the name sent", async () => {
    expect(dedicatedModelName(LLAMA, 'Meta')).toBe(`Meta/${LLAMA}`);
    for (const model of [undefined, LLAMA, `Meta/${LLAMA}`, `meta/${LLAMA}`]) {
      const a = await send(DEDICATED, chatBody(model === undefined ? {} : { model }), chunked);
      expect(a.status, `${model}: ${JSON.stringify(a.body)}`).toBe(200);
      expect(a.body.model).toBe(model ?? LLAMA);
    }
  });

  it('dedicated: any other prefix, a Hugging Face id or another case of the Name is a 404 naming the accepted forms', async () => {
    for (const model of [
      `foo/${LLAMA}`,
      'meta-llama/Llama-3.3-70B-Instruct',
      LLAMA.toLowerCase(),
      `Meta/${LLAMA.toLowerCase()}`,
      `/${LLAMA}`,
      `Meta/x/${LLAMA}`,
    ]) {
      const a = await send(DEDICATED, chatBody({ model }), chunked);
      expect(a.status, model).toBe(404);
      expect(a.body.error).toMatchObject({ code: 'model_not_found', param: 'model' });
      expect(a.body.error!.message).toContain(`'${LLAMA}' or 'Meta/${LLAMA}'`);
    }
  });

  it('shared: an unknown model close to a published Name gets "did you mean"', async () => {
    const cases: [string, string][] = [
      ['llama-3.3-70b-instruct', LLAMA], // case
      ['meta-llama/Llama-3.3-70B-Instruct', LLAMA], // the Hugging Face id
      [`Meta/${LLAMA}`, LLAMA], // the dedicated form
      [`someone/${LLAMA}`, LLAMA], // another provider prefix
      ['Llama-3.3-70B-Instuct', LLAMA], // a typo
      ['Llama 3.3 70B Instruct', LLAMA], // spaces for dashes
      [`meta/${NAME}`, NAME],
      [NAME.toUpperCase(), NAME],
    ];
    for (const [model, meant] of cases) {
      const a = await send(SHARED, chatBody({ model }), chunked);
      expect(a.status, model).toBe(404);
      expect(a.body.error).toMatchObject({ code: 'model_not_found', param: 'model' });
      expect(a.body.error!.message, model).toContain(`Did you mean '${meant}'?`);
    }
  });

  it('shared: a model close to nothing names where the list is, and suggests no unpublished or dedicated-only Name', async () => {
    for (const model of ['gpt-5-turbo', 'unpublished-model', 'dedicated-only', 'x'.repeat(300)]) {
      const a = await send(SHARED, chatBody({ model }), chunked);
      expect(a.status).toBe(404);
      expect(a.body.error!.message).not.toContain('Did you mean');
      expect(a.body.error!.message).toContain('GET /endpoints/v1/models');
    }
  });

  it('a huge model (a megabyte of slashes) is answered at once, and quoted back only in part', async () => {
    // Each '/' was a suffix looked up (quadratic: about 5 minutes of a blocked event loop for this one body).
    const slashes = '/'.repeat(900_000);
    for (const [path, model] of [
      [SHARED, slashes],
      [SHARED, `${'x'.repeat(100_000)}/${LLAMA}`],
      [DEDICATED, slashes],
    ] as const) {
      const a = await send(path, chatBody({ model }), chunked);
      expect(a.status).toBe(404);
      expect(a.body.error).toMatchObject({ code: 'model_not_found', param: 'model' });
      expect(a.body.error!.message.length).toBeLessThan(600);
      expect(a.body.error!.message).toContain(`… (${model.length} characters)`);
    }
  });
});

describe('/models', () => {
  const get = async (path: string) => {
    const res = await fetch(`${dp.url}${path}`, { headers: { authorization: `Bearer ${SECRET_A}` } });
    expect(res.status).toBe(200);
    return ((await res.json()) as { data: { id: string; created: number }[] }).data;
  };

  it("created is the entry's creation time in Unix seconds (0 when the snapshot has none)", async () => {
    const shared = await get('/endpoints/v1/models');
    expect(shared.find((m) => m.id === LLAMA)!.created).toBe(Date.parse(CREATED) / 1000);
    expect(shared.find((m) => m.id === NAME)!.created).toBe(0);
    const dedicated = await get(`/funccall/acme/endpoints/${LLAMA}/v1/models`);
    expect(dedicated).toEqual([expect.objectContaining({ id: LLAMA, created: Date.parse(CREATED) / 1000 })]);
  });
});
