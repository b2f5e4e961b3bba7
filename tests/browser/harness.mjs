// The browser tests' harness: headless Chromium (playwright-core), a test page served by the
// tests only, and a recording proxy in front of the real Tributary server that can play a
// server that is down, a 400 or a 429.
//
// Started by tests/api/browser.rs, which passes:
//   TRIBUTARY_BASE       the real server, e.g. http://127.0.0.1:41234
//   TRIBUTARY_APP_KEY    an integration key of an app
//   TRIBUTARY_MANIFEST   a file where the tests append what the lake must (not) hold
//   TRIBUTARY_ADMIN_TOKEN the admin token (the survey tests make their own app and surveys)
//   SCREENSHOT_DIR       where screenshots go (target/screenshots)
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';

export const BASE = process.env.TRIBUTARY_BASE;
export const APP_KEY = process.env.TRIBUTARY_APP_KEY;
export const ADMIN_TOKEN = process.env.TRIBUTARY_ADMIN_TOKEN;
const MANIFEST = process.env.TRIBUTARY_MANIFEST;
const SHOTS = process.env.SCREENSHOT_DIR;

if (!BASE || !APP_KEY || !MANIFEST) {
  throw new Error('run the browser tests through `cargo nextest run --test interop browser` (or tests/run): TRIBUTARY_BASE, TRIBUTARY_APP_KEY and TRIBUTARY_MANIFEST are missing');
}

export const CHROMIUM = '/usr/bin/chromium';

// The user agent the test browser sends: Chromium's own, without its `HeadlessChrome` marker.
// The collector flags headless browsers as bots and leaves them out of the traffic rollups
// (`collector.count_bots`); the tests play visitors, so they count as a visitor's browser
// would, and the server runs with its default settings.
export const VISITOR_UA = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36';

export async function launch() {
  return chromium.launch({
    executablePath: CHROMIUM,
    // playwright-core gives every launch a fresh temporary user-data-dir.
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      `--user-agent=${VISITOR_UA}`],
  });
}

function listen(server) {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)));
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

// The recording proxy: every collect request is logged with its events and the status the
// browser got (0 when the "server" was down).
export class Proxy {
  constructor() {
    this.requests = [];
    this.down = false;
    this.faults = [];
    this.hold = 0;
    this.server = http.createServer((req, res) => this.handle(req, res));
  }

  async start() {
    this.port = await listen(this.server);
    this.base = `http://127.0.0.1:${this.port}`;
    return this;
  }

  reset() {
    this.requests = [];
    this.down = false;
    this.faults = [];
    this.hold = 0;
  }

  // The next collect POST is answered `status` with `headers` instead of reaching the server.
  fail(status, headers = {}) {
    this.faults.push({ status, headers });
  }

  async handle(req, res) {
    const body = await readBody(req);
    const url = new URL(req.url, this.base);
    if (this.down) {
      // Preflights are answered so the test learns which events the browser tried to send;
      // every POST finds the connection closed, as with a server that is down.
      if (req.method === 'OPTIONS') {
        res.writeHead(204, {
          'access-control-allow-origin': req.headers.origin || '*',
          'access-control-allow-methods': 'POST, OPTIONS',
          'access-control-allow-headers': 'Content-Type, Content-Encoding, X-App-Key',
        });
        res.end();
        return;
      }
      req.socket.destroy();
      if (req.method === 'POST') this.log(req, url, body, 0);
      return;
    }
    const cors = {
      'access-control-allow-origin': req.headers.origin || '*',
      'access-control-expose-headers': 'X-Request-Id, Retry-After',
    };
    if (req.method === 'POST' && this.faults.length) {
      const f = this.faults.shift();
      this.log(req, url, body, f.status);
      res.writeHead(f.status, { 'content-type': 'application/json', ...cors, ...f.headers });
      res.end(JSON.stringify({ success: false, error: { code: f.status === 429 ? 'RATE_LIMITED' : 'VALIDATION_ERROR', message: 'injected by the test proxy' }, meta: { requestId: 'req_test' } }));
      return;
    }
    const headers = { ...req.headers };
    delete headers.host;
    const up = http.request(BASE + req.url, { method: req.method, headers }, async (ures) => {
      const ubody = await readBody(ures);
      if (req.method === 'POST') this.log(req, url, body, ures.statusCode, ubody);
      // `hold`: the server's answer reaches the browser that many ms after the proxy logged it.
      if (req.method === 'POST' && this.hold) await new Promise((r) => setTimeout(r, this.hold));
      res.writeHead(ures.statusCode, ures.headers);
      res.end(ubody);
    });
    up.on('error', () => req.socket.destroy());
    up.end(body);
  }

  log(req, url, body, status, answer) {
    let parsed = {};
    try { parsed = JSON.parse(body.toString('utf8')); } catch { /* not JSON */ }
    let data = null;
    try { data = JSON.parse(answer.toString('utf8')).data; } catch { /* none */ }
    this.requests.push({
      at: Date.now(),
      status,
      contentType: req.headers['content-type'] || '',
      bytes: body.length,
      appKeyInQuery: url.searchParams.get('appKey'),
      sentAt: parsed.sentAt,
      events: Array.isArray(parsed.batch) ? parsed.batch : [],
      answer: data,
    });
  }

  // Accepted (200) events, in arrival order.
  accepted() {
    return this.requests.filter((r) => r.status === 200).flatMap((r) => r.events);
  }

  // How many requests that reached the proxy carried `messageId`.
  sends(messageId, onlyStatus) {
    return this.requests.filter((r) => (onlyStatus === undefined || r.status === onlyStatus) &&
      r.events.some((e) => e.messageId === messageId)).length;
  }

  // Accepted events of a track name (or, with type, of that type).
  tracked(name) {
    return this.accepted().filter((e) => e.type === 'track' && e.event === name);
  }

  close() {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(r));
  }
}

// The test page (served by the tests only): the README's snippet pointing at the real server
// for the script and at the proxy for the events, and one button per call. Any path answers
// the same page, so single-page-app URLs survive a reload. `?early=1` makes a call before the
// script has loaded; `?nosurveys=1` turns the survey popover off through the stub. `appKey`: the
// integration key the page uses (by default the one tests/interop/browser.rs made).
export class Site {
  constructor(proxy, appKey = APP_KEY) {
    this.proxy = proxy;
    this.appKey = appKey;
    this.server = http.createServer((req, res) => {
      const url = new URL(req.url, 'http://x');
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
      res.end(this.html(url.searchParams.has('early'), url.searchParams.has('nosurveys')));
    });
  }

  async start() {
    this.port = await listen(this.server);
    this.base = `http://127.0.0.1:${this.port}`;
    return this;
  }

  html(early, noSurveys) {
    return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Tracker test page</title>
<script>
!function(w,d,k,h,s){var a=(w.Service=w.Service||{}).analytics=w.Service.analytics||{};if(a.loaded||a.q)return;
a.q=[];"page track identify group reset flush optOut optIn surveys".split(" ").forEach(function(m){a[m]=function(){a.q.push([m].concat([].slice.call(arguments)))}});
var e=d.createElement("script");e.async=true;e.src=s+"/sdk/v1/analytics.js";e.setAttribute("data-app-key",k);e.setAttribute("data-host",h);
d.head.appendChild(e)}(window,document,${JSON.stringify(this.appKey)},${JSON.stringify(this.proxy.base)},${JSON.stringify(BASE)});
${early ? "window.Service.analytics.track('Early', {before: 'load'});" : ''}
${noSurveys ? 'window.Service.analytics.surveys(false);' : ''}
</script>
<style>body{font:16px system-ui,sans-serif;margin:2rem}button{margin:.25rem;padding:.5rem 1rem}</style>
</head><body>
<h1>Tributary tracker test page</h1>
<p>Served by the browser tests only. Script: <code>${BASE}/sdk/v1/analytics.js</code>; events go through the test proxy <code>${this.proxy.base}</code>.</p>
<p>
<button onclick="Service.analytics.page()">page()</button>
<button onclick="Service.analytics.track('Clicked', {button: 'track'})">track()</button>
<button onclick="Service.analytics.identify('user-1', {plan: 'pro'})">identify()</button>
<button onclick="Service.analytics.group('acme', {name: 'Acme'})">group()</button>
<button onclick="Service.analytics.reset()">reset()</button>
<button onclick="Service.analytics.flush()">flush()</button>
<button onclick="Service.analytics.optOut()">optOut()</button>
<button onclick="Service.analytics.optIn()">optIn()</button>
<button onclick="history.pushState({}, '', '/spa/' + Date.now())">pushState</button>
</p>
<pre id="state"></pre>
</body></html>`;
  }

  close() {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(r));
  }
}

// Polls `fn` (sync or async) until it returns a truthy value; fails with `what` at the deadline.
export async function waitFor(fn, what, timeoutMs = 15000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try { last = await fn(); } catch (e) { last = e; }
    if (last && !(last instanceof Error)) return last;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}` + (last instanceof Error ? `: ${last.message}` : ''));
    await new Promise((r) => setTimeout(r, 50));
  }
}

// A page with the tracker loaded.
export async function open(context, site, pathAndQuery = '/') {
  const page = await context.newPage();
  page.warnings = [];
  page.on('console', (m) => { if (m.type() === 'warning') page.warnings.push(m.text()); });
  await page.goto(site.base + pathAndQuery);
  await page.waitForFunction(() => window.Service && window.Service.analytics && window.Service.analytics.loaded);
  return page;
}

export const analytics = (page, fn, arg) => page.evaluate(fn, arg);

// Waits until the tracker of `page` has nothing queued, stored or in flight.
export function idle(page) {
  return waitFor(() => page.evaluate(() => {
    const s = window.Service.analytics.debug();
    return s.queued === 0 && s.stored === 0 && s.inflight === 0;
  }), 'the tracker to be idle');
}

// What the lake must hold once the server stops (checked by tests/api/browser.rs).
// `rows`: messageId -> {column: value} that its lake row must show.
export function expectInLake({ present = [], absent = [], rows = {} }) {
  fs.appendFileSync(MANIFEST, JSON.stringify({ present, absent, rows }) + '\n');
}

export async function screenshot(page, name) {
  if (!SHOTS) return;
  fs.mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, name), fullPage: true });
}
