import { describe, expect, it } from 'vitest';
import { NAME, SECRET_A, chatBody, deadUrl, makeSnapshot, memorySink, post, startDataplane, useSimDataplane } from './helpers.ts';

const world = useSimDataplane();
const chat = () => `${world.dp.url}/endpoints/v1/chat/completions`;

const value = (text: string, series: string): number => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  if (line === undefined) throw new Error(`no series ${series}`);
  return Number(line.slice(series.length + 1));
};

describe('/metrics after traffic', () => {
  it('exposes every family with sane values', async () => {
    for (let i = 0; i < 3; i++) await (await post(chat(), chatBody({ model: NAME }))).text();
    for (let i = 0; i < 2; i++) await (await post(chat(), chatBody({ model: NAME, stream: true }))).text();
    await (await post(chat(), chatBody({ model: 'dead-model' }))).text();
    await (await post(chat(), chatBody({ model: NAME }), null)).text();

    const res = await fetch(world.dp.metricsUrl);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const m = await res.text();
    expect(value(m, `dataplane_requests_total{route="chat",mode="shared",endpoint="${NAME}",status="200"}`)).toBe(5);
    expect(value(m, 'dataplane_requests_total{route="chat",mode="shared",endpoint="dead-model",status="503"}')).toBe(1);
    expect(value(m, 'dataplane_requests_total{route="chat",mode="shared",status="401"}')).toBe(1);
    expect(value(m, 'dataplane_time_to_first_token_seconds_count{mode="shared"}')).toBe(5);
    expect(value(m, 'dataplane_request_duration_seconds_count{mode="shared"}')).toBe(6);
    expect(value(m, 'dataplane_request_duration_seconds_bucket{mode="shared",le="+Inf"}')).toBe(6);
    expect(value(m, 'dataplane_request_duration_seconds_sum{mode="shared"}')).toBeGreaterThan(0);
    expect(value(m, `dataplane_prompt_tokens_total{mode="shared",endpoint="${NAME}"}`)).toBeGreaterThan(0);
    expect(value(m, `dataplane_completion_tokens_total{mode="shared",endpoint="${NAME}"}`)).toBe(5 * 8);
    expect(value(m, 'dataplane_in_flight_requests')).toBe(0);
    expect(value(m, 'dataplane_runtime_errors_total{reason="connect"}')).toBe(1);
    expect(m).toContain('# TYPE dataplane_retries_total counter');
    expect(m).toContain('# TYPE dataplane_replica_ejections_total counter');
    expect(value(m, 'dataplane_config_version')).toBe(1);
    const age = value(m, 'dataplane_config_age_seconds');
    expect(age).toBeGreaterThanOrEqual(0);
    expect(age).toBeLessThan(60);
    // Histogram buckets are cumulative.
    const buckets = m
      .split('\n')
      .filter((l) => l.startsWith('dataplane_request_duration_seconds_bucket'))
      .map((l) => Number(l.split(' ')[1]));
    expect(buckets).toEqual([...buckets].sort((x, y) => x - y));
    expect(value(m, 'dataplane_resident_memory_bytes')).toBeGreaterThan(10 * 1024 * 1024);
    expect(value(m, 'dataplane_heap_used_bytes')).toBeGreaterThan(0);
  });

  it("counts a 405 on the chat path under the chat route, not the path's CORS preflight", async () => {
    for (const method of ['GET', 'DELETE']) {
      const res = await fetch(chat(), { method });
      expect(res.status).toBe(405);
      await res.text();
    }
    const m = await (await fetch(world.dp.metricsUrl)).text();
    expect(value(m, 'dataplane_requests_total{route="chat",mode="none",status="405"}')).toBe(2);
    expect(m).not.toContain('route="preflight",mode="none",status="405"');
  });

  it('reports the event-loop delay since the previous scrape, and sees a blocked loop', async () => {
    await (await fetch(world.dp.metricsUrl)).text(); // starts a new window
    await new Promise((r) => setTimeout(r, 50));
    const spin = Date.now() + 120;
    while (Date.now() < spin); // the app runs in this process: block its loop for 120 ms
    await new Promise((r) => setTimeout(r, 50));
    const m = await (await fetch(world.dp.metricsUrl)).text();
    expect(m).toContain('# TYPE dataplane_event_loop_delay_seconds gauge');
    const max = value(m, 'dataplane_event_loop_delay_seconds{quantile="1"}');
    expect(max).toBeGreaterThan(0.1);
    expect(value(m, 'dataplane_event_loop_delay_seconds{quantile="0.5"}')).toBeLessThanOrEqual(max);
    // The next window no longer holds the stall.
    await new Promise((r) => setTimeout(r, 100));
    const next = await (await fetch(world.dp.metricsUrl)).text();
    expect(value(next, 'dataplane_event_loop_delay_seconds{quantile="1"}')).toBeLessThan(max);
  });
});

describe('CORS for the browser playground', () => {
  it('answers preflight on the inference routes without a key', async () => {
    for (const path of ['/endpoints/v1/chat/completions', '/endpoints/v1/models', '/funccall/acme/endpoints/x/v1/chat/completions']) {
      const res = await fetch(`${world.dp.url}${path}`, {
        method: 'OPTIONS',
        headers: {
          origin: 'https://console.example',
          'access-control-request-method': 'POST',
          // What the OpenAI JavaScript SDK asks for in a browser, and the scale-up header of dedicated endpoints.
          'access-control-request-headers': 'authorization,content-type,x-stainless-os,x-stainless-retry-count,X-Stainless-Timeout,x-scale-up-timeout',
        },
      });
      expect(res.status).toBe(204);
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
      expect(res.headers.get('access-control-allow-headers')).toBe(
        'authorization,content-type,x-stainless-os,x-stainless-retry-count,x-stainless-timeout,x-scale-up-timeout',
      );
      expect(res.headers.get('vary')).toContain('access-control-request-headers');
      expect(res.headers.get('access-control-allow-methods')).toContain('POST');
    }
    // Nothing asked, or something that is not a list of header names: our own list.
    for (const asked of [undefined, 'authorization content-type', 'a;b']) {
      const res = await fetch(`${world.dp.url}/endpoints/v1/chat/completions`, {
        method: 'OPTIONS',
        headers: {
          origin: 'https://console.example',
          'access-control-request-method': 'POST',
          ...(asked === undefined ? {} : { 'access-control-request-headers': asked }),
        },
      });
      expect(res.status).toBe(204);
      expect(res.headers.get('access-control-allow-headers')).toBe('authorization, content-type, x-request-id, x-scale-up-timeout');
    }
  });

  it('marks actual responses (JSON, streams and errors) readable cross-origin and exposes the ids', async () => {
    const origin = { origin: 'https://console.example' };
    for (const body of [chatBody({ model: NAME }), chatBody({ model: NAME, stream: true }), { model: NAME }]) {
      const res = await post(chat(), body, SECRET_A, origin);
      await res.text();
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
      const exposed = res.headers.get('access-control-expose-headers') ?? '';
      expect(exposed).toContain('x-request-id');
      expect(exposed).toContain('x-ratelimit-remaining-requests');
      expect(exposed).toContain('x-cold-start-wait-ms');
      expect(exposed).toContain('x-should-retry');
      expect(res.headers.get('x-request-id')).toBeTruthy();
    }
    const unauth = await post(chat(), chatBody({ model: NAME }), null, origin);
    expect(unauth.status).toBe(401);
    expect(unauth.headers.get('access-control-allow-origin')).toBe('*');
  });
});

describe('finding 11: metrics are internal', () => {
  it('the public listener has no /metrics; the internal one is on its own port', async () => {
    const pub = await fetch(`${world.dp.url}/metrics`);
    expect(pub.status).toBe(404);
    await pub.text();
    expect(new URL(world.dp.metricsUrl).port).not.toBe(new URL(world.dp.url).port);
    const m = await (await fetch(world.dp.metricsUrl)).text();
    expect(m).toContain('dataplane_in_flight_requests');
    // No label carries a runtime address (the sim listens on 127.0.0.1).
    expect(m).not.toMatch(/"https?:\/\//);
    expect(m).not.toContain(new URL(world.sim.url).host);
  });

  it('with a token, the metrics listener answers only a bearer that matches', async () => {
    const other = await startDataplane(makeSnapshot({ sim: world.sim.url, faulty: world.sim.url, dead: await deadUrl() }), memorySink(), {
      metricsListener: { port: 0, host: '127.0.0.1', token: 'scrape-secret-0123456789' },
    });
    try {
      for (const auth of [undefined, 'Bearer wrong', 'Bearer scrape-secret-012345678', SECRET_A]) {
        const res = await fetch(other.metricsUrl, auth === undefined ? {} : { headers: { authorization: auth } });
        expect(res.status).toBe(401);
        await res.text();
      }
      const ok = await fetch(other.metricsUrl, { headers: { authorization: 'Bearer scrape-secret-0123456789' } });
      expect(ok.status).toBe(200);
      expect(await ok.text()).toContain('dataplane_config_version 1');
    } finally {
      await other.app.close();
    }
  });
});
