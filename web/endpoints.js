// Managed endpoints on the Inference page: the HyperPod inference operator's endpoints (state,
// replicas, routing, cache tiers), a smoke test, scaling, removal, and the deploy form that asks
// only the decisions (model, instance type, routing strategy, cache tier, replicas, and the team
// it runs as on a cluster shared by teams).

import { api, h, stateBadge, errorBox, problemText, table, startForm, input, askThenStart, teamFields, teamCell } from './kit.js';

const STATES = { DeploymentComplete: 'ready', DeploymentFailed: 'failed' };

/** The managed-endpoints section of a cluster; `refresh` re-reads the list. */
export async function managedSection(enc) {
  const listBox = h('div', { id: 'endpoints-list' });
  const answer = h('pre', { id: 'endpoint-answer', class: 'muted' });
  const path = (e) => `/api/clusters/${enc}/endpoints/${encodeURIComponent(e)}`;
  const invoke = (e) => {
    const prompt = h('input', { type: 'text', 'aria-label': `prompt for endpoint ${e.name}`, value: 'Say hello in one word.' });
    const go = h('button', { type: 'button', class: 'secondary', onclick: async () => {
      go.disabled = true;
      const r = await api(`${path(e.name)}/invoke`, { method: 'POST', body: { prompt: prompt.value } });
      go.disabled = false;
      answer.textContent = r.ok ? (r.body.choices?.[0]?.message?.content ?? JSON.stringify(r.body)) : problemText(r.body);
    } }, 'invoke');
    return h('span', {}, prompt, ' ', go);
  };
  const scale = (e) => {
    const n = h('input', { type: 'number', min: 1, max: 64, value: e.replicas, 'aria-label': `replicas of endpoint ${e.name}`, class: 'narrow' });
    const go = h('button', { type: 'button', class: 'secondary', onclick: async () => {
      const r = await api(path(e.name), { method: 'PATCH', body: { replicas: Number(n.value) } });
      if (r.status === 202) location.hash = `#/op/${r.body.operationId}`;
      else if (r.ok) answer.textContent = `${e.name} already has ${r.body.replicas} replicas: nothing to change.`;
      else answer.textContent = problemText(r.body);
    } }, 'scale');
    return h('span', {}, n, ' ', go);
  };
  const refresh = async () => {
    const list = await api(`/api/clusters/${enc}/endpoints`);
    listBox.replaceChildren(list.ok ? table(['Endpoint', 'Team', 'State', 'Replicas', 'Model', 'Routing', 'KV cache', 'Smoke test', 'Scale', ''],
      list.body.map((e) => [e.name, teamCell(e),
        h('span', {}, stateBadge(STATES[e.state] || 'pending'), ' ', e.state, e.message ? h('div', { class: e.state === 'DeploymentFailed' ? 'error' : 'muted' }, e.message) : null),
        `${e.readyReplicas}/${e.replicas}`, e.model || '', e.routing || 'off',
        `L1 ${e.kvCache.l1 ? 'on' : 'off'} · L2 ${e.kvCache.l2 || 'off'}`,
        e.state === 'DeploymentComplete' ? invoke(e) : '', scale(e),
        h('button', { type: 'button', class: 'secondary', 'aria-label': `delete endpoint ${e.name}`,
          onclick: (ev) => askThenStart(path(e.name), `Delete endpoint ${e.name}? Its model files stay.`, ev.target) }, 'delete')]),
      'No managed endpoint yet.') : errorBox(list));
  };
  const [groups, governance] = await Promise.all([api(`/api/clusters/${enc}/instance-groups`), api(`/api/clusters/${enc}/teams`)]);
  const placement = teamFields(governance.ok ? governance.body : null, 'ep');
  const name = input('ep-name', { placeholder: 'e.g. qwen3-8b' });
  const model = input('ep-model', { placeholder: '/s3/models/Qwen/Qwen3-8B' });
  const type = h('select', { id: 'ep-type' }, (groups.ok ? groups.body : []).map((g) => h('option', { value: g.instanceType }, `${g.instanceType} (${g.name})`)));
  const routing = h('select', { id: 'ep-routing' }, ['prefixaware', 'kvaware', 'session', 'roundrobin', 'off'].map((v) => h('option', { value: v }, v)));
  const l2 = h('select', { id: 'ep-l2' }, ['none', 'tieredstorage'].map((v) => h('option', { value: v }, v)));
  const replicas = h('input', { type: 'number', id: 'ep-replicas', min: 1, max: 64, value: 1 });
  const form = startForm('Deploy endpoint', 'ep', [['Endpoint name', name], ['Model', model, 'A path under /s3 (e.g. a downloaded model), s3://bucket/prefix or fsx://fs-id/path.'],
    ['Instance type', type], ...placement.fields, ['Routing', routing, 'Intelligent routing is fixed for the endpoint\'s life.'],
    ['L2 KV cache', l2, 'L1 (CPU memory) is on; L2 on HyperPod tiered storage adds a shared tier.'], ['Replicas', replicas]],
  `/api/clusters/${enc}/endpoints`, () => {
    const b = { endpointName: name.value.trim(), model: model.value.trim(), instanceType: type.value, replicas: Number(replicas.value || 1),
      kvCache: { l1: true, l2: l2.value } };
    if (routing.value !== 'off') b.routing = routing.value;
    placement.put(b);
    return b;
  });
  await refresh();
  const el = h('section', { id: 'managed-endpoints', 'aria-label': 'managed endpoints' },
    h('h2', {}, 'Managed endpoints (HyperPod inference operator)'), listBox, answer,
    h('h3', {}, 'Deploy a managed endpoint'), form);
  return { el, refresh };
}
