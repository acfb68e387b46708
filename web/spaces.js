// Page: development spaces — JupyterLab or Code Editor on the cluster, with the cluster's S3
// claim at /s3 (what training jobs and endpoints read). The list shows each space's state, what
// it mounts and where it opens (through this control plane's own address); the form asks only
// the decisions (application, instance type, GPUs, home size, idle shutdown, team).

import { api, h, scoped, session, stateBadge, problemText, errorBox, table, follow, needsActive, startForm, input, askThenStart, teamFields, teamCell } from './kit.js';

const BADGE = { running: 'ready', stopped: 'cancelled', failed: 'failed' };

export async function spaces() {
  const show = scoped();
  if (needsActive('Spaces')) return null;
  const enc = encodeURIComponent(session.active);
  const path = (s) => `/api/clusters/${enc}/spaces/${encodeURIComponent(s)}`;
  const note = h('div', { class: 'error', role: 'alert', id: 'spaces-error' });
  const act = (s, verb) => h('button', { type: 'button', class: 'secondary', 'aria-label': `${verb} space ${s.name}`, onclick: async () => {
    note.textContent = '';
    const r = await api(`${path(s.name)}/${verb}`, { method: 'POST', body: {} });
    if (r.status === 202) location.hash = `#/op/${r.body.operationId}`;
    else if (r.ok) note.textContent = `${s.name} is already ${r.body.state}.`;
    else note.textContent = problemText(r.body);
  } }, verb);
  // Opening asks for a one-use ticket, then offers the space's own address (a new tab).
  const open = (s) => {
    const slot = h('span', {});
    const go = h('button', { type: 'button', class: 'secondary', 'aria-label': `open space ${s.name}`, onclick: async () => {
      note.textContent = '';
      const r = await api(`${path(s.name)}/open`, { method: 'POST', body: {} });
      if (!r.ok) { note.textContent = problemText(r.body); return; }
      slot.replaceChildren(h('a', { href: r.body.url, target: '_blank', rel: 'noopener', id: `space-link-${s.name}` }, `${s.name} ↗`));
      window.open(r.body.url, '_blank', 'noopener');
    } }, 'open');
    // Ends every browser session of the space at once (a link shared by mistake, a lost laptop).
    const end = h('button', { type: 'button', class: 'secondary', 'aria-label': `end the sessions of space ${s.name}`, onclick: async () => {
      note.textContent = '';
      const r = await api(path(s.name) + '/sessions', { method: 'DELETE' });
      note.textContent = r.ok ? `${s.name}: ${r.body.ended} session(s) ended; open it again to get a new one.` : problemText(r.body);
    } }, 'end sessions');
    slot.append(go, ' ', end);
    return slot;
  };
  // A remote IDE over SSM: the add-on's link, shown once to copy (it opens VS Code, Kiro or
  // Cursor through the AWS Toolkit on the user's own machine).
  const ide = (s) => {
    const slot = h('span', {});
    const pick = h('select', { id: `space-ide-${s.name}`, 'aria-label': `IDE for space ${s.name}` },
      [['vscode-remote', 'VS Code'], ['kiro-remote', 'Kiro'], ['cursor-remote', 'Cursor']].map(([v, t]) => h('option', { value: v }, t)));
    const go = h('button', { type: 'button', class: 'secondary', 'aria-label': `connect an IDE to space ${s.name}`, onclick: async () => {
      note.textContent = '';
      const r = await api(`${path(s.name)}/connections`, { method: 'POST', body: { type: pick.value } });
      if (!r.ok) { note.textContent = problemText(r.body); return; }
      slot.replaceChildren(h('div', { class: 'muted' }, r.body.hint),
        h('input', { type: 'text', readonly: true, id: `space-ide-url-${s.name}`, value: r.body.url, onclick: (ev) => ev.target.select() }));
    } }, 'IDE link');
    slot.append(pick, go);
    return slot;
  };
  const listBox = h('div', { id: 'spaces-list' });
  const render = async () => {
    const list = await api(`/api/clusters/${enc}/spaces`);
    listBox.replaceChildren(list.ok ? table(['Space', 'Team', 'App', 'State', 'Instance type', 'GPUs', 'Idle shutdown', 'Sees', '', ''],
      list.body.map((s) => [
        h('span', {}, s.name, s.state === 'running' ? h('span', {}, ' ', open(s), ' ', ide(s)) : null),
        teamCell(s), s.app,
        h('span', {}, stateBadge(BADGE[s.state] || 'running'), ' ', s.state, s.message ? h('div', { class: s.state === 'failed' ? 'error' : 'muted' }, s.message) : null),
        s.instanceType || '', s.migProfile ? `MIG ${s.migProfile}` : String(s.gpus),
        s.idleShutdownMinutes ? `${s.idleShutdownMinutes} min` : 'never',
        h('span', {}, ...s.mounts.map((m) => h('div', {}, h('code', {}, m.path), ` (${m.claim})`)), h('div', { class: 'muted' }, `home ${s.home}`)),
        ['running', 'starting'].includes(s.state) ? act(s, 'stop') : act(s, 'start'),
        h('button', { type: 'button', class: 'secondary', 'aria-label': `delete space ${s.name}`,
          onclick: (ev) => askThenStart(path(s.name), `Delete space ${s.name} and its home directory? What it saved under /s3 stays.`, ev.target) }, 'delete'),
      ]), 'No space yet.') : errorBox(list));
  };
  const [groups, governance] = await Promise.all([api(`/api/clusters/${enc}/instance-groups`), api(`/api/clusters/${enc}/teams`)]);
  const placement = teamFields(governance.ok ? governance.body : null, 'space');
  const name = input('space-name', { placeholder: 'e.g. lab' });
  const app = h('select', { id: 'space-app' }, [['jupyterlab', 'JupyterLab'], ['code-editor', 'Code Editor']].map(([v, t]) => h('option', { value: v }, t)));
  const type = h('select', { id: 'space-type' }, (groups.ok ? groups.body : []).map((g) => h('option', { value: g.instanceType }, `${g.instanceType} (${g.name})`)));
  const gpus = h('input', { type: 'number', id: 'space-gpus', min: 0, max: 8, value: 0 });
  const storage = h('input', { type: 'number', id: 'space-storage', min: 1, max: 100, value: 20 });
  const idle = h('input', { type: 'number', id: 'space-idle', min: 0, max: 1440, value: 60 });
  await render();
  show(h('h1', {}, `Spaces · ${session.active}`),
    h('p', { class: 'muted' }, 'A space sees the cluster\'s data at ', h('code', {}, '/s3'), ', as every training job and endpoint does: a script saved at ',
      h('code', {}, '/s3/code/train.py'), ' is the next job\'s script.'),
    note, listBox,
    h('h2', {}, 'Create a space'),
    startForm('Create space', 'space', [['Space name', name], ['Application', app], ['Instance type', type],
      ['GPUs', gpus, 'Whole GPUs on one node (0 for a CPU-only space).'], ...placement.fields,
      ['Home (GiB)', storage, 'Its own volume, kept while it is stopped; fixed for its life.'],
      ['Idle shutdown (minutes)', idle, 'It stops itself after this long unused; 0 never.']],
    `/api/clusters/${enc}/spaces`, () => {
      const b = { spaceName: name.value.trim(), app: app.value, instanceType: type.value, gpus: Number(gpus.value || 0),
        storageGib: Number(storage.value || 20), idleShutdownMinutes: Number(idle.value || 0) };
      placement.put(b);
      return b;
    }));
  return follow((o) => o.cluster === session.active && (o.kind.startsWith('space-') || o.kind === 'workload-delete'), render);
}
