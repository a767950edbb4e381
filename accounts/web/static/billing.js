// The card step: save a card with the test processor's cards or Stripe Elements, 3-D Secure included.

import { api, h, field, msg, busy, announce, usd } from './lib.js';

// The built-in test processor's cards (accounts/billing/testprocessor.go).
const TEST_CARDS = [
  ['pm_card_visa', 'Visa •••• 4242 — charges succeed'],
  ['pm_card_mastercard', 'Mastercard •••• 4444 — charges succeed'],
  ['pm_card_chargeCustomerFail', 'Visa •••• 0341 — every charge is declined'],
  ['pm_card_authenticationRequired', 'Visa •••• 3184 — purchases ask for 3-D Secure'],
  ['pm_card_authenticationRequiredSetupForOffSession', 'Visa •••• 3155 — saving asks for 3-D Secure'],
];

export function cardText(pm) {
  return pm ? `${pm.brand[0].toUpperCase()}${pm.brand.slice(1)} •••• ${pm.last4}` : 'no card';
}

// cardForm returns a form that saves a card; onSaved(data) gets POST /api/billing/setup-intent's answer.
export function cardForm(ctx, prefix, onSaved, { intro } = {}) {
  const note = msg();
  const save = h('button', { type: 'submit', id: `${prefix}-save`, class: 'primary' }, 'Save card');
  const form = h('form', { id: `${prefix}-form`, class: 'card-form', novalidate: true });
  const stripeMode = ctx.config.processor === 'stripe';
  let select = null;
  let element = null;
  let pendingSetup = null; // a setup waiting for 3-D Secure, to check again

  if (stripeMode) {
    const mount = h('div', { id: `${prefix}-element`, class: 'stripe-element' });
    form.append(h('p', { class: 'label' }, 'Card'), mount);
    ctx.stripe().then((stripe) => {
      element = stripe.elements().create('card');
      element.mount(mount);
    }).catch((err) => note.show(err.message));
  } else {
    select = h('select', { id: `${prefix}-test-card` },
      TEST_CARDS.map(([v, t]) => h('option', { value: v }, t)));
    form.append(field('Test card', select, 'This site uses the built-in test processor: no money moves.'));
  }
  const check = h('button', { type: 'button', id: `${prefix}-check`, class: 'ghost', hidden: true }, 'Check again');
  form.append(h('div', { class: 'row' }, save, check), note);

  const finish = async (r) => {
    if (r.ok) {
      pendingSetup = null;
      check.hidden = true;
      note.show(`Saved: ${cardText(r.data.paymentMethod)}.`, 'ok');
      announce('Card saved');
      onSaved(r.data);
      return;
    }
    if (r.status === 402 && r.data && r.data.status === 'requires_action') {
      pendingSetup = r.data.setupIntentId;
      const stripe = await ctx.stripe();
      if (stripe) {
        const res = await stripe.confirmCardSetup(r.data.clientSecret);
        if (res.error) { note.show(`${res.error.message} The card was not saved; try again or use another card.`); return; }
        return finish(await api('POST', '/api/billing/setup-intent', { setupIntent: pendingSetup }));
      }
      // Test processor: no bank page to show; the check completes once the setup is authenticated.
      check.hidden = false;
      note.show('Your bank asks you to confirm this card (3-D Secure); it is not saved yet. When your bank has confirmed it, press "Check again".', 'warn');
      return;
    }
    note.show(r.error);
  };

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    note.clear();
    busy(save, async () => {
      let paymentMethod = select ? select.value : null;
      if (stripeMode) {
        const stripe = await ctx.stripe();
        if (!stripe || !element) { note.show('The card form is still loading; try again in a moment.'); return; }
        const res = await stripe.createPaymentMethod({ type: 'card', card: element });
        if (res.error) { note.show(res.error.message); return; }
        paymentMethod = res.paymentMethod.id;
      }
      await finish(await api('POST', '/api/billing/setup-intent', { paymentMethod }));
    });
  });
  check.addEventListener('click', () => busy(check, async () => {
    note.clear();
    await finish(await api('POST', '/api/billing/setup-intent', { setupIntent: pendingSetup }));
  }));

  return h('div', { class: 'card-step' }, intro ? h('p', {}, intro) : null, form);
}

// hasTestBank reports whether 3-D Secure is played by the page's test bank (the built-in test processor has no
// bank page; with Stripe, Stripe.js shows the real one).
export const hasTestBank = (ctx, data) => ctx.config.processor !== 'stripe' && Boolean(data && data.paymentRef);

// testBank plays the customer's bank for a purchase waiting for 3-D Secure with the built-in test processor:
// a dialog (#test-bank) offers "Approve" (#test-bank-approve) and "Fail" (#test-bank-fail), and the answer goes
// to POST /api/billing/test-bank/:ref. Resolves that call's answer, or null when the dialog was closed unanswered.
export function testBank(data) {
  const d = h('dialog', { id: 'test-bank', 'aria-labelledby': 'test-bank-title' },
    h('form', { method: 'dialog' },
      h('h2', { id: 'test-bank-title' }, 'Test bank: confirm this payment'),
      h('p', {}, `Your bank asks you to confirm a payment of ${usd(data.amount)} (3-D Secure). `,
        'This site uses the built-in test processor, so this stands in for your bank\'s page: no money moves.'),
      h('div', { class: 'row end' },
        h('button', { type: 'submit', value: 'fail', id: 'test-bank-fail', class: 'ghost' }, 'Fail'),
        h('button', { type: 'submit', value: 'approve', id: 'test-bank-approve', class: 'primary' }, 'Approve'))));
  document.body.append(d);
  return new Promise((resolve) => {
    d.addEventListener('close', async () => {
      d.remove();
      if (d.returnValue !== 'approve' && d.returnValue !== 'fail') return resolve(null);
      resolve(await api('POST', `/api/billing/test-bank/${encodeURIComponent(data.paymentRef)}`, { approve: d.returnValue === 'approve' }));
    }, { once: true });
    d.showModal();
    d.querySelector('#test-bank-approve').focus();
  });
}
