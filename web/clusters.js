// Page: the clusters, each with its stages.

import { api, h, scoped, stateBadge, errorBox, table, follow } from './kit.js';

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
