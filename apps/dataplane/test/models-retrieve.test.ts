// GET /models/{model} on both surfaces (the SDKs' `models.retrieve`): the list's object, auth and visibility.
import OpenAI, { NotFoundError } from 'openai';
import { describe, expect, it } from 'vitest';
import { NAME, SECRET_A, SECRET_B, useSimDataplane } from './helpers.ts';

const world = useSimDataplane();

const SHARED_BASE = '/endpoints/v1';
const DEDICATED_BASE = `/funccall/acme/endpoints/${NAME}/v1`;
const SLASH_BASE = `/funccall/acme/endpoints/${encodeURIComponent('meta/llama-slash')}/v1`;

interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

async function get(path: string, key: string | null = SECRET_A): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${world.dp.url}${path}`, { headers: key === null ? {} : { authorization: `Bearer ${key}` } });
  return { status: res.status, body: await res.json() };
}

async function listed(base: string): Promise<{ id: string }[]> {
  const list = await get(`${base}/models`);
  expect(list.status).toBe(200);
  return (list.body as { data: { id: string }[] }).data;
}

describe('GET /v1/models/{model}', () => {
  it('OpenAI SDK models.retrieve answers the object the list gives, on both surfaces', async () => {
    for (const base of [SHARED_BASE, DEDICATED_BASE, SLASH_BASE]) {
      const client = new OpenAI({ baseURL: `${world.dp.url}${base}`, apiKey: SECRET_A, maxRetries: 0 });
      const data = await listed(base);
      expect(data.length).toBeGreaterThan(0);
      for (const model of data) expect(await client.models.retrieve(model.id)).toEqual(model);
    }
  });

  it("takes on a dedicated endpoint the names chat takes: its Name, or '<provider>/<Name>' as the console shows it", async () => {
    const [model] = await listed(DEDICATED_BASE);
    const client = new OpenAI({ baseURL: `${world.dp.url}${DEDICATED_BASE}`, apiKey: SECRET_A, maxRetries: 0 });
    for (const id of [NAME, `meta/${NAME}`, `Meta/${NAME}`]) expect(await client.models.retrieve(id), id).toEqual(model);
  });

  it('takes an id with a slash encoded or as is', async () => {
    const [model] = await listed(SLASH_BASE);
    expect(model!.id).toBe('meta/llama-slash');
    for (const id of ['meta/llama-slash', 'meta%2Fllama-slash', 'meta%2fllama-slash']) {
      const a = await get(`${SLASH_BASE}/models/${id}`);
      expect(a, id).toEqual({ status: 200, body: model });
    }
  });

  it('a model the caller cannot list is a 404 model_not_found, OpenAI-shaped', async () => {
    const client = new OpenAI({ baseURL: `${world.dp.url}${SHARED_BASE}`, apiKey: SECRET_A, maxRetries: 0 });
    const err = await client.models.retrieve('unpublished-model').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotFoundError);
    for (const [path, model] of [
      [`${SHARED_BASE}/models/unpublished-model`, 'unpublished-model'],
      [`${SHARED_BASE}/models/dedicated-only`, 'dedicated-only'],
      [`${SHARED_BASE}/models/${encodeURIComponent('no such/model?')}`, 'no such/model?'],
      [`${DEDICATED_BASE}/models/dedicated-only`, 'dedicated-only'],
      [`${DEDICATED_BASE}/models/other%2F${NAME}`, `other/${NAME}`],
    ] as const) {
      const a = await get(path);
      expect(a.status, path).toBe(404);
      const e = (a.body as ErrorBody).error;
      expect(e, path).toMatchObject({ type: 'invalid_request_error', code: 'model_not_found', param: 'model' });
      expect(e.message, path).toContain(`'${model}'`);
    }
  });

  it('has the list routes’ auth: 401 without a key, 403 for another tenant, 404 for an unknown deployment', async () => {
    for (const path of [`${SHARED_BASE}/models/${NAME}`, `${DEDICATED_BASE}/models/${NAME}`]) {
      const a = await get(path, null);
      expect(a.status, path).toBe(401);
      expect((a.body as ErrorBody).error.code).toBe('missing_api_key');
    }
    const other = await get(`${DEDICATED_BASE}/models/${NAME}`, SECRET_B);
    expect(other.status).toBe(403);
    expect((other.body as ErrorBody).error.code).toBe('permission_denied');
    const none = await get(`/funccall/acme/endpoints/nothing-here/v1/models/${NAME}`);
    expect(none.status).toBe(404);
    expect((none.body as ErrorBody).error.code).toBe('model_not_found');
  });
});
