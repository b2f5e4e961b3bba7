// The browser tracker (sdk/analytics.js) in headless Chromium against the real server.
// Every assertion is on what reached the proxy in front of the server (and, through the
// manifest, on what tests/api/browser.rs then reads in the lake). No blind sleeps: every wait
// polls with a deadline.
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { launch, Proxy, Site, open, waitFor, idle, expectInLake, screenshot } from './harness.mjs';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
let browser, proxy, site, context;

before(async () => {
  proxy = await new Proxy().start();
  site = await new Site(proxy).start();
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await site?.close();
  await proxy?.close();
});
beforeEach(async () => {
  await context?.close();
  proxy.reset();
  context = await browser.newContext();
});

const track = (page, name, props) => page.evaluate(([n, p]) => window.Service.analytics.track(n, p), [name, props || {}]);
const flush = (page) => page.evaluate(() => window.Service.analytics.flush());
const arrived = (name, n = 1) => waitFor(() => proxy.tracked(name).length >= n && proxy.tracked(name), `${n} "${name}" event(s) accepted`);
const ids = (events) => events.map((e) => e.messageId);

test('a call made before load is replayed; the page view and context; 10 events go at once in one batch, fewer after 5 s', async () => {
  const page = await open(context, site, '/?early=1');
  await page.evaluate(() => {
    const a = window.Service.analytics;
    document.getElementById('state').textContent = JSON.stringify({ version: a.version, anonymousId: a.anonymousId(), userId: a.userId(), ...a.debug() }, null, 2);
  });
  await screenshot(page, 'tracker-test-page.png');
  await flush(page);
  const [early] = await arrived('Early');
  assert.deepEqual(early.properties, { before: 'load' });
  const pageView = proxy.accepted().find((e) => e.type === 'page');
  assert.ok(pageView, 'a page event at load');
  for (const e of [early, pageView]) {
    assert.match(e.anonymousId, UUID_V4);
    assert.match(e.messageId, /^msg_/);
    assert.match(e.sessionId, /^ses_/);
    assert.ok(!Number.isNaN(Date.parse(e.timestamp)));
    const c = e.context;
    assert.equal(c.page.url, `${site.base}/?early=1`);
    assert.equal(c.page.path, '/');
    assert.equal(c.page.title, 'Tracker test page');
    assert.equal(c.page.referrer, '');
    assert.equal(c.device.type, 'desktop');
    assert.match(c.locale, /^[a-z]{2,3}(-[A-Z]{2})?$/);
    assert.ok(c.timezone && Intl.supportedValuesOf('timeZone').concat('UTC').includes(c.timezone), c.timezone);
    assert.ok(Number.isInteger(c.screen.width) && c.screen.width > 0);
    assert.ok(Number.isInteger(c.screen.height) && c.screen.height > 0);
  }
  assert.equal(early.sessionId, pageView.sessionId);
  // The early call and the page view were queued before the flush: one request, one sentAt.
  const first = proxy.requests.find((r) => r.events.some((e) => e.event === 'Early'));
  assert.equal(first.status, 200);
  assert.ok(first.sentAt && first.events.every((e) => !('sentAt' in e)));
  assert.deepEqual(first.answer, { accepted: 2, duplicates: 0, rejected: 0, errors: [] });

  // Ten events: sent at once (long before the 5 s timer), in one batch. First the first
  // batch's answer must be in the tab: the proxy logs its events before the tab reads it.
  await idle(page);
  const state = await page.evaluate(() => {
    for (let i = 0; i < 10; i++) window.Service.analytics.track('Ten', { i });
    return window.Service.analytics.debug();
  });
  assert.deepEqual(state, { queued: 0, stored: 0, inflight: 1 }, 'the tenth event sent the batch at once');
  const ten = await arrived('Ten', 10);
  const tenReqs = proxy.requests.filter((r) => r.events.some((e) => e.event === 'Ten'));
  assert.equal(tenReqs.length, 1);
  assert.equal(tenReqs[0].events.length, 10);
  assert.deepEqual(ten.map((e) => e.properties.i), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);

  // Fewer than ten: they wait for the 5 s timer, then go together.
  await idle(page);
  const t1 = Date.now();
  await track(page, 'Timer', { n: 1 });
  await track(page, 'Timer', { n: 2 });
  assert.deepEqual(await page.evaluate(() => window.Service.analytics.debug()), { queued: 2, stored: 0, inflight: 0 });
  await arrived('Timer', 2);
  const waited = proxy.requests.find((r) => r.events.some((e) => e.event === 'Timer')).at - t1;
  assert.ok(waited >= 4500 && waited < 15000, `the batch left after ${waited} ms`);
  assert.equal(proxy.requests.filter((r) => r.events.some((e) => e.event === 'Timer')).length, 1);
  expectInLake({ present: ids([early, pageView, ...ten, ...proxy.tracked('Timer')]) });
});

test('single-page-app navigation: push, replace, hash and back are page events; a same-URL replace is not', async () => {
  const page = await open(context, site, '/');
  await page.evaluate(() => history.pushState({}, '', '/a'));
  await page.evaluate(() => history.replaceState({ again: 1 }, '', '/a'));
  await page.evaluate(() => history.replaceState({}, '', '/b'));
  await page.evaluate(() => { location.hash = 'x'; });
  await page.waitForFunction(() => location.hash === '#x');
  await page.evaluate(() => history.back());
  await page.waitForFunction(() => location.hash === '');
  await flush(page);
  const pages = await waitFor(() => {
    const p = proxy.accepted().filter((e) => e.type === 'page');
    return p.length >= 5 && p;
  }, 'five page events');
  await idle(page);
  const seen = proxy.accepted().filter((e) => e.type === 'page');
  assert.deepEqual(seen.map((e) => e.properties.url.slice(site.base.length)), ['/', '/a', '/b', '/b#x', '/b']);
  assert.deepEqual(seen.map((e) => e.context.page.path), ['/', '/a', '/b', '/b', '/b']);
  assert.equal(seen[1].context.page.referrer, `${site.base}/`);
  assert.equal(seen[2].context.page.referrer, `${site.base}/a`);
  expectInLake({ present: ids(pages) });
});

test('identify: userId on every later event and after a reload; reset gives a new anonymousId without userId', async () => {
  const page = await open(context, site, '/');
  await track(page, 'Anonymous');
  await page.evaluate(() => window.Service.analytics.identify('user-42', { plan: 'pro' }));
  await track(page, 'Known');
  await page.evaluate(() => window.Service.analytics.group('acme', { name: 'Acme' }));
  await flush(page);
  const [known] = await arrived('Known');
  const group = await waitFor(() => proxy.accepted().find((e) => e.type === 'group'), 'the group call');
  assert.equal(group.groupId, 'acme');
  assert.deepEqual(group.traits, { name: 'Acme' });
  assert.equal(group.userId, 'user-42');
  const [anon] = proxy.tracked('Anonymous');
  const identify = proxy.accepted().find((e) => e.type === 'identify');
  assert.equal(anon.userId, undefined);
  assert.equal(identify.userId, 'user-42');
  assert.deepEqual(identify.traits, { plan: 'pro' });
  assert.equal(known.userId, 'user-42');
  assert.equal(known.anonymousId, anon.anonymousId);

  await page.reload();
  await page.waitForFunction(() => window.Service.analytics.loaded);
  await track(page, 'Known after reload');
  await flush(page);
  const [later] = await arrived('Known after reload');
  assert.equal(later.userId, 'user-42');
  assert.equal(later.anonymousId, anon.anonymousId);
  assert.equal(later.sessionId, anon.sessionId, 'a reload keeps the session');

  await page.evaluate(() => window.Service.analytics.reset());
  await track(page, 'After reset');
  await flush(page);
  const [fresh] = await arrived('After reset');
  assert.equal(fresh.userId, undefined);
  assert.match(fresh.anonymousId, UUID_V4);
  assert.notEqual(fresh.anonymousId, anon.anonymousId);
  assert.notEqual(fresh.sessionId, anon.sessionId);
  expectInLake({
    present: ids([anon, identify, known, group, later, fresh]),
    rows: {
      [identify.messageId]: { type: 'identify', user_id: 'user-42', anonymous_id: anon.anonymousId },
      // The headless browser plays a visitor (VISITOR_UA): read as one, not as a bot.
      [known.messageId]: { user_id: 'user-42', event: 'Known', browser: 'Chrome', os: 'Linux', device_class: 'desktop', is_bot: false },
      [group.messageId]: { type: 'group', group_id: 'acme', user_id: 'user-42' },
      [later.messageId]: { user_id: 'user-42' },
      [fresh.messageId]: { anonymous_id: fresh.anonymousId, session_id: fresh.sessionId },
    },
  });
});

test('page hide: the queue goes out by beacon (text/plain, key in the query)', async () => {
  const page = await open(context, site, '/');
  await page.evaluate(() => { for (let i = 0; i < 3; i++) window.Service.analytics.track('Hidden', { i }); });
  await page.goto('about:blank');
  const hidden = await arrived('Hidden', 3);
  const req = proxy.requests.find((r) => r.events.some((e) => e.event === 'Hidden'));
  assert.equal(req.status, 200);
  assert.match(req.contentType, /^text\/plain/, 'a beacon (fetch sends application/json)');
  assert.ok(req.appKeyInQuery && req.appKeyInQuery.startsWith('ik_'));
  assert.equal(req.events.length, 4, 'the page view and the three events, in one beacon');
  expectInLake({ present: ids(req.events) });
  assert.equal(hidden.length, 3);
});

test('page hide with a big queue: beacons under 64 KiB; what the browser refuses is kept for the next load', async () => {
  const page = await open(context, site, '/');
  await page.evaluate(() => { for (let i = 0; i < 4; i++) window.Service.analytics.track('Big', { i, text: 'x'.repeat(25000) }); });
  await page.goto('about:blank');
  await waitFor(() => proxy.tracked('Big').length >= 2, 'a first beacon');
  const beacons = proxy.requests.filter((r) => /^text\/plain/.test(r.contentType));
  for (const b of beacons) {
    assert.ok(b.bytes < 65536, `a beacon of ${b.bytes} bytes`);
    assert.equal(b.status, 200);
  }
  // Chromium caps the bytes of beacons in flight at 64 KiB: a refused beacon's events were
  // stored, and the next page load sends them.
  await page.goto(site.base + '/');
  const big = await arrived('Big', 4);
  await idle(page);
  assert.deepEqual(big.map((e) => e.properties.i).sort(), [0, 1, 2, 3]);
  for (const e of big) assert.equal(proxy.sends(e.messageId, 200), 1);
  expectInLake({ present: ids(big) });
});

test('localStorage blocked: the anonymousId lives in a cookie and survives a reload', async () => {
  await context.addInitScript(() => Object.defineProperty(window, 'localStorage', { get() { throw new DOMException('blocked', 'SecurityError'); } }));
  const page = await open(context, site, '/');
  await track(page, 'Cookie 1');
  await flush(page);
  const [one] = await arrived('Cookie 1');
  await page.reload();
  await page.waitForFunction(() => window.Service.analytics.loaded);
  await track(page, 'Cookie 2');
  await flush(page);
  const [two] = await arrived('Cookie 2');
  assert.match(one.anonymousId, UUID_V4);
  assert.equal(two.anonymousId, one.anonymousId);
  assert.equal(two.sessionId, one.sessionId);
  const cookies = await context.cookies(site.base);
  assert.equal(cookies.find((c) => c.name === 'trb_aid')?.value, one.anonymousId);
  expectInLake({ present: ids([one, two]) });
});

test('server down: the newest 100 events are kept and delivered once after a reload, the oldest dropped', async () => {
  proxy.down = true;
  const page = await open(context, site, '/');
  await page.evaluate(() => { for (let i = 0; i < 105; i++) window.Service.analytics.track('Down', { i }); window.Service.analytics.flush(); });
  await waitFor(() => page.evaluate(() => {
    const s = window.Service.analytics.debug();
    return s.stored === 100 && s.queued === 0 && s.inflight === 0;
  }), '100 events in the retry store');
  const attempted = proxy.requests.flatMap((r) => r.events).filter((e) => e.event === 'Down');
  const byIndex = new Map(attempted.map((e) => [e.properties.i, e.messageId]));
  assert.equal(byIndex.size, 105, 'every event was tried once the server was down');
  await page.close();

  proxy.down = false;
  const again = await open(context, site, '/');
  await waitFor(() => proxy.tracked('Down').length >= 100, '100 stored events delivered');
  await flush(again);
  await idle(again);
  const delivered = proxy.tracked('Down').map((e) => e.properties.i).sort((a, b) => a - b);
  assert.deepEqual(delivered, Array.from({ length: 100 }, (_, k) => k + 5), 'the newest 100, once each');
  for (let i = 0; i < 105; i++) assert.ok(proxy.sends(byIndex.get(i), 200) <= 1);
  // The retry kept the client's timestamps.
  const kept = proxy.tracked('Down').find((e) => e.properties.i === 5);
  assert.ok(Date.parse(kept.timestamp) <= proxy.requests.find((r) => r.status === 200).at);
  expectInLake({
    present: Array.from({ length: 100 }, (_, k) => byIndex.get(k + 5)),
    absent: [0, 1, 2, 3, 4].map((i) => byIndex.get(i)),
  });
});

test('a 400 is final: the events are dropped with a warning, never retried', async () => {
  proxy.fail(400);
  const page = await open(context, site, '/');
  await track(page, 'Refused');
  await flush(page);
  const refused = await waitFor(() => proxy.requests.find((r) => r.status === 400), 'the refused batch');
  await waitFor(() => page.warnings.some((w) => /dropped: HTTP 400/.test(w)), 'a console warning');
  await idle(page);
  await track(page, 'Fine');
  await flush(page);
  await arrived('Fine');
  await idle(page);
  const refusedId = refused.events.find((e) => e.event === 'Refused').messageId;
  assert.equal(proxy.sends(refusedId), 1, 'sent once, never again');
  expectInLake({ present: ids(proxy.tracked('Fine')), absent: ids(refused.events) });
});

test('a 429 with Retry-After is retried once it has passed', async () => {
  proxy.fail(429, { 'Retry-After': '2' });
  const page = await open(context, site, '/');
  await track(page, 'Busy');
  await flush(page);
  const [busy] = await arrived('Busy');
  const tries = proxy.requests.filter((r) => r.events.some((e) => e.messageId === busy.messageId));
  assert.deepEqual(tries.map((r) => r.status), [429, 200]);
  const gap = tries[1].at - tries[0].at;
  assert.ok(gap >= 1900 && gap < 15000, `retried after ${gap} ms`);
  await idle(page);
  expectInLake({ present: ids(tries[1].events) });
});

test('a Retry-After still running is honoured after a reload', async () => {
  proxy.fail(429, { 'Retry-After': '3' });
  const page = await open(context, site, '/');
  await track(page, 'Patient');
  await flush(page);
  const refused = await waitFor(() => proxy.requests.find((r) => r.status === 429), 'the 429');
  await waitFor(() => page.evaluate(() => window.Service.analytics.debug().stored === 2), 'the events stored');
  await page.close();
  const again = await open(context, site, '/');
  const [patient] = await arrived('Patient');
  const retry = proxy.requests.find((r) => r.status === 200 && r.events.some((e) => e.messageId === patient.messageId));
  const gap = retry.at - refused.at;
  assert.ok(gap >= 2900, `retried ${gap} ms after a Retry-After of 3 s`);
  await flush(again);
  await idle(again);
  assert.equal(proxy.sends(patient.messageId), 2);
  expectInLake({ present: ids(retry.events) });
});

for (const locks of [true, false]) {
  test(`two tabs do not send the same stored events twice (${locks ? 'Web Locks' : 'the owner marker alone'})`, async () => {
    if (!locks) await context.addInitScript(() => { delete Navigator.prototype.locks; });
    await twoTabs(locks);
  });

  test(`a flush while the stored events are being sent does not send them again (${locks ? 'Web Locks' : 'the owner marker alone'})`, async () => {
    if (!locks) await context.addInitScript(() => { delete Navigator.prototype.locks; });
    await storeFive();
    // The answer to the store's send reaches the tab 1.5 s after the server gave it; the tab
    // is asked to flush (which drains the store) again and again until the answer is in.
    proxy.hold = 1500;
    const page = await open(context, site, '/');
    await waitFor(() => proxy.tracked('Shared').length >= 5, 'the stored events delivered');
    const flushes = [];
    await waitFor(async () => {
      await flush(page);
      flushes.push(Date.now());
      return page.evaluate(() => window.Service.analytics.debug().stored === 0);
    }, 'the store emptied');
    proxy.hold = 0;
    assert.ok(flushes.length >= 5, `${flushes.length} flushes while the answer was held`);
    await idle(page);
    assert.equal(sentShared().length, 5, 'each stored event reached the server once');
  });
}

// Five 'Shared' events (and the page view) left in the retry store while the server was down,
// then the server back.
async function storeFive() {
  proxy.down = true;
  const first = await open(context, site, '/');
  await page5(first);
  await waitFor(() => first.evaluate(() => window.Service.analytics.debug().stored === 6), 'six stored events');
  await first.close();
  proxy.down = false;
}

// The 'Shared' events of every request that reached the server.
const sentShared = () => proxy.requests.flatMap((r) => (r.status === 0 ? [] : r.events)).filter((e) => e.event === 'Shared');

async function twoTabs(locks) {
  await storeFive();
  const tabs = await Promise.all([open(context, site, '/one'), open(context, site, '/two')]);
  assert.equal(await tabs[0].evaluate(() => 'locks' in navigator), locks);
  await waitFor(() => proxy.tracked('Shared').length >= 5, 'the stored events delivered');
  for (const t of tabs) await flush(t);
  for (const t of tabs) await idle(t);
  const shared = sentShared();
  assert.equal(shared.length, 5, 'each stored event reached the server once');
  const answer = proxy.requests.find((r) => r.status === 200 && r.events.some((e) => e.event === 'Shared')).answer;
  assert.equal(answer.duplicates, 0);
  expectInLake({ present: ids(shared) });
}

async function page5(page) {
  await page.evaluate(() => { for (let i = 0; i < 5; i++) window.Service.analytics.track('Shared', { i }); window.Service.analytics.flush(); });
}

test('opt-out: nothing is sent and the queue is cleared, across a reload, until opt-in', async () => {
  const page = await open(context, site, '/');
  await track(page, 'Queued before opt-out');
  await page.evaluate(() => window.Service.analytics.optOut());
  assert.deepEqual(await page.evaluate(() => window.Service.analytics.debug()), { queued: 0, stored: 0, inflight: 0 });
  await track(page, 'Secret');
  await page.evaluate(() => window.Service.analytics.identify('nobody'));
  await flush(page);
  await page.reload();
  await page.waitForFunction(() => window.Service.analytics.loaded);
  await track(page, 'Secret after reload');
  await flush(page);
  await page.evaluate(() => window.Service.analytics.optIn());
  await track(page, 'Public');
  await flush(page);
  await arrived('Public');
  await idle(page);
  const everything = proxy.requests.flatMap((r) => r.events);
  assert.deepEqual(everything.map((e) => e.event || e.type), ['Public'], 'only what came after opt-in');
  assert.equal(everything[0].userId, undefined);
  expectInLake({ present: ids(everything) });
});

test('the session rotates after 30 minutes without an event, not before', async () => {
  await context.clock.install();
  const page = await open(context, site, '/');
  const step = async (name) => {
    await track(page, name);
    await flush(page);
    const [e] = await arrived(name);
    await idle(page);
    return e;
  };
  const s1 = await step('Session 1');
  await page.clock.fastForward('29:00');
  const s2 = await step('Session 2');
  await page.clock.fastForward('31:00');
  const s3 = await step('Session 3');
  assert.equal(s2.sessionId, s1.sessionId, '29 minutes: the same session');
  assert.match(s3.sessionId, /^ses_/);
  assert.notEqual(s3.sessionId, s2.sessionId, '31 minutes: a new session');
  assert.equal(s3.anonymousId, s1.anonymousId);
  expectInLake({ present: ids([s1, s2, s3]) });
});

test('Do Not Track: nothing is queued or sent', async () => {
  await context.addInitScript(() => Object.defineProperty(Navigator.prototype, 'doNotTrack', { get: () => '1' }));
  const page = await open(context, site, '/');
  await track(page, 'Tracked anyway?');
  await flush(page);
  assert.deepEqual(await page.evaluate(() => window.Service.analytics.debug()), { queued: 0, stored: 0, inflight: 0 });
  assert.deepEqual(proxy.requests, []);
});
