// Pages: model downloads and self-managed inference (with a smoke test).

import { utilizationChart } from './utilization.js';
import { api, h, scoped, session, stateBadge, problemText, errorBox, table, follow, needsActive, startForm, input, askThenStart, teamFields, teamCell } from './kit.js';
import { logViewer } from './logs.js';
import { managedSection } from './endpoints.js';
import { poolsSection } from './pools.js';
import { lineChart } from './chart.js';

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
        onclick: (e) => askThenStart(`/api/clusters/${enc}/jobs/${encodeURIComponent(m.job)}`,
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
    await pools.refresh();
    listBox.replaceChildren(list.ok ? table(['Deployment', 'Team', 'Image', 'Ready', 'State', 'Service', 'Scaling', 'Endpoint', 'Smoke test', ''],
      list.body.map((d) => [h('a', { href: `#/inference/${encodeURIComponent(d.name)}` }, d.name), teamCell(d), d.image, `${d.readyReplicas}/${d.replicas}`, stateBadge(d.state),
        h('span', {}, d.public ? h('span', { class: 'error' }, `${d.service} · PUBLIC from ${d.allowedSources.join(', ')}`) : d.service,
          d.router ? h('div', { class: 'muted' }, `router ${d.router.policy}${d.router.ready ? '' : ' (starting)'}`) : null),
        scaling(d), d.endpoint || '',
        d.state === 'ready' ? invoke(d) : '',
        h('button', { type: 'button', class: 'secondary', 'aria-label': `remove deployment ${d.name}`,
          onclick: (e) => askThenStart(`/api/clusters/${enc}/deployments/${encodeURIComponent(d.name)}`,
            `Stop serving ${d.name}?`, e.target) }, 'remove')]),
      'Nothing is served yet.') : errorBox(list));
  };
  const name = input('dep-name', { placeholder: 'e.g. qwen3-8b' });
  const image = input('dep-image', { placeholder: 'vllm/vllm-openai:latest' });
  const args = input('dep-args', { placeholder: '--model /s3/models/Qwen/Qwen3-8B' });
  const gpus = h('input', { type: 'number', id: 'dep-gpus', min: 1, max: 8, value: 1 });
  const replicas = h('input', { type: 'number', id: 'dep-replicas', min: 1, max: 16, value: 1 });
  const service = h('select', { id: 'dep-service' }, ['cluster-ip', 'load-balancer', 'external-load-balancer'].map((v) => h('option', { value: v }, v)));
  const sources = input('dep-sources', { placeholder: '203.0.113.0/24, 198.51.100.7/32' });
  const pool = input('dep-pool', { placeholder: 'a warm pool, or empty' });
  const router = h('input', { type: 'checkbox', id: 'dep-router' });
  const maxReplicas = h('input', { type: 'number', id: 'dep-max', min: 0, max: 16, value: 0 });
  const target = h('input', { type: 'number', id: 'dep-target', min: 1, value: 5 });
  const prometheus = input('dep-prometheus', { placeholder: 'prometheus-server.monitoring.svc… (an in-cluster URL) or an AMP workspace URL' });
  const pools = await poolsSection(enc);
  // On a cluster shared by teams a model runs as one of them (a pool-served one where its pool is).
  const governance = await api(`/api/clusters/${enc}/teams`);
  const placement = teamFields(governance.ok ? governance.body : null, 'dep');
  await render();
  const managed = await managedSection(enc);
  show(h('h1', {}, `Inference · ${session.active}`), managed.el,
    h('h2', {}, 'Self-managed deployments'), listBox, answer, pools.el,
    h('h2', {}, 'Serve a model'),
    startForm('Deploy', 'dep', [['Name', name], ['Image', image], ['Arguments', args, 'Space-separated; passed as a list, never to a shell. The storage claim is at /s3.'],
      ['GPUs per replica', gpus], ['Replicas', replicas], ...placement.fields,
      ['Service', service, 'load-balancer is internal to the VPC; external-load-balancer is on the internet, for the networks below only (made by the load balancer controller the inference operator brings).'],
      ['Allowed source CIDRs', sources, 'Required for external-load-balancer (comma-separated IPv4 CIDRs; never 0.0.0.0/0).'],
      ['Warm pool', pool, 'Serve from this pool\'s pods (assign them below); image, GPUs and replicas come from the pool.'],
      ['SGLang router', router, 'A cache-aware router of its own in front of two or more SGLang workers.'],
      ['Autoscale up to', maxReplicas, '0: no autoscaling. Otherwise KEDA scales between Replicas and this on the engine\'s queue.'],
      ['Queued requests per replica', target], ['Prometheus URL', prometheus, 'Only when the server has no --prometheus-url setting.']],
    `/api/clusters/${enc}/deployments`, () => {
      const b = { deploymentName: name.value.trim(), service: service.value };
      if (pool.value.trim()) b.pool = pool.value.trim();
      else {
        Object.assign(b, { gpus: Number(gpus.value), replicas: Number(replicas.value) });
        placement.put(b);
      }
      if (router.checked) b.router = {};
      if (Number(maxReplicas.value) > 0 && !b.pool) {
        b.autoscaling = { minReplicas: b.replicas, maxReplicas: Number(maxReplicas.value), target: Number(target.value) };
        delete b.replicas;
        if (prometheus.value.trim()) b.autoscaling.prometheusUrl = prometheus.value.trim();
      }
      const cidrs = sources.value.split(',').map((c) => c.trim()).filter(Boolean);
      if (cidrs.length) b.allowedSourceCidrs = cidrs;
      if (image.value.trim() && !b.pool) b.image = image.value.trim();
      const a = args.value.trim();
      if (a && !b.pool) b.args = a.split(/\s+/);
      return b;
    }));
  return follow((o) => o.cluster === session.active && ['inference-deploy', 'endpoint-deploy', 'endpoint-update', 'workload-delete', 'pool-create', 'pool-scale', 'pool-assign'].includes(o.kind),
    async () => { await render(); await managed.refresh(); });
}

/** How a deployment scales: its pool, or KEDA's bounds and whether its trigger is active. */
function scaling(d) {
  if (d.pool) return `pool ${d.pool} · ${d.pods.length} pod${d.pods.length === 1 ? '' : 's'}`;
  if (!d.autoscaling) return 'fixed';
  const a = d.autoscaling;
  return h('span', {}, `KEDA ${a.minReplicas}–${a.maxReplicas}`, a.active ? h('strong', {}, ' · scaling up') : h('span', { class: 'muted' }, ' · idle'));
}

/** One deployment: its state and endpoint, and its replicas' logs followed live. */
export async function deployment(name) {
  const show = scoped();
  if (needsActive('Inference')) return null;
  const enc = encodeURIComponent(session.active);
  const facts = h('div', { id: 'deployment-facts' });
  const chart = h('div', { id: 'deployment-replicas' });
  const viewer = logViewer(session.active, 'deployment', name);
  // Replicas over time, sampled while the page is open (what an autoscaler did, at a glance).
  const since = Date.now();
  const samples = [];
  const render = async () => {
    const list = await api(`/api/clusters/${enc}/deployments`);
    const d = list.ok ? list.body.find((x) => x.name === name) : null;
    if (d) {
      samples.push({ step: Math.round((Date.now() - since) / 1000), value: d.replicas });
      if (samples.length > 500) samples.shift();
      chart.replaceChildren(lineChart('replicas-chart', 'Replicas (seconds since this page opened)', samples, '#2da44e'));
    }
    facts.replaceChildren(h('h1', {}, `${name} · deployment`),
      !list.ok ? errorBox(list) : !d ? h('p', { class: 'error' }, `No deployment ${name} on ${session.active}.`)
        : h('dl', { class: 'facts' },
          h('dt', {}, 'State'), h('dd', {}, stateBadge(d.state)),
          h('dt', {}, 'Image'), h('dd', {}, d.image),
          h('dt', {}, 'Replicas ready'), h('dd', {}, `${d.readyReplicas}/${d.replicas}`),
          h('dt', {}, 'Service'), h('dd', {}, `${d.service}${d.endpoint ? ` · ${d.endpoint}` : ''}`),
          h('dt', {}, 'Router'), h('dd', {}, d.router ? `${d.router.name} · ${d.router.policy} · ${d.router.image}${d.router.ready ? '' : ' (starting)'}` : 'none'),
          h('dt', {}, 'Scaling'), h('dd', {}, scaling(d)),
          ...(d.autoscaling ? [h('dt', {}, 'Trigger'), h('dd', {}, h('code', {}, d.autoscaling.query), ` · target ${d.autoscaling.target} per replica`)] : []),
          ...(d.pool ? [h('dt', {}, 'Pool pods'), h('dd', {}, d.pods.join(', ') || 'none assigned')] : [])),
      h('p', {}, h('a', { href: '#/inference' }, 'All deployments')));
  };
  await render();
  const busy = await utilizationChart(session.active, { by: 'pod', workload: name, id: 'deployment-utilization', title: 'GPU utilization of its replicas' });
  show(facts, chart, busy, viewer.el);
  const stop = follow((o) => o.cluster === session.active && ['inference-deploy', 'workload-delete', 'pool-assign'].includes(o.kind), render);
  return () => { stop(); viewer.close(); };
}
