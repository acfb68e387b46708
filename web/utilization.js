// GPU utilization charts, shared by the pages that show them (nodes, teams, a deployment, a
// training job): one line per node, team or pod from the observability add-on's DCGM series,
// the stragglers of a job dashed and named, or — without a workspace — how to get one; and
// links to AWS's dashboards in the account's Grafana workspace, when the server names one.

import { api, h } from './kit.js';
import { timeLines } from './chart.js';

/** The chart of `cluster`'s GPU utilization `by` node, team or pod (of `workload`). */
export async function utilizationChart(cluster, { by = 'node', workload = null, id = 'utilization', title = 'GPU utilization' } = {}) {
  const q = new URLSearchParams({ by });
  if (workload) q.set('workload', workload);
  const r = await api(`/api/clusters/${encodeURIComponent(cluster)}/utilization?${q}`);
  if (!r.ok) return h('p', { class: 'muted', id }, `GPU utilization could not be read: ${r.body?.detail || r.status}`);
  const u = r.body;
  if (!u.available) return h('p', { class: 'muted', id, 'data-unavailable': '' }, u.howToEnable);
  const links = dashboardLinks(u.dashboards, id);
  if (!u.series.length) return h('div', { id }, h('p', { class: 'muted' }, 'No GPU series yet for this view.'), links);
  const flagged = u.stragglers.map((s) => s.key);
  const lines = u.series.map((s) => ({ name: s.key, label: `${s.key} · ${Math.round(s.mean)}% (${s.gpus} GPU${s.gpus === 1 ? '' : 's'})${flagged.includes(s.key) ? ' · straggler' : ''}`, points: s.points }));
  const figure = timeLines(`${id}-chart`, `${title} by ${by}, last ${Math.round((u.end - u.start) / 60)} min`, lines, { flagged });
  const note = u.stragglers.length
    ? h('p', { class: 'error', id: `${id}-stragglers` }, `Straggling: ${u.stragglers.map((s) => `${s.key} at ${Math.round(s.mean)}% (the others' median ${Math.round(s.median)}%)`).join(', ')}.`)
    : null;
  return h('div', { id }, figure, note, links);
}

/** "In Grafana: Cluster · Training · …", the link for this view first; nothing without any. */
function dashboardLinks(dashboards, id) {
  if (!dashboards?.length) return null;
  const parts = dashboards.flatMap((d, i) => [i ? ' · ' : '', h('a', { href: d.url, target: '_blank', rel: 'noopener' }, d.title)]);
  return h('p', { class: 'muted', id: `${id}-dashboards` }, 'In Grafana: ', ...parts);
}
