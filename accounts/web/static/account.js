// My subscriptions, consumption keys and management keys.

import {
  api, get, h, field, msg, busy, announce, badge, statusBadge, secret, confirmDialog, copyButton,
  usd, blockLabel, fmtDate, fmtDateTime, when,
} from './lib.js';
import { cardForm, cardText, hasTestBank, testBank } from './billing.js';

// loadSubscriptions gathers the user's subscriptions on every pool: each gets .pool (the
// pool's row, or a stand-in naming it by slug when it is no longer listed). Newest first.
export async function loadSubscriptions() {
  const [pools, all] = await Promise.all([get('/api/pools'), get('/api/subscriptions')]);
  const byId = new Map(pools.map((p) => [p.id, p]));
  const subs = all.map((s) => ({ ...s, pool: byId.get(s.poolId) || { id: s.poolId, slug: s.poolSlug, modelName: s.poolSlug } }));
  subs.sort((a, b) => new Date(b.createdAt) - new Date(a.createdAt));
  return { pools, subs };
}

export const subLabel = (s) => `${s.pool ? s.pool.modelName : s.poolSlug} · ${s.blocks.join('+')} ×${s.quantity}`;

const renewable = (s) => ['active', 'pending_key', 'past_due'].includes(s.status);

export async function renderSubscriptions(ctx, view) {
  const [{ subs }, billing, metas, firstCharges] = await Promise.all([
    loadSubscriptions(), get('/api/billing/status'), api('GET', '/api/meta-keys'), loadCharges('')]);
  // The newest charge of each subscription: what it charged last.
  const lastCharge = new Map();
  for (const c of firstCharges.data) if (!lastCharge.has(c.subscriptionId)) lastCharge.set(c.subscriptionId, c);
  const inCombined = new Map();
  for (const m of metas.ok ? metas.data : []) for (const x of m.members) inCombined.set(x.pledgeId, m);

  // The card on file, and past-due recovery: a new card retries the charges at once.
  const cardBox = h('div', { id: 'billing-card', class: 'card' });
  const drawCard = (open) => cardBox.replaceChildren(h('div', {},
    h('h2', {}, 'Card'),
    h('p', {}, billing.paymentMethod ? `On file: ${cardText(billing.paymentMethod)}. ` : 'No card saved yet. ',
      open ? null : h('button', { type: 'button', class: 'link', onclick: () => drawCard(true) }, billing.paymentMethod ? 'Change card' : 'Add a card')),
    open ? cardForm(ctx, 'card', () => setTimeout(view.rerender, 1200)) : null));
  drawCard(false);

  const pastDue = billing.pastDue.length ? h('div', { id: 'past-due', class: 'card danger-zone' },
    h('h2', {}, 'Payment past due'),
    h('p', {}, `${billing.pastDue.length} subscription${billing.pastDue.length > 1 ? 's are' : ' is'} past due: ` +
      'the key is suspended. Save a new card and we retry the charge at once; the key works again as soon as it is paid.'),
    cardForm(ctx, 'recover', (data) => {
      announce(data.recovered.length ? `${data.recovered.length} subscription(s) paid and restored` : 'Card saved; still past due');
      setTimeout(view.rerender, 1500);
    })) : null;

  const list = subs.length
    ? subs.map((s) => subRow(ctx, view, s, inCombined.get(s.id), lastCharge.get(s.id)))
    : [h('p', { class: 'empty' }, 'No subscriptions yet. ', h('a', { href: '#/pools' }, 'Browse the pools'), ' to buy seats.')];
  view.fill('subscriptions', pastDue, h('div', { class: 'list' }, list), cardBox, billingHistory(subs, firstCharges));
}

// loadCharges reads one page of GET /api/billing/charges (newest first); before is the previous page's
// nextCursor ('' for the first). The cursor sits beside data in the envelope, so this reads it itself.
async function loadCharges(before) {
  const q = before ? `?before=${encodeURIComponent(before)}` : '';
  try {
    const res = await fetch(`/api/billing/charges${q}`, { credentials: 'same-origin', headers: { Accept: 'application/json' } });
    const env = await res.json();
    if (res.ok && env.success && Array.isArray(env.data)) return { data: env.data, nextCursor: env.nextCursor || null, error: null };
    return { data: [], nextCursor: null, error: env.error || `The billing history could not be read (${res.status}).` };
  } catch {
    return { data: [], nextCursor: null, error: 'Could not reach the server to read the billing history.' };
  }
}

// isoDay renders a timestamp as its UTC day, as receipts print it: 2027-11-28.
const isoDay = (ts) => new Date(ts).toISOString().slice(0, 10);

const chargeKinds = { purchase: 'Purchase', renewal: 'Renewal', pledge: 'Pledge', recovery: 'Past-due payment' };
const chargeStatuses = { succeeded: 'Paid', refunded: 'Refunded', partially_refunded: 'Partly refunded' };

// billingHistory lists every charge, newest first, each with its receipt; "Show older" pages on.
function billingHistory(subs, first) {
  const poolOf = new Map(subs.map((s) => [s.id, s.pool ? s.pool.modelName : s.poolSlug]));
  const body = h('tbody', {});
  const more = h('button', { type: 'button', class: 'ghost', id: 'billing-history-more' }, 'Show older charges');
  const note = msg();
  let cursor = null;
  const add = (page) => {
    if (page.error) note.show(page.error);
    for (const c of page.data) {
      body.append(h('tr', { class: 'charge-row', dataset: { id: c.id } },
        h('td', {}, isoDay(c.createdAt)),
        h('td', {}, h('span', {}, `${chargeKinds[c.kind] || c.kind} · ${poolOf.get(c.subscriptionId) || 'subscription'}`),
          h('div', { class: 'small muted' }, c.description)),
        h('td', { class: 'num' }, usd(c.amount),
          c.status !== 'succeeded' ? h('div', { class: 'small muted' }, `${usd(c.refundedAmount)} refunded`) : null),
        h('td', {}, c.status === 'succeeded' ? chargeStatuses.succeeded : badge(chargeStatuses[c.status] || c.status, 'warn')),
        h('td', {}, h('a', { href: `/api/billing/charges/${encodeURIComponent(c.id)}/receipt`, target: '_blank', rel: 'noopener',
          class: 'receipt-link' }, 'Receipt'), h('div', { class: 'small muted' }, c.number))));
    }
    cursor = page.nextCursor;
    more.hidden = !cursor;
  };
  more.addEventListener('click', () => busy(more, async () => add(await loadCharges(cursor))));
  add(first);
  const table = h('table', { class: 'table' },
    h('thead', {}, h('tr', {}, h('th', {}, 'Date (UTC)'), h('th', {}, 'What'), h('th', { class: 'num' }, 'Amount'), h('th', {}, 'Status'), h('th', {}, ''))),
    body);
  return h('div', { id: 'billing-history', class: 'card' },
    h('h2', {}, 'Billing history'),
    first.data.length || first.error ? h('div', { class: 'scroll' }, table) : h('p', { class: 'empty' }, 'No charges yet.'),
    h('div', { class: 'row' }, more), note);
}

// chargeFacts says what a subscription charged last and what it will charge next, and when.
function chargeFacts(s, last) {
  const charged = last
    ? `${usd(last.amount)} on ${isoDay(last.createdAt)}${last.status === 'succeeded' ? '' : ` (${usd(last.refundedAmount)} refunded)`}`
    : 'Nothing yet';
  let next;
  if (s.nextChargeAt) next = `${usd(s.periodAmount)} on ${isoDay(s.nextChargeAt)}`;
  else if (s.status === 'pledged') next = `${usd(s.periodAmount)} when the pool goes live`;
  else if (s.status === 'past_due') next = `${usd(s.periodAmount)} owed: charged as soon as a card pays`;
  else if (s.status === 'pending_key') next = 'Renews once your key is delivered';
  else next = 'No further charges';
  return [h('dt', {}, 'Charged'), h('dd', { class: 'sub-charged' }, charged),
    h('dt', {}, 'Next charge'), h('dd', { class: 'sub-next-charge' }, next)];
}

function subRow(ctx, view, s, combined, last) {
  const note = msg();
  const actions = h('div', { class: 'row' });
  let keyInfo;
  if (s.key) keyInfo = h('span', {}, secret(s.key.apiKey), s.key.isActive ? '' : badge('revoked', 'off'));
  else if (combined) keyInfo = h('span', {}, 'In the combined key ', h('a', { href: '#/combined' }, combined.label || 'unnamed'));
  else keyInfo = h('span', { class: 'muted' }, 'No key yet');

  if (!s.key && !combined && s.status === 'active') {
    const btn = h('button', { type: 'button', class: 'primary' }, 'Create key');
    btn.addEventListener('click', () => busy(btn, async () => {
      const r = await api('POST', '/api/keys/subscription', { subscriptionId: s.id });
      if (!r.ok) return note.show(r.error);
      announce('Key created');
      view.rerender();
    }));
    actions.append(btn);
  }
  if (s.status === 'pledged') {
    const btn = h('button', { type: 'button', class: 'ghost' }, 'Withdraw pledge');
    btn.addEventListener('click', () => busy(btn, async () => {
      const r = await api('POST', `/api/subscriptions/${encodeURIComponent(s.id)}/cancel`);
      if (!r.ok) return note.show(r.error);
      announce('Pledge withdrawn: nothing was charged');
      view.rerender();
    }));
    actions.append(btn);
  }
  if (s.status === 'incomplete') {
    // Confirm asks the processor; with the test processor a payment still waiting opens the test bank first.
    const btn = h('button', { type: 'button', class: 'primary' }, 'Confirm payment');
    btn.addEventListener('click', () => busy(btn, async () => {
      let r = await api('POST', `/api/subscriptions/${encodeURIComponent(s.id)}/confirm`);
      if (r.status === 402 && r.data && r.data.status === 'incomplete' && hasTestBank(ctx, r.data)) {
        const b = await testBank(r.data);
        if (b && !b.ok) return note.show(b.error);
        if (b) r = await api('POST', `/api/subscriptions/${encodeURIComponent(s.id)}/confirm`);
      }
      if (!r.ok) {
        const waiting = Boolean(r.data && r.data.status === 'incomplete');
        note.show(r.error, waiting ? 'warn' : 'error');
        if (r.status === 402 && !waiting) setTimeout(view.rerender, 2500); // ended unpaid: show it canceled
        return;
      }
      announce('Payment confirmed');
      view.rerender();
    }));
    const cancel = h('button', { type: 'button', class: 'ghost' }, 'Cancel purchase');
    cancel.addEventListener('click', () => busy(cancel, async () => {
      const r = await api('POST', `/api/subscriptions/${encodeURIComponent(s.id)}/cancel`);
      if (!r.ok) return note.show(r.error);
      announce(r.data.refunded ? 'Purchase canceled: the payment is refunded' : 'Purchase canceled: nothing was charged');
      view.rerender();
    }));
    actions.append(btn, cancel);
  }
  if (renewable(s) && !s.cancelAtPeriodEnd) {
    const btn = h('button', { type: 'button', class: 'ghost' }, 'Cancel at period end');
    btn.addEventListener('click', async () => {
      const sure = await confirmDialog('Cancel at period end?',
        `Your key keeps working until ${fmtDate(s.currentPeriodEnd)}; then the subscription ends and does not renew. Unused time is not refunded.`,
        'Cancel at period end');
      if (!sure) return;
      await busy(btn, async () => {
        const r = await api('POST', `/api/subscriptions/${encodeURIComponent(s.id)}/cancel`);
        if (!r.ok) return note.show(r.error);
        announce(`Canceled at period end: works until ${fmtDate(r.data.currentPeriodEnd)}`);
        view.rerender();
      });
    });
    actions.append(btn, h('span', { class: 'small muted' }, `Keeps working until ${fmtDate(s.currentPeriodEnd)}; no renewal, no refund.`));
  } else if (renewable(s) && s.cancelAtPeriodEnd) {
    const btn = h('button', { type: 'button', class: 'ghost' }, 'Keep renewing');
    btn.addEventListener('click', () => busy(btn, async () => {
      const r = await api('POST', `/api/subscriptions/${encodeURIComponent(s.id)}/resume`);
      if (!r.ok) return note.show(r.error);
      announce(`Renews on ${fmtDate(r.data.currentPeriodEnd)}`);
      view.rerender();
    }));
    actions.append(btn);
  }

  const state = {
    pending_key: 'The operator delivers the key by hand: usually within hours, always within 24 hours. You will get an e-mail.',
    past_due: 'Payment past due: the key is suspended until a new card pays (above).',
    incomplete: 'Unpaid: your bank asks you to confirm the payment (3-D Secure). Nothing is charged until you do, and there is no key yet. Cancel the purchase to release the seats now.',
    canceled: 'Ended. Its seats are free again.',
    pledged: 'Pledged: the seats are held and nothing is charged until the pool goes live; then your card is charged for the first period and you can create the key.',
  }[s.status];

  return h('article', { class: 'card sub', dataset: { id: s.id } },
    h('header', { class: 'card-head' }, h('h2', {}, s.pool.modelName), statusBadge(s.status),
      s.cancelAtPeriodEnd ? badge(`ends ${fmtDate(s.currentPeriodEnd)}`, 'warn') : null),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Hours'), h('dd', {}, s.blocks.map(blockLabel).join(', ')),
      h('dt', {}, 'Seats'), h('dd', {}, `${s.quantity} per hour (${s.quantity} simultaneous request${s.quantity > 1 ? 's' : ''})`),
      h('dt', {}, 'Price'), h('dd', {}, `${usd(s.monthlyPrice)} / month, billed ${s.billingCycle === 'year' ? 'yearly' : 'monthly'}`),
      periodFact(s),
      s.status === 'incomplete' ? null : chargeFacts(s, last),
      h('dt', {}, 'Key'), h('dd', {}, keyInfo)),
    state ? h('p', { class: 'notice small' }, state) : null,
    actions, note);
}

// periodFact is the row's line about its period: when it renews or ends, or what an unpaid purchase waits for.
function periodFact(s) {
  switch (s.status) {
    case 'pledged': return null;
    case 'incomplete':
      return [h('dt', {}, 'Payment'), h('dd', { class: 'sub-waiting' },
        `Waiting for your bank's confirmation — confirm or cancel by ${s.holdExpiresAt ? when(s.holdExpiresAt) : 'the end of the hold'}`)];
    case 'canceled': return [h('dt', {}, new Date(s.currentPeriodEnd) <= new Date() ? 'Ended' : 'Ends'), h('dd', {}, fmtDate(s.currentPeriodEnd))];
  }
  return [h('dt', {}, s.cancelAtPeriodEnd ? 'Ends' : 'Renews'), h('dd', {}, fmtDate(s.currentPeriodEnd))];
}

// ---- Keys ------------------------------------------------------------------

export async function renderKeys(ctx, view) {
  const [keys, { subs }, metas, mkeys] = await Promise.all([
    get('/api/keys'), loadSubscriptions(), api('GET', '/api/meta-keys'), get('/api/keys/management')]);
  const subsById = new Map(subs.map((s) => [s.id, s]));
  const members = new Set((metas.ok ? metas.data : []).flatMap((m) => m.members.map((x) => x.pledgeId)));
  const eligible = subs.filter((s) => s.status === 'active' && !s.key && !members.has(s.id));

  view.fill('keys',
    createKeyForm(view, eligible),
    keys.length ? h('div', { class: 'list' }, keys.map((k) => keyRow(view, k, subsById.get(k.subscriptionId))))
      : h('p', { class: 'empty' }, 'No keys yet. Create one for a subscription above.'));
  view.fill('management-keys', managementKeys(view, mkeys));
}

function createKeyForm(view, eligible) {
  const note = msg();
  if (!eligible.length) {
    return h('p', { class: 'muted' }, 'Every active subscription has a key (or is in a combined key). ',
      h('a', { href: '#/pools' }, 'Buy seats'), ' to get another.');
  }
  const sel = h('select', { id: 'key-create-sub' }, eligible.map((s) => h('option', { value: s.id }, subLabel(s))));
  const name = h('input', { id: 'key-create-name', type: 'text', maxlength: '200', placeholder: 'e.g. laptop', autocomplete: 'off' });
  const submit = h('button', { type: 'submit', id: 'key-create-submit', class: 'primary' }, 'Create key');
  const form = h('form', { id: 'key-create-form', class: 'card inline-form' },
    h('h2', {}, 'New key'), field('Subscription', sel), field('Name (optional)', name), h('div', { class: 'row' }, submit), note);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    busy(submit, async () => {
      const body = { subscriptionId: sel.value };
      if (name.value.trim()) body.name = name.value.trim();
      const r = await api('POST', '/api/keys/subscription', body);
      if (!r.ok) return note.show(r.error);
      announce(`Key ${r.data.name} created`);
      view.rerender();
    });
  });
  return form;
}

function keyRow(view, k, sub) {
  const note = msg();
  const rename = h('button', { type: 'button', class: 'ghost small' }, 'Rename');
  const toggle = h('button', { type: 'button', class: 'ghost small' }, k.isActive ? 'Revoke' : 'Reactivate');
  const del = h('button', { type: 'button', class: 'danger small' }, 'Delete');
  const renameBox = h('div', {});

  rename.addEventListener('click', () => {
    if (renameBox.firstChild) return renameBox.replaceChildren();
    const input = h('input', { id: `key-name-${k.id}`, type: 'text', value: k.name, maxlength: '200', autocomplete: 'off' });
    const save = h('button', { type: 'submit', class: 'primary small' }, 'Save');
    const form = h('form', { class: 'inline-form' }, field('Key name', input), h('div', { class: 'row' }, save));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      busy(save, async () => {
        const r = await api('PUT', `/api/keys/${encodeURIComponent(k.id)}`, { name: input.value.trim() });
        if (!r.ok) return note.show(r.error);
        announce('Key renamed');
        view.rerender();
      });
    });
    renameBox.replaceChildren(form);
    input.focus();
  });
  toggle.addEventListener('click', () => busy(toggle, async () => {
    const r = await api('PUT', `/api/keys/${encodeURIComponent(k.id)}`, { isActive: !k.isActive });
    if (!r.ok) return note.show(r.error);
    announce(k.isActive ? 'Key revoked' : 'Key reactivated');
    view.rerender();
  }));
  del.addEventListener('click', async () => {
    const sure = await confirmDialog(`Delete the key "${k.name}"?`,
      'It stops working at once and cannot be restored. The subscription stays: it can get a new key or join a combined key.');
    if (!sure) return;
    await busy(del, async () => {
      const r = await api('DELETE', `/api/keys/${encodeURIComponent(k.id)}`);
      if (!r.ok) return note.show(r.error);
      announce('Key deleted');
      view.rerender();
    });
  });

  return h('article', { class: 'card key', dataset: { id: k.id } },
    h('header', { class: 'card-head' }, h('h3', {}, k.name),
      k.isActive ? badge('active', 'ok') : badge('revoked', 'off'),
      k.subscriptionStatus !== 'active' ? statusBadge(k.subscriptionStatus) : null),
    h('p', {}, secret(k.apiKey)),
    h('p', { class: 'small muted' },
      sub ? `${subLabel(sub)} · ${sub.blocks.map(blockLabel).join(', ')} · ` : '',
      `period ends ${fmtDate(k.subscriptionExpiresAt)} · last used ${fmtDateTime(k.lastUsedAt)}`),
    h('div', { class: 'row' }, rename, toggle, del,
      h('a', { class: 'small', href: `#/connect/${encodeURIComponent(k.id)}` }, 'Connect')),
    renameBox, note);
}

// ---- Management keys ----------------------------------------------------------

function managementKeys(view, mkeys) {
  const note = msg();
  const created = h('div', { id: 'mkey-created', 'aria-live': 'polite' });
  const name = h('input', { id: 'mkey-name', type: 'text', maxlength: '200', required: true, placeholder: 'e.g. ci', autocomplete: 'off' });
  const submit = h('button', { type: 'submit', id: 'mkey-submit', class: 'primary' }, 'Create management key');
  const form = h('form', { id: 'mkey-form', class: 'card inline-form', novalidate: true },
    field('Name', name), h('div', { class: 'row' }, submit), note, created);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    note.clear();
    if (!name.value.trim()) return note.show('Give the key a name, e.g. the script that will use it.');
    busy(submit, async () => {
      const r = await api('POST', '/api/keys/management', { name: name.value.trim() });
      if (!r.ok) return note.show(r.error);
      name.value = '';
      announce('Management key created: copy it now');
      // Shown once: the server keeps only a hash. The list refreshes without wiping this box.
      created.replaceChildren(h('div', { class: 'card warn-box' },
        h('p', {}, h('strong', {}, 'Copy this key now. '), 'It is shown only this once; if you lose it, delete it and create another.'),
        h('p', {}, h('code', { class: 'secret wrap' }, r.data.apiKey), ' ', copyButton(() => r.data.apiKey))));
      const fresh = await get('/api/keys/management').catch(() => null);
      if (fresh) list.replaceChildren(...mkeyRows(view, fresh));
    });
  });
  const list = h('div', { class: 'list' }, mkeyRows(view, mkeys));
  return [form, list];
}

function mkeyRows(view, mkeys) {
  if (!mkeys.length) return [h('p', { class: 'empty' }, 'No management keys.')];
  return mkeys.map((m) => {
    const note = msg();
    const del = h('button', { type: 'button', class: 'danger small' }, 'Delete');
    del.addEventListener('click', async () => {
      if (!await confirmDialog(`Delete the management key "${m.name}"?`, 'Scripts using it stop working at once.')) return;
      await busy(del, async () => {
        const r = await api('DELETE', `/api/keys/management/${encodeURIComponent(m.id)}`);
        if (!r.ok) return note.show(r.error);
        announce('Management key deleted');
        del.closest('.mkey').remove();
      });
    });
    return h('article', { class: 'card mkey', dataset: { id: m.id } },
      h('header', { class: 'card-head' }, h('h3', {}, m.name), m.isActive ? null : badge('inactive', 'off')),
      h('p', {}, h('code', {}, `${m.keyPrefix}_…`)),
      h('p', { class: 'small muted' }, `created ${fmtDate(m.createdAt)} · last used ${fmtDateTime(m.lastUsedAt)}`),
      h('div', { class: 'row' }, del), note);
  });
}
