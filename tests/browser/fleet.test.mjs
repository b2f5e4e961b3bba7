// The browser tracker in headless Chromium against an edge collector of a fleet (started by
// tests/interop/fleet.rs): visitors of two apps load the tracker from the edge and send their
// page views and track events through the recording proxy to it. The manifest names every
// event the edge acknowledged (200); the Rust side checks the bucket holds each once and the
// control node's rollups equal DuckDB over it.
//
// Besides the harness's variables: TRIBUTARY_APP_KEY_2, the second app's integration key, and
// TRIBUTARY_VISITORS, how many visitors of each app (default 4).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, Proxy, Site, open, idle, expectInLake, APP_KEY } from './harness.mjs';

const APP_KEY_2 = process.env.TRIBUTARY_APP_KEY_2;
const VISITORS = Number(process.env.TRIBUTARY_VISITORS || 4);
let browser, proxy;

before(async () => {
  proxy = await new Proxy().start();
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await proxy?.close();
});

test('visitors of two apps send through the edge: every event acknowledged', async () => {
  assert.ok(APP_KEY_2, 'TRIBUTARY_APP_KEY_2 names the second app');
  for (const key of [APP_KEY, APP_KEY_2]) {
    const site = await new Site(proxy, key).start();
    for (let v = 0; v < VISITORS; v++) {
      // A context per visitor: its own storage, so its own anonymousId.
      const context = await browser.newContext();
      const page = await open(context, site, `/fleet/p${v % 3}?nosurveys=1`);
      await page.evaluate((n) => {
        const a = window.Service.analytics;
        a.track('Clicked', { visitor: n });
        if (n % 2 === 0) a.track('Bought', { visitor: n });
        a.flush();
      }, v);
      await idle(page);
      await context.close();
    }
    await site.close();
  }
  const refused = proxy.requests.filter((r) => r.status !== 200);
  assert.deepEqual(refused.map((r) => r.status), [], 'the edge answered every batch 200');
  const accepted = proxy.accepted();
  // Per visitor: the page view at load and one or two track events.
  assert.ok(accepted.length >= 2 * VISITORS * 2, `${accepted.length} events acknowledged`);
  expectInLake({ present: accepted.map((e) => e.messageId) });
});
