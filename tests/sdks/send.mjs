// Sends identify, track (userId only; a UUID anonymousId; a non-UUID anonymousId), page, screen,
// group and alias through a real server SDK from npm, with its defaults and only the host set,
// and prints what it sent as JSON: each call's values, the SDK's own messageId and the time of
// the call. Driven by tests/interop/sdks.rs.
//
//   node send.mjs segment|rudder <base url> <write key>
import zlib from 'node:zlib';
import { createRequire } from 'node:module';

const [sdk, host, writeKey] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const prefix = `${sdk}-node`;
const calls = [
  ['identify', { userId: `${prefix}-user`, traits: { plan: 'pro', email: 'ada@example.com' } }],
  ['track', { userId: `${prefix}-user`, event: 'Order Completed', properties: { total: 42.5, currency: 'EUR' } }],
  ['track', { anonymousId: '6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f', event: 'Signed Up', properties: { plan: 'free' } }],
  ['track', { anonymousId: `${prefix}-anon-cookie-123`, event: 'Viewed Item', properties: { sku: 'A-1' } }],
  ['page', { userId: `${prefix}-user`, name: 'Pricing', category: 'Docs',
    properties: { url: 'https://shop.example/pricing?x=1', path: '/pricing', title: 'Pricing', referrer: 'https://search.example/' } }],
  ['screen', { userId: `${prefix}-user`, name: 'Home', properties: { variant: 'dark' } }],
  ['group', { userId: `${prefix}-user`, groupId: `${prefix}-acme`, traits: { name: 'Acme', seats: 12 } }],
  ['alias', { userId: `${prefix}-user`, previousId: `${prefix}-anon-cookie-123` }],
];
// Rudder's callback gets the request's body (gzip on by default): its messages, as sent.
const sentMessages = (data) => {
  const body = Buffer.isBuffer(data) ? JSON.parse(zlib.gunzipSync(data)) : data;
  return body.batch;
};
const sent = [];
const failures = [];

async function viaSegment() {
  const { Analytics } = require('@segment/analytics-node');
  const analytics = new Analytics({ writeKey, host });
  analytics.on('error', (e) => failures.push(String(e?.reason ?? e?.code ?? e)));
  analytics.on('http_request', () => {});
  for (const [type, params] of calls) {
    const at = Date.now();
    analytics[type](params, (err, ctx) => {
      if (err) failures.push(`${type}: ${err}`);
      sent.push({ type, params, at, messageId: ctx.event.messageId, timestamp: ctx.event.timestamp });
    });
  }
  await analytics.closeAndFlush();
}

async function viaRudder() {
  const Analytics = require('@rudderstack/rudder-sdk-node');
  // An errorHandler, or a 4xx crashes node (toolchain notes); any error fails the test.
  const client = new Analytics(writeKey, { dataPlaneUrl: host, errorHandler: (e) => failures.push(String(e)) });
  const delivered = calls.map(([type, params], i) => new Promise((resolve) => {
    const at = Date.now();
    client[type](params, (err, data) => {
      if (err) failures.push(`${type}: ${err}`);
      // The batch holds the calls in order; this call's message is the one with its values.
      const msg = err ? null : sentMessages(data).find((m) => m.type === type && JSON.stringify(pick(m, params)) === JSON.stringify(params));
      sent.push({ type, params, at, index: i, messageId: msg?.messageId, timestamp: msg?.originalTimestamp });
      resolve();
    });
  }));
  await client.flush();
  await Promise.all(delivered);
}

function pick(m, params) {
  return Object.fromEntries(Object.keys(params).map((k) => [k, m[k]]));
}

await (sdk === 'segment' ? viaSegment() : viaRudder());
console.log(JSON.stringify({ sent, failures }));
