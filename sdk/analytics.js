/*! Tributary analytics.js v1 | window.Service.analytics | interface §6, api.md §7 */
(function (w, d) {
  'use strict';
  var svc = (w.Service = w.Service || {});
  var stub = svc.analytics;
  if (stub && stub.loaded) return;

  var VERSION = '1.0.0';
  var P = 'trb.'; // storage key prefix
  var BATCH_MS = 5000, BATCH_N = 10, SESSION_MS = 30 * 60 * 1000;
  var STORE_MAX = 100, BEACON_MAX = 60000, REQ_MAX = 400000, LOCK_MS = 20000;

  // The server writes its own paths here (collector.script_path, collect_path); data-collect-path
  // or the stub's config.collectPath overrides the second (for a copy hosted elsewhere).
  var SCRIPT_PATH = '/sdk/v1/analytics.js', COLLECT_PATH = '/api/w/analytics/collect';
  var script = d.currentScript || d.querySelector('script[data-app-key]') ||
    d.querySelector('script[src*="' + SCRIPT_PATH + '"]');
  var attr = function (n) { return script && script.getAttribute(n); };
  // data-preview: the dashboard's survey builder draws its live preview with this popover
  // (Service.surveyPreview(survey, element)); nothing else runs: no events, storage or requests.
  if (attr('data-preview') != null) { svc.surveyPreview = preview; return; }
  var conf = (stub && stub.config) || {};
  var KEY = attr('data-app-key') || conf.appKey;
  var HOST = attr('data-host') || conf.host;
  if (!HOST && script && script.src) HOST = new URL(script.src).origin;
  HOST = String(HOST || '').replace(/\/+$/, '');
  var URL_ = HOST + (attr('data-collect-path') || conf.collectPath || COLLECT_PATH);
  if (!KEY) console.warn('[tributary] no data-app-key on the script tag: events will be refused');

  // ---- storage: localStorage, a cookie when it is blocked (ids only), memory at last ----
  var ls = null;
  try { ls = w.localStorage; ls.setItem(P + 't', '1'); ls.removeItem(P + 't'); } catch (e) { ls = null; }
  var mem = {};
  function get(k) {
    try { if (ls) return ls.getItem(P + k); } catch (e) { /* blocked */ }
    var m = d.cookie.match(new RegExp('(?:^|; )trb_' + k + '=([^;]*)'));
    return m ? decodeURIComponent(m[1]) : (k in mem ? mem[k] : null);
  }
  function set(k, v, cookie) {
    try { if (ls) { if (v == null) ls.removeItem(P + k); else ls.setItem(P + k, v); return; } } catch (e) { /* full or blocked */ }
    if (cookie) {
      d.cookie = 'trb_' + k + '=' + (v == null ? '' : encodeURIComponent(v)) + '; path=/; SameSite=Lax; max-age=' +
        (v == null ? 0 : 31536000);
    }
    if (v == null) delete mem[k]; else mem[k] = v;
  }
  function getJSON(k, dflt) { try { var v = JSON.parse(get(k)); return v == null ? dflt : v; } catch (e) { return dflt; } }

  // ---- ids ----
  function uuid() {
    if (w.crypto && crypto.randomUUID) return crypto.randomUUID();
    var b = new Uint8Array(16);
    crypto.getRandomValues(b);
    b[6] = (b[6] & 15) | 64; b[8] = (b[8] & 63) | 128;
    var h = [];
    for (var i = 0; i < 16; i++) h.push((b[i] + 256).toString(16).slice(1));
    h = h.join('');
    return h.slice(0, 8) + '-' + h.slice(8, 12) + '-' + h.slice(12, 16) + '-' + h.slice(16, 20) + '-' + h.slice(20);
  }
  function rid(prefix) { return prefix + uuid().replace(/-/g, ''); }
  function anonymousId() {
    var a = get('aid');
    if (!a) { a = uuid(); set('aid', a, 1); }
    return a;
  }
  function session() {
    var now = Date.now(), s = getJSON('ses', null);
    if (!s || !s.id || now - s.last > SESSION_MS) s = { id: rid('ses_') };
    s.last = now;
    set('ses', JSON.stringify(s), 1);
    return s.id;
  }

  // ---- consent ----
  var nav = w.navigator || {};
  function dnt() { return [nav.doNotTrack, w.doNotTrack, nav.msDoNotTrack].some(function (v) { return v === '1' || v === 'yes'; }); }
  function off() { return dnt() || get('optout') === '1'; }

  // ---- context ----
  function device() {
    var ua = nav.userAgent || '';
    if (/iPad|Tablet|PlayBook|Silk|Android(?!.*Mobi)/i.test(ua)) return 'tablet';
    if (/Mobi|iPhone|iPod|Android|Windows Phone/i.test(ua)) return 'mobile';
    return 'desktop';
  }
  var lastUrl = location.href, referrer = d.referrer || '';
  function pageInfo() {
    return { url: location.href, path: location.pathname, title: d.title, referrer: referrer };
  }
  function context() {
    var tz;
    try { tz = Intl.DateTimeFormat().resolvedOptions().timeZone; } catch (e) { /* old browser */ }
    var c = {
      page: pageInfo(),
      device: { type: device() },
      locale: nav.language || (nav.languages && nav.languages[0]) || undefined,
      screen: { width: w.screen ? screen.width : 0, height: w.screen ? screen.height : 0 },
      library: { name: 'tributary.js', version: VERSION }
    };
    if (tz) c.timezone = tz;
    return c;
  }

  // ---- queue: memory (this tab's next batch) and the retry store (shared by tabs) ----
  var queue = [], timer = 0, retryTimer = 0, attempts = 0, backoffUntil = 0, inflight = 0, seq = 0;
  var draining = false; // this tab is sending from the retry store (one send at a time per tab)
  var TAB = uuid();

  function stored() { return getJSON('q', []); }
  // Keeps the newest STORE_MAX (by the order events were queued), without duplicates.
  function saveStored(items) {
    var seen = {}, out = [];
    items.sort(function (a, b) { return a.o - b.o; });
    for (var i = items.length - 1; i >= 0 && out.length < STORE_MAX; i--) {
      var id = items[i].e.messageId;
      if (!seen[id]) { seen[id] = 1; out.unshift(items[i]); }
    }
    set('q', out.length ? JSON.stringify(out) : null);
  }
  function keep(items) { if (items.length && !off()) saveStored(stored().concat(items)); }
  function forget(items) {
    var gone = {};
    items.forEach(function (i) { gone[i.e.messageId] = 1; });
    saveStored(stored().filter(function (i) { return !gone[i.e.messageId]; }));
  }

  function enqueue(ev) {
    if (off()) return;
    ev.messageId = rid('msg_');
    ev.anonymousId = anonymousId();
    var uid = get('uid');
    if (uid) ev.userId = uid;
    ev.sessionId = session();
    ev.timestamp = new Date().toISOString();
    ev.context = context();
    queue.push({ o: Date.now() * 1000 + (seq++ % 1000), e: ev });
    if (queue.length >= BATCH_N) flush();
    else if (!timer) timer = setTimeout(flush, BATCH_MS);
  }

  function bytes(s) { return w.TextEncoder ? new TextEncoder().encode(s).length : s.length * 3; }
  // Chunks of at most `max` bytes of JSON (and 100 events).
  function chunks(items, max) {
    var out = [], cur = [], size = 0;
    items.forEach(function (i) {
      var n = bytes(JSON.stringify(i.e)) + 1;
      if (cur.length && (size + n > max || cur.length >= 100)) { out.push(cur); cur = []; size = 0; }
      cur.push(i); size += n;
    });
    if (cur.length) out.push(cur);
    return out;
  }
  function body(items) {
    return JSON.stringify({ batch: items.map(function (i) { return i.e; }), sentAt: new Date().toISOString() });
  }

  // One POST; done(true) on 2xx, done(false) on a retryable failure (network, 429, 5xx: backoff
  // scheduled), done(null) on any other 4xx (final: the events are dropped with a warning).
  function post(items, done) {
    var b = body(items), ctl = w.AbortController ? new AbortController() : null;
    var t = ctl && setTimeout(function () { ctl.abort(); }, 15000);
    inflight++;
    var finish = function (ok, retryAfter) {
      inflight--;
      clearTimeout(t);
      if (ok === true) { attempts = 0; backoffUntil = 0; set('ra', null); }
      else if (ok === false) failed(retryAfter);
      done(ok);
    };
    fetch(URL_, {
      method: 'POST', body: b, keepalive: b.length < BEACON_MAX, signal: ctl && ctl.signal,
      headers: { 'Content-Type': 'application/json', 'X-App-Key': KEY }
    }).then(function (r) {
      if (r.ok) return finish(true);
      if (r.status === 429 || r.status >= 500) return finish(false, r.headers.get('Retry-After'));
      console.warn('[tributary] ' + items.length + ' event(s) dropped: HTTP ' + r.status);
      finish(null);
    }, function () { finish(false); });
  }

  // A retryable failure: exponential backoff (1 s doubling to 60 s), or the server's Retry-After.
  function failed(retryAfter) {
    var ms = Math.min(60000, 1000 * Math.pow(2, attempts++)) * (0.8 + Math.random() * 0.4);
    if (retryAfter) {
      var s = Number(retryAfter);
      var ra = isNaN(s) ? Date.parse(retryAfter) - Date.now() : s * 1000;
      if (ra >= 0) { ms = ra; set('ra', String(Date.now() + ra)); }
    }
    backoffUntil = Date.now() + ms;
    schedule(ms);
  }
  function schedule(ms) {
    clearTimeout(retryTimer);
    retryTimer = setTimeout(drain, Math.max(0, ms));
  }

  function flush() {
    clearTimeout(timer); timer = 0;
    if (off()) { queue = []; return; }
    var items = queue; queue = [];
    if (!items.length) return drain();
    if (Date.now() < waitUntil()) { keep(items); return; }
    chunks(items, REQ_MAX).forEach(function (c) {
      post(c, function (ok) { if (ok === false) keep(c); if (ok) drain(); });
    });
  }
  function waitUntil() { return Math.max(backoffUntil, Number(get('ra')) || 0); }

  // ---- sending the retry store: one tab at a time (Web Locks, and an owner marker with expiry) ----
  // A send already under way in this tab finishes first (it drains again when it succeeds): the
  // owner marker alone cannot tell this tab's two sends apart, and both would read the same items.
  function drain() {
    if (draining || off() || !stored().length) return;
    var wait = waitUntil() - Date.now();
    if (wait > 0) return schedule(wait);
    draining = true;
    var done = function () { draining = false; };
    if (nav.locks && nav.locks.request) {
      nav.locks.request(P + 'send', { ifAvailable: true }, function (lock) {
        if (!lock) { done(); return schedule(1000 + Math.random() * 1000); }
        return new Promise(function (res) { claim(function () { done(); res(); }); });
      });
    } else {
      claim(done);
    }
  }
  function claim(release) {
    var l = getJSON('lock', null), now = Date.now();
    if (l && l.exp > now && l.tab !== TAB) { schedule(l.exp - now + Math.random() * 500); return release(); }
    set('lock', JSON.stringify({ tab: TAB, exp: now + LOCK_MS }));
    setTimeout(function () {
      var l2 = getJSON('lock', null);
      if (!l2 || l2.tab !== TAB) { schedule(1000 + Math.random() * 1000); return release(); }
      var items = chunks(stored(), REQ_MAX)[0] || [];
      if (!items.length) { set('lock', null); return release(); }
      post(items, function (ok) {
        if (ok !== false) forget(items);
        set('lock', null);
        release();
        if (ok) drain();
      });
    }, nav.locks ? 0 : 100 + Math.random() * 100);
  }

  // ---- page hide: the queue goes out by beacon (text/plain, key in the query, < 64 KiB each) ----
  function beacon() {
    clearTimeout(timer); timer = 0;
    if (!queue.length || off()) return;
    var items = queue; queue = [];
    if (!nav.sendBeacon) { keep(items); return; }
    chunks(items, BEACON_MAX).forEach(function (c) {
      var ok = false;
      try {
        ok = nav.sendBeacon(URL_ + '?appKey=' + encodeURIComponent(KEY), new Blob([body(c)], { type: 'text/plain' }));
      } catch (e) { /* too big or refused */ }
      if (!ok) keep(c);
    });
  }
  d.addEventListener('visibilitychange', function () { if (d.visibilityState === 'hidden') beacon(); });
  w.addEventListener('pagehide', beacon);

  // ---- surveys: the in-page popover (api.md §4). Asked for at load and after every page change;
  // the first eligible survey not completed or dismissed here is shown in a non-modal corner
  // dialog (a shadow root keeps its styles and the page's apart). Every step posts the answers so
  // far (completed: false, so a visitor who leaves half-way still counts), the last one
  // completed: true; the posts go one after another, in order. ----
  var svOn = attr('data-surveys') !== 'off' && conf.surveys !== false, svBusy = 0, svChecks = 0;
  var svCur = null, svClose = null, svHost = null, svRoot = null, svSend = Promise.resolve(), PV = null;
  function css() { return ':host{all:initial}' +
    '.c{--bg:#fff;--fg:#111827;--mu:#6b7280;--bd:#d1d5db;--sf:#f3f4f6;--ac:#2563eb;--er:#b91c1c;position:fixed;right:20px;bottom:20px;' +
    'z-index:2147483000;box-sizing:border-box;width:min(380px,calc(100vw - 40px));padding:20px;border:1px solid var(--bd);border-radius:12px;' +
    'background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;box-shadow:0 12px 32px rgba(0,0,0,.18)}' +
    '@media (prefers-color-scheme:dark){.c{--bg:#1f2937;--fg:#f9fafb;--mu:#9ca3af;--bd:#4b5563;--sf:#374151;--ac:#60a5fa;--er:#fca5a5}}' +
    '.c *{box-sizing:border-box;font:inherit;color:inherit}' +
    '.t{margin:0 28px 4px 0;font-size:12px;color:var(--mu)}.c h2{margin:0 28px 14px 0;font-size:16px;font-weight:600}' +
    '.x{position:absolute;top:10px;right:10px;width:28px;height:28px;border:0;border-radius:6px;background:none;color:var(--mu);font-size:20px;line-height:1;cursor:pointer}' +
    '.s{display:flex;gap:4px}.s button{flex:1;min-width:0;height:38px;border:1px solid var(--bd);border-radius:6px;background:var(--sf);cursor:pointer}' +
    '.s [aria-checked=true]{background:var(--ac);border-color:var(--ac);color:var(--bg);font-weight:600}' +
    '.h{display:flex;justify-content:space-between;margin-top:6px;font-size:12px;color:var(--mu)}' +
    'label{display:flex;gap:10px;align-items:center;padding:8px 10px;margin-bottom:6px;border:1px solid var(--bd);border-radius:6px;cursor:pointer}' +
    'input{margin:0;accent-color:var(--ac)}textarea{display:block;width:100%;min-height:84px;padding:8px 10px;border:1px solid var(--bd);border-radius:6px;background:var(--bg);resize:vertical}' +
    '.e{margin:8px 0 0;color:var(--er);font-size:13px}.e:empty{display:none}' +
    '.f{display:flex;justify-content:space-between;align-items:center;margin-top:16px;color:var(--mu);font-size:12px}' +
    '.g{padding:8px 18px;border:0;border-radius:6px;background:var(--ac);color:var(--bg);font-weight:600;cursor:pointer}' +
    'button:focus-visible,input:focus-visible,textarea:focus-visible{outline:2px solid var(--ac);outline-offset:2px}' +
    (PV ? '.c{position:relative;inset:auto;z-index:0;max-width:100%}' : ''); }

  function el(tag, attrs, text, parent) {
    var e = d.createElement(tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text != null) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function enc(v) { return encodeURIComponent(v); }
  // The traits a survey answer tells (as the survey list's attr.<key>): scalars the server takes.
  function attrs() {
    var t = getJSON('traits', {}), out = {}, n = 0, cc = /[\u0000-\u001f\u007f-\u009f]/;
    for (var k in t) {
      var v = t[k], ty = typeof v;
      if (n < 50 && k.length && k.length <= 100 && !cc.test(k) && (ty === 'number' || ty === 'boolean' ||
        (ty === 'string' && v.length <= 500 && !cc.test(v)))) { out[k] = v; n++; }
    }
    return out;
  }
  function svSeen() { return getJSON('sv', {}); }
  function svMark(id, how) { if (PV) return; var m = svSeen(); m[id] = how; set('sv', JSON.stringify(m)); }

  function surveys() {
    if (!svOn || svBusy || svCur || off() || !w.fetch) return;
    if (!d.body) return d.addEventListener('DOMContentLoaded', surveys);
    svBusy = 1;
    var uid = get('uid'), t = getJSON('traits', {});
    var q = '?anonymousId=' + enc(anonymousId()) + '&url=' + enc(location.href.slice(0, 4096));
    if (uid) q += '&userId=' + enc(uid);
    for (var k in t) if (t[k] != null && typeof t[k] !== 'object') q += '&attr.' + enc(k) + '=' + enc(t[k]);
    var end = function (s) { svBusy = 0; svChecks++; if (s && svOn && !svCur) show(s); };
    fetch(HOST + '/api/w/surveys' + q, { headers: { 'X-App-Key': KEY } })
      .then(function (r) { return r.ok ? r.json() : {}; })
      .then(function (b) {
        var seen = svSeen();
        end((b.data || []).filter(function (s) { return !seen[s.id] && s.questions.length; })[0]);
      }, function () { end(); });
  }

  // The control of one question; `pick(value)` records the answer (null: none). Returns what
  // takes the focus.
  function control(q, box, pick) {
    var t = q.type, multi = t === 'multiple_choice', first;
    if (t === 'scale' || t === 'rating') {
      var lo = q.min != null ? q.min : t === 'scale' ? 0 : 1, hi = q.max != null ? q.max : t === 'scale' ? 10 : 5;
      var g = el('div', { class: 's', role: 'radiogroup', 'aria-labelledby': 'trb-q' }, null, box), bs = [];
      var focus = function (b) { bs.forEach(function (o) { o.tabIndex = o === b ? 0 : -1; }); b.focus(); };
      for (var n = lo; n <= hi; n++) {
        (function (n) {
          var b = el('button', { type: 'button', role: 'radio', 'aria-checked': 'false', 'aria-label': n + ' of ' + hi }, String(n), g);
          b.tabIndex = bs.length ? -1 : 0;
          b.onclick = function () { bs.forEach(function (o) { o.setAttribute('aria-checked', o === b); }); focus(b); pick(n); };
          bs.push(b);
        })(n);
      }
      g.onkeydown = function (e) {
        var step = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 }[e.key], j = bs.indexOf(e.target);
        if (step && j >= 0) { e.preventDefault(); focus(bs[(j + step + bs.length) % bs.length]); }
      };
      var h = el('div', { class: 'h', 'aria-hidden': 'true' }, null, box);
      el('span', {}, t === 'scale' ? 'Not likely' : 'Very poor', h);
      el('span', {}, t === 'scale' ? 'Very likely' : 'Excellent', h);
      return bs[0];
    }
    if (t === 'text') {
      var ta = el('textarea', { 'aria-labelledby': 'trb-q', maxlength: '5000', placeholder: 'Type your answer' }, null, box);
      ta.oninput = function () { pick(ta.value.trim() || null); };
      return ta;
    }
    var f = el('div', { role: multi ? 'group' : 'radiogroup', 'aria-labelledby': 'trb-q' }, null, box);
    (q.options || []).forEach(function (o) {
      var l = el('label', {}, null, f), i = el('input', { type: multi ? 'checkbox' : 'radio', name: 'trb-o', value: o.id }, null, l);
      el('span', {}, o.label, l);
      i.onchange = function () {
        var on = [].filter.call(f.querySelectorAll('input'), function (x) { return x.checked; }).map(function (x) { return x.value; });
        pick(multi ? (on.length ? on : null) : o.id);
      };
      first = first || i;
    });
    return first;
  }

  function show(s) {
    var prev = d.activeElement, i = 0, answers = {}, sent = false, qs = s.questions;
    if (!svHost) {
      svHost = el('div', { 'data-tributary-survey': '' });
      svRoot = svHost.attachShadow ? svHost.attachShadow({ mode: 'open' }) : svHost;
      // A constructed style sheet where it exists: a page's CSP without 'unsafe-inline' allows it.
      try { var ss = new CSSStyleSheet(); ss.replaceSync(css()); svRoot.adoptedStyleSheets = [ss]; } catch (e) { el('style', {}, css(), svRoot); }
    }
    svCur = s;
    (PV || d.body).appendChild(svHost);
    var c = el('div', { class: 'c', role: 'dialog', 'aria-modal': 'false', 'aria-labelledby': 'trb-q' }, null, svRoot);
    var x = el('button', { class: 'x', type: 'button', 'aria-label': 'Close survey' }, '\u00d7', c);
    el('p', { class: 't' }, s.title, c);
    var qh = el('h2', { id: 'trb-q' }, null, c), box = el('div', {}, null, c);
    var err = el('p', { class: 'e', role: 'alert' }, null, c), ft = el('div', { class: 'f' }, null, c);
    var count = el('span', {}, null, ft), go = el('button', { class: 'g', type: 'button' }, null, ft);
    var close = svClose = function () {
      if (!sent) svMark(s.id, 'dismissed');
      c.remove(); svHost.remove(); svCur = svClose = null;
      if (!PV && prev && prev.focus) prev.focus();
    };
    x.onclick = close;
    c.onkeydown = function (e) { if (e.key === 'Escape') { e.stopPropagation(); close(); } };
    function post(done) {
      if (PV) return Promise.resolve(true);
      var body = {
        anonymousId: anonymousId(), completed: done,
        answers: Object.keys(answers).map(function (k) { return { questionId: k, value: answers[k] }; }),
        metadata: { url: location.href.slice(0, 2000), device: device(), locale: nav.language || undefined }
      };
      if (get('uid')) body.userId = get('uid');
      body.attributes = attrs();
      return (svSend = svSend.then(function () {
        return fetch(HOST + '/api/w/surveys/' + s.id + '/responses', {
          method: 'POST', body: JSON.stringify(body), headers: { 'Content-Type': 'application/json', 'X-App-Key': KEY }
        }).then(function (r) { return r.ok; }, function () { return false; });
      }));
    }
    function step() {
      var q = qs[i];
      box.textContent = err.textContent = '';
      qh.textContent = q.text;
      count.textContent = qs.length > 1 ? 'Question ' + (i + 1) + ' of ' + qs.length : '';
      go.textContent = i < qs.length - 1 ? 'Next' : 'Submit';
      var f = control(q, box, function (v) { if (v == null) delete answers[q.id]; else answers[q.id] = v; err.textContent = ''; });
      if (!PV) (f || go).focus();
    }
    go.onclick = function () {
      var q = qs[i];
      if (q.required && answers[q.id] == null) { err.textContent = 'Please answer this question.'; return; }
      if (i < qs.length - 1) { i++; post(false); return step(); }
      go.disabled = true;
      post(true).then(function (ok) {
        go.disabled = false;
        if (!ok) { err.textContent = 'Your answer could not be sent. Please try again.'; return; }
        sent = true;
        svMark(s.id, 'completed');
        box.textContent = err.textContent = '';
        qh.textContent = 'Thank you!';
        el('p', { role: 'status' }, 'Your feedback has been received.', box);
        ft.remove();
        x.focus();
        if (!PV) setTimeout(function () { if (svCur === s) close(); }, 4000);
      });
    };
    step();
  }

  // The builder's preview: `s` (a survey as the widget gets it) drawn inside `host`, in place of
  // the one drawn before.
  function preview(s, host) {
    if (svClose) svClose();
    PV = host;
    if (s && s.questions && s.questions.length) show(s);
  }

  // ---- automatic page events, single-page-app aware ----
  function navigated() {
    if (location.href === lastUrl) return;
    referrer = lastUrl;
    lastUrl = location.href;
    api.page();
    surveys();
  }
  ['pushState', 'replaceState'].forEach(function (m) {
    var orig = history[m];
    if (!orig) return;
    history[m] = function () {
      var r = orig.apply(this, arguments);
      navigated();
      return r;
    };
  });
  w.addEventListener('popstate', navigated);
  w.addEventListener('hashchange', navigated);

  // ---- the public API ----
  function obj(v) { return v && typeof v === 'object' ? v : {}; }
  var api = {
    loaded: true,
    version: VERSION,
    page: function (name, properties) {
      if (typeof name === 'object') { properties = name; name = undefined; }
      var p = pageInfo();
      p.search = location.search;
      var props = obj(properties);
      for (var k in props) p[k] = props[k];
      var ev = { type: 'page', properties: p };
      if (name) ev.name = String(name);
      enqueue(ev);
    },
    track: function (event, properties) {
      if (!event) return console.warn('[tributary] track needs an event name');
      enqueue({ type: 'track', event: String(event), properties: obj(properties) });
    },
    identify: function (userId, traits) {
      if (typeof userId === 'object' && userId) { traits = userId; userId = null; }
      if (off()) return;
      if (userId != null) set('uid', String(userId), 1);
      var all = getJSON('traits', {}), t = obj(traits);
      for (var k in t) all[k] = t[k];
      set('traits', JSON.stringify(all));
      enqueue({ type: 'identify', traits: t });
    },
    group: function (groupId, traits) {
      if (groupId == null) return console.warn('[tributary] group needs a groupId');
      enqueue({ type: 'group', groupId: String(groupId), traits: obj(traits) });
    },
    reset: function () {
      set('uid', null, 1); set('traits', null); set('ses', null, 1);
      set('aid', uuid(), 1);
    },
    flush: flush,
    optOut: function () {
      set('optout', '1', 1);
      queue = []; clearTimeout(timer); timer = 0; clearTimeout(retryTimer);
      set('q', null); set('ra', null);
    },
    optIn: function () { set('optout', null, 1); },
    anonymousId: anonymousId,
    userId: function () { return get('uid'); },
    debug: function () { return { queued: queue.length, stored: stored().length, inflight: inflight }; },
    // surveys(false) turns the survey popover off for this page (and closes an open one); the
    // answer tells whether it is on, how many checks ran and which survey is open.
    surveys: function (on) {
      if (on != null) { svOn = !!on; if (svOn) surveys(); else if (svClose) svClose(); }
      return { enabled: svOn, checks: svChecks, open: svCur && svCur.id };
    }
  };
  svc.analytics = api;

  // Calls made before the script loaded (the snippet's queue stub), then the first page view.
  var pending = (stub && (stub.q || (Array.isArray(stub) && stub))) || [];
  var paged = false;
  pending.forEach(function (c) {
    if (c && api[c[0]]) { if (c[0] === 'page') paged = true; api[c[0]].apply(api, c.slice(1)); }
  });
  if (!paged && !(script && script.getAttribute('data-auto-page') === 'false')) api.page();
  drain();
  surveys();
})(window, document);
