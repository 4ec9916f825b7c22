// coordd console: plain JavaScript, no build step. Every value shown comes
// from the server as data and is put on the page as text (textContent),
// never as HTML.
'use strict';

const $ = (id) => document.getElementById(id);
const KEY = 'coordd-console-key'; // sessionStorage: gone when the tab closes
let ns = '';
let timer = null;
let deadQueue = '';
let current = ''; // the tab shown
let redlock = false; // coordd runs in Redlock mode: locks only

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v; else if (k.startsWith('on')) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

class Unauthorized extends Error {}
// NotServed: the endpoint's service is not served in Redlock mode.
class NotServed extends Error {}

async function api(path, body) {
  const headers = { 'X-Coordd-Console': '1' };
  const key = sessionStorage.getItem(KEY);
  if (key) headers['Authorization'] = 'Bearer ' + key;
  const opts = { headers, cache: 'no-store' };
  if (body !== undefined) {
    opts.method = 'POST';
    headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const r = await fetch('/ui/api/' + path, opts);
  const j = await r.json().catch(() => ({ error: r.statusText }));
  if (r.status === 401) { showLogin(key ? j.error : ''); throw new Unauthorized(j.error); }
  if (!r.ok) throw new Error(j.error || r.statusText);
  if (j.not_served) throw new NotServed(j.not_served);
  return j;
}

function showError(e) {
  if (e instanceof Unauthorized) return;
  if (e instanceof NotServed) { notServed(current); return; }
  $('error').textContent = e ? String(e.message || e) : '';
}

// notServed shows a tab as not served in Redlock mode: its note instead of
// its content, and no refresh.
function notServed(tab) {
  const s = $(tab), note = s && s.querySelector('.not-served');
  if (!note) return;
  clearInterval(timer);
  for (const c of s.children) if (c.tagName !== 'H2') c.hidden = c !== note;
  $('error').textContent = '';
}

function showLogin(msg) {
  clearInterval(timer);
  sessionStorage.removeItem(KEY);
  document.querySelectorAll('.tab').forEach((s) => { s.hidden = true; });
  $('tabs').hidden = true;
  $('logout').hidden = true;
  $('who').textContent = '';
  $('login').hidden = false;
  $('login-error').textContent = msg || '';
}

async function start() {
  let me;
  try { me = await api('whoami'); } catch (e) { showError(e); return; }
  ns = me.namespace;
  $('login').hidden = true;
  $('tabs').hidden = false;
  $('logout').hidden = !me.auth;
  $('who').textContent = 'namespace ' + ns;
  redlock = !!me.redlock;
  $('mode').hidden = !redlock;
  $('locks-note').hidden = !redlock;
  $('sessions-note').hidden = !redlock;
  if (redlock) {
    for (const o of $('lock-kind').options) {
      if (o.value !== 'lock' && !o.disabled) { o.disabled = true; o.textContent += ' (not served in Redlock mode)'; }
    }
  }
  show(location.hash.slice(1) || (redlock ? 'locks' : 'queues'));
}

function show(tab) {
  if (!['queues', 'locks', 'ratelimits', 'health'].includes(tab)) tab = 'queues';
  document.querySelectorAll('.tab').forEach((s) => { s.hidden = s.id !== tab; });
  document.querySelectorAll('#tabs button').forEach((b) => b.classList.toggle('on', b.dataset.tab === tab));
  history.replaceState(null, '', '#' + tab);
  clearInterval(timer);
  current = tab;
  showError(null);
  if (redlock && (tab === 'queues' || tab === 'ratelimits')) { notServed(tab); return; }
  const refresh = { queues: loadQueues, health: loadHealth, ratelimits: loadPolicies }[tab];
  if (refresh) {
    refresh();
    if (tab !== 'ratelimits') timer = setInterval(refresh, 2000);
  }
}

// Queues.
function savedQueues() {
  try { return JSON.parse(localStorage.getItem('coordd-queues:' + ns) || '[]'); } catch { return []; }
}

async function loadQueues() {
  try {
    const q = savedQueues().map((n) => 'name=' + encodeURIComponent(n)).join('&');
    const j = await api('queues' + (q ? '?' + q : ''));
    const tbody = $('queues-table').tBodies[0];
    tbody.replaceChildren(...j.queues.map((q) => el('tr', { 'data-queue': q.name },
      el('td', {}, q.name),
      ...(q.error ? [el('td', { colspan: 8, class: 'err' }, q.error)] : [
        el('td', { class: 'n ready' }, q.ready), el('td', { class: 'n delayed' }, q.delayed),
        el('td', { class: 'n inflight' }, q.in_flight), el('td', { class: 'n dead' }, q.dead),
        el('td', { class: q.paused ? 'state paused' : 'state' }, q.paused ? 'paused' : 'active'),
        el('td', { class: 'caps' }, [q.max_in_flight ? 'at most ' + q.max_in_flight + ' in flight' : '', q.claim_rate ? q.claim_rate + ' claims' : ''].filter(Boolean).join(', ') || 'none'),
        el('td', { class: 'schedules' }, ...(q.schedules || []).map((s) => el('div', { title: 'last ' + new Date(s.last_time).toLocaleString() + (s.next_time ? ', next ' + new Date(s.next_time).toLocaleString() : '') },
          s.name + ': ', el('code', {}, s.spec), s.time_zone ? ' (' + s.time_zone + ')' : ''))),
        el('td', {}, chart(q.history || []))]),
      el('td', {},
        el('button', { class: 'pause', onclick: () => pause(q.name, !q.paused) }, q.paused ? 'resume' : 'pause'), ' ',
        el('button', { class: 'show-dead', onclick: () => openDead(q.name) }, 'dead letters')))));
    if (!j.queues.length) tbody.replaceChildren(el('tr', {}, el('td', { colspan: 10, class: 'note' }, 'No queue yet: add one by name.')));
    showError(null);
  } catch (e) { showError(e); }
}

// chart draws a queue's last hour (a minute a point, one line a count) as
// an SVG of numbers only.
function chart(history) {
  const W = 120, H = 28, NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('class', 'chart');
  svg.setAttribute('width', W);
  svg.setAttribute('height', H);
  const now = Math.floor(Date.now() / 60000);
  const series = { 'c-enq': 'enqueued', 'c-ack': 'acked', 'c-ret': 'retried', 'c-dead': 'dead' };
  let max = 1;
  for (const m of history) for (const k of Object.values(series)) max = Math.max(max, m[k]);
  for (const [cls, k] of Object.entries(series)) {
    const byMin = new Map(history.map((m) => [Math.floor(Date.parse(m.minute) / 60000), m[k]]));
    const pts = [];
    for (let i = 0; i < 60; i++) {
      const v = byMin.get(now - 59 + i) || 0;
      pts.push((i * (W - 1) / 59).toFixed(1) + ',' + (H - 1 - v * (H - 2) / max).toFixed(1));
    }
    const line = document.createElementNS(NS, 'polyline');
    line.setAttribute('class', cls);
    line.setAttribute('points', pts.join(' '));
    svg.append(line);
  }
  const t = document.createElementNS(NS, 'title');
  const total = (k) => history.reduce((a, m) => a + m[k], 0);
  t.textContent = 'last hour: ' + Object.values(series).map((k) => total(k) + ' ' + k).join(', ');
  svg.append(t);
  return svg;
}

async function pause(name, paused) {
  try {
    await api('pause', { queue: name, paused });
    loadQueues();
  } catch (e) { showError(e); }
}

async function openDead(name, token) {
  deadQueue = name;
  $('dead').hidden = false;
  $('dead-queue').textContent = name;
  $('dead-result').textContent = '';
  $('purge-confirm').value = '';
  try {
    const j = await api('deadletters?queue=' + encodeURIComponent(name) + (token ? '&page_token=' + encodeURIComponent(token) : ''));
    const tbody = $('dl-table').tBodies[0];
    $('dead-note').textContent = j.dead_letters.length ? '' : 'No dead letters.';
    const rows = j.dead_letters.map((d) => el('tr', { 'data-id': d.message_id },
      el('td', {}, el('input', { type: 'checkbox', value: d.message_id })),
      el('td', {}, el('code', {}, d.message_id)),
      el('td', {}, el('code', {}, (d.binary ? 'base64:' : '') + d.preview)),
      el('td', { class: 'n' }, d.size), el('td', { class: 'n' }, d.attempts),
      el('td', {}, new Date(d.enqueue_time).toLocaleString()), el('td', {}, new Date(d.dead_time).toLocaleString())));
    if (token) tbody.append(...rows); else tbody.replaceChildren(...rows);
    const more = $('more-dead');
    more.hidden = !j.next_page_token;
    more.onclick = () => openDead(name, j.next_page_token);
  } catch (e) { showError(e); }
}

async function redrive(body) {
  try {
    const j = await api('redrive', Object.assign({ queue: deadQueue }, body));
    await openDead(deadQueue);
    $('dead-result').textContent = 'Moved ' + j.moved + ' back to ready.';
    loadQueues();
  } catch (e) { showError(e); }
}

// Locks, semaphores, elections.
function holderTable(holders) {
  return el('table', {}, el('thead', {}, el('tr', {}, ...['owner', 'fence', 'TTL left', 'shared', 'session-bound'].map((h) => el('th', {}, h)))),
    el('tbody', {}, ...holders.map((h) => el('tr', { class: 'holder' },
      el('td', { class: 'owner' }, h.owner), el('td', { class: 'fence' }, h.fence),
      el('td', {}, h.ttl_seconds.toFixed(1) + ' s'), el('td', {}, h.shared ? 'yes' : 'no'), el('td', {}, h.session_bound ? 'yes' : 'no')))));
}

async function lookup() {
  const kind = $('lock-kind').value, name = $('lock-name').value;
  const out = $('lock-result');
  try {
    const j = await api(kind + '?name=' + encodeURIComponent(name));
    if (kind === 'leader') {
      out.replaceChildren(j.has_leader
        ? el('p', {}, 'Leader: ', el('code', { class: 'value' }, (j.binary ? 'base64:' : '') + j.value), ', fence ', el('span', { class: 'fence' }, j.fence), ', elected ', new Date(j.elect_time).toLocaleString())
        : el('p', {}, 'No leader.'));
      return;
    }
    const head = kind === 'semaphore' ? 'Limit ' + j.limit + ', ' : (j.held ? 'Held, ' : 'Not held, ');
    out.replaceChildren(el('p', {}, head + j.holders.length + ' holder(s), ' + j.waiters + ' waiting.'), holderTable(j.holders));
    showError(null);
  } catch (e) {
    if (e instanceof NotServed) {
      out.replaceChildren(el('p', { class: 'note not-served' }, ({ semaphore: 'Semaphores', leader: 'Elections' }[kind] || kind) + ': not served in Redlock mode (this coordd serves exclusive locks only).'));
      showError(null);
      return;
    }
    out.replaceChildren();
    showError(e);
  }
}

// Rate limits.
function policyRow(p, runtime) {
  const cells = [el('td', {}, p.name),
    el('td', {}, p.limits.map((l) => (l.name ? l.name + ': ' : '') + l.algorithm + ' ' + l.limit + ' per ' + l.period + (l.burst ? ', burst ' + l.burst : '')).join('; ')),
    el('td', {}, p.shadow ? 'yes' : 'no'), el('td', {}, p.on_store_failure), el('td', {}, p.local_quota || '')];
  if (runtime) {
    cells.push(el('td', {}, el('button', { class: 'delete-policy', onclick: () => deletePolicy(p.name) }, 'Delete')));
  }
  return el('tr', {}, ...cells);
}

async function loadPolicies() {
  try {
    const j = await api('policies');
    $('policies-table').tBodies[0].replaceChildren(...j.config.map((p) => policyRow(p, false)));
    $('runtime-policies-table').tBodies[0].replaceChildren(...(j.runtime.length ? j.runtime.map((p) => policyRow(p, true))
      : [el('tr', {}, el('td', { colspan: 6, class: 'note' }, 'No runtime policy.'))]));
    const sel = $('peek-policy'), cur = sel.value;
    sel.replaceChildren(...j.config.concat(j.runtime).map((p) => el('option', { value: p.name }, p.name)));
    if (cur) sel.value = cur;
  } catch (e) { showError(e); }
}

async function putPolicy() {
  try {
    await api('policy/put', {
      name: $('put-policy-name').value, shadow: $('put-policy-shadow').checked, on_store_failure: $('put-policy-on-failure').value,
      limits: [{ algorithm: $('put-policy-algorithm').value, limit: Number($('put-policy-limit').value), period: $('put-policy-period').value,
        burst: Number($('put-policy-burst').value || 0) }],
    });
    showError(null);
    loadPolicies();
  } catch (e) { showError(e); }
}

async function deletePolicy(name) {
  if (!confirm('Delete runtime policy ' + name + '?')) return;
  try {
    await api('policy/delete', { name });
    showError(null);
    loadPolicies();
  } catch (e) { showError(e); }
}

async function peek() {
  try {
    const j = await api('allow?policy=' + encodeURIComponent($('peek-policy').value) + '&key=' + encodeURIComponent($('peek-key').value));
    $('peek-result').replaceChildren(el('p', { class: j.allowed ? 'ok' : 'err' },
      (j.allowed ? 'Would be allowed, leaving ' + j.remaining + ' of ' + j.limit : 'Would be denied' + (j.denied_by ? ' by ' + j.denied_by : '') + ': retry after ' + j.retry_after_seconds.toFixed(2) + ' s') +
      ', window resets in ' + j.reset_after_seconds.toFixed(2) + ' s' + (j.shadow_denied ? ' (shadow: denied, allowed anyway)' : '') + (j.degraded ? ' (degraded: store unreachable)' : '')));
    showError(null);
  } catch (e) { $('peek-result').replaceChildren(); showError(e); }
}

// Sessions and health.
async function loadHealth() {
  try {
    const j = await api('health');
    $('streams-table').tBodies[0].replaceChildren(...(j.streams.length ? j.streams.map((s) => el('tr', {},
      el('td', {}, s.namespace), el('td', { class: 'n' }, s.keepalive), el('td', { class: 'n' }, s.waiting)))
      : [el('tr', {}, el('td', { colspan: 3, class: 'note' }, 'No open stream.'))]));
    $('nodes-table').tBodies[0].replaceChildren(...j.nodes.map((n) => el('tr', { class: 'node' },
      el('td', {}, n.addr || '#' + n.index), el('td', {}, n.role),
      el('td', { class: n.reachable ? 'ok' : 'err' }, n.reachable ? 'yes' : 'no'),
      el('td', { class: 'n' }, n.reachable ? n.latency_ms.toFixed(2) + ' ms' : ''), el('td', {}, n.breaker))));
    showError(null);
  } catch (e) { showError(e); }
}

document.addEventListener('DOMContentLoaded', () => {
  document.querySelectorAll('#tabs button').forEach((b) => b.addEventListener('click', () => show(b.dataset.tab)));
  $('login-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(KEY, $('key').value);
    $('key').value = '';
    start();
  });
  $('logout').addEventListener('click', () => showLogin(''));
  $('add-queue').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const name = $('queue-name').value.trim();
    if (!name) return;
    const qs = savedQueues().filter((q) => q !== name);
    qs.push(name);
    localStorage.setItem('coordd-queues:' + ns, JSON.stringify(qs.slice(-50)));
    $('queue-name').value = '';
    loadQueues();
  });
  $('redrive-all').addEventListener('click', () => redrive({ all: true }));
  $('redrive-selected').addEventListener('click', () => {
    const ids = [...document.querySelectorAll('#dl-table input:checked')].map((c) => c.value);
    if (ids.length) redrive({ message_ids: ids });
  });
  $('purge-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      const j = await api('purge', { queue: deadQueue, confirm: $('purge-confirm').value });
      await openDead(deadQueue);
      $('dead-result').textContent = 'Purged ' + j.purged + (j.remaining ? ', ' + j.remaining + ' left' : '') + '.';
      loadQueues();
    } catch (e) { showError(e); }
  });
  $('lookup').addEventListener('submit', (ev) => { ev.preventDefault(); lookup(); });
  $('peek').addEventListener('submit', (ev) => { ev.preventDefault(); peek(); });
  $('put-policy').addEventListener('submit', (ev) => { ev.preventDefault(); putPolicy(); });
  start();
});
