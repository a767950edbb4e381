// Shared helpers: the API client, DOM building, money, UTC hours, clipboard, dialogs.

// ---- API ----------------------------------------------------------------

let onUnauthorized = () => {};
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

// api calls /api/* and never throws: the answer is {ok, status, data, nextCursor (paged lists), error, headers}.
// A 401 outside /api/auth/ means the session ended, so the app returns to sign-in.
export async function api(method, path, body, headers = {}) {
  const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json', ...headers } };
  // Every state-changing request carries the JSON content type (cross-origin protection).
  if (method !== 'GET') init.headers['Content-Type'] = 'application/json';
  if (body !== undefined) init.body = JSON.stringify(body);
  let res;
  try {
    res = await fetch(path, init);
  } catch {
    return { ok: false, status: 0, data: null, error: 'Could not reach the server. Check your connection and try again.', headers: new Headers() };
  }
  let env = null;
  try { env = await res.json(); } catch { /* not JSON: handled below */ }
  const out = { ok: res.ok && !!env && env.success === true, status: res.status, data: env ? env.data ?? null : null, nextCursor: env ? env.nextCursor ?? null : null, headers: res.headers, error: null };
  if (!out.ok) {
    out.error = (env && env.error) || `The server answered ${res.status} ${res.statusText}. Try again in a moment.`;
    if (res.status === 429) {
      const after = res.headers.get('Retry-After');
      if (after && !/retry|again/i.test(out.error)) out.error += ` Try again in ${after} s.`;
    }
    if (res.status === 401 && !path.startsWith('/api/auth/')) onUnauthorized(out.error);
  }
  return out;
}

// get returns the data of a GET or throws an Error with the server's message (for loaders).
export async function get(path) {
  const r = await api('GET', path);
  if (!r.ok) throw new Error(r.error);
  return r.data;
}

export function newIdempotencyKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  // randomUUID needs a secure context; plain http on a LAN address has none.
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

// ---- DOM ----------------------------------------------------------------

// h builds an element: h('button', {type: 'button', onclick: fn, class: 'x'}, 'text', child...).
// Text is always set as text, never parsed as HTML.
export function h(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k in e && typeof v !== 'string') e[k] = v; // properties: checked, value, hidden, disabled…
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

// field builds a label + control pair with label[for] = the control's id.
export function field(label, control, hint) {
  return h('div', { class: 'field' }, h('label', { for: control.id }, label), control,
    hint ? h('p', { class: 'small muted' }, hint) : null);
}

// msg is an inline message slot placed next to an action: show(text, kind) / clear().
export function msg() {
  const p = h('p', { class: 'msg', role: 'alert', hidden: true });
  p.show = (text, kind = 'error') => { p.textContent = text; p.className = `msg ${kind}`; p.hidden = false; };
  p.clear = () => { p.textContent = ''; p.hidden = true; };
  return p;
}

export function announce(text) {
  const s = document.getElementById('status');
  s.textContent = '';
  // A fresh node per message makes screen readers read repeats too.
  requestAnimationFrame(() => { s.textContent = text; });
}

// busy disables a button while fn runs.
export async function busy(button, fn) {
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  try { return await fn(); } finally { button.disabled = false; button.removeAttribute('aria-busy'); }
}

const dialog = () => document.getElementById('confirm-dialog');
// confirmDialog asks in the page's <dialog>; resolves true when the user confirmed.
export function confirmDialog(title, text, okLabel = 'Delete', cancelLabel = 'Keep it') {
  const d = dialog();
  d.querySelector('#confirm-title').textContent = title;
  d.querySelector('#confirm-text').textContent = text;
  d.querySelector('#confirm-ok').textContent = okLabel;
  d.querySelector('#confirm-cancel').textContent = cancelLabel;
  d.returnValue = '';
  return new Promise((resolve) => {
    d.addEventListener('close', () => resolve(d.returnValue === 'ok'), { once: true });
    d.showModal();
    d.querySelector('#confirm-cancel').focus();
  });
}

export async function copyText(text) {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      announce('Copied to the clipboard');
      return true;
    }
  } catch { /* denied: fall back below */ }
  // Fallback for insecure contexts and denied permissions: a hidden textarea and execCommand.
  const t = h('textarea', { class: 'offscreen', readonly: true, 'aria-hidden': 'true' });
  t.value = text;
  document.body.append(t);
  t.select();
  let ok = false;
  try { ok = document.execCommand('copy'); } catch { ok = false; }
  t.remove();
  announce(ok ? 'Copied to the clipboard' : 'Copy failed: select the text and copy it by hand');
  return ok;
}

export function copyButton(getText, label = 'Copy') {
  return h('button', { type: 'button', class: 'ghost small', onclick: () => copyText(getText()) }, label);
}

// secret shows a key masked, with Reveal (toggles to Hide) and Copy buttons.
export function secret(value) {
  const code = h('code', { class: 'secret' }, mask(value));
  const reveal = h('button', { type: 'button', class: 'ghost small', 'aria-pressed': 'false' }, 'Reveal');
  reveal.addEventListener('click', () => {
    const shown = reveal.getAttribute('aria-pressed') === 'true';
    code.textContent = shown ? mask(value) : value;
    reveal.setAttribute('aria-pressed', String(!shown));
    reveal.textContent = shown ? 'Reveal' : 'Hide';
  });
  return h('span', { class: 'secret-box' }, code, reveal, copyButton(() => value));
}

export function mask(key) {
  if (!key) return '—';
  const prefix = (key.match(/^(sk_pool_|sk-compat-meta-|mk_)/) || [''])[0];
  return `${prefix}${'•'.repeat(12)}${key.slice(-4)}`;
}

export function badge(text, kind = '') {
  return h('span', { class: `badge ${kind}` }, text);
}

export function statusBadge(status) {
  const kinds = { active: 'ok', pending_key: 'warn', incomplete: 'warn', past_due: 'bad', canceled: 'off', paused: 'off', funding: 'warn', activating: 'warn', pledged: 'warn' };
  return badge(status.replace('_', ' '), kinds[status] || '');
}

// ---- Money: exact decimals, as accounts/pricing.go computes them ----------
// A value is {n, s}: n / 10^s with BigInt n. The server uses math/big.Rat;
// every amount here is a product of decimals, so a power-of-ten denominator is exact.

export function dec(x) {
  const str = String(x).trim();
  const m = /^(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?$/i.exec(str);
  if (!m) throw new Error(`not a decimal: ${str}`);
  let digits = m[1] + (m[2] || '');
  let s = (m[2] || '').length - Number(m[3] || 0);
  if (s < 0) { digits += '0'.repeat(-s); s = 0; }
  return { n: BigInt(digits), s };
}
const pow10 = (k) => 10n ** BigInt(k);
const align = (a, b) => { const s = Math.max(a.s, b.s); return [a.n * pow10(s - a.s), b.n * pow10(s - b.s), s]; };
export const add = (a, b) => { const [x, y, s] = align(a, b); return { n: x + y, s }; };
export const sub = (a, b) => { const [x, y, s] = align(a, b); return { n: x - y, s }; };
export const mul = (a, b) => ({ n: a.n * b.n, s: a.s + b.s });

// roundCents rounds a non-negative amount half-up to cents (pricing.go roundCents).
export function roundCents(a) {
  if (a.s <= 2) return a;
  const d = pow10(a.s - 2);
  return { n: (a.n * 2n + d) / (2n * d), s: 2 };
}

// fmtDec renders the canonical form: shortest exact decimal ("40", "12.5").
export function fmtDec(a) {
  const neg = a.n < 0n;
  let str = (neg ? -a.n : a.n).toString().padStart(a.s + 1, '0');
  if (a.s > 0) {
    str = `${str.slice(0, -a.s)}.${str.slice(-a.s)}`.replace(/0+$/, '').replace(/\.$/, '');
  }
  return (neg && str !== '0' ? '-' : '') + str;
}

// usd shows a canonical amount as money with at least two decimals ("$1,428.00", "$15.0625").
export function usd(canonical) {
  const [whole, frac = ''] = canonical.split('.');
  return `$${whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',')}.${frac.padEnd(2, '0')}`;
}

// price computes a purchase as POST /api/pools/:id/subscribe charges it.
export function price(pool, blocks, quantity, cycle) {
  let monthly = dec('0');
  for (const b of pool.blocks) if (blocks.includes(b.block)) monthly = add(monthly, dec(b.monthlyPrice));
  monthly = mul(monthly, dec(quantity));
  let charge = monthly;
  if (cycle === 'year') {
    const discount = dec(pool.annualDiscount || 0);
    charge = mul(mul(monthly, dec(12)), sub(dec(1), discount));
  }
  return { monthly: fmtDec(monthly), charge: fmtDec(roundCents(charge)) };
}

// ---- Hours and blocks ------------------------------------------------------

export const BLOCKS = [
  { block: 'asia', start: 0, end: 7, region: 'Asia-Pacific' },
  { block: 'europe', start: 8, end: 15, region: 'Europe / Middle East' },
  { block: 'americas', start: 16, end: 23, region: 'Americas' },
];
export const blockOf = (hour) => BLOCKS[Math.floor(hour / 8)].block;
export const hoursOf = (block) => { const b = BLOCKS.find((x) => x.block === block); return Array.from({ length: 8 }, (_, i) => b.start + i); };
export const utcHour = () => new Date().getUTCHours();
export const pad2 = (n) => String(n).padStart(2, '0');
export const blockLabel = (block) => { const b = BLOCKS.find((x) => x.block === block); return `${block} ${pad2(b.start)}:00–${pad2(b.end + 1)}:00 UTC`; };

// nextOpening returns the Date when UTC hour `hour` next starts (now if it is the current hour).
export function nextOpening(hour, now = new Date()) {
  const d = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate(), hour));
  if (now.getUTCHours() === hour) return now;
  if (d <= now) d.setUTCDate(d.getUTCDate() + 1);
  return d;
}

// when shows a time in UTC and in the viewer's local time: "08:00 UTC (10:00 your time)".
export function when(date) {
  const d = new Date(date);
  const utc = `${pad2(d.getUTCHours())}:${pad2(d.getUTCMinutes())} UTC`;
  const local = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  const sameDay = new Date().toDateString() === d.toDateString();
  const day = sameDay ? '' : ` ${d.toLocaleDateString([], { weekday: 'short' })}`;
  return `${utc} (${local}${day} your time)`;
}

export function inDuration(date) {
  const mins = Math.max(0, Math.round((new Date(date) - Date.now()) / 60000));
  if (mins < 60) return `in ${mins} min`;
  return `in ${Math.floor(mins / 60)} h ${mins % 60} min`;
}

export function fmtDate(ts) {
  if (!ts) return '—';
  return new Date(ts).toLocaleDateString([], { year: 'numeric', month: 'short', day: 'numeric' });
}

export function fmtDateTime(ts) {
  if (!ts) return 'never';
  return new Date(ts).toLocaleString([], { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}

// hoursText compresses a list of UTC hours into ranges: "00–08, 16–24 UTC".
export function hoursText(hours) {
  const hs = [...new Set(hours)].sort((a, b) => a - b);
  if (!hs.length) return 'no hours';
  const out = [];
  let start = hs[0];
  let prev = hs[0];
  for (const x of [...hs.slice(1), null]) {
    if (x !== prev + 1) { out.push(`${pad2(start)}:00–${pad2(prev + 1)}:00`); start = x; }
    prev = x;
  }
  return `${out.join(', ')} UTC`;
}
