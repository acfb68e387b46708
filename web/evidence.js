// Shared view: a failure's evidence in one panel — findings and the next step first, then what
// HyperPod and Kubernetes say, the events, and the newest lines of each log stream.

import { api, h, table, errorBox } from './kit.js';

const lines = (s) => h('details', { open: true, class: 'stream' }, h('summary', {}, h('code', {}, s.stream)),
  h('pre', {}, s.lines.map((l) => `${new Date(l.timestampMs).toISOString()}  ${l.message}`).join('\n')));

/** Renders evidence (a node's or a cluster's) as one panel. */
export function evidenceView(e, id) {
  const kube = e.kubernetes;
  return h('section', { class: 'evidence', id, 'aria-label': 'Evidence' },
    h('h3', {}, 'Evidence'),
    e.findings.length ? h('ul', { class: 'findings' }, e.findings.map((f) => h('li', {}, f))) : h('p', { class: 'muted' }, 'Nothing alarming found.'),
    h('p', { class: 'plain' }, e.hint),
    e.hyperpod ? h('p', {}, 'HyperPod: ', h('strong', {}, e.hyperpod.status), e.hyperpod.message ? ` — ${e.hyperpod.message}` : '') : '',
    e.failureMessage ? h('p', { class: 'reason' }, e.failureMessage) : '',
    kube ? table(['Label', 'Value'], Object.entries(kube.health), 'No health labels.') : '',
    kube && kube.taints.length ? h('p', {}, 'Taints: ', kube.taints.map((t) => `${t.key}=${t.value || ''}:${t.effect}`).join(', ')) : '',
    e.events && e.events.length ? table(['When', 'Type', 'Reason', 'Object', 'Message'], e.events.map((v) => [v.time, v.type, v.reason, v.object, v.message])) : '',
    e.clusterEvents.length ? table(['When', 'Level', 'HyperPod event'], e.clusterEvents.map((v) => [v.time, v.level, v.description])) : '',
    e.logGroup ? h('p', { class: 'muted' }, 'Log group ', h('code', {}, e.logGroup)) : '',
    ...e.logs.map(lines),
    e.unread.length ? h('p', { class: 'muted' }, 'Not read: ', e.unread.map((u) => `${u.part} (${u.reason})`).join('; ')) : '');
}

/** A button that loads evidence from `path` into a panel placed after `anchor()`. */
export function evidenceButton(label, path, panelId, anchor) {
  return h('button', { type: 'button', class: 'secondary', 'aria-label': label, onclick: async () => {
    const r = await api(path);
    const panel = r.ok ? evidenceView(r.body, panelId) : errorBox(r);
    const old = document.getElementById(panelId);
    if (old) old.replaceWith(panel); else anchor().after(panel);
  } }, 'evidence');
}
