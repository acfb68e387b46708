// Page: instance groups (add, scale, remove) and node actions with confirmation.

import { evidenceButton } from './evidence.js';
import { utilizationChart } from './utilization.js';
import { api, h, newest, scoped, session, problemText, errorBox, table, follow, readyCell, needsActive, confirmPlan, askThenStart } from './kit.js';

/** A rolling software update, planned: the groups, the batch, the wait between batches, the
 * alarms that roll it back, the image. Nodes are re-imaged, so it asks first. */
function softwareForm(enc, groups) {
  const which = h('select', { id: 'software-groups', multiple: true, size: Math.min(groups.length, 4) },
    groups.map((g) => h('option', { value: g.name }, g.name)));
  const unit = h('select', { id: 'software-batch-unit' }, h('option', { value: 'instances' }, 'nodes'), h('option', { value: 'percent' }, '% of the nodes'));
  const size = h('input', { type: 'number', id: 'software-batch', min: 1, value: 1 });
  const wait = h('input', { type: 'number', id: 'software-wait', min: 0, max: 3600, placeholder: 'seconds' });
  const alarms = h('input', { id: 'software-alarms', placeholder: 'CloudWatch alarm names, comma-separated' });
  const image = h('input', { id: 'software-image', placeholder: 'default, or ami-…' });
  const error = h('div', { class: 'error', role: 'alert', id: 'software-error' });
  const submit = async (e) => {
    e.preventDefault();
    error.textContent = '';
    const body = {};
    const chosen = [...which.selectedOptions].map((o) => o.value);
    if (chosen.length) body.instanceGroups = chosen;
    body[unit.value === 'percent' ? 'batchPercent' : 'batchInstances'] = Number(size.value);
    if (wait.value !== '') body.waitSeconds = Number(wait.value);
    const named = alarms.value.split(',').map((s) => s.trim()).filter(Boolean);
    if (named.length) body.rollbackAlarms = named;
    if (image.value.trim()) body.imageId = image.value.trim();
    const groupsText = chosen.length ? chosen.join(', ') : 'every group';
    const path = `/api/clusters/${enc}/hyperpod/software-update`;
    const asked = await confirmPlan(`Update the HyperPod software of ${groupsText}, ${size.value}${unit.value === 'percent' ? '%' : ''} node(s) at a time? Running jobs on a node being updated are interrupted.`, path, { method: 'POST', body });
    if (asked.refused) { error.textContent = problemText(asked.refused.body); return; }
    if (!asked.ok) return;
    const r = await api(path, { method: 'POST', body });
    if (r.ok) location.hash = `#/op/${r.body.operationId}`;
    else error.textContent = problemText(r.body);
  };
  return h('form', { class: 'grid', 'aria-label': 'Update the HyperPod software', onsubmit: submit },
    h('label', { for: which.id }, 'Groups'), h('div', {}, which, h('div', { class: 'field-hint' }, 'None chosen: every group.')),
    h('label', { for: size.id }, 'At a time'), h('div', {}, size, ' ', unit, h('div', { class: 'field-hint' }, 'Forward, and when rolled back.')),
    h('label', { for: wait.id }, 'Wait between batches'), wait,
    h('label', { for: alarms.id }, 'Roll back on alarms'), alarms,
    h('label', { for: image.id }, 'Image'), h('div', {}, image, h('div', { class: 'field-hint' }, 'Empty: HyperPod\'s latest. A group on your own AMI needs one.')),
    h('span'), h('div', {}, h('button', { type: 'submit' }, 'Update software'), error));
}

export async function nodes() {
  const show = scoped();
  if (needsActive('Instance groups & nodes')) return null;
  const name = session.active;
  const enc = encodeURIComponent(name);
  const render = async () => {
    const [groups, list, busy] = await Promise.all([api(`/api/clusters/${enc}/instance-groups`), api(`/api/clusters/${enc}/nodes`),
      utilizationChart(name, { by: 'node', id: 'node-utilization', title: 'GPU utilization' })]);
    show(h('h1', {}, `Instance groups & nodes · ${name}`),
      h('h2', {}, 'Instance groups'),
      groups.ok ? table(['Group', 'Instance type', 'Capacity', 'Network', 'Count (current/target)', 'Deep health checks', 'Scale to', ''],
        groups.body.map((g) => [g.name, g.instanceType, g.capacityType, g.networkInterface, `${g.currentCount}/${g.targetCount}`, g.deepHealthChecks.join(', '),
          scaleControl(enc, g), h('button', { type: 'button', class: 'secondary', 'aria-label': `remove group ${g.name}`,
            onclick: (e) => removeGroup(enc, g.name, e.target) }, 'remove')])) : errorBox(groups),
      h('h2', {}, 'Add an instance group'), await addGroupForm(enc),
      groups.ok && groups.body.length ? [h('h2', {}, 'Update the HyperPod software'), softwareForm(enc, groups.body)] : null,
      h('h2', {}, 'Nodes'),
      list.ok ? h('div', { id: 'node-table' }, h('p', { class: 'muted' }, list.body.hint),
        table(['Instance', 'Group', 'Type', 'HyperPod status', 'Kubernetes ready', 'GPUs free', 'Actions'],
          list.body.nodes.map((n) => [n.instanceId, n.instanceGroup, n.instanceType, n.status,
            n.kubernetes ? readyCell(n.kubernetes) : 'not joined',
            n.kubernetes ? `${n.kubernetes.gpus.free}/${n.kubernetes.gpus.allocatable}` : '',
            h('span', {}, evidenceButton(`evidence ${n.instanceId}`, `/api/clusters/${enc}/nodes/${n.instanceId}/evidence`,
              'node-evidence', () => document.getElementById('node-table')), ' ',
            NODE_ACTIONS.map(([action, question]) => h('button', {
              type: 'button', class: 'secondary', 'aria-label': `${action} ${n.instanceId}`,
              onclick: (e) => nodeAction(enc, n.instanceId, action, question, e.target),
            }, action), ' '))]),
          'No nodes yet.')) : errorBox(list),
      h('h2', {}, 'Are the GPUs busy?'), busy);
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
  await askThenStart(`/api/clusters/${cluster}/instance-groups/${encodeURIComponent(group)}`,
    `Remove instance group ${group}? Its nodes are terminated.`, button);
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
  const typesTicket = newest();
  zone.addEventListener('change', async () => {
    const current = typesTicket();
    const r = await api(`/api/aws/instance-types?zone=${encodeURIComponent(zone.value)}`);
    if (!current()) return;
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
  await askThenStart(`/api/clusters/${cluster}/nodes/${encodeURIComponent(id)}/${action}`,
    `${question}\n\n${id}`, button, 'POST');
}
