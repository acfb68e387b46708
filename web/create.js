// Pages: the create-cluster form and the progress panel of a pipeline (retry of a failed stage).

import { evidenceButton } from './evidence.js';
import { api, h, newest, refreshClusterSelect, scoped, session, TERMINAL, expected, stateBadge, elapsed, problemText, errorBox, table, follow } from './kit.js';

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

  const typesTicket = newest();
  zone.addEventListener('change', async () => {
    const current = typesTicket();
    type.replaceChildren(h('option', { value: '' }, 'Loading…'));
    if (!zone.value) return type.replaceChildren(h('option', { value: '' }, 'Choose a zone first'));
    const r = await api(`/api/aws/instance-types?zone=${encodeURIComponent(zone.value)}`);
    if (!current()) return;
    const types = r.ok ? r.body.instanceTypes : [];
    type.replaceChildren(types.length
      ? h('option', { value: '' }, 'Choose an instance type')
      : h('option', { value: '' }, 'No accelerated instance types offered in this zone'),
    ...types.map((t) => h('option', { value: t }, t)));
  });
  capacity.addEventListener('change', () => { plan.disabled = capacity.value !== 'training-plan'; checkPreflight(); });

  // Preflight before the first cluster: quota for the type and count, training plans, advice.
  const preflight = h('div', { id: 'preflight', 'aria-live': 'polite', class: 'muted' });
  const preflightTicket = newest();
  const checkPreflight = async () => {
    const current = preflightTicket();
    if (!type.value || !(Number(count.value) > 0)) return preflight.replaceChildren();
    const r = await api(`/api/aws/preflight?instanceType=${encodeURIComponent(type.value)}&count=${Number(count.value)}&capacityType=${encodeURIComponent(capacity.value)}`);
    // A count typed while an earlier check was in flight: only the newest answer is shown.
    if (!current()) return;
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
    retryButton, ' ',
    reason ? evidenceButton(`evidence of ${name}`, `/api/clusters/${encodeURIComponent(op.cluster)}/evidence`,
      `evidence-${name}`, () => document.querySelector(`[data-stage="${name}"]`)) : '');
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
