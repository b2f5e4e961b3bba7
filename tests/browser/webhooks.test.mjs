// The dashboard's Webhooks page in headless Chromium, as an owner would click it: an endpoint
// created (its secret shown once), a test event sent and seen in the attempts log, the receiver
// (tests/support/webhook_receiver.py) verifying it with that secret, then paused, resumed and
// its secret rotated (the new one shown once). Screenshots go to
// $SCREENSHOT_DIR/dashboard-webhooks-*.png.
//
// Started by tests/interop/webhooks.rs (`the_webhooks_page_in_headless_chromium`), which passes
// TRIBUTARY_BASE (a server allowing private addresses), TRIBUTARY_ADMIN_TOKEN, RECEIVER_BASE
// (the receiver) and SCREENSHOT_DIR.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';

const BASE = process.env.TRIBUTARY_BASE;
const TOKEN = process.env.TRIBUTARY_ADMIN_TOKEN;
const RECEIVER = process.env.RECEIVER_BASE;
const SHOTS = process.env.SCREENSHOT_DIR;
if (!BASE || !TOKEN || !RECEIVER) {
  throw new Error('run through `cargo nextest run --test interop webhooks_page` (or tests/run): TRIBUTARY_BASE, TRIBUTARY_ADMIN_TOKEN and RECEIVER_BASE are missing');
}

const OWNER = { name: 'Wendy Hooks', email: 'wendy@example.com', password: 'correct horse battery' };

let browser;
let page;
const shared = {};

async function waitFor(check, what, ms = 20000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function shoot(name) {
  if (!SHOTS) return;
  fs.mkdirSync(SHOTS, { recursive: true });
  for (const colorScheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme });
    await page.screenshot({ path: path.join(SHOTS, `dashboard-webhooks-${name}-${colorScheme}.png`), fullPage: true });
  }
  await page.emulateMedia({ colorScheme: 'light' });
}

async function receiverLog(name) {
  const r = await fetch(`${RECEIVER}/log/${name}`);
  return (await r.json()).records;
}

before(async () => {
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  const made = await fetch(`${BASE}/admin/v1/apps`, {
    method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
    body: JSON.stringify({ name: 'Hooked', plan: 'pro' }),
  });
  assert.equal(made.status, 201);
  shared.appId = (await made.json()).data.id;
});

after(async () => {
  await browser?.close();
});

test('the owner opens Webhooks from the sidebar', async () => {
  await page.goto(`${BASE}/dashboard`);
  await page.getByLabel('Admin token').fill(TOKEN);
  await page.getByLabel('Your name').fill(OWNER.name);
  await page.getByLabel('E-mail').fill(OWNER.email);
  await page.getByLabel('Password').fill(OWNER.password);
  await page.getByRole('button', { name: 'Create owner and sign in' }).click();
  await page.waitForURL(/\/dashboard\/apps$/);
  // The sidebar's entry opens the first app's page; this test's app is another one.
  await page.getByRole('link', { name: 'Webhooks' }).first().click();
  await page.waitForURL(/\/dashboard\/apps\/[0-9a-f]{24}\/webhooks$/);
  await page.goto(`${BASE}/dashboard/apps/${shared.appId}/webhooks`);
  assert.match(await page.locator('main').innerText(), /No endpoints yet/);
});

test('an endpoint is created with its secret shown once; a wrong URL is refused next to its field', async () => {
  await page.getByLabel('URL').fill('ftp://nowhere.example');
  await page.getByRole('button', { name: 'Create endpoint' }).click();
  assert.match(await page.locator('#f-url-error').innerText(), /http/);
  await page.getByLabel('URL').fill(`${RECEIVER}/hook/browser`);
  await page.getByLabel('Description').fill('Our CRM sync');
  await page.getByLabel('contact.created').check();
  await page.getByLabel('idea.created').check();
  await page.getByRole('button', { name: 'Create endpoint' }).click();
  const secret = await page.locator('#new-webhook-secret').inputValue();
  assert.match(secret, /^whsec_[A-Za-z0-9+/=]{40,}$/);
  shared.secret = secret;
  await shoot('created');
  const card = page.locator('article.webhook').first();
  assert.match(await card.innerText(), /Our CRM sync/);
  assert.match(await card.innerText(), /active/);
  await page.goto(page.url());
  assert.equal(await page.locator('#new-webhook-secret').count(), 0, 'the secret is shown once');
});

test('a test event is sent, shown in the attempts log and verified by the receiver', async () => {
  await fetch(`${RECEIVER}/control/browser`, {
    method: 'PUT', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ secrets: [shared.secret], status: 200 }),
  });
  await page.getByRole('link', { name: 'Our CRM sync' }).click();
  await page.waitForURL(/\/webhooks\/[0-9a-f]{24}$/);
  shared.detail = page.url();
  await page.getByRole('button', { name: 'Send test event' }).click();
  const notice = await page.locator('[role="status"]').first().innerText();
  assert.match(notice, /200/, notice);
  const row = page.locator('#attempts tbody tr').first();
  assert.match(await row.innerText(), /webhook\.test/);
  assert.match(await row.innerText(), /200/);
  const got = await waitFor(async () => (await receiverLog('browser')).find((r) => r.type === 'webhook.test'), 'the test event at the receiver');
  assert.equal(got.verified, true, 'the receiver verifies it with the secret the page showed');
  await shoot('attempts');
});

test('a redeliver button queues the logged event again with the same webhook-id', async () => {
  const before = (await receiverLog('browser')).length;
  await page.locator('#attempts tbody tr').first().getByRole('button', { name: /Redeliver/ }).click();
  const again = await waitFor(async () => {
    const log = await receiverLog('browser');
    return log.length > before && log[log.length - 1];
  }, 'the redelivery');
  assert.equal(again.id, (await receiverLog('browser'))[0].id);
  assert.equal(again.verified, true);
});

test('paused, resumed, and the secret rotated: the new one shown once', async () => {
  await page.goto(shared.detail);
  await page.getByRole('button', { name: 'Pause' }).click();
  await page.goto(shared.detail);
  assert.match(await page.locator('.webhook-status').innerText(), /paused/);
  await page.getByRole('button', { name: 'Resume' }).click();
  await page.goto(shared.detail);
  assert.match(await page.locator('.webhook-status').innerText(), /active/);
  await page.getByRole('button', { name: 'Rotate secret' }).click();
  const rotated = await page.locator('#new-webhook-secret').inputValue();
  assert.match(rotated, /^whsec_/);
  assert.notEqual(rotated, shared.secret);
  await shoot('rotated');
  await page.goto(shared.detail);
  assert.equal(await page.locator('#new-webhook-secret').count(), 0);
});
