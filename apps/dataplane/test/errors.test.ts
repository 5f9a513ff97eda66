import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NAME, SECRET_A, SECRET_B, SECRET_EXPIRED, chatBody, deadUrl, errorOf, makeSnapshot, memorySink, post, startDataplane, startSim } from './helpers.ts';
import type { StartedApp, StartedSim } from './helpers.ts';

let sim: StartedSim;
let faulty: StartedSim;
let dp: StartedApp;
const sink = memorySink();
let shared: string;
let dedicated: string;

beforeAll(async () => {
  sim = await startSim({ maxContextLength: 64 });
  faulty = await startSim();
  dp = await startDataplane(makeSnapshot({ sim: sim.url, faulty: faulty.url, dead: await deadUrl() }), sink, { bodyLimit: 4096 });
  shared = `${dp.url}/endpoints/v1/chat/completions`;
  dedicated = `${dp.url}/funccall/acme/endpoints/${NAME}/v1/chat/completions`;
});
afterAll(async () => {
  await dp.app.close();
  await sim.sim.close();
  await faulty.sim.close();
});

async function expectError(res: Response, status: number, code: string, param?: string): Promise<string> {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toContain('application/json');
  const err = await errorOf(res);
  expect(err.code).toBe(code);
  if (param !== undefined) expect(err.param).toBe(param);
  if (status >= 500) expect(err.message).not.toMatch(/stack|at |ECONN|undici/i);
  return err.message;
}

describe('authentication', () => {
  it('401 missing_api_key without a header', async () => {
    await expectError(await post(shared, chatBody({ model: NAME }), null), 401, 'missing_api_key');
  });
  it('401 on a non-Bearer scheme', async () => {
    await expectError(await post(shared, chatBody({ model: NAME }), null, { authorization: `Basic ${SECRET_A}` }), 401, 'invalid_api_key');
  });
  it('accepts the scheme case-insensitively', async () => {
    const res = await post(shared, chatBody({ model: NAME }), null, { authorization: `bEaReR ${SECRET_A}` });
    expect(res.status).toBe(200);
    await res.text();
  });
  it('401 invalid_api_key on an unknown key', async () => {
    await expectError(await post(shared, chatBody({ model: NAME }), 'infk_unknown'), 401, 'invalid_api_key');
  });
  it('401 invalid_api_key on an expired key', async () => {
    await expectError(await post(shared, chatBody({ model: NAME }), SECRET_EXPIRED), 401, 'invalid_api_key');
  });
  it("403 for tenant B's key on tenant A's dedicated URL (chat and models)", async () => {
    await expectError(await post(dedicated, chatBody(), SECRET_B), 403, 'permission_denied');
    const res = await fetch(`${dp.url}/funccall/acme/endpoints/${NAME}/v1/models`, { headers: { authorization: `Bearer ${SECRET_B}` } });
    await expectError(res, 403, 'permission_denied');
  });
  it('401 on the models routes without a key', async () => {
    await expectError(await fetch(`${dp.url}/endpoints/v1/models`), 401, 'missing_api_key');
  });
});

describe('routing', () => {
  it('404 model_not_found for an unknown, unpublished or dedicated-only model', async () => {
    for (const model of ['no-such-model', 'unpublished-model', 'dedicated-only']) {
      const msg = await expectError(await post(shared, chatBody({ model })), 404, 'model_not_found', 'model');
      expect(msg).toContain(model);
    }
  });
  it('400 when shared mode has no model', async () => {
    await expectError(await post(shared, chatBody()), 400, 'invalid_request', 'model');
  });
  it('404 for an unknown dedicated endpoint', async () => {
    const noEndpoint = await post(`${dp.url}/funccall/acme/endpoints/nope/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }] });
    expect(noEndpoint.status).toBe(404);
    // The path is what names no endpoint: no `param` (there was no model in the body to blame).
    expect(await errorOf(noEndpoint)).toMatchObject({
      code: 'model_not_found',
      param: null,
      message: "The dedicated endpoint 'nope' does not exist for tenant 'acme'.",
    });
  });
  it('404 naming the expected model when a dedicated request names another', async () => {
    const msg = await expectError(await post(dedicated, chatBody({ model: 'meta/other-model' })), 404, 'model_not_found', 'model');
    expect(msg).toContain(NAME);
    // The Name compare is case-sensitive.
    await expectError(await post(dedicated, chatBody({ model: NAME.toUpperCase() })), 404, 'model_not_found');
  });
  it('503 for a dedicated deployment without a ready replica', async () => {
    await expectError(await post(`${dp.url}/funccall/acme/endpoints/dedicated-only/v1/chat/completions`, chatBody()), 503, 'no_healthy_upstream');
  });
  it('503 deployment_stopped / deployment_failed, naming why and with no retry-after, for a stopped or failed deployment', async () => {
    const url = `${dp.url}/funccall/acme/endpoints/dedicated-only/v1/chat/completions`;
    const before = dp.store.snapshot()!;
    const withState = (state: 'stopped' | 'failed', version: number) => ({
      ...before,
      version,
      deployments: before.deployments.map((d) => (d.id === 'd-cold' ? { ...d, state } : d)),
    });
    try {
      dp.store.replace(withState('stopped', before.version + 1));
      const stopped = await post(url, chatBody());
      expect(stopped.headers.get('retry-after')).toBeNull();
      // The OpenAI SDKs retry a 503 unless told not to: a retry cannot help here.
      expect(stopped.headers.get('x-should-retry')).toBe('false');
      expect(await expectError(stopped, 503, 'deployment_stopped')).toMatch(/is stopped: start it again/);
      dp.store.replace(withState('failed', before.version + 2));
      const failed = await post(url, chatBody());
      expect(failed.headers.get('x-should-retry')).toBe('false');
      expect(await expectError(failed, 503, 'deployment_failed')).toMatch(/failed to start/);
    } finally {
      dp.store.replace(before);
    }
    // Still provisioning: the transient answer, worth a retry.
    const provisioning = await post(url, chatBody());
    expect(provisioning.headers.get('x-should-retry')).toBeNull();
    await expectError(provisioning, 503, 'no_healthy_upstream');
  });
  it('404 JSON for unknown routes', async () => {
    await expectError(await fetch(`${dp.url}/nope`), 404, 'not_found');
    await expectError(await post(`${dp.url}/v1/chat/completions`, chatBody({ model: NAME })), 404, 'not_found');
  });
  it("404 for an unknown route whatever its body: empty, malformed or over the limit (not the body's 400 or 413)", async () => {
    const json = { 'content-type': 'application/json' };
    const del = await fetch(`${dp.url}/v1/models/x`, { method: 'DELETE', headers: json });
    expect(await expectError(del, 404, 'not_found')).toBe('Unknown route: DELETE /v1/models/x');
    await expectError(await fetch(`${dp.url}/endpoints/v1/completions`, { method: 'POST', headers: json, body: '{"model": ' }), 404, 'not_found');
    await expectError(await fetch(`${dp.url}/nope?x=1`, { method: 'PUT', headers: json, body: `"${'x'.repeat(2 * 1024 * 1024)}"` }), 404, 'not_found');
    // A known route still answers for the body.
    await expectError(await fetch(shared, { method: 'POST', headers: { ...json, authorization: `Bearer ${SECRET_A}` } }), 400, 'invalid_json');
  });
  it('405 JSON for GET on the chat routes', async () => {
    await expectError(await fetch(shared), 405, 'method_not_allowed');
    await expectError(await fetch(dedicated, { headers: { authorization: `Bearer ${SECRET_A}` } }), 405, 'method_not_allowed');
  });
});

describe('request bodies', () => {
  it('400 invalid_json on malformed JSON', async () => {
    await expectError(await post(shared, '{"model": "x", '), 400, 'invalid_json');
  });
  it('400 naming messages when it is missing', async () => {
    const msg = await expectError(await post(shared, { model: NAME }), 400, 'invalid_request', 'messages');
    expect(msg).toContain('messages');
  });
  it('400 naming a nested field', async () => {
    await expectError(await post(shared, { model: NAME, messages: [{ content: 'hi' }] }), 400, 'invalid_request', 'messages[0].role');
  });
  it('400 on temperature out of range, stream "yes"', async () => {
    await expectError(await post(shared, chatBody({ model: NAME, temperature: 5 })), 400, 'invalid_request', 'temperature');
    await expectError(await post(shared, chatBody({ model: NAME, stream: 'yes' })), 400, 'invalid_request', 'stream');
  });
  it('400 when the body is not an object', async () => {
    await expectError(await post(shared, '[1,2]'), 400, 'invalid_request');
  });
  it('415 on a non-JSON content type', async () => {
    const res = await fetch(shared, {
      method: 'POST',
      headers: { authorization: `Bearer ${SECRET_A}`, 'content-type': 'text/plain' },
      body: JSON.stringify(chatBody({ model: NAME })),
    });
    await expectError(res, 415, 'unsupported_media_type');
    const form = await fetch(shared, {
      method: 'POST',
      headers: { authorization: `Bearer ${SECRET_A}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'a=b',
    });
    await expectError(form, 415, 'unsupported_media_type');
  });
  it('413 when the body is over the limit', async () => {
    await expectError(await post(shared, chatBody({ model: NAME, messages: [{ role: 'user', content: 'x'.repeat(10_000) }] })), 413, 'request_too_large');
  });
});

describe('runtime failures', () => {
  it('runtime 400 context length passes through as context_length_exceeded', async () => {
    const msg = await expectError(
      await post(shared, chatBody({ model: NAME, messages: [{ role: 'user', content: 'word '.repeat(200) }] })),
      400,
      'context_length_exceeded',
      'messages',
    );
    expect(msg).toMatch(/context length/);
  });
  it('runtime 400 keeps the field the runtime names (param), and its message', async () => {
    const msg = await expectError(await post(shared, chatBody({ model: NAME, n: 2 })), 400, 'invalid_request', 'n');
    expect(msg).toMatch(/^n must be 1/);
  });
  it('runtime 500 becomes 502 upstream_error with a generic message', async () => {
    faulty.sim.setFaults({ errorStatus: 500 });
    await expectError(await post(shared, chatBody({ model: 'faulty-model' })), 502, 'upstream_error');
    await expectError(await post(shared, chatBody({ model: 'faulty-model', stream: true })), 502, 'upstream_error');
    faulty.sim.setFaults({});
  });
  it('a runtime that is down gives 503 no_healthy_upstream', async () => {
    await expectError(await post(shared, chatBody({ model: 'dead-model' })), 503, 'no_healthy_upstream');
  });
  it('a hung runtime gives 504 upstream_timeout before the first byte', async () => {
    faulty.sim.setFaults({ hang: true });
    const slow = await startDataplane(makeSnapshot({ sim: sim.url, faulty: faulty.url, dead: await deadUrl() }), memorySink(), {
      timeouts: { firstByteMs: 300, responseMs: 300 },
    });
    try {
      await expectError(await post(`${slow.url}/endpoints/v1/chat/completions`, chatBody({ model: 'faulty-model' })), 504, 'upstream_timeout');
    } finally {
      faulty.sim.setFaults({});
      await slow.app.close();
    }
  });
  it('fails over to another replica when one refuses connections', async () => {
    const snap = makeSnapshot({ sim: sim.url, faulty: faulty.url, dead: await deadUrl() });
    const dead = snap.endpoints.find((e) => e.name === 'dead-model')!;
    dead.upstreams.push({ id: 'u-ok', url: faulty.url, kind: 'vllm', servedModel: 'sim-llama', apiKey: null });
    const multi = await startDataplane(snap, memorySink());
    try {
      for (let i = 0; i < 4; i++) {
        const res = await post(`${multi.url}/endpoints/v1/chat/completions`, chatBody({ model: 'dead-model' }));
        expect(res.status).toBe(200);
        expect(((await res.json()) as { model: string }).model).toBe('dead-model');
      }
    } finally {
      await multi.app.close();
    }
  });
});

describe('health', () => {
  it('healthz, readyz and metrics answer', async () => {
    expect((await fetch(`${dp.url}/healthz`)).status).toBe(200);
    const ready = await fetch(`${dp.url}/readyz`);
    expect(ready.status).toBe(200);
    const metrics = await (await fetch(dp.metricsUrl)).text();
    expect(metrics).toMatch(/dataplane_requests_total\{route="chat",mode="shared",status="401"\} \d+/);
    expect(metrics).toContain('dataplane_config_version 1');
  });
  it('readyz is 503 without a snapshot, and inference answers 503', async () => {
    const empty = await startDataplane(null, memorySink());
    try {
      expect((await fetch(`${empty.url}/healthz`)).status).toBe(200);
      expect((await fetch(`${empty.url}/readyz`)).status).toBe(503);
      await expectError(await post(`${empty.url}/endpoints/v1/chat/completions`, chatBody({ model: NAME })), 503, 'service_unavailable');
    } finally {
      await empty.app.close();
    }
  });
});
