// Page: your agent tokens, when people sign in (docs/access.md): make one for Kiro CLI (shown
// once), see them, revoke one.

import { api, h, scoped, errorBox, table, input } from './kit.js';

export async function tokens() {
  const show = scoped();
  const list = await api('/api/session/agent-tokens');
  const made = h('div', { id: 'agent-token-made', role: 'status' });
  const name = input('agent-token-name', { required: true, maxlength: 64, placeholder: 'kiro on my laptop' });
  const days = input('agent-token-days', { type: 'number', min: 1, max: 90, value: 30 });
  const readOnly = h('input', { type: 'checkbox', id: 'agent-token-read-only' });
  const create = async (e) => {
    e.preventDefault();
    const r = await api('/api/session/agent-tokens', {
      method: 'POST', body: { name: name.value, days: Number(days.value), readOnly: readOnly.checked },
    });
    if (!r.ok) return made.replaceChildren(errorBox(r));
    await tokens();
    document.getElementById('agent-token-made').replaceChildren(
      h('p', {}, 'Your agent token, shown this once: set it as INSTANTSTART_TOKEN for scripts/install-agent.'),
      h('pre', {}, h('code', { id: 'agent-token-secret' }, r.body.token)));
  };
  const revoke = (id) => async () => {
    const r = await api(`/api/session/agent-tokens/${encodeURIComponent(id)}`, { method: 'DELETE' });
    if (r.ok) await tokens();
  };
  const rows = list.ok ? list.body.map((t) => [t.name, t.readOnly ? 'read-only' : 'acts as you',
    new Date(t.expiresAt * 1000).toISOString().slice(0, 10), t.revokedAt ? `revoked ${t.revokedAt}` : 'active',
    t.revokedAt ? '' : h('button', { type: 'button', class: 'secondary', onclick: revoke(t.id) }, `Revoke ${t.name}`)]) : [];
  show(h('h1', {}, 'Agent tokens'),
    h('p', { class: 'muted' }, 'An agent with one of your tokens acts as you, with your rights (or only reads), and the audit trail records its calls as yours via the agent.'),
    list.ok ? table(['Name', 'Rights', 'Expires', 'State', ''], rows, 'No agent tokens yet.') : errorBox(list),
    h('h2', {}, 'Make a token'),
    h('form', { class: 'grid', onsubmit: create },
      h('label', { for: 'agent-token-name' }, 'Name'), name,
      h('label', { for: 'agent-token-days' }, 'Days'), days,
      h('label', { for: 'agent-token-read-only' }, 'Read-only'), readOnly,
      h('span'), h('button', { type: 'submit' }, 'Make token')),
    made);
  return null;
}
