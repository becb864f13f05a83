/**
 * The web console (`/ui`) and the HTTP API behind it (`/api/sessions`), with a real gateway, a
 * real worker, the local model server and Debian's chromium driven by playwright-core; the queue
 * dashboard (`/admin/queues`) in the same browser, on a gateway of its own (its HTTP side is
 * test/dashboard.test.ts). With `HERMES_SCREENSHOTS=1` the browser tests write the screenshots of
 * docs/CONSOLE.md (docs/images/console-*.png); without it they take none (test/support/chromium.ts).
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { openCronApi } from '../cli/gateway-cron-api.ts';
import { startGateway, type Gateway } from '../gateway/gateway-process.ts';
import { createLogger } from '../scheduler/logger.ts';
import { cronStoreFor } from '../scheduler/services.ts';
import { cronJobFixture, loopFixture } from './support/record-fixtures.ts';
import { launchChromium, screenshot, SCREENSHOTS } from './support/chromium.ts';
import { testEnv, type TestEnv } from './support/env.ts';
import { startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';
import { clients, ROOT, runHermes, startWorker, waitForEvents, type TestClients } from './support/stack.ts';

const KEY = 'console-key-4321';
const IMAGES = join(ROOT, 'docs', 'images');
const XSS = '<script>alert(1)</script><img src=x onerror="window.__xss=1">';
const basic = (password: string) => ({ authorization: `Basic ${Buffer.from(`hermes:${password}`).toString('base64')}` });

let env: TestEnv;
let model: FakeOpenAI;
let gw: Gateway;
let c: TestClients;
let browser: Browser;
/** The browser tests' one page, which each of them navigates (test/support/chromium.ts says why). */
let page: Page;
/** Errors the page reported (console errors, uncaught exceptions), in order. */
const browserErrors: string[] = [];
/** What the browser refused under a page's Content-Security-Policy (gateway/http/security-headers.ts). */
const cspRefusals = () => browserErrors.filter((e) => /Content Security Policy|Refused to/i.test(e));
const cleanups: Array<() => unknown> = [];

beforeAll(async () => {
  model = await startFakeOpenAI();
  // The model answers a message with "pong: <its text>" and a tick with "tick seen".
  model.respond((req) => {
    const last = req.messages.at(-1)!.content;
    return /wakeup #/i.test(last) ? 'tick seen' : `pong: ${last}`;
  });
  env = testEnv({
    'api_server.port': 0,
    'api_server.key': KEY,
    'agent.base_url': model.baseUrl,
    'agent.api_key': 'test',
    'agent.max_retries': 0,
    'agent.models': { cheap: { model: 'cheap-model' } },
    'tools.commands': {
      whoami: { command: 'echo operator', description: 'who runs the worker' },
      greet: { command: 'echo hello', description: 'say hello' },
    },
    'tools.allow_from': { whoami: ['cli'], greet: ['web'] },
  });
  const log = createLogger({ level: env.config.log_level });
  const cron = await openCronApi(env.config, env.redisUrl, log);
  gw = await startGateway({ config: env.config, redisUrl: env.redisUrl, log, cron: cron.api });
  c = clients(env);
  const worker = await startWorker(env);
  browser = await launchChromium();
  const context = await browser.newContext({
    httpCredentials: { username: 'hermes', password: KEY },
    viewport: { width: 1280, height: 900 },
  });
  page = await context.newPage();
  page.on('dialog', (d) => {
    throw new Error(`unexpected dialog: ${d.message()}`);
  });
  // What the browser refused or failed to run, for the Content-Security-Policy checks below.
  page.on('console', (m) => {
    if (m.type() === 'error') browserErrors.push(m.text());
  });
  page.on('pageerror', (err) => browserErrors.push(err.message));
  cleanups.push(
    () => model.close(),
    () => env.cleanup(),
    () => cron.close(),
    () => gw.close(),
    () => c.close(),
    () => worker.drain(),
    () => browser.close(),
    () => context.close(),
  );
  if (SCREENSHOTS) mkdirSync(IMAGES, { recursive: true });
}, 90_000);

afterAll(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

/** Read a session's event stream over plain HTTP until an event matches. */
async function readStreamUntil(
  url: string,
  match: (type: string, data: Record<string, unknown>) => boolean,
  timeoutMs = 20_000,
): Promise<Record<string, unknown>> {
  const ctrl = new AbortController();
  const timer = setTimeout(() => ctrl.abort(), timeoutMs);
  try {
    const res = await fetch(url, { headers: { authorization: `Bearer ${KEY}` }, signal: ctrl.signal });
    expect(res.status).toBe(200);
    const decoder = new TextDecoder();
    let buffer = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const type = /^event: (.*)$/m.exec(frame)?.[1];
        const data = frame
          .split('\n')
          .filter((l) => l.startsWith('data: '))
          .map((l) => l.slice(6))
          .join('\n');
        if (type && data) {
          const parsed = JSON.parse(data) as Record<string, unknown>;
          if (match(type, parsed)) return parsed;
        }
      }
    }
    throw new Error('stream ended');
  } finally {
    clearTimeout(timer);
    ctrl.abort();
  }
}

describe('/api/sessions', () => {
  it('POST /api/sessions/:id/messages from a plain HTTP client: 202 with its id, the reply on the event stream; web input gets the tools allowed from web only', async () => {
    const res = await fetch(`${gw.httpAddress.url}/api/sessions/curl-1/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'hello from curl' }),
    });
    expect(res.status).toBe(202);
    const body = (await res.json()) as { id: string; occurrence_id: string; events_url: string };
    expect(body.id).toMatch(/^web-/);
    const reply = await readStreamUntil(
      `${gw.httpAddress.url}${body.events_url}`,
      // The stream's data are snake_case, as every answer of `/api` (docs/GATEWAY.md, "One casing").
      (type, d) => type === 'reply' && d.occurrence_id === body.occurrence_id,
    );
    expect(reply.text).toBe('pong: hello from curl');
    const request = model.requests.find((r) => r.messages.at(-1)!.content === 'hello from curl')!;
    expect(request.tools).toContain('greet');
    expect(request.tools).not.toContain('whoami');
    const transcript = (await (
      await fetch(`${gw.httpAddress.url}/api/sessions/curl-1/transcript?limit=1`, { headers: { authorization: `Bearer ${KEY}` } })
    ).json()) as { total: number; data: Array<{ index: number; role: string; surface: string }>; before: number | null };
    expect(transcript.total).toBe(2);
    expect(transcript.data).toEqual([expect.objectContaining({ index: 1, role: 'assistant', surface: 'web' })]);
    expect(transcript.before).toBe(1);
    const list = (await (await fetch(`${gw.httpAddress.url}/api/sessions`, { headers: { authorization: `Bearer ${KEY}` } })).json()) as {
      data: Array<{ id: string; last_reply: string }>;
    };
    expect(list.data.find((s) => s.id === 'curl-1')?.last_reply).toBe('pong: hello from curl');
  });

  it('a web message can never create a command turn: /loop … --run is refused and sets nothing', async () => {
    const res = await fetch(`${gw.httpAddress.url}/api/sessions/curl-2/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ text: "/loop 5m disk --run 'df -h'" }),
    });
    expect(res.status).toBe(202);
    const notice = await waitForEvents(c, 'curl-2', 'notice', 1);
    expect(String(notice[0]!.data.text)).toMatch(/--run/);
    expect(await c.loops.get('curl-2', 'loop')).toBeNull();
  });
});

describe('/ui access', () => {
  it('answers 401 without credentials and with a wrong key; with the key, pages carry a CSP without inline script', async () => {
    for (const path of ['/ui', '/ui/sessions/main', '/ui/cron/new', '/ui/assets/console.js']) {
      expect((await fetch(`${gw.httpAddress.url}${path}`)).status).toBe(401);
      expect((await fetch(`${gw.httpAddress.url}${path}`, { headers: basic('wrong') })).status).toBe(401);
    }
    const ok = await fetch(`${gw.httpAddress.url}/ui`, { headers: basic(KEY) });
    expect(ok.status).toBe(200);
    const csp = ok.headers.get('content-security-policy')!;
    expect(csp).toMatch(/script-src 'self'/);
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval/);
    expect(await ok.text()).not.toMatch(/<script>(?!<\/script>)|<script\s[^>]*>[^<]+<\/script>/);
  });

  it('refuses a state-changing POST from a foreign Origin, and one without the console header; nothing changes', async () => {
    await c.schedules.set(
      'guarded',
      'loop',
      { prompt: 'check', intervalSeconds: 3600, times: null, until: null, notes: [] },
      { origin: { surface: 'cli' }, runner: { kind: 'agent' } },
    );
    const url = `${gw.httpAddress.url}/ui/sessions/guarded/loop/pause`;
    const foreign = await fetch(url, { method: 'POST', headers: { ...basic(KEY), 'hx-request': 'true', origin: 'http://evil.example' } });
    expect(foreign.status).toBe(403);
    const noHeader = await fetch(url, { method: 'POST', headers: { ...basic(KEY), origin: gw.httpAddress.url } });
    expect(noHeader.status).toBe(403);
    const message = await fetch(`${gw.httpAddress.url}/ui/sessions/guarded/messages`, {
      method: 'POST',
      headers: { ...basic(KEY), origin: 'http://evil.example', 'hx-request': 'true', 'content-type': 'application/x-www-form-urlencoded' },
      body: 'text=hi',
    });
    expect(message.status).toBe(403);
    expect((await c.loops.get('guarded', 'loop'))!.status).toBe('active');
    const same = await fetch(url, { method: 'POST', headers: { ...basic(KEY), 'hx-request': 'true', origin: gw.httpAddress.url } });
    expect(same.status).toBe(200);
    expect((await c.loops.get('guarded', 'loop'))!.status).toBe('paused');
  });
});

describe('/ui in chromium', () => {
  it('the overview lists a loop and a cron job with its next run', async () => {
    await c.schedules.set(
      'ci-watch',
      'loop',
      { prompt: 'watch the CI build and tell me when it is green', intervalSeconds: 600, times: null, until: null, notes: [] },
      { origin: { surface: 'cli' }, runner: { kind: 'agent' } },
    );
    await waitForEvents(c, 'ci-watch', 'reply', 1);
    const cron = await openCronApi(env.config, env.redisUrl, createLogger({ level: 'silent' }));
    cleanups.push(() => cron.close());
    await cron.api.add({ schedule: 'every 2h', prompt: 'summarise open pull requests', name: 'pr-digest', tz: 'Europe/Berlin' });
    expect((await page.goto(`${gw.httpAddress.url}/ui`))?.status()).toBe(200);
    const loopRow = page.locator('tr[data-session="ci-watch"]');
    await expect.poll(() => loopRow.textContent()).toMatch(/active · every 10m · next in \d+m/);
    expect(await loopRow.textContent()).toMatch(/tick seen/);
    const jobRow = page.locator('tr', { hasText: 'pr-digest' });
    expect(await jobRow.textContent()).toMatch(/every 2h/);
    expect(await jobRow.locator('time.countdown').textContent()).toMatch(/^in (1h ?59m|2h)/);
    await page.locator('#overview').waitFor();
    await screenshot(page, join(IMAGES, 'console-overview.png'));
  });

  it('a message typed on the session page gets its reply without a reload; a tick shows up live; Pause pauses the loop (hermes status says so)', async () => {
    await page.goto(`${gw.httpAddress.url}/ui/sessions/web-chat`);
    await page.waitForFunction(() => (globalThis as unknown as { htmx?: unknown }).htmx !== undefined);
    const box = page.locator('#send textarea');
    await box.fill('first line');
    await box.press('Shift+Enter');
    await box.type('second line');
    await box.press('Enter');
    await page.locator('#events .ev-reply', { hasText: 'pong: first line\nsecond line' }).waitFor({ timeout: 20_000 });
    await expect.poll(() => page.locator('#events .ev-user').first().textContent()).toMatch(/you \(web\)first line\nsecond line/);
    // A loop set in the chat box: its first tick fires at once and appears live, with its number (claimed
    // ahead of its due time by the worker's default `worker.claim_lead_ms`: worker/loop/claim-ahead.ts).
    await page.locator('#send textarea').fill('/loop 10m check the deploy');
    await page.locator('#send textarea').press('Enter');
    await page.locator('#events .ev-tick', { hasText: 'loop tick #1 claimed · starts at its due time' }).waitFor({ timeout: 20_000 });
    await page.locator('#events .ev-reply', { hasText: 'tick seen' }).waitFor({ timeout: 20_000 });
    await page.locator('#schedules tr[data-kind="loop"] .state-active').waitFor();
    await screenshot(page, join(IMAGES, 'console-session.png'));
    await page.locator('button[data-action="loop-pause"]').click();
    await page.locator('#schedules tr[data-kind="loop"] .state-paused').waitFor({ timeout: 10_000 });
    expect((await c.loops.get('web-chat', 'loop'))!.status).toBe('paused');
    // The tools' and models' records of this file's config cannot be spelled as environment variables: the CLI needs none.
    const childEnv = Object.fromEntries(
      Object.entries(env.childEnv).filter(([k]) => !k.startsWith('HERMES_TOOLS_') && k !== 'HERMES_AGENT_MODELS'),
    );
    const status = await runHermes({ ...env, childEnv }, ['status']);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/web-chat[^\n]*paused/);
  });

  it('the transcript panel shows a sent message and its reply without a reload', async () => {
    await page.goto(`${gw.httpAddress.url}/ui/sessions/transcript-live`);
    await page.waitForFunction(() => (globalThis as unknown as { htmx?: unknown }).htmx !== undefined);
    const transcript = page.locator('section', { has: page.locator('h2', { hasText: /^Transcript$/ }) });
    expect(await transcript.textContent()).toContain('No messages yet.');
    // Marks this document: a reload would lose it.
    await page.evaluate(() => ((globalThis as unknown as { __sameDocument?: boolean }).__sameDocument = true));
    await page.locator('#send textarea').fill('what is in the transcript?');
    await page.locator('#send textarea').press('Enter');
    await transcript.locator('.ev-reply', { hasText: 'pong: what is in the transcript?' }).waitFor({ timeout: 20_000 });
    expect(await transcript.locator('.ev-user pre').allTextContents()).toEqual(['what is in the transcript?']);
    // A second turn is added after the first, each message once.
    await page.locator('#send textarea').fill('and now?');
    await page.locator('#send textarea').press('Enter');
    await transcript.locator('.ev-reply', { hasText: 'pong: and now?' }).waitFor({ timeout: 20_000 });
    expect(await transcript.locator('li pre').allTextContents()).toEqual([
      'what is in the transcript?',
      'pong: what is in the transcript?',
      'and now?',
      'pong: and now?',
    ]);
    expect(await page.evaluate(() => (globalThis as unknown as { __sameDocument?: boolean }).__sameDocument)).toBe(true);
  });

  it("the session page's form sets a loop and a heartbeat with the cadence previewed while typing, on the surface web (its tools, never a command turn); Stop stops the loop", async () => {
    await page.goto(`${gw.httpAddress.url}/ui/sessions/form-set`);
    await page.waitForFunction(() => (globalThis as unknown as { htmx?: unknown }).htmx !== undefined);
    const form = page.locator('#schedule-form');
    const shownAt = Date.now();
    await form.locator('input[name=interval]').pressSequentially('10m');
    await form.locator('#preview .description', { hasText: 'every 10m, the first tick now' }).waitFor({ timeout: 10_000 });
    const fires = (await form.locator('#preview .fires li .reason').allTextContents()).map((t) => Date.parse(t));
    expect(fires).toHaveLength(5);
    expect(fires[0]).toBeGreaterThanOrEqual(shownAt - 1000);
    for (let i = 1; i < fires.length; i++) expect(fires[i]! - fires[i - 1]!).toBe(600_000);
    // A heartbeat below its minimum: the preview and the set refuse it alike, and nothing is set.
    await form.locator('select[name=kind]').selectOption('heartbeat');
    await form.locator('input[name=interval]').fill('30s');
    const belowMinimum = 'The interval 30s is below the heartbeat minimum of 1m (heartbeat.min_interval_seconds).';
    await form.locator('#preview .error', { hasText: belowMinimum }).waitFor({ timeout: 10_000 });
    await form.locator('textarea[name=prompt]').fill('report on the deploy');
    await form.locator('button[type=submit]').click();
    await page.locator('#schedule-form > .error', { hasText: belowMinimum }).waitFor({ timeout: 10_000 });
    expect(await c.loops.get('form-set', 'heartbeat')).toBeNull();
    // A loop whose prompt asks for a command: it stays words in an agent turn's prompt.
    const prompt = "form-probe: check the disk --run 'df -h'";
    await page.locator('#schedule-form select[name=kind]').selectOption('loop');
    await page.locator('#schedule-form input[name=interval]').fill('10m');
    await page.locator('#schedule-form textarea[name=prompt]').fill(prompt);
    await page.locator('#schedule-form select[name=overlap]').selectOption('cancel_other');
    await page.locator('#schedule-form button[type=submit]').click();
    await page.locator('#schedules tr[data-kind="loop"] .state-active').waitFor({ timeout: 10_000 });
    expect(await page.locator('#schedules tr[data-kind="loop"]').textContent()).toMatch(/active · every 10m · /);
    expect(await c.loops.get('form-set', 'loop')).toMatchObject({
      prompt,
      overlap: 'cancel_other',
      intervalSeconds: 600,
      runner: { kind: 'agent' },
      origin: { surface: 'web' },
    });
    // Its tick is an agent turn with the tools allowed from the web.
    await waitForEvents(c, 'form-set', 'reply', 1);
    const tick = model.requests.find((r) => r.messages.some((m) => m.content.includes('form-probe')))!;
    expect(tick.tools).toContain('greet');
    expect(tick.tools).not.toContain('whoami');
    // The form is empty again; a heartbeat set from it.
    expect(await page.locator('#schedule-form textarea[name=prompt]').inputValue()).toBe('');
    await page.locator('#schedule-form select[name=kind]').selectOption('heartbeat');
    await page.locator('#schedule-form input[name=interval]').fill('every 30 minutes');
    await page.locator('#schedule-form #preview .description', { hasText: 'every 30m, the first tick now' }).waitFor({ timeout: 10_000 });
    await page.locator('#schedule-form textarea[name=prompt]').fill('report on the deploy');
    await page.locator('#schedule-form button[type=submit]').click();
    await page.locator('#schedules tr[data-kind="heartbeat"] .state-active').waitFor({ timeout: 10_000 });
    expect(await c.loops.get('form-set', 'heartbeat')).toMatchObject({ intervalSeconds: 1800, origin: { surface: 'web' } });
    await page.locator('button[data-action="loop-stop"]').click();
    await page.locator('#schedules tr[data-kind="loop"] .none').waitFor({ timeout: 10_000 });
    expect(await c.loops.get('form-set', 'loop')).toMatchObject({ status: 'finished', statusReason: 'stopped by user' });
  });

  it('a prompt or message holding <script> and <img onerror> renders as text', async () => {
    await c.schedules.set(
      'xss',
      'loop',
      { prompt: XSS, intervalSeconds: 3600, times: null, until: null, notes: [] },
      { origin: { surface: 'cli' }, runner: { kind: 'agent' } },
    );
    await page.goto(`${gw.httpAddress.url}/ui/sessions/xss`);
    await page.waitForFunction(() => (globalThis as unknown as { htmx?: unknown }).htmx !== undefined);
    await page.locator('#send textarea').fill(XSS);
    await page.locator('#send textarea').press('Enter');
    await page.locator('#events .ev-reply', { hasText: `pong: ${XSS}` }).waitFor({ timeout: 20_000 });
    expect(await page.locator('#schedules').textContent()).toContain(XSS);
    expect(await page.locator('#events .ev-user pre').first().textContent()).toBe(XSS);
    await page.goto(`${gw.httpAddress.url}/ui`);
    expect(await page.locator('tr[data-session="xss"]').textContent()).toContain(XSS);
    expect(await page.locator('img').count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as unknown as { __xss?: number }).__xss)).toBeUndefined();
  });

  it('the cron form previews "weekdays at 9am" in Europe/Berlin while typing and creates the job', async () => {
    await page.goto(`${gw.httpAddress.url}/ui/cron/new`);
    await page.waitForFunction(() => (globalThis as unknown as { htmx?: unknown }).htmx !== undefined);
    await page.locator('input[name=tz]').fill('Europe/Berlin');
    await page.locator('input[name=schedule]').pressSequentially('weekdays at 9am');
    await page.locator('#preview .description', { hasText: '0 9 * * 1-5' }).waitFor({ timeout: 10_000 });
    expect(await page.locator('#preview .description').textContent()).toMatch(
      /weekdays at 09:00 = 0 9 \* \* 1-5 · At 09:00, Monday through Friday \(Europe\/Berlin\)/,
    );
    const fires = await page.locator('#preview .fires li .reason').allTextContents();
    expect(fires).toHaveLength(10);
    const berlin = new Intl.DateTimeFormat('en-GB', {
      timeZone: 'Europe/Berlin',
      weekday: 'short',
      hour: '2-digit',
      minute: '2-digit',
      hour12: false,
    });
    let previous = Date.now();
    for (const iso of fires) {
      const t = Date.parse(iso);
      expect(t).toBeGreaterThan(previous);
      previous = t;
      const parts = Object.fromEntries(berlin.formatToParts(t).map((p) => [p.type, p.value]));
      expect(`${parts.hour}:${parts.minute}`).toBe('09:00');
      expect(['Mon', 'Tue', 'Wed', 'Thu', 'Fri']).toContain(parts.weekday);
    }
    // Ten weekdays in a row, none left out: a day between fires, three from a Friday (an hour more or less across a DST change).
    for (let i = 1; i < fires.length; i++) {
      const days = Math.round((Date.parse(fires[i]!) - Date.parse(fires[i - 1]!)) / 86_400_000);
      const weekday = Object.fromEntries(berlin.formatToParts(Date.parse(fires[i - 1]!)).map((p) => [p.type, p.value])).weekday;
      expect(days).toBe(weekday === 'Fri' ? 3 : 1);
    }
    await page.locator('textarea[name=prompt]').fill('Check CI on main and list PRs waiting for review');
    await page.locator('input[name=name]').fill('standup');
    await page.locator('input[name=deliver]').fill('telegram:42, local');
    await screenshot(page, join(IMAGES, 'console-cron-new.png'));
    await page.locator('#cron-form button[type=submit]').click();
    await page.waitForURL(/\/ui\/cron\/[0-9a-f]{12}$/, { timeout: 10_000 });
    expect(await page.locator('h2', { hasText: 'Next 10 fire times (Europe/Berlin)' }).count()).toBe(1);
    const shown = await page.locator('ol.fires li .reason').allTextContents();
    expect(shown).toEqual(fires);
    // Both targets, and what this gateway (no Telegram bot) cannot send; the edit form holds both again.
    expect(await page.locator('dl.job dd', { hasText: 'telegram:42' }).textContent()).toBe('telegram:42, local');
    expect(await page.locator('#job .warning').allTextContents()).toEqual([
      'This gateway has no Telegram bot token (TELEGRAM_BOT_TOKEN or telegram.bot_token): deliveries to telegram:42 stay queued until a gateway with one runs.',
    ]);
    await screenshot(page, join(IMAGES, 'console-cron.png'));
    await page.locator('#job a.button', { hasText: 'Edit' }).click();
    await page.waitForURL(/\/edit$/, { timeout: 10_000 });
    expect(await page.locator('input[name=deliver]').inputValue()).toBe('telegram:42, local');
    const cron = await openCronApi(env.config, env.redisUrl, createLogger({ level: 'silent' }));
    cleanups.push(() => cron.close());
    const jobs = (await cron.api.list({ limit: 500 }, {})).data as Array<{ name: string; tz: string; schedule: { expression: string } }>;
    expect(jobs.find((j) => j.name === 'standup')).toMatchObject({ tz: 'Europe/Berlin', schedule: { expression: '0 9 * * 1-5' } });
  });

  it('the cron form sets notify, overlap, jitter, watch, model and max tokens through the cron service; bad input creates nothing and says why', async () => {
    const cron = await openCronApi(env.config, env.redisUrl, createLogger({ level: 'silent' }));
    cleanups.push(() => cron.close());
    type JobView = {
      id: string;
      name: string;
      notify: string;
      overlap: string;
      jitter_seconds: number;
      watch: string | null;
      model: string | null;
      max_tokens: number | null;
    };
    const named = async (name: string) =>
      ((await cron.api.list({ limit: 500 }, { all: true })).data as JobView[]).filter((j) => j.name === name);
    await page.goto(`${gw.httpAddress.url}/ui/cron/new`);
    await page.waitForFunction(() => (globalThis as unknown as { htmx?: unknown }).htmx !== undefined);
    await page.locator('input[name=schedule]').fill('every 1h');
    await page.locator('#preview .description', { hasText: 'every 1h' }).waitFor({ timeout: 10_000 });
    await page.locator('textarea[name=prompt]').fill('summarise the error log');
    await page.locator('input[name=name]').fill('log-digest');
    await page.locator('select[name=notify]').selectOption('always');
    await page.locator('select[name=overlap]').selectOption('buffer_all');
    const bad: Array<[field: string, value: string, error: RegExp]> = [
      ['max_tokens', 'lots', /`max_tokens` needs a positive whole number of tokens up to [\d,]+; got "lots"\./],
      ['jitter', '2h', /`jitter` 2h must be less than 1h, the shortest time between two fires of "every 1h"\./],
      ['model', 'nosuch', /^`model` "nosuch" is not a declared model; declared: cheap\.$/],
      // A watch the runs could not use: `whoami` is allowed from the CLI only.
      ['watch', 'whoami', /^`watch` whoami: the tool is not allowed from api \(tools\.allow_from\.whoami\)\.$/],
    ];
    for (const [field, value, error] of bad) {
      await page.locator(`input[name=${field}]`).fill(value);
      await page.locator('#cron-form button[type=submit]').click();
      await expect.poll(() => page.locator('#form-error').textContent(), { timeout: 10_000 }).toMatch(error);
      expect(await named('log-digest')).toEqual([]);
      await page.locator(`input[name=${field}]`).fill('');
    }
    await page.locator('input[name=jitter]').fill('5m');
    await page.locator('input[name=model]').fill('cheap');
    await page.locator('input[name=max_tokens]').fill('200000');
    await page.locator('#cron-form button[type=submit]').click();
    await page.waitForURL(/\/ui\/cron\/[0-9a-f]{12}$/, { timeout: 10_000 });
    const [job] = await named('log-digest');
    expect(job).toMatchObject({
      notify: 'always',
      overlap: 'buffer_all',
      jitter_seconds: 300,
      watch: null,
      model: 'cheap',
      max_tokens: 200_000,
    });
    expect(await page.locator('#job dd.run-settings').textContent()).toMatch(
      /^notify always · overlap buffer_all · jitter 5m \(this job: \+(\d+m ?)?(\d+s)?\) · model cheap · max 200,000 tokens$/,
    );
    // The edit form holds them; emptied, the jitter, the model and the budget are removed.
    await page.locator('#job a.button', { hasText: 'Edit' }).click();
    await page.waitForURL(/\/edit$/, { timeout: 10_000 });
    expect(await page.locator('select[name=notify]').inputValue()).toBe('always');
    expect(await page.locator('select[name=overlap]').inputValue()).toBe('buffer_all');
    expect(await page.locator('input[name=jitter]').inputValue()).toBe('5m');
    expect(await page.locator('input[name=model]').inputValue()).toBe('cheap');
    expect(await page.locator('input[name=max_tokens]').inputValue()).toBe('200000');
    for (const field of ['jitter', 'model', 'max_tokens']) await page.locator(`input[name=${field}]`).fill('');
    await page.locator('select[name=notify]').selectOption('never');
    await page.locator('select[name=overlap]').selectOption('cancel_other');
    await page.locator('#cron-form button[type=submit]').click();
    await page.waitForURL(/\/ui\/cron\/[0-9a-f]{12}$/, { timeout: 10_000 });
    expect((await named('log-digest'))[0]).toMatchObject({
      notify: 'never',
      overlap: 'cancel_other',
      jitter_seconds: 0,
      model: null,
      max_tokens: null,
    });
    expect(await page.locator('#job dd.run-settings').textContent()).toBe('notify never · overlap cancel_other');
  });

  it("the session page shows the loop's silent ticks as hermes status does", async () => {
    model.respond((req) => {
      const last = req.messages.at(-1)!.content;
      if (/quiet-probe/.test(req.messages.map((m) => m.content).join('\n')) && /wakeup #/i.test(last)) return '[SILENT]';
      return /wakeup #/i.test(last) ? 'tick seen' : `pong: ${last}`;
    });
    await c.schedules.set(
      'quiet',
      'loop',
      { prompt: 'quiet-probe: say nothing unless it changed', intervalSeconds: 3600, times: null, until: null, notes: [] },
      { origin: { surface: 'cli' }, runner: { kind: 'agent' } },
    );
    await expect.poll(async () => (await c.loops.get('quiet', 'loop'))?.silentTicks ?? 0, { timeout: 30_000 }).toBe(1);
    await page.goto(`${gw.httpAddress.url}/ui/sessions/quiet`);
    expect(await page.locator('#schedules tr[data-kind="loop"]').textContent()).toMatch(/ticks \d+(\/\d+)? \(1 silent\) · /);
  });

  it('Run now on a cron page shows the run, its status and its output, without a reload', async () => {
    const cron = await openCronApi(env.config, env.redisUrl, createLogger({ level: 'silent' }));
    cleanups.push(() => cron.close());
    const job = (await cron.api.add({ schedule: 'every 6h', prompt: 'count the open issues', name: 'issue-count', tz: 'UTC' })) as {
      id: string;
    };
    await page.goto(`${gw.httpAddress.url}/ui/cron/${job.id}`);
    await page.waitForFunction(() => (globalThis as unknown as { htmx?: unknown }).htmx !== undefined);
    expect(await page.locator('#runs').textContent()).toContain('No runs yet.');
    // Marks this document: a reload would lose it.
    await page.evaluate(() => ((globalThis as unknown as { __sameDocument?: boolean }).__sameDocument = true));
    await page.locator('button[data-action="run"]').click();
    const row = page.locator('#runs table.runs tbody tr', { hasText: 'pong: count the open issues' });
    await row.waitFor({ timeout: 30_000 });
    expect(await row.locator('.status').first().textContent()).toBe('ok');
    expect(await page.evaluate(() => (globalThis as unknown as { __sameDocument?: boolean }).__sameDocument)).toBe(true);
  });

  it("on a 390 px phone the overview stays the screen's width: its tables scroll inside their box", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await page.goto(`${gw.httpAddress.url}/ui`);
      await page.locator('table.sessions').waitFor();
      expect(
        await page.evaluate(
          () => (globalThis as unknown as { document: { documentElement: { scrollWidth: number } } }).document.documentElement.scrollWidth,
        ),
      ).toBeLessThanOrEqual(390);
      for (const table of ['table.sessions', 'table.cron']) {
        const box = page.locator(`div.scroll:has(> ${table})`);
        const { scrollWidth, clientWidth } = await box.evaluate((el) => ({ scrollWidth: el.scrollWidth, clientWidth: el.clientWidth }));
        expect(clientWidth).toBeLessThanOrEqual(390);
        expect(scrollWidth).toBeGreaterThan(clientWidth);
        // The last column is reached by scrolling the box.
        const last = page.locator(`${table} thead th`).last();
        await last.scrollIntoViewIfNeeded();
        const rect = await last.boundingBox();
        expect(rect!.x).toBeGreaterThanOrEqual(0);
        expect(rect!.x + rect!.width).toBeLessThanOrEqual(390);
      }
    } finally {
      await page.setViewportSize({ width: 1280, height: 900 });
    }
  });

  it('/favicon.ico and the page icon are an SVG clock, behind the key; a tick event shows the clock drawn by CSS, no emoji', async () => {
    expect((await fetch(`${gw.httpAddress.url}/favicon.ico`)).status).toBe(401);
    for (const path of ['/favicon.ico', '/ui/assets/favicon.svg']) {
      const res = await fetch(`${gw.httpAddress.url}${path}`, { headers: basic(KEY) });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^image\/svg\+xml/);
      expect(await res.text()).toMatch(/^<svg [^>]*viewBox="0 0 32 32"[\s\S]*<\/svg>$/);
    }
    await page.goto(`${gw.httpAddress.url}/ui/sessions/web-chat`);
    expect(await page.locator('link[rel=icon]').getAttribute('href')).toBe('/ui/assets/favicon.svg');
    const tick = page.locator('#events .ev-tick .head').first();
    await tick.waitFor();
    expect(await tick.textContent()).toMatch(/^loop tick #1 /);
    expect(await page.locator('body').textContent()).not.toContain('\u23F0');
    const before = await tick.evaluate((el) => {
      const view = (
        globalThis as unknown as { getComputedStyle: (e: unknown, pseudo: string) => { backgroundImage: string; width: string } }
      ).getComputedStyle;
      const s = view(el, '::before');
      return { image: s.backgroundImage, width: s.width };
    });
    expect(before.image).toMatch(/^url\("data:image\/svg\+xml/);
    expect(before.width).not.toBe('0px');
  });

  it('the overview shows a page of api_server.page_size sessions and cron jobs with a link to the next; the search box narrows both to a prefix', async () => {
    // Records only (nothing armed): 60 sessions with a loop and 55 cron jobs, all sorting after the other tests' ones.
    const store = cronStoreFor(env.config, { redis: c.redis, keys: c.keys, queues: c.queues });
    for (let i = 0; i < 60; i++) await c.loops.put(loopFixture({ sessionId: `zz-page-${String(i).padStart(3, '0')}` }), 'absent');
    for (let i = 0; i < 55; i++)
      await store.put(
        cronJobFixture({ id: `dddd${String(i).padStart(8, '0')}`, name: `zz-paged-job-${String(i).padStart(2, '0')}` }),
        'absent',
      );
    const sessionRows = page.locator('table.sessions tbody tr');
    await page.goto(`${gw.httpAddress.url}/ui?q=zz-page-`);
    await expect.poll(() => sessionRows.count()).toBe(50);
    expect(await sessionRows.first().getAttribute('data-session')).toBe('zz-page-000');
    await page.locator('section:has(table.sessions) a.next-page').click();
    await expect.poll(() => sessionRows.count()).toBe(10);
    expect(await sessionRows.first().getAttribute('data-session')).toBe('zz-page-050');
    expect(await page.locator('section:has(table.sessions) a.next-page').count()).toBe(0);
    // The search box, typed into like a person: job names in either case, and no session matches.
    await page.locator('form.search input[name=q]').fill('ZZ-PAGED-JOB-5');
    await page.locator('form.search button').click();
    await page.waitForURL(/\?q=ZZ-PAGED-JOB-5$/);
    const jobRows = page.locator('table.cron tbody tr');
    await expect.poll(() => jobRows.count()).toBe(5);
    expect(await jobRows.first().textContent()).toMatch(/zz-paged-job-50/);
    expect(await page.locator('section', { hasText: 'Sessions' }).textContent()).toMatch(/No session matches/);
    // A cursor the list did not give is refused with a page that says so.
    const bad = await page.goto(`${gw.httpAddress.url}/ui?jobs=nonsense`);
    expect(bad?.status()).toBe(400);
    expect(await page.textContent('body')).toMatch(/not a cursor this list gave/);
  });
});

describe('/admin/queues in chromium', () => {
  it('the queue dashboard loads in the browser and lists the ticks queue; neither it nor the console met a refusal of its CSP but for the fonts', async () => {
    // The console's pages (the tests above) ran with nothing refused by their Content-Security-Policy.
    expect(cspRefusals()).toEqual([]);
    // The same key as the console's, so the browser's credentials answer the dashboard's challenge too.
    const own = testEnv({ 'api_server.port': 0, 'api_server.key': KEY });
    cleanups.push(() => own.cleanup());
    const dashboardGw = await startGateway({
      config: own.config,
      redisUrl: own.redisUrl,
      log: createLogger({ level: own.config.log_level }),
    });
    cleanups.push(() => dashboardGw.close());
    const res = await page.goto(`${dashboardGw.httpAddress.url}/admin/queues`);
    expect(res?.status()).toBe(200);
    await page.getByText('ticks', { exact: true }).first().waitFor({ timeout: 30_000 });
    await page.waitForLoadState('networkidle');
    expect(await page.title()).toMatch(/hermes queues/i);
    // bull-board's only refusal: the Google Fonts stylesheet (the page uses the browser's fonts).
    expect(cspRefusals().length).toBeGreaterThan(0);
    expect(cspRefusals().filter((e) => !e.includes('https://fonts.googleapis.com/'))).toEqual([]);
  });
});
