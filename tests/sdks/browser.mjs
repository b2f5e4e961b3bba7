// Segment's analytics.js (`@segment/analytics-next`, its UMD build from npm) in headless
// Chromium, loaded with the spawned server as its CDN (settings from
// /v1/projects/{writeKey}/settings): a page, a track and an identify, sent in one batch to
// /v1/b. Prints what was sent (analytics.js's own messageIds, the time of each call) and the
// batch's answer as JSON. Driven by tests/interop/sdks.rs.
//
//   node browser.mjs <base url> <write key>
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const [base, writeKey] = process.argv.slice(2);
const umd = path.join(path.dirname(fileURLToPath(import.meta.url)), 'node_modules/@segment/analytics-next/dist/umd');

// The site: one page that loads analytics.js from the same origin.
const site = http.createServer((req, res) => {
  if (req.url === '/') {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end('<!doctype html><title>Pricing</title><script src="/ajs/index.js"></script>');
    return;
  }
  const file = path.join(umd, path.basename(req.url));
  if (req.url.startsWith('/ajs/') && fs.existsSync(file)) {
    res.writeHead(200, { 'content-type': 'text/javascript' });
    res.end(fs.readFileSync(file));
    return;
  }
  res.writeHead(404).end();
});
await new Promise((resolve) => site.listen(0, '127.0.0.1', resolve));
const origin = `http://127.0.0.1:${site.address().port}`;

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const failures = [];
let out;
try {
  const page = await browser.newPage();
  page.on('pageerror', (e) => failures.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => failures.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  await page.goto(`${origin}/`);
  const batch = page.waitForResponse((r) => r.url() === `${base}/v1/b` && r.request().method() === 'POST', { timeout: 20000 });
  const sent = await page.evaluate(async ({ writeKey, base }) => {
    const [analytics] = await window.AnalyticsNext.AnalyticsBrowser.load({ writeKey, cdnURL: base });
    const calls = [];
    const call = async (type, fn) => {
      const at = Date.now();
      const ctx = await fn();
      calls.push({ type, at, messageId: ctx.event.messageId, event: ctx.event });
    };
    await call('page', () => analytics.page('Docs', 'Pricing', { plan: 'pro' }));
    await call('track', () => analytics.track('Signed Up', { plan: 'pro', seats: 3 }));
    await call('identify', () => analytics.identify('browser-user', { email: 'ada@example.com' }));
    return calls;
  }, { writeKey, base });
  const answer = await batch;
  out = { sent, status: answer.status(), answer: await answer.json(), failures };
} finally {
  await browser.close();
  site.close();
}
console.log(JSON.stringify(out));
