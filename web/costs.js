// Page: what the active cluster costs and whom — a bar per day stacked by group, team, job or
// endpoint (idle GPUs, time not observed and nodes without GPUs in their own colours), the
// totals, the prices used (the AWS Price List's, or dated estimates and why) and a CSV download of
// the same rows.

import { api, h, scoped, session, errorBox, table, needsActive } from './kit.js';
import { dayBars } from './chart.js';

const usd = (v) => `$${v < 10 ? v.toFixed(v < 0.01 && v > 0 ? 4 : 2) : Math.round(v).toLocaleString('en-US')}`;
const KIND = { idle: 'idle GPUs', unobserved: 'not observed', 'no-gpus': 'nodes without GPUs' };
const COLORS = { 'idle GPUs': '#d0d7de', 'not observed': '#eaeef2', 'nodes without GPUs': '#8c959f' };

/** What a share is called in the chart and the table: its key, or what its kind means. */
function label(by, row) {
  if (row.kind === 'used') return row.key;
  return by === 'group' ? `${row.key} · ${KIND[row.kind]}` : KIND[row.kind];
}

export async function costs(query) {
  const show = scoped();
  if (needsActive('Costs')) return null;
  const params = new URLSearchParams(query || '');
  const by = ['group', 'team', 'job', 'endpoint'].includes(params.get('by')) ? params.get('by') : 'group';
  const url = `/api/costs?cluster=${encodeURIComponent(session.active)}&by=${by}`;
  const r = await api(url);
  if (!r.ok) return show(h('h1', {}, 'Costs'), errorBox(r));
  const report = r.body;
  // Every day of the report has its slot, a day nothing was counted too.
  const days = new Map();
  const last = report.until.slice(0, 10);
  for (let d = new Date(`${report.since}T00:00:00Z`); d.toISOString().slice(0, 10) <= last; d.setUTCDate(d.getUTCDate() + 1)) {
    days.set(d.toISOString().slice(0, 10), []);
  }
  for (const row of report.rows) {
    if (!days.has(row.day)) days.set(row.day, []);
    days.get(row.day).push({ name: label(by, row), value: row.usd });
  }
  const chart = dayBars('costs-chart', `USD per day by ${by}, since ${report.since}`,
    [...days].map(([day, parts]) => ({ label: day, parts })), usd, COLORS);
  const picker = h('p', { class: 'tabs', id: 'costs-by' }, 'Split by: ', ...['group', 'team', 'job', 'endpoint'].map((b) =>
    (b === by ? h('strong', {}, b) : h('a', { href: `#/costs?cluster=${encodeURIComponent(session.active)}&by=${b}` }, b))).flatMap((a) => [a, ' ']));
  const totals = table(['Share', 'GPU-hours', 'USD'], report.totals.map((t) => [label(by, t), t.gpuHours.toFixed(2), usd(t.usd)]),
    'Nothing counted yet: the cluster has no HyperPod nodes, or has not been sampled.');
  const priced = report.prices.filter((p) => p.hourlyUsd != null);
  const listed = (ps) => ps.map((p) => `${p.instanceType} ${usd(p.hourlyUsd)}/h`).join(', ');
  const listed_ = priced.filter((p) => p.source === 'price-list');
  const table_ = priced.filter((p) => p.source === 'estimate');
  const plans = priced.filter((p) => p.source === 'training-plan');
  const estimate = priced.length
    ? h('p', { class: 'muted', id: 'costs-estimate' },
      listed_.length ? `On-demand prices from the AWS Price List (${listed_[0].region}): ${listed(listed_)}.` : '',
      table_.length ? ` Estimates: ${listed(table_)} (on-demand list prices, ${table_[0].region}, as of ${table_[0].asOf}). Not a bill.` : '',
      report.priceListUnavailable ? ` Why estimates: ${report.priceListUnavailable}.` : '',
      plans.length ? ` Training plans: ${listed(plans)} (each plan's up-front fee over its instance-hours).` : '')
    : null;
  return show(h('h1', {}, 'Costs'),
    h('p', {}, h('strong', { id: 'costs-total' }, usd(report.totalUsd)), ` since ${report.since}, `,
      h('span', { id: 'costs-idle' }, `${usd(report.idleUsd)} of it idle GPUs`), ` · ${report.instanceHours.toFixed(report.instanceHours < 10 ? 2 : 0)} instance-hours`),
    picker, chart, totals, estimate,
    report.unpriced.length ? h('p', { class: 'error' }, `No price for ${report.unpriced.join(', ')}: their hours count, their cost does not.`) : null,
    h('p', {}, h('a', { href: `${url}&format=csv`, download: '', id: 'costs-csv' }, 'Download CSV')));
}
