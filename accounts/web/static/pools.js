// Pools: the list, one pool's 24-hour seat map, and buying seats.

import {
  api, get, h, field, msg, busy, announce, badge, statusBadge, secret, newIdempotencyKey,
  price, usd, BLOCKS, hoursOf, utcHour, pad2, blockLabel, nextOpening, when, inDuration, fmtDate,
} from './lib.js';
import { cardForm, cardText, hasTestBank, testBank } from './billing.js';

// freeSeats counts, per block, the seats free in every hour of it (a purchase needs each hour).
function freeSeats(detail) {
  const free = {};
  for (const b of detail.blocks) {
    const perHour = hoursOf(b.block).map((hr) =>
      detail.hourSlots.filter((s) => s.hour === hr && s.status === 'available').length);
    free[b.block] = Math.min(...perHour);
  }
  return free;
}

const openNow = (block) => BLOCKS.find((b) => b.block === block).start === Math.floor(utcHour() / 8) * 8;

export async function renderPools(ctx, view) {
  const pools = await get('/api/pools');
  if (!pools.length) {
    view.fill('pools', h('p', { class: 'empty' }, 'No pool is on sale right now. Come back later.'));
    return;
  }
  // The list has no occupancy; each detail does (hourSlots).
  const details = await Promise.all(pools.map((p) => api('GET', `/api/pools/${encodeURIComponent(p.slug)}`)));
  view.fill('pools', h('div', { class: 'grid' }, pools.map((p, i) =>
    poolCard(p, details[i].ok ? freeSeats(details[i].data) : null))));
}

// pledging reports whether subscribing to the pool records a pledge (charged when it goes live).
const pledging = (p) => p.status === 'funding' || p.status === 'activating';

// fundingLine shows how far a pool's funding is: pledged of the goal, the deadline.
function fundingLine(p) {
  if (!pledging(p)) return null;
  const goal = Number(p.fundingGoal);
  const pct = goal > 0 ? Math.min(100, Math.floor((Number(p.fundingPledged) / goal) * 100)) : 0;
  return h('div', { class: 'funding', dataset: { pledged: p.fundingPledged, goal: p.fundingGoal } },
    goal > 0 ? h('progress', { max: '100', value: String(pct), 'aria-label': 'Funding progress' }) : null,
    h('p', { class: 'small' },
      `${usd(p.fundingPledged)} of ${usd(p.fundingGoal)} a month pledged`, goal > 0 ? ` (${pct}%)` : '',
      ` · ${p.pledgedSlots} hour slot${p.pledgedSlots === 1 ? '' : 's'} held`,
      p.fundingDeadline ? ` · until ${when(p.fundingDeadline)}` : '', '. ',
      p.status === 'activating'
        ? 'Funded: the model server is being set up; pledges are charged when it goes live.'
        : 'Pledge seats now: nothing is charged unless the pool goes live.'));
}

function poolCard(p, free) {
  const rows = p.blocks.map((b) => h('tr', {},
    h('th', { scope: 'row' }, b.block, openNow(b.block) ? badge('open now', 'ok') : null),
    h('td', {}, `${pad2(b.startHour)}–${pad2(b.endHour + 1)} UTC`),
    h('td', { class: 'num' }, usd(b.monthlyPrice)),
    h('td', { class: 'num' }, free ? `${free[b.block]} of ${p.seatsPerHour}` : '—')));
  return h('article', { class: 'card pool', dataset: { id: p.id } },
    h('header', { class: 'card-head' }, h('h2', {}, p.modelName), statusBadge(p.status)),
    h('p', {}, h('code', {}, p.modelId)),
    p.description ? h('p', { class: 'muted' }, p.description) : null,
    h('table', { class: 'seats-free' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Block'), h('th', { scope: 'col' }, 'Hours'),
        h('th', { scope: 'col', class: 'num' }, 'Seat / month'), h('th', { scope: 'col', class: 'num' }, 'Seats free'))),
      h('tbody', {}, rows)),
    fundingLine(p),
    h('p', { class: 'small muted' },
      Number(p.annualDiscount) > 0 ? `${Math.round(Number(p.annualDiscount) * 100)}% off when billed yearly. ` : '',
      p.manualProvisioning ? 'Keys are delivered by hand, within 24 hours.' : 'Keys are ready at once.'),
    h('a', { class: 'button primary', href: `#/pools/${encodeURIComponent(p.slug)}` }, pledging(p) ? 'View hours & pledge' : 'View hours & buy'));
}

export async function renderPoolDetail(ctx, view, slug) {
  const [pool, billing, terms, mine] = await Promise.all([
    get(`/api/pools/${encodeURIComponent(slug)}`),
    get('/api/billing/status'),
    get('/api/pools/disclosure'),
    api('GET', `/api/pools/${encodeURIComponent(slug)}/my-subscriptions`),
  ]);
  const mySeats = seatsOf(mine.ok ? mine.data : []);

  const map = h('div', {}, seatMap(pool, mySeats));
  const funding = h('div', { id: 'pool-funding' }, fundingLine(pool));
  view.fill('pool-detail',
    h('header', { class: 'card-head' }, h('h1', {}, pool.modelName), statusBadge(pool.status)),
    h('p', {}, h('code', {}, pool.modelId), pool.description ? ` — ${pool.description}` : ''),
    funding,
    openNowText(pool),
    map);
  document.getElementById('buy-heading').textContent = pledging(pool) ? 'Pledge seats' : 'Buy seats';
  // After a purchase (or a pledge) the map shows the new seats as yours.
  const refreshMap = async () => {
    const [p, m] = await Promise.all([api('GET', `/api/pools/${encodeURIComponent(slug)}`), api('GET', `/api/pools/${encodeURIComponent(slug)}/my-subscriptions`)]);
    if (!p.ok || !m.ok || view.stale()) return;
    map.replaceChildren(seatMap(p.data, seatsOf(m.data)));
    funding.replaceChildren(...[fundingLine(p.data)].filter(Boolean));
  };
  view.fill('buy', buyForm(ctx, view, pool, billing, terms, refreshMap));
}

const seatsOf = (subs) => new Set(subs.flatMap((s) => s.hours.map((x) => `${x.hour}/${x.slotIndex}`)));

function openNowText(pool) {
  const hr = utcHour();
  const b = BLOCKS[Math.floor(hr / 8)];
  const sold = pool.blocks.some((x) => x.block === b.block);
  return h('p', { id: 'pool-open-now', class: 'now-line' },
    `It is ${pad2(hr)}:00–${pad2(hr + 1)}:00 UTC now: the ${b.block} block is open`,
    sold ? '.' : ', which this pool does not sell.');
}

// seatMap draws every seat (rows) of every UTC hour (columns): free, taken or yours.
function seatMap(pool, mySeats) {
  const now = utcHour();
  const slots = new Map(pool.hourSlots.map((s) => [`${s.hour}/${s.slotIndex}`, s]));
  const hours = [...Array(24).keys()];
  const head1 = h('tr', {}, h('td', {}), BLOCKS.map((b) =>
    h('th', { scope: 'colgroup', colspan: '8', class: `band band-${b.block}${b.start === Math.floor(now / 8) * 8 ? ' open' : ''}` },
      b.block, pool.blocks.some((x) => x.block === b.block) ? '' : ' (not sold)')));
  const head2 = h('tr', {}, h('th', { scope: 'col' }, 'Seat'), hours.map((hr) =>
    h('th', { scope: 'col', class: hr === now ? 'now' : null, title: hr === now ? 'current UTC hour' : null }, pad2(hr))));
  const body = [...Array(pool.seatsPerHour).keys()].map((seat) => h('tr', {},
    h('th', { scope: 'row' }, String(seat + 1)),
    hours.map((hr) => {
      const s = slots.get(`${hr}/${seat}`);
      const status = !s ? 'unsold' : mySeats.has(`${hr}/${seat}`) ? 'mine' : s.status === 'available' ? 'free' : 'taken';
      const label = { unsold: 'not sold', mine: 'yours', free: 'free', taken: 'taken' }[status];
      return h('td', { class: `slot ${status}${hr === now ? ' now' : ''}`, title: `${pad2(hr)}:00 UTC, seat ${seat + 1}: ${label}`, dataset: { hour: hr, seat, status } },
        h('span', { class: 'sr-only' }, label));
    })));
  return h('figure', { class: 'map' },
    h('div', { class: 'scroll', tabindex: '0', role: 'region', 'aria-label': 'Seat map, scrolls sideways' },
      h('table', { id: 'pool-map' },
        h('caption', { class: 'sr-only' }, `Seats of ${pool.modelName} by UTC hour`),
        h('thead', {}, head1, head2), h('tbody', {}, body))),
    h('figcaption', { class: 'legend small' },
      h('span', { class: 'key free' }), 'free ', h('span', { class: 'key taken' }), 'taken ',
      h('span', { class: 'key mine' }), 'yours ', h('span', { class: 'key unsold' }), 'not sold · ',
      'the highlighted column is the current UTC hour'));
}

// ---- Buying ------------------------------------------------------------------

function buyForm(ctx, view, pool, billing, terms, refreshMap) {
  if (pool.status === 'paused') return h('p', { class: 'empty' }, 'This pool is paused: it takes no new subscriptions or pledges for now. Existing keys keep working.');
  if (pool.status !== 'active' && !pledging(pool)) return h('p', { class: 'empty' }, `This pool is ${pool.status}; it does not take subscriptions now.`);
  const pledge = pledging(pool);
  const free = freeSeats(pool);
  const note = msg();
  const result = h('div', { id: 'buy-result', 'aria-live': 'polite' });
  let hasCard = billing.hasPaymentMethod;
  let attempt = null; // {key, body}: the Idempotency-Key is reused only to retry the same purchase

  // Step 1, the card: first when none is saved, else a summary with "Change card".
  const cardBox = h('div', { class: 'step' });
  const drawCard = (showForm) => {
    const onSaved = (data) => { hasCard = true; billing.paymentMethod = data.paymentMethod; drawCard(false); };
    cardBox.replaceChildren(h('h3', {}, '1. Card'),
      hasCard && !showForm
        ? h('p', {}, pledge ? `Charged when the pool goes live: ${cardText(billing.paymentMethod)}. ` : `Paying with ${cardText(billing.paymentMethod)}. `,
          h('button', { type: 'button', id: 'buy-change-card', class: 'link', onclick: () => drawCard(true) }, 'Change card'))
        : cardForm(ctx, 'card', onSaved, { intro: hasCard ? null : pledge
          ? 'Add a card first. Nothing is charged now: it is charged when the pool goes live, and for renewals.'
          : 'Add a card first. It is charged when you buy, and for renewals.' }));
  };
  drawCard(false);

  const checks = pool.blocks.map((b) => {
    const input = h('input', { type: 'checkbox', id: `buy-block-${b.block}`, name: 'blocks', value: b.block, disabled: free[b.block] < 1 });
    return h('div', { class: 'check' }, input, h('label', { for: input.id },
      h('strong', {}, blockLabel(b.block)), ` · ${usd(b.monthlyPrice)} / seat / month · `,
      free[b.block] < 1 ? 'sold out' : `${free[b.block]} seat${free[b.block] === 1 ? '' : 's'} free`));
  });
  const qty = h('input', { type: 'number', id: 'buy-quantity', min: 1, max: 20, step: 1, value: '1', inputmode: 'numeric' });
  const discount = Number(pool.annualDiscount) || 0;
  const cycles = [['month', 'Monthly'], ['year', discount > 0 ? `Yearly — ${Math.round(discount * 100 * 100) / 100}% off, paid up front` : 'Yearly, paid up front']]
    .map(([v, t]) => {
      const input = h('input', { type: 'radio', id: `buy-cycle-${v}`, name: 'cycle', value: v, checked: v === 'month' });
      return h('div', { class: 'check' }, input, h('label', { for: input.id }, t));
    });
  const monthly = h('strong', { id: 'buy-monthly' });
  const charge = h('strong', { id: 'buy-charge', class: 'big' });
  const chargeLabel = h('span');
  const opens = h('ul', { id: 'buy-opens', class: 'small' });
  const termsBox = h('input', { type: 'checkbox', id: 'buy-terms', required: true });
  const submit = h('button', { type: 'submit', id: 'buy-submit', class: 'primary big' }, pledge ? 'Pledge' : 'Buy');

  const form = h('form', { id: 'buy-form', novalidate: true },
    h('fieldset', {}, h('legend', {}, 'Blocks'), checks),
    field('Seats per block', qty, 'Each seat is one simultaneous request in every hour of the block (1–20).'),
    h('fieldset', {}, h('legend', {}, 'Billing'), cycles),
    h('div', { class: 'summary' },
      h('p', {}, 'Monthly price: ', monthly),
      h('p', {}, chargeLabel, charge),
      opens),
    pool.manualProvisioning ? h('p', { id: 'buy-manual', class: 'notice' },
      'The operator delivers the key for this pool by hand: usually within hours, always within 24 hours. You will get an e-mail when it is ready.') : null,
    h('div', { class: 'terms' },
      h('h4', {}, 'Purchase terms'),
      h('ul', {}, terms.bullets.map((t) => h('li', {}, t))),
      terms.termsUrl ? h('p', { class: 'small' }, h('a', { href: terms.termsUrl, target: '_blank', rel: 'noopener' }, 'Full terms')) : null,
      h('div', { class: 'check' }, termsBox, h('label', { for: 'buy-terms' }, terms.checkboxLabel))),
    h('div', { class: 'row' }, submit), note);

  const chosen = () => checks.map((c) => c.querySelector('input')).filter((i) => i.checked).map((i) => i.value);
  const cycle = () => form.querySelector('input[name=cycle]:checked').value;
  const quantity = () => Number(qty.value);

  const update = () => {
    const q = Number.isInteger(quantity()) && quantity() >= 1 && quantity() <= 20 ? quantity() : 1;
    const p = price(pool, chosen(), q, cycle());
    monthly.textContent = `${usd(p.monthly)} / month`;
    monthly.dataset.amount = p.monthly;
    charge.textContent = usd(p.charge);
    charge.dataset.amount = p.charge;
    chargeLabel.textContent = pledge
      ? (cycle() === 'year' ? 'Charged when the pool goes live, for 12 months: ' : 'Charged when the pool goes live, for the first month: ')
      : (cycle() === 'year' ? 'Charged today, for 12 months: ' : 'Charged today, for the first month: ');
    if (pledge) return opens.replaceChildren(h('li', {}, 'Nothing is charged now. Withdraw the pledge at any time until the pool goes live.'));
    // A chosen block that is closed right now: say when it opens.
    opens.replaceChildren(...chosen().map((b) => {
      const start = BLOCKS.find((x) => x.block === b).start;
      if (openNow(b)) return h('li', {}, `${b} is open now.`);
      const at = nextOpening(start);
      return h('li', {}, `${b} is closed right now; it opens at ${when(at)}, ${inDuration(at)}.`);
    }));
  };
  form.addEventListener('input', update);
  form.addEventListener('change', update);
  update();

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    note.clear();
    const blocks = chosen();
    if (!blocks.length) return note.show('Choose at least one block.');
    if (!Number.isInteger(quantity()) || quantity() < 1 || quantity() > 20) return note.show('Seats per block must be a whole number from 1 to 20.');
    if (!hasCard) return note.show('Save a card first (step 1), then buy.');
    if (!termsBox.checked) { termsBox.focus(); return note.show('Tick the purchase terms box to accept them.'); }
    const body = { blocks, quantity: quantity(), billingCycle: cycle(), acknowledgment: { version: terms.version } };
    const same = attempt && JSON.stringify(attempt.body) === JSON.stringify(body);
    if (!same) attempt = { key: newIdempotencyKey(), body };
    busy(submit, async () => {
      const r = await api('POST', `/api/pools/${encodeURIComponent(pool.slug)}/subscribe`, body, { 'Idempotency-Key': attempt.key });
      // Keep the key only for answers a retry may change (network, 5xx, "still being processed").
      const retryable = r.status === 0 || r.status >= 500 || (r.status === 409 && /still being processed/i.test(r.error));
      if (!retryable) attempt = null;
      if (r.ok) return purchased(ctx, view, r.data, result, form, refreshMap);
      if (r.status === 402 && r.data && r.data.status === 'incomplete') return needsAuth(ctx, view, r, result, form, refreshMap);
      if (r.status === 409 && r.data && r.data.version) {
        terms.version = r.data.version;
        termsBox.checked = false;
        return note.show(`${r.error} The purchase terms changed: read them again and tick the box.`);
      }
      if (r.status === 400 && /payment method|card/i.test(r.error)) { hasCard = false; drawCard(true); }
      if (r.status === 402) return note.show(`${r.error} Change the card (step 1) and try again.`);
      note.show(retryable ? `${r.error} Press Buy again to retry the same purchase: you will not be charged twice.` : r.error);
    });
  });

  return [cardBox, h('div', { class: 'step' }, h('h3', {}, '2. Seats'), form), result];
}

// purchased shows a bought subscription and its next step: create the key, or wait for the operator.
function purchased(ctx, view, sub, result, form, refreshMap) {
  form.hidden = true;
  refreshMap();
  if (sub.status === 'pledged') return pledged(view, sub, result, refreshMap);
  announce('Subscription bought');
  const next = sub.status === 'pending_key'
    ? h('p', { class: 'notice' }, 'The operator delivers the key for this pool by hand: usually within hours, always within 24 hours. You will get an e-mail; it then shows in Keys.')
    : keyStep(sub);
  result.replaceChildren(h('div', { class: 'card success' },
    h('h3', {}, 'You are subscribed'),
    h('p', {}, `${sub.blocks.join(' + ')} × ${sub.quantity}, ${sub.billingCycle === 'year' ? 'billed yearly' : 'billed monthly'}`,
      sub.amountCharged ? `; charged ${usd(sub.amountCharged)}` : '', `. Renews on ${fmtDate(sub.currentPeriodEnd)}.`),
    next,
    h('p', {}, h('a', { href: '#/subscriptions' }, 'My subscriptions'), ' · ', h('button', { type: 'button', class: 'link', onclick: () => view.rerender() }, 'Buy more'))));
}

// pledged shows a recorded pledge: nothing charged, what it will cost, and how to withdraw it.
function pledged(view, sub, result, refreshMap) {
  announce('Pledge recorded');
  const note = msg();
  const withdraw = h('button', { type: 'button', id: 'pledge-withdraw', class: 'ghost' }, 'Withdraw pledge');
  withdraw.addEventListener('click', () => busy(withdraw, async () => {
    const r = await api('DELETE', `/api/pools/${encodeURIComponent(sub.poolSlug)}/pledge`);
    if (!r.ok) return note.show(r.error);
    if (!r.data.withdrawn) {
      // The pool went live first: the pledge was charged and is a subscription now.
      withdraw.hidden = true;
      return note.show(`The pool went live before you withdrew: your pledge was charged and is now a subscription, set to end on ${fmtDate(r.data.currentPeriodEnd)}. Manage it in My subscriptions.`, 'warn');
    }
    announce('Pledge withdrawn');
    refreshMap();
    result.replaceChildren(h('div', { class: 'card' }, h('h3', {}, 'Pledge withdrawn'),
      h('p', {}, 'Its seats are free again. Nothing was charged.'),
      h('button', { type: 'button', class: 'link', onclick: () => view.rerender() }, 'Pledge again')));
  }));
  result.replaceChildren(h('div', { class: 'card success', id: 'pledge-result' },
    h('h3', {}, 'Your pledge is recorded'),
    h('p', {}, `${sub.blocks.join(' + ')} × ${sub.quantity}, ${sub.billingCycle === 'year' ? 'billed yearly' : 'billed monthly'}. `,
      `Nothing is charged now; when the pool goes live your card is charged ${usd(sub.amountDue)} and you can create your key. We tell you by e-mail.`),
    h('div', { class: 'row' }, withdraw), note,
    h('p', {}, h('a', { href: '#/subscriptions' }, 'My subscriptions'))));
}

function keyStep(sub) {
  const note = msg();
  const box = h('div', {});
  const btn = h('button', { type: 'button', id: 'buy-create-key', class: 'primary' }, 'Create key');
  btn.addEventListener('click', () => busy(btn, async () => {
    const r = await api('POST', '/api/keys/subscription', { subscriptionId: sub.id });
    if (!r.ok) return note.show(r.error);
    btn.hidden = true;
    announce('Key created');
    box.replaceChildren(h('p', {}, 'Your key: ', secret(r.data.apiKey)),
      h('p', {}, h('a', { href: `#/connect/${encodeURIComponent(r.data.id)}` }, 'Connect your agent with it →')));
  }));
  return h('div', {}, h('p', {}, 'Next: create the key your tools will use. No key is made until you ask.'), btn, note, box);
}

// needsAuth finishes a purchase whose bank asks for 3-D Secure (402 incomplete): Stripe.js shows the bank's page,
// or, with the built-in test processor, the test bank's dialog; then the purchase is confirmed. Until then it
// holds the seats unpaid, and "Cancel purchase" releases them.
async function needsAuth(ctx, view, r, result, form, refreshMap) {
  const data = r.data;
  const id = encodeURIComponent(data.subscriptionId);
  const confirmNote = msg();
  form.hidden = true;
  // ended shows a purchase that ended unpaid; the form buys again.
  const ended = (title, text) => {
    refreshMap();
    result.replaceChildren(h('div', { class: 'card notice', id: 'buy-unpaid' }, h('h3', {}, title), h('p', {}, text)));
    form.hidden = false;
    result.scrollIntoView({ block: 'nearest' });
  };
  const confirm = async () => {
    const c = await api('POST', `/api/subscriptions/${id}/confirm`);
    if (c.ok) return purchased(ctx, view, c.data, result, form, refreshMap);
    if (c.status === 402 && !(c.data && c.data.status === 'incomplete')) {
      announce('Payment not confirmed');
      return ended('Payment not confirmed', 'Your bank did not confirm the payment (3-D Secure), so nothing was charged and the seats are free again. Press Buy to try again, or change the card.');
    }
    confirmNote.show(c.error, c.data && c.data.status === 'incomplete' ? 'warn' : 'error');
  };
  const bank = async () => {
    const b = await testBank(data);
    if (b === null) return confirmNote.show('The bank step was closed: the payment still waits. Open it again, or cancel the purchase.', 'warn');
    if (!b.ok) return confirmNote.show(b.error);
    return confirm();
  };
  const cancel = async () => {
    const c = await api('POST', `/api/subscriptions/${id}/cancel`);
    if (!c.ok) return confirmNote.show(c.error);
    announce('Purchase canceled');
    ended('Purchase canceled', c.data.refunded
      ? 'Your bank had already confirmed the payment: it is refunded in full. The seats are free again.'
      : 'Nothing was charged and the seats are free again.');
  };
  const btn = h('button', { type: 'button', id: 'buy-confirm', class: 'primary' }, 'Confirm payment');
  btn.addEventListener('click', () => busy(btn, confirm));
  const bankBtn = hasTestBank(ctx, data) ? h('button', { type: 'button', id: 'buy-test-bank', class: 'primary' }, 'Open the test bank') : null;
  if (bankBtn) bankBtn.addEventListener('click', () => busy(bankBtn, bank));
  const cancelBtn = h('button', { type: 'button', id: 'buy-cancel', class: 'ghost' }, 'Cancel purchase');
  cancelBtn.addEventListener('click', () => busy(cancelBtn, cancel));
  result.replaceChildren(h('div', { class: 'card notice', id: 'buy-waiting' },
    h('h3', {}, 'Your bank asks you to confirm this payment'),
    h('p', {}, `Nothing is charged yet (${usd(data.amount)}). The seats are held until ${when(data.holdExpiresAt)}. `,
      bankBtn ? 'Confirm it in the test bank, or cancel the purchase to release the seats now.'
        : 'Once your bank has confirmed, press "Confirm payment"; or cancel the purchase to release the seats now.'),
    h('div', { class: 'row' }, bankBtn || btn, cancelBtn), confirmNote));
  const stripe = await ctx.stripe();
  if (stripe) {
    const res = await stripe.confirmCardPayment(data.clientSecret);
    if (res.error) return confirmNote.show(`${res.error.message} Nothing was charged; the seats are held until ${when(data.holdExpiresAt)}.`);
    return confirm();
  }
  if (bankBtn) return busy(bankBtn, bank);
  btn.focus();
}
