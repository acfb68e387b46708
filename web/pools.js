// Warm GPU pools on the Inference page: each pool's pods and the model each one serves, a pod
// moved to another model (or back) in place, the pool resized (never below its assigned pods),
// and the form that makes a pool (as a team, on a cluster shared by teams).

import { api, h, stateBadge, errorBox, problemText, table, startForm, input, askThenStart, confirmPlan, teamFields, teamCell } from './kit.js';

/** The warm-pools section of a cluster; `refresh` re-reads pools and the models they serve. */
export async function poolsSection(enc) {
  const listBox = h('div', { id: 'pools-list' });
  const note = h('p', { id: 'pool-answer', class: 'muted', role: 'status' });
  const path = (p) => `/api/clusters/${enc}/pools/${encodeURIComponent(p)}`;
  const go = async (url, method, body) => {
    const r = await api(url, { method, body });
    if (r.status === 202) location.hash = `#/op/${r.body.operationId}`;
    else if (r.ok) note.textContent = 'Already so: nothing to change.';
    else note.textContent = problemText(r.body);
  };
  const assignCell = (pool, pod, models) => {
    const pick = h('select', { 'aria-label': `model for pod ${pod.name}` },
      h('option', { value: '' }, '(free)'),
      models.map((m) => h('option', { value: m, selected: pod.serves === m ? '' : null }, m)));
    const apply = h('button', { type: 'button', class: 'secondary', disabled: !pod.ready ? '' : null, onclick: async () => {
      const model = pick.value;
      if (!model) {
        const url = `${path(pool.name)}/unassign`;
        const body = { pod: pod.name };
        if (pod.serves) {
          // Asked with the plan (previewed: nothing written); a refused preview is the answer.
          const asked = await confirmPlan(`Take ${pod.name} away from ${pod.serves}?`, url, { method: 'POST', body });
          if (asked.refused) { note.textContent = problemText(asked.refused.body); return; }
          if (!asked.ok) return;
        }
        go(url, 'POST', body);
      } else {
        go(`${path(pool.name)}/assign`, 'POST', { pod: pod.name, model });
      }
    } }, 'apply');
    return h('span', {}, pick, ' ', apply);
  };
  const poolBox = (pool, models) => {
    const size = h('input', { type: 'number', min: 0, max: 32, value: pool.size, class: 'narrow', 'aria-label': `size of pool ${pool.name}` });
    return h('section', { class: 'pool', 'data-pool': pool.name },
      h('h3', {}, `${pool.name} `, stateBadge(pool.state), pool.team ? h('span', { class: 'muted' }, ' · ', teamCell(pool)) : null),
      h('p', { class: 'muted' }, `${pool.image} · ${pool.gpus} GPU per pod · ${pool.ready}/${pool.size} ready · `,
        h('strong', {}, `${pool.assigned} assigned`), ` · ${pool.free} free`),
      table(['Pod', 'Ready', 'Serves', 'Assign'], pool.pods.map((p) => [p.name, p.ready ? 'yes' : 'no',
        p.serves ? h('strong', {}, p.serves) : h('span', { class: 'muted' }, 'free'), assignCell(pool, p, models)]),
      'No pods yet.'),
      h('p', {}, 'Size ', size, ' ', h('button', { type: 'button', class: 'secondary',
        onclick: () => go(path(pool.name), 'PATCH', { size: Number(size.value) }) }, 'resize'), ' ',
        h('button', { type: 'button', class: 'secondary', 'aria-label': `remove pool ${pool.name}`,
          onclick: (e) => askThenStart(path(pool.name), `Remove warm pool ${pool.name} and its pods?`, e.target) }, 'remove')));
  };
  const refresh = async () => {
    const [pools, deps] = await Promise.all([api(`/api/clusters/${enc}/pools`), api(`/api/clusters/${enc}/deployments`)]);
    if (!pools.ok) { listBox.replaceChildren(errorBox(pools)); return; }
    const served = (p) => (deps.ok ? deps.body.filter((d) => d.pool === p).map((d) => d.name) : []);
    listBox.replaceChildren(...(pools.body.length ? pools.body.map((p) => poolBox(p, served(p.name)))
      : [h('p', { class: 'muted' }, 'No warm pool yet.')]));
  };
  const name = input('pool-name', { placeholder: 'e.g. qwen-warm' });
  const image = input('pool-image', { placeholder: 'lmsysorg/sglang:v0.5.8' });
  const args = input('pool-args', { placeholder: 'python3 -m sglang.launch_server --model-path /s3/models/Qwen/Qwen3-8B --port 8000' });
  const gpus = h('input', { type: 'number', id: 'pool-gpus', min: 1, max: 8, value: 1 });
  const size = h('input', { type: 'number', id: 'pool-size', min: 1, max: 32, value: 2 });
  const governance = await api(`/api/clusters/${enc}/teams`);
  const placement = teamFields(governance.ok ? governance.body : null, 'pool');
  await refresh();
  const el = h('div', {}, h('h2', {}, 'Warm GPU pools'), listBox, note,
    h('details', {}, h('summary', {}, 'Make a warm pool'),
      startForm('Create pool', 'pool', [['Pool name', name], ['Pool image', image], ['Pool arguments', args, 'Space-separated; passed as a list, never to a shell.'],
        ['GPUs per pod', gpus], ['Pool size', size, 'Pods kept warm. Serve a model from the pool by deploying it with this pool, then assigning pods.'],
        ...placement.fields],
      `/api/clusters/${enc}/pools`, () => {
        const b = { poolName: name.value.trim(), gpus: Number(gpus.value), size: Number(size.value) };
        if (image.value.trim()) b.image = image.value.trim();
        placement.put(b);
        const a = args.value.trim();
        if (a) b.args = a.split(/\s+/);
        return b;
      })));
  return { el, refresh };
}
