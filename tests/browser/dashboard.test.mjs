// The dashboard in headless Chromium against the real server, every flow as a person would
// click it: first-owner setup, apps, keys (used on the API), the CSRF refusal, a CSV import of
// 1 000 contacts with 3 bad rows, the contacts table and edit, a member without keys, sign-out
// and sign-in, the traffic charts, a survey moved and its results, a survey built with targeting
// and the live preview, edited, answered and charted over time, the ideas board, an idea's
// page (a comment, an internal reply nested under it, a merge found by search) and the ideas
// settings (a new status that becomes a column). Screenshots of every page, light and dark, go to
// $SCREENSHOT_DIR/dashboard-<page>-<light|dark>.png.
//
// Started by tests/interop/browser.rs (`the_dashboard_in_headless_chromium`), which passes
// TRIBUTARY_BASE (a fresh server), TRIBUTARY_ADMIN_TOKEN and SCREENSHOT_DIR.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';

const BASE = process.env.TRIBUTARY_BASE;
const TOKEN = process.env.TRIBUTARY_ADMIN_TOKEN;
const SHOTS = process.env.SCREENSHOT_DIR;
if (!BASE || !TOKEN) {
  throw new Error('run through `cargo test --test interop dashboard` (or tests/run): TRIBUTARY_BASE and TRIBUTARY_ADMIN_TOKEN are missing');
}

const OWNER = { name: 'Olive Owner', email: 'olive@example.com', password: 'correct horse battery' };
const MEMBER = { name: 'Mel Member', email: 'mel@example.com', password: 'members only please' };

let browser;
let context;
let page;
const shared = {};

async function launch() {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    // A visitor's user agent, not HeadlessChrome's (see VISITOR_UA in harness.mjs).
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--user-agent=Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36'],
  });
}

// Polls `check` until it is truthy or the deadline passes (never a fixed sleep).
async function waitFor(check, what, ms = 15000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

// The page in light and in dark, full length, from the top (so the sticky sidebar is drawn
// where a visitor first sees it).
async function shoot(p, name) {
  if (!SHOTS) return;
  fs.mkdirSync(SHOTS, { recursive: true });
  for (const colorScheme of ['light', 'dark']) {
    await p.emulateMedia({ colorScheme });
    await p.evaluate(() => window.scrollTo(0, 0));
    await p.screenshot({ path: path.join(SHOTS, `dashboard-${name}-${colorScheme}.png`), fullPage: true });
  }
  await p.emulateMedia({ colorScheme: 'light' });
}

function contactsCsv(n, bad) {
  const lines = ['Email,First Name,Last Name,Company,Status,Tags,Score'];
  for (let i = 0; i < n; i += 1) {
    let email = `person${i}@example.com`;
    let status = i % 3 === 0 ? 'customer' : 'new';
    let score = String(i % 101);
    if (i === bad[0]) email = `not-an-email-${i}`;
    if (i === bad[1]) score = '500';
    if (i === bad[2]) status = 'sleeping';
    lines.push(`${email},Ada${i},"Love, ${i}",Acme ${i % 7},${status},"vip,q${i % 4}",${score}`);
  }
  return `${lines.join('\r\n')}\r\n`;
}

before(async () => {
  browser = await launch();
  context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  page = await context.newPage();
});

after(async () => {
  await browser?.close();
});

test('first-owner setup: the admin token creates the owner, who lands on Apps', async () => {
  await page.goto(`${BASE}/dashboard`);
  assert.match(page.url(), /\/dashboard\/setup$/);
  await shoot(page, 'setup');
  await page.getByLabel('Admin token').fill('not the token');
  await page.getByLabel('Your name').fill(OWNER.name);
  await page.getByLabel('E-mail').fill(OWNER.email);
  await page.getByLabel('Password').fill('short');
  await page.getByRole('button', { name: 'Create owner and sign in' }).click();
  assert.match(await page.locator('#f-token-error').innerText(), /admin token/);
  assert.match(await page.locator('#f-password-error').innerText(), /at least 10/);
  assert.equal(await page.getByLabel('E-mail').inputValue(), OWNER.email, 'the form keeps what was typed');
  await shoot(page, 'setup-errors');
  await page.getByLabel('Admin token').fill(TOKEN);
  await page.getByLabel('Password').fill(OWNER.password);
  await page.getByRole('button', { name: 'Create owner and sign in' }).click();
  await page.waitForURL(/\/dashboard\/apps$/);
  assert.match(await page.locator('.who').innerText(), /Olive Owner/);
  await shoot(page, 'apps-empty');
});

test('an app is created; its integration key and tracker snippet are ready to copy', async () => {
  await page.getByLabel('Name').fill('Acme Shop');
  await page.locator('#f-plan').selectOption('pro');
  await page.getByRole('button', { name: 'Create app' }).click();
  const ik = await page.locator('#new-integration-key').inputValue();
  assert.match(ik, /^ik_[0-9a-f]{24}_[0-9a-f]{64}$/);
  assert.match(await page.locator('#snippet').innerText(), new RegExp(`"${ik}"`));
  await page.getByRole('button', { name: 'Copy snippet' }).click();
  await waitFor(async () => (await page.getByRole('button', { name: 'Copied' }).count()) === 1, 'the copy button to say Copied');
  const collect = await fetch(`${BASE}/api/w/analytics/collect`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-app-key': ik },
    body: JSON.stringify({
      sentAt: new Date().toISOString(),
      batch: [{ type: 'track', event: 'Dashboard Tested', anonymousId: '6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f', messageId: 'msg_dashboard_1', timestamp: new Date().toISOString(), properties: {} }],
    }),
  });
  assert.equal(collect.status, 200, 'the integration key shown works on the collector');
  await shoot(page, 'apps-created');
  shared.appUrl = await page.getByRole('link', { name: 'Contacts' }).last().getAttribute('href');
  shared.appId = shared.appUrl.split('/')[3];
  shared.ik = ik;
  await page.goto(`${BASE}/dashboard/apps`);
  assert.equal(await page.locator('#new-integration-key').count(), 0, 'the key is shown once');
  await page.locator('summary', { hasText: 'Plan and integration key' }).click();
  await shoot(page, 'apps');
  await page.setViewportSize({ width: 390, height: 844 });
  await shoot(page, 'apps-phone');
  await page.setViewportSize({ width: 1280, height: 860 });
});

// A small mix of every event type from a few visitors, some identified.
function trafficBatch() {
  const now = new Date().toISOString();
  const anon = (i) => `6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e${String(10 + i)}`;
  const batch = [];
  const paths = ['/', '/pricing', '/pricing', '/docs', '/blog/launch', '/', '/pricing', '/signup'];
  paths.forEach((p, i) => batch.push({ type: 'page', anonymousId: anon(i % 6), messageId: `msg_traffic_p${i}`, timestamp: now,
    context: { page: { url: `https://shop.example${p}`, path: p } } }));
  ['Signed Up', 'Added to Cart', 'Added to Cart', 'Checkout'].forEach((e, i) => batch.push({ type: 'track', event: e,
    anonymousId: anon(i), messageId: `msg_traffic_t${i}`, timestamp: now, properties: {} }));
  [0, 1].forEach((i) => batch.push({ type: 'identify', userId: `user_${i}`, anonymousId: anon(i), messageId: `msg_traffic_i${i}`, timestamp: now }));
  batch.push({ type: 'group', groupId: 'acme', userId: 'user_0', anonymousId: anon(0), messageId: 'msg_traffic_g0', timestamp: now });
  return { sentAt: now, batch };
}

test('the traffic page charts the events the collector received, by type, with its figures in tables', async () => {
  const sent = await fetch(`${BASE}/api/w/analytics/collect`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-app-key': shared.ik }, body: JSON.stringify(trafficBatch()),
  });
  assert.equal(sent.status, 200);
  await page.getByRole('link', { name: 'Traffic' }).click();
  assert.equal(new URL(page.url()).pathname, `/dashboard/apps/${shared.appId}/traffic`);
  // Rollups follow the shards' flushes: reload until all 16 events (and the first one) show.
  const chart = page.locator('svg[role="img"]').first();
  await waitFor(async () => {
    await page.reload();
    return /8 page, 5 track, 2 identify, 1 group/.test(await chart.getAttribute('aria-label'));
  }, 'the rollups to show the events sent');
  assert.equal(await page.locator('svg[role="img"]').count(), 3);
  assert.match(await page.locator('#identified-share strong').innerText(), /^\d+%$/);
  assert.match(await page.locator('#top-pages tbody tr').first().innerText(), /\/pricing\s+3/);
  assert.match(await page.locator('#top-events tbody tr').first().innerText(), /Added to Cart\s+2/);
  await page.locator('details.figures summary').first().click();
  assert.ok(await page.getByRole('table').first().isVisible(), 'the figures open as a table');
  await page.locator('details.figures summary').first().click();
  // The uploader records each file before the rollups it carries: the files show too.
  const files = await page.locator('#lake-files tbody tr').allInnerTexts();
  assert.ok(files.length >= 1, 'the lake files of the last 24 hours are listed');
  assert.ok(files.every((f) => f.includes(`events/app_id=${shared.appId}/dt=`)), files.join('\n'));
  await shoot(page, 'traffic');
  await page.setViewportSize({ width: 390, height: 844 });
  await shoot(page, 'traffic-phone');
  await page.setViewportSize({ width: 1280, height: 860 });
});

test('a survey is activated by its button, answered, and its score, bars and responses shown', async () => {
  const made = await fetch(`${BASE}/admin/v1/apps/${shared.appId}/surveys`, {
    method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
    body: JSON.stringify({ title: 'Would you recommend us?', type: 'nps', targeting: { percentage: 100 }, questions: [
      { id: 'score', text: 'How likely are you to recommend us?', type: 'scale' },
      { id: 'why', text: 'What is the main reason?', type: 'text', required: false }] }),
  });
  assert.equal(made.status, 201);
  const id = (await made.json()).data.id;
  await page.getByRole('link', { name: 'Surveys' }).click();
  await page.getByRole('link', { name: 'draft 1' }).click();
  await page.getByRole('link', { name: 'Would you recommend us?' }).click();
  assert.deepEqual(await page.locator('.survey-head button').allInnerTexts(), ['Activate']);
  await page.getByRole('button', { name: 'Activate' }).click();
  await waitFor(async () => (await page.locator('.survey-head button').allInnerTexts()).join() === 'Pause,Close', 'the live moves');
  const scores = [10, 10, 9, 9, 9, 8, 7, 6, 3, 10, 9, 5];
  for (const [i, value] of scores.entries()) {
    const r = await fetch(`${BASE}/api/w/surveys/${id}/responses`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'x-app-key': shared.ik },
      body: JSON.stringify({ anonymousId: `6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4f${String(10 + i)}`,
        answers: [{ questionId: 'score', value }, { questionId: 'why', value: i % 2 ? 'Fast and simple' : 'Support was great' }] }),
    });
    assert.equal(r.status, 201);
  }
  await page.reload();
  assert.equal(await page.locator('#survey-score strong').innerText(), '33.3');
  assert.equal(await page.locator('#responses ~ * tbody tr, .card:has(#responses) tbody tr').count(), 12);
  const csv = await page.request.get(`${BASE}/dashboard/apps/${shared.appId}/surveys/${id}/responses.csv`);
  assert.equal(csv.status(), 200);
  assert.equal((await csv.text()).trim().split('\r\n').length, 13);
  await shoot(page, 'survey');
  await page.getByRole('link', { name: 'Surveys' }).click();
  await page.getByRole('link', { name: 'New survey' }).click();
  await page.getByLabel('Type').selectOption('poll');
  await page.getByLabel('Title').fill('What next?');
  await page.getByLabel('Questions').fill('single_choice: What should we build next?\nnot a question');
  await page.getByRole('button', { name: 'Create draft' }).click();
  await waitFor(async () => /line 2: write the type/.test(await page.locator('.field-error').allInnerTexts()), 'the error of line 2');
  await shoot(page, 'survey-new');
  await page.getByLabel('Questions').fill('multiple_choice: What should we build next? [Dark mode; Integrations; A mobile app]');
  await page.getByLabel('Visitors asked (%)').fill('25');
  await page.getByRole('button', { name: 'Create draft' }).click();
  await waitFor(async () => (await page.locator('h1').innerText()) === 'What next?', 'the new draft');
  assert.match(await page.locator('.survey-head').innerText(), /draft[\s\S]*poll · 25% of visitors/);
  await page.getByRole('link', { name: 'Surveys' }).click();
  await shoot(page, 'surveys');
});

// The popover the builder's preview draws (the tracker's own, in its shadow root).
const popover = (p) => p.locator('.preview-host .c');
async function previewShows(p, heading, what) {
  await waitFor(async () => (await popover(p).count()) === 1
    && (await popover(p).locator('h2').innerText()) === heading, what);
}

test('a survey is built with targeting and a live preview, edited as a draft, answered, and its score charted over time', async () => {
  await page.goto(`${BASE}/dashboard/apps/${shared.appId}/surveys/new`);
  // The preset NPS question: an 11-step scale from 0 to 10.
  await previewShows(page, 'How likely are you to recommend us to a friend?', 'the NPS preset in the preview');
  assert.equal(await popover(page).locator('.s button').count(), 11);
  assert.equal(await popover(page).getAttribute('role'), 'dialog');
  await page.getByLabel('Type').selectOption('poll');
  await page.getByLabel('Title').fill('Plans');
  await page.getByLabel('Questions').fill('single_choice: Which plan fits you? [Starter; Growth; Scale]\ntext: Anything else?');
  await previewShows(page, 'Which plan fits you?', 'the poll question in the preview');
  assert.deepEqual(await popover(page).locator('label').allInnerTexts(), ['Starter', 'Growth', 'Scale']);
  assert.equal(await popover(page).locator('.t').innerText(), 'Plans');
  assert.match(await popover(page).locator('.f').innerText(), /Question 1 of 2/);
  await page.getByLabel('Type').selectOption('csat');
  await page.getByLabel('Title').fill('Checkout');
  await page.getByLabel('Questions').fill('rating: How was checkout?\ntext: What could we do better?');
  await previewShows(page, 'How was checkout?', 'the rating question in the preview');
  assert.equal(await popover(page).locator('.s button').count(), 5);
  assert.ok(await page.getByLabel('Questions').evaluate((e) => e === document.activeElement), 'the preview leaves the focus in the form');
  await page.getByLabel('Visitors asked (%)').fill('30');
  await page.getByLabel('Attribute rule 1: key').fill('plan');
  await page.getByLabel('Attribute rule 1: value').fill('pro');
  await page.getByRole('button', { name: 'Add attribute rule' }).click();
  await page.getByLabel('Attribute rule 2: key').fill('seats');
  await page.getByLabel('Attribute rule 2: operator').selectOption('greaterThan');
  await page.getByLabel('Attribute rule 2: value').fill('ten');
  await page.getByLabel('URL rule 1: operator').selectOption('startsWith');
  await page.getByLabel('URL rule 1: value').fill('https://shop.example/');
  await page.getByRole('button', { name: 'Create draft' }).click();
  // The API's error comes back on the row it was typed in, with the row's values kept.
  await waitFor(async () => (await page.locator('#f-attr-1-value-error').count()) === 1, 'the error of rule 2');
  assert.match(await page.locator('#f-attr-1-value-error').innerText(), /must be a number/);
  assert.equal(await page.getByLabel('Attribute rule 2: key').inputValue(), 'seats');
  await previewShows(page, 'How was checkout?', 'the preview of the form sent back');
  await page.getByLabel('Attribute rule 2: value').fill('10');
  await shoot(page, 'survey-builder');
  await page.getByRole('button', { name: 'Create draft' }).click();
  await waitFor(async () => (await page.locator('h1').innerText()) === 'Checkout', 'the new draft');
  assert.match(await page.locator('.survey-head').innerText(), /csat · 30% of visitors · 2 attribute rules, 1 URL rule/);
  const id = page.url().split('/').pop();

  await page.getByRole('link', { name: 'Edit' }).click();
  assert.equal(await page.getByLabel('Attribute rule 2: value').inputValue(), '10');
  assert.equal(await page.getByLabel('URL rule 1: value').inputValue(), 'https://shop.example/');
  await previewShows(page, 'How was checkout?', 'the saved survey in the preview');
  await page.getByLabel('Title').fill('Checkout CSAT');
  await page.getByLabel('Questions').fill('rating: How easy was checkout?\ntext: What could we do better?');
  await previewShows(page, 'How easy was checkout?', 'the edited question in the preview');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await waitFor(async () => (await page.locator('h1').innerText()) === 'Checkout CSAT', 'the edited draft');
  await page.getByRole('button', { name: 'Activate' }).click();
  await waitFor(async () => (await page.locator('.survey-head button').allInnerTexts()).join() === 'Pause,Close', 'the live moves');

  // Three visitors the targeting takes (30% of pro visitors with over 10 seats on the shop)
  // answer, as the widget would: the list shows them the survey, their answers tell the same.
  const where = 'https://shop.example/cart', attributes = { plan: 'pro', seats: 12 };
  const visitors = [];
  for (let n = 0; visitors.length < 3 && n < 200; n++) {
    const anonymousId = `6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d${String(5000 + n)}`;
    const q = `anonymousId=${anonymousId}&url=${encodeURIComponent(where)}&attr.plan=pro&attr.seats=12`;
    const list = await (await fetch(`${BASE}/api/w/surveys?${q}`, { headers: { 'x-app-key': shared.ik } })).json();
    if (list.data.some((s) => s.id === id)) visitors.push(anonymousId);
  }
  assert.equal(visitors.length, 3, 'three visitors in the sample');
  for (const [i, value] of [5, 4, 2].entries()) {
    const r = await fetch(`${BASE}/api/w/surveys/${id}/responses`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'x-app-key': shared.ik },
      body: JSON.stringify({ anonymousId: visitors[i], metadata: { url: where }, attributes,
        answers: [{ questionId: 'q1', value }, { questionId: 'q2', value: `answer ${i}` }] }),
    });
    assert.equal(r.status, 201, await r.text());
  }
  await page.reload();
  assert.equal(await page.locator('#survey-score strong').innerText(), '66.7');
  const overTime = page.locator('#score-over-time svg[role="img"]');
  assert.match(await overTime.getAttribute('aria-label'), /^CSAT score per day: \d{4}-\d\d-\d\d 66\.7$/);
  assert.equal(await page.locator('#score-over-time circle.point').count(), 1);
  assert.equal(await page.locator('.card:has(#responses) tbody tr').count(), 3);
  await page.getByLabel('Score from').fill('4');
  await page.getByRole('button', { name: 'Filter' }).click();
  await waitFor(async () => new URL(page.url()).searchParams.get('min') === '4', 'the filtered page');
  assert.equal(await page.locator('.card:has(#responses) tbody tr').count(), 2);
  assert.match(await page.getByRole('link', { name: 'Export CSV' }).getAttribute('href'), /responses\.csv\?min=4$/);
  await shoot(page, 'survey-results');
});

test('ideas sit in their status columns, most voted first, and move with the select on their card', async () => {
  const admin = { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` };
  const made = await fetch(`${BASE}/admin/v1/apps/${shared.appId}/keys`, {
    method: 'POST', headers: admin, body: JSON.stringify({ name: 'ideas', permissions: ['ideas:write', 'votes:write'] }),
  });
  assert.equal(made.status, 201);
  const key = (await made.json()).data.key;
  const api = (p, body) => fetch(`${BASE}${p}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key }, body: JSON.stringify(body) });
  const author = { id: 'user_1', name: 'Ada', email: 'ada@example.com' };
  const ideas = {};
  for (const [title, votes] of [['Dark mode', 5], ['Export to CSV', 3], ['Slack integration', 8], ['Single sign-on', 1]]) {
    const r = await api('/api/v1/ideas', { title, author });
    assert.equal(r.status, 201);
    ideas[title] = (await r.json()).data.id;
    for (let v = 0; v < votes; v += 1) {
      const voted = await api(`/api/v1/ideas/${ideas[title]}/votes`, { voter: { id: `voter_${v}`, name: `V${v}`, email: `v${v}@example.com` } });
      assert.ok(voted.ok);
    }
  }
  await page.getByRole('link', { name: 'Ideas' }).click();
  const open = page.locator('section.column', { has: page.getByRole('heading', { name: /^Open/ }) });
  assert.deepEqual(await open.locator('h3').allInnerTexts(), ['Slack integration', 'Dark mode', 'Export to CSV', 'Single sign-on']);
  for (const [title, status] of [['Dark mode', 'Planned'], ['Slack integration', 'In progress'], ['Export to CSV', 'Under review']]) {
    await page.getByLabel(`Status of ${title}`).selectOption({ label: status });
    await page.getByRole('button', { name: `Move ${title}` }).click();
    const column = page.locator('section.column', { has: page.getByRole('heading', { name: new RegExp(`^${status}`) }) });
    await waitFor(async () => (await column.locator('h3').allInnerTexts()).includes(title), `${title} in ${status}`);
  }
  assert.deepEqual(await open.locator('h3').allInnerTexts(), ['Single sign-on']);
  await shoot(page, 'ideas');
  shared.ideasKey = key;
});

test('an idea opens from the board: a comment, an internal reply nested under it, then merged into an idea found by search', async () => {
  const voted = await fetch(`${BASE}/api/v1/ideas/${new URL(await page.getByRole('link', { name: 'Single sign-on' }).getAttribute('href'), BASE).pathname.split('/').pop()}/votes`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': shared.ideasKey },
    body: JSON.stringify({ voter: { id: 'voter_sso', name: 'Sam', email: 'sam@example.com' } }),
  });
  assert.equal(voted.status, 201, 'a voter Slack integration lacks');
  await page.getByRole('link', { name: 'Single sign-on' }).click();
  await page.waitForURL(/\/ideas\/[0-9a-f]{24}$/);
  assert.equal(await page.locator('h1').innerText(), 'Single sign-on');
  await page.getByLabel('Comment', { exact: true }).fill('Enterprise customers ask for this every week.');
  await page.getByRole('button', { name: 'Add comment' }).click();
  const top = page.locator('article.comment', { hasText: 'Enterprise customers' });
  await waitFor(async () => (await top.count()) === 1, 'the comment');
  await top.locator('summary', { hasText: 'Reply' }).click();
  await top.getByLabel('Reply', { exact: true }).fill('Okta first: two of them use it.');
  await top.getByLabel(/Internal/).check();
  await top.getByRole('button', { name: 'Post reply' }).click();
  const reply = page.locator('ol.thread ol.thread article.comment.internal');
  await waitFor(async () => (await reply.count()) === 1, 'the internal reply nested under the comment');
  assert.match(await reply.innerText(), /Internal[\s\S]*Okta first/);
  assert.equal(await page.locator('article.comment.internal', { hasText: 'Enterprise customers' }).count(), 0, 'only the reply is internal');
  await shoot(page, 'idea');
  await page.getByLabel('Find the idea to merge into').fill('slack');
  await page.getByRole('button', { name: 'Search' }).click();
  assert.deepEqual(await page.locator('#merge-results li a').allInnerTexts(), ['Slack integration']);
  await shoot(page, 'idea-merge-search');
  await page.getByRole('button', { name: 'Merge into Slack integration' }).click();
  await waitFor(async () => (await page.locator('h1').innerText()) === 'Slack integration', 'the target idea');
  assert.match(await page.locator('[role=status]').innerText(), /“Single sign-on” was merged into this idea/);
  assert.equal(await page.locator('#vote-count strong').innerText(), '9', '8 votes and the voter it lacked');
  assert.equal(await page.locator('ol.thread ol.thread article.comment.internal').count(), 1, 'the thread moved with it');
  await shoot(page, 'idea-merged');
});

test('the ideas settings add a status, refuse a taken name next to its field, and the board shows the new column', async () => {
  await page.getByRole('link', { name: '← Board' }).click();
  await page.getByRole('link', { name: 'Board settings' }).click();
  await page.waitForURL(/\/ideas\/settings\?board=/);
  await page.getByLabel('New status name').fill('Planned');
  await page.getByRole('button', { name: 'Add status' }).click();
  await waitFor(async () => (await page.locator('#f-new-statuses-name-error').count()) === 1, 'the error next to the name');
  assert.match(await page.locator('#f-new-statuses-name-error').innerText(), /exists/);
  await page.getByLabel('New status name').fill('Shipped');
  await page.locator('#f-new-statuses-color').fill('#0f766e');
  await page.locator('#f-new-statuses-kind').selectOption('closed');
  await page.locator('#f-new-statuses-position').fill('4');
  await page.getByRole('button', { name: 'Add status' }).click();
  await waitFor(async () => (await page.getByRole('listitem', { name: 'status Shipped' }).count()) === 1, 'the new status');
  await page.getByLabel('New topic name').fill('Security');
  await page.getByRole('button', { name: 'Add topic' }).click();
  await waitFor(async () => (await page.getByRole('listitem', { name: 'topic Security' }).count()) === 1, 'the new topic');
  await page.getByLabel('New tag name').fill('enterprise');
  await page.getByRole('button', { name: 'Add tag' }).click();
  await waitFor(async () => (await page.getByRole('listitem', { name: 'tag enterprise' }).count()) === 1, 'the new tag');
  await shoot(page, 'idea-settings');
  await page.getByRole('link', { name: '← Board' }).click();
  const headings = await page.locator('section.column h2').allInnerTexts();
  assert.match(headings[4], /^Shipped/, headings.join(' | '));
  await shoot(page, 'ideas-new-column');
});

test('a key is created with permission checkboxes, shown once, works on the API, and its permissions change', async () => {
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Keys' }).click();
  await page.waitForURL(/\/keys$/);
  await page.getByLabel('Name').fill('CRM sync');
  await page.getByLabel('contacts:read').first().check();
  await page.getByLabel('contacts:write').first().check();
  await page.getByRole('button', { name: 'Create key' }).click();
  const key = await page.locator('#new-api-key').inputValue();
  assert.match(key, /^tk_/);
  await shoot(page, 'keys-created');
  const made = await fetch(`${BASE}/acq/v1/contacts`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ email: 'from-the-api@example.com', firstName: 'Api' }),
  });
  assert.equal(made.status, 201, await made.text());
  await page.goto(page.url());
  assert.equal(await page.locator('#new-api-key').count(), 0, 'the secret is shown once');
  const row = page.getByRole('article', { name: 'Key CRM sync' });
  assert.doesNotMatch(await row.innerText(), /Last used never/, 'the last use shows');
  await row.locator('summary', { hasText: 'Edit' }).click();
  await shoot(page, 'keys');
  await row.getByLabel('contacts:write').uncheck();
  await row.getByRole('button', { name: 'Save permissions' }).click();
  await page.waitForURL(/\/keys$/);
  const refused = await fetch(`${BASE}/acq/v1/contacts`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ email: 'second@example.com' }),
  });
  assert.equal(refused.status, 403, 'contacts:write was taken away');
  shared.key = key;
});

test('a form posted without its CSRF token is refused with 403', async () => {
  await page.goto(`${BASE}/dashboard/apps`);
  await page.evaluate(() => document.querySelector('form[action="/dashboard/apps"] input[name=csrf]').remove());
  await page.getByLabel('Name').fill('Forged');
  const [response] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/dashboard/apps') && r.request().method() === 'POST'),
    page.getByRole('button', { name: 'Create app' }).click(),
  ]);
  assert.equal(response.status(), 403);
  assert.match(await page.locator('main').innerText(), /security token/);
  await shoot(page, 'error-csrf');
  await page.goto(`${BASE}/dashboard/apps`);
  assert.equal(await page.getByRole('heading', { name: 'Forged' }).count(), 0, 'no app was made');
});

test('a CSV of 1 000 contacts is imported with a preview and a column mapping; its 3 bad rows are reported', async () => {
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Contacts' }).click();
  await page.waitForURL(/\/contacts$/);
  await page.getByRole('link', { name: 'Import CSV' }).click();
  await shoot(page, 'import');
  const csv = contactsCsv(1000, [10, 500, 999]);
  await page.getByLabel('CSV file').setInputFiles({ name: 'contacts.csv', mimeType: 'text/csv', buffer: Buffer.from(csv) });
  // (A textarea's value has LF line ends: compare without the CRs.)
  await waitFor(async () => (await page.locator('#f-csv').inputValue()) === csv.replaceAll('\r\n', '\n'), 'the file to be read into the form');
  await page.getByRole('button', { name: 'Preview' }).click();
  assert.equal(await page.getByLabel('Field for column Email').inputValue(), 'email');
  assert.equal(await page.getByLabel('Field for column Last Name').inputValue(), 'lastName');
  await shoot(page, 'import-preview');
  await page.getByRole('button', { name: /^Import 1.000 rows$/ }).click();
  const summary = await page.locator('#import-summary').innerText();
  assert.match(summary, /997 created · 0 updated · 3 failed/);
  const lines = await page.locator('#import-errors tbody tr td.num').allInnerTexts();
  assert.deepEqual(lines, ['12', '502', '1001']);
  const problems = await page.locator('#import-errors tbody').innerText();
  assert.match(problems, /email/);
  assert.match(problems, /score/);
  assert.match(problems, /status/);
  await shoot(page, 'import-report');
});

test('the contacts table searches, filters, sorts and pages; a contact is edited with its errors in place', async () => {
  await page.getByRole('link', { name: 'See the contacts' }).click();
  assert.match(await page.locator('main').innerText(), /998 contacts in Acme Shop/);
  assert.equal(await page.locator('tbody tr').count(), 50);
  await shoot(page, 'contacts');
  await page.setViewportSize({ width: 390, height: 844 });
  await shoot(page, 'contacts-phone');
  await page.setViewportSize({ width: 1280, height: 860 });
  await page.getByLabel('Status').selectOption('customer');
  await page.getByLabel('Search').fill('ada12');
  await page.getByRole('button', { name: 'Apply' }).click();
  const names = await page.locator('tbody tr td:first-child').allInnerTexts();
  assert.ok(names.length > 0 && names.every((n) => n.startsWith('Ada12')), names.join());
  await page.getByRole('link', { name: 'Score' }).click();
  const scores = (await page.locator('tbody td.num').allInnerTexts()).map(Number);
  assert.deepEqual(scores, [...scores].sort((a, b) => b - a), 'sorted by score, highest first');
  await shoot(page, 'contacts-filtered');
  const exported = await page.getByRole('link', { name: 'Export CSV' }).getAttribute('href');
  const csv = await (await context.request.get(`${BASE}${exported}`)).text();
  assert.equal(csv.trim().split('\n').length, names.length + 1, 'the export is the current filter');
  await page.goto(`${BASE}${shared.appUrl}`);
  await page.getByRole('link', { name: 'Next page →' }).click();
  assert.equal(await page.locator('tbody tr').count(), 50);
  await page.locator('tbody tr td:first-child a').first().click();
  await page.getByLabel('Score').fill('101');
  await page.getByRole('button', { name: 'Save' }).click();
  assert.match(await page.locator('#f-score-error').innerText(), /0 to 100/);
  await shoot(page, 'contact-errors');
  await page.getByLabel('Score').fill('99');
  await page.getByLabel('First name').fill('Grace');
  await page.getByRole('button', { name: 'Save' }).click();
  await waitFor(async () => /Grace/.test(await page.locator('h1').innerText()), 'the saved name');
  await shoot(page, 'contact');
});

test('a member cannot see keys: no Keys in the nav, and the page answers 403', async () => {
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Team' }).click();
  await page.getByLabel('Name').fill(MEMBER.name);
  await page.getByLabel('E-mail').fill(MEMBER.email);
  await page.getByLabel('First password').fill(MEMBER.password);
  await page.getByRole('button', { name: 'Add to the team' }).click();
  assert.match(await page.locator('[role=status]').innerText(), /can now sign in/);
  await shoot(page, 'team');
  const memberContext = await browser.newContext();
  const m = await memberContext.newPage();
  await m.goto(`${BASE}/dashboard/sign-in`);
  await m.getByLabel('E-mail').fill(MEMBER.email);
  await m.getByLabel('Password').fill(MEMBER.password);
  await m.getByRole('button', { name: 'Sign in' }).click();
  await m.waitForURL(/\/dashboard\/apps$/);
  const nav = await m.getByRole('navigation', { name: 'Main' }).innerText();
  assert.doesNotMatch(nav, /Keys/);
  assert.doesNotMatch(nav, /Team/);
  assert.match(nav, /Contacts/);
  await shoot(m, 'apps-member');
  const keys = await m.goto(`${BASE}/dashboard/apps/${shared.appId}/keys`);
  assert.equal(keys.status(), 403);
  await shoot(m, 'error-forbidden');
  await memberContext.close();
});

test('sign-out ends the session; a wrong password is refused next to its field; sign-in works', async () => {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.waitForURL(/\/dashboard\/sign-in$/);
  await page.goto(`${BASE}/dashboard/apps`);
  assert.match(page.url(), /\/dashboard\/sign-in$/, 'signed out');
  await shoot(page, 'sign-in');
  await page.getByLabel('E-mail').fill(OWNER.email);
  await page.getByLabel('Password').fill('not my password');
  await page.getByRole('button', { name: 'Sign in' }).click();
  assert.match(await page.locator('#f-password-error').innerText(), /wrong e-mail or password/);
  await shoot(page, 'sign-in-error');
  await page.getByLabel('Password').fill(OWNER.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(/\/dashboard\/apps$/);
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === 'tributary_session');
  assert.ok(session && session.httpOnly && session.sameSite === 'Lax', JSON.stringify(cookies));
});
