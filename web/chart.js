// Charts drawn as SVG (no library): a metric over training steps (throughput and loss from
// MLflow), stacked bars (teams' shares; costs per day) and lines over time (GPU utilization).

const NS = 'http://www.w3.org/2000/svg';
const W = 640;
const H = 200;
const PAD = { left: 56, right: 12, top: 14, bottom: 28 };

function svg(tag, attrs = {}, text) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

const fmt = (v) => (Math.abs(v) >= 100 ? v.toFixed(0) : v.toPrecision(3));

/** A chart's frame: the figure named `id`, its caption, and its plot (`svg` attributes). */
function frame(id, caption, attrs) {
  const figure = document.createElement('figure');
  figure.className = 'chart';
  figure.id = id;
  const c = document.createElement('figcaption');
  c.textContent = caption;
  const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', ...attrs });
  figure.append(c, root);
  return { figure, root };
}

/** The two axes and the top and bottom labels of a value scale `y`. */
function axes(root, y, top, bottom, topLabel, bottomLabel) {
  root.append(
    svg('line', { class: 'axis', x1: PAD.left, y1: H - PAD.bottom, x2: W - PAD.right, y2: H - PAD.bottom }),
    svg('line', { class: 'axis', x1: PAD.left, y1: PAD.top, x2: PAD.left, y2: H - PAD.bottom }),
    svg('text', { x: PAD.left - 6, y: y(top) + 4, 'text-anchor': 'end' }, topLabel),
    svg('text', { x: PAD.left - 6, y: y(bottom) + 4, 'text-anchor': 'end' }, bottomLabel),
  );
}

/** A legend of `names`, each with its colour. */
function legendOf(names, color, label = (n) => n) {
  const legend = document.createElement('p');
  legend.className = 'legend';
  for (const n of names) {
    const key = document.createElement('span');
    key.className = 'legend-key';
    key.dataset.part = n;
    key.style.setProperty('--swatch', color(n));
    key.textContent = label(n);
    legend.append(key);
  }
  return legend;
}

/** A chart of `points` ([{step, value}]) titled `title`; `id` names the figure. */
export function lineChart(id, title, points, color = '#1f6feb') {
  const last = points.length ? points[points.length - 1] : null;
  const caption = last ? `${title} · latest ${fmt(last.value)} at step ${last.step}` : `${title} · no points yet`;
  const { figure, root } = frame(id, caption, { 'aria-label': `${title} over steps`, 'data-points': points.length });
  if (points.length < 2) return figure;
  const steps = points.map((p) => p.step);
  const values = points.map((p) => p.value);
  const [x0, x1] = [Math.min(...steps), Math.max(...steps)];
  let [y0, y1] = [Math.min(...values), Math.max(...values)];
  if (y0 === y1) { y0 -= 1; y1 += 1; }
  const x = (s) => PAD.left + ((s - x0) / (x1 - x0 || 1)) * (W - PAD.left - PAD.right);
  const y = (v) => H - PAD.bottom - ((v - y0) / (y1 - y0)) * (H - PAD.top - PAD.bottom);
  axes(root, y, y1, y0, fmt(y1), fmt(y0));
  root.append(
    svg('text', { x: PAD.left, y: H - 8 }, `step ${x0}`),
    svg('text', { x: W - PAD.right, y: H - 8, 'text-anchor': 'end' }, `step ${x1}`),
    svg('polyline', { class: 'line', stroke: color, points: points.map((p) => `${x(p.step).toFixed(1)},${y(p.value).toFixed(1)}`).join(' ') }),
  );
  return figure;
}

const PALETTE = ['#1f6feb', '#8250df', '#bf8700', '#1a7f37', '#cf222e', '#0969da', '#953800'];

/** Horizontal bars, one per row ({label, total, parts: [{name, value, text}]}): each part a
 * segment of its row's total in its name's colour (the same name, the same colour in every
 * row), and what is left of the total drawn as free. `id` names the figure. */
export function stackedBars(id, title, rows) {
  const figure = document.createElement('figure');
  figure.className = 'chart';
  figure.id = id;
  const caption = document.createElement('figcaption');
  caption.textContent = title;
  figure.append(caption);
  const names = [...new Set(rows.flatMap((r) => r.parts.map((p) => p.name)))];
  const color = (name) => PALETTE[names.indexOf(name) % PALETTE.length];
  const ROW = 34;
  const LEFT = 190;
  const height = Math.max(1, rows.length) * ROW + 8;
  const root = svg('svg', { viewBox: `0 0 ${W} ${height}`, role: 'img', 'aria-label': title });
  figure.append(root);
  rows.forEach((r, i) => {
    const y = 4 + i * ROW;
    const scale = (v) => (r.total ? (v / r.total) * (W - LEFT - 8) : 0);
    const used = r.parts.reduce((n, p) => n + p.value, 0);
    const label = `${r.label}: ${r.parts.map((p) => `${p.name} ${p.text}`).join(', ') || 'nothing given'}; ${Math.max(0, r.total - used)} free`;
    const row = svg('g', { class: 'bar-row', 'data-row': r.label, 'aria-label': label });
    row.append(svg('text', { x: LEFT - 8, y: y + 19, 'text-anchor': 'end' }, r.label));
    let x = LEFT;
    for (const p of r.parts) {
      const w = scale(p.value);
      const seg = svg('g', { 'data-part': p.name });
      seg.append(svg('rect', { x, y, width: w, height: ROW - 8, fill: color(p.name) }),
        svg('text', { x: x + 4, y: y + 18, fill: '#fff' }, `${p.name} ${p.text}`));
      row.append(seg);
      x += w;
    }
    const free = Math.max(0, r.total - used);
    if (free > 0) {
      row.append(svg('rect', { class: 'free', x, y, width: scale(free), height: ROW - 8, fill: '#eaeef2' }),
        svg('text', { x: x + 4, y: y + 18, fill: '#57606a' }, `${free} free`));
    }
    root.append(row);
  });
  return figure;
}

/** Vertical bars, one per day ({label, parts: [{name, value}]}), each stacked by its parts in
 * their names' colours (the same name, the same colour every day; `colors` fixes some), on a
 * shared scale, with a legend. `unit` formats values. `id` names the figure. */
export function dayBars(id, title, days, unit = (v) => v.toFixed(2), colors = {}) {
  const names = [...new Set(days.flatMap((d) => d.parts.map((p) => p.name)))];
  const free = names.filter((n) => !colors[n]);
  const color = (name) => colors[name] || PALETTE[free.indexOf(name) % PALETTE.length];
  const top = Math.max(0, ...days.map((d) => d.parts.reduce((n, p) => n + p.value, 0)));
  const { figure, root } = frame(id, title, { 'aria-label': title, 'data-days': days.length });
  const plot = { w: W - PAD.left - PAD.right, h: H - PAD.top - PAD.bottom };
  const slot = plot.w / Math.max(1, days.length);
  const bar = Math.min(48, slot * 0.7);
  const y = (v) => H - PAD.bottom - (top ? (v / top) * plot.h : 0);
  axes(root, y, top, 0, unit(top), unit(0));
  days.forEach((d, i) => {
    const x = PAD.left + i * slot + (slot - bar) / 2;
    const total = d.parts.reduce((n, p) => n + p.value, 0);
    const g = svg('g', { class: 'day-bar', 'data-day': d.label, 'aria-label': `${d.label}: ${unit(total)} — ${d.parts.map((p) => `${p.name} ${unit(p.value)}`).join(', ')}` });
    let base = 0;
    for (const p of d.parts) {
      const seg = svg('rect', { x, y: y(base + p.value), width: bar, height: Math.max(0, y(base) - y(base + p.value)), fill: color(p.name), 'data-part': p.name });
      seg.append(svg('title', {}, `${d.label} · ${p.name}: ${unit(p.value)}`));
      g.append(seg);
      base += p.value;
    }
    if (days.length <= 14 || i % Math.ceil(days.length / 14) === 0) {
      g.append(svg('text', { x: x + bar / 2, y: H - 8, 'text-anchor': 'middle' }, d.label.slice(5)));
    }
    root.append(g);
  });
  figure.append(legendOf(names, color));
  return figure;
}

/** Several lines over time on one 0–`top` scale ({name, points: [[unixSeconds, value]]}),
 * each in its own colour with a legend; `flagged` names are drawn dashed (stragglers).
 * `id` names the figure. */
export function timeLines(id, title, lines, { top = 100, unit = '%', flagged = [] } = {}) {
  const { figure, root } = frame(id, title, { 'aria-label': title, 'data-lines': lines.length });
  const times = lines.flatMap((l) => l.points.map((p) => p[0]));
  const [t0, t1] = times.length ? [Math.min(...times), Math.max(...times)] : [0, 1];
  const x = (t) => PAD.left + ((t - t0) / (t1 - t0 || 1)) * (W - PAD.left - PAD.right);
  const y = (v) => H - PAD.bottom - (Math.min(v, top) / top) * (H - PAD.top - PAD.bottom);
  const clock = (t) => new Date(t * 1000).toISOString().slice(11, 16);
  axes(root, y, top, 0, `${top}${unit}`, `0${unit}`);
  root.append(
    svg('text', { x: PAD.left, y: H - 8 }, clock(t0)),
    svg('text', { x: W - PAD.right, y: H - 8, 'text-anchor': 'end' }, `${clock(t1)} UTC`),
  );
  const color = (name) => PALETTE[lines.findIndex((l) => l.name === name) % PALETTE.length];
  for (const l of lines) {
    const attrs = { class: 'line', stroke: color(l.name), 'data-line': l.name, points: l.points.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(' ') };
    if (flagged.includes(l.name)) attrs['stroke-dasharray'] = '6 4';
    root.append(svg('polyline', attrs));
  }
  const labels = new Map(lines.map((l) => [l.name, l.label || l.name]));
  figure.append(legendOf(lines.map((l) => l.name), color, (n) => labels.get(n)));
  return figure;
}
