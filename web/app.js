// The UI shell: API access (actor `browser`, optional token), live operation events over the
// WebSocket with long-poll as fallback, the header (cluster selector, identity, sandbox banner)
// and the hash router. Views live in views.js. No state is kept only in the browser: every view
// renders from the server.

import * as views from './views.js';

/** Builds an element: h('a', {href: '#'}, 'text', child). Text is always set as text. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const TOKEN_KEY = 'instantstart.token';

/** Calls the REST API. Resolves to {ok, status, body}; never throws on HTTP errors. */
export async function api(path, { method = 'GET', body } = {}) {
  const headers = { 'X-InstantStart-Actor': 'browser' };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let r;
  try {
    r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    return { ok: false, status: 0, body: { title: 'The server cannot be reached', detail: String(e) } };
  }
  const text = await r.text();
  let parsed = null;
  try { parsed = text ? JSON.parse(text) : null; } catch { parsed = { detail: text }; }
  if (r.status === 401) askForToken();
  return { ok: r.ok, status: r.status, body: parsed };
}

function askForToken() {
  const view = document.getElementById('view');
  const input = h('input', { type: 'password', id: 'token', autocomplete: 'off', required: true });
  view.replaceChildren(
    h('h1', {}, 'Token required'),
    h('p', {}, 'This server is exposed beyond loopback and requires its bearer token (INSTANTSTART_TOKEN).'),
    h('form', { class: 'grid', onsubmit: (e) => {
      e.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, input.value);
      location.reload();
    } }, h('label', { for: 'token' }, 'Token'), input, h('span'), h('button', { type: 'submit' }, 'Continue')),
  );
}

// --- live events --------------------------------------------------------------------------

const listeners = new Set();
let socket = null;
let socketOpen = false;

/** Calls `fn(operations)` whenever operations change. Returns an unsubscribe function. */
export function onOperations(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

/** Whether pushes arrive; views fall back to long-polling when they do not. */
export function live() {
  return socketOpen;
}

function connect() {
  if (sessionStorage.getItem(TOKEN_KEY)) return; // browsers cannot send the token on a WebSocket
  const proto = location.protocol === 'https:' ? 'wss' : 'ws';
  socket = new WebSocket(`${proto}://${location.host}/api/events`);
  socket.addEventListener('open', () => { socketOpen = true; });
  socket.addEventListener('message', (e) => {
    let msg;
    try { msg = JSON.parse(e.data); } catch { return; }
    if (msg.type === 'operations') for (const fn of listeners) fn(msg.operations);
  });
  socket.addEventListener('close', () => {
    socketOpen = false;
    setTimeout(connect, 2000);
  });
}

// --- header ---------------------------------------------------------------------------------

export const session = { health: null, active: null };

async function header() {
  const health = (await api('/healthz')).body || {};
  session.health = health;
  const banner = document.getElementById('banner');
  if (health.cloud === 'sandbox') {
    banner.className = 'banner sandbox';
    banner.textContent = 'Sandbox mode: a simulated AWS account. Nothing here touches real AWS.';
  } else if (health.warning) {
    banner.className = 'banner degraded';
    banner.textContent = health.warning;
  }
  const who = await api('/api/aws/identity');
  const identity = document.getElementById('identity');
  identity.textContent = who.ok
    ? `${who.body.account} · ${who.body.region} · ${who.body.arn}`
    : `region ${health.region || '?'}`;
  await refreshClusterSelect();
}

export async function refreshClusterSelect() {
  const select = document.getElementById('cluster-select');
  const [clusters, active] = await Promise.all([api('/api/clusters'), api('/api/active-cluster')]);
  session.active = active.ok ? active.body.name : null;
  const names = clusters.ok ? clusters.body.map((c) => c.name) : [];
  select.replaceChildren(h('option', { value: '' }, '(none)'),
    ...names.map((n) => h('option', { value: n, selected: n === session.active }, n)));
}

// --- router ---------------------------------------------------------------------------------

const routes = [
  [/^#\/clusters$/, () => views.clusters()],
  [/^#\/create$/, () => views.create()],
  [/^#\/cluster\/([^/]+)$/, (m) => views.cluster(decodeURIComponent(m[1]))],
  [/^#\/op\/([^/]+)$/, (m) => views.progress(decodeURIComponent(m[1]))],
  [/^#\/nodes$/, () => views.nodes()],
  [/^#\/storage$/, () => views.storage()],
  [/^#\/operations$/, () => views.operations()],
  [/^#\/features$/, () => views.features()],
  [/^#\/models$/, () => views.models()],
  [/^#\/inference$/, () => views.inference()],
  [/^#\/training$/, () => views.jobs()],
];

let cleanup = null;
let token = 0;

/** A `show` bound to the current route: a render that finishes after the user has navigated
 * elsewhere (a slow request, a late push) does nothing instead of replacing the new view. */
export function scoped() {
  const mine = token;
  return (...children) => { if (mine === token) show(...children); };
}

async function route() {
  token += 1;
  const hash = location.hash || '#/clusters';
  if (cleanup) { cleanup(); cleanup = null; }
  const section = hash.split('/')[1] || 'clusters';
  for (const a of document.querySelectorAll('nav a')) {
    if (a.dataset.nav === section) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const view = document.getElementById('view');
  for (const [re, render] of routes) {
    const m = hash.match(re);
    if (m) {
      cleanup = (await render(m)) || null;
      return;
    }
  }
  view.replaceChildren(h('h1', {}, 'Not found'), h('p', {}, h('a', { href: '#/clusters' }, 'Back to clusters')));
}

/** Replaces the main view's content and moves focus there (for keyboard and screen readers). */
/** Replaces the view; children nest and may be null, as with `h`. */
export function show(...children) {
  const view = document.getElementById('view');
  view.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

document.getElementById('cluster-select').addEventListener('change', async (e) => {
  const name = e.target.value || null;
  await api('/api/active-cluster', { method: 'PUT', body: { name } });
  session.active = name;
  route();
});
window.addEventListener('hashchange', route);
connect();
header().then(route);
