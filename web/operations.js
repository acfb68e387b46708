// Page: every operation with the actor that started it, and the audit trail of every change
// requested (including those that started no operation).

import { api, h, newest, scoped, stateBadge, errorBox, table, follow } from './kit.js';

const choice = (id, values) => h('select', { id }, ...values.map((s) => h('option', { value: s }, s || 'any')));

export async function operations() {
  const show = scoped();
  const state = choice('f-state', ['', 'pending', 'running', 'succeeded', 'failed', 'cancelled']);
  const actor = choice('f-actor', ['', 'browser', 'agent', 'api']);
  const clusterF = h('input', { type: 'text', id: 'f-cluster', placeholder: 'any' });
  const results = h('div', { id: 'operations' });
  const auditActor = choice('f-audit-actor', ['', 'browser', 'agent', 'api']);
  const auditOutcome = choice('f-audit-outcome', ['', 'ok', 'refused', 'error']);
  // One cluster's trail, or one person's (a person who does not administer sees only theirs).
  const auditCluster = h('input', { type: 'text', id: 'f-audit-cluster', placeholder: 'any' });
  const auditPrincipal = h('input', { type: 'text', id: 'f-audit-principal', placeholder: 'anyone (an ARN)', size: 40 });
  const audit = h('div', { id: 'audit' });
  // Filters change and events arrive while a read is in flight: only the newest read is drawn.
  const opsTicket = newest();
  const auditTicket = newest();
  const render = async () => {
    const current = opsTicket();
    const q = new URLSearchParams({ limit: '100' });
    if (state.value) q.set('state', state.value);
    if (clusterF.value.trim()) q.set('cluster', clusterF.value.trim());
    const r = await api(`/api/operations?${q}`);
    if (!current()) return;
    if (!r.ok) return results.replaceChildren(errorBox(r));
    const ops = r.body.filter((o) => !actor.value || o.actor === actor.value);
    results.replaceChildren(table(['Operation', 'Kind', 'Cluster', 'State', 'Actor', 'Started'], ops.map((o) => [
      h('a', { href: `#/op/${o.id}` }, o.id.slice(0, 8)), o.kind, o.cluster, stateBadge(o.state), o.actor, o.createdAt]),
    'No operations match.'));
    await renderAudit();
  };
  const renderAudit = async () => {
    const current = auditTicket();
    const q = new URLSearchParams({ limit: '50' });
    if (auditActor.value) q.set('actor', auditActor.value);
    if (auditOutcome.value) q.set('outcome', auditOutcome.value);
    if (auditCluster.value.trim()) q.set('cluster', auditCluster.value.trim());
    if (auditPrincipal.value.trim()) q.set('principal', auditPrincipal.value.trim());
    const r = await api(`/api/audit?${q}`);
    if (!current()) return;
    if (!r.ok) return audit.replaceChildren(errorBox(r));
    audit.replaceChildren(table(['Time', 'Actor', 'Principal', 'Request', 'Status', 'Operation', 'Request id'], r.body.map((e) => [
      e.at, e.actor, e.principal, `${e.method} ${e.path}`,
      h('span', { class: `state state-${e.outcome === 'ok' ? 'succeeded' : 'failed'}` }, `${e.status} ${e.outcome}`),
      e.operationId ? h('a', { href: `#/op/${e.operationId}` }, e.operationId.slice(0, 8)) : '—',
      h('code', {}, e.requestId)]),
    'No changes requested yet.'));
  };
  for (const el of [state, actor]) el.addEventListener('change', render);
  clusterF.addEventListener('change', render);
  for (const el of [auditActor, auditOutcome, auditCluster, auditPrincipal]) el.addEventListener('change', renderAudit);
  show(h('h1', {}, 'Operations'),
    h('div', { class: 'filters' },
      h('label', {}, 'State', state), h('label', {}, 'Actor', actor), h('label', {}, 'Cluster', clusterF)),
    results,
    h('h2', {}, 'Audit trail'),
    h('p', { class: 'muted' }, 'Every change requested through the UI, the API or an agent, answered or refused. Never a secret.'),
    h('div', { class: 'filters' },
      h('label', {}, 'Requested by', auditActor), h('label', {}, 'Outcome', auditOutcome),
      h('label', {}, 'Cluster', auditCluster), h('label', {}, 'Principal', auditPrincipal)),
    audit);
  await render();
  return follow(() => true, render);
}
