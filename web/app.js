// The UI shell: the header (cluster selector, identity, sandbox banner) and the hash router.
// Pages live in their own modules, the shared kit in kit.js. No state is kept only in the
// browser: every page renders from the server.

import { api, connect, h, nextRoute, refreshClusterSelect, session, showSignIn } from './kit.js';
import { clusters } from './clusters.js';
import { create, progress } from './create.js';
import { cluster } from './cluster.js';
import { nodes } from './nodes.js';
import { storage } from './storage.js';
import { operations } from './operations.js';
import { features } from './features.js';
import { teams } from './teams.js';
import { spaces } from './spaces.js';
import { deployment, inference, models } from './workloads.js';
import { training, trainingJob } from './training.js';
import { costs } from './costs.js';
import { tokens } from './tokens.js';

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
  const me = (await api('/api/session')).body || {};
  session.me = me;
  if (me.mode === 'iam' && !me.signedIn) {
    await showSignIn();
    return false;
  }
  const identity = document.getElementById('identity');
  if (me.mode === 'iam') {
    // The person, and only what they may do: creating clusters is an administrator's.
    identity.replaceChildren(
      h('span', {}, `${me.arn}${me.admin ? ' · administrator' : ''}`), ' ',
      h('button', { type: 'button', class: 'link', onclick: async () => {
        await api('/api/session', { method: 'DELETE' });
        location.reload();
      } }, 'Sign out'));
    // Their teams, as their EKS access entries say, one cluster at a time.
    const rights = await api('/api/session/access');
    session.rights = rights.ok ? rights.body : [];
    const teams = rights.ok ? rights.body.flatMap((c) => c.teams.map((t) => `${t.team} (${t.access}) on ${c.cluster}`)) : [];
    if (teams.length) identity.append(h('span', { id: 'identity-teams', class: 'muted' }, ` · teams: ${teams.join(', ')}`));
    if (!me.admin) document.querySelector('nav a[data-nav=create]').closest('li').hidden = true;
    document.querySelector('nav a[data-nav=tokens]').closest('li').hidden = false;
  } else {
    const who = await api('/api/aws/identity');
    identity.textContent = who.ok
      ? `${who.body.account} · ${who.body.region} · ${who.body.arn}`
      : `region ${health.region || '?'}`;
  }
  await refreshClusterSelect();
  return true;
}

// --- router ---------------------------------------------------------------------------------

const routes = [
  [/^#\/clusters$/, () => clusters()],
  [/^#\/create$/, () => create()],
  [/^#\/cluster\/([^/]+)$/, (m) => cluster(decodeURIComponent(m[1]))],
  [/^#\/op\/([^/]+)$/, (m) => progress(decodeURIComponent(m[1]))],
  [/^#\/nodes$/, () => nodes()],
  [/^#\/storage$/, () => storage()],
  [/^#\/operations$/, () => operations()],
  [/^#\/features$/, () => features()],
  [/^#\/teams$/, () => teams()],
  [/^#\/spaces$/, () => spaces()],
  [/^#\/models$/, () => models()],
  [/^#\/inference$/, () => inference()],
  [/^#\/inference\/([^/]+)$/, (m) => deployment(decodeURIComponent(m[1]))],
  [/^#\/costs$/, (m, q) => costs(q)],
  [/^#\/training$/, () => training()],
  [/^#\/training\/([^/]+)$/, (m) => trainingJob(decodeURIComponent(m[1]))],
  [/^#\/tokens$/, () => tokens()],
];

let cleanup = null;

/** Pages that work on the active cluster: their links carry it (`#/nodes?cluster=demo`), so a
 * copied address opens the same cluster's page. */
const SCOPED = ['nodes', 'features', 'teams', 'storage', 'models', 'inference', 'training', 'spaces', 'costs'];

function scopeNav() {
  const suffix = session.active ? `?cluster=${encodeURIComponent(session.active)}` : '';
  for (const a of document.querySelectorAll('nav a')) {
    if (SCOPED.includes(a.dataset.nav)) a.setAttribute('href', `#/${a.dataset.nav}${suffix}`);
  }
}

/** An address naming a cluster makes it the active one (as choosing it in the header does). */
async function adoptCluster(query) {
  const wanted = new URLSearchParams(query || '').get('cluster');
  if (!wanted || wanted === session.active) return;
  const r = await api('/api/active-cluster', { method: 'PUT', body: { name: wanted } });
  if (r.ok) {
    session.active = wanted;
    await refreshClusterSelect();
  }
}

async function route() {
  const current = nextRoute();
  const [hash, query] = (location.hash || '#/clusters').split('?');
  if (cleanup) { cleanup(); cleanup = null; }
  await adoptCluster(query);
  // A newer route started while this one waited: it renders, this one must not.
  if (!current()) return;
  scopeNav();
  const section = hash.split('/')[1] || 'clusters';
  for (const a of document.querySelectorAll('nav a')) {
    if (a.dataset.nav === section) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const view = document.getElementById('view');
  for (const [re, render] of routes) {
    const m = hash.match(re);
    if (m) {
      const stop = (await render(m, query)) || null;
      // A page that follows events hands back its unsubscribe; a superseded one stops at once.
      if (current()) cleanup = stop;
      else if (stop) stop();
      return;
    }
  }
  view.replaceChildren(h('h1', {}, 'Not found'), h('p', {}, h('a', { href: '#/clusters' }, 'Back to clusters')));
}

document.getElementById('cluster-select').addEventListener('change', async (e) => {
  const name = e.target.value || null;
  // "(none)" clears the choice; a cluster is chosen by name.
  const r = name
    ? await api('/api/active-cluster', { method: 'PUT', body: { name } })
    : await api('/api/active-cluster', { method: 'DELETE' });
  if (!r.ok) return refreshClusterSelect();
  session.active = name;
  const [path, query] = (location.hash || '#/clusters').split('?');
  if (new URLSearchParams(query || '').has('cluster')) {
    // The address follows the choice, so it keeps naming the page's cluster.
    location.hash = name ? `${path}?cluster=${encodeURIComponent(name)}` : path;
  } else {
    route();
  }
});
// The first page renders once the header knows the server (health, active cluster). An address
// changed before then is not routed twice: the first route reads the address as it is by then,
// so a form being filled is never replaced by a late second render of the same page.
let headerReady = false;
window.addEventListener('hashchange', () => { if (headerReady) route(); });
// Live events once someone is there to see them (a sign-in page opens no socket).
header().then((signedIn) => {
  headerReady = signedIn !== false;
  if (headerReady) { connect(); route(); }
}, () => {
  headerReady = true;
  connect();
  route();
});
