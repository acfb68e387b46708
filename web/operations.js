// Page: every operation with the actor that started it.

import { api, h, live, onOperations, refreshClusterSelect, scoped, session, show, TERMINAL, expected, stateBadge, elapsed, problemText, errorBox, table, follow, readyCell, claimsTable, needsActive, startForm, input, removeWorkload } from './kit.js';

export async function operations() {
  const show = scoped();
  const state = h('select', { id: 'f-state' }, ...['', 'pending', 'running', 'succeeded', 'failed', 'cancelled'].map((s) => h('option', { value: s }, s || 'any')));
  const actor = h('select', { id: 'f-actor' }, ...['', 'browser', 'agent', 'api'].map((s) => h('option', { value: s }, s || 'any')));
  const clusterF = h('input', { type: 'text', id: 'f-cluster', placeholder: 'any' });
  const results = h('div', { id: 'operations' });
  const render = async () => {
    const q = new URLSearchParams({ limit: '100' });
    if (state.value) q.set('state', state.value);
    if (clusterF.value.trim()) q.set('cluster', clusterF.value.trim());
    const r = await api(`/api/operations?${q}`);
    if (!r.ok) return results.replaceChildren(errorBox(r));
    const ops = r.body.filter((o) => !actor.value || o.actor === actor.value);
    results.replaceChildren(table(['Operation', 'Kind', 'Cluster', 'State', 'Actor', 'Started'], ops.map((o) => [
      h('a', { href: `#/op/${o.id}` }, o.id.slice(0, 8)), o.kind, o.cluster, stateBadge(o.state), o.actor, o.createdAt]),
    'No operations match.'));
  };
  for (const el of [state, actor]) el.addEventListener('change', render);
  clusterF.addEventListener('change', render);
  show(h('h1', {}, 'Operations'),
    h('div', { class: 'filters' },
      h('label', {}, 'State', state), h('label', {}, 'Actor', actor), h('label', {}, 'Cluster', clusterF)),
    results);
  await render();
  return follow(() => true, render);
}

// --- workloads: models, inference, jobs -----------------------------------------------------

/** A form whose submit POSTs `body()` and opens the operation it starts. */
