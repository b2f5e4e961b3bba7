// The operator's paths (collector.script_path, collector.collect_path) in headless Chromium,
// with the default paths blocked as an ad blocker's list blocks them: the tracker loads from
// the operator's script path, its events go to the operator's collect path and land (the
// manifest tells tests/interop/browser.rs what the lake must hold), and no request of the page
// goes to /sdk/v1/analytics.js or /api/w/analytics/collect. Started by tests/interop/browser.rs,
// which adds TRIBUTARY_SCRIPT_PATH and TRIBUTARY_COLLECT_PATH to the harness's variables.
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import { BASE, APP_KEY, launch, waitFor, expectInLake, screenshot } from './harness.mjs';

const SCRIPT = process.env.TRIBUTARY_SCRIPT_PATH;
const COLLECT = process.env.TRIBUTARY_COLLECT_PATH;
if (!SCRIPT || !COLLECT) throw new Error('TRIBUTARY_SCRIPT_PATH and TRIBUTARY_COLLECT_PATH are missing');
const DEFAULTS = /\/sdk\/v1\/analytics\.js|\/api\/w\/analytics\/collect/;
// The tracker as in the repository (its default paths), for a copy hosted on the site itself.
const SOURCE = fs.readFileSync(new URL('../../sdk/analytics.js', import.meta.url), 'utf8');

// The dashboard's snippet with the operator's script path (tests/api/paths.rs checks that the
// dashboard writes it so), and a page that hosts its own copy of the tracker.
function html(title, script) {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${title}</title>${script}</head>
<body><h1>${title}</h1><p>The default paths are blocked in this browser.</p></body></html>`;
}
const SNIPPET = `<script>
!function(w,d,k,h,s){var a=(w.Service=w.Service||{}).analytics=w.Service.analytics||{};if(a.loaded||a.q)return;
a.q=[];"page track identify group reset flush optOut optIn".split(" ").forEach(function(m){a[m]=function(){a.q.push([m].concat([].slice.call(arguments)))}});
var e=d.createElement("script");e.async=true;e.src=s+${JSON.stringify(SCRIPT)};e.setAttribute("data-app-key",k);e.setAttribute("data-host",h);
d.head.appendChild(e)}(window,document,${JSON.stringify(APP_KEY)},${JSON.stringify(BASE)},${JSON.stringify(BASE)});
</script>`;
const HOSTED = `<script async src="/vendor/t.js" data-app-key="${APP_KEY}" data-host="${BASE}" data-collect-path="${COLLECT}" data-surveys="off"></script>`;

let browser, site, context, requests, collected;

before(async () => {
  site = http.createServer((req, res) => {
    if (req.url === '/vendor/t.js') {
      res.writeHead(200, { 'content-type': 'application/javascript' });
      return res.end(SOURCE);
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    res.end(req.url.startsWith('/hosted') ? html('Hosted copy', HOSTED) : html('Operator paths', SNIPPET));
  });
  await new Promise((r) => site.listen(0, '127.0.0.1', r));
  site.base = `http://127.0.0.1:${site.address().port}`;
  browser = await launch();
});
after(async () => {
  await browser?.close();
  site?.closeAllConnections();
  await new Promise((r) => (site ? site.close(r) : r()));
});
beforeEach(async () => {
  await context?.close();
  context = await browser.newContext();
  // What an ad blocker's list does to the default paths.
  await context.route(DEFAULTS, (route) => route.abort('blockedbyclient'));
  requests = [];
  collected = [];
  context.on('request', (r) => requests.push(r.url()));
  context.on('response', async (res) => {
    const req = res.request();
    if (req.method() !== 'POST' || new URL(req.url()).pathname !== COLLECT) return;
    const body = JSON.parse(req.postData() || '{}');
    let answer = null;
    try { answer = (await res.json()).data; } catch { /* no body to read */ }
    collected.push({ status: res.status(), events: body.batch || [], answer });
  });
});

// Loads `path`, tracks one event, flushes; answers the collect requests once the event is in.
async function trackOn(path, name) {
  const page = await context.newPage();
  await page.goto(site.base + path);
  await page.waitForFunction(() => window.Service && window.Service.analytics && window.Service.analytics.loaded);
  await page.evaluate((n) => { window.Service.analytics.track(n, { via: 'operator paths' }); window.Service.analytics.flush(); }, name);
  await waitFor(() => collected.some((r) => r.events.some((e) => e.event === name)), `"${name}" posted to ${COLLECT}`);
  return page;
}

function assertLanded(name) {
  const events = collected.flatMap((r) => r.events);
  for (const r of collected) {
    assert.equal(r.status, 200);
    assert.equal(r.answer?.accepted, r.events.length, JSON.stringify(r.answer));
  }
  const tracked = events.find((e) => e.event === name);
  const pageView = events.find((e) => e.type === 'page');
  assert.ok(tracked && pageView, 'the page view at load and the track');
  const toDefaults = requests.filter((u) => DEFAULTS.test(new URL(u).pathname));
  assert.deepEqual(toDefaults, [], 'no request to a default path');
  expectInLake({
    present: events.map((e) => e.messageId),
    rows: { [tracked.messageId]: { type: 'track', event: name } },
  });
}

test("the snippet's tracker loads from the operator's script path and its events land through the collect path", async () => {
  const page = await trackOn('/shop', 'Past the blocker');
  assert.ok(requests.includes(`${BASE}${SCRIPT}`), 'the script came from the operator path');
  assertLanded('Past the blocker');
  await screenshot(page, 'tracker-operator-paths.png');
});

test('a copy hosted elsewhere sends to data-collect-path', async () => {
  await trackOn('/hosted', 'Hosted copy');
  assert.ok(requests.includes(`${site.base}/vendor/t.js`));
  assertLanded('Hosted copy');
});
