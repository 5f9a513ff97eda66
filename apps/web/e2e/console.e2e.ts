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
  await p.getByRole('button', { name: 'Log out' }).waitFor();
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

    const tag = page.locator('button[data-facet="tag"]', { hasText: 'coding' }).first();
    const tagCount = Number(await tag.locator('.count').textContent());
    await tag.click();
    await page.waitForURL(/tag=coding/);
    await expect.poll(() => cards.count()).toBe(tagCount);
    expect(tagCount).toBeLessThan(total);
    for (const card of await cards.all()) expect(await card.locator('.tags').textContent()).toContain('coding');

    const first = cards.first().locator('h3 a');
    const entryName = (await first.textContent()) ?? '';
    await first.click();
    await page.getByRole('heading', { level: 1, name: entryName }).waitFor();
    for (const label of ['Provider', 'Parameter Size', 'GPU Count', 'Context Length', 'Concurrency', 'Cold Start TTFT', 'Token Price', 'Recommended Use Cases', 'Tags']) {
      await page.locator('.field-table dt', { hasText: label }).first().waitFor();
    }
    expect(await page.getByTestId('shared-api-key').textContent()).toBe('<INFERENCE_API_KEY>');
    expect(await page.getByTestId('shared-model').textContent()).toBe(entryName);
    expect(await page.getByTestId('shared-base-url').textContent()).toBe(platform.env['SHARED_BASE_URL']);
    expect(await page.getByTestId('shared-snippet-curl').textContent()).toContain('Authorization: Bearer <INFERENCE_API_KEY>');
    await page.getByRole('tab', { name: 'Python' }).first().click();
    expect(await page.getByTestId('shared-snippet-python').textContent()).toContain('api_key="<INFERENCE_API_KEY>"');
    expect(await page.getByRole('link', { name: 'Log in' }).first().isVisible()).toBe(true);
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
    await page.getByRole('button', { name: 'Create token' }).click();
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
    await row.waitFor();
    expect(await page.content()).not.toContain(secret);
    await row.getByRole('button', { name: `Revoke ${tokenName}` }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke token' }).click();
    await row.getByText('revoked').waitFor();
    const refused = await runCurl(curl);
    expect(refused.status, refused.body).toBe(401);
  });

  test('the playground streams a reply and the stop button ends it', async () => {
    await login(page);
    const model = platform.env['SHARED_MODEL'] ?? '';
    await page.goto(new URL(`/playground?endpoint=${encodeURIComponent(model)}`, platform.consoleUrl).href);
    await page.getByRole('button', { name: 'Create a playground key' }).click();
    await page.locator('#pg-key option').first().waitFor({ state: 'attached' });
    await page.getByLabel('max_tokens').fill('400');
    await page.getByLabel('Message').fill('Tell me a long story about GPUs.');

    await page.getByRole('tab', { name: 'Request JSON' }).click();
    const json = JSON.parse((await page.getByTestId('request-json').textContent()) ?? '{}') as Record<string, unknown>;
    expect(json).toMatchObject({ model, stream: true, max_tokens: 400, temperature: 0.7 });
    await page.getByRole('tab', { name: 'curl' }).click();
    expect(await page.getByTestId('request-curl').textContent()).toContain('/chat/completions');
    await page.getByRole('tab', { name: 'Chat' }).click();

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
  });

  test('a dedicated deployment is created, runs, and its URL answers', async () => {
    await login(page);
    await page.getByRole('link', { name: 'Deployments' }).click();
    const entryName = 'DeepSeek-V3';
    await page.getByLabel('Endpoint', { exact: true }).selectOption(entryName);
    await page.getByRole('button', { name: 'Deploy', exact: true }).click();
    const card = page.locator(`li[data-deployment="${entryName}"]`);
    await card.waitFor();
    await card.locator('[data-state="running"]').or(page.locator(`li[data-deployment="${entryName}"][data-state="running"]`)).first().waitFor({ timeout: 60_000 });
    const url = (await card.getByTestId('deployment-url').textContent()) ?? '';
    expect(url).toMatch(new RegExp(`/funccall/${platform.env['DEMO_TENANT']}/endpoints/${entryName}/v1$`));

    let res: Response | undefined;
    const deadline = Date.now() + 20_000;
    do {
      res = await fetch(`${url}/chat/completions`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${platform.env['INFERENCE_API_KEY']}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'hello' }], max_tokens: 16 }),
      });
      if (res.status === 200) break;
      await new Promise((r) => setTimeout(r, 500));
    } while (Date.now() < deadline);
    const body = (await res.json()) as { choices?: { message: { content: string } }[] };
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body.choices?.[0]?.message.content.length).toBeGreaterThan(0);
    await page.reload();
    await card.getByTestId('replicas').waitFor();
  });
});
