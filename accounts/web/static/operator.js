// The operator's console (issue 39): the Operator tab, shown only when GET /api/auth/session says operator.
// Every call goes to /api/operator/* (docs/api.md, "Operator API"); the panels reload themselves after an action.

import { api, h, field, msg, busy, announce, confirmDialog, statusBadge, badge, usd, dec, add, sub, fmtDec, pad2, BLOCKS, blockOf, utcHour, hoursText, hoursOf, newIdempotencyKey } from './lib.js';

// utc renders a timestamp as "2026-11-28 09:00 UTC" (without " UTC" in a column whose heading says so).
export function utc(ts, label = true) {
  if (!ts) return '—';
  const d = new Date(ts);
  return `${d.getUTCFullYear()}-${pad2(d.getUTCMonth() + 1)}-${pad2(d.getUTCDate())} ${pad2(d.getUTCHours())}:${pad2(d.getUTCMinutes())}${label ? ' UTC' : ''}`;
}

// money shows an amount the server wrote as a canonical decimal ("1234.5" → "$1,234.50").
const money = (amount) => (amount === undefined || amount === null || amount === '' ? '—' : usd(String(amount)));

// post calls an operator action once: the Idempotency-Key makes a retried click act once.
const post = (path, body) => api('POST', path, body, { 'Idempotency-Key': newIdempotencyKey() });

// page reads one page of a paged operator list: {data, nextCursor} or throws with the server's message.
async function page(path) {
  const r = await api('GET', path);
  if (!r.ok) throw new Error(r.error);
  return { data: r.data || [], nextCursor: r.nextCursor ?? null };
}

// scroller wraps a wide table so it scrolls sideways inside its card (phones).
const scroller = (label, table) => h('div', { class: 'scroll', tabindex: '0', role: 'region', 'aria-label': `${label}, scrolls sideways` }, table);

const th = (text, cls) => h('th', { scope: 'col', class: cls }, text);

export async function renderOperator(ctx, view) {
  const pools = await listPools();
  const state = { pools, byId: new Map(pools.map((p) => [p.id, p])) };
  const panels = {};
  const reload = async (...names) => { for (const n of names) await panels[n].load(); };
  panels.pools = poolsPanel(state, reload);
  panels.orders = ordersPanel(state, reload);
  panels.subscribers = subscribersPanel(state, reload);
  panels.ledger = ledgerPanel(state, reload);
  panels.audit = auditPanel(state);
  const nav = h('nav', { class: 'op-jump', 'aria-label': 'Operator sections' },
    [['op-pools', 'Pools'], ['op-heatmap-card', 'Seats sold'], ['op-orders', 'Orders'], ['op-subscribers', 'Subscribers'],
      ['op-ledger', 'Ledger'], ['op-audit', 'Audit log']].map(([id, text]) =>
      h('a', { href: `#/operator`, dataset: { target: id }, onclick: (ev) => { ev.preventDefault(); jump(id); } }, text)));
  await Promise.all(Object.values(panels).map((p) => p.load()));
  if (view.stale()) return;
  view.fill('operator', nav, panels.pools.node, panels.orders.node, panels.subscribers.node, panels.ledger.node, panels.audit.node);
  // On a narrow screen the heatmap opens at the current hour.
  const scroller = document.querySelector('#op-heatmap-card .scroll');
  const nowCol = document.querySelector('#op-heatmap thead th.now');
  if (scroller && nowCol && scroller.scrollWidth > scroller.clientWidth) {
    scroller.scrollLeft = Math.max(0, nowCol.offsetLeft - scroller.clientWidth / 2);
  }
  // After a route change, focus goes to the tab's heading (screen readers start there).
  document.querySelector('#operator h1').focus({ preventScroll: true });
  window.scrollTo(0, 0);
}

function jump(id) {
  const el = document.getElementById(id);
  el.scrollIntoView({ block: 'start' });
  el.querySelector('h2').focus();
}

async function listPools() {
  const r = await api('GET', '/api/operator/pools');
  if (!r.ok) throw new Error(r.error);
  return r.data || [];
}

// panel is a card with a heading, a persistent message slot (outcomes outlive a reload) and a body that load() refills.
function panel(id, title, intro) {
  const body = h('div', { class: 'op-body' });
  const note = msg();
  const node = h('section', { id, class: 'card op-panel', 'aria-labelledby': `${id}-title` },
    h('h2', { id: `${id}-title`, tabindex: '-1' }, title), intro ? h('p', { class: 'small muted' }, intro) : null, note, body);
  return { node, body, note };
}

// ---- Pools and the heatmap ---------------------------------------------------

const poolActions = {
  draft: [['Activate', 'active']],
  funding: [['Activate', 'active']],
  activating: [['Activate', 'active']],
  active: [['Pause', 'paused']],
  paused: [['Resume', 'active']],
};

const actionText = {
  active: (p) => p.status === 'paused'
    ? `Resume sales of ${p.name}? Buyers can subscribe again at once.`
    : `Activate ${p.name}? It starts selling seats at once${p.status === 'draft' ? '' : ', and every pledge is charged now for its first month'}.`,
  paused: (p) => `Pause ${p.name}? New subscriptions and pledges are refused; keys keep serving and renewals go on. Resume sells again.`,
};

function fundingCell(p) {
  if (!p.fundingGoal || dec(p.fundingGoal).n === 0n) return h('span', { class: 'muted' }, '—');
  const goal = Number(p.fundingGoal);
  const pledged = Number(p.fundingPledged || 0);
  const pct = goal > 0 ? Math.min(100, Math.round((pledged / goal) * 100)) : 0;
  return h('div', { class: 'op-funding' },
    h('progress', { max: goal, value: Math.min(pledged, goal), 'aria-label': `Funding of ${p.name}` }),
    h('div', { class: 'small' }, `${money(p.fundingPledged)} of ${money(p.fundingGoal)} (${pct}%)`));
}

function poolsPanel(state, reload) {
  const p = panel('op-pools', 'Pools', 'Every pool, drafts too. Revenue is this UTC month\'s charges less refunds; monthly recurring is what active subscriptions not set to cancel bring in a month.');
  const heat = panel('op-heatmap-card', 'Seats sold per UTC hour', null);
  const node = h('div', {}, p.node, heat.node);
  const act = (pool, label, status, btn) => busy(btn, async () => {
    p.note.clear();
    if (!(await confirmDialog(`${label} ${pool.name}?`, actionText[status](pool), label, 'Keep it as it is'))) return;
    const r = await post(`/api/operator/pools/${encodeURIComponent(pool.slug)}/status`, { status });
    // Refused (the pool moved meanwhile?): say why, and show the pools as they are now.
    if (!r.ok) { p.note.show(r.error); await reload('pools'); return; }
    p.note.show(`${pool.name} is now ${r.data && r.data.status ? r.data.status : status}.`, 'ok');
    announce(`${pool.name} is now ${status}`);
    await reload('pools', 'audit');
  });
  const load = async () => {
    let pools;
    try { pools = await listPools(); } catch (err) { p.note.show(err.message); return; }
    state.pools = pools;
    state.byId = new Map(pools.map((x) => [x.id, x]));
    if (!pools.length) {
      p.body.replaceChildren(h('p', { class: 'empty' }, 'No pools yet: add a pool block to the Caddyfile.'));
      heat.body.replaceChildren();
      return;
    }
    const rows = pools.map((pool) => h('tr', { class: 'op-pool', dataset: { slug: pool.slug, id: pool.id, status: pool.status } },
      h('th', { scope: 'row' }, pool.name, h('div', { class: 'small muted' }, pool.slug)),
      h('td', {}, statusBadge(pool.status)),
      h('td', { class: 'num' }, String(pool.seatsPerHour)),
      h('td', { class: 'num' }, String(pool.lanesInUse ?? 0)),
      h('td', { class: 'num op-revenue' }, money(pool.revenueThisMonth)),
      h('td', { class: 'num op-mrr' }, money(pool.monthlyRecurring)),
      h('td', {}, fundingCell(pool)),
      h('td', { class: 'op-actions' }, (poolActions[pool.status] || []).map(([label, status]) => {
        const b = h('button', { type: 'button', class: status === 'paused' ? 'small danger' : 'small primary', dataset: { action: status } }, label);
        b.addEventListener('click', () => act(pool, label, status, b));
        return b;
      }))));
    p.body.replaceChildren(scroller('Pools', h('table', { id: 'op-pools-table' },
      h('thead', {}, h('tr', {}, th('Pool'), th('Status'), th('Seats / hour', 'num'), th('Lanes in use', 'num'),
        th('Revenue this month', 'num'), th('Monthly recurring', 'num'), th('Funding'), th('Actions'))),
      h('tbody', {}, rows))));
    heat.body.replaceChildren(heatmap(pools));
  };
  return { node, load };
}

// heatLevel buckets sold / seats into the legend's six shades.
function heatLevel(sold, seats) {
  if (!sold) return 0;
  if (seats <= 0 || sold >= seats) return 5;
  return Math.min(4, Math.ceil((sold / seats) * 4));
}
const heatLegend = ['none sold', 'up to 25%', 'up to 50%', 'up to 75%', 'under 100%', 'sold out'];

function heatmap(pools) {
  const now = utcHour();
  const bands = h('tr', {}, h('td', {}), BLOCKS.map((b) => h('th', { scope: 'colgroup', colspan: 8, class: `band band-${b.block}` }, b.block)));
  const hours = h('tr', {}, h('th', { scope: 'col' }, h('span', { class: 'sr-only' }, 'Pool')),
    Array.from({ length: 24 }, (_, hr) => h('th', { scope: 'col', class: hr === now ? 'now' : null, title: hr === now ? 'now' : null }, pad2(hr))));
  const rows = pools.map((p) => h('tr', { dataset: { pool: p.slug } },
    h('th', { scope: 'row' }, p.name),
    Array.from({ length: 24 }, (_, hr) => {
      const sold = (p.soldPerHour || [])[hr] || 0;
      const served = (p.servedPerHour || [])[hr] || 0;
      const label = `${blockOf(hr)} ${pad2(hr)}:00 UTC: ${sold} of ${p.seatsPerHour} seats sold · ${served} request${served === 1 ? '' : 's'} served today`;
      return h('td', { class: `heat heat-${heatLevel(sold, p.seatsPerHour)}${hr === now ? ' now' : ''}`, title: label,
        dataset: { hour: hr, pool: p.slug, sold, seats: p.seatsPerHour, served } }, h('span', { 'aria-hidden': 'true' }, sold ? String(sold) : ''),
      served ? h('span', { class: 'op-served', 'aria-hidden': 'true' }, '•') : null,
      h('span', { class: 'sr-only' }, label));
    })));
  const legend = h('p', { class: 'legend small', id: 'op-heatmap-legend' }, 'Share of the hour\'s seats sold:',
    heatLegend.map((text, i) => h('span', { class: 'legend-item' }, h('span', { class: `key heat heat-${i}`, 'aria-hidden': 'true' }), text)),
    h('span', { class: 'legend-item op-now-key' }, `· outlined: now (${pad2(now)}:00 UTC)`),
    h('span', { class: 'legend-item' }, '· •: requests served today'));
  return h('div', {},
    scroller('Seats sold per UTC hour', h('table', { id: 'op-heatmap', class: 'op-heatmap' },
      h('caption', { class: 'sr-only' }, 'Seats sold per pool and UTC hour'), h('thead', {}, bands, hours), h('tbody', {}, rows))),
    legend,
    h('p', { class: 'small muted' }, 'Counts active, waiting-for-key and past-due subscriptions; pledges count toward funding instead.'));
}

// ---- Orders ------------------------------------------------------------------

const waiting = {
  pending_key: 'Paid: deliver the key',
  incomplete: 'Waiting for the buyer to confirm payment (3-D Secure)',
  past_due: 'A renewal failed: waiting for a card that pays',
};

function subAmount(s) {
  return `${money(s.periodAmount)} / ${s.billingCycle === 'year' ? 'year' : 'month'}`;
}

function blocksText(s) {
  const blocks = s.blocks || [];
  if (!blocks.length) return '—';
  return [blocks.join(', '), h('div', { class: 'small muted nowrap' }, hoursText(blocks.flatMap(hoursOf)))];
}

function ordersPanel(state, reload) {
  const p = panel('op-orders', 'Orders', 'Subscriptions waiting for you or for their buyer, newest first.');
  const filter = h('select', { id: 'op-orders-status' },
    h('option', { value: '' }, 'Everything waiting'),
    Object.keys(waiting).map((s) => h('option', { value: s }, s.replace('_', ' '))));
  const controls = h('div', { class: 'row op-filters' }, field('Show', filter));
  const list = h('div', {});
  p.body.append(controls, list);
  const deliver = (s, btn) => busy(btn, async () => {
    p.note.clear();
    const r = await post(`/api/operator/subscriptions/${encodeURIComponent(s.id)}/deliver`, {});
    if (!r.ok) { p.note.show(r.error); await reload('orders'); return; }
    const told = r.data.noticeSent ? `${s.email} was told by e-mail` : `the notice to ${s.email} could not be sent: tell them their key is ready on their account page`;
    p.note.show(`Key delivered for ${s.email} on ${s.pool}: the subscription is ${r.data.status}, ${told}.`, 'ok');
    announce(`Key delivered for ${s.email}`);
    await reload('orders', 'pools', 'audit');
  });
  const load = async () => {
    const statuses = filter.value ? [filter.value] : Object.keys(waiting);
    let rows;
    try {
      const pages = await Promise.all(statuses.map((st) => page(`/api/operator/subscriptions?status=${st}&limit=200`)));
      rows = pages.flatMap((x) => x.data).sort((a, b) => String(b.createdAt).localeCompare(String(a.createdAt)));
    } catch (err) { p.note.show(err.message); return; }
    if (!rows.length) {
      list.replaceChildren(h('p', { class: 'empty' }, filter.value ? `No ${filter.value.replace('_', ' ')} subscriptions.` : 'Nothing is waiting.'));
      return;
    }
    list.replaceChildren(scroller('Orders', h('table', { id: 'op-orders-table' },
      h('thead', {}, h('tr', {}, th('Ordered (UTC)'), th('Buyer'), th('Pool'), th('Blocks'), th('Seats', 'num'), th('Amount', 'num'), th('Status'), th(''))),
      h('tbody', {}, rows.map((s) => {
        let action = h('span', { class: 'small muted' }, waiting[s.status] || '');
        if (s.status === 'pending_key') {
          const b = h('button', { type: 'button', class: 'small primary op-deliver' }, 'Deliver');
          b.addEventListener('click', () => deliver(s, b));
          action = h('span', {}, b, h('div', { class: 'small muted' }, waiting.pending_key));
        }
        return h('tr', { class: 'op-order', dataset: { id: s.id, status: s.status } },
          h('td', { class: 'nowrap' }, utc(s.createdAt, false)), h('td', {}, s.email), h('td', {}, poolName(state, s)),
          h('td', {}, blocksText(s)), h('td', { class: 'num' }, String(s.quantity)), h('td', { class: 'num nowrap' }, subAmount(s)),
          h('td', {}, statusBadge(s.status)), h('td', {}, action));
      })))));
  };
  filter.addEventListener('change', () => { p.note.clear(); load(); });
  return { node: p.node, load };
}

const poolName = (state, s) => (state.byId.get(s.poolId) || {}).name || s.pool;

// ---- Subscribers -----------------------------------------------------------------

function subscribersPanel(state, reload) {
  const p = panel('op-subscribers', 'Subscribers', 'Find a buyer by e-mail address: their subscriptions, keys and cancellations.');
  const email = h('input', { id: 'op-sub-email', type: 'email', autocomplete: 'off', placeholder: 'ann@example.com' });
  const submit = h('button', { type: 'submit', id: 'op-sub-submit', class: 'primary' }, 'Search');
  const form = h('form', { id: 'op-sub-search', class: 'op-search', novalidate: true, role: 'search' },
    field('Buyer\'s e-mail address', email), submit);
  const results = h('div', { id: 'op-sub-results' });
  p.body.append(form, results);
  let shown = '';
  const cancel = (s, atPeriodEnd, btn) => busy(btn, async () => {
    p.note.clear();
    const text = atPeriodEnd
      ? `Cancel ${s.email}'s ${s.pool} subscription at the end of its period (${utc(s.currentPeriodEnd)})? The key works until then; it does not renew. Nothing is refunded.`
      : `Cancel ${s.email}'s ${s.pool} subscription now? Its seats are freed and its key stops working at once. Nothing is refunded.`;
    const ok = await confirmDialog(s.status === 'pledged' ? 'Withdraw this pledge?' : (atPeriodEnd ? 'Cancel at period end?' : 'Cancel now?'),
      s.status === 'pledged' ? `Withdraw ${s.email}'s pledge on ${s.pool}? Nothing was charged.` : text,
      s.status === 'pledged' ? 'Withdraw pledge' : (atPeriodEnd ? 'Cancel at period end' : 'Cancel now'), 'Keep it');
    if (!ok) return;
    const r = await post(`/api/operator/subscriptions/${encodeURIComponent(s.id)}/cancel`, { atPeriodEnd });
    if (!r.ok) { p.note.show(r.error); await reload('subscribers'); return; }
    p.note.show(r.data.withdrawn ? `The pledge of ${s.email} on ${s.pool} is withdrawn.`
      : atPeriodEnd ? `${s.email}'s ${s.pool} subscription ends ${utc(r.data.currentPeriodEnd)}; it will not renew.`
        : `${s.email}'s ${s.pool} subscription is canceled: seats freed, key revoked.`, 'ok');
    announce('Subscription canceled');
    await reload('subscribers', 'orders', 'pools', 'audit');
  });
  const revoke = (s, btn) => busy(btn, async () => {
    p.note.clear();
    const ok = await confirmDialog('Revoke this key?',
      `Revoke the key of ${s.email}'s ${s.pool} subscription? It stops working at once; the subscription stays active and keeps its seats. Nothing is refunded. The buyer can turn the key back on from their page.`,
      'Revoke key', 'Keep it');
    if (!ok) return;
    const r = await post(`/api/operator/keys/${encodeURIComponent(s.keyId)}/revoke`, {});
    if (!r.ok) { p.note.show(r.error); await reload('subscribers'); return; }
    p.note.show(r.data.changed ? `The key of ${s.email}'s ${s.pool} subscription is revoked.`
      : `The key of ${s.email}'s ${s.pool} subscription was already revoked.`, 'ok');
    announce('Key revoked');
    await reload('subscribers', 'audit');
  });
  const load = async () => {
    if (!shown) { results.replaceChildren(); return; }
    let rows;
    try { rows = (await page(`/api/operator/subscriptions?email=${encodeURIComponent(shown)}&limit=200`)).data; } catch (err) { p.note.show(err.message); return; }
    if (!rows.length) { results.replaceChildren(h('p', { class: 'empty' }, `No subscriptions for ${shown}.`)); return; }
    results.replaceChildren(h('h3', {}, `${rows[0].email}: ${rows.length} subscription${rows.length === 1 ? '' : 's'}`),
      scroller('Subscriptions', h('table', { id: 'op-subs-table' },
        h('thead', {}, h('tr', {}, th('Pool'), th('Status'), th('Blocks'), th('Seats', 'num'), th('Amount', 'num'), th('Period ends (UTC)'), th('Key'), th('Actions'))),
        h('tbody', {}, rows.map((s) => {
          const actions = h('td', { class: 'op-actions' });
          if (s.status === 'pledged') {
            const b = h('button', { type: 'button', class: 'small danger' }, 'Withdraw pledge');
            b.addEventListener('click', () => cancel(s, false, b));
            actions.append(b);
          } else if (['active', 'pending_key', 'past_due'].includes(s.status)) {
            if (!s.cancelAtPeriodEnd) {
              const end = h('button', { type: 'button', class: 'small ghost' }, 'Cancel at period end');
              end.addEventListener('click', () => cancel(s, true, end));
              actions.append(end);
            }
            const now = h('button', { type: 'button', class: 'small danger' }, 'Cancel now');
            now.addEventListener('click', () => cancel(s, false, now));
            actions.append(now);
          }
          if (s.keyId && s.keyActive) {
            const rv = h('button', { type: 'button', class: 'small danger op-revoke' }, 'Revoke key');
            rv.addEventListener('click', () => revoke(s, rv));
            actions.append(rv);
          }
          return h('tr', { class: 'op-sub', dataset: { id: s.id, status: s.status } },
            h('th', { scope: 'row' }, poolName(state, s)),
            h('td', {}, statusBadge(s.status), s.cancelAtPeriodEnd ? h('div', { class: 'small warn-text' }, 'ends at period end') : null),
            h('td', {}, blocksText(s)), h('td', { class: 'num' }, String(s.quantity)), h('td', { class: 'num nowrap' }, subAmount(s)),
            h('td', { class: 'nowrap' }, utc(s.currentPeriodEnd, false)),
            h('td', {}, !s.keyId ? h('span', { class: 'muted' }, 'none')
              : h('span', { title: `key id ${s.keyId}` }, s.keyActive ? 'Active' : 'Revoked')),
            actions);
        })))));
  };
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    p.note.clear();
    const v = email.value.trim();
    if (!v) { p.note.show('Enter the buyer\'s e-mail address.'); email.focus(); return; }
    shown = v;
    busy(submit, load);
  });
  return { node: p.node, load };
}

// ---- Ledger ----------------------------------------------------------------------

const kinds = { purchase: 'Purchase', renewal: 'Renewal', pledge: 'Pledge', recovery: 'Past-due payment' };
const chargeStatus = { succeeded: 'Paid', refunded: 'Refunded', partially_refunded: 'Partly refunded' };

// dayStart is the RFC 3339 start of a yyyy-mm-dd UTC day, plus `days`.
function dayStart(day, days = 0) {
  const d = new Date(`${day}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + days);
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

// refundDialog asks how much of charge c to refund (default: what remains); resolves the amount, or null when kept.
function refundDialog(c, rest) {
  let d = document.getElementById('op-refund-dialog');
  if (!d) {
    d = h('dialog', { id: 'op-refund-dialog', 'aria-labelledby': 'op-refund-title' },
      h('form', { method: 'dialog', novalidate: true },
        h('h2', { id: 'op-refund-title' }, 'Refund this charge?'),
        h('p', { id: 'op-refund-text' }),
        field('Amount to refund (USD)', h('input', { id: 'op-refund-amount', type: 'text', inputmode: 'decimal', autocomplete: 'off' })),
        h('p', { id: 'op-refund-error', class: 'error', role: 'alert', hidden: true }),
        h('div', { class: 'row end' },
          h('button', { type: 'submit', value: 'cancel', id: 'op-refund-cancel', class: 'ghost' }, 'Keep it'),
          h('button', { type: 'submit', value: 'ok', id: 'op-refund-ok', class: 'danger' }, 'Refund'))));
    document.body.append(d);
    d.querySelector('#op-refund-amount').addEventListener('input', () => { d.querySelector('#op-refund-error').hidden = true; });
  }
  const input = d.querySelector('#op-refund-amount');
  const error = d.querySelector('#op-refund-error');
  d.querySelector('#op-refund-text').textContent = `Receipt ${c.number}, ${c.email}: ${money(c.amount)} paid, ${money(fmtDec(rest))} not refunded yet. `
    + 'The money goes back to the buyer\'s card through the processor. The subscription is not changed: cancel it under Subscribers if it should end.';
  input.value = fmtDec(rest);
  error.textContent = '';
  error.hidden = true;
  d.returnValue = '';
  return new Promise((resolve) => {
    const check = (ev) => {
      if (ev.submitter?.value !== 'ok') return;
      const v = input.value.trim().replace(/^\$/, '');
      let why = '';
      if (!/^\d+(\.\d{1,2})?$/.test(v)) why = 'Enter an amount in dollars with at most two decimals, such as 12.50.';
      else if (dec(v).n === 0n) why = 'Enter an amount more than 0.';
      else if (sub(rest, dec(v)).n < 0n) why = `At most ${money(fmtDec(rest))} remains to refund.`;
      if (why) { ev.preventDefault(); error.textContent = why; error.hidden = false; input.focus(); }
    };
    const form = d.querySelector('form');
    form.addEventListener('submit', check);
    d.addEventListener('close', () => {
      form.removeEventListener('submit', check);
      resolve(d.returnValue === 'ok' ? input.value.trim().replace(/^\$/, '') : null);
    }, { once: true });
    d.showModal();
    input.select();
  });
}

function ledgerPanel(state, reload) {
  const p = panel('op-ledger', 'Ledger', 'Every charge on this site, newest first. Days are UTC days; both ends are included.');
  const today = new Date();
  const first = `${today.getUTCFullYear()}-${pad2(today.getUTCMonth() + 1)}-01`;
  const from = h('input', { id: 'op-ledger-from', type: 'date', value: first });
  const to = h('input', { id: 'op-ledger-to', type: 'date' });
  const submit = h('button', { type: 'submit', id: 'op-ledger-submit', class: 'primary' }, 'Show charges');
  const csv = h('a', { id: 'op-ledger-csv', class: 'button ghost', download: 'timeblock-charges.csv' }, 'Download CSV');
  const form = h('form', { id: 'op-ledger-form', class: 'op-search', novalidate: true },
    field('From (UTC day)', from), field('To (UTC day, included)', to), submit, csv);
  const totals = h('p', { id: 'op-ledger-totals', class: 'small' });
  const tbody = h('tbody', {});
  const table = scroller('Charges', h('table', { id: 'op-ledger-table' },
    h('thead', {}, h('tr', {}, th('Receipt'), th('Date (UTC)'), th('Buyer'), th('What'), th('Amount', 'num'), th('Refunded', 'num'), th('Status'), th('Actions'))),
    tbody));
  const empty = h('p', { class: 'empty' }, 'No charges in these days.');
  const more = h('button', { type: 'button', class: 'ghost', id: 'op-ledger-more' }, 'Show older charges');
  p.body.append(form, totals, table, empty, h('div', { class: 'row' }, more));
  let cursor = null;
  let sums = null;
  const refund = (c, rest, btn) => busy(btn, async () => {
    p.note.clear();
    const amount = await refundDialog(c, rest);
    if (amount === null) return;
    const r = await post(`/api/operator/charges/${encodeURIComponent(c.id)}/refund`, { amount });
    if (!r.ok) { p.note.show(`Receipt ${c.number} was not refunded: ${r.error}`); await reload('ledger'); return; }
    p.note.show(`Refunded ${money(amount)} of receipt ${c.number} to ${c.email}; ${money(r.data.refundedAmount)} of ${money(r.data.amount)} is refunded in all. `
      + 'The subscription is unchanged.', 'ok');
    announce('Charge refunded');
    await reload('ledger', 'pools', 'audit');
  });
  const refundButton = (c) => {
    const rest = sub(dec(c.amount), dec(c.refundedAmount || '0'));
    if (rest.n <= 0n) return null;
    const b = h('button', { type: 'button', class: 'small danger op-refund', 'aria-label': `Refund receipt ${c.number}` }, 'Refund');
    b.addEventListener('click', () => refund(c, rest, b));
    return b;
  };
  const query = () => {
    const q = new URLSearchParams();
    if (from.value) q.set('from', dayStart(from.value));
    if (to.value) q.set('to', dayStart(to.value, 1));
    return q;
  };
  const append = (rows) => {
    for (const c of rows) {
      sums.count++;
      sums.taken = add(sums.taken, dec(c.amount));
      sums.refunded = add(sums.refunded, dec(c.refundedAmount || '0'));
      const pool = state.byId.get(c.poolId);
      tbody.append(h('tr', { class: 'op-charge', dataset: { id: c.id } },
        h('td', { class: 'nowrap' }, c.number),
        h('td', { class: 'nowrap' }, utc(c.createdAt, false)),
        h('td', {}, c.email),
        h('td', {}, `${kinds[c.kind] || c.kind}${pool ? ` · ${pool.name}` : ''}`, h('div', { class: 'small muted' }, c.description)),
        h('td', { class: 'num' }, money(c.amount)),
        h('td', { class: 'num' }, c.refundedAmount && dec(c.refundedAmount).n !== 0n ? money(c.refundedAmount) : '—'),
        h('td', {}, c.status === 'succeeded' ? chargeStatus.succeeded : badge(chargeStatus[c.status] || c.status, 'warn')),
        h('td', { class: 'op-actions' }, refundButton(c))));
    }
    const net = sub(sums.taken, sums.refunded);
    totals.textContent = `${sums.count} charge${sums.count === 1 ? '' : 's'} shown: ${money(fmtDec(sums.taken))} taken, ${money(fmtDec(sums.refunded))} refunded, ${money(fmtDec(net))} net.`;
    table.hidden = sums.count === 0;
    empty.hidden = sums.count !== 0;
  };
  const load = async () => {
    const q = query();
    const c = new URLSearchParams(q);
    c.set('format', 'csv');
    csv.href = `/api/operator/charges?${c}`;
    let first;
    try { first = await page(`/api/operator/charges?${q}`); } catch (err) { p.note.show(err.message); return; }
    tbody.replaceChildren();
    sums = { count: 0, taken: dec('0'), refunded: dec('0') };
    append(first.data);
    cursor = first.nextCursor;
    more.hidden = !cursor;
  };
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    p.note.clear();
    if (from.value && to.value && to.value < from.value) { p.note.show('The "To" day is before the "From" day: pick a later "To" day.'); return; }
    busy(submit, load);
  });
  more.addEventListener('click', () => busy(more, async () => {
    const q = query();
    q.set('before', cursor);
    try {
      const next = await page(`/api/operator/charges?${q}`);
      append(next.data);
      cursor = next.nextCursor;
      more.hidden = !cursor;
    } catch (err) { p.note.show(err.message); }
  }));
  return { node: p.node, load };
}

// ---- Audit log -------------------------------------------------------------------

const auditActions = { 'subscription.deliver': 'Delivered a key', 'subscription.cancel': 'Canceled a subscription', 'pool.status': 'Changed a pool\'s status', 'charge.refund': 'Refunded a charge', 'key.revoke': 'Revoked a key' };

function auditPanel(state) {
  const p = panel('op-audit', 'Audit log', 'Every operator action, from this page or the admin API, newest first.');
  const tbody = h('tbody', {});
  const more = h('button', { type: 'button', class: 'ghost', id: 'op-audit-more' }, 'Show older entries');
  const empty = h('p', { class: 'empty' }, 'No operator actions yet.');
  const table = scroller('Audit log', h('table', { id: 'op-audit-table' },
    h('thead', {}, h('tr', {}, th('When (UTC)'), th('Who'), th('Action'), th('Target'), th('Detail'))), tbody));
  p.body.append(table, empty, h('div', { class: 'row' }, more));
  let cursor = null;
  const append = (rows) => {
    for (const e of rows) {
      const pool = state.byId.get(e.target);
      tbody.append(h('tr', { class: 'op-audit-row', dataset: { id: e.id, action: e.action } },
        h('td', { class: 'nowrap' }, utc(e.at, false)), h('td', {}, e.actor), h('td', {}, auditActions[e.action] || e.action),
        h('td', {}, pool ? pool.name : h('code', {}, e.target)), h('td', {}, e.detail)));
    }
    table.hidden = !tbody.children.length;
    empty.hidden = !!tbody.children.length;
  };
  const load = async () => {
    let first;
    try { first = await page('/api/operator/audit'); } catch (err) { p.note.show(err.message); return; }
    tbody.replaceChildren();
    append(first.data);
    cursor = first.nextCursor;
    more.hidden = !cursor;
  };
  more.addEventListener('click', () => busy(more, async () => {
    try {
      const next = await page(`/api/operator/audit?before=${encodeURIComponent(cursor)}`);
      append(next.data);
      cursor = next.nextCursor;
      more.hidden = !cursor;
    } catch (err) { p.note.show(err.message); }
  }));
  return { node: p.node, load };
}
