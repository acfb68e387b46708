// Page: storage claims (add, remove) and what an S3 claim holds.

import { api, h, scoped, session, errorBox, claimsTable, needsActive } from './kit.js';

export async function storage() {
  const show = scoped();
  if (needsActive('Storage')) return null;
  const enc = encodeURIComponent(session.active);
  const claims = await api(`/api/clusters/${enc}/storage`);
  // What an S3 claim holds, one prefix at a time.
  const listing = h('div', { id: 'objects' });
  const prefix = h('input', { type: 'text', id: 'objects-prefix', autocomplete: 'off', placeholder: 'models/' });
  const browse = (claim) => async () => {
    const r = await api(`/api/clusters/${enc}/storage/${encodeURIComponent(claim)}/objects?prefix=${encodeURIComponent(prefix.value.trim())}`);
    listing.replaceChildren(r.ok
      ? h('div', {}, h('p', { class: 'muted' }, `s3://${r.body.bucket}/${r.body.prefix}${r.body.truncated ? ' (first 1000 keys)' : ''}`),
        r.body.keys.length ? h('ul', {}, r.body.keys.map((k) => h('li', {}, k))) : h('p', { class: 'muted' }, 'Nothing under this prefix.'))
      : errorBox(r));
  };
  // A team's copy of a claim mounts the same bucket and prefix: browse the cluster's own.
  const s3 = claims.ok ? claims.body.filter((c) => c.kind === 's3' && c.namespace === 'default') : [];
  show(h('h1', {}, `Storage · ${session.active}`), claimsTable(claims),
    h('p', { class: 'muted' }, 'Workloads mount the shared bucket claim s3-claim at /s3.'),
    s3.length ? [h('h2', {}, 'Browse a bucket'),
      h('div', { class: 'grid' }, h('label', { for: 'objects-prefix' }, 'Prefix'),
        h('div', {}, prefix, ' ', s3.map((c) => h('button', { type: 'button', class: 'secondary', onclick: browse(c.claimName) }, `list ${c.claimName}`)))),
      listing] : null);
  return null;
}

// --- operations -----------------------------------------------------------------------------
