import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { launchChromium, screenshot } from './browser.ts';
import { startPlatform, type Platform } from './platform.ts';

const run = promisify(execFile);

let platform: Platform;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let deploymentPath: string | null = null;

/** How far the page itself scrolls sideways (0 or less: it fits). */
const overflow = (p: Page): Promise<number> => p.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);

/** Waits until the page has rendered its data (no loading placeholders left). */
async function settle(p: Page): Promise<void> {
  await p.locator('h1').first().waitFor();
  await p.waitForFunction(() => document.querySelectorAll('.state.loading').length === 0, undefined, { timeout: 15_000 });
  await p.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
}

/** Screenshots the page and records it when the page scrolls sideways. */
async function check(p: Page, name: string, failures: string[]): Promise<void> {
  await screenshot(p, name);
  const extra = await overflow(p);
  if (extra > 0) {
    const culprits = await p.evaluate(() =>
      [...document.querySelectorAll('body *')]
        .filter((el) => el.getBoundingClientRect().right > window.innerWidth + 1)
        .slice(0, 5)
        .map((el) => `${el.tagName.toLowerCase()}.${[...el.classList].join('.')}`),
    );
    failures.push(`${name}: ${extra}px too wide (${culprits.join(', ')})`);
  }
}

/** Runs a curl command exactly as the page shows it; returns the status and body. */
async function runCurl(text: string): Promise<{ status: number; body: string }> {
  const { stdout } = await run('bash', ['-c', `${text} -sS --max-time 20 -w '\\n%{http_code}'`], { timeout: 30_000 });
  const i = stdout.lastIndexOf('\n');
  return { status: Number(stdout.slice(i + 1)), body: stdout.slice(0, i) };
}

async function login(p: Page): Promise<void> {
  await p.goto(new URL('/login', platform.consoleUrl).href);
  await p.getByLabel('Email').fill(platform.env['ADMIN_EMAIL'] ?? '');
  await p.getByLabel('Password').fill(platform.env['ADMIN_PASSWORD'] ?? '');
  await p.getByRole('button', { name: 'Log in' }).click();
  // Attached, not necessarily visible: on a phone it sits in the closed menu.
  await p.locator('.account button', { hasText: 'Log out' }).waitFor({ state: 'attached' });
}

beforeAll(async () => {
  platform = await startPlatform();
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await platform?.stop();
});

describe('web console', () => {
  // A fresh browser context per test: no cookies or session storage carried over.
  beforeEach(async () => {
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(15_000);
  });
  // Each test's last page, saved under apps/web/test-results/.
  afterEach(async (ctx) => {
    await screenshot(page, ctx.task.name.slice(0, 60)).catch(() => undefined);
    await context?.close();
  });

  test('anonymous visitor browses by tag and opens an endpoint with the placeholder key', async () => {
    await page.goto(platform.consoleUrl);
    await expect(page.getByText('beta', { exact: true }).first().isVisible()).resolves.toBe(true);
    const cards = page.locator('.entry-card');
    await cards.first().waitFor();
    const total = await cards.count();
    expect(total).toBeGreaterThan(1);
    // Sorted by name as people read it: the seed's lower-case names ("gemma-…", "gpt-oss-…") among the others, not after "Z".
    const names = await page.locator('.entry-card h3').allTextContents();
    expect(names.some((n) => /^[a-z]/.test(n))).toBe(true);
    expect(names).toEqual([...names].sort((a, b) => a.localeCompare(b, 'en', { sensitivity: 'base', numeric: true })));
    // The search box takes what the API takes (200 characters); a longer search in the URL is cut to it: never a raw
    // validation error.
    const search = page.locator('#catalog-search');
    await search.fill('x'.repeat(300));
    expect((await search.inputValue()).length).toBe(200);
    await page.goto(new URL(`/?q=${'y'.repeat(300)}`, platform.consoleUrl).href);
    await page.getByText('No published endpoint matches these filters.').waitFor();
    expect(await page.getByRole('alert').count()).toBe(0);
    await page.goto(platform.consoleUrl);
    await cards.first().waitFor();

    const tag = page.locator('button[data-facet="tag"]', { hasText: 'coding' }).first();
    const tagCount = Number(await tag.locator('.count').textContent());
    await tag.click();
    await page.waitForURL(/tag=coding/);
    await expect.poll(() => cards.count()).toBe(tagCount);
    expect(tagCount).toBeLessThan(total);
    for (const card of await cards.all()) expect(await card.locator('.tags').textContent()).toContain('coding');

    // A search matches the provider too, and the facets count within what it matches: each provider's count is the
    // number of its cards among the results.
    await page.goto(new URL('/?q=Meta', platform.consoleUrl).href);
    await expect.poll(() => cards.count()).toBeGreaterThan(0);
    const found = await cards.count();
    await expect
      .poll(async () => {
        let sum = 0;
        for (const b of await page.locator('button[data-facet="provider"] .count').all()) sum += Number(await b.textContent());
        return sum;
      })
      .toBe(found);
    await page.goto(new URL('/?tag=coding', platform.consoleUrl).href);
    await expect.poll(() => cards.count()).toBe(tagCount);

    const first = cards.first().locator('h3 a');
    const entryName = (await first.textContent()) ?? '';
    await first.click();
    await page.getByRole('heading', { level: 1, name: entryName }).waitFor();
    // The tab's title names the page, and keyboard focus moved to the new content (not left on the clicked link).
    await expect.poll(() => page.title()).toBe(`${entryName} · Inference Platform (beta)`);
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('main');
    for (const label of [
      'Provider',
      'Parameter Size',
      'GPU Count',
      'Context Length',
      'Concurrency',
      'Cold Start TTFT',
      'Token Price',
      'Recommended Use Cases',
      'Tags',
    ]) {
      await page.locator('.field-table dt', { hasText: label }).first().waitFor();
    }
    expect(await page.getByTestId('shared-api-key').textContent()).toBe('<INFERENCE_API_KEY>');
    expect(await page.getByTestId('shared-model').textContent()).toBe(entryName);
    expect(await page.getByTestId('shared-base-url').textContent()).toBe(platform.env['SHARED_BASE_URL']);
    expect(await page.getByTestId('shared-snippet-curl').textContent()).toContain('Authorization: Bearer <INFERENCE_API_KEY>');
    await page.getByRole('tab', { name: 'Python' }).first().click();
    expect(await page.getByTestId('shared-snippet-python').textContent()).toContain('api_key="<INFERENCE_API_KEY>"');
    expect(await page.getByRole('link', { name: 'Log in' }).first().isVisible()).toBe(true);

    // A page that fails to render (here: an entry whose tags came back null) says so in words, not with a blank page;
    // the header stays, and the rest of the console works.
    await page.route(/\/trpc\/[^?]*catalog\.byName/, async (route) => {
      const res = await route.fetch();
      const paths = decodeURIComponent(new URL(route.request().url()).pathname.split('/trpc/')[1] ?? '').split(',');
      const body = (await res.json()) as { result?: { data?: Record<string, unknown> } }[];
      const data = body[paths.indexOf('catalog.byName')]?.result?.data;
      if (data) data['tags'] = null;
      await route.fulfill({ response: res, json: body });
    });
    await page.reload();
    await page.getByTestId('render-error').getByRole('alert').waitFor();
    expect(await page.getByRole('heading', { level: 1, name: 'Something went wrong' }).isVisible()).toBe(true);
    await page.unroute(/\/trpc\/[^?]*catalog\.byName/);
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Catalog', exact: true }).click();
    await cards.first().waitFor();
  });

  test('a user logs in, creates a key shown once, runs the curl, revokes it and the curl is refused', async () => {
    await login(page);
    const model = platform.env['SHARED_MODEL'] ?? '';
    await page.goto(new URL(`/endpoints/${encodeURIComponent(model)}`, platform.consoleUrl).href);
    expect(await page.getByTestId('shared-api-key').textContent()).toBe('<INFERENCE_API_KEY>');

    await page.getByText('Create an API key for these snippets').click();
    const keyName = `e2e key ${Date.now()}`;
    await page.getByLabel('Key name').fill(keyName);
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = (await page.getByTestId('new-key-secret').textContent()) ?? '';
    expect(secret.length).toBeGreaterThan(20);
    await page.getByText('This is the only time it is shown').waitFor();
    expect(await page.getByTestId('shared-api-key').textContent()).toBe(secret);

    const curl = (await page.getByTestId('shared-snippet-curl').textContent()) ?? '';
    expect(curl).toContain(`Bearer ${secret}`);
    const ok = await runCurl(curl);
    expect(ok.status, ok.body).toBe(200);
    const completion = JSON.parse(ok.body) as { choices: { message: { content: string } }[] };
    expect(completion.choices[0]?.message.content.length).toBeGreaterThan(0);

    // Shown once: dismissed, it is gone from the page, and the list shows only the prefix.
    await page.getByRole('button', { name: 'I have copied it' }).click();
    expect(await page.getByTestId('shared-api-key').textContent()).toBe('<INFERENCE_API_KEY>');
    await page.getByRole('link', { name: 'API keys' }).click();
    const row = page.locator('tr', { hasText: keyName });
    await row.waitFor();
    expect(await page.content()).not.toContain(secret);

    await row.getByRole('button', { name: `Revoke ${keyName}` }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke key' }).click();
    await row.getByText('revoked').waitFor();

    let refused = await runCurl(curl);
    const deadline = Date.now() + 3000;
    while (refused.status !== 401 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      refused = await runCurl(curl);
    }
    expect(refused.status, refused.body).toBe(401);
  });

  test('an owner creates an admin token shown once, its curl calls GraphQL, and a revoked token is refused', async () => {
    await login(page);
    await page.getByRole('link', { name: 'Admin tokens' }).click();
    await page.getByRole('heading', { level: 1, name: 'Admin tokens' }).waitFor();
    const tokenName = `e2e token ${Date.now()}`;
    await page.getByLabel('Token name').fill(tokenName);
    await page.getByRole('radio', { name: /This tenant/ }).check();
    // A machine-speed double click is one token, not two.
    await page.getByRole('button', { name: 'Create token' }).dblclick();
    const secret = (await page.getByTestId('new-admin-token-secret').textContent()) ?? '';
    expect(secret).toMatch(/^infa_/);
    await page.getByText('This is the only time it is shown').waitFor();
    const curl = (await page.getByTestId('admin-token-curl').textContent()) ?? '';
    expect(curl).toContain(`Bearer ${secret}`);
    await screenshot(page, 'admin token shown once');
    const ok = await runCurl(curl);
    expect(ok.status, ok.body).toBe(200);
    const viewer = (JSON.parse(ok.body) as { data: { viewer: { kind: string; tenants: { slug: string }[] } } }).data.viewer;
    expect(viewer.kind).toBe('ADMIN_TOKEN');
    expect(viewer.tenants.map((t) => t.slug)).toEqual([platform.env['DEMO_TENANT']]);

    await page.getByRole('button', { name: 'I have copied it' }).click();
    const row = page.locator('tr', { hasText: tokenName });
    await row.first().waitFor();
    expect(await row.count()).toBe(1);
    expect(await page.content()).not.toContain(secret);
    await row.getByRole('button', { name: `Revoke ${tokenName}` }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke token' }).click();
    await row.getByText('revoked').waitFor();
    const refused = await runCurl(curl);
    expect(refused.status, refused.body).toBe(401);
  });

  test('the playground streams a reply, shows its figures, and the stop button ends it', async () => {
    await login(page);
    const model = platform.env['SHARED_MODEL'] ?? '';
    await page.goto(new URL(`/playground?endpoint=${encodeURIComponent(model)}`, platform.consoleUrl).href);
    // A pasted key is used as is (memory only), no key is minted for it.
    await page.getByRole('radio', { name: 'Paste a key' }).check();
    // A wrong key: the error is shown and the message goes back into the box, not into the conversation.
    await page.locator('#pg-key-paste').fill('infk_wrong_key_for_the_playground_test');
    await page.getByLabel('max_tokens').fill('12');
    await page.getByLabel('Message').fill('Say something short.');
    // The request is held in the browser until a follow-up has been typed into the box meanwhile.
    let release: () => void = () => {};
    const held = new Promise<void>((r) => (release = r));
    await page.route('**/chat/completions', async (route) => {
      await held;
      await route.continue();
    });
    await page.getByRole('button', { name: 'Send' }).click();
    await page.getByRole('button', { name: 'Stop' }).waitFor();
    await page.getByLabel('Message').fill('And then?');
    release();
    await expect.poll(() => page.getByTestId('reply-status').textContent()).toMatch(/401|key/i);
    await page.unroute('**/chat/completions');
    // The failed message comes back first, what was typed meanwhile stays after it.
    expect(await page.getByLabel('Message').inputValue()).toBe('Say something short.\n\nAnd then?');
    expect(await page.locator('.message.user').count()).toBe(0);
    await page.getByLabel('Message').fill('Say something short.');
    await page.locator('#pg-key-paste').fill(platform.env['INFERENCE_API_KEY'] ?? '');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.getByTestId('reply-stats').waitFor({ timeout: 20_000 });
    expect(Number(await page.getByTestId('stat-completion').textContent())).toBe(12);
    expect(Number(await page.getByTestId('stat-prompt').textContent())).toBeGreaterThan(0);
    expect(await page.getByTestId('stat-ttft').textContent()).toMatch(/^\d+ ms$/);
    expect(await page.getByTestId('stat-tps').textContent()).toMatch(/^\d+(\.\d)?$/);
    expect(await page.getByTestId('stat-cost').textContent()).toMatch(/^\$\d/);
    expect(await page.getByTestId('stat-finish').textContent()).toContain('Stopped at max_tokens (12)');

    // After a reply the request tabs wrap inside their own box: the page never scrolls sideways.
    await page.getByRole('tab', { name: 'Request JSON' }).click();
    const json = JSON.parse((await page.getByTestId('request-json').textContent()) ?? '{}') as Record<string, unknown>;
    expect(json).toMatchObject({ model, stream: true, max_tokens: 12, temperature: 0.7 });
    // One user turn and the reply: the failed send is not repeated.
    expect((json['messages'] as { role: string }[]).map((m) => m.role)).toEqual(['system', 'user', 'assistant']);
    expect(await overflow(page)).toBeLessThanOrEqual(0);
    await page.getByRole('tab', { name: 'curl' }).click();
    expect(await page.getByTestId('request-curl').textContent()).toContain('/chat/completions');
    expect(await overflow(page)).toBeLessThanOrEqual(0);
    await screenshot(page, 'desktop-playground-curl-after-reply');
    await page.getByRole('tab', { name: 'Chat' }).click();

    // The playground key: created once, reused by a second tab of the same browser.
    await page.getByRole('radio', { name: 'Playground key' }).check();
    await page.getByRole('button', { name: 'Create the playground key' }).click();
    await page.getByRole('button', { name: 'Create the playground key' }).waitFor({ state: 'detached' });
    const second = await context.newPage();
    await second.goto(page.url());
    await second.getByRole('radio', { name: 'Playground key' }).waitFor();
    expect(await second.getByRole('radio', { name: 'Playground key' }).isChecked()).toBe(true);
    expect(await second.getByRole('button', { name: 'Create the playground key' }).count()).toBe(0);
    await second.close();

    await page.getByLabel('max_tokens').fill('400');
    await page.getByLabel('Message').fill('Tell me a long story about GPUs.');
    await page.getByRole('button', { name: 'Send' }).click();
    const reply = page.getByTestId('streaming-reply');
    await expect.poll(async () => ((await reply.textContent()) ?? '').replace('…', '').length, { timeout: 15_000 }).toBeGreaterThan(5);
    const early = (await reply.textContent()) ?? '';
    await expect.poll(async () => ((await reply.textContent()) ?? '').length, { timeout: 10_000 }).toBeGreaterThan(early.length);
    await page.getByRole('button', { name: 'Stop' }).click();
    expect(await page.getByTestId('reply-status').textContent()).toBe('Stopped.');
    await page.getByRole('button', { name: 'Send' }).waitFor();
    const kept = (await page.locator('.message.assistant p').last().textContent()) ?? '';
    expect(kept.length).toBeGreaterThan(0);
    // Cut short: far fewer words than the 400 tokens asked for.
    expect(kept.split(/\s+/).length).toBeLessThan(350);

    // A stream that carries an error event (the data plane's answer to a runtime failing mid-reply), or that ends
    // before [DONE], failed: its message is shown as an error, never "Finished".
    const origin = new URL(platform.consoleUrl).origin;
    for (const [body, shown] of [
      [
        'data: {"choices":[{"delta":{"content":"Partial"}}]}\n\ndata: {"error":{"message":"The model runtime failed to answer.","type":"server_error"}}\n\ndata: [DONE]\n\n',
        'The reply failed: The model runtime failed to answer.',
      ],
      ['data: {"choices":[{"delta":{"content":"Partial"}}]}\n\n', 'The reply failed: The stream ended before it was complete: the reply may be cut short.'],
    ] as const) {
      await page.route('**/chat/completions', (route) =>
        route.fulfill({ status: 200, headers: { 'content-type': 'text/event-stream', 'access-control-allow-origin': origin }, body }),
      );
      await page.getByLabel('Message').fill('Fail, please.');
      await page.getByRole('button', { name: 'Send' }).click();
      await expect.poll(() => page.getByTestId('reply-status').textContent()).toBe(shown);
      expect(await page.getByTestId('reply-status').getAttribute('role')).toBe('alert');
      expect(await page.getByTestId('reply-stats').count()).toBe(0);
      await page.unroute('**/chat/completions');
    }
    // Only the one playground key was minted.
    await page.getByRole('link', { name: 'API keys' }).click();
    await page.locator('tr', { hasText: 'playground' }).first().waitFor();
    expect(await page.locator('tr', { hasText: 'playground' }).count()).toBe(1);
  });

  test('a dedicated deployment at min 0 is woken from its page, runs, and its URL answers', async () => {
    await login(page);
    const entryName = 'DeepSeek-V3';
    // An admin sets the entry's GPU-hour price, and adds then removes an upstream whose key is never shown back.
    await page.goto(new URL('/admin?section=catalog', platform.consoleUrl).href);
    await page.getByRole('button', { name: `Edit ${entryName}` }).click();
    await page.getByLabel('Dedicated ($ per GPU-hour)').fill('2.125');
    await page.getByLabel('Runtime URL').fill('not a url');
    await page.getByRole('button', { name: 'Add upstream' }).click();
    await page.getByText('An absolute http(s) URL').waitFor();
    await page.getByLabel('Runtime URL').fill('http://127.0.0.1:9/v1');
    await page.getByLabel('API key (optional)').fill('sk-upstream-secret-e2e');
    await page.getByRole('button', { name: 'Add upstream' }).click();
    const upstream = page.locator('tr[data-upstream="http://127.0.0.1:9/v1"]');
    await upstream.getByText('set (hidden)').waitFor();
    expect(await page.content()).not.toContain('sk-upstream-secret-e2e');
    await screenshot(page, 'desktop-admin-catalog-edit');
    await upstream.getByRole('button', { name: /^Remove upstream/ }).click();
    await upstream.waitFor({ state: 'detached' });
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('button', { name: `Edit ${entryName}` }).waitFor();
    await page.goto(new URL(`/endpoints/${entryName}`, platform.consoleUrl).href);
    expect(await page.locator('.field-table div', { hasText: 'Dedicated Price' }).locator('dd').textContent()).toBe('$2.125 per GPU-hour');

    await page.getByRole('link', { name: 'Deployments' }).click();
    await page.getByLabel('Endpoint', { exact: true }).selectOption(entryName);
    // The price is shown where the user decides: the admin's, not the seed's $3.50, with the digits it has (one money
    // format on every page: the endpoint's page says the same).
    await expect.poll(() => page.locator('.price-line').textContent()).toContain('$2.125 per GPU-hour × 8 GPUs = $17.00 per replica-hour');
    expect(await page.getByLabel('Min replicas').inputValue()).toBe('0');
    await page.getByLabel('Scale to zero after (s)').fill('600');
    await page.getByRole('button', { name: 'Deploy', exact: true }).click();
    const article = page.locator(`article[data-deployment="${entryName}"]`);
    await article.waitFor();
    deploymentPath = new URL(page.url()).pathname;
    await page.locator(`article[data-deployment="${entryName}"][data-state="scaled_to_zero"]`).waitFor({ timeout: 30_000 });
    expect(await page.getByTestId('replicas').textContent()).toBe('0 / 0');
    const url = (await page.getByTestId('deployment-url').textContent()) ?? '';
    expect(url).toMatch(new RegExp(`/funccall/${platform.env['DEMO_TENANT']}/endpoints/${entryName}/v1$`));
    const model = (await page.getByTestId('deployment-model').textContent()) ?? '';
    expect(model).toMatch(new RegExp(`^[^/]+/${entryName}$`));

    // Wake, and once the control plane took the wake (the page says a replica is starting), send a request: it is
    // held through the cold start, then answered. (Sent before the wake is answered, the node's own wake for the
    // held request can win the race and be the scale event's reason.)
    await page.getByRole('button', { name: 'Wake' }).click();
    await page.getByRole('status').filter({ hasText: 'Waking: a replica is starting' }).waitFor();
    const res = await fetch(`${url}/chat/completions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${platform.env['INFERENCE_API_KEY']}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 16 }),
    });
    const body = (await res.json()) as { choices?: { message: { content: string } }[] };
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body.choices?.[0]?.message.content.length).toBeGreaterThan(0);
    expect(res.headers.get('x-cold-start')).toBe('true');
    await page.locator(`article[data-deployment="${entryName}"][data-state="running"]`).waitFor({ timeout: 60_000 });
    await expect.poll(() => page.getByTestId('replicas').textContent(), { timeout: 30_000 }).toBe('1 / 1');
    expect(await page.getByTestId('last-scale-reason').textContent()).toMatch(/wake/);
    // The node reports the cold start; the page lists it with its measured times.
    await page.getByTestId('cold-starts').locator('tbody tr').first().waitFor({ timeout: 20_000 });
    expect(await page.getByTestId('cold-p50').textContent()).toMatch(/^\d+\.\d\d s$/);

    // GPU time accrues while the replica lives; the autoscaling form saves and the page shows the new value.
    await expect.poll(async () => parseFloat((await page.getByTestId('gpu-hours').textContent()) ?? '0'), { timeout: 30_000 }).toBeGreaterThan(0);
    await expect.poll(async () => parseFloat(((await page.getByTestId('gpu-cost').textContent()) ?? '$0').slice(1)), { timeout: 15_000 }).toBeGreaterThan(0);
    await page.getByLabel('Max replicas').fill('2');
    await page.getByRole('button', { name: 'Save autoscaling' }).click();
    await page.getByText('Saved.').waitFor();
    await page.locator('.uplot-box canvas').first().waitFor();

    // Stopped, the playground points at the deployment's page to start it, not at a second deployment.
    await page.getByRole('button', { name: 'Stop', exact: true }).click();
    await page.locator(`article[data-deployment="${entryName}"][data-state="stopped"]`).waitFor({ timeout: 30_000 });
    await page.getByRole('link', { name: 'Open in the playground' }).click();
    const hint = page.locator('.hint', { hasText: 'is stopped' });
    await hint.waitFor();
    await hint.getByRole('link', { name: 'start it' }).click();
    await page.getByRole('button', { name: 'Start', exact: true }).click();
    await page.locator(`article[data-deployment="${entryName}"]:not([data-state="stopped"])`).waitFor({ timeout: 30_000 });

    // The endpoint's page opens the playground in the mode chosen there.
    await page.goto(new URL(`/endpoints/${entryName}`, platform.consoleUrl).href);
    await page.getByRole('tab', { name: 'Dedicated' }).click();
    expect(await page.getByRole('link', { name: 'Open in the playground' }).getAttribute('href')).toBe(`/playground?endpoint=${entryName}&mode=dedicated`);
    // A tenant deploys an entry once: the deploy form no longer offers it.
    await page.getByRole('link', { name: 'Deployments' }).click();
    await page.locator(`li[data-deployment="${entryName}"]`).waitFor();
    const options = await page.getByLabel('Endpoint', { exact: true }).locator('option').allTextContents();
    expect(options.length).toBeGreaterThan(0);
    expect(options).not.toContain(entryName);
  });

  test("an admin edits a tenant's rate limits and finds the change in the readable, filtered audit log", async () => {
    await login(page);
    await page.goto(new URL('/admin?section=tenants', platform.consoleUrl).href);
    const slug = platform.env['DEMO_TENANT'] ?? '';
    await page.getByRole('button', { name: `Edit the rate limits of ${slug}` }).click();
    await page.getByLabel('Requests / min').fill('abc');
    expect(await page.getByRole('button', { name: 'Save limits' }).isDisabled()).toBe(true);
    await page.getByLabel('Requests / min').fill('600000');
    await page.getByLabel('Tokens / min').fill('');
    await page.getByRole('button', { name: 'Save limits' }).click();
    await expect.poll(() => page.getByTestId(`limits-${slug}`).textContent()).toBe('Requests/min: 600,000 · Tokens/min: no limit');
    // The slug field's pattern is valid in the browser: a bad slug is caught before sending.
    await page.getByLabel('Slug').fill('Bad Slug');
    expect(await page.getByLabel('Slug').evaluate((el) => (el as HTMLInputElement).validity.patternMismatch)).toBe(true);
    await page.getByLabel('Slug').fill('good-slug-1');
    expect(await page.getByLabel('Slug').evaluate((el) => (el as HTMLInputElement).validity.valid)).toBe(true);

    await page.getByRole('tab', { name: 'Audit log' }).click();
    await page.getByLabel('Action').selectOption('tenant.set_limits');
    const item = page.locator('.audit-item').first();
    await item.getByText('tenant.set_limits').waitFor();
    await expect.poll(() => page.locator('.audit-item').count()).toBe(1);
    expect(await item.locator('.audit-detail').textContent()).toContain('600000');
    await page.getByLabel('Actor').fill('nobody-matches');
    await page.getByText('No audit entries match.').waitFor();
  });

  test('a session that ends (a logout, or revoked on the server) shows the logged-out console at once; a foreign next is refused', async () => {
    const logInHere = async () => {
      await page.getByLabel('Email').fill(platform.env['ADMIN_EMAIL'] ?? '');
      await page.getByLabel('Password').fill(platform.env['ADMIN_PASSWORD'] ?? '');
      await page.getByRole('button', { name: 'Log in' }).click();
    };
    await login(page);
    await page.getByRole('link', { name: 'Usage' }).click();
    await page.getByRole('heading', { level: 1, name: 'Usage' }).waitFor();
    // Logging out: the header and the pages change at once, in the same document (no reload); going back to a
    // protected page asks for the login, and the login leads back to it.
    await page.evaluate(() => Object.assign(window, { sameDocument: true }));
    await page.locator('.account button', { hasText: 'Log out' }).click();
    await page.locator('.account').getByRole('link', { name: 'Log in' }).waitFor({ timeout: 5000 });
    expect(await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'API keys' }).count()).toBe(0);
    await page.goBack();
    await page.waitForURL((u) => u.pathname === '/login' && u.searchParams.get('next') === '/usage', { timeout: 5000 });
    expect(await page.evaluate(() => 'sameDocument' in window)).toBe(true);
    expect(await page.getByTestId('login-reason').textContent()).toBe('Log in to continue.');
    await logInHere();
    await page.getByRole('heading', { level: 1, name: 'Usage' }).waitFor();

    // The session ends on the server (as an expiry or a logout in another browser would), the browser keeps its cookie.
    const cookie = (await context.cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
    const revoked = await fetch(new URL('/trpc/auth.logout', platform.consoleUrl), {
      method: 'POST',
      headers: { cookie, origin: new URL(platform.consoleUrl).origin, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(revoked.status, await revoked.text()).toBe(200);
    // The next call is refused: the login shows at once, in words meant for console users, and leads back.
    await page.getByRole('link', { name: 'API keys' }).click();
    await page.waitForURL((u) => u.pathname === '/login' && u.searchParams.get('next') === '/keys', { timeout: 5000 });
    expect(await page.getByTestId('login-reason').textContent()).toBe('Your session has ended. Log in to continue.');
    expect(await page.locator('.account button', { hasText: 'Log out' }).count()).toBe(0);
    expect(await page.locator('body').textContent()).not.toMatch(/admin token/i);
    await logInHere();
    await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();

    // A `next` that names another site (a backslash reads as a slash) goes to the catalog instead, never to a blank page.
    for (const next of ['/%5Cevil.example', '//evil.example', 'https://evil.example/', '/%09/evil.example']) {
      await page.goto(new URL(`/login?next=${next}`, platform.consoleUrl).href);
      await page.getByRole('heading', { level: 1, name: 'Model catalog' }).waitFor({ timeout: 5000 });
      expect(new URL(page.url()).origin + new URL(page.url()).pathname).toBe(new URL('/', platform.consoleUrl).href);
    }
  });

  // Issue 13 item 15: every page at desktop and phone width, no horizontal page scrolling, a screenshot of each.
  test('every page fits 1366 and 390 px wide without scrolling sideways', async () => {
    const model = platform.env['SHARED_MODEL'] ?? '';
    // A key with the longest name there may be: a wide table scrolls inside its own box, never the page.
    await login(page);
    await page.goto(new URL('/keys', platform.consoleUrl).href);
    await page.getByLabel('Key name').fill('k'.repeat(100));
    // A machine-speed double click is one key, not two.
    await page.getByRole('button', { name: 'Create key' }).dblclick();
    await page.getByTestId('new-key-secret').waitFor();
    await page.getByRole('button', { name: 'I have copied it' }).click();
    await page
      .locator('tr', { hasText: 'k'.repeat(100) })
      .first()
      .waitFor();
    await new Promise((r) => setTimeout(r, 500));
    await page.reload();
    await page
      .locator('tr', { hasText: 'k'.repeat(100) })
      .first()
      .waitFor();
    expect(await page.locator('tr', { hasText: 'k'.repeat(100) }).count()).toBe(1);
    // Wrong addresses: the 404 page, or a deployment that is not there said plainly (no "Try again" that cannot help).
    for (const wrong of ['/deployments/garbage', '/admin/anything']) {
      await page.goto(new URL(wrong, platform.consoleUrl).href);
      await page.getByRole('heading', { name: 'Page not found' }).waitFor();
    }
    await page.goto(new URL('/deployments/00000000-0000-4000-8000-000000000000', platform.consoleUrl).href);
    await page.getByRole('heading', { name: 'Deployment not found' }).waitFor();
    expect(await page.getByRole('button', { name: 'Try again' }).count()).toBe(0);
    const pages: [string, string][] = [
      ['catalog', '/'],
      ['endpoint', `/endpoints/${encodeURIComponent(model)}`],
      ['playground', `/playground?endpoint=${encodeURIComponent(model)}`],
      ['keys', '/keys'],
      ['deployments', '/deployments'],
      ...(deploymentPath ? [['deployment', deploymentPath] as [string, string]] : []),
      ['usage', '/usage'],
      ['admin-tokens', '/admin-tokens'],
      ['admin-catalog', '/admin?section=catalog'],
      ['admin-tenants', '/admin?section=tenants'],
      ['admin-audit', '/admin?section=audit'],
    ];
    const failures: string[] = [];
    for (const [label, width, height] of [
      ['desktop', 1366, 900],
      ['phone', 390, 844],
    ] as const) {
      const ctx = await browser.newContext({ viewport: { width, height }, deviceScaleFactor: 1, isMobile: label === 'phone', hasTouch: label === 'phone' });
      const p = await ctx.newPage();
      p.setDefaultTimeout(15_000);
      const consoleErrors: string[] = [];
      p.on('console', (m) => {
        if (m.type() === 'error') consoleErrors.push(m.text());
      });
      await p.goto(new URL('/login', platform.consoleUrl).href);
      await settle(p);
      await check(p, `${label}-login`, failures);
      await login(p);
      for (const [name, path] of pages) {
        await p.goto(new URL(path, platform.consoleUrl).href);
        await settle(p);
        await check(p, `${label}-${name}`, failures);
        if (name === 'keys') {
          // The long key name wraps in its cell: the table fits its box, with no scrollbar of its own.
          const extra = await p.evaluate(() => {
            const wrap = document.querySelector('.keys-table')?.closest('.table-wrap');
            return wrap ? wrap.scrollWidth - wrap.clientWidth : -1;
          });
          if (extra !== 0) failures.push(`${label}-keys: the keys table is ${extra}px wider than its box`);
        }
      }
      if (label === 'phone') {
        // The navigation is a menu: closed, the links are hidden; open, every one is visible.
        expect(await p.getByRole('link', { name: 'Usage' }).isVisible()).toBe(false);
        await p.getByRole('button', { name: 'Menu' }).click();
        for (const link of ['Catalog', 'Playground', 'API keys', 'Deployments', 'Usage', 'Admin tokens', 'Admin']) {
          expect(await p.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: link, exact: true }).isVisible()).toBe(true);
        }
        await check(p, 'phone-menu-open', failures);
        // Escape closes it, focus back on its button.
        await p.keyboard.press('Escape');
        await expect.poll(() => p.getByRole('link', { name: 'Usage' }).isVisible()).toBe(false);
        expect(await p.evaluate(() => document.activeElement?.className)).toBe('menu-button');
        await p.getByRole('button', { name: 'Menu' }).click();
        await p.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Catalog', exact: true }).click();
        // The catalog's filters fold behind one control.
        await p.locator('.entry-card').first().waitFor();
        expect(await p.locator('button[data-facet="tag"]').first().isVisible()).toBe(false);
        await p.getByRole('button', { name: /^Filters/ }).click();
        expect(await p.locator('button[data-facet="tag"]').first().isVisible()).toBe(true);
        await check(p, 'phone-catalog-filters-open', failures);
      }
      expect(
        consoleErrors.filter((e) => /pattern/i.test(e)),
        'no invalid pattern attribute',
      ).toEqual([]);
      await ctx.close();
    }
    expect(failures).toEqual([]);
  });
});
