// Page: advanced features, sending only the toggles that change.

import { administers, api, h, scoped, session, stateBadge, errorBox, needsActive } from './kit.js';

export async function features() {
  const show = scoped();
  if (needsActive('Advanced features')) return null;
  const name = session.active;
  const enc = encodeURIComponent(name);
  // After a change the panel is read again, so the next diff is against the new state.
  const render = async (message) => {
    const r = await api(`/api/clusters/${enc}/features`);
    if (!r.ok) return show(h('h1', {}, 'Advanced features'), errorBox(r));
    const boxes = r.body.features.map((f) => ({ f, input: h('input', { type: 'checkbox', id: `feature-${f.key}`, checked: f.enabled }) }));
    // Managed autoscaling also chooses the instance groups it governs.
    const auto = r.body.features.find((f) => f.key === 'managedAutoscaling');
    const groups = auto ? await api(`/api/clusters/${enc}/instance-groups`) : { ok: false };
    const current = new Set(auto?.instanceGroups || []);
    const groupBoxes = groups.ok ? groups.body.map((g) => ({ g, input: h('input', {
      type: 'checkbox', id: `autoscale-${g.name}`, checked: current.has(g.name),
      disabled: g.capacityType !== 'on-demand' || g.deepHealthChecks.length > 0 }) })) : [];
    const groupPicker = h('div', { class: 'field-hint' }, 'Groups it governs (on-demand or Spot, without deep health checks; none chosen = every eligible group): ',
      groupBoxes.map(({ g, input }) => h('label', { for: input.id }, input, ` ${g.name} `)));
    const result = h('div', { id: 'features-result', role: 'status' });
    const form = h('form', { class: 'grid', 'aria-label': 'Advanced features' },
      boxes.map(({ f, input }) => [
        h('label', { for: input.id }, f.key),
        h('div', {}, input, ' ', stateBadge(f.state),
          f.operationId ? [' ', h('a', { href: `#/op/${f.operationId}` }, 'progress')] : null,
          f.reason ? h('div', { class: 'error' }, f.reason) : null,
          h('div', { class: 'field-hint' }, f.description),
          f.key === 'managedAutoscaling' ? groupPicker : null)]),
      // Only the cluster's administrators change its features: others read them.
      administers(name) ? [h('span'), h('div', {}, h('button', { type: 'submit' }, 'Apply changes'))] : null);
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const body = {};
      for (const { f, input } of boxes) if (input.checked !== f.enabled) body[f.key] = input.checked;
      const chosen = groupBoxes.filter(({ input }) => input.checked).map(({ g }) => g.name).sort();
      const autoOn = boxes.find(({ f }) => f.key === 'managedAutoscaling')?.input.checked;
      if (autoOn && chosen.length && chosen.join() !== [...current].sort().join()) body.managedAutoscalingInstanceGroups = chosen;
      if (!Object.keys(body).length) { result.textContent = 'No change: every feature is already as selected.'; return; }
      const p = await api(`/api/clusters/${enc}/features`, { method: 'PATCH', body });
      if (!p.ok) { result.replaceChildren(errorBox(p)); return; }
      await render(h('ul', {}, Object.entries(p.body.features).map(([k, v]) => h('li', {}, `${k}: `,
        v.result === 'unchanged' ? 'no change' : h('a', { href: `#/op/${v.operationId}` }, `${v.enable ? 'enabling' : 'disabling'} (progress)`)))));
    });
    if (message) result.replaceChildren(message);
    show(h('h1', {}, `Advanced features · ${name}`),
      h('p', { class: 'muted' }, 'Read from the cluster as it is. Only the features you change are sent.'),
      form, result);
  };
  await render();
  return null;
}
