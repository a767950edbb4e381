// Combined keys (builder, preview, edit), "Right now" and "Connect your agent".

import {
  api, get, h, field, msg, busy, announce, badge, secret, confirmDialog, copyButton,
  hoursOf, blockOf, utcHour, pad2, hoursText, when, inDuration,
} from './lib.js';
import { loadSubscriptions, subLabel } from './account.js';

// ---- Lanes per hour, computed as the gate will (docs/api.md "Combined keys") ----

// lanePlan: members [{sub, role}] → {pools: {slug: [24 lanes]}, boosts: [24], hints: [rule texts]}.
// Lanes add per pool (a request uses the lanes of its model's pool); a boost adds none.
export function lanePlan(members) {
  const pools = {};
  const boosts = Array(24).fill(0);
  const laneHours = new Set();
  for (const { sub, role } of members) {
    const hours = sub.blocks.flatMap(hoursOf);
    if (role === 'boost') { for (const hr of hours) boosts[hr]++; continue; }
    const lanes = pools[sub.poolSlug] ??= Array(24).fill(0);
    for (const hr of hours) { lanes[hr] += sub.quantity; laneHours.add(hr); }
  }
  // The rules the server checks (1–4), so the buyer sees a refusal coming; the server has the last word.
  const hints = [];
  const ids = members.map((m) => m.sub.id);
  if (members.length === 1) hints.push('rule 1: a combined key needs at least 2 subscriptions.');
  if (new Set(ids).size !== ids.length) hints.push('rule 1: a subscription is listed twice.');
  if (members.length && !members.some((m) => m.role === 'lane')) hints.push('rule 2: at least one member must be a lane.');
  const boostMembers = members.filter((m) => m.role === 'boost');
  if (boostMembers.length && new Set(members.map((m) => m.sub.poolId)).size > 1) {
    hints.push('rule 3: boost roles require all members to be in the same pool.');
  }
  for (const m of boostMembers) {
    const missing = m.sub.blocks.flatMap(hoursOf).filter((hr) => !laneHours.has(hr));
    if (missing.length) hints.push(`rule 4: the boost ${subLabel(m.sub)} covers ${hoursText(missing)}, which no lane covers.`);
  }
  return { pools, boosts, hints };
}

// planTable shows the lanes of each pool (and the boosts) in each of the 24 UTC hours.
function planTable(plan, id) {
  const now = utcHour();
  const hours = [...Array(24).keys()];
  const rows = Object.entries(plan.pools).map(([slug, lanes]) => h('tr', {},
    h('th', { scope: 'row' }, `${slug} lanes`),
    hours.map((hr) => h('td', { class: `${lanes[hr] ? 'on' : 'off'}${hr === now ? ' now' : ''}`, dataset: { hour: hr, pool: slug } }, String(lanes[hr])))));
  if (plan.boosts.some(Boolean)) {
    rows.push(h('tr', {}, h('th', { scope: 'row' }, 'boosts'),
      hours.map((hr) => h('td', { class: `${plan.boosts[hr] ? 'boost' : 'off'}${hr === now ? ' now' : ''}`, dataset: { hour: hr, boost: '' } }, String(plan.boosts[hr])))));
  }
  if (!rows.length) return h('p', { id, class: 'muted small' }, 'Pick subscriptions to see the lanes per hour.');
  const open = hours.filter((hr) => Object.values(plan.pools).some((l) => l[hr])).length;
  const peaks = Object.entries(plan.pools).map(([slug, l]) => `${slug} up to ${Math.max(...l)} at once`).join(', ');
  return h('div', { id },
    h('div', { class: 'scroll', tabindex: '0', role: 'region', 'aria-label': 'Lanes per UTC hour, scrolls sideways' },
      h('table', { class: 'plan' },
        h('caption', { class: 'sr-only' }, 'Simultaneous requests per UTC hour'),
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'UTC hour'),
          hours.map((hr) => h('th', { scope: 'col', class: hr === now ? 'now' : null }, pad2(hr))))),
        h('tbody', {}, rows))),
    h('p', { class: 'small muted' }, `Open ${open} of 24 hours; ${peaks} (each request uses the lanes of its model's pool). The highlighted column is the current UTC hour.`));
}

function hintList(hints, id) {
  return h('ul', { id, class: 'hints small', 'aria-live': 'polite' },
    hints.map((t) => h('li', {}, `The server will refuse this — ${t}`)));
}

// memberPicker lists subscriptions with a checkbox and a role select; onChange fires on any change.
function memberPicker(subs, idPrefix, initial, onChange) {
  const rows = subs.map((s) => {
    const box = h('input', { type: 'checkbox', id: `${idPrefix}-member-${s.id}`, value: s.id, checked: initial.has(s.id) });
    const role = h('select', { id: `${idPrefix}-role-${s.id}` },
      h('option', { value: 'lane', selected: (initial.get(s.id) || 'lane') === 'lane' }, 'Lane — adds its seats'),
      h('option', { value: 'boost', selected: initial.get(s.id) === 'boost' }, 'Boost — priority, no seats'));
    return { s, box, role, el: h('div', { class: 'member' },
      h('div', { class: 'check' }, box, h('label', { for: box.id }, h('strong', {}, subLabel(s)), ' · ', hoursText(s.blocks.flatMap(hoursOf)))),
      h('div', { class: 'role' }, h('label', { for: role.id }, 'Role'), role)) };
  });
  for (const r of rows) { r.box.addEventListener('change', onChange); r.role.addEventListener('change', onChange); }
  const chosen = () => rows.filter((r) => r.box.checked).map((r) => ({ sub: r.s, role: r.role.value }));
  return { el: h('div', { class: 'members' }, rows.map((r) => r.el)), chosen };
}

export async function renderCombined(ctx, view) {
  const [{ subs }, metas] = await Promise.all([loadSubscriptions(), get('/api/meta-keys')]);
  const members = new Set(metas.flatMap((m) => m.members.map((x) => x.pledgeId)));
  // Joinable: active and keyless (rule 1), and not already in a combined key.
  const free = subs.filter((s) => s.status === 'active' && !s.key && !members.has(s.id));
  const subsById = new Map(subs.map((s) => [s.id, s]));
  view.fill('combined', builder(view, free, subs),
    h('h2', {}, 'Your combined keys'),
    metas.length ? h('div', { class: 'list' }, metas.map((m) => metaRow(view, m, subsById, free)))
      : h('p', { class: 'empty' }, 'No combined keys yet.'));
}

function builder(view, free, subs) {
  const keyed = subs.filter((s) => s.status === 'active' && s.key).length;
  const need = h('p', { class: 'notice small' }, 'A combined key needs two or more active subscriptions without a key of their own. ',
    keyed ? `${keyed} of yours ha${keyed === 1 ? 's' : 've'} a standalone key: delete it in Keys to fold the subscription in.` : h('a', { href: '#/pools' }, 'Buy seats'));
  if (!free.length) return h('div', { class: 'card' }, h('h2', {}, 'New combined key'), need);
  const note = msg();
  const label = h('input', { id: 'combined-label', type: 'text', maxlength: '200', placeholder: 'e.g. round the clock', autocomplete: 'off' });
  const preview = h('div');
  const hints = h('div');
  const update = () => {
    const plan = lanePlan(picker.chosen());
    preview.replaceChildren(planTable(plan, 'combined-preview'));
    hints.replaceChildren(hintList(plan.hints, 'combined-hints'));
  };
  const picker = memberPicker(free, 'combined', new Map(), update);
  const submit = h('button', { type: 'submit', id: 'combined-submit', class: 'primary' }, 'Create combined key');
  const form = h('form', { id: 'combined-form', class: 'card' },
    h('h2', {}, 'New combined key'),
    free.length < 2 ? need : null,
    field('Label (optional)', label),
    h('fieldset', {}, h('legend', {}, 'Subscriptions and roles'), picker.el),
    h('h3', {}, 'Lanes per hour, before you create it'), preview, hints,
    h('div', { class: 'row' }, submit), note);
  update();
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    note.clear();
    const chosen = picker.chosen();
    const body = { pledgeIds: chosen.map((m) => m.sub.id), roles: Object.fromEntries(chosen.map((m) => [m.sub.id, m.role])) };
    if (label.value.trim()) body.label = label.value.trim();
    busy(submit, async () => {
      const r = await api('POST', '/api/meta-keys', body);
      if (!r.ok) return note.show(r.error);
      announce('Combined key created');
      view.rerender();
    });
  });
  return form;
}

function metaRow(view, m, subsById, free) {
  const note = msg();
  const edit = h('button', { type: 'button', class: 'ghost small', 'aria-expanded': 'false' }, 'Edit');
  const del = h('button', { type: 'button', class: 'danger small' }, 'Delete');
  const editBox = h('div');
  // Members as subscriptions (for hours and quantities); a member on a pool no longer listed keeps its row's hours.
  const asSub = (x) => subsById.get(x.pledgeId) || { id: x.pledgeId, poolSlug: x.poolSlug, poolId: x.poolSlug, blocks: [...new Set(x.hours.map(blockOf))], quantity: x.maxParallel, pool: null };
  const plan = lanePlan(m.members.map((x) => ({ sub: asSub(x), role: x.role })));

  edit.addEventListener('click', () => {
    const open = edit.getAttribute('aria-expanded') === 'true';
    edit.setAttribute('aria-expanded', String(!open));
    editBox.replaceChildren(...(open ? [] : [editor(view, m, subsById, free, asSub)]));
  });
  del.addEventListener('click', async () => {
    const sure = await confirmDialog(`Delete the combined key "${m.label || 'unnamed'}"?`,
      'The key stops working at once. Its subscriptions stay active and keyless: you can create keys for them or combine them again.');
    if (!sure) return;
    await busy(del, async () => {
      const r = await api('DELETE', `/api/meta-keys/${encodeURIComponent(m.id)}`);
      if (!r.ok) return note.show(r.error);
      announce('Combined key deleted');
      view.rerender();
    });
  });

  return h('article', { class: 'card combined-key', dataset: { id: m.id } },
    h('header', { class: 'card-head' }, h('h3', {}, m.label || 'unnamed'), m.isActive ? badge('active', 'ok') : badge('inactive', 'off')),
    h('p', {}, secret(m.token)),
    h('table', { class: 'members-table' },
      h('thead', {}, h('tr', {}, ['Subscription', 'Role', 'Hours', 'Now'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, m.members.map((x) => h('tr', { dataset: { id: x.pledgeId } },
        h('td', {}, x.pledgeLabel, x.pledgeStatus !== 'active' ? badge(x.pledgeStatus.replace('_', ' '), 'bad') : ''),
        h('td', {}, x.role),
        h('td', {}, hoursText(x.hours)),
        h('td', {}, x.windowOpenNow ? badge('open', 'ok') : badge('closed', 'off')))))),
    planTable(plan, `combined-plan-${m.id}`),
    h('div', { class: 'row' }, edit, del, h('a', { class: 'small', href: `#/connect/${encodeURIComponent(m.id)}` }, 'Connect')),
    editBox, note);
}

// editor changes label, members (PUT: the complete new set) and roles (PATCH), in that order.
function editor(view, m, subsById, free, asSub) {
  const note = msg();
  const current = new Map(m.members.map((x) => [x.pledgeId, x.role]));
  const candidates = [...m.members.map(asSub), ...free];
  const label = h('input', { id: `edit-label-${m.id}`, type: 'text', value: m.label, maxlength: '200', autocomplete: 'off' });
  const preview = h('div');
  const hints = h('div');
  const update = () => {
    const plan = lanePlan(picker.chosen());
    preview.replaceChildren(planTable(plan, `edit-preview-${m.id}`));
    hints.replaceChildren(hintList(plan.hints, `edit-hints-${m.id}`));
  };
  const picker = memberPicker(candidates, `edit-${m.id}`, current, update);
  const save = h('button', { type: 'submit', class: 'primary' }, 'Save changes');
  const form = h('form', { class: 'inline-form editor' },
    field('Label', label),
    h('fieldset', {}, h('legend', {}, 'Members and roles'), picker.el,
      h('p', { class: 'small muted' }, 'Added subscriptions join as lanes, then take the role chosen here; removed ones are left keyless.')),
    preview, hints, h('div', { class: 'row' }, save), note);
  update();
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    note.clear();
    busy(save, async () => {
      const chosen = picker.chosen();
      const ids = chosen.map((c) => c.sub.id);
      const sameSet = ids.length === current.size && ids.every((id) => current.has(id));
      if (!sameSet) {
        const r = await api('PUT', `/api/meta-keys/${encodeURIComponent(m.id)}/members`, { pledgeIds: ids });
        if (!r.ok) return note.show(r.error);
      }
      const roles = Object.fromEntries(chosen.filter((c) => (current.get(c.sub.id) || 'lane') !== c.role).map((c) => [c.sub.id, c.role]));
      if (Object.keys(roles).length) {
        const r = await api('PATCH', `/api/meta-keys/${encodeURIComponent(m.id)}/member-roles`, { roles });
        if (!r.ok) return note.show(sameSet ? r.error : `Members saved, roles not: ${r.error}`);
      }
      if (label.value.trim() !== m.label) {
        const r = await api('PATCH', `/api/meta-keys/${encodeURIComponent(m.id)}`, { label: label.value.trim() });
        if (!r.ok) return note.show(r.error);
      }
      announce('Combined key saved');
      view.rerender();
    });
  });
  return form;
}

// ---- Right now ------------------------------------------------------------------

// GET /api/keys/:id and /api/meta-keys/:id report a key's window and lanes. Until the server has
// them (404 "no such endpoint" or 405), the page shows "—" and stops asking. The lanes in use come
// live from the key's stream (/lanes, the same events as GET /v1/key/lanes) while it is connected,
// and the usage from /usage, which the gates write every 30 seconds.
const missing = { keys: false, 'meta-keys': false };

const USAGE_EVERY = 60000;

export async function renderNow(ctx, view) {
  const [keys, metas] = await Promise.all([get('/api/keys'), get('/api/meta-keys')]);
  const items = [
    ...keys.map((k) => ({ id: k.id, kind: 'keys', name: k.name, type: 'key', active: k.isActive })),
    ...metas.map((m) => ({ id: m.id, kind: 'meta-keys', name: m.label || 'unnamed', type: 'combined key', active: m.isActive })),
  ];
  if (!items.length) {
    view.fill('now', h('p', { class: 'empty' }, 'No keys yet. ', h('a', { href: '#/keys' }, 'Create one'), '.'));
    return;
  }
  const rows = items.map((it) => {
    const cells = {
      window: h('td', { class: 'now-window' }, '—'), when: h('td', { class: 'now-when' }, '—'),
      lanes: h('span', { class: 'now-lanes-count' }, '—'), flights: h('ul', { class: 'now-flights small muted' }),
      day: h('td', { class: 'now-usage-24h' }, '—'), week: h('td', { class: 'now-usage-7d' }, '—'),
    };
    return { it, cells, stream: null, el: h('tr', { class: 'now-row', dataset: { id: it.id } },
      h('th', { scope: 'row' }, it.name, h('span', { class: 'small muted' }, ` ${it.type}`), it.active ? '' : badge('revoked', 'off')),
      cells.window, cells.when, h('td', { class: 'now-lanes num' }, cells.lanes, cells.flights), cells.day, cells.week) };
  });
  const heads = ['Key', 'Window', 'Closes / next opens', 'Lanes in use', 'Last 24 h', 'Last 7 days'];
  view.fill('now', h('div', { class: 'scroll' }, h('table', { class: 'now-table' },
    h('thead', {}, h('tr', {}, heads.map((t, i) => h('th', { scope: 'col', class: i === 3 ? 'num' : null }, t)))),
    h('tbody', {}, rows.map((r) => r.el)))));

  const clock = document.getElementById('now-clock');
  const refresh = async () => {
    if (document.hidden || view.stale()) return;
    clock.textContent = `It is ${pad2(utcHour())}:${pad2(new Date().getUTCMinutes())} UTC.`;
    await Promise.all(rows.map(async (row) => {
      const { it, cells } = row;
      if (missing[it.kind]) return;
      const r = await api('GET', `/api/${it.kind}/${encodeURIComponent(it.id)}`);
      if (!r.ok) {
        if (r.status === 405 || (r.status === 404 && /no such endpoint/i.test(r.error))) missing[it.kind] = true;
        cells.window.textContent = cells.when.textContent = cells.lanes.textContent = '—';
        return;
      }
      const d = r.data;
      cells.window.replaceChildren(d.windowOpen ? badge('open', 'ok') : badge('closed', 'off'));
      const at = d.windowOpen ? d.closesAt : d.nextOpensAt;
      cells.when.textContent = at ? `${d.windowOpen ? 'closes' : 'opens'} at ${when(at)}, ${inDuration(at)}` : '—';
      if (!streaming(row)) cells.lanes.textContent = `${d.lanesInUse} of ${d.lanes}`;
    }));
  };
  const refreshUsage = async () => {
    if (document.hidden || view.stale()) return;
    await Promise.all(rows.map(({ it, cells }) => showUsage(it, cells)));
  };
  await Promise.all([refresh(), refreshUsage()]);
  for (const row of rows) openStream(row);
  const timer = setInterval(refresh, 5000);
  const usageTimer = setInterval(refreshUsage, USAGE_EVERY);
  const onVisible = () => { refresh(); refreshUsage(); };
  document.addEventListener('visibilitychange', onVisible);
  return () => {
    clearInterval(timer);
    clearInterval(usageTimer);
    document.removeEventListener('visibilitychange', onVisible);
    for (const row of rows) if (row.stream) row.stream.close();
  };
}

const streaming = (row) => row.stream && row.stream.readyState === EventSource.OPEN;

// openStream follows the key's lanes stream: every event rewrites the lanes in use and the
// requests in flight. EventSource reconnects by itself after a dropped connection; a refusal
// (an answer that is not a stream) closes it, and the 5-second status refresh takes over.
function openStream(row) {
  const { it, cells } = row;
  if (missing[it.kind]) return;
  const es = new EventSource(`/api/${it.kind}/${encodeURIComponent(it.id)}/lanes`);
  row.stream = es;
  // data-stream on the row says whether the lanes are live (open), or the browser is reconnecting.
  es.addEventListener('open', () => { row.el.dataset.stream = 'open'; });
  es.addEventListener('error', () => { row.el.dataset.stream = es.readyState === EventSource.CLOSED ? 'closed' : 'reconnecting'; });
  es.addEventListener('lanes', (ev) => {
    let d;
    try { d = JSON.parse(ev.data); } catch { return; }
    cells.lanes.textContent = `${d.lanesInUse} of ${d.lanes}`;
    cells.flights.replaceChildren(...(d.inFlight || []).map((f) => h('li', {},
      `${f.model} · ${f.endpoint} · since ${new Date(f.startedAt).toLocaleTimeString()}`)));
  });
}

// showUsage sums the key's hourly usage over the last 7 days and its last 24 hours.
async function showUsage(it, cells) {
  const from = new Date(Date.now() - 7 * 24 * 3600e3).toISOString();
  const r = await api('GET', `/api/${it.kind}/${encodeURIComponent(it.id)}/usage?from=${encodeURIComponent(from)}`);
  if (!r.ok) {
    cells.day.textContent = cells.week.textContent = '—';
    return;
  }
  // The 24 hourly rows up to and including the hour under way.
  const dayFrom = Math.floor(Date.now() / 3600e3) * 3600e3 - 23 * 3600e3;
  fillUsage(cells.day, sumUsage(r.data.filter((u) => Date.parse(u.hour) >= dayFrom)));
  fillUsage(cells.week, sumUsage(r.data));
}

function sumUsage(rows) {
  const t = { requests: 0, input: 0, output: 0, refused: 0, reasons: {} };
  for (const u of rows) {
    t.requests += u.admitted;
    t.input += u.inputTokens;
    t.output += u.outputTokens;
    for (const [reason, n] of Object.entries(u.refused || {})) {
      t.refused += n;
      t.reasons[reason] = (t.reasons[reason] || 0) + n;
    }
  }
  return t;
}

const count = (n) => n.toLocaleString('en-US');

function fillUsage(cell, t) {
  Object.assign(cell.dataset, { requests: t.requests, input: t.input, output: t.output, refused: t.refused });
  const reasons = Object.entries(t.reasons).sort().map(([r, n]) => `${r.replace(/_/g, ' ')} ${count(n)}`).join(', ');
  cell.replaceChildren(
    h('span', { class: 'now-requests' }, `${count(t.requests)} request${t.requests === 1 ? '' : 's'}`),
    h('br'),
    h('span', { class: 'small' }, `${count(t.input)} in / ${count(t.output)} out tokens`),
    h('br'),
    h('span', { class: `small ${t.refused ? 'warn-text' : 'muted'}`, title: reasons || null },
      `${count(t.refused)} refused${reasons ? ` (${reasons})` : ''}`));
}

// ---- Connect your agent -------------------------------------------------------------

export async function renderConnect(ctx, view, keyId) {
  const [keys, metas, { pools, subs }] = await Promise.all([get('/api/keys'), get('/api/meta-keys'), loadSubscriptions()]);
  const subsById = new Map(subs.map((s) => [s.id, s]));
  const modelOfSlug = new Map(pools.map((p) => [p.slug, p.modelId]));
  // The models a key holds: its pool's model; for a combined key, those of its lane members.
  const choices = [
    ...keys.filter((k) => k.isActive).map((k) => {
      const s = subsById.get(k.subscriptionId);
      return { id: k.id, name: `${k.name} (key)`, secret: k.apiKey, models: s ? [s.pool.modelId] : [] };
    }),
    ...metas.filter((m) => m.isActive).map((m) => ({ id: m.id, name: `${m.label || 'unnamed'} (combined key)`, secret: m.token,
      models: [...new Set(m.members.filter((x) => x.role === 'lane').map((x) => modelOfSlug.get(x.poolSlug)).filter(Boolean))] })),
  ];
  if (!choices.length) {
    view.fill('connect', h('p', { class: 'empty' }, 'You need an active key first. ', h('a', { href: '#/keys' }, 'Create a key'), '.'));
    return;
  }
  const keySel = h('select', { id: 'connect-key' }, choices.map((c) => h('option', { value: c.id, selected: c.id === keyId }, c.name)));
  const modelSel = h('select', { id: 'connect-model' });
  const out = h('div', { class: 'snippets' });
  const origin = location.origin;

  const draw = () => {
    const c = choices.find((x) => x.id === keySel.value) || choices[0];
    const prev = modelSel.value;
    modelSel.replaceChildren(...c.models.map((mo) => h('option', { value: mo, selected: mo === prev }, mo)));
    const model = modelSel.value || 'MODEL';
    const key = c.secret;
    out.replaceChildren(
      snippet('Claude Code', 'snippet-claude', 'Shell; Claude Code speaks the messages format to /compat.',
        `export ANTHROPIC_BASE_URL=${origin}/compat\nexport ANTHROPIC_API_KEY=${key}\nexport ANTHROPIC_DEFAULT_HAIKU_MODEL=${model}\nclaude --model ${model}`),
      snippet('Codex CLI — ~/.codex/config.toml', 'snippet-codex-config', 'Codex speaks the Responses API to /v1.',
        `model = "${model}"\nmodel_provider = "timeblock"\n\n[model_providers.timeblock]\nname = "Timeblock"\nbase_url = "${origin}/v1"\nenv_key = "TIMEBLOCK_API_KEY"\nwire_api = "responses"`),
      snippet('Codex CLI — run', 'snippet-codex-run', null,
        `export TIMEBLOCK_API_KEY=${key}\ncodex exec --skip-git-repo-check "Say hello"`),
      snippet('Gemini CLI — ~/.gemini/settings.json', 'snippet-gemini-settings', 'Tells Gemini CLI the key is an API key; without it, it will not start against another base URL.',
        `{"security": {"auth": {"selectedType": "gemini-api-key"}}}`),
      snippet('Gemini CLI — run', 'snippet-gemini', 'Shell; Gemini CLI speaks the Gemini API to /gemini. Always name the model.',
        `export GOOGLE_GEMINI_BASE_URL=${origin}/gemini\nexport GEMINI_API_KEY=${key}\ngemini --model ${model}`),
      snippet('OpenAI SDK (Python)', 'snippet-openai-py', null,
        `from openai import OpenAI\n\nclient = OpenAI(base_url="${origin}/v1", api_key="${key}")\nr = client.chat.completions.create(model="${model}", messages=[{"role": "user", "content": "Say hello"}])\nprint(r.choices[0].message.content)`),
      snippet('OpenAI SDK (JavaScript)', 'snippet-openai-js', null,
        `import OpenAI from "openai";\n\nconst client = new OpenAI({ baseURL: "${origin}/v1", apiKey: "${key}" });\nconst r = await client.chat.completions.create({ model: "${model}", messages: [{ role: "user", content: "Say hello" }] });\nconsole.log(r.choices[0].message.content);`),
      snippet('Anthropic SDK (Python)', 'snippet-anthropic-py', null,
        `from anthropic import Anthropic\n\nclient = Anthropic(base_url="${origin}/compat", api_key="${key}")\nm = client.messages.create(model="${model}", max_tokens=1024, messages=[{"role": "user", "content": "Say hello"}])\nprint(m.content[0].text)`),
      snippet('Anthropic SDK (JavaScript)', 'snippet-anthropic-js', null,
        `import Anthropic from "@anthropic-ai/sdk";\n\nconst client = new Anthropic({ baseURL: "${origin}/compat", apiKey: "${key}" });\nconst m = await client.messages.create({ model: "${model}", max_tokens: 1024, messages: [{ role: "user", content: "Say hello" }] });\nconsole.log(m.content[0].text);`),
      snippet('Google Gen AI SDK (Python)', 'snippet-genai-py', null,
        `from google import genai\n\nclient = genai.Client(api_key="${key}", http_options={"base_url": "${origin}/gemini"})\nr = client.models.generate_content(model="${model}", contents="Say hello")\nprint(r.text)`));
  };
  keySel.addEventListener('change', draw);
  modelSel.addEventListener('change', draw);
  draw();
  view.fill('connect',
    h('div', { class: 'card inline-form' }, field('Key', keySel), field('Model', modelSel, 'A model the key holds.')),
    h('p', { class: 'notice small' }, 'These snippets contain your whole key: paste them only where you would keep a password. ',
      'Requests are admitted only in the key\'s UTC hours.'),
    out);
}

function snippet(title, id, note, text) {
  return h('div', { class: 'card snippet' },
    h('div', { class: 'card-head' }, h('h2', {}, title), copyButton(() => text)),
    note ? h('p', { class: 'small muted' }, note) : null,
    h('pre', { id, tabindex: '0' }, h('code', {}, text)));
}
