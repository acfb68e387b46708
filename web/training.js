// Page: training — a recipe and its few inputs, the recovery budget, the jobs with their
// restarts against the budget, one job's conditions; other Kubernetes Jobs below.

import { utilizationChart } from './utilization.js';
import { api, h, scoped, session, stateBadge, errorBox, table, follow, needsActive, startForm, input, askThenStart, teamFields, teamCell } from './kit.js';
import { logViewer } from './logs.js';
import { lineChart } from './chart.js';

/** MLflow for this account: set it up from the active cluster, or open its UI. */
async function mlflowStrip(enc) {
  const box = h('div', { id: 'mlflow', class: 'muted' });
  const r = await api('/api/mlflow');
  if (r.status === 404) {
    box.append('MLflow is not set up: jobs train without reporting metrics. ',
      h('button', { type: 'button', class: 'secondary', id: 'mlflow-setup', onclick: async (e) => {
        e.target.disabled = true;
        const s = await api('/api/mlflow', { method: 'POST', body: { cluster: decodeURIComponent(enc) } });
        if (s.ok) location.hash = `#/op/${s.body.operationId}`;
        else { e.target.disabled = false; box.append(errorBox(s)); }
      } }, 'Set up MLflow'));
  } else if (!r.ok) {
    box.append(errorBox(r));
  } else {
    box.append(`MLflow ${r.body.state} (${r.body.arn}): jobs submitted now report to it. `,
      r.body.url ? h('button', { type: 'button', class: 'secondary', id: 'mlflow-open', onclick: async () => {
        // The link is single-use and short-lived: fetch a fresh one on each click.
        const fresh = await api('/api/mlflow');
        if (fresh.ok && fresh.body.url) window.open(fresh.body.url, '_blank', 'noopener');
      } }, 'Open MLflow') : '');
  }
  return box;
}

/** The job's MLflow run as charts (throughput, loss), or why there are none. */
async function metricsBox(job) {
  const box = h('section', { id: 'job-metrics', 'aria-label': 'metrics' }, h('h2', {}, 'Metrics'));
  const runs = await api(`/api/mlflow/runs?experiment=${encodeURIComponent(job)}`);
  if (runs.status === 404) { box.append(h('p', { class: 'muted' }, 'MLflow is not set up: set it up on the training page, then train again.')); return box; }
  if (!runs.ok) { box.append(errorBox(runs)); return box; }
  if (!runs.body.length) { box.append(h('p', { class: 'muted' }, 'No MLflow run yet: metrics appear once the job logs its first step.')); return box; }
  const run = runs.body[0];
  const m = await api(`/api/mlflow/runs/${encodeURIComponent(run.runId)}/metrics?keys=throughput,loss`);
  if (!m.ok) { box.append(errorBox(m)); return box; }
  box.append(h('p', { class: 'muted' }, `Run ${run.runId} · ${run.status}`),
    lineChart('chart-throughput', 'Throughput (samples/s)', m.body.metrics.throughput || []),
    lineChart('chart-loss', 'Loss', m.body.metrics.loss || [], '#d1242f'));
  return box;
}

/** Restarts against their limit, drawn: a meter is read at a glance, a fraction is not. */
function budget(r) {
  if (r == null || r.count == null) return '';
  const limit = r.limit ?? 0;
  const text = limit ? `${r.count}/${limit}` : `${r.count}`;
  return h('span', { class: 'budget' },
    limit ? h('meter', { min: 0, max: limit, low: Math.max(1, limit - 1), high: limit, optimum: 0, value: r.count, 'aria-label': `restarts ${text}` }) : null,
    ` ${text}`);
}

/** Where Kueue has a team's job: admitted, or pending and why, with its place in the queue.
 * `held` says the job's own message already gives Kueue's reason (the server makes a held
 * job's message Kueue's), so it is not said twice. */
function admissionText(a, held = false) {
  if (!a) return '';
  const place = a.position ? ` · #${a.position} in the queue` : '';
  const by = a.preemptedBy ? ` by ${a.preemptedBy}` : '';
  const said = a.state === 'admitted' || !a.message || held;
  return `${a.state}${by}${place}${said ? '' : `: ${a.message}`}`;
}

function jobsTable(list, enc) {
  return table(['Job', 'Recipe', 'Team', 'State', 'Nodes', 'Restarts', 'Faulty pods', 'Paths', ''], list.map((j) => [
    h('a', { href: `#/training/${encodeURIComponent(j.name)}` }, j.name),
    j.recipe || h('span', { class: 'muted' }, `${j.kind} (external)`),
    teamCell(j),
    h('span', {}, stateBadge(j.state), j.message ? h('div', { class: j.state === 'failed' ? 'error' : 'muted' }, j.message) : null,
      j.admission ? h('div', { class: 'muted', 'data-admission': j.admission.state }, `Kueue: ${admissionText(j.admission, j.state === 'pending')}`) : null),
    `${j.nodes ?? ''} × ${j.instanceType || '?'}`,
    budget(j.restarts),
    (j.faultyPods || []).join(', '),
    Object.entries(j.paths || {}).map(([k, v]) => h('div', {}, `${k}: ${v}`)),
    j.origin === 'instantstart'
      ? h('button', { type: 'button', class: 'secondary', 'aria-label': `delete training job ${j.name}`,
        onclick: (e) => askThenStart(`/api/clusters/${enc}/training-jobs/${encodeURIComponent(j.name)}`,
          `Stop and delete ${j.name} and its pods? What it wrote under /s3 stays.`, e.target) }, 'delete')
      : h('span', { class: 'muted' }, 'read-only'),
  ]), 'No training job yet.');
}

/** The submission form: the recipe decides which inputs are asked. */
function submitForm(recipes, groups, enc, governance) {
  const recipe = h('select', { id: 'train-recipe' }, recipes.map((r) => h('option', { value: r.name }, r.title)));
  const about = h('p', { class: 'field-hint', id: 'train-recipe-about' });
  const name = input('train-name', { placeholder: 'llama-sft-1' });
  const type = h('select', { id: 'train-type' }, groups.map((g) => h('option', { value: g.instanceType }, `${g.instanceType} (${g.name})`)));
  const nodes = input('train-nodes', { type: 'number', min: 1, value: 1 });
  const paths = Object.fromEntries(['script', 'model', 'dataset', 'output'].map((k) => [k, input(`train-${k}`, { placeholder: `/s3/…` })]));
  const retries = input('train-retries', { type: 'number', min: 0, placeholder: '3' });
  const pattern = input('train-pattern', { placeholder: '.*loss: ([0-9.]+).*' });
  const cutoff = input('train-cutoff', { type: 'number', min: 1, placeholder: '600' });
  const every = input('train-every', { type: 'number', min: 1, placeholder: '300' });
  const placement = teamFields(governance, 'train');
  let form = null;
  // A recipe shows only the inputs it asks for: the label and the input (with its hint) go together.
  const setHidden = (el, hidden) => {
    const label = form.querySelector(`label[for="${el.id}"]`);
    const holder = el.parentElement && el.parentElement !== form ? el.parentElement : el;
    if (label) label.hidden = hidden;
    holder.hidden = hidden;
  };
  const current = () => recipes.find((x) => x.name === recipe.value);
  const update = () => {
    const r = current();
    about.textContent = `${r.description} Image ${r.image}. Runs as ${r.runtime === 'ray' ? 'a RayJob (KubeRay)' : 'a HyperPodPyTorchJob'}.`;
    for (const [k, el] of Object.entries(paths)) {
      const wanted = r.inputs.find((i) => i.field === k);
      setHidden(el, !wanted);
      el.required = Boolean(wanted && wanted.required);
      if (wanted) el.title = wanted.description;
    }
    for (const el of [retries, pattern, cutoff, every]) setHidden(el, r.runtime === 'ray');
  };
  const fields = [['Recipe', recipe, about], ['Job name', name], ['Instance type', type], ['Nodes', nodes],
    ...placement.fields,
    ...Object.entries(paths).map(([k, el]) => [k[0].toUpperCase() + k.slice(1), el, k === 'output' ? 'Default /s3/outputs/<job name>.' : 'A path under /s3 (the cluster\'s S3 claim).']),
    ['Retries (jobMaxRetryCount)', retries, 'The recovery budget: default 3, with 2 pod restarts before a full-job restart.'],
    ['Hang detection: log pattern', pattern, 'A progress line; no match within the cut-off or the frequency marks the job hanging.'],
    ['First match within (s)', cutoff], ['Then every (s)', every]];
  form = startForm('Submit', 'train', fields, `/api/clusters/${enc}/training-jobs`, () => {
    const r = current();
    const b = { jobName: name.value.trim(), recipe: r.name, instanceType: type.value, nodeCount: Number(nodes.value || 1) };
    placement.put(b);
    for (const [k, el] of Object.entries(paths)) if (!form.querySelector(`label[for="${el.id}"]`).hidden && el.value.trim()) b[k] = el.value.trim();
    if (r.runtime !== 'ray') {
      if (retries.value !== '') b.recovery = { jobMaxRetryCount: Number(retries.value) };
      if (pattern.value.trim()) {
        b.monitoring = { logPattern: pattern.value.trim() };
        if (cutoff.value) b.monitoring.startCutoffSeconds = Number(cutoff.value);
        if (every.value) b.monitoring.recurringFrequencySeconds = Number(every.value);
      }
    }
    return b;
  });
  recipe.addEventListener('change', update);
  return { form, update };
}

export async function training() {
  const show = scoped();
  if (needsActive('Training')) return null;
  const enc = encodeURIComponent(session.active);
  const [recipes, groups, governance] = await Promise.all([api('/api/recipes'), api(`/api/clusters/${enc}/instance-groups`),
    api(`/api/clusters/${enc}/teams`)]);
  const listBox = h('div', { id: 'training-list' });
  const otherBox = h('div', { id: 'jobs-list' });
  const render = async () => {
    const [list, other] = await Promise.all([api(`/api/clusters/${enc}/training-jobs`), api(`/api/clusters/${enc}/jobs`)]);
    listBox.replaceChildren(list.ok ? jobsTable(list.body, enc) : errorBox(list));
    otherBox.replaceChildren(other.ok ? table(['Job', 'Kind', 'State', 'Created', 'Message', ''],
      other.body.filter((j) => j.kind === 'job').map((j) => [j.name, j.kind, stateBadge(j.state), j.created || '', j.message || '',
        h('button', { type: 'button', class: 'secondary', 'aria-label': `delete job ${j.name}`,
          onclick: (e) => askThenStart(`/api/clusters/${enc}/jobs/${encodeURIComponent(j.name)}?kind=job`,
            `Delete ${j.kind} ${j.name} and its pods (and their logs)?`, e.target) }, 'delete')]), 'No other jobs.') : errorBox(other));
  };
  await render();
  const parts = [h('h1', {}, `Training · ${session.active}`), await mlflowStrip(enc), listBox];
  if (recipes.ok && groups.ok) {
    const f = submitForm(recipes.body, groups.body, enc, governance.ok ? governance.body : null);
    parts.push(h('h2', {}, 'Train from a recipe'),
      h('p', { class: 'muted' }, 'Every pod mounts the cluster\'s S3 claim at /s3. Elastic training does not cover Spot or managed tiered checkpointing.'),
      h('p', { class: 'muted', id: 'train-space' }, 'Writing the script or shaping the data first? ',
        h('a', { href: `#/spaces?cluster=${enc}` }, 'Open a space on this cluster'),
        ': it sees the same /s3, so a script saved at /s3/code/train.py is this form\'s Script, and /s3/datasets/… its Dataset.'),
      f.form);
    show(...parts, h('h2', {}, 'Other jobs'), otherBox);
    f.update();
  } else {
    show(...parts, errorBox(recipes.ok ? groups : recipes), h('h2', {}, 'Other jobs'), otherBox);
  }
  return follow((o) => o.cluster === session.active && ['training-job', 'workload-delete', 'model-download'].includes(o.kind), render);
}

export async function trainingJob(job) {
  const show = scoped();
  if (needsActive('Training')) return null;
  const enc = encodeURIComponent(session.active);
  // The facts re-render on every change; the log viewer and the chart keep their state.
  const facts = h('div', { id: 'job-facts' });
  const metrics = h('div', { id: 'job-metrics-box' });
  let viewer = null;
  let busy = null;
  const render = async () => {
    const r = await api(`/api/clusters/${enc}/training-jobs/${encodeURIComponent(job)}`);
    if (!r.ok) { show(h('h1', {}, job), errorBox(r)); return; }
    const j = r.body;
    if (!viewer) {
      viewer = logViewer(session.active, j.kind === 'RayJob' ? 'ray' : 'pytorch', j.name);
      show(facts, metrics, viewer.el);
    }
    // Throughput (from MLflow) beside how busy each rank's GPUs are, stragglers flagged.
    // Utilization is a window of minutes, read once per page, not again on every job event.
    busy ??= await utilizationChart(session.active, { by: 'pod', workload: j.name, id: 'job-utilization', title: 'GPU utilization per rank' });
    metrics.replaceChildren(await metricsBox(j.name), busy);
    facts.replaceChildren(h('h1', {}, `${j.name} · ${j.kind}`),
      h('p', {}, stateBadge(j.state), ' ', j.message || ''),
      h('dl', { class: 'facts' },
        h('dt', {}, 'Recipe'), h('dd', {}, j.recipe || 'made elsewhere (read-only)'),
        ...(j.admission ? [h('dt', {}, 'Admission'), h('dd', { id: 'job-admission' }, admissionText(j.admission))] : []),
        h('dt', {}, 'Team'), h('dd', {}, j.team ? `${j.team} (namespace ${j.namespace})${j.priority ? `, priority ${j.priority}` : ''}` : `none (namespace ${j.namespace})`),
        h('dt', {}, 'Nodes'), h('dd', {}, `${j.nodes ?? '?'} × ${j.instanceType || '?'}`),
        h('dt', {}, 'Restarts'), h('dd', {}, budget(j.restarts),
          j.restarts && j.restarts.fullJobRestartLimit != null ? ` · full-job restarts ${j.restarts.fullJobRestarts}/${j.restarts.fullJobRestartLimit}` : ''),
        h('dt', {}, 'Faulty pods / ranks'), h('dd', {}, `${(j.faultyPods || []).join(', ') || '—'} / ${(j.faultyRanks || []).join(', ') || '—'}`),
        ...Object.entries(j.paths || {}).flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])),
      h('h2', {}, 'Conditions'),
      table(['Type', 'Status', 'Reason', 'Message'], (j.conditions || []).map((c) => [c.type, c.status, c.reason || '', c.message || '']), 'No conditions yet.'),
      h('p', {}, h('a', { href: '#/training' }, 'All training jobs')));
  };
  await render();
  const stop = follow((o) => o.cluster === session.active && o.kind === 'training-job', render);
  return () => { stop(); if (viewer) viewer.close(); };
}
