// Timeblock buyer's page: a single page app over /api/* (accounts/web/CONTRACT.md).
//
// Stable names for tests (keep them once written):
//
// Routes (hash): #/pools, #/pools/<slug> (detail + buy), #/subscriptions, #/keys (+ management keys),
//   #/combined, #/now, #/connect, #/connect/<key or combined key id>, #/operator (operators only; anyone else gets
//   the pools). Sign-in lives at /account/ (signed out) and
//   /account/sign-in#token=… (links sent before the token moved to the fragment: /account/sign-in?token=…).
//   A browser signed in as someone else is asked first, in #confirm-dialog ("Sign in as <email>" /
//   "Stay signed in as <email>").
// Sections: #signin, #pools, #pool-detail, #buy, #subscriptions, #keys, #management-keys, #combined, #now, #connect
// Shell: #nav (links with data-route), #who-email, #sign-out ("Sign out"), #status (aria-live),
//   #confirm-dialog with #confirm-ok / #confirm-cancel ("Keep it")
// Sign-in: #signin-form, #signin-email, #signin-submit ("Send sign-in link"), #signin-hint, #signin-sent, #signin-error,
//   #signin-again ("Use another address"), #signin-idp
// Pools: .pool[data-id=<pool id>] with a link "View hours & buy"; table.seats-free
// Pool detail: #pool-map (td[data-hour][data-seat][data-status=free|taken|mine|unsold]), th.now = current UTC
//   hour, th.band.open = the block open now, #pool-open-now
// Buy: #buy-form, #buy-block-asia|europe|americas, #buy-quantity, #buy-cycle-month, #buy-cycle-year,
//   #buy-monthly[data-amount], #buy-charge[data-amount] (canonical decimal string as the server charges),
//   #buy-opens, #buy-manual, #buy-terms, #buy-submit ("Buy"), #buy-result, #buy-confirm ("Confirm payment"),
//   #buy-create-key ("Create key"), #buy-change-card ("Change card")
// 3-D Secure on a purchase: #buy-waiting (the unpaid purchase) with #buy-test-bank ("Open the test bank", test
//   processor; #buy-confirm with Stripe) and #buy-cancel ("Cancel purchase"); #buy-unpaid once it ended unpaid;
//   the test bank's dialog #test-bank with #test-bank-approve ("Approve") and #test-bank-fail ("Fail")
// Card form (prefix "card" on the buy page and in #subscriptions, "recover" for past-due recovery):
//   #<prefix>-form, #<prefix>-test-card (select, test processor), #<prefix>-element (Stripe),
//   #<prefix>-save ("Save card"), #<prefix>-check ("Check again", after 3-D Secure)
// Subscriptions: .sub[data-id=<subscription id>], buttons "Create key", "Cancel at period end" (then
//   #confirm-ok), "Keep renewing" (once set to cancel), "Confirm payment" and "Cancel purchase" (unpaid), with
//   .sub-waiting saying what an unpaid one waits for; #billing-card ("Change card" / "Add a card"), #past-due
// Keys: #key-create-form, #key-create-sub, #key-create-name, #key-create-submit ("Create key");
//   .key[data-id=<key id>] with "Reveal"/"Hide", "Copy", "Rename", "Revoke"/"Reactivate", "Delete";
//   rename: #key-name-<id> + "Save"
// Management keys: #mkey-form, #mkey-name, #mkey-submit ("Create management key"), #mkey-created (shown once),
//   .mkey[data-id=<id>] with "Delete"
// Combined (the form only when a subscription can join): #combined-form, #combined-label,
//   #combined-member-<subId> (checkbox), #combined-role-<subId> (select lane|boost), #combined-preview
//   (td[data-hour][data-pool] = lanes of that pool, td[data-boost] = boosts), #combined-hints (client-side
//   rule hints), #combined-submit ("Create combined key"); .combined-key[data-id=<id>] with "Reveal", "Copy",
//   "Edit", "Delete", lanes table #combined-plan-<id>; edit: #edit-label-<id>, #edit-<id>-member-<subId>,
//   #edit-<id>-role-<subId>, #edit-preview-<id>, #edit-hints-<id>, "Save changes"
// Right now: .now-row[data-id=<key id>] with .now-window, .now-when, .now-lanes ("—" when unknown; "N of M",
//   live from the key's /lanes stream, with ul.now-flights of the requests in flight), .now-usage-24h and
//   .now-usage-7d (data-requests, data-input, data-output, data-refused); #now-clock
// Connect: #connect-key, #connect-model, pre#snippet-claude, #snippet-codex-config, #snippet-codex-run,
//   #snippet-openai-py, #snippet-openai-js, #snippet-anthropic-py, #snippet-anthropic-js (each with "Copy")
// Operator (operator.js; #nav-operator exists only when the session says operator): section #operator, panels
//   #op-pools (tr.op-pool[data-slug][data-status], buttons "Activate"/"Pause"/"Resume" then #confirm-ok,
//   td.op-revenue, td.op-mrr), #op-heatmap-card with table#op-heatmap (td.heat[data-hour][data-pool][data-sold]
//   [data-seats], title "europe 09:00 UTC: 3 of 4 seats sold"; th.now / td.now = current UTC hour) and
//   #op-heatmap-legend, #op-orders (#op-orders-status select, tr.op-order[data-id][data-status], button.op-deliver
//   "Deliver"), #op-subscribers (#op-sub-search, #op-sub-email, #op-sub-submit "Search", tr.op-sub[data-id] with
//   "Cancel at period end" / "Cancel now" / "Withdraw pledge"), #op-ledger (#op-ledger-from, #op-ledger-to,
//   #op-ledger-submit, a#op-ledger-csv "Download CSV", #op-ledger-totals, tr.op-charge[data-id], #op-ledger-more),
//   #op-audit (tr.op-audit-row[data-action], #op-audit-more); each panel's outcome in its p.msg.
// Errors: each action has a p.msg (role=alert) beside it with the server's message; .msg.ok / .msg.warn otherwise.

import { api, announce, confirmDialog, setUnauthorizedHandler } from './lib.js';
import { renderPools, renderPoolDetail } from './pools.js';
import { renderSubscriptions, renderKeys } from './account.js';
import { renderCombined, renderNow, renderConnect } from './combined.js';
import { renderOperator } from './operator.js';

const $ = (id) => document.getElementById(id);
const SECTIONS = ['signin', 'pools', 'pool-detail', 'buy', 'subscriptions', 'keys', 'management-keys', 'combined', 'now', 'connect', 'operator'];

// ctx is what every view gets: the auth config, the user, the Stripe loader and a render guard.
// ctx.operator: GET /api/auth/session said this user is an operator (the Operator tab exists only then).
const ctx = { config: null, user: null, operator: false, gen: 0, cleanup: null, stripe: loadStripe };

const ROUTES = {
  pools: { sections: ['pools'], render: renderPools },
  'pool': { sections: ['pool-detail', 'buy'], render: renderPoolDetail },
  subscriptions: { sections: ['subscriptions'], render: renderSubscriptions },
  keys: { sections: ['keys', 'management-keys'], render: renderKeys },
  combined: { sections: ['combined'], render: renderCombined },
  now: { sections: ['now'], render: renderNow },
  connect: { sections: ['connect'], render: renderConnect },
  operator: { sections: ['operator'], render: renderOperator, operatorOnly: true },
};

function parseRoute() {
  const parts = location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'pools' && parts[1]) return { name: 'pool', param: parts[1] };
  // #/operator is no route at all for anyone but an operator: it shows the pools.
  const known = ROUTES[parts[0]] && (!ROUTES[parts[0]].operatorOnly || ctx.operator);
  return { name: known ? parts[0] : 'pools', param: parts[1] || null };
}

function showSections(ids) {
  $('loading').hidden = true;
  for (const id of SECTIONS) $(id).hidden = !ids.includes(id);
}

async function route() {
  if (!ctx.user) return;
  if (ctx.cleanup) { ctx.cleanup(); ctx.cleanup = null; }
  const { name, param } = parseRoute();
  const r = ROUTES[name];
  const gen = ++ctx.gen;
  for (const a of document.querySelectorAll('#nav a')) {
    const current = a.dataset.route === name || (name === 'pool' && a.dataset.route === 'pools');
    if (current) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  showSections(r.sections);
  // A view fills its sections through view.fill, which ignores a render overtaken by a newer route.
  const view = {
    stale: () => gen !== ctx.gen,
    fill(sectionId, ...nodes) {
      if (gen !== ctx.gen) return;
      $(sectionId).querySelector('.body').replaceChildren(...nodes.flat().filter(Boolean));
    },
    rerender: () => { if (gen === ctx.gen) route(); },
  };
  for (const id of r.sections) view.fill(id, loadingNode());
  try {
    const cleanup = await r.render(ctx, view, param);
    if (typeof cleanup === 'function') { if (view.stale()) cleanup(); else ctx.cleanup = cleanup; }
  } catch (err) {
    view.fill(r.sections[0], errorNode(err.message));
  }
}

function loadingNode() {
  const p = document.createElement('p');
  p.className = 'muted';
  p.textContent = 'Loading…';
  return p;
}

function errorNode(text) {
  const p = document.createElement('p');
  p.className = 'msg error';
  p.setAttribute('role', 'alert');
  p.textContent = `${text} Reload the page to try again.`;
  return p;
}

// ---- Sign-in ---------------------------------------------------------------

function showSignIn(error) {
  ctx.user = null;
  ctx.operator = false;
  showOperatorTab(false);
  if (ctx.cleanup) { ctx.cleanup(); ctx.cleanup = null; }
  ctx.gen++;
  $('nav').hidden = true;
  $('who').hidden = true;
  showSections(['signin']);
  const idp = ctx.config.signIn === 'identity_provider';
  $('signin-idp').hidden = !idp;
  $('signin-form').hidden = idp;
  $('signin-sent').hidden = true;
  $('signin-error').hidden = !error;
  $('signin-error').textContent = error || '';
  $('signin-hint').textContent = ctx.config.signUp === 'invite'
    ? 'No password: we e-mail you a link. This site is by invitation: use the address you were invited with.'
    : 'No password: we e-mail you a link. New here? The same link creates your account.';
  if (!idp) $('signin-email').focus();
}

async function requestLink(ev) {
  ev.preventDefault();
  const email = $('signin-email').value.trim();
  const m = $('signin-form-msg');
  m.hidden = true;
  if (!email) {
    m.textContent = 'Enter your e-mail address.';
    m.hidden = false;
    return;
  }
  const btn = $('signin-submit');
  btn.disabled = true;
  const r = await api('POST', '/api/auth/email', { email });
  btn.disabled = false;
  if (!r.ok) {
    m.textContent = r.error;
    m.hidden = false;
    return;
  }
  $('signin-error').hidden = true;
  $('signin-form').hidden = true;
  $('signin-sent-to').textContent = email;
  $('signin-sent').hidden = false;
  announce('Check your e-mail for a link');
}

async function signOut() {
  await api('POST', '/api/auth/sign-out', {});
  announce('Signed out');
  showSignIn();
}

// showOperatorTab adds the Operator link to the navigation, or removes it: for anyone but an operator it is not
// in the page at all.
function showOperatorTab(on) {
  document.body.classList.toggle('has-operator', on);
  const link = $('nav-operator');
  if (!on) { if (link) link.remove(); return; }
  if (link) return;
  const a = document.createElement('a');
  a.href = '#/operator';
  a.id = 'nav-operator';
  a.dataset.route = 'operator';
  a.textContent = 'Operator';
  $('nav').append(a);
}

function startApp(user, operator) {
  ctx.user = user;
  ctx.operator = operator === true;
  showOperatorTab(ctx.operator);
  $('who-email').textContent = user.email;
  // An identity provider owns the session: signing out here would not sign out there.
  $('sign-out').hidden = ctx.config.signIn === 'identity_provider';
  $('nav').hidden = false;
  $('who').hidden = false;
  route();
}

// Stripe.js comes from js.stripe.com only when the site uses Stripe (CSP allows exactly that origin).
let stripePromise = null;
function loadStripe() {
  if (ctx.config.processor !== 'stripe' || !ctx.config.stripePublishableKey) return Promise.resolve(null);
  stripePromise ??= new Promise((resolve, reject) => {
    const s = document.createElement('script');
    s.src = 'https://js.stripe.com/v3/';
    s.addEventListener('load', () => resolve(window.Stripe(ctx.config.stripePublishableKey)));
    s.addEventListener('error', () => { stripePromise = null; reject(new Error('Could not load Stripe.js; check your connection and reload.')); });
    document.head.append(s);
  });
  return stripePromise;
}

async function boot() {
  const cfg = await api('GET', '/api/auth/config');
  ctx.config = cfg.ok ? cfg.data : { signIn: 'email', signUp: 'open', processor: null, stripePublishableKey: null };

  let error = null;
  let stayed = null;
  if (/\/sign-in\/?$/.test(location.pathname)) {
    // Links carry the token in the fragment, which no server ever sees; older links in the query.
    const token = new URLSearchParams(location.hash.replace(/^#/, '')).get('token')
      || new URLSearchParams(location.search).get('token');
    // The token leaves the address bar (and history) before anything else happens.
    history.replaceState(null, '', location.pathname.replace(/sign-in\/?$/, '') + (location.hash.startsWith('#/') ? location.hash : ''));
    if (token) ({ error, stayed } = await useLink(token));
  }
  const s = await api('GET', '/api/auth/session');
  if (s.ok && s.data && s.data.user) {
    startApp(s.data.user, s.data.operator);
    if (stayed) announce(`You are still signed in as ${stayed}.`);
    else if (error) announce('This sign-in link was already used or has expired; you are still signed in.');
  } else showSignIn(error);
}

// useLink exchanges a sign-in link's token for a session. A browser signed in as someone else is never
// switched without asking: the server answers 409 with both addresses, and only a yes sends replace.
async function useLink(token) {
  let r = await api('POST', '/api/auth/verify', { token });
  if (r.status === 409 && r.data && r.data.signedInAs) {
    const { signedInAs, email } = r.data;
    const yes = await confirmDialog('Switch account?',
      `You are signed in as ${signedInAs}; sign in as ${email} instead? Only do this if you asked for a link for ${email}.`,
      `Sign in as ${email}`, `Stay signed in as ${signedInAs}`);
    if (!yes) return { error: null, stayed: signedInAs };
    r = await api('POST', '/api/auth/verify', { token, replace: true });
  }
  if (r.ok) return { error: null, stayed: null };
  return {
    error: r.status === 401 ? 'This sign-in link was already used or has expired. Enter your e-mail address to get a new one.' : r.error,
    stayed: null,
  };
}

setUnauthorizedHandler(() => showSignIn('Your session has ended. Sign in again.'));
$('signin-form').addEventListener('submit', requestLink);
$('signin-again').addEventListener('click', () => showSignIn());
$('sign-out').addEventListener('click', signOut);
// The skip link focuses <main> without touching the hash, which holds the route.
document.querySelector('.skip').addEventListener('click', (ev) => { ev.preventDefault(); $('main').focus(); });
window.addEventListener('hashchange', () => { if (location.hash === '' || location.hash.startsWith('#/')) route(); });
boot();
