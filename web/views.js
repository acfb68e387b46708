// The views: clusters, create form, progress panel, cluster detail, nodes, storage, operations.
// Each renders from the server and returns an optional cleanup function.

import { api, h, live, onOperations, refreshClusterSelect, scoped, session, show as showNow } from './app.js';

const TERMINAL = ['succeeded', 'failed', 'cancelled'];

/** Typical durations on AWS (the sandbox compresses them by its time scale). */
const EXPECTED = {
  pipeline: '35–50 min', cluster: '15–20 min', dependencies: '3–5 min', hyperpod: '15–25 min',
  storage: '1–2 min', 'storage-delete': 'under a minute', import: 'under a minute',
  'instance-group-add': '10–20 min', 'instance-group-scale': '5–15 min', 'instance-group-delete': '5–15 min',
  'node-action': '2–10 min', 'delete-cluster': '15–25 min',
  'model-download': 'minutes to an hour', 'inference-deploy': '5–20 min', 'workload-delete': 'under a minute',
  'hyperpod-software-update': '30–90 min',
};

function expected(kind) {
  const aws = EXPECTED[kind];
  if (!aws) return '';
  return session.health && session.health.cloud === 'sandbox'
    ? `expected ${aws} on AWS (seconds in the sandbox)` : `expected ${aws}`;
}

function stateBadge(state) {
  return h('span', { class: `state state-${state}`, 'data-state': state }, state);
}

function elapsed(started, finished) {
  if (!started) return '';
  const ms = (finished ? Date.parse(finished) : Date.now()) - Date.parse(started);
  const s = Math.max(0, Math.round(ms / 1000));
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m ${s % 60}s`;
}

function problemText(p) {
  if (!p) return 'unknown error';
  const hint = p.hint === undefined || p.hint === null ? '' : ` Valid: ${Array.isArray(p.hint) ? p.hint.join(', ') : typeof p.hint === 'string' ? p.hint : JSON.stringify(p.hint)}.`;
  return `${p.detail || p.title || 'error'}${hint}`;
}

function errorBox(r) {
  return h('p', { class: 'error', role: 'alert' }, problemText(r.body));
}

function table(headers, rows, empty = 'Nothing yet.') {
  if (!rows.length) return h('p', { class: 'muted' }, empty);
  return h('table', {}, h('thead', {}, h('tr', {}, headers.map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c) => h('td', {}, c))))));
}

/** Re-renders `render` on every relevant push, or by long-polling when pushes do not arrive.
 * Renders never overlap: a push during a render schedules one more, so the last render always
 * starts after the last change (an older, slower response cannot have the last word). */
function follow(isRelevant, render, pollId) {
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

export async function clusters() {
  const show = scoped();
  const render = async () => {
    const r = await api('/api/clusters');
    if (!r.ok) return show(h('h1', {}, 'Clusters'), errorBox(r));
    const rows = r.body.map((c) => [
      h('a', { href: `#/cluster/${encodeURIComponent(c.name)}` }, c.name),
      h('span', {}, Object.entries(c.stages).filter(([k]) => k !== 'pipeline').map(([k, v]) => [k, ' ', stateBadge(v.state), '  '])),
      c.stages.pipeline ? h('a', { href: `#/op/${c.stages.pipeline.id}` }, 'pipeline progress') : '',
    ]);
    show(h('h1', {}, 'Clusters'),
      h('p', {}, h('a', { href: '#/create' }, 'Create a cluster')),
      table(['Name', 'Stages', ''], rows, 'No clusters yet. Create one to start.'));
  };
  await render();
  return follow(() => true, render);
}

// --- create ---------------------------------------------------------------------------------

export async function create() {
  const show = scoped();
  const zones = await api('/api/aws/zones');
  const field = (name, label, input, help) => [
    h('label', { for: name }, label),
    h('div', {}, input, help ? h('div', { class: 'field-hint', id: `${name}-help` }, help) : '',
      h('div', { class: 'field-error', id: `${name}-error`, role: 'alert' })),
  ];
  const name = h('input', { type: 'text', id: 'name', name: 'name', required: true, autocomplete: 'off', 'aria-describedby': 'name-help name-error' });
  const region = h('input', { type: 'text', id: 'region', name: 'region', readonly: true, value: (session.health && session.health.region) || '' });
  const zone = h('select', { id: 'zone', name: 'zone', required: true, 'aria-describedby': 'zone-error' },
    h('option', { value: '' }, 'Choose a zone'),
    ...(zones.ok ? zones.body.map((z) => h('option', { value: z.name }, `${z.name} (${z.id})`)) : []));
  const type = h('select', { id: 'instanceType', name: 'instanceType', required: true, 'aria-describedby': 'instanceType-help instanceType-error' },
    h('option', { value: '' }, 'Choose a zone first'));
  const count = h('input', { type: 'number', id: 'instanceCount', name: 'instanceCount', min: 1, value: 1, required: true, 'aria-describedby': 'instanceCount-error' });
  const capacity = h('select', { id: 'capacityType', name: 'capacityType', 'aria-describedby': 'capacityType-error' },
    ...['on-demand', 'spot', 'training-plan'].map((c) => h('option', { value: c }, c)));
  const plan = h('input', { type: 'text', id: 'trainingPlanArn', name: 'trainingPlanArn', disabled: true, 'aria-describedby': 'trainingPlanArn-error' });
  const box = (id, checked, disabled) => h('input', { type: 'checkbox', id, name: id, checked, disabled });
  const deps = box('dependencies', true);
  const recovery = box('nodeRecovery', true, true);
  const dhc = box('deepHealthChecks', false);
  const storage = box('storage', true);
  const formError = h('div', { class: 'error', role: 'alert', id: 'form-error' });
  const submit = h('button', { type: 'submit' }, 'Create cluster');

  zone.addEventListener('change', async () => {
    type.replaceChildren(h('option', { value: '' }, 'Loading…'));
    if (!zone.value) return type.replaceChildren(h('option', { value: '' }, 'Choose a zone first'));
    const r = await api(`/api/aws/instance-types?zone=${encodeURIComponent(zone.value)}`);
    const types = r.ok ? r.body.instanceTypes : [];
    type.replaceChildren(types.length
      ? h('option', { value: '' }, 'Choose an instance type')
      : h('option', { value: '' }, 'No accelerated instance types offered in this zone'),
    ...types.map((t) => h('option', { value: t }, t)));
  });
  capacity.addEventListener('change', () => { plan.disabled = capacity.value !== 'training-plan'; checkPreflight(); });

  // Preflight before the first cluster: quota for the type and count, training plans, advice.
  const preflight = h('div', { id: 'preflight', 'aria-live': 'polite', class: 'muted' });
  const checkPreflight = async () => {
    if (!type.value || !(Number(count.value) > 0)) return preflight.replaceChildren();
    const r = await api(`/api/aws/preflight?instanceType=${encodeURIComponent(type.value)}&count=${Number(count.value)}&capacityType=${encodeURIComponent(capacity.value)}`);
    if (!r.ok) return preflight.replaceChildren(errorBox(r));
    const q = r.body.quota;
    preflight.replaceChildren(
      h('p', { class: q && !q.ok ? 'error' : '' }, q ? `Quota: ${q.requested} of ${q.limit} × ${q.instanceType} ${q.ok ? 'fits' : 'exceeds the HyperPod quota'}.` : 'Quota unknown.'),
      r.body.trainingPlans.length ? h('p', {}, `Training plans: ${r.body.trainingPlans.map((p) => `${p.name} (${p.status}, ${p.availableInstanceCount} available)`).join('; ')}`) : '',
      h('ul', {}, r.body.advice.map((a) => h('li', {}, a))));
  };
  type.addEventListener('change', checkPreflight);
  count.addEventListener('input', checkPreflight);

  const form = h('form', { class: 'grid', novalidate: true, 'aria-label': 'Create cluster' },
    field('name', 'Cluster name', name, 'Lowercase letters, digits and hyphens (e.g. llm-train-1).'),
    field('region', 'Region', region),
    field('zone', 'Availability Zone', zone),
    field('instanceType', 'Accelerated instance type', type, 'Only the types this account is offered in the zone.'),
    field('instanceCount', 'Instance count', count),
    h('span', { class: 'field-hint' }, 'Preflight'), preflight,
    field('capacityType', 'Capacity type', capacity, 'Fixed for the instance group\'s life.'),
    field('trainingPlanArn', 'Training plan ARN', plan),
    field('dependencies', 'Install dependencies', deps),
    field('nodeRecovery', 'Node auto-recovery', recovery, 'Always on: HyperPod replaces nodes that fail health checks.'),
    field('deepHealthChecks', 'Deep health checks', dhc, 'Stress and connectivity checks on new nodes (slower start).'),
    field('storage', 'Mount the shared S3 bucket', storage),
    h('span'), h('div', {}, submit, formError));

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    for (const el of form.querySelectorAll('.field-error')) el.textContent = '';
    formError.textContent = '';
    const body = {
      name: name.value.trim(), zone: zone.value, instanceType: type.value,
      instanceCount: Number(count.value), capacityType: capacity.value,
      dependencies: deps.checked, storage: storage.checked, deepHealthChecks: dhc.checked,
    };
    if (region.value) body.region = region.value;
    if (capacity.value === 'training-plan') body.trainingPlanArn = plan.value.trim();
    submit.disabled = true;
    const r = await api('/api/pipelines', { method: 'POST', body });
    submit.disabled = false;
    if (r.ok) {
      await refreshClusterSelect();
      location.hash = `#/op/${r.body.operationId}`;
      return;
    }
    const target = r.body && r.body.field && form.querySelector(`#${CSS.escape(r.body.field)}-error`);
    (target || formError).textContent = problemText(r.body);
    const input = r.body && r.body.field && form.querySelector(`#${CSS.escape(r.body.field)}`);
    if (input) { input.setAttribute('aria-invalid', 'true'); input.focus(); }
  });
  show(h('h1', {}, 'Create a cluster'),
    h('p', { class: 'muted' }, 'Network + EKS, dependencies, HyperPod and storage, run as one pipeline you can watch and retry.'),
    zones.ok ? form : errorBox(zones));
}

// --- progress -------------------------------------------------------------------------------

function phaseRows(op) {
  return table(['Phase', 'State', 'Elapsed', 'Progress'], op.phases.map((p) => [
    p.name, stateBadge(p.state), elapsed(p.startedAt, p.finishedAt),
    p.error ? h('span', { class: 'error' }, p.error.message) : (p.progress || ''),
  ]));
}

async function retry(id, button) {
  button.disabled = true;
  const r = await api(`/api/operations/${id}/retry`, { method: 'POST' });
  if (!r.ok) button.after(errorBox(r));
}

/** What a failure means and what to do, in plain words, for the causes seen most. */
const PLAIN = [
  [/ResourceLimitExceeded|LimitExceeded|quota/i, 'The account\'s quota is too low for this request: ask for an increase in Service Quotas (or use fewer instances), then Retry.'],
  [/InsufficientInstanceCapacity|InsufficientCapacity|UnsupportedAvailabilityZone/i, 'AWS has no capacity for this instance type in this zone right now: choose another zone, or reserve capacity with a training plan.'],
  [/AccessDenied|UnauthorizedOperation|not authorized/i, 'The control plane\'s IAM role is missing a permission for this call: add it, then Retry.'],
  [/Throttl|RequestLimitExceeded|TooManyRequests/i, 'AWS is rate-limiting requests: Retry in a minute.'],
  [/CacheNotSynced|Unreachable|k8s:/i, 'The cluster\'s Kubernetes API did not answer as expected: check that the EKS cluster is ACTIVE and reachable, then Retry.'],
];

function plainReason(message) {
  const hit = PLAIN.find(([re]) => re.test(message));
  return hit ? hit[1] : 'The step failed; the details below say why. Fix the cause, then Retry: finished steps are kept and nothing is created twice.';
}

function stageBox(name, op, retryId) {
  const reason = op && op.state === 'failed' && op.error ? op.error.message : null;
  const retryButton = op && op.state === 'failed'
    ? h('button', { type: 'button', 'data-retry': name, onclick: (e) => retry(retryId || op.id, e.target) }, `Retry ${name}`) : '';
  return h('section', { class: 'stage', 'data-stage': name, 'aria-label': `Stage ${name}` },
    h('header', {}, h('strong', {}, name), op ? stateBadge(op.state) : stateBadge('pending'),
      op ? h('span', { class: 'muted' }, `elapsed ${elapsed(op.createdAt, TERMINAL.includes(op.state) ? op.updatedAt : null)}`) : '',
      h('span', { class: 'muted' }, expected(op ? op.kind : name)),
      op ? h('a', { href: `#/op/${op.id}` }, 'details') : ''),
    reason ? h('p', { class: 'plain', role: 'alert' }, plainReason(reason)) : '',
    reason ? h('p', { class: 'reason' }, reason) : '',
    op ? phaseRows(op) : h('p', { class: 'muted' }, 'Not started yet.'),
    retryButton);
}

export async function progress(id) {
  const show = scoped();
  let ids = new Set([id]);
  const render = async () => {
    const r = await api(`/api/operations/${id}`);
    if (!r.ok) return show(h('h1', {}, 'Operation'), errorBox(r));
    const op = r.body;
    ids = new Set([op.id]);
    const title = h('h1', {}, `${op.kind} · ${op.cluster} `, stateBadge(op.state));
    const meta = h('p', { class: 'muted' }, `Started by ${op.actor} at ${op.createdAt} · ${expected(op.kind)}`,
      op.parentId ? [' · part of ', h('a', { href: `#/op/${op.parentId}` }, 'its pipeline')] : '');
    let body;
    if (op.kind === 'pipeline') {
      const children = await Promise.all(op.phases.map(async (p) => {
        const child = p.outputs && p.outputs.operationId;
        if (!child) return null;
        ids.add(child);
        const c = await api(`/api/operations/${child}`);
        return c.ok ? c.body : null;
      }));
      body = op.phases.map((p, i) => stageBox(p.name, children[i], op.id));
    } else {
      body = [stageBox(op.kind, op, op.parentId || op.id)];
    }
    show(title, meta, h('div', { id: 'stages', 'data-operation': op.id, 'data-state': op.state }, body));
  };
  await render();
  return follow((o) => ids.has(o.id) || ids.has(o.parentId), render, () => id);
}

// --- cluster detail -------------------------------------------------------------------------

export async function cluster(name) {
  const show = scoped();
  const render = async () => {
    const enc = encodeURIComponent(name);
    const [c, deps, status, claims] = await Promise.all([
      api(`/api/clusters/${enc}`), api(`/api/clusters/${enc}/dependencies`),
      api(`/api/clusters/${enc}/status`), api(`/api/clusters/${enc}/storage`)]);
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
      h('h2', {}, 'Nodes'), nodesTable(status),
      h('h2', {}, 'Storage claims'), claimsTable(claims));
  };
  await render();
  return follow((o) => o.cluster === name, render);
}

function nodesTable(status) {
  if (!status.ok) return errorBox(status);
  const s = status.body;
  return h('div', {},
    h('p', { class: 'muted' }, `${s.readyNodes} ready of ${s.nodes.length} · GPUs free ${s.gpusFree} of ${s.gpusTotal} · pending GPU demand ${s.pendingGpus} · cache age ${s.cache.ageMs} ms`),
    table(['Node', 'Instance type', 'Group', 'Capacity', 'GPUs (requested/allocatable)', 'Ready', 'Health'],
      s.nodes.map((n) => [n.name, n.instanceType || '', n.instanceGroup || '', n.capacityType || '',
        `${n.gpus.requested}/${n.gpus.allocatable}`, readyCell(n),
        Object.values(n.health).join(', ')]), 'No nodes have joined yet.'));
}

/** Ready, or not with the reason the node gives (what its kubelet would log). */
function readyCell(n) {
  if (n.ready) return 'yes';
  return n.notReadyReason ? h('span', { title: n.notReadyReason }, `no — ${n.notReadyReason}`) : 'no';
}

function claimsTable(claims) {
  if (!claims.ok) return errorBox(claims);
  return table(['Claim', 'Namespace', 'Kind', 'Source', 'Capacity', 'Phase'], claims.body.map((c) => [
    c.claimName, c.namespace, c.kind, c.bucket || c.fileSystemId || '', c.capacity || '', c.phase || '']),
  'No claims yet.');
}

function needsActive(title) {
  if (session.active) return false;
  showNow(h('h1', {}, title), h('p', {}, 'Choose a cluster in the header first.'));
  return true;
}

export async function nodes() {
  const show = scoped();
  if (needsActive('Instance groups & nodes')) return null;
  const name = session.active;
  const enc = encodeURIComponent(name);
  const render = async () => {
    const [groups, list] = await Promise.all([api(`/api/clusters/${enc}/instance-groups`), api(`/api/clusters/${enc}/nodes`)]);
    show(h('h1', {}, `Instance groups & nodes · ${name}`),
      h('h2', {}, 'Instance groups'),
      groups.ok ? table(['Group', 'Instance type', 'Capacity', 'Network', 'Count (current/target)', 'Deep health checks', 'Scale to', ''],
        groups.body.map((g) => [g.name, g.instanceType, g.capacityType, g.networkInterface, `${g.currentCount}/${g.targetCount}`, g.deepHealthChecks.join(', '),
          scaleControl(enc, g), h('button', { type: 'button', class: 'secondary', 'aria-label': `remove group ${g.name}`,
            onclick: (e) => removeGroup(enc, g.name, e.target) }, 'remove')])) : errorBox(groups),
      h('h2', {}, 'Add an instance group'), await addGroupForm(enc),
      h('h2', {}, 'Nodes'),
      list.ok ? h('div', {}, h('p', { class: 'muted' }, list.body.hint),
        table(['Instance', 'Group', 'Type', 'HyperPod status', 'Kubernetes ready', 'GPUs free', 'Actions'],
          list.body.nodes.map((n) => [n.instanceId, n.instanceGroup, n.instanceType, n.status,
            n.kubernetes ? readyCell(n.kubernetes) : 'not joined',
            n.kubernetes ? `${n.kubernetes.gpus.free}/${n.kubernetes.gpus.allocatable}` : '',
            h('span', {}, NODE_ACTIONS.map(([action, question]) => h('button', {
              type: 'button', class: 'secondary', 'aria-label': `${action} ${n.instanceId}`,
              onclick: (e) => nodeAction(enc, n.instanceId, action, question, e.target),
            }, action), ' '))]),
          'No nodes yet.')) : errorBox(list));
  };
  await render();
  return follow((o) => o.cluster === name, render);
}

function scaleControl(cluster, g) {
  const input = h('input', { type: 'number', min: 0, value: g.targetCount, 'aria-label': `new count for ${g.name}` });
  const go = h('button', { type: 'button', class: 'secondary', onclick: async () => {
    go.disabled = true;
    const r = await api(`/api/clusters/${cluster}/instance-groups/${encodeURIComponent(g.name)}`, { method: 'PATCH', body: { instanceCount: Number(input.value) } });
    if (r.ok && r.status === 202) location.hash = `#/op/${r.body.operationId}`;
    else { go.disabled = false; go.after(r.ok ? h('span', { class: 'muted' }, ' no change') : errorBox(r)); }
  } }, 'scale');
  return h('span', {}, input, ' ', go);
}

async function removeGroup(cluster, group, button) {
  if (!window.confirm(`Remove instance group ${group}? Its nodes are terminated.`)) return;
  button.disabled = true;
  const r = await api(`/api/clusters/${cluster}/instance-groups/${encodeURIComponent(group)}`, { method: 'DELETE' });
  if (r.ok) location.hash = `#/op/${r.body.operationId}`;
  else { button.disabled = false; button.after(errorBox(r)); }
}

/** Zone and instance type come from the account's offerings; capacity is fixed for the group's life. */
async function addGroupForm(cluster) {
  const zones = await api('/api/aws/zones');
  const name = h('input', { type: 'text', id: 'group-name', autocomplete: 'off' });
  const zone = h('select', { id: 'group-zone' }, h('option', { value: '' }, 'Choose a zone'),
    ...(zones.ok ? zones.body.map((z) => h('option', { value: z.name }, z.name)) : []));
  const type = h('select', { id: 'group-type' }, h('option', { value: '' }, 'Choose a zone first'));
  const count = h('input', { type: 'number', id: 'group-count', min: 1, value: 1 });
  const capacity = h('select', { id: 'group-capacity' }, ...['on-demand', 'spot', 'training-plan'].map((c) => h('option', { value: c }, c)));
  const plan = h('input', { type: 'text', id: 'group-plan', autocomplete: 'off', placeholder: 'arn:aws:sagemaker:…:training-plan/…' });
  const network = h('select', { id: 'group-network' }, ...['standard', 'efa-only'].map((c) => h('option', { value: c }, c)));
  const error = h('div', { class: 'error', role: 'alert', id: 'group-error' });
  zone.addEventListener('change', async () => {
    const r = await api(`/api/aws/instance-types?zone=${encodeURIComponent(zone.value)}`);
    const types = r.ok ? r.body.instanceTypes : [];
    type.replaceChildren(h('option', { value: '' }, types.length ? 'Choose an instance type' : 'None offered in this zone'),
      ...types.map((t) => h('option', { value: t }, t)));
  });
  const form = h('form', { class: 'grid', 'aria-label': 'Add an instance group' },
    h('label', { for: 'group-name' }, 'Group name'), name,
    h('label', { for: 'group-zone' }, 'Availability Zone'), zone,
    h('label', { for: 'group-type' }, 'Instance type'), type,
    h('label', { for: 'group-count' }, 'Instance count'), count,
    h('label', { for: 'group-capacity' }, 'Capacity type'), capacity,
    h('label', { for: 'group-plan' }, 'Training plan ARN'),
    h('div', {}, plan, h('div', { class: 'field-hint' }, 'Training plan only. Its reservation decides the zone: leave the zone unset or pick the plan\'s.')),
    h('label', { for: 'group-network' }, 'Network interface'),
    h('div', {}, network, h('div', { class: 'field-hint' }, 'standard: EFA with ENA where the type supports EFA. efa-only: EFA-capable types only. Fixed for the group\'s life.')),
    h('span'), h('div', {}, h('button', { type: 'submit' }, 'Add group'), error));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    error.textContent = '';
    const body = { instanceGroupName: name.value.trim(), instanceType: type.value,
      instanceCount: Number(count.value), capacityType: capacity.value, networkInterface: network.value };
    if (zone.value) body.zone = zone.value;
    if (capacity.value === 'training-plan') body.trainingPlanArn = plan.value.trim();
    const r = await api(`/api/clusters/${cluster}/instance-groups`, { method: 'POST', body });
    if (r.ok) location.hash = `#/op/${r.body.operationId}`;
    else error.textContent = problemText(r.body);
  });
  return form;
}

/** Escalation order: investigate, then reboot, then replace (loses local volumes). */
const NODE_ACTIONS = [
  ['reboot', 'Reboot this node? Jobs on it are interrupted.'],
  ['replace', 'Replace this node with a new instance? Its local volumes are lost. Replace only if a reboot did not help.'],
  ['delete', 'Remove this node from its instance group? The group shrinks by one.'],
];

async function nodeAction(cluster, id, action, question, button) {
  if (!window.confirm(`${question}\n\n${id}`)) return;
  button.disabled = true;
  const r = await api(`/api/clusters/${cluster}/nodes/${encodeURIComponent(id)}/${action}`, { method: 'POST' });
  if (r.ok) location.hash = `#/op/${r.body.operationId}`;
  else { button.disabled = false; button.after(errorBox(r)); }
}

export async function storage() {
  const show = scoped();
  if (needsActive('Storage')) return null;
  const enc = encodeURIComponent(session.active);
  const claims = await api(`/api/clusters/${enc}/storage`);
  // What an S3 claim holds, one prefix at a time.
  const listing = h('div', { id: 'objects' });
  const prefix = h('input', { type: 'text', id: 'objects-prefix', autocomplete: 'off', placeholder: 'models/' });
  const browse = (claim) => async () => {
    const r = await api(`/api/clusters/${enc}/storage/${encodeURIComponent(claim)}/objects?prefix=${encodeURIComponent(prefix.value.trim())}`);
    listing.replaceChildren(r.ok
      ? h('div', {}, h('p', { class: 'muted' }, `s3://${r.body.bucket}/${r.body.prefix}${r.body.truncated ? ' (first 1000 keys)' : ''}`),
        r.body.keys.length ? h('ul', {}, r.body.keys.map((k) => h('li', {}, k))) : h('p', { class: 'muted' }, 'Nothing under this prefix.'))
      : errorBox(r));
  };
  const s3 = claims.ok ? claims.body.filter((c) => c.kind === 's3') : [];
  show(h('h1', {}, `Storage · ${session.active}`), claimsTable(claims),
    h('p', { class: 'muted' }, 'Workloads mount the shared bucket claim s3-claim at /s3.'),
    s3.length ? [h('h2', {}, 'Browse a bucket'),
      h('div', { class: 'grid' }, h('label', { for: 'objects-prefix' }, 'Prefix'),
        h('div', {}, prefix, ' ', s3.map((c) => h('button', { type: 'button', class: 'secondary', onclick: browse(c.claimName) }, `list ${c.claimName}`)))),
      listing] : null);
  return null;
}

// --- operations -----------------------------------------------------------------------------

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
function startForm(label, id, fields, path, body) {
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

function input(id, attrs = {}) {
  return h('input', { type: 'text', id, autocomplete: 'off', ...attrs });
}

async function removeWorkload(path, question, button) {
  if (!window.confirm(question)) return;
  button.disabled = true;
  const r = await api(path, { method: 'DELETE' });
  if (r.ok) location.hash = `#/op/${r.body.operationId}`;
  else { button.disabled = false; button.after(errorBox(r)); }
}

export async function models() {
  const show = scoped();
  if (needsActive('Models')) return null;
  const enc = encodeURIComponent(session.active);
  // Only the list follows pushes: the form keeps what the user is typing.
  const listBox = h('div', { id: 'models-list' });
  const render = async () => {
    const list = await api(`/api/clusters/${enc}/models`);
    listBox.replaceChildren(list.ok ? table(['Model', 'Revision', 'Claim', 'Path', 'State', ''], list.body.map((m) => [m.modelId, m.revision, m.claim, m.path,
      h('span', {}, stateBadge(m.state), m.message ? h('div', { class: 'error' }, m.message) : null),
      h('button', { type: 'button', class: 'secondary', 'aria-label': `remove download ${m.modelId}`,
        onclick: (e) => removeWorkload(`/api/clusters/${enc}/jobs/${encodeURIComponent(m.job)}`,
          `Remove the download job of ${m.modelId}? The files already in the bucket stay.`, e.target) }, 'remove job')]),
    'No model downloaded yet.') : errorBox(list));
  };
  const id = input('model-id', { placeholder: 'owner/name, e.g. Qwen/Qwen3-8B' });
  const revision = input('model-revision', { placeholder: 'main' });
  const token = h('input', { type: 'password', id: 'model-token', autocomplete: 'off' });
  await render();
  show(h('h1', {}, `Models · ${session.active}`), listBox,
    h('h2', {}, 'Download from Hugging Face'),
    startForm('Download', 'model', [['Model id', id], ['Revision', revision],
      ['Token', token, 'Only for gated models. Kept in a Kubernetes Secret, never stored here.']],
    `/api/clusters/${enc}/models`, () => {
      const b = { modelId: id.value.trim() };
      if (revision.value.trim()) b.revision = revision.value.trim();
      if (token.value) b.hfToken = token.value;
      return b;
    }));
  return follow((o) => o.cluster === session.active && ['model-download', 'workload-delete'].includes(o.kind), render);
}

export async function inference() {
  const show = scoped();
  if (needsActive('Inference')) return null;
  const enc = encodeURIComponent(session.active);
  const listBox = h('div', { id: 'deployments-list' });
  const answer = h('pre', { id: 'invoke-answer', class: 'muted' });
  const invoke = (d) => {
    const prompt = h('input', { type: 'text', 'aria-label': `prompt for ${d.name}`, value: 'Say hello in one word.' });
    const go = h('button', { type: 'button', class: 'secondary', onclick: async () => {
      go.disabled = true;
      const r = await api(`/api/clusters/${enc}/deployments/${encodeURIComponent(d.name)}/invoke`, { method: 'POST', body: { prompt: prompt.value } });
      go.disabled = false;
      answer.textContent = r.ok ? (r.body.choices?.[0]?.message?.content ?? JSON.stringify(r.body)) : problemText(r.body);
    } }, 'invoke');
    return h('span', {}, prompt, ' ', go);
  };
  const render = async () => {
    const list = await api(`/api/clusters/${enc}/deployments`);
    listBox.replaceChildren(list.ok ? table(['Deployment', 'Image', 'Ready', 'State', 'Service', 'Endpoint', 'Smoke test', ''],
      list.body.map((d) => [d.name, d.image, `${d.readyReplicas}/${d.replicas}`, stateBadge(d.state), d.service, d.endpoint || '',
        d.state === 'ready' ? invoke(d) : '',
        h('button', { type: 'button', class: 'secondary', 'aria-label': `remove deployment ${d.name}`,
          onclick: (e) => removeWorkload(`/api/clusters/${enc}/deployments/${encodeURIComponent(d.name)}`,
            `Stop serving ${d.name}?`, e.target) }, 'remove')]),
      'Nothing is served yet.') : errorBox(list));
  };
  const name = input('dep-name', { placeholder: 'e.g. qwen3-8b' });
  const image = input('dep-image', { placeholder: 'vllm/vllm-openai:latest' });
  const args = input('dep-args', { placeholder: '--model /s3/models/Qwen/Qwen3-8B' });
  const gpus = h('input', { type: 'number', id: 'dep-gpus', min: 1, max: 8, value: 1 });
  const replicas = h('input', { type: 'number', id: 'dep-replicas', min: 1, max: 16, value: 1 });
  const service = h('select', { id: 'dep-service' }, ['cluster-ip', 'load-balancer'].map((v) => h('option', { value: v }, v)));
  await render();
  show(h('h1', {}, `Inference · ${session.active}`), listBox, answer,
    h('h2', {}, 'Serve a model'),
    startForm('Deploy', 'dep', [['Name', name], ['Image', image], ['Arguments', args, 'Space-separated; passed as a list, never to a shell. The storage claim is at /s3.'],
      ['GPUs per replica', gpus], ['Replicas', replicas],
      ['Service', service, 'load-balancer is internal to the VPC, never internet-facing.']],
    `/api/clusters/${enc}/deployments`, () => {
      const b = { deploymentName: name.value.trim(), gpus: Number(gpus.value), replicas: Number(replicas.value), service: service.value };
      if (image.value.trim()) b.image = image.value.trim();
      const a = args.value.trim();
      if (a) b.args = a.split(/\s+/);
      return b;
    }));
  return follow((o) => o.cluster === session.active && ['inference-deploy', 'workload-delete'].includes(o.kind), render);
}

export async function jobs() {
  const show = scoped();
  if (needsActive('Training')) return null;
  const enc = encodeURIComponent(session.active);
  const render = async () => {
    const list = await api(`/api/clusters/${enc}/jobs`);
    show(h('h1', {}, `Training & jobs · ${session.active}`),
      h('p', { class: 'muted' }, 'Jobs in namespace default: Kubernetes Jobs, HyperPod PyTorch jobs and Ray jobs. Submitting training jobs arrives in a later version.'),
      list.ok ? table(['Job', 'Kind', 'State', 'Created', 'Message', ''], list.body.map((j) => [j.name, j.kind, stateBadge(j.state), j.created || '', j.message || '',
        h('button', { type: 'button', class: 'secondary', 'aria-label': `delete job ${j.name}`,
          onclick: (e) => removeWorkload(`/api/clusters/${enc}/jobs/${encodeURIComponent(j.name)}?kind=${j.kind}`,
            `Delete ${j.kind} ${j.name} and its pods (and their logs)?`, e.target) }, 'delete')]),
      'No jobs.') : errorBox(list));
  };
  await render();
  return follow((o) => o.cluster === session.active, render);
}

// --- advanced features ---------------------------------------------------------------------

/** Shows actual state; sends only the fields the user changed; says "no change" otherwise. */
export async function features() {
  const show = scoped();
  if (needsActive('Advanced features')) return null;
  const name = session.active;
  const enc = encodeURIComponent(name);
  // After a change the panel is read again, so the next diff is against the new state.
  const render = async (message) => {
    const r = await api(`/api/clusters/${enc}/features`);
    if (!r.ok) return show(h('h1', {}, 'Advanced features'), errorBox(r));
    const boxes = r.body.features.map((f) => ({ f, input: h('input', { type: 'checkbox', id: `feature-${f.key}`, checked: f.enabled }) }));
    // Managed autoscaling also chooses the instance groups it governs.
    const auto = r.body.features.find((f) => f.key === 'managedAutoscaling');
    const groups = auto ? await api(`/api/clusters/${enc}/instance-groups`) : { ok: false };
    const current = new Set(auto?.instanceGroups || []);
    const groupBoxes = groups.ok ? groups.body.map((g) => ({ g, input: h('input', {
      type: 'checkbox', id: `autoscale-${g.name}`, checked: current.has(g.name),
      disabled: g.capacityType !== 'on-demand' || g.deepHealthChecks.length > 0 }) })) : [];
    const groupPicker = h('div', { class: 'field-hint' }, 'Groups it governs (on-demand or Spot, without deep health checks; none chosen = every eligible group): ',
      groupBoxes.map(({ g, input }) => h('label', { for: input.id }, input, ` ${g.name} `)));
    const result = h('div', { id: 'features-result', role: 'status' });
    const form = h('form', { class: 'grid', 'aria-label': 'Advanced features' },
      boxes.map(({ f, input }) => [
        h('label', { for: input.id }, f.key),
        h('div', {}, input, ' ', stateBadge(f.state),
          f.operationId ? [' ', h('a', { href: `#/op/${f.operationId}` }, 'progress')] : null,
          f.reason ? h('div', { class: 'error' }, f.reason) : null,
          h('div', { class: 'field-hint' }, f.description),
          f.key === 'managedAutoscaling' ? groupPicker : null)]),
      h('span'), h('div', {}, h('button', { type: 'submit' }, 'Apply changes')));
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const body = {};
      for (const { f, input } of boxes) if (input.checked !== f.enabled) body[f.key] = input.checked;
      const chosen = groupBoxes.filter(({ input }) => input.checked).map(({ g }) => g.name).sort();
      const autoOn = boxes.find(({ f }) => f.key === 'managedAutoscaling')?.input.checked;
      if (autoOn && chosen.length && chosen.join() !== [...current].sort().join()) body.managedAutoscalingInstanceGroups = chosen;
      if (!Object.keys(body).length) { result.textContent = 'No change: every feature is already as selected.'; return; }
      const p = await api(`/api/clusters/${enc}/features`, { method: 'PATCH', body });
      if (!p.ok) { result.replaceChildren(errorBox(p)); return; }
      await render(h('ul', {}, Object.entries(p.body.features).map(([k, v]) => h('li', {}, `${k}: `,
        v.result === 'unchanged' ? 'no change' : h('a', { href: `#/op/${v.operationId}` }, `${v.enable ? 'enabling' : 'disabling'} (progress)`)))));
    });
    if (message) result.replaceChildren(message);
    show(h('h1', {}, `Advanced features · ${name}`),
      h('p', { class: 'muted' }, 'Read from the cluster as it is. Only the features you change are sent.'),
      form, result);
  };
  await render();
  return null;
}
