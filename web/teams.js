// Page: teams sharing the cluster (HyperPod task governance) — the scheduling policy, each
// team's share per instance type drawn beside what the instance groups hold, and the forms that
// set the policy and give a team its share.

import { administers, api, confirmPlan, h, scoped, session, stateBadge, problemText, errorBox, table, needsActive, input } from './kit.js';
import { stackedBars } from './chart.js';
import { utilizationChart } from './utilization.js';

/** One bar per instance type: each team's share of what the groups hold, and what is free
 * (also on the cluster's page, as `id`). */
export function shareChart(view, id = 'team-shares') {
  const rows = view.capacity.map((c) => ({
    label: `${c.instanceType} × ${c.instances}`,
    total: c.instances,
    parts: view.teams.flatMap((t) => t.resources.filter((r) => r.instanceType === c.instanceType).map((r) => {
      const gpus = c.instances ? c.accelerators / c.instances : 0;
      return { name: t.name, value: r.count ?? (gpus ? r.accelerators / gpus : 0),
        text: r.count != null ? `${r.count} inst.` : `${r.accelerators} GPUs` };
    })),
  }));
  return stackedBars(id, 'Teams\' shares of each instance type', rows);
}

/** One bar per team and flavor, in GPUs as Kueue counts them: its own quota in use, what it
 * borrows on top, what it lends out of its idle quota, and what is still idle. */
function usageChart(view) {
  const fmt = (n) => String(Math.round(n * 10) / 10);
  const rows = view.teams.flatMap((t) => (t.usage ? t.usage.flavors : []).map((f) => ({
    label: `${t.name} · ${f.flavor}`,
    total: f.nominal + f.borrowed,
    parts: [
      { name: 'in use', value: f.inUse - f.borrowed, text: fmt(f.inUse - f.borrowed) },
      { name: 'borrowed', value: f.borrowed, text: fmt(f.borrowed) },
      { name: 'lent', value: f.lent, text: fmt(f.lent) },
    ].filter((p) => p.value > 0),
  })));
  if (!rows.length) return h('p', { class: 'muted', id: 'team-usage' }, 'Kueue has not reported the teams\' use yet: it does once their ClusterQueues exist.');
  const queued = view.teams.filter((t) => t.usage).map((t) => `${t.name}: ${t.usage.admittedWorkloads} admitted, ${t.usage.pendingWorkloads} pending`).join(' · ');
  return h('div', { id: 'team-usage' }, stackedBars('team-usage-chart', 'GPUs per team: quota in use, borrowed, lent, idle', rows), h('p', { class: 'muted' }, queued));
}

/** Who may work as a team: a person's access to a team read, given (edit or view) or taken back,
 * each change an operation of its own. */
function accessForm(view, enc, go) {
  const team = h('select', { id: 'access-team' }, view.teams.map((t) => h('option', { value: t.name }, t.name)));
  const who = input('access-principal', { placeholder: 'arn:aws:iam::111122223333:role/Researcher', size: 48 });
  const access = h('select', { id: 'access-kind' }, [['edit', 'edit: submit, see and delete its work'], ['view', 'view: see its work']]
    .map(([v, text]) => h('option', { value: v }, text)));
  const now = h('p', { id: 'access-now', role: 'status', class: 'muted' });
  const url = () => `/api/clusters/${enc}/teams/${encodeURIComponent(team.value)}/access`;
  const person = () => `principalArn=${encodeURIComponent(who.value.trim())}`;
  const check = async () => {
    const r = await api(`${url()}?${person()}`);
    now.textContent = r.ok ? `${r.body.principalArn} on team ${r.body.team}: ${r.body.access ?? 'no access'}` : problemText(r.body);
  };
  return h('form', { class: 'grid', 'aria-label': 'Team access', onsubmit: (e) => {
    e.preventDefault();
    go(url(), 'PUT', { principalArn: who.value.trim(), access: access.value });
  } },
  h('label', { for: team.id }, 'Team'), team,
  h('label', { for: who.id }, 'Person'), h('div', {}, who, h('div', { class: 'field-hint' }, 'The IAM user or role they sign in as, without a path.')),
  h('label', { for: access.id }, 'Access'), access,
  h('span'), h('div', {}, h('button', { type: 'submit' }, 'Give access'), ' ',
    h('button', { type: 'button', class: 'secondary', onclick: check }, 'Check'), ' ',
    h('button', { type: 'button', class: 'secondary', onclick: () => {
      go(`${url()}?${person()}`, 'DELETE', undefined, `Take team ${team.value}'s access from ${who.value.trim()}?`);
    } }, 'Take back')),
  h('span'), now);
}

export async function teams() {
  const show = scoped();
  if (needsActive('Teams')) return null;
  const enc = encodeURIComponent(session.active);
  const r = await api(`/api/clusters/${enc}/teams`);
  if (!r.ok) return show(h('h1', {}, 'Teams'), errorBox(r));
  const view = r.body;
  if (!view.enabled) {
    return show(h('h1', {}, 'Teams'), h('p', {}, 'Task governance is off on this cluster. Turn on ',
      h('strong', {}, 'taskGovernance'), ' in ', h('a', { href: '#/features' }, 'Advanced features'),
      ' to give teams their share of the GPUs, with priorities and borrowing.'), shareChart(view));
  }
  const note = h('div', { class: 'error', role: 'alert', id: 'teams-error' });
  // With a question: asked with the plan first (a refused preview is the answer, nothing asked).
  const go = async (url, method, body, question) => {
    note.textContent = '';
    if (question) {
      const asked = await confirmPlan(question, url, { method, body });
      if (asked.refused) { note.textContent = problemText(asked.refused.body); return; }
      if (!asked.ok) return;
    }
    const a = await api(url, { method, body });
    if (a.status === 202) location.hash = `#/op/${a.body.operationId}`;
    else if (a.ok) note.textContent = 'Already so: nothing to change.';
    else note.textContent = problemText(a.body);
  };
  const policy = view.policy;
  const classes = input('policy-classes', { value: policy ? policy.priorityClasses.map((c) => `${c.name}=${c.weight}`).join(', ') : 'inference=90, experimentation=80, training=70, fine-tuning=50' });
  const fair = h('input', { type: 'checkbox', id: 'policy-fair', checked: policy ? policy.fairShare : true });
  const idle = h('input', { type: 'checkbox', id: 'policy-idle', checked: policy ? policy.idleResourceSharing : false });
  const policyForm = h('form', { class: 'grid', 'aria-label': 'Scheduling policy', onsubmit: (e) => {
    e.preventDefault();
    const priorityClasses = classes.value.split(',').map((s) => s.trim()).filter(Boolean).map((s) => {
      const [name, weight] = s.split('=');
      return { name: name.trim(), weight: Number(weight) };
    });
    go(`/api/clusters/${enc}/scheduling-policy`, 'PUT', { priorityClasses, fairShare: fair.checked, idleResourceSharing: idle.checked });
  } },
  h('label', { for: classes.id }, 'Priority classes'), h('div', {}, classes, h('div', { class: 'field-hint' }, 'name=weight, comma-separated; weight 0–100, higher runs first.')),
  h('label', { for: fair.id }, 'Fair share'), h('div', {}, fair, h('span', { class: 'field-hint' }, ' idle compute lent by the teams\' weights')),
  h('label', { for: idle.id }, 'Idle-resource sharing'), h('div', {}, idle, h('span', { class: 'field-hint' }, ' compute given to no team is lent too')),
  h('span'), h('div', {}, h('button', { type: 'submit' }, 'Set policy')));
  const type = h('select', { id: 'team-type' }, view.capacity.map((c) => h('option', { value: c.instanceType }, c.instanceType)));
  const name = input('team-name', { placeholder: 'e.g. team-a' });
  const count = h('input', { type: 'number', id: 'team-count', min: 1, value: 1 });
  const sharing = h('select', { id: 'team-sharing' }, ['LendAndBorrow', 'Lend', 'DontLend'].map((s) => h('option', { value: s }, s)));
  const weight = h('input', { type: 'number', id: 'team-weight', min: 0, max: 100, value: 0 });
  const teamForm = h('form', { class: 'grid', 'aria-label': 'Create team', onsubmit: (e) => {
    e.preventDefault();
    go(`/api/clusters/${enc}/teams`, 'POST', { teamName: name.value.trim(), sharing: sharing.value, fairShareWeight: Number(weight.value),
      resources: [{ instanceType: type.value, count: Number(count.value) }] });
  } },
  h('label', { for: name.id }, 'Team name'), h('div', {}, name, h('div', { class: 'field-hint' }, 'Its work runs in namespace hyperpod-ns-<name>.')),
  h('label', { for: type.id }, 'Instance type'), type,
  h('label', { for: count.id }, 'Instances'), count,
  h('label', { for: sharing.id }, 'Sharing'), sharing,
  h('label', { for: weight.id }, 'Fair-share weight'), weight,
  h('span'), h('div', {}, h('button', { type: 'submit' }, 'Create team')));
  // Only the cluster's administrators change its policy and teams: others see, not the forms.
  const mine = administers(session.active);
  const rows = view.teams.map((t) => [h('strong', {}, t.name), t.namespace,
    t.resources.map((q) => `${q.instanceType}: ${q.count != null ? `${q.count} instances` : `${q.accelerators} GPUs`}`).join(', '),
    `${t.sharing}${t.borrowLimit ? ` (≤ ${t.borrowLimit}%)` : ''}`, t.preempt, String(t.fairShareWeight),
    h('span', {}, stateBadge(t.status), t.failureReason ? h('div', { class: 'error' }, t.failureReason) : null),
    mine ? h('button', { type: 'button', class: 'secondary', 'aria-label': `remove team ${t.name}`, onclick: () => {
      go(`/api/clusters/${enc}/teams/${encodeURIComponent(t.name)}`, 'DELETE', undefined, `Remove team ${t.name}'s share? Its work is no longer guaranteed any GPUs.`);
    } }, 'remove') : '']);
  return show(h('h1', {}, 'Teams'),
    h('h2', {}, 'Who has what'), shareChart(view),
    h('h2', {}, 'How much is in use'), usageChart(view),
    h('h2', {}, 'How busy their GPUs are'), await utilizationChart(session.active, { by: 'team', id: 'team-utilization' }),
    table(['Team', 'Namespace', 'Quota', 'Sharing', 'Preempts', 'Weight', 'Status', ''], rows, 'No team yet.'),
    h('h2', {}, 'Scheduling policy ', policy ? stateBadge(policy.status) : h('span', { class: 'muted' }, '(not set)')),
    policy?.failureReason ? h('p', { class: 'error' }, policy.failureReason, ' — set it again to recover.') : null,
    policy ? h('p', { class: 'muted' }, 'Workloads name a class as ', policy.priorityLabels.join(', ')) : null,
    mine ? [policyForm, note,
      h('details', {}, h('summary', {}, 'Give a team its share'), teamForm),
      view.teams.length ? h('details', {}, h('summary', {}, 'Who may work as a team'), accessForm(view, enc, go)) : null] : null);
}
