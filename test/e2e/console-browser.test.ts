/**
 * The console in a real browser (Chromium via playwright-core), through the real Envoy on the
 * rendered bundle: signing in with each demo key shows the right group, models, availability and
 * balance; a quoted, a `Bearer `-prefixed and a cut key each show their hint; the set-up table
 * shows the right Base URLs for the root and the alternate prefix; the doctor names the failing
 * rule for a repeated path, a wrong prefix, a wrong key and a misspelled model, and its
 * predictions are what Envoy really answers. axe-core finds no serious violation in any view; the
 * key never reaches a URL, the browser's storage, a screenshot or a log line.
 *
 * The screenshots of the three views are written to a temporary folder, or to docs/ with
 * `npm run screenshots` (MODELGATE_SCREENSHOTS=docs).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Page, Request } from 'playwright-core';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { DEMO_KEYS } from '../support/demo-keys';
import { describeBrowser, launchBrowser, type Browser } from '../support/browser';
import { startGateway, type Gateway } from '../support/gateway';

// DOM names used inside page.evaluate() callbacks, which run in the browser (the tsconfig has no DOM lib).
/* eslint-disable @typescript-eslint/no-explicit-any */
declare const document: any, window: any, localStorage: any, sessionStorage: any;
type HTMLElement = any;
type HTMLInputElement = any;
type Document = any;

const AXE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const SHOTS = process.env.MODELGATE_SCREENSHOTS
  ? resolve(__dirname, '..', '..', process.env.MODELGATE_SCREENSHOTS)
  : mkdtempSync(join(tmpdir(), 'modelgate-shots-'));
const ALL_KEYS = Object.values(DEMO_KEYS);

/** Every 12-character piece of every demo key (a fragment is as bad as the key). */
function keyPieces(): string[] {
  const out: string[] = [];
  for (const k of ALL_KEYS) for (let i = 0; i + 12 <= k.length; i += 3) out.push(k.slice(i, i + 12));
  return out;
}

describeBrowser('the console in Chromium, through Envoy', () => {
  let gw: Gateway;
  let browser: Browser;
  let page: Page;
  const requests: Request[] = [];
  const pageErrors: string[] = [];
  const cspViolations: string[] = [];

  beforeAll(async () => {
    gw = await startGateway();
    browser = await launchBrowser();
    page = await browser.context.newPage();
    page.on('request', (r) => requests.push(r));
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => {
      if (m.type() !== 'error') return;
      // A refused sign-in is an HTTP 401 the browser reports; a blocked inline script, the policy at work.
      if (/Failed to load resource: the server responded with a status of 40[13]/.test(m.text())) return;
      if (m.text().includes('Content Security Policy')) cspViolations.push(m.text());
      else pageErrors.push(m.text());
    });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await gw?.close();
    if (!process.env.MODELGATE_SCREENSHOTS) rmSync(SHOTS, { recursive: true, force: true });
  });

  async function open(): Promise<void> {
    await page.goto(`${gw.baseUrl}/console/`);
    await expect.poll(() => page.locator('#gateway-base').textContent()).toBe(gw.baseUrl);
  }

  async function signIn(key: string): Promise<'in' | string> {
    await open();
    await page.fill('#key', key);
    await page.click('#signin-button');
    await page.waitForFunction(
      () => !document.getElementById('access-view')!.hidden || document.getElementById('key-hint')!.textContent !== '',
    );
    return (await page.isVisible('#access-view')) ? 'in' : (await page.textContent('#key-hint'))!;
  }

  async function fact(name: string): Promise<string> {
    return (
      await page.locator('#key-facts dt', { hasText: name }).locator('xpath=following-sibling::dd[1]').innerText()
    ).trim();
  }

  async function modelRows(): Promise<Record<string, string[]>> {
    const rows = await page
      .locator('#models tbody tr')
      .evaluateAll((trs) => trs.map((tr) => [...tr.children].map((c) => (c as HTMLElement).innerText.trim())));
    return Object.fromEntries(rows.map((r) => [r[0], r.slice(1)]));
  }

  /** Serious or critical axe violations of the page as it is now. */
  async function axeViolations(): Promise<string[]> {
    await page.evaluate(AXE);
    const result = await page.evaluate(async () => {
      const r = await (
        window as unknown as {
          axe: {
            run(
              ctx: Document,
              o: object,
            ): Promise<{ violations: Array<{ id: string; impact: string; nodes: unknown[] }> }>;
          };
        }
      ).axe.run(document, { resultTypes: ['violations'] });
      return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length }));
    });
    return result
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id} (${v.impact}, ${v.nodes} nodes)`);
  }

  /** No key on screen, in any field, or in the browser's storage: what a screenshot could show. */
  async function expectNoKeyOnPage(): Promise<void> {
    const seen = await page.evaluate(() =>
      [
        document.body.innerText,
        ...[...document.querySelectorAll('input, textarea, select')].map((e) => (e as HTMLInputElement).value),
        String(localStorage.length),
        String(sessionStorage.length),
        document.cookie,
      ].join('\n'),
    );
    for (const piece of keyPieces()) expect(seen).not.toContain(piece);
    expect(seen).not.toContain('sk-mg-');
  }

  async function screenshot(name: string): Promise<void> {
    await expectNoKeyOnPage();
    await page.mouse.move(0, 0); // no hover state in the picture
    mkdirSync(SHOTS, { recursive: true });
    const file = join(SHOTS, `console-${name}.png`);
    await page.screenshot({ path: file, fullPage: true, animations: 'disabled', caret: 'hide' });
    expect(statSync(file).size).toBeGreaterThan(10_000);
  }

  test('the sign-in page passes axe without serious violations, and enforces its content security policy', async () => {
    await open();
    expect(await axeViolations()).toEqual([]);
    // An injected inline script does not run: script-src 'self' only.
    const ran = await page.evaluate(() => {
      const s = document.createElement('script');
      s.textContent = 'window.__inlineRan = true';
      document.body.append(s);
      return (window as unknown as { __inlineRan?: boolean }).__inlineRan === true;
    });
    expect(ran).toBe(false);
  }, 60_000);

  test("alice: group basic (available), her balance after one request, basic's models with styles, availability and endpoints, her recent usage", async () => {
    // One chat request through the gateway first: the meter debits it, the console shows it.
    const chat = await gw.send('POST', '/v1/chat/completions', {
      headers: [
        ['authorization', `Bearer ${DEMO_KEYS.alice}`],
        ['content-type', 'application/json'],
      ],
      body: JSON.stringify({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'hello from the console test' }],
      }),
    });
    expect(chat.status).toBe(200);
    const ledger = gw.modelgate.service!.store.meter!;
    for (let i = 0; i < 200 && (await ledger.usage({ keyId: 'alice', limit: 1 })).length === 0; i++)
      await new Promise((r) => setTimeout(r, 25));
    expect(await signIn(DEMO_KEYS.alice)).toBe('in');
    expect(await page.textContent('#who')).toBe('alice');
    expect(await fact('Group')).toMatch(/^basic\s*available$/);
    expect(Number(await fact('Balance'))).toBeLessThan(12.5);
    expect(Number(await fact('Balance'))).toBeGreaterThan(12.49);
    expect(await fact('Expires')).toBe('never');
    const rows = await modelRows();
    expect(Object.keys(rows)).toEqual([
      'gpt-4o-mini',
      'text-embedding-3-small',
      'claude-3-5-haiku-latest',
      'gemini-2.5-flash',
      'gemini-2.0-flash',
      'gpt-4.1-nano',
      'gpt-6.1-sol',
      'gpt-6.2-sol',
      'gpt-5.5',
      'claude-opus-5-5',
      'gemini-3.1-pro-preview',
      'gemini-3.8-flash',
      'gemini-3.5-flash-lite',
    ]);
    expect(rows['claude-3-5-haiku-latest']).toEqual([
      'messages',
      'yes',
      'POST /v1/messages',
      'GET /v1/models (anthropic-version)',
    ]);
    expect(await page.textContent('#models-base')).toBe(gw.baseUrl);
    expect(rows['gemini-2.0-flash'][1]).toBe('no: channel down');
    expect(rows['gpt-4o-mini'][0]).toBe('any');
    expect(await page.isHidden('#access-warning')).toBe(true);
    // The meter's ledger: the request above, with its tokens and cost.
    expect(await page.isVisible('#usage')).toBe(true);
    const usage = await page.$$eval('#usage-table tbody tr', (trs) =>
      trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent?.trim() ?? '')),
    );
    expect(usage.length).toBe(1);
    expect(usage[0]).toContain('gpt-4o-mini');
    expect(await axeViolations()).toEqual([]);
    await screenshot('access');
  }, 60_000);

  test('bob: group pro, unlimited; carol: balance 0 with its warning; frank: group paused, unavailable', async () => {
    expect(await signIn(DEMO_KEYS.bob)).toBe('in');
    expect(await fact('Group')).toMatch(/^pro\s*available$/);
    expect(await fact('Balance')).toBe('unlimited');
    expect(Object.keys(await modelRows())).toEqual([
      'gpt-4o',
      'gpt-4o-mini',
      'o3',
      'text-embedding-3-large',
      'claude-sonnet-4-5',
      'gemini-2.5-pro',
      'gemini-2.5-flash',
      'gpt-6.1-sol',
      'gpt-6.2-sol',
      'claude-opus-5-5',
      'gemini-3.1-pro-preview',
      'gemini-3.8-flash',
      'gemini-3.5-flash-lite',
    ]);

    expect(await signIn(DEMO_KEYS.carol)).toBe('in');
    expect(await fact('Group')).toMatch(/^basic\s*available$/);
    expect(await fact('Balance')).toMatch(/^0\s*insufficient$/);
    expect(await page.textContent('#access-warning')).toContain('403 balance_insufficient');

    expect(await signIn(DEMO_KEYS.frank)).toBe('in');
    expect(await fact('Group')).toMatch(/^paused\s*unavailable$/);
    expect(await page.textContent('#access-warning')).toContain('403 group_unavailable');
    expect(Object.keys(await modelRows())).toEqual(['gpt-4o-mini']);
  }, 60_000);

  test("dave (disabled) and erin (expired) are refused with the gateway's own hints", async () => {
    expect(await signIn(DEMO_KEYS.dave)).toMatch(/"dave" is disabled.*\(key_disabled\)/);
    expect(await page.getAttribute('#key', 'aria-invalid')).toBe('true');
    expect(await signIn(DEMO_KEYS.erin)).toMatch(/expired at 2025-01-01.*\(key_expired\)/);
  }, 60_000);

  test('a quoted key, a Bearer-prefixed key and a cut key each show their hint next to the field', async () => {
    expect(await signIn(`"${DEMO_KEYS.alice}"`)).toMatch(/paste the key without quotes \(key_malformed\)/);
    expect(await signIn(`\u201c${DEMO_KEYS.alice}\u201d`)).toMatch(/without quotes/);
    expect(await signIn(`Bearer ${DEMO_KEYS.alice}`)).toMatch(/paste the key without "Bearer "/);
    expect(await signIn(DEMO_KEYS.alice.slice(0, 38))).toMatch(
      /has 38 characters; a sk-mg- key has 46: it was cut when copied \(key_incomplete\)/,
    );
    // The hint is tied to the field for assistive technology.
    expect(await page.getAttribute('#key', 'aria-describedby')).toContain('key-hint');
    expect(await axeViolations()).toEqual([]);
  }, 60_000);

  test("the set-up table shows this gateway's Base URLs for the root and the alternate prefix", async () => {
    expect(await signIn(DEMO_KEYS.alice)).toBe('in');
    await page.click('#views button[data-view="setup"]');
    await page.waitForSelector('#setup-table tbody tr');
    const cells = await page
      .locator('#setup-table tbody tr')
      .evaluateAll((trs) =>
        Object.fromEntries(
          trs.map((tr) => [
            (tr as HTMLElement).dataset.kind,
            [...tr.querySelectorAll('td')].map((td) => td.innerText.trim()),
          ]),
        ),
      );
    const b = gw.baseUrl;
    expect(cells['coding-agent']).toEqual([b, `${b}/responses`, 'Authorization: Bearer <API_KEY>']);
    expect(cells['chat-sdk']).toEqual([`${b}/v1`, `${b}/v1/chat/completions`, 'Authorization: Bearer <API_KEY>']);
    expect(cells['messages-client'][0]).toBe(b);
    expect(cells['generative-cli'][0]).toBe(b);
    expect(cells['generative-http']).toEqual([
      `${b}/v1beta`,
      `${b}/v1beta/models/gemini-2.5-flash:generateContent`,
      'x-vendor-api-key: <API_KEY>',
    ]);
    expect(cells['alt-messages'][0]).toBe(`${b}/alt`);
    expect(cells['alt-generative-cli'][0]).toBe(`${b}/alt`);
    expect(cells['alt-chat'][0]).toBe(`${b}/alt/v1`);
    expect(cells['alt-generative-http'][0]).toBe(`${b}/alt/v1beta`);
    expect(Object.keys(cells)).toHaveLength(12);

    await page.selectOption('#snippet-kind', 'chat-sdk');
    const code = await page.locator('#snippets code').allInnerTexts();
    expect(code.some((c) => c.includes(`baseURL: "${b}/v1"`) && c.includes('apiKey: "<API_KEY>"'))).toBe(true);
    expect(await axeViolations()).toEqual([]);
    await screenshot('setup');

    // Revealing is the user's choice, and undone as easily.
    await page.check('#reveal');
    expect(await page.locator('#snippets code').first().innerText()).toContain(DEMO_KEYS.alice);
    await page.uncheck('#reveal');
    await expectNoKeyOnPage();
  }, 60_000);

  async function runDoctor(fields: {
    baseUrl: string;
    kind: string;
    model?: string;
    failingUrl?: string;
    status?: string;
  }): Promise<{ rule: string; title: string; text: string }> {
    await page.click('#views button[data-view="doctor"]');
    await page.fill('#d-base', fields.baseUrl);
    await page.selectOption('#d-kind', fields.kind);
    await page.fill('#d-model', fields.model ?? '');
    await page.fill('#d-url', fields.failingUrl ?? '');
    await page.selectOption('#d-status', fields.status ?? '');
    await page.evaluate(() => {
      document.getElementById('report')!.hidden = true;
    });
    await page.click('#doctor-form button[type="submit"]');
    await page.waitForSelector('#report:not([hidden])');
    const failing = page.locator('#report-steps li.fail');
    const found = (await failing.count()) === 1;
    return {
      rule: found ? ((await failing.getAttribute('data-rule')) ?? '') : '',
      title: (await page.textContent('#report-title'))!,
      text: found ? await failing.innerText() : '',
    };
  }

  test('the doctor names the failing rule: a repeated path, a wrong prefix, a wrong key, a misspelled model', async () => {
    expect(await signIn(DEMO_KEYS.alice)).toBe('in');
    const b = gw.baseUrl;

    const repeated = await runDoctor({ baseUrl: `${b}/v1`, kind: 'messages-client' });
    expect(repeated.rule).toBe('path');
    expect(repeated.title).toBe('One thing to change: §4.1 rule 4, §7 404');
    expect(repeated.text).toMatch(/path repeated.*\/v1\/v1\/messages/);
    expect(repeated.text).toContain(`Change: set the Base URL to ${b}`);
    expect(repeated.text).toContain('The gateway answers this with 404 path_repeated.');
    expect(await axeViolations()).toEqual([]);
    await screenshot('doctor');

    const prefix = await runDoctor({ baseUrl: b, kind: 'embeddings' });
    expect(prefix.rule).toBe('path');
    expect(prefix.text).toMatch(/wrong prefix/);
    expect(prefix.text).toContain(`Change: set the Base URL to ${b}/v1`);
    expect(prefix.text).toContain('404 prefix_wrong');

    const wrongKey = await runDoctor({
      baseUrl: `${b}/v1`,
      kind: 'chat-sdk',
      failingUrl: `${b}/v1/chat/completions`,
      status: '401',
    });
    expect(wrongKey.rule).toBe('headers');
    expect(wrongKey.title).toContain('§7 401');
    expect(wrongKey.text).toMatch(/got 401: it sends another key/);

    const typo = await runDoctor({ baseUrl: `${b}/v1`, kind: 'chat-sdk', model: 'gpt-4o-mni' });
    expect(typo.rule).toBe('model-name');
    expect(typo.title).toBe('One thing to change: §7 model check 3');
    expect(typo.text).toContain('did you mean "gpt-4o-mini"');

    const fine = await runDoctor({ baseUrl: `${b}/v1`, kind: 'chat-sdk', model: 'gpt-4o-mini' });
    expect(fine.title).toBe('Nothing to change');
    expect(fine.rule).toBe('');
  }, 90_000);

  test('what the doctor predicts for a wrong Base URL is what Envoy really answers', async () => {
    for (const [path, reason] of [
      ['/v1/v1/responses', 'path_repeated'],
      ['/embeddings', 'prefix_wrong'],
      ['/v1beta/v1beta/models/gemini-2.5-flash:generateContent', 'path_repeated'],
      ['/models/gemini-2.5-flash:generateContent', 'prefix_wrong'],
    ]) {
      const r = await gw.send('POST', path, {
        headers: [
          ['authorization', `Bearer ${DEMO_KEYS.alice}`],
          ['content-type', 'application/json'],
        ],
        body: '{}',
      });
      expect(r.status, path).toBe(404);
      expect(r.headers['x-modelgate-reason'], path).toBe(reason);
    }
  });

  test("the key went only in the console header: never in a URL, the browser's storage or a log line", async () => {
    expect(requests.length).toBeGreaterThan(20);
    for (const r of requests) {
      for (const piece of keyPieces()) expect(r.url()).not.toContain(piece);
      expect(new URL(r.url()).origin).toBe(gw.baseUrl);
    }
    const apiCalls = requests.filter((r) => r.url().includes('/console/api/') && !r.url().endsWith('/info'));
    expect(
      apiCalls.every(
        (r) => r.headers()['x-modelgate-console-key'] !== undefined && r.headers().authorization === undefined,
      ),
    ).toBe(true);
    expect(await page.evaluate(() => [localStorage.length, sessionStorage.length, document.cookie])).toEqual([
      0,
      0,
      '',
    ]);
    expect(pageErrors).toEqual([]);
    // Only the inline script the first test injected on purpose was blocked: the page itself needs no exception.
    expect(cspViolations).toHaveLength(1);

    // Through Envoy, with ext_authz off on the console's route.
    // (The access log shows no path modelgate was not asked about: console lines are found by route.)
    const consoleLines = (await gw.accessLogWhen((log) => log.filter((l) => l.route === 'console').length > 20)).filter(
      (l) => l.route === 'console',
    );
    expect(consoleLines.length).toBeGreaterThan(20);
    for (const l of consoleLines) {
      expect(l.path ?? null).toBeNull();
      expect(l.upstream_cluster).toBe('modelgate_http');
      expect(l.decision ?? null).toBeNull();
    }
    const logs = gw.modelgate.logLines().join('\n');
    for (const piece of keyPieces()) expect(logs).not.toContain(piece);
    const failed = gw.modelgate
      .logLines()
      .map((l) => JSON.parse(l))
      .filter((l) => l.msg === 'console' && l.status === 401);
    expect(failed.map((l) => l.reason)).toEqual(
      expect.arrayContaining(['key_disabled', 'key_expired', 'key_malformed', 'key_incomplete']),
    );
    expect(failed.every((l) => l.level === 40)).toBe(true);
  });
});
