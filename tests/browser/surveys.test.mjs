// The survey popover of the tracker (sdk/analytics.js) in headless Chromium against the real
// server. The tests make their own app, API key and surveys through the admin API (so the
// tracker tests' app has none), answer every survey type with the keyboard only, and read the
// responses back through GET /api/v1/surveys/{id}/responses. No blind sleeps: every wait polls
// with a deadline.
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { BASE, ADMIN_TOKEN, launch, Proxy, Site, waitFor, screenshot } from './harness.mjs';

let browser, proxy, site, context, appId, apiKey;
const surveys = {};

async function call(method, path, headers, body) {
  const r = await fetch(BASE + path, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await r.json();
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(json)}`);
  return json.data;
}
const admin = (method, path, body) => call(method, '/admin/v1' + path, { authorization: `Bearer ${ADMIN_TOKEN}` }, body);

// One survey per type, each shown on its own page (URL rules), plus one whose targeting no
// visitor of these tests matches.
const DEFINITIONS = {
  nps: {
    title: 'Quick question', type: 'nps', questions: [
      { id: 'score', text: 'How likely are you to recommend Tributary to a friend?', type: 'scale', required: true },
      { id: 'why', text: 'What is the main reason for your score?', type: 'text', required: false },
    ],
  },
  csat: { title: 'Your experience', type: 'csat', questions: [{ id: 'sat', text: 'How satisfied are you with the new dashboard?', type: 'rating', required: true }] },
  pmf: {
    title: 'Product feedback', type: 'pmf', questions: [{
      id: 'pmf', text: 'How would you feel if you could no longer use Tributary?', type: 'single_choice', required: true,
      options: [{ id: 'very_disappointed', label: 'Very disappointed' }, { id: 'somewhat_disappointed', label: 'Somewhat disappointed' },
        { id: 'not_disappointed', label: 'Not disappointed' }],
    }],
  },
  open: { title: 'Tell us more', type: 'open', questions: [{ id: 'idea', text: 'What should we build next?', type: 'text', required: true }] },
  poll: {
    title: 'Quick poll', type: 'poll', questions: [{
      id: 'use', text: 'Which features do you use?', type: 'multiple_choice', required: true,
      options: [{ id: 'boards', label: 'Feedback boards' }, { id: 'surveys', label: 'Surveys' }, { id: 'analytics', label: 'Analytics' }],
    }],
  },
};

before(async () => {
  assert.ok(ADMIN_TOKEN, 'TRIBUTARY_ADMIN_TOKEN is set by tests/interop/browser.rs');
  const app = await admin('POST', '/apps', { name: 'Survey popover tests', plan: 'enterprise' });
  appId = app.id;
  apiKey = (await admin('POST', `/apps/${appId}/keys`, { name: 'reader', permissions: ['surveys:read', 'responses:read'] })).key;
  const make = async (name, body) => {
    const s = await admin('POST', `/apps/${appId}/surveys`, body);
    await admin('POST', `/apps/${appId}/surveys/${s.id}/transition`, { status: 'active' });
    surveys[name] = s.id;
  };
  for (const [type, def] of Object.entries(DEFINITIONS)) {
    await make(type, { ...def, targeting: { percentage: 100, urls: [{ operator: 'contains', value: `/survey/${type}` }] } });
  }
  await make('targeted', {
    ...DEFINITIONS.csat, title: 'Enterprise only',
    targeting: { percentage: 50, attributes: [{ key: 'plan', operator: 'equals', value: 'enterprise' }], urls: [{ operator: 'contains', value: '/survey/targeted' }] },
  });
  proxy = await new Proxy().start();
  site = await new Site(proxy, app.integrationKey).start();
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await site?.close();
  await proxy?.close();
});
beforeEach(async () => {
  await context?.close();
  context = await browser.newContext();
});

async function visit(path) {
  const page = await context.newPage();
  await page.goto(site.base + path);
  await page.waitForFunction(() => window.Service && window.Service.analytics && window.Service.analytics.loaded);
  return page;
}
const state = (page) => page.evaluate(() => window.Service.analytics.surveys());
// Waits until the tracker has asked the server for surveys `n` times since load.
const checked = (page, n = 1) => waitFor(async () => (await state(page)).checks >= n, `${n} survey check(s)`);
const dialog = (page) => page.getByRole('dialog');

// The popover is up: a non-modal dialog labelled by its question, with the focus inside.
async function shown(page, question) {
  await dialog(page).waitFor({ state: 'visible', timeout: 15000 });
  const d = dialog(page);
  assert.equal(await d.getAttribute('aria-modal'), 'false');
  assert.equal(await page.getByRole('heading', { name: question }).getAttribute('id'), await d.getAttribute('aria-labelledby'));
  await d.getByRole('button', { name: 'Close survey' }).waitFor();
  const focus = await page.evaluate(() => {
    const host = document.querySelector('[data-tributary-survey]');
    const inner = host && host.shadowRoot.activeElement;
    return document.activeElement === host && inner && inner.closest('[role=dialog]') !== null;
  });
  assert.ok(focus, 'the focus moved into the popover');
}

async function responses(id) {
  return call('GET', `/api/v1/surveys/${id}/responses?sort=-updatedAt`, { 'x-api-key': apiKey });
}

// The visitor's completed response, once it has arrived.
async function completed(id, anonymousId) {
  return waitFor(async () => {
    const r = (await responses(id)).find((x) => x.anonymousId === anonymousId);
    return r && r.completed && r;
  }, `a completed response to ${id}`);
}

// After a reload the survey is not shown again: the check ran and nothing opened.
async function notShownAfterReload(page, why) {
  await page.reload();
  await page.waitForFunction(() => window.Service && window.Service.analytics && window.Service.analytics.loaded);
  await checked(page);
  assert.equal((await state(page)).open, null, why);
  assert.equal(await page.locator('[data-tributary-survey]').count(), 0, why);
}

const press = async (page, ...keys) => { for (const k of keys) await page.keyboard.press(k); };

// Each type: the keys that answer it and the answers the server must then hold.
const CASES = [
  {
    type: 'nps',
    keys: async (page) => {
      await press(page, ...Array(9).fill('ArrowRight'), 'Enter', 'Tab', 'Enter');
      await page.getByRole('heading', { name: DEFINITIONS.nps.questions[1].text }).waitFor();
      await page.keyboard.type('Setup took five minutes');
      await press(page, 'Tab', 'Enter');
    },
    answers: [{ questionId: 'score', type: 'scale', value: 9 }, { questionId: 'why', type: 'text', value: 'Setup took five minutes' }],
    score: 9,
  },
  {
    type: 'csat',
    keys: async (page) => {
      // Required: Submit without an answer shows an error and sends nothing.
      await press(page, 'Tab', 'Enter');
      await dialog(page).getByRole('alert').filter({ hasText: 'Please answer this question.' }).waitFor();
      await press(page, 'Shift+Tab', 'ArrowRight', 'ArrowRight', 'ArrowRight', 'Space', 'Tab', 'Enter');
    },
    answers: [{ questionId: 'sat', type: 'rating', value: 4 }],
    score: 4,
  },
  {
    type: 'pmf',
    keys: (page) => press(page, 'ArrowDown', 'Tab', 'Enter'),
    answers: [{ questionId: 'pmf', type: 'single_choice', value: 'somewhat_disappointed' }],
    score: null,
  },
  {
    type: 'open',
    // Shown after a single-page-app navigation, not at load.
    start: '/home',
    navigate: '/survey/open',
    keys: async (page) => {
      await page.keyboard.type('A Slack integration');
      await press(page, 'Tab', 'Enter');
    },
    answers: [{ questionId: 'idea', type: 'text', value: 'A Slack integration' }],
    score: null,
  },
  {
    type: 'poll',
    keys: (page) => press(page, 'Space', 'Tab', 'Tab', 'Space', 'Tab', 'Enter'),
    answers: [{ questionId: 'use', type: 'multiple_choice', value: ['boards', 'analytics'] }],
    score: null,
  },
];

for (const c of CASES) {
  test(`${c.type}: shown to an eligible visitor, answered with the keyboard only, readable through the API, not shown again after a reload`, async () => {
    const def = DEFINITIONS[c.type];
    const page = await visit(c.start || `/survey/${c.type}`);
    if (c.navigate) {
      await checked(page);
      assert.equal(await page.locator('[data-tributary-survey]').count(), 0, 'no survey targets the first page');
      await page.evaluate((p) => history.pushState({}, '', p), c.navigate);
    }
    await shown(page, def.questions[0].text);
    assert.equal(await dialog(page).getByText(def.title).count(), 1);
    await screenshot(page, `survey-${c.type}.png`);
    const anonymousId = await page.evaluate(() => window.Service.analytics.anonymousId());
    await c.keys(page);
    await dialog(page).getByRole('heading', { name: 'Thank you!' }).waitFor();
    const r = await completed(surveys[c.type], anonymousId);
    assert.deepEqual(r.answers, c.answers);
    assert.equal(r.score, c.score);
    assert.equal(r.userId, null);
    assert.equal(r.metadata.url, `${site.base}/survey/${c.type}`);
    assert.equal(r.metadata.device, 'desktop');
    assert.match(r.metadata.locale, /^[a-z]{2,3}(-[A-Z]{2})?$/);
    assert.equal((await responses(surveys[c.type])).filter((x) => x.anonymousId === anonymousId).length, 1, 'one response per visitor');
    // The thank-you state closes by itself.
    await dialog(page).waitFor({ state: 'detached', timeout: 15000 });
    await notShownAfterReload(page, 'completed here');
    // The server filters completed surveys too: without the local memory it is still not shown.
    await page.evaluate(() => localStorage.removeItem('trb.sv'));
    await notShownAfterReload(page, 'completed on the server');
  });
}

test('Escape dismisses the popover, the focus goes back, and it stays dismissed after a reload', async () => {
  const page = await visit('/survey/nps');
  await page.emulateMedia({ colorScheme: 'dark' });
  await shown(page, DEFINITIONS.nps.questions[0].text);
  await press(page, 'ArrowRight', 'ArrowRight', 'Enter');
  await screenshot(page, 'survey-nps-dark.png');
  await press(page, 'Escape');
  await dialog(page).waitFor({ state: 'detached' });
  assert.equal(await page.evaluate(() => document.activeElement.tagName), 'BODY');
  assert.deepEqual(await page.evaluate(() => JSON.parse(localStorage.getItem('trb.sv'))), { [surveys.nps]: 'dismissed' });
  await notShownAfterReload(page, 'dismissed');
  // Nothing was answered: the server would still offer it; only the visitor's choice hides it.
  const anonymousId = await page.evaluate(() => window.Service.analytics.anonymousId());
  assert.equal((await responses(surveys.nps)).filter((x) => x.anonymousId === anonymousId).length, 0);
  const offered = await call('GET', `/api/w/surveys?anonymousId=${anonymousId}&url=${encodeURIComponent(site.base + '/survey/nps')}`, { 'x-app-key': site.appKey });
  assert.deepEqual(offered.map((s) => s.id), [surveys.nps]);
});

test('the close button dismisses too', async () => {
  const page = await visit('/survey/poll');
  await shown(page, DEFINITIONS.poll.questions[0].text);
  await press(page, 'Shift+Tab');
  assert.equal(await page.evaluate(() => document.querySelector('[data-tributary-survey]').shadowRoot.activeElement.getAttribute('aria-label')), 'Close survey');
  await press(page, 'Enter');
  await dialog(page).waitFor({ state: 'detached' });
  await notShownAfterReload(page, 'dismissed by the close button');
});

test('a survey whose percentage and attribute rule the visitor does not match is not shown', async () => {
  const page = await visit('/survey/targeted');
  await checked(page);
  assert.equal((await state(page)).open, null);
  assert.equal(await dialog(page).count(), 0);
  // A trait that does not match, known to the tracker, changes nothing either.
  await page.evaluate(() => window.Service.analytics.identify('user-free', { plan: 'free' }));
  await page.evaluate(() => history.pushState({}, '', '/survey/targeted?again=1'));
  await checked(page, 2);
  assert.equal(await dialog(page).count(), 0);
});

test('surveys(false) through the snippet turns the popover off', async () => {
  const page = await visit('/survey/csat?nosurveys=1');
  assert.deepEqual(await state(page), { enabled: false, checks: 0, open: null });
  await page.evaluate(() => window.Service.analytics.surveys(true));
  await shown(page, DEFINITIONS.csat.questions[0].text);
  await page.evaluate(() => window.Service.analytics.surveys(false));
  await dialog(page).waitFor({ state: 'detached' });
});
