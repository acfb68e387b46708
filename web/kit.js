// The shared kit of every page: the element builder, the API client (actor `browser`,
// optional token), live operation events over the WebSocket, the view and its route scope, and
// the widgets pages share (badges, tables, error boxes, live-following renders, forms).

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
  if (r.status === 401) {
    if (String(parsed && parsed.type).endsWith(':sign-in-required')) showSignIn();
    else askForToken();
  }
  return { ok: r.ok, status: r.status, body: parsed };
}

/** The sign-in page, where people sign in with their AWS identity (docs/access.md): the
 * command that makes a token for this deployment, and a field for the token. */
export async function showSignIn() {
  const view = document.getElementById('view');
  const me = await (await fetch('/api/session')).json().catch(() => ({}));
  const token = h('textarea', { id: 'sign-in-token', rows: 4, required: true, autocomplete: 'off', spellcheck: 'false' });
  const error = h('p', { id: 'sign-in-error', class: 'error', role: 'alert' });
  const submit = async (e) => {
    e.preventDefault();
    error.textContent = '';
    const r = await fetch('/api/session', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-InstantStart-Actor': 'browser' },
      body: JSON.stringify({ token: token.value.trim() }),
    });
    if (r.ok) return location.reload();
    const p = await r.json().catch(() => ({}));
    error.textContent = p.detail || `Sign-in refused (${r.status})`;
  };
  view.replaceChildren(
    h('h1', {}, 'Sign in'),
    h('p', {}, 'Sign in with your AWS identity: run this with the credentials you use for AWS, and paste what it prints.'),
    h('pre', {}, h('code', { id: 'sign-in-command' }, me.signInCommand || '')),
    h('form', { class: 'grid', onsubmit: submit },
      h('label', { for: 'sign-in-token' }, 'Token'), token, h('span'),
      h('button', { type: 'submit' }, 'Sign in')),
    error,
  );
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

/** What a cluster change says, in words. */
const CHANGE_TEXT = {
  'node-not-ready': (e) => `Node ${e.object} on ${e.cluster} is NotReady`,
  'node-ready': (e) => `Node ${e.object} on ${e.cluster} is Ready again`,
  'pod-pending-for-gpus': (e) => `Pod ${e.object} on ${e.cluster} cannot be placed`,
};
/** The most alerts shown at once: older ones give way. */
const MAX_ALERTS = 5;

/** Shows what the clusters' watches noticed, newest first, each dismissable. */
function showChanges(events, missed) {
  const list = document.getElementById('alerts');
  if (!list) return;
  for (const e of events) {
    const text = (CHANGE_TEXT[e.kind] || ((x) => `${x.kind}: ${x.object}`))(e);
    const item = h('li', { class: `alert ${e.kind}`, 'data-kind': e.kind, 'data-object': e.object },
      h('span', {}, text), e.detail ? h('small', {}, ` — ${e.detail}`) : '',
      h('button', { type: 'button', 'aria-label': 'Dismiss', onclick: () => item.remove() }, '×'));
    list.prepend(item);
  }
  if (missed) list.prepend(h('li', { class: 'alert' }, `${missed} more changes were not shown`));
  while (list.children.length > MAX_ALERTS) list.lastElementChild.remove();
}

export function connect() {
  // A browser cannot send Authorization on a WebSocket: the token goes as a subprotocol.
  const token = sessionStorage.getItem(TOKEN_KEY);
  const protocols = ['instantstart.events', ...(token ? [`instantstart.bearer.${token}`] : [])];
  const proto = location.protocol === 'https:' ? 'wss' : 'ws';
  try {
    socket = new WebSocket(`${proto}://${location.host}/api/events`, protocols);
  } catch {
    return; // a token that is no valid subprotocol: views long-poll instead
  }
  socket.addEventListener('open', () => { socketOpen = true; });
  socket.addEventListener('message', (e) => {
    let msg;
    try { msg = JSON.parse(e.data); } catch { return; }
    if (msg.type === 'operations') for (const fn of listeners) fn(msg.operations);
    if (msg.type === 'cluster') showChanges(msg.events, msg.missed);
  });
  socket.addEventListener('close', () => {
    socketOpen = false;
    setTimeout(connect, 2000);
  });
}

// --- session ------------------------------------------------------------------------------

/** What the header learned (health) and the cluster pages work on (active). */
export const session = { health: null, active: null, me: null, rights: [] };

/** Whether the person may change `cluster` itself (its groups, features, teams): everyone in
 * single-user mode, an administrator of the deployment, or the cluster's EKS cluster admin. The
 * server decides; the pages only hide what it would refuse. */
export function administers(cluster) {
  const me = session.me || {};
  if (me.mode !== 'iam' || me.admin) return true;
  return session.rights.some((c) => c.cluster === cluster && c.clusterAdmin);
}

export async function refreshClusterSelect() {
  const select = document.getElementById('cluster-select');
  const [clusters, active] = await Promise.all([api('/api/clusters'), api('/api/active-cluster')]);
  session.active = active.ok ? active.body.name : null;
  const names = clusters.ok ? clusters.body.map((c) => c.name) : [];
  select.replaceChildren(h('option', { value: '' }, '(none)'),
    ...names.map((n) => h('option', { value: n, selected: n === session.active }, n)));
}

// --- the view -------------------------------------------------------------------------------

/** Tickets for loads whose answers may arrive out of order (a slow first request overtaken by a
 * second, as when a field changes twice quickly): each call returns a check that stays true
 * while its ticket is the newest, so only the newest answer is drawn. */
export function newest() {
  let latest = 0;
  return () => {
    latest += 1;
    const mine = latest;
    return () => mine === latest;
  };
}

const routeTickets = newest();
let currentRoute = routeTickets();

/** Starts a new route: renders scoped to an earlier one stop replacing the view. Returns a
 * check that stays true while this route is still the newest. */
export function nextRoute() {
  currentRoute = routeTickets();
  return currentRoute;
}

/** A `show` bound to the current route: a render that finishes after the user has navigated
 * elsewhere (a slow request, a late push) does nothing instead of replacing the new view. */
export function scoped() {
  const current = currentRoute;
  return (...children) => { if (current()) show(...children); };
}

/** Replaces the view; children nest and may be null, as with `h`. */
export function show(...children) {
  const view = document.getElementById('view');
  view.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

// --- widgets --------------------------------------------------------------------------------

export const TERMINAL = ['succeeded', 'failed', 'cancelled'];

/** Typical durations on AWS (the sandbox compresses them by its time scale). */
export const EXPECTED = {
  pipeline: '35–50 min', cluster: '15–20 min', dependencies: '3–5 min', hyperpod: '15–25 min',
  storage: '1–2 min', 'storage-delete': 'under a minute', import: 'under a minute',
  'instance-group-add': '10–20 min', 'instance-group-scale': '5–15 min', 'instance-group-delete': '5–15 min',
  'node-action': '2–10 min', 'delete-cluster': '15–25 min', 'forget-cluster': 'under a minute',
  'model-download': 'minutes to an hour', 'inference-deploy': '5–20 min', 'workload-delete': 'under a minute',
  'hyperpod-software-update': '30–90 min',
};

export function expected(kind) {
  const aws = EXPECTED[kind];
  if (!aws) return '';
  return session.health && session.health.cloud === 'sandbox'
    ? `expected ${aws} on AWS (seconds in the sandbox)` : `expected ${aws}`;
}

export function stateBadge(state) {
  return h('span', { class: `state state-${state}`, 'data-state': state }, state);
}

export function elapsed(started, finished) {
  if (!started) return '';
  const ms = (finished ? Date.parse(finished) : Date.now()) - Date.parse(started);
  const s = Math.max(0, Math.round(ms / 1000));
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m ${s % 60}s`;
}

export function problemText(p) {
  if (!p) return 'unknown error';
  const hint = p.hint === undefined || p.hint === null ? '' : ` Valid: ${Array.isArray(p.hint) ? p.hint.join(', ') : typeof p.hint === 'string' ? p.hint : JSON.stringify(p.hint)}.`;
  return `${p.detail || p.title || 'error'}${hint}`;
}

export function errorBox(r) {
  return h('p', { class: 'error', role: 'alert' }, problemText(r.body));
}

export function table(headers, rows, empty = 'Nothing yet.') {
  if (!rows.length) return h('p', { class: 'muted' }, empty);
  return h('table', {}, h('thead', {}, h('tr', {}, headers.map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c) => h('td', {}, c))))));
}

/** Re-renders `render` on every relevant push, or by long-polling when pushes do not arrive.
 * Renders never overlap: a push during a render schedules one more, so the last render always
 * starts after the last change (an older, slower response cannot have the last word). */
export function follow(isRelevant, render, pollId) {
  let stopped = false;
  let running = false;
  let again = false;
  const rerender = async () => {
    if (running) { again = true; return; }
    running = true;
    do {
      again = false;
      await render();
    } while (again && !stopped);
    running = false;
  };
  const off = onOperations((ops) => { if (!stopped && ops.some(isRelevant)) rerender(); });
  (async () => {
    while (!stopped) {
      if (live()) {
        // Pushes drive the view; a slow refresh covers a push lost to a reconnect.
        await new Promise((r) => setTimeout(r, 5000));
      } else if (pollId) {
        await api(`/api/operations/${pollId()}?wait=20`);
      } else {
        await new Promise((r) => setTimeout(r, 3000));
      }
      if (!stopped) await rerender();
    }
  })();
  return () => { stopped = true; off(); };
}

// --- clusters -------------------------------------------------------------------------------


export function readyCell(n) {
  if (n.ready) return 'yes';
  return n.notReadyReason ? h('span', { title: n.notReadyReason }, `no — ${n.notReadyReason}`) : 'no';
}


export function claimsTable(claims) {
  if (!claims.ok) return errorBox(claims);
  return table(['Claim', 'Namespace', 'Kind', 'Source', 'Capacity', 'Phase'], claims.body.map((c) => [
    c.claimName, c.namespace, c.kind, c.bucket || c.fileSystemId || '', c.capacity || '', c.phase || '']),
  'No claims yet.');
}


export function needsActive(title) {
  if (session.active) return false;
  show(h('h1', {}, title), h('p', {}, 'Choose a cluster in the header first.'));
  return true;
}


export function startForm(label, id, fields, path, body) {
  const error = h('div', { class: 'error', role: 'alert', id: `${id}-error` });
  const form = h('form', { class: 'grid', 'aria-label': label },
    fields.map(([text, input, hint]) => [h('label', { for: input.id }, text),
      hint ? h('div', {}, input, h('div', { class: 'field-hint' }, hint)) : input]),
    h('span'), h('div', {}, h('button', { type: 'submit' }, label), error));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    error.textContent = '';
    const r = await api(path, { method: 'POST', body: body() });
    if (r.ok) location.hash = `#/op/${r.body.operationId}`;
    else error.textContent = problemText(r.body);
  });
  return form;
}

export function input(id, attrs = {}) {
  return h('input', { type: 'text', id, autocomplete: 'off', ...attrs });
}

/** A preview's plan as lines: what it would start (each phase and its mutating calls), change
 * directly, and disturb. */
export function planText(plan) {
  const lines = [plan.summary];
  for (const op of plan.operations) {
    lines.push(`${op.parent == null ? '' : '  then '}${op.kind} on ${op.cluster}:`);
    for (const p of op.phases) lines.push(`    · ${p.name}${p.calls.length ? ` (${p.calls.map((c) => c.api).join(', ')})` : ''}`);
  }
  for (const c of plan.changes) lines.push(`${c.effect}: ${c.resource}`);
  for (const a of plan.affects) lines.push(`affects ${a.workload} (${a.namespace}) on ${a.node}: ${a.outcome}`);
  return lines.join('\n');
}

/**
 * Asks with the plan in the question: the request is previewed first (`dryRun=true`, nothing is
 * written) and the confirm dialog shows what it would do. A refused preview is the answer the
 * request itself would get: `{ refused }` is that answer, and nothing is asked.
 */
export async function confirmPlan(question, path, init) {
  const r = await api(`${path}${path.includes('?') ? '&' : '?'}dryRun=true`, init);
  if (!r.ok) return { refused: r };
  return { ok: window.confirm(`${question}\n\n${planText(r.body)}`) };
}

/** Asks with the plan, then starts the operation (a DELETE, or the POST `method` names) and follows it. */
export async function askThenStart(path, question, button, method = 'DELETE') {
  const asked = await confirmPlan(question, path, { method });
  if (asked.refused) { button.after(errorBox(asked.refused)); return; }
  if (!asked.ok) return;
  button.disabled = true;
  const r = await api(path, { method });
  if (r.ok) location.hash = `#/op/${r.body.operationId}`;
  else { button.disabled = false; button.after(errorBox(r)); }
}

/**
 * The team and priority fields of a workload form under task governance (none otherwise): a
 * workload runs as one of the teams (required once there are teams), at an optional priority
 * class of the cluster's policy. `governance` is the teams view; `put(body)` adds the choice.
 */
export function teamFields(governance, id) {
  const teams = governance && governance.enabled ? governance.teams || [] : [];
  if (!teams.length) return { fields: [], put: () => {} };
  const classes = governance.policy ? governance.policy.priorityClasses || [] : [];
  const team = h('select', { id: `${id}-team`, required: true }, teams.map((t) => h('option', { value: t.name }, t.name)));
  const priority = h('select', { id: `${id}-priority` }, h('option', { value: '' }, 'none'),
    classes.map((c) => h('option', { value: c.name }, `${c.name} (weight ${c.weight})`)));
  return {
    fields: [['Team', team, 'The team whose quota it runs on: its namespace and queue.'],
      ['Priority', priority, 'Higher weights are admitted first and may preempt lower ones.']],
    put: (b) => {
      b.team = team.value;
      if (priority.value) b.priority = priority.value;
    },
  };
}

/** A workload's team cell: team and priority, or a dash; for a model or pool whose pods Kueue
 * admits one by one, how many are admitted and why the first waiting one waits. */
export function teamCell(w) {
  if (!w.team) return h('span', { class: 'muted' }, '—');
  const a = w.admission;
  const pods = a && typeof a.admitted === 'number'
    ? h('div', { class: 'muted', 'data-admission': a.pending + a.preempted ? 'pending' : 'admitted' },
      `Kueue: ${a.admitted} admitted${a.pending ? `, ${a.pending} pending` : ''}${a.preempted ? `, ${a.preempted} preempted` : ''}`
        + (a.waiting ? ` · #${a.waiting.position ?? '?'} in the queue${a.waiting.message ? `: ${a.waiting.message}` : ''}` : ''))
    : null;
  return h('span', {}, `${w.team}${w.priority ? ` · ${w.priority}` : ''}`, pods);
}
