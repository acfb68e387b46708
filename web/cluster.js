// Page: one cluster: stages, dependencies, nodes and GPUs, the teams' split when teams share
// it, storage claims.

import { api, h, scoped, stateBadge, errorBox, problemText, table, follow, readyCell, claimsTable, askThenStart, confirmPlan } from './kit.js';
import { shareChart } from './teams.js';

/** The upgrade to the next minor, asked with its plan: the control plane, the add-ons after it,
 * and (when chosen) HyperPod's software, a canary group first. */
function upgradeForm(v, enc) {
  const software = h('input', { type: 'checkbox', id: 'upgrade-software' });
  const canary = h('select', { id: 'upgrade-canary' }, h('option', { value: '' }, 'none'),
    v.groups.map((g) => h('option', { value: g.name }, g.name)));
  const jobs = h('select', { id: 'upgrade-jobs' }, [['restart', 'let them restart from their checkpoint'],
    ['wait', 'wait for them to finish'], ['cancel', 'stop them first']].map(([v, t]) => h('option', { value: v }, t)));
  const error = h('div', { class: 'error', role: 'alert', id: 'upgrade-error' });
  const submit = async (e) => {
    e.preventDefault();
    error.textContent = '';
    const body = { kubernetesVersion: v.nextKubernetes };
    if (software.checked) body.software = { batchInstances: 1 };
    if (software.checked && canary.value) body.canaryGroup = canary.value;
    if (software.checked) body.runningJobs = jobs.value;
    const path = `/api/clusters/${enc}/upgrade`;
    const asked = await confirmPlan(`Upgrade to Kubernetes ${v.nextKubernetes}?`, path, { method: 'POST', body });
    if (asked.refused) { error.textContent = problemText(asked.refused.body); return; }
    if (!asked.ok) return;
    const r = await api(path, { method: 'POST', body });
    if (r.ok) location.hash = `#/op/${r.body.operationId}`;
    else error.textContent = problemText(r.body);
  };
  return h('form', { class: 'grid', 'aria-label': 'Upgrade', onsubmit: submit },
    h('label', { for: software.id }, 'HyperPod software too'), h('div', {}, software, h('div', { class: 'field-hint' }, 'After the add-ons, one node at a time.')),
    h('label', { for: jobs.id }, 'Training jobs on them'), jobs,
    h('label', { for: canary.id }, 'Canary group'), h('div', {}, canary, h('div', { class: 'field-hint' }, 'Updated alone first; the others once it is back in service.')),
    h('span'), h('div', {}, h('button', { type: 'submit' }, `Upgrade to ${v.nextKubernetes}`), error));
}

/** The release a group runs, and what it would get: a newer one is worth an update. */
function releaseCell(s) {
  const now = s.currentRelease || '?';
  if (s.desiredRelease && s.desiredRelease !== now) return `${now} → ${s.desiredRelease}`;
  return s.imageStatus && s.imageStatus !== 'UpToDate'
    ? h('span', { class: 'error' }, `${now} (${s.imageStatus === 'UpdateAvailable' ? 'a newer release exists' : s.imageStatus})`)
    : now;
}

/** Where the version is in EKS's support: standard, extended (billed extra per cluster hour), or
 * past it (EKS upgrades the cluster itself). */
function supportLine(s) {
  if (!s) return null;
  const text = {
    STANDARD_SUPPORT: `EKS standard support until ${s.endOfStandardSupport}`,
    EXTENDED_SUPPORT: `EKS standard support ended ${s.endOfStandardSupport}: extended support, billed extra per cluster hour, until ${s.endOfExtendedSupport}`,
  }[s.status] || `past EKS support since ${s.endOfExtendedSupport}: EKS upgrades it itself`;
  return h('p', { id: 'cluster-support', class: s.status === 'STANDARD_SUPPORT' ? 'muted' : 'error' }, text);
}

/** What the cluster runs beside what it could: Kubernetes and the next minor, each add-on's
 * version beside the newest for this version and the next. */
function versionsPanel(v, enc) {
  const next = v.nextKubernetes ? `next: ${v.nextKubernetes}` : 'the newest HyperPod supports';
  return h('div', { id: 'cluster-versions' }, h('h2', {}, 'Versions'),
    h('p', {}, `Kubernetes ${v.kubernetes} (${next})`),
    supportLine(v.support.find((s) => s.version === v.kubernetes)),
    table(['Add-on', 'Installed', `Newest for ${v.kubernetes}`, v.nextKubernetes ? `Newest for ${v.nextKubernetes}` : ''],
      v.addons.map((a) => [a.name, a.version || '?', a.behind ? h('strong', {}, a.newest) : (a.newest || '—'),
        v.nextKubernetes ? (a.newestForNext || h('span', { class: 'error' }, 'none: blocks the upgrade')) : '']),
      'No managed add-ons.'),
    table(['Instance group', 'Nodes', 'HyperPod release', 'Last update', 'Software last rolled on', ''], v.groups.map((g) => [g.name, String(g.nodes),
      releaseCell(g.software), g.software.updateStatus || '—',
      g.lastSoftwareUpdates.join(', '), g.drift ? h('span', { class: 'error' }, 'drift: nodes differ') : 'in step']),
    'No instance groups yet.'),
    v.nextKubernetes ? upgradeForm(v, enc) : null);
}

export async function cluster(name) {
  const show = scoped();
  const render = async () => {
    const enc = encodeURIComponent(name);
    const [c, deps, status, claims, teams, versions] = await Promise.all([
      api(`/api/clusters/${enc}`), api(`/api/clusters/${enc}/dependencies`),
      api(`/api/clusters/${enc}/status`), api(`/api/clusters/${enc}/storage`), api(`/api/clusters/${enc}/teams`),
      api(`/api/clusters/${enc}/versions`)]);
    if (!c.ok) return show(h('h1', {}, name), errorBox(c));
    const stages = ['cluster', 'dependencies', 'hyperpod', 'storage'].map((s) => {
      const op = c.body.stages[s];
      return [s, op ? stateBadge(op.state) : stateBadge('pending'), op ? h('a', { href: `#/op/${op.id}` }, 'progress') : ''];
    });
    const reconcile = h('button', { type: 'button', onclick: async (e) => {
      e.target.disabled = true;
      const r = await api(`/api/clusters/${enc}/dependencies`, { method: 'POST' });
      if (r.ok) location.hash = `#/op/${r.body.operationId}`;
      else e.target.after(errorBox(r));
    } }, 'Reconcile dependencies');
    show(h('h1', {}, `Cluster ${name}`),
      h('h2', {}, 'Stages'), table(['Stage', 'State', ''], stages),
      h('h2', {}, 'Dependencies'),
      deps.ok ? table(['Component', 'Install', 'State', 'Reason'], deps.body.components.map((d) => [d.name, d.install, stateBadge(d.state), d.reason])) : errorBox(deps),
      reconcile,
      versions.ok ? versionsPanel(versions.body, enc) : null,
      h('h2', {}, 'Nodes'), nodesTable(status),
      // Shared by teams: how the instance types are split, at a glance.
      ...(teams.ok && teams.body.enabled && teams.body.teams.length
        ? [h('h2', {}, 'Teams'), shareChart(teams.body, 'cluster-teams'), h('a', { href: '#/teams' }, 'quotas, use and policy')] : []),
      h('h2', {}, 'Storage claims'), claimsTable(claims),
      h('h2', {}, 'Remove'), removal(name));
  };
  await render();
  return follow((o) => o.cluster === name, render);
}

/** Forgetting touches nothing in the account; deleting removes what the cluster is made of. */
function removal(name) {
  const path = `/api/clusters/${encodeURIComponent(name)}`;
  const forget = h('button', { type: 'button', id: 'cluster-forget', class: 'secondary', onclick: (e) => askThenStart(`${path}/forget`,
    `Forget ${name}? InstantStart drops its record and touches nothing in your account: its EKS and HyperPod clusters keep running (and billing). Import it again to manage it.`,
    e.target, 'POST') }, 'Forget cluster');
  const del = h('button', { type: 'button', id: 'cluster-delete', class: 'danger', onclick: (e) => askThenStart(path,
    `Delete ${name}? This deletes its HyperPod cluster, EKS cluster, network and roles, imported ones too. Its objects in S3 are kept.`,
    e.target) }, 'Delete cluster');
  return h('div', {},
    h('p', { class: 'muted' }, 'Forget: stop managing the cluster here and leave everything running (for an imported cluster, hand it back). Delete: tear it all down.'),
    forget, ' ', del);
}

function nodesTable(status) {
  if (!status.ok) return errorBox(status);
  const s = status.body;
  return h('div', {},
    h('p', { class: 'muted' }, `${s.readyNodes} ready of ${s.nodes.length} · GPUs free ${s.gpusFree} of ${s.gpusTotal} · pending GPU demand ${s.pendingGpus} · ${s.cache.source} view ${s.cache.revision}`),
    table(['Node', 'Instance type', 'Group', 'Capacity', 'GPUs (requested/allocatable)', 'Ready', 'Health'],
      s.nodes.map((n) => [n.name, n.instanceType || '', n.instanceGroup || '', n.capacityType || '',
        `${n.gpus.requested}/${n.gpus.allocatable}`, readyCell(n),
        Object.values(n.health).join(', ')]), 'No nodes have joined yet.'));
}

/** Ready, or not with the reason the node gives (what its kubelet would log). */
