// The log viewer a job or deployment page embeds: follows the workload's pods over the logs
// WebSocket (new pods join as they start), with pause/resume, a pod filter and a search. It keeps
// the last lines only, so a chatty job cannot grow the page without bound.

import { h, problemText } from './kit.js';

const KEEP = 5000;
const TOKEN_KEY = 'instantstart.token';

/** A log viewer for one workload (`kind`: job, pytorch, ray, deployment). Returns
 * `{el, close}`; the page calls `close` when it goes away. */
export function logViewer(cluster, kind, workload) {
  const base = `/api/clusters/${encodeURIComponent(cluster)}/workloads/${kind}/${encodeURIComponent(workload)}/logs`;
  const status = h('span', { class: 'muted', id: 'logs-status', role: 'status' }, 'connecting…');
  const pods = h('select', { id: 'logs-pod', 'aria-label': 'pod' }, h('option', { value: '' }, 'all pods'));
  const search = h('input', { type: 'search', id: 'logs-search', placeholder: 'search (e.g. NCCL)', 'aria-label': 'search the log', autocomplete: 'off' });
  const count = h('span', { class: 'muted', id: 'logs-count' });
  const pause = h('button', { type: 'button', class: 'secondary', id: 'logs-pause' }, 'pause');
  const out = h('pre', { class: 'logs', id: 'logs-lines', tabindex: 0, 'aria-label': `logs of ${workload}` });
  const el = h('section', { class: 'log-viewer', 'aria-label': 'logs' },
    h('h2', {}, 'Logs'),
    h('div', { class: 'log-tools' }, pause, pods, search, count, status),
    out);

  const lines = []; // {pod, rank, text}
  const known = new Set();
  let paused = false;
  let ended = false;
  let socket = null;

  const visible = (l) => (!pods.value || l.pod === pods.value)
    && (!search.value || l.text.toLowerCase().includes(search.value.toLowerCase()));
  const row = (l) => h('div', { class: /nccl warn|error|watchdog|timeout/i.test(l.text) ? 'log-line log-bad' : 'log-line' },
    h('span', { class: 'log-pod' }, l.rank != null ? `${l.pod} r${l.rank} ` : `${l.pod} `), l.text);
  const redraw = () => {
    const shown = lines.filter(visible);
    out.replaceChildren(...shown.map(row));
    count.textContent = search.value ? `${shown.length} matching` : '';
    out.scrollTop = out.scrollHeight;
  };
  const append = (batch) => {
    const atEnd = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
    for (const l of batch) {
      lines.push(l);
      if (visible(l)) out.append(row(l));
    }
    const extra = lines.length - KEEP;
    if (extra > 0) { lines.splice(0, extra); redraw(); }
    if (search.value) count.textContent = `${lines.filter(visible).length} matching`;
    if (atEnd) out.scrollTop = out.scrollHeight;
  };
  const note = (text) => { status.textContent = text; };
  const addPod = (p) => {
    if (known.has(p.pod)) return;
    known.add(p.pod);
    pods.append(h('option', { value: p.pod }, p.rank != null ? `${p.pod} (rank ${p.rank})` : p.pod));
  };

  const open = () => {
    const proto = location.protocol === 'https:' ? 'wss' : 'ws';
    const protocols = ['instantstart.logs'];
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) protocols.push(`instantstart.bearer.${token}`);
    try {
      socket = new WebSocket(`${proto}://${location.host}${base}/follow?tail=200`, protocols);
    } catch (e) {
      note(`cannot follow: ${e}`);
      return;
    }
    socket.addEventListener('open', () => note('following'));
    socket.addEventListener('message', (e) => {
      let m;
      try { m = JSON.parse(e.data); } catch { return; }
      if (m.type === 'lines') append(m.lines);
      else if (m.type === 'joined') { addPod(m.pod); note(`following · ${m.pod.pod} joined`); }
      else if (m.type === 'left') note(`following · ${m.pod}: ${m.reason}`);
      else if (m.type === 'dropped') append([{ pod: '…', rank: null, text: `(${m.lines} lines skipped while paused or behind)` }]);
      else if (m.type === 'end') { ended = true; note(`ended: ${m.reason}`); pause.disabled = true; }
    });
    socket.addEventListener('close', async () => {
      if (ended) return;
      // A refused follow (cap reached, workload gone) says why over plain HTTP.
      const r = await fetch(`${base}?tail=1`, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
      if (!r.ok) note(`not following: ${problemText(await r.json().catch(() => null))}`);
      else note('not following: the server closed or refused the stream (it follows a limited number of logs at once); reload to try again');
    });
  };

  pause.addEventListener('click', () => {
    if (!socket || socket.readyState !== WebSocket.OPEN) return;
    paused = !paused;
    socket.send(JSON.stringify({ type: paused ? 'pause' : 'resume' }));
    pause.textContent = paused ? 'resume' : 'pause';
    note(paused ? 'paused (new lines wait on the server, up to a limit)' : 'following');
  });
  pods.addEventListener('change', redraw);
  search.addEventListener('input', redraw);
  open();
  return { el, close: () => { ended = true; if (socket) socket.close(); } };
}
