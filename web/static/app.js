// xmq dashboard: a single page, hash-routed, built with the DOM API (never
// innerHTML with data: client ids and topics come from the network).
import { MQTTClient } from './mqtt.js';

const API = '/api/v1';
const app = document.getElementById('app');

const state = {
  me: null,          // {user, role, auth, csrf_token}
  overview: null,    // the last GET /overview
  cleanup: [],       // functions that stop the current page's timers
  mqtt: null,        // the MQTT client page's connection, kept across pages
  mqttLog: [],       // messages received on it, newest first
  mqttSubs: [],      // {filter, qos}
  range: '5m',       // the overview charts' span: a key of RANGES
  clustered: undefined, // whether this broker is a node of a cluster (the overview's cluster_node); asked once
};

// RANGES are the overview charts' spans, from the hour of one-second
// samples and the day of one-minute points the server keeps: points,
// seconds a point and the button's label.
const RANGES = {
  '5m': { history: 300, step: 1, label: '5 min' },
  '1h': { history: 240, step: 15, label: '1 hour' },
  '24h': { history: 720, step: 120, label: '24 hours' },
};

// ---------- helpers ----------

// h builds an element: h('div', {class: 'x', onclick: f}, child, 'text').
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'value') el.value = v;
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const svgNS = 'http://www.w3.org/2000/svg';
function icon(d) {
  const s = document.createElementNS(svgNS, 'svg');
  s.setAttribute('viewBox', '0 0 24 24');
  s.setAttribute('fill', 'none');
  s.setAttribute('stroke', 'currentColor');
  s.setAttribute('stroke-width', '2');
  s.setAttribute('stroke-linecap', 'round');
  s.setAttribute('stroke-linejoin', 'round');
  for (const part of d.split('|')) {
    const p = document.createElementNS(svgNS, 'path');
    p.setAttribute('d', part);
    s.append(p);
  }
  return s;
}

const ICONS = {
  overview: 'M3 13h8V3H3z|M13 21h8V11h-8z|M13 3v6h8V3z|M3 21h8v-6H3z',
  clients: 'M17 21v-2a4 4 0 0 0-4-4H5a4 4 0 0 0-4 4v2|M9 11a4 4 0 1 0 0-8 4 4 0 0 0 0 8|M23 21v-2a4 4 0 0 0-3-3.87|M16 3.13a4 4 0 0 1 0 7.75',
  subscriptions: 'M4 11a9 9 0 0 1 9 9|M4 4a16 16 0 0 1 16 16|M5 19h.01',
  retained: 'M19 21l-7-5-7 5V5a2 2 0 0 1 2-2h10a2 2 0 0 1 2 2z',
  banned: 'M12 22a10 10 0 1 0 0-20 10 10 0 0 0 0 20|M4.93 4.93l14.14 14.14',
  bridges: 'M4 18V9|M20 18V9|M2 9h20|M4 13c4 0 5-4 8-4s4 4 8 4',
  nodes: 'M5 3h14v6H5z|M5 15h14v6H5z|M12 9v6|M8 6h.01|M8 18h.01',
  mqtt: 'M22 2L11 13|M22 2l-7 20-4-9-9-4 20-7z',
  traces: 'M22 12h-4l-3 9L9 3l-3 9H2',
  audit: 'M14 2H6a2 2 0 0 0-2 2v16a2 2 0 0 0 2 2h12a2 2 0 0 0 2-2V8z|M14 2v6h6|M8 13h8|M8 17h8',
  users: 'M16 21v-2a4 4 0 0 0-4-4H5a4 4 0 0 0-4 4v2|M8.5 11a4 4 0 1 0 0-8 4 4 0 0 0 0 8|M17 11l2 2 4-4',
  account: 'M15.5 7.5l3 3L22 7l-3-3|M21 2l-9.6 9.6|M7.5 22a5.5 5.5 0 1 0 0-11 5.5 5.5 0 0 0 0 11',
};

const fmtInt = (n) => (n ?? 0).toLocaleString('en-US');
function fmtNum(n) {
  n = n || 0;
  if (n >= 1e9) return (n / 1e9).toFixed(1) + 'G';
  if (n >= 1e6) return (n / 1e6).toFixed(1) + 'M';
  if (n >= 1e4) return (n / 1e3).toFixed(1) + 'k';
  if (n >= 100 || Number.isInteger(n)) return Math.round(n).toLocaleString('en-US');
  return n.toFixed(1);
}
function fmtBytes(n) {
  n = n || 0;
  const u = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i === 0 ? Math.round(n) : n.toFixed(1)) + ' ' + u[i];
}
function fmtDuration(s) {
  s = Math.max(0, Math.floor(s));
  const d = Math.floor(s / 86400), hr = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
  if (d) return `${d}d ${hr}h`;
  if (hr) return `${hr}h ${m}m`;
  if (m) return `${m}m ${s % 60}s`;
  return `${s}s`;
}
function fmtSince(iso) {
  if (!iso) return '';
  return fmtDuration((Date.now() - new Date(iso).getTime()) / 1000) + ' ago';
}
const fmtTime = (d) => d.toLocaleTimeString('en-GB', { hour12: false });
function fmtDate(iso) {
  return iso ? new Date(iso).toLocaleString() : '';
}

// meter is a bar showing used against limit, coloured past 75% and 90%.
function meter(used, limit) {
  const f = limit > 0 ? Math.min(used / limit, 1) : 0;
  const bar = h('div', { class: 'meter' + (f >= 0.9 ? ' err' : f >= 0.75 ? ' warn' : '') }, h('i', {}));
  bar.firstChild.style.width = (f * 100).toFixed(1) + '%';
  return bar;
}

// certLeft says how long a listener's certificate has left.
function certLeft(iso) {
  if (!iso) return null;
  const days = (new Date(iso).getTime() - Date.now()) / 86400000;
  const cls = days < 3 ? 'err' : days < 14 ? 'warn' : 'on';
  const text = days < 0 ? 'expired' : days < 1 ? `${Math.max(Math.round(days * 24), 0)} h left` : `${Math.floor(days)} days left`;
  return h('span', { class: 'badge ' + cls, title: 'certificate valid until ' + fmtDate(iso) }, text);
}

function toast(msg, isErr) {
  let box = document.querySelector('.toasts');
  if (!box) {
    box = h('div', { class: 'toasts', 'aria-live': 'polite' });
    document.body.append(box);
  }
  const t = h('div', { class: 'toast' + (isErr ? ' err' : ''), role: 'status' }, msg);
  box.append(t);
  while (box.children.length > 4) box.firstChild.remove();
  setTimeout(() => t.remove(), isErr ? 5000 : 2500);
}

// modal shows a dialog of body's elements and resolves true when the user
// confirms (OK, or Enter in one of its inputs); its first input, else OK,
// has the focus.
function modal(body, okLabel, okClass = 'danger solid') {
  return new Promise((resolve) => {
    const close = (v) => { back.remove(); resolve(v); };
    const back = h('div', { class: 'modal-back', onclick: (e) => { if (e.target === back) close(false); } },
      h('form', {
        class: 'panel modal', role: 'dialog', 'aria-modal': 'true',
        onsubmit: (e) => { e.preventDefault(); close(true); },
      },
      ...body,
      h('div', { class: 'actions' },
        h('button', { id: 'confirm-cancel', type: 'button', onclick: () => close(false) }, 'Cancel'),
        h('button', { id: 'confirm-ok', type: 'submit', class: okClass }, okLabel))));
    document.body.append(back);
    (back.querySelector('input') || back.querySelector('#confirm-ok')).focus();
  });
}

// confirmModal asks a yes-or-no question.
function confirmModal(text, okLabel) {
  return modal([h('p', {}, text)], okLabel);
}

class APIError extends Error {
  constructor(status, body) {
    super(body?.error?.message || `HTTP ${status}`);
    this.status = status;
    this.code = body?.error?.code;
  }
}

async function api(method, path, body) {
  const opts = { method, headers: {}, credentials: 'same-origin' };
  if (method !== 'GET') opts.headers['X-CSRF-Token'] = state.me?.csrf_token || '';
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const res = await fetch(API + path, opts);
  let data = null;
  try { data = await res.json(); } catch { /* empty body */ }
  if (!res.ok) {
    if (res.status === 401 && path !== '/auth/login') {
      state.me = null;
      route();
    }
    throw new APIError(res.status, data);
  }
  return data;
}

function every(ms, fn) {
  let stopped = false;
  let timer;
  const tick = async () => {
    try { await fn(); } catch (e) { if (e.status !== 401) console.warn('refresh failed:', e.message); }
    if (!stopped) timer = setTimeout(tick, ms);
  };
  tick();
  state.cleanup.push(() => { stopped = true; clearTimeout(timer); });
}

// latest wraps a page's fetch so that only the answer to the newest call
// is rendered: an older answer (a periodic refresh that started before the
// user typed or paged) arriving late would show a stale page and cursor.
function latest(fetch) {
  let seq = 0;
  return async (...args) => {
    const mine = ++seq;
    const res = await fetch(...args);
    return mine === seq ? res : null;
  };
}

const isAdmin = () => state.me?.role === 'admin';

// dashboardLogin asks for the MQTT user name and short-lived password of
// this dashboard session: the broker accepts them with this user's role
// (a viewer may read $SYS, an admin anything), anonymous access or not.
async function dashboardLogin() {
  const c = await api('GET', '/auth/mqtt');
  return { username: c.username, password: c.password };
}

// ---------- shell ----------

const PAGES = [
  ['overview', 'Overview'],
  ['nodes', 'Nodes'],
  ['clients', 'Clients'],
  ['subscriptions', 'Subscriptions'],
  ['retained', 'Retained'],
  ['banned', 'Banned'],
  ['bridges', 'Bridges'],
  ['traces', 'Traces'],
  ['mqtt', 'MQTT client'],
  ['audit', 'Audit'],
  ['users', 'Users'],
  ['account', 'Account'],
];

// ADMIN_PAGES are the pages whose API refuses viewers.
const ADMIN_PAGES = ['audit', 'users'];

function shell(active, content) {
  // The Nodes page exists in a cluster only; the audit log and the users
  // are for admins.
  const pages = PAGES.filter(([id]) => (id !== 'nodes' || state.clustered) && (!ADMIN_PAGES.includes(id) || isAdmin()));
  const nav = h('nav', { class: 'nav' }, pages.map(([id, label]) =>
    h('a', { href: '#/' + id, class: active === id ? 'active' : '', id: 'nav-' + id, title: label },
      icon(ICONS[id]), h('span', {}, label))));
  const foot = h('div', { class: 'foot' },
    h('div', { class: 'who' }, state.me.user, ' · ', h('span', { class: 'muted' }, state.me.role)),
    state.me.auth === 'session'
      ? h('button', { class: 'small', id: 'logout', onclick: logout }, 'Log out') : null);
  return h('div', { class: 'shell' },
    h('aside', { class: 'side' },
      h('div', { class: 'brand' }, h('img', { src: '/static/favicon.svg', alt: '' }), 'xmq', h('small', {}, 'broker')),
      nav, foot),
    h('main', { class: 'main' }, content));
}

function pageHead(title, sub, ...actions) {
  return h('div', { class: 'page-head' },
    h('div', {}, h('h1', {}, title), sub ? h('div', { class: 'sub' }, sub) : null),
    h('div', { class: 'row' }, actions));
}

async function logout() {
  try { await api('POST', '/auth/logout'); } catch { /* gone anyway */ }
  state.me = null;
  if (state.mqtt) state.mqtt.close('logged out');
  location.hash = '#/overview';
  route();
}

// ---------- login ----------

function loginPage() {
  const err = h('div', { class: 'error-text', id: 'login-error' });
  const user = h('input', { id: 'login-user', autocomplete: 'username', value: 'admin' });
  const pass = h('input', { id: 'login-pass', type: 'password', autocomplete: 'current-password', required: true });
  const form = h('form', {
    onsubmit: async (e) => {
      e.preventDefault();
      err.textContent = '';
      try {
        // An empty user name logs in with an API key (its role: viewer or admin).
        const body = user.value ? { username: user.value, password: pass.value } : { api_key: pass.value };
        state.me = await api('POST', '/auth/login', body);
        route();
      } catch (ex) {
        err.textContent = ex.message;
        pass.select();
      }
    },
  },
  h('div', { class: 'field' }, h('label', { for: 'login-user' }, 'User'), user),
  h('div', { class: 'field' }, h('label', { for: 'login-pass' }, 'Password'), pass),
  err,
  h('button', { class: 'primary', id: 'login-submit', type: 'submit' }, 'Log in'));
  app.replaceChildren(h('div', { class: 'login' },
    h('div', { class: 'panel' },
      h('div', { class: 'brand' }, h('img', { src: '/static/favicon.svg', alt: '' }), 'xmq', h('small', {}, 'dashboard')),
      form,
      h('p', { class: 'muted' }, 'The admin password is XMQ_ADMIN_PASSWORD, web.admin_password_hash, or the one xmq printed in its log at first start; '
        + 'other users are those an admin added on the Users page. '
        + 'With an API key, leave the user empty and paste the key as the password.'))));
  pass.focus();
}

// ---------- overview ----------

// drawChart plots series [{name, values, color, fill}] on a canvas, scaled
// for the screen's pixel ratio: a light grid, the y axis' quarters, and one
// set of x labels, the clock times of round instants within the span (a
// start label and a "now" label besides them used to read as two axes).
// opts.times are the points' times (Unix ms), opts.spanMs the window shown
// and opts.hover the index of the point under the pointer, which gets a
// vertical line and dots. The drawn geometry is kept on the canvas for
// the pointer's handler (chartHover).
function drawChart(canvas, series, opts = {}) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth, hgt = canvas.clientHeight;
  if (!w || !hgt) return;
  canvas.width = w * dpr;
  canvas.height = hgt * dpr;
  const ctx = canvas.getContext('2d');
  ctx.scale(dpr, dpr);
  ctx.clearRect(0, 0, w, hgt);
  const times = opts.times || [];
  const end = times.length ? times[times.length - 1] : Date.now();
  const spanMs = opts.spanMs || 3600e3;
  const top = niceTop(Math.max(...series.flatMap((s) => s.values), 0), opts.integer);
  const padL = 44, padB = 18, padT = 6;
  const ph = hgt - padB - padT, pw = w - padL - 8;
  const x = (t) => padL + pw * (t - (end - spanMs)) / spanMs;
  const y = (v) => padT + ph - ph * v / top;
  ctx.font = '11px system-ui, sans-serif';
  ctx.fillStyle = '#6b7085';
  ctx.strokeStyle = '#eceef5';
  ctx.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const yy = padT + ph - ph * i / 4;
    ctx.beginPath();
    ctx.moveTo(padL, Math.round(yy) + 0.5);
    ctx.lineTo(w - 4, Math.round(yy) + 0.5);
    ctx.stroke();
    ctx.textAlign = 'right';
    ctx.fillText(fmtAxis(top * i / 4, top), padL - 6, yy + 4);
  }
  // x labels: a round tick interval giving four to eight labels.
  const tick = [60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600].map((s) => s * 1000).find((s) => spanMs / s <= 8) || 21600e3;
  ctx.textAlign = 'center';
  for (let t = Math.ceil((end - spanMs) / tick) * tick; t <= end; t += tick) {
    const xx = x(t);
    if (xx < padL + 14 || xx > w - 18) continue;
    ctx.fillText(new Date(t).toLocaleTimeString('en-GB', { hour: '2-digit', minute: '2-digit', hour12: false }), xx, hgt - 4);
  }
  for (const s of series) {
    if (s.values.length < 1) continue;
    ctx.beginPath();
    s.values.forEach((v, i) => (i ? ctx.lineTo(x(times[i]), y(v)) : ctx.moveTo(x(times[i]), y(v))));
    ctx.strokeStyle = s.color;
    ctx.lineWidth = 2;
    ctx.lineJoin = 'round';
    ctx.stroke();
    if (s.fill) {
      ctx.lineTo(x(times[s.values.length - 1]), padT + ph);
      ctx.lineTo(x(times[0]), padT + ph);
      ctx.closePath();
      ctx.fillStyle = s.fill;
      ctx.fill();
    }
  }
  const i = opts.hover;
  if (i !== undefined && i !== null && i < times.length) {
    const xx = Math.round(x(times[i])) + 0.5;
    ctx.strokeStyle = '#9aa0b4';
    ctx.lineWidth = 1;
    ctx.beginPath();
    ctx.moveTo(xx, padT);
    ctx.lineTo(xx, padT + ph);
    ctx.stroke();
    for (const s of series) {
      ctx.fillStyle = s.color;
      ctx.beginPath();
      ctx.arc(xx, y(s.values[i]), 3.5, 0, 2 * Math.PI);
      ctx.fill();
    }
  }
  canvas.chart = { series, opts, times, x, padL, w };
  // A refresh under a resting pointer keeps its line and tip.
  if (opts.hover === undefined && canvas.rehover) canvas.rehover();
}

// fmtAxis writes a y axis label with the decimals its quarters need
// (fmtNum's one decimal turned 0.25 into 0.3).
function fmtAxis(v, top) {
  if (top >= 4 && Number.isInteger(v)) return fmtNum(v);
  if (top >= 1e4) return fmtNum(v);
  return String(Math.round(v * 1000) / 1000);
}

// swatch is a series' colour square; set through the style object, since
// the page's Content-Security-Policy refuses inline style attributes.
function swatch(color) {
  const i = h('i', {});
  i.style.background = color;
  return i;
}

// chartHover makes a chart answer the pointer: the point nearest to it in
// time gets a line (drawChart) and tip shows its time and each series'
// value; leaving the chart hides them. fmt writes a value.
function chartHover(canvas, tip, fmt) {
  let px = null; // the pointer's x on the canvas; null: not over it
  const show = () => {
    const c = canvas.chart;
    if (!c || !c.times.length || px === null) return;
    let best = 0;
    c.times.forEach((t, i) => { if (Math.abs(c.x(t) - px) < Math.abs(c.x(c.times[best]) - px)) best = i; });
    drawChart(canvas, c.series, { ...c.opts, hover: best });
    tip.replaceChildren(h('div', { class: 'tip-time' }, new Date(c.times[best]).toLocaleString('en-GB', { hour12: false })),
      ...c.series.map((s) => h('div', { class: 'tip-row', dataset: { series: s.name } },
        swatch(s.color), s.name, ' ', h('b', {}, fmt(s.values[best])))));
    tip.classList.remove('hidden');
    const left = c.x(c.times[best]);
    tip.style.left = (left > c.w / 2 ? left - tip.offsetWidth - 10 : left + 10) + 'px';
  };
  const hide = () => {
    px = null;
    tip.classList.add('hidden');
    const c = canvas.chart;
    if (c) drawChart(canvas, c.series, { ...c.opts, hover: null });
  };
  canvas.rehover = show;
  canvas.addEventListener('mousemove', (ev) => { px = ev.clientX - canvas.getBoundingClientRect().left; show(); });
  canvas.addEventListener('mouseleave', hide);
}

// niceTop rounds a chart's maximum up so that its quarters are round
// numbers (1, 2, 2.5 or 5 times a power of ten; whole numbers for counts).
function niceTop(max, integer) {
  const rough = Math.max(max * 1.1, integer ? 4 : 1) / 4;
  const mag = Math.pow(10, Math.floor(Math.log10(rough)));
  let step = [1, 2, 2.5, 5, 10].map((f) => f * mag).find((s) => s >= rough);
  if (integer) step = Math.max(1, Math.ceil(step));
  return step * 4;
}

function statCard(id, label, primary) {
  return h('div', { class: 'panel stat' + (primary ? ' primary' : '') },
    h('div', { class: 'label' }, label),
    h('div', { class: 'value', id: 'stat-' + id }, '–'),
    h('div', { class: 'hint', id: 'hint-' + id }, '\u00a0'));
}

function setText(id, text) {
  const el = document.getElementById(id);
  if (!el || el.textContent === text) return;
  el.textContent = text;
  el.classList.remove('flash');
  void el.offsetWidth; // restart the animation
  el.classList.add('flash');
}

function overviewPage() {
  const connChart = h('canvas', { class: 'chart', id: 'chart-connections' });
  const msgChart = h('canvas', { class: 'chart', id: 'chart-messages' });
  const connTip = h('div', { class: 'chart-tip hidden', id: 'tip-connections' });
  const msgTip = h('div', { class: 'chart-tip hidden', id: 'tip-messages' });
  chartHover(connChart, connTip, fmtInt);
  chartHover(msgChart, msgTip, (v) => (v >= 100 ? fmtNum(v) : String(Math.round(v * 100) / 100)) + '/s');
  const rangeButtons = h('div', { class: 'row range', id: 'chart-range' }, Object.entries(RANGES).map(([key, r]) =>
    h('button', {
      class: 'small' + (state.range === key ? ' primary' : ''), dataset: { range: key },
      onclick: async () => {
        state.range = key;
        for (const b of rangeButtons.children) b.className = 'small' + (b.dataset.range === key ? ' primary' : '');
        try { render(state.overview = await api('GET', overviewPath())); } catch (e) { toast(e.message, true); }
      },
    }, r.label)));
  const nodeBody = h('dl', { class: 'kv node', id: 'node-card' });
  const alarmsBody = h('tbody', { id: 'alarms-body' });
  const alarmsCount = h('span', { class: 'badge', id: 'alarms-count' }, '–');
  const listenersBody = h('tbody', {});
  const reasonsBody = h('tbody', {});
  const sysBody = h('tbody', {}, h('tr', {}, h('td', { class: 'empty', colspan: 2 }, 'Connecting to the broker over WebSocket…')));
  const sysState = h('span', { class: 'badge off', id: 'sys-state' }, 'connecting');
  const sub = h('span', { id: 'ov-sub' }, '');
  const content = [
    pageHead('Overview', sub),
    // The conditions of the Prometheus alert rules that hold now (GET
    // /alarms): what needs an operator, before the figures.
    h('div', { class: 'panel block', id: 'alarms' },
      h('div', { class: 'chart-head' }, h('h2', {}, 'Alarms'), alarmsCount),
      h('div', { class: 'table-wrap' }, h('table', {}, alarmsBody))),
    h('div', { class: 'grid stats' },
      statCard('connected', 'Connections', true), statCard('sessions', 'Sessions'),
      statCard('msgin', 'Messages in/s'), statCard('msgout', 'Messages out/s'),
      statCard('dropped', 'Dropped/s'),
      statCard('bytesin', 'Bytes in/s'), statCard('bytesout', 'Bytes out/s'),
      statCard('subs', 'Subscriptions'), statCard('retained', 'Retained'),
      statCard('authfail', 'Auth failures')),
    h('div', { class: 'chart-head charts-head' }, h('span', { class: 'muted' }, 'The last hour a second a point, the last day a minute a point (kept across restarts in the data directory)'), rangeButtons),
    h('div', { class: 'grid charts' },
      h('div', { class: 'panel' },
        h('div', { class: 'chart-head' }, h('h2', {}, 'Connections'),
          h('div', { class: 'legend' }, h('span', {}, h('i', { class: 'sw-accent' }), 'open'))),
        h('div', { class: 'chart-box' }, connChart, connTip)),
      h('div', { class: 'panel' },
        h('div', { class: 'chart-head' }, h('h2', {}, 'Messages per second'),
          h('div', { class: 'legend' },
            h('span', {}, h('i', { class: 'sw-green' }), 'in'),
            h('span', {}, h('i', { class: 'sw-accent' }), 'out'),
            h('span', {}, h('i', { class: 'sw-red' }), 'dropped'))),
        h('div', { class: 'chart-box' }, msgChart, msgTip))),
    h('div', { class: 'grid two' },
      h('div', { class: 'panel' }, h('h2', {}, 'Node'), nodeBody),
      h('div', { class: 'panel' }, h('h2', {}, 'Disconnects and drops'),
        h('div', { class: 'table-wrap' }, h('table', {},
          h('thead', {}, h('tr', {}, h('th', {}, 'Reason'), h('th', { class: 'num' }, 'Count'))),
          reasonsBody)))),
    h('div', { class: 'panel block' }, h('h2', {}, 'Listeners'),
      h('div', { class: 'table-wrap' }, h('table', { id: 'listeners-table' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Name'), h('th', {}, 'Transport'), h('th', {}, 'Address'), h('th', { class: 'num' }, 'Connections'),
          h('th', { class: 'num', title: 'CONNECTs accepted since start' }, 'Connects'),
          h('th', { class: 'num', title: 'connections given up before MQTT: TLS, WebSocket, timeouts, the connection limit' }, 'Failed handshakes'),
          h('th', {}, 'Certificate'))),
        listenersBody))),
    h('div', { class: 'panel' },
      h('div', { class: 'chart-head' }, h('h2', {}, '$SYS topics, live over MQTT'), sysState),
      h('div', { class: 'table-wrap sys' }, h('table', {}, sysBody))),
  ];
  app.replaceChildren(shell('overview', content));
  for (const [cls, color] of [['sw-accent', '#4f46e5'], ['sw-green', '#16a34a'], ['sw-red', '#dc2626']]) {
    for (const el of app.querySelectorAll('.' + cls)) el.style.background = color;
  }

  // The live figures come from $SYS over MQTT: once the feed has given a
  // card its value, the card shows the feed's (data-source="sys") and the
  // API's poll leaves it alone. The API fills the charts, the tables, what
  // $SYS does not carry (auth failures), and every card until the feed
  // delivers or while it is down.
  const fromSys = new Set(); // ids of the elements the $SYS feed owns
  const setAPI = (id, text) => { if (!fromSys.has(id)) setText(id, text); };
  const setSys = (id, text) => {
    if (!fromSys.has(id)) {
      fromSys.add(id);
      const el = document.getElementById(id);
      if (el) { el.dataset.source = 'sys'; el.title = 'live from $SYS over MQTT'; }
    }
    setText(id, text);
  };
  const releaseSys = () => {
    for (const id of fromSys) {
      const el = document.getElementById(id);
      if (el) { delete el.dataset.source; el.title = ''; }
    }
    fromSys.clear();
  };

  const render = (ov) => {
    const t = ov.totals, r = ov.rates;
    sub.textContent = `xmq ${ov.version} · up ${fmtDuration(ov.uptime_seconds)} · ${ov.go_version}`;
    setAPI('stat-connected', fmtInt(t.connected));
    setAPI('hint-connected', `${fmtInt(t.connects)} connects since start`);
    setAPI('stat-sessions', fmtInt(t.sessions));
    setAPI('hint-sessions', `${fmtInt(Math.max(t.sessions - t.connected, 0))} offline`);
    setAPI('stat-msgin', fmtNum(r.messages_in));
    setAPI('hint-msgin', `${fmtInt(t.messages_in)} total`);
    setAPI('stat-msgout', fmtNum(r.messages_out));
    setAPI('hint-msgout', `${fmtInt(t.messages_out)} total`);
    setAPI('stat-bytesin', fmtBytes(r.bytes_in));
    setAPI('hint-bytesin', `${fmtBytes(t.bytes_in)} total`);
    setAPI('stat-bytesout', fmtBytes(r.bytes_out));
    setAPI('hint-bytesout', `${fmtBytes(t.bytes_out)} total`);
    setAPI('stat-subs', fmtInt(t.subscriptions));
    setAPI('hint-subs', `${fmtInt(t.deliveries)} deliveries`);
    setText('stat-retained', fmtInt(t.retained));
    setText('hint-retained', 'messages of clients ($SYS not counted)');
    setAPI('stat-authfail', fmtInt(t.auth_failures));
    setAPI('hint-authfail', 'refused CONNECTs');
    setAPI('stat-dropped', fmtNum(r.dropped));
    setAPI('hint-dropped', `${fmtInt(t.dropped)} total`);
    listenersBody.replaceChildren(...ov.listeners.map((l) => {
      const fails = Object.entries(l.handshake_failures || {}).sort((a, b) => b[1] - a[1]);
      const failed = fails.reduce((n, [, v]) => n + v, 0);
      return h('tr', { dataset: { listener: l.name } },
        h('td', {}, l.name), h('td', {}, h('span', { class: 'badge' }, l.transport)),
        h('td', { class: 'mono' }, l.url || l.address), h('td', { class: 'num' }, fmtInt(l.connections)),
        h('td', { class: 'num' }, fmtInt(l.connects)),
        h('td', { class: 'num', title: fails.map(([k, v]) => `${k.replaceAll('_', ' ')}: ${fmtInt(v)}`).join('\n') || 'none' },
          failed ? fmtInt(failed) : h('span', { class: 'muted' }, '0')),
        h('td', {}, certLeft(l.certificate_not_after) || h('span', { class: 'muted' }, '—')));
    }));
    renderNode(nodeBody, ov.node, ov.limits);
    const rows = [
      ...Object.entries(t.disconnects_by_reason).filter(([, v]) => v > 0).map(([k, v]) => ['disconnect: ' + k.replaceAll('_', ' '), v]),
      ...Object.entries(t.dropped_by_cause).filter(([, v]) => v > 0).map(([k, v]) => ['dropped: ' + k.replaceAll('_', ' '), v]),
    ];
    reasonsBody.replaceChildren(...(rows.length
      ? rows.sort((a, b) => b[1] - a[1]).map(([k, v]) => h('tr', {}, h('td', {}, k), h('td', { class: 'num' }, fmtInt(v))))
      : [h('tr', {}, h('td', { class: 'empty', colspan: 2 }, 'No disconnects or drops yet'))]));
    const hist = ov.history;
    const rg = RANGES[state.range];
    const opts = { times: hist.map((p) => p.t), spanMs: rg.history * rg.step * 1000 };
    drawChart(connChart, [{ name: 'open', values: hist.map((p) => p.connected), color: '#4f46e5', fill: 'rgba(79,70,229,.08)' }], { ...opts, integer: true });
    drawChart(msgChart, [
      { name: 'in', values: hist.map((p) => p.messages_in_rate), color: '#16a34a' },
      { name: 'out', values: hist.map((p) => p.messages_out_rate), color: '#4f46e5' },
      { name: 'dropped', values: hist.map((p) => p.dropped_rate), color: '#dc2626' },
    ], opts);
  };
  const overviewPath = () => `/overview?history=${RANGES[state.range].history}&step=${RANGES[state.range].step}`;
  const renderAlarms = (list) => {
    alarmsCount.className = 'badge ' + (list.some((a) => a.severity === 'critical') ? 'err' : list.length ? 'warn' : 'on');
    alarmsCount.textContent = list.length ? `${list.length} active` : 'none';
    alarmsBody.replaceChildren(...(list.length ? list.map((a) => h('tr', { dataset: { rule: a.rule } },
      h('td', {}, h('span', { class: 'badge ' + (a.severity === 'critical' ? 'err' : 'warn') }, a.severity)),
      h('td', { class: 'soft' }, h('b', {}, a.name.replaceAll('_', ' ') + (a.subject ? ` (${a.subject})` : '')), h('div', { class: 'muted' }, a.rule)),
      h('td', { class: 'soft' }, a.message),
      h('td', { title: fmtDate(a.since) }, 'since ' + fmtSince(a.since))))
      : [h('tr', {}, h('td', { class: 'empty' }, 'None: the store, certificates, cluster, connection limit and queues are well'))]));
  };
  every(2000, async () => {
    const [ov, al] = await Promise.all([api('GET', overviewPath()), api('GET', '/alarms')]);
    state.overview = ov;
    render(ov);
    renderAlarms(al.alarms);
  });
  const onResize = () => state.overview && render(state.overview);
  window.addEventListener('resize', onResize);
  state.cleanup.push(() => window.removeEventListener('resize', onResize));

  // $SYS over MQTT: the dashboard is itself a WebSocket MQTT client,
  // logged in with this session (dashboardLogin).
  const sys = new Map();
  // Gauges go to their card as they are; counters give their card the
  // rate between two updates and their hint the total.
  const SYS_GAUGES = {
    'clients/connected': ['stat-connected', fmtInt],
    'clients/total': ['stat-sessions', fmtInt],
    'clients/disconnected': ['hint-sessions', (n) => `${fmtInt(n)} offline`],
    'subscriptions/count': ['stat-subs', fmtInt],
    // Not retained messages/count: as in Mosquitto it counts the $SYS
    // topics too; the card shows clients' messages, from the API.
  };
  const SYS_COUNTERS = {
    // messages/received and sent count packets of every type (Mosquitto's
    // meaning); the cards are PUBLISH packets.
    'publish/messages/received': ['msgin', fmtNum, fmtInt],
    'publish/messages/sent': ['msgout', fmtNum, fmtInt],
    'bytes/received': ['bytesin', fmtBytes, fmtBytes],
    'bytes/sent': ['bytesout', fmtBytes, fmtBytes],
    'publish/messages/dropped': ['dropped', fmtNum, fmtInt],
  };
  const lastCount = new Map(); // counter → {n, t} of its last live update
  const feed = (key, text, m) => {
    const n = parseInt(text, 10);
    if (Number.isNaN(n)) return;
    const g = SYS_GAUGES[key];
    if (g) { setSys(g[0], g[1](n)); return; }
    const c = SYS_COUNTERS[key];
    if (!c) return;
    const [id, fmtRate, fmtTotal] = c;
    setSys('hint-' + id, `${fmtTotal(n)} total`);
    // A retained copy (sent on subscribing) is as old as the last update:
    // rates are measured between live updates only.
    if (m.retain) return;
    const prev = lastCount.get(key);
    const t = m.time.getTime();
    lastCount.set(key, { n, t });
    if (prev && t - prev.t > 200 && n >= prev.n) setSys('stat-' + id, fmtRate((n - prev.n) * 1000 / (t - prev.t)));
  };
  const start = async () => {
    const ov = state.overview || await api('GET', '/overview');
    const url = pickURL(ov);
    if (!url) {
      sysState.textContent = 'no ws listener';
      sysBody.replaceChildren(h('tr', {}, h('td', { class: 'empty' }, noWebSocketText())));
      return;
    }
    const login = await dashboardLogin();
    const c = new MQTTClient(url, { clientId: 'xmq-dashboard-sys-' + Math.random().toString(16).slice(2, 8), ...login });
    state.cleanup.push(() => c.close('page closed'));
    c.onmessage = (m) => {
      const key = m.topic.replace('$SYS/broker/', '');
      const text = new TextDecoder().decode(m.payload);
      sys.set(key, text);
      feed(key, text, m);
      sysBody.replaceChildren(...[...sys.entries()].sort().map(([k, v]) =>
        h('tr', {}, h('td', { class: 'mono' }, k), h('td', { class: 'num' }, v))));
    };
    c.onclose = (why) => {
      sysState.className = 'badge off';
      sysState.textContent = why;
      releaseSys();
      lastCount.clear();
    };
    try {
      await c.connect();
      sysState.className = 'badge on';
      sysState.textContent = 'live · ' + url;
      await c.subscribe('$SYS/broker/#', 0);
      if (!sys.size) sysBody.replaceChildren(h('tr', {}, h('td', { class: 'empty' }, 'Waiting for the next $SYS update…')));
    } catch (e) {
      sysState.className = 'badge warn';
      sysState.textContent = 'not connected';
      sysBody.replaceChildren(h('tr', {}, h('td', { class: 'empty' }, `MQTT over WebSocket to ${url}: ${e.message}`)));
    }
  };
  start().catch((e) => { sysState.textContent = e.message; });
}

// renderNode fills the node card: what the broker's process uses.
function renderNode(dl, n, limits) {
  if (!n) return;
  const kv = (id, k, ...v) => [h('dt', {}, k), h('dd', { id: 'node-' + id }, ...v)];
  const files = n.open_files !== undefined && n.max_files !== undefined;
  dl.replaceChildren(
    ...kv('cpu', 'CPU', n.cpu_percent !== undefined ? `${n.cpu_percent.toFixed(1)}% of a core` : 'measuring…',
      h('span', { class: 'muted' }, ` · ${n.cpus} cores for Go`)),
    ...kv('rss', 'Memory (RSS)', n.rss_bytes !== undefined ? fmtBytes(n.rss_bytes) : 'not reported here',
      h('span', { class: 'muted' }, ` · Go heap ${fmtBytes(n.heap_bytes)}`),
      n.memory_limit_bytes ? h('span', { class: 'muted' }, ` · limit ${fmtBytes(n.memory_limit_bytes)}`) : null),
    ...kv('files', 'Open files', files ? [`${fmtInt(n.open_files)} of ${fmtInt(n.max_files)}`, meter(n.open_files, n.max_files)] : 'not reported here'),
    ...kv('goroutines', 'Goroutines', fmtInt(n.goroutines)),
    ...kv('store', 'Store on disk', n.store_bytes === undefined ? h('span', { class: 'muted' }, 'none: state in memory')
      : n.store_budget_bytes ? [`${fmtBytes(n.store_bytes)} of ${fmtBytes(n.store_budget_bytes)}`, meter(n.store_bytes, n.store_budget_bytes)]
        : [fmtBytes(n.store_bytes), h('span', { class: 'muted' }, ' · no budget')]),
    ...kv('limit', 'Connection limit', limits?.max_connections ? fmtInt(limits.max_connections) : h('span', { class: 'muted' }, 'none')));
}

// NO_WS is what the MQTT client page says when the broker has no WebSocket
// listener to dial.
const NO_WS = 'no WebSocket listener: add a ws or wss listener to use this page';

// noWebSocketText explains why the page has no MQTT connection.
function noWebSocketText() {
  return location.protocol === 'https:'
    ? 'The broker has no wss listener, and this HTTPS page may not use ws. Add a listener with transport: wss to xmq.yaml to watch $SYS and use the MQTT client here.'
    : 'The broker has no ws or wss listener. Add a listener with transport: ws (or wss) to xmq.yaml to watch $SYS and use the MQTT client here.';
}

// pickURL chooses the listener the page's MQTT client dials: wss on an
// HTTPS page (a browser refuses ws there), else ws, else wss.
function pickURL(ov) {
  const ws = ov.listeners.filter((l) => l.transport === 'ws' && l.url);
  const wss = ov.listeners.filter((l) => l.transport === 'wss' && l.url);
  const order = location.protocol === 'https:' ? [wss] : [ws, wss];
  for (const list of order) if (list.length) return list[0].url;
  return '';
}

// ---------- clients ----------

const clientQuery = { q: '', listener: '', protocol_version: '', connected: '', order: 'asc', limit: 25 };
const clientPaging = newPaging();

function clientsPage() {
  const tbody = h('tbody', {});
  const pager = h('div', { class: 'pager' });
  const search = h('input', {
    type: 'search', id: 'clients-search', placeholder: 'Search client id, user name or address', value: clientQuery.q,
    oninput: () => { clientQuery.q = search.value; resetPaging(clientPaging); refresh(); },
  });
  const sel = (key, options) => h('select', {
    id: 'clients-' + key,
    onchange: (e) => { clientQuery[key] = e.target.value; resetPaging(clientPaging); refresh(); },
  }, options.map(([v, label]) => h('option', { value: v, selected: clientQuery[key] === v }, label)));
  const listenerSel = sel('listener', [['', 'All listeners'], ...(state.overview?.listeners || []).map((l) => [l.name, l.name])]);
  const cols = [
    ['client_id', 'Client id'], ['connected', 'State'], ['username', 'User'], ['listener', 'Listener'],
    ['remote', 'Address'], ['protocol_version', 'MQTT'], ['connected_at', 'Connected'], ['messages', 'Messages in / out', true],
    ['inflight', 'Inflight', true], ['queued', 'Queued', true],
  ];
  // The API lists clients in client id order only (other orders would sort
  // every session on each request): the id column flips the direction.
  const head = h('tr', {}, cols.map(([key, label, num]) => key === 'client_id' ? h('th', {
    class: 'sortable', dataset: { sort: key },
    onclick: () => {
      clientQuery.order = clientQuery.order === 'asc' ? 'desc' : 'asc';
      resetPaging(clientPaging);
      refresh();
    },
  }, label, h('span', { class: 'arrow' })) : h('th', { class: num ? 'num' : '' }, label)), isAdmin() ? h('th', {}) : null);

  const content = [
    pageHead('Clients', h('span', { id: 'clients-count' }, '')),
    h('div', { class: 'panel' },
      h('div', { class: 'toolbar' }, search, listenerSel,
        sel('protocol_version', [['', 'All versions'], ['3', 'MQTT 3.1'], ['4', 'MQTT 3.1.1'], ['5', 'MQTT 5.0']]),
        sel('connected', [['', 'Online and offline'], ['true', 'Online'], ['false', 'Offline']])),
      h('div', { class: 'table-wrap' }, h('table', { id: 'clients-table' }, h('thead', {}, head), tbody)),
      pager),
  ];
  app.replaceChildren(shell('clients', content));

  let paused = false;
  const get = latest(api);
  async function refresh() {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(clientQuery)) if (v !== '') params.set(k, v);
    if (clientPaging.after) params.set('after', clientPaging.after);
    const res = await get('GET', '/clients?' + params);
    if (!res) return;
    for (const th of head.querySelectorAll('th[data-sort]')) {
      th.querySelector('.arrow').textContent = clientQuery.order === 'asc' ? ' ▲' : ' ▼';
    }
    // The page may be gone: this answer came after a navigation.
    const count = document.getElementById('clients-count');
    if (count) count.textContent = matchingText(res);
    tbody.replaceChildren(...(res.items.length ? res.items.map((c) => h('tr', { dataset: { clientId: c.client_id } },
      h('td', { class: 'mono' }, h('a', { href: '#/clients/' + encodeURIComponent(c.client_id) }, c.client_id)),
      h('td', {}, h('span', { class: 'badge ' + (c.connected ? 'on' : 'off') }, c.connected ? 'online' : 'offline')),
      h('td', {}, c.username || h('span', { class: 'muted' }, '—')),
      h('td', {}, c.listener || ''),
      h('td', { class: 'mono' }, c.remote || ''),
      h('td', {}, c.protocol),
      h('td', { title: c.connected_at || '' }, c.connected ? fmtSince(c.connected_at) : ''),
      h('td', { class: 'num', title: c.connected ? `${fmtBytes(c.bytes_in)} in, ${fmtBytes(c.bytes_out)} out` : '' },
        c.connected ? `${fmtInt(c.messages_in)} / ${fmtInt(c.messages_out)}` : ''),
      h('td', { class: 'num' }, fmtInt(c.inflight)),
      h('td', { class: 'num', title: fmtBytes(c.queued_bytes) }, fmtInt(c.queued)),
      isAdmin() ? h('td', { class: 'num' }, c.connected ? h('button', {
        class: 'danger small', dataset: { disconnect: c.client_id },
        onclick: () => disconnect(c.client_id, refresh),
      }, 'Disconnect') : h('button', {
        class: 'danger small', dataset: { remove: c.client_id },
        onclick: () => removeSession(c.client_id, refresh),
      }, 'Remove')) : null))
      : [h('tr', {}, h('td', { class: 'empty', colspan: cols.length + 1 }, res.next ? 'No match in this part of the list: Next searches on'
        : clientQuery.connected === 'false' ? 'No offline sessions: every persistent session has its client connected' : 'No clients match'))]));
    pagerFor(pager, res, clientPaging, refresh);
  }
  every(2000, () => (paused || document.querySelector('.modal-back') ? null : refresh()));
  state.cleanup.push(() => { paused = true; });
}

// removeSession ends a session, online or not: subscriptions and queued
// messages go, and the client id is free for anyone.
async function removeSession(id, after) {
  if (!(await confirmModal(`Remove the session of “${id}”? Its subscriptions and queued messages are discarded; a connected client is disconnected.`, 'Remove'))) return false;
  try {
    await api('DELETE', '/clients/' + encodeURIComponent(id));
    toast(`Removed the session of ${id}`);
  } catch (e) {
    toast(e.message, true);
    return false;
  }
  if (after) await after();
  return true;
}

async function disconnect(id, after) {
  if (!(await confirmModal(`Disconnect client “${id}”? It may reconnect at once.`, 'Disconnect'))) return;
  try {
    await api('POST', '/clients/' + encodeURIComponent(id) + '/disconnect');
    toast(`Disconnected ${id}`);
  } catch (e) {
    toast(e.message, true);
  }
  if (after) await after();
}

function clientPage(id) {
  const body = h('div', {});
  app.replaceChildren(shell('clients', [
    pageHead('Client', h('span', { class: 'mono' }, id),
      h('a', { href: '#/clients' }, '← All clients')),
    body,
  ]));
  const render = (c) => {
    const kv = (k, v) => [h('dt', {}, k), h('dd', {}, v)];
    body.replaceChildren(
      h('div', { class: 'grid two' },
        h('div', { class: 'panel' },
          h('div', { class: 'chart-head' }, h('h2', {}, 'Connection'),
            h('span', { class: 'badge ' + (c.connected ? 'on' : 'off'), id: 'client-state' }, c.connected ? 'online' : 'offline')),
          h('dl', { class: 'kv' },
            kv('Client id', h('span', { class: 'mono' }, c.client_id)),
            kv('User name', c.username || '—'),
            c.node ? kv('Node', h('span', { class: 'mono', id: 'client-node' }, c.node)) : null,
            kv('Address', c.remote || '—'),
            kv('Listener', c.listener ? `${c.listener} (${c.transport || '?'})` : '—'),
            kv('Protocol', 'MQTT ' + c.protocol),
            kv('Keepalive', c.keepalive_seconds ? c.keepalive_seconds + ' s' : 'off'),
            kv('Connected since', c.connected ? `${new Date(c.connected_at).toLocaleString()} (${fmtSince(c.connected_at)})` : '—'),
            kv('Session expiry', c.session_expiry_seconds === 4294967295 ? 'never'
              : c.session_expiry_seconds ? fmtDuration(c.session_expiry_seconds) + ' after disconnect' : 'ends at disconnect'),
            kv('TLS', c.tls ? h('span', { id: 'client-tls' }, `${c.tls.version}, ${c.tls.cipher_suite}`) : c.connected ? 'none' : '—'),
            c.tls ? kv('Client certificate', h('span', { id: 'client-cert' }, c.tls.cert_subject || 'none sent',
              c.tls.cert_identity ? h('span', { class: 'muted' }, ` · user name from it: ${c.tls.cert_identity}`) : null)) : null),
          isAdmin() ? h('div', { class: 'row' },
            c.connected ? h('button', { class: 'danger', id: 'client-disconnect', onclick: () => disconnect(c.client_id, load) }, 'Disconnect') : null,
            h('button', {
              class: 'danger', id: 'client-remove',
              onclick: async () => { if (await removeSession(c.client_id)) location.hash = '#/clients'; },
            }, 'Remove session')) : null),
        h('div', { class: 'panel' }, h('h2', {}, 'Traffic and queue'),
          h('dl', { class: 'kv', id: 'client-traffic' },
            kv('Messages in', c.connected ? `${fmtInt(c.messages_in)} (${fmtBytes(c.bytes_in)} read)` : '—'),
            kv('Messages out', c.connected ? `${fmtInt(c.messages_out)} (${fmtBytes(c.bytes_out)} written)` : '—'),
            kv('Inflight', fmtInt(c.inflight)),
            kv('Queued', `${fmtInt(c.queued)} (${fmtBytes(c.queued_bytes)} with inflight)`)),
          h('p', { class: 'muted' }, 'PUBLISH packets and bytes of the current connection; a session keeps its queue between connections.'),
          h('h2', {}, 'Will'),
          h('dl', { class: 'kv', id: 'client-will' },
            c.will ? [
              ...kv('Topic', h('span', { class: 'mono' }, c.will.topic)),
              ...kv('QoS, retain', `QoS ${c.will.qos}${c.will.retain ? ', retained' : ''}`),
              ...kv('Payload', fmtBytes(c.will.size)),
              ...kv('Delay', c.will.delay_seconds ? fmtDuration(c.will.delay_seconds) : 'none: published at once'),
              c.will.expiry_seconds ? kv('Expiry', fmtDuration(c.will.expiry_seconds) + ' after it is published') : null,
            ] : kv('Message', c.will_pending ? 'pending: waiting for its delay' : c.connected ? 'none' : '—')))),
      h('div', { class: 'grid two' },
        h('div', { class: 'panel' }, h('h2', {}, `Subscriptions (${(c.subscriptions || []).length})`),
          h('div', { class: 'table-wrap' }, h('table', {},
            h('thead', {}, h('tr', {}, h('th', {}, 'Filter'), h('th', {}, 'QoS'), h('th', {}, 'Options'))),
            h('tbody', {}, (c.subscriptions || []).length ? c.subscriptions.map((s) => h('tr', {},
              h('td', { class: 'mono wrap' }, s.filter), h('td', {}, s.qos), h('td', { class: 'muted' }, subOptions(s))))
              : h('tr', {}, h('td', { class: 'empty', colspan: 3 }, 'No subscriptions'))))))));
  };
  const load = async () => {
    try {
      render(await api('GET', '/clients/' + encodeURIComponent(id)));
    } catch (e) {
      if (e.status === 404) body.replaceChildren(h('div', { class: 'panel empty' }, `Client “${id}” has no session (it disconnected with a clean session, or never connected).`));
      else throw e;
    }
  };
  every(3000, load);
}

function subOptions(s) {
  const o = [];
  if (s.no_local) o.push('no local');
  if (s.retain_as_published) o.push('retain as published');
  if (s.retain_handling) o.push('retain handling ' + s.retain_handling);
  if (s.subscription_id) o.push('id ' + s.subscription_id);
  return o.join(', ') || '—';
}

// ---------- subscriptions ----------

function subscriptionsPage() {
  const q = { filter: '', topic: '', client_id: '', limit: 50 };
  const paging = newPaging();
  const tbody = h('tbody', {});
  const pager = h('div', { class: 'pager' });
  const err = h('div', { class: 'error-text' });
  const input = (key, placeholder) => h('input', {
    type: 'search', class: 'grow', placeholder, id: 'subs-' + key,
    oninput: (e) => { q[key] = e.target.value; resetPaging(paging); refresh(); },
  });
  app.replaceChildren(shell('subscriptions', [
    pageHead('Subscriptions', h('span', { id: 'subs-count' })),
    h('div', { class: 'panel' },
      h('div', { class: 'toolbar' },
        input('filter', 'Filter contains…'), input('topic', 'Matches topic… (e.g. sensors/1/temp)'), input('client_id', 'Client id starts with…')),
      err,
      h('div', { class: 'table-wrap' }, h('table', {},
        h('thead', {}, h('tr', {}, h('th', {}, 'Client'), h('th', {}, 'Filter'), h('th', {}, 'QoS'), h('th', {}, 'Options'),
          state.clustered ? h('th', {}, 'Node') : null)),
        tbody)),
      pager),
  ]));
  const get = latest(api);
  async function refresh() {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(q)) if (v !== '') params.set(k, v);
    if (paging.after) params.set('after', paging.after);
    let res;
    try {
      if (!(res = await get('GET', '/subscriptions?' + params))) return;
      err.textContent = '';
    } catch (e) {
      err.textContent = e.message;
      return;
    }
    const count = document.getElementById('subs-count');
    if (count) count.textContent = matchingText(res) + (res.nodes_missing ? ` · not answering: ${res.nodes_missing.join(', ')}` : '');
    tbody.replaceChildren(...(res.items.length ? res.items.map((s) => h('tr', {},
      h('td', { class: 'mono' }, h('a', { href: '#/clients/' + encodeURIComponent(s.client_id) }, s.client_id)),
      h('td', { class: 'mono wrap' }, s.filter),
      h('td', {}, s.qos), h('td', { class: 'muted' }, subOptions(s)),
      state.clustered ? h('td', { class: 'mono soft' }, s.node || '') : null))
      : [h('tr', {}, h('td', { class: 'empty', colspan: 4 }, res.next ? 'No match in this part of the list: Next searches on' : 'No subscriptions match'))]));
    pagerFor(pager, res, paging, refresh);
  }
  every(3000, refresh);
}

// Lists page by cursor: each answer's next is the after= of the following
// page. A paging keeps the cursors of the pages before the current one, so
// Prev can go back, and the position of the current page's first item.
function newPaging() { return { after: '', start: 0, back: [] }; }
function resetPaging(pg) { pg.after = ''; pg.start = 0; pg.back = []; }

// matchingText says how many items match; the API leaves the total out
// when counting them would read more than a page's worth.
function matchingText(res) {
  return res.total === undefined ? 'matches not counted' : `${fmtInt(res.total)} matching`;
}

function pagerFor(pager, res, pg, refresh) {
  const from = res.items.length ? pg.start + 1 : pg.start, to = pg.start + res.items.length;
  const of = res.total !== undefined ? ` of ${fmtInt(res.total)}` : res.next ? ' of more' : '';
  pager.replaceChildren(`${fmtInt(from)}–${fmtInt(to)}${of}`,
    h('button', {
      class: 'small', disabled: !pg.back.length, dataset: { page: 'prev' },
      onclick: () => { Object.assign(pg, pg.back.pop()); refresh(); },
    }, '‹ Prev'),
    h('button', {
      class: 'small', disabled: !res.next, dataset: { page: 'next' },
      onclick: () => { pg.back.push({ after: pg.after, start: pg.start }); pg.after = res.next; pg.start = to; refresh(); },
    }, 'Next ›'));
}

// ---------- retained ----------

function retainedPage() {
  const q = { filter: '', prefix: '', limit: 50 };
  const paging = newPaging();
  const tbody = h('tbody', {});
  const pager = h('div', { class: 'pager' });
  const err = h('div', { class: 'error-text' });
  const detail = h('div', { class: 'panel hidden', id: 'retained-detail' });
  app.replaceChildren(shell('retained', [
    pageHead('Retained messages', h('span', { id: 'retained-count' })),
    detail,
    h('div', { class: 'panel' },
      h('div', { class: 'toolbar' },
        h('input', { type: 'search', class: 'grow', id: 'retained-filter', placeholder: 'Topic filter, e.g. sensors/+/temp or #', oninput: (e) => { q.filter = e.target.value; resetPaging(paging); refresh(); } }),
        h('input', { type: 'search', class: 'grow', id: 'retained-prefix', placeholder: 'Topic starts with… ($SYS/ for the broker\'s own)', oninput: (e) => { q.prefix = e.target.value; resetPaging(paging); refresh(); } })),
      h('p', { class: 'muted hint' }, 'Clients\' retained messages; the broker\'s $SYS topics are listed only when the filter or prefix starts with $SYS.'),
      err,
      h('div', { class: 'table-wrap' }, h('table', {},
        h('thead', {}, h('tr', {}, h('th', {}, 'Topic'), h('th', {}, 'QoS'), h('th', { class: 'num' }, 'Size'), h('th', {}, 'Stored'), h('th', {}, 'Payload'), isAdmin() ? h('th', {}) : null)),
        tbody)),
      pager),
  ]));
  detail.style.marginBottom = '16px';
  async function show(topic) {
    try {
      const m = await api('GET', '/retained/' + encodeURIComponent(topic).replaceAll('%2F', '/'));
      detail.classList.remove('hidden');
      const kv = (k, v) => [h('dt', {}, k), h('dd', {}, v)];
      detail.replaceChildren(
        h('div', { class: 'chart-head' }, h('h2', { class: 'mono' }, m.topic), h('button', { class: 'small', onclick: () => detail.classList.add('hidden') }, 'Close')),
        h('dl', { class: 'kv', id: 'retained-props' },
          kv('Stored', h('span', { id: 'retained-stored' }, m.stored_at ? `${fmtDate(m.stored_at)} (${fmtSince(m.stored_at)})` : 'before the broker kept the time')),
          kv('Published by', m.from ? h('a', { href: '#/clients/' + encodeURIComponent(m.from), class: 'mono' }, m.from) : 'the broker (API, $SYS or a will)'),
          kv('QoS', m.qos),
          kv('Size', fmtBytes(m.size)),
          m.content_type ? kv('Content type', m.content_type) : null,
          m.payload_format !== undefined ? kv('Payload format', m.payload_format === 1 ? 'UTF-8 text' : 'bytes') : null,
          m.response_topic ? kv('Response topic', h('span', { class: 'mono' }, m.response_topic)) : null,
          m.correlation_data_base64 ? kv('Correlation data', h('span', { class: 'mono' }, 'base64: ' + m.correlation_data_base64)) : null,
          m.expires_at ? kv('Expires', fmtDate(m.expires_at)) : null,
          (m.user_properties || []).length ? kv('User properties', h('span', { class: 'mono', id: 'retained-user-props' },
            m.user_properties.map((u) => `${u.key}=${u.value}`).join(', '))) : null),
        h('pre', { class: 'mono panel' }, m.payload ?? ('base64: ' + m.payload_base64)));
    } catch (e) {
      toast(e.message, true);
    }
  }
  const get = latest(api);
  async function refresh() {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(q)) if (v !== '') params.set(k, v);
    if (paging.after) params.set('after', paging.after);
    let res;
    try {
      if (!(res = await get('GET', '/retained?' + params))) return;
      err.textContent = '';
    } catch (e) {
      err.textContent = e.message;
      return;
    }
    const count = document.getElementById('retained-count');
    if (count) count.textContent = matchingText(res);
    tbody.replaceChildren(...(res.items.length ? res.items.map((m) => h('tr', { dataset: { topic: m.topic } },
      h('td', { class: 'mono' }, h('a', { href: '#', onclick: (e) => { e.preventDefault(); show(m.topic); } }, m.topic)),
      h('td', {}, m.qos),
      h('td', { class: 'num' }, fmtBytes(m.size)),
      h('td', { title: m.stored_at ? fmtDate(m.stored_at) : '' }, m.stored_at ? fmtSince(m.stored_at) : h('span', { class: 'muted' }, '—')),
      h('td', { class: 'mono wrap' }, m.payload ?? h('span', { class: 'muted' }, 'binary')),
      isAdmin() ? h('td', { class: 'num' }, h('button', {
        class: 'danger small',
        onclick: async () => {
          if (!(await confirmModal(`Delete the retained message on “${m.topic}”?`, 'Delete'))) return;
          try {
            await api('DELETE', '/retained/' + encodeURIComponent(m.topic).replaceAll('%2F', '/'));
            toast('Deleted');
          } catch (e) { toast(e.message, true); }
          refresh();
        },
      }, 'Delete')) : null))
      : [h('tr', {}, h('td', { class: 'empty', colspan: 6 }, res.next ? 'No match in this part of the list: Next searches on' : 'No retained messages match'))]));
    pagerFor(pager, res, paging, refresh);
  }
  every(5000, refresh);
}

// ---------- banned ----------

function bannedPage() {
  const tbody = h('tbody', {});
  const notice = h('div', { class: 'notice hidden' });
  const kind = h('select', { id: 'ban-kind' }, ['client_id', 'username', 'ip'].map((k) => h('option', { value: k }, k.replace('_', ' '))));
  const value = h('input', { id: 'ban-value', placeholder: 'e.g. sensor-17, mallory or 203.0.113.0/24', required: true });
  const reason = h('input', { id: 'ban-reason', placeholder: 'optional' });
  const duration = h('select', { id: 'ban-duration' },
    [['', 'until removed'], ['1h', '1 hour'], ['24h', '1 day'], ['168h', '1 week']].map(([v, l]) => h('option', { value: v }, l)));
  const form = h('form', {
    class: 'panel',
    onsubmit: async (e) => {
      e.preventDefault();
      try {
        await api('POST', '/banned', { kind: kind.value, value: value.value, reason: reason.value, duration: duration.value });
        value.value = '';
        reason.value = '';
        toast('Banned');
        refresh();
      } catch (ex) { toast(ex.message, true); }
    },
  }, h('h2', {}, 'Ban'),
  h('div', { class: 'row' },
    h('div', { class: 'field narrow' }, h('label', {}, 'Kind'), kind),
    h('div', { class: 'field' }, h('label', {}, 'Value'), value),
    h('div', { class: 'field' }, h('label', {}, 'Reason'), reason),
    h('div', { class: 'field narrow' }, h('label', {}, 'For'), duration),
    h('button', { class: 'primary', type: 'submit' }, 'Ban')));
  form.style.marginBottom = '16px';
  app.replaceChildren(shell('banned', [
    pageHead('Banned', 'Clients, user names and addresses refused at CONNECT'),
    notice,
    isAdmin() ? form : null,
    h('div', { class: 'panel' }, h('div', { class: 'table-wrap' }, h('table', {},
      h('thead', {}, h('tr', {}, h('th', {}, 'Kind'), h('th', {}, 'Value'), h('th', {}, 'Reason'), h('th', {}, 'Until'), isAdmin() ? h('th', {}) : null)),
      tbody))),
  ]));
  async function refresh() {
    let res;
    try {
      res = await api('GET', '/banned?limit=1000');
    } catch (e) {
      if (e.status === 501) {
        notice.textContent = e.message;
        notice.classList.remove('hidden');
        form.classList.add('hidden');
        tbody.replaceChildren(h('tr', {}, h('td', { class: 'empty', colspan: 5 }, 'Banned list unavailable')));
        return;
      }
      throw e;
    }
    tbody.replaceChildren(...(res.items.length ? res.items.map((b) => h('tr', {},
      h('td', {}, h('span', { class: 'badge' }, b.kind)), h('td', { class: 'mono' }, b.value),
      h('td', {}, b.reason || ''), h('td', {}, b.until ? new Date(b.until).toLocaleString() : 'removed by hand'),
      isAdmin() ? h('td', { class: 'num' }, h('button', {
        class: 'small', onclick: async () => {
          try {
            await api('DELETE', `/banned/${b.kind}/${encodeURIComponent(b.value)}`);
            toast('Removed');
          } catch (e) { toast(e.message, true); }
          refresh();
        },
      }, 'Remove')) : null))
      : [h('tr', {}, h('td', { class: 'empty', colspan: 5 }, 'Nobody is banned'))]));
  }
  every(5000, refresh);
}

// ---------- nodes ----------

// nodeHealth shows a node's health: reachable and ready is good; ready
// but cut off from some nodes, or not ready, a warning; unreachable an
// error.
function nodeHealth(n) {
  if (!n.reachable) return h('span', { class: 'badge err' }, 'unreachable');
  if (!n.ready) return h('span', { class: 'badge warn' }, 'not ready');
  return h('span', { class: 'badge on' }, 'ready');
}

function nodesPage() {
  const tbody = h('tbody', { id: 'nodes-body' });
  const notice = h('div', { class: 'notice hidden' });
  app.replaceChildren(shell('nodes', [
    pageHead('Nodes', h('span', { id: 'nodes-count' }, 'The nodes of the cluster, from their heartbeats')),
    notice,
    h('div', { class: 'panel' }, h('div', { class: 'table-wrap' }, h('table', {},
      h('thead', {}, h('tr', {},
        h('th', {}, 'Node'), h('th', {}, 'Health'), h('th', { class: 'num' }, 'Routes'), h('th', { class: 'num' }, 'Clients'),
        h('th', { class: 'num' }, 'Offline sessions'), h('th', { class: 'num' }, 'Subscriptions'),
        h('th', { class: 'num' }, 'In /s'), h('th', { class: 'num' }, 'Out /s'), h('th', {}, 'Listeners'), h('th', {}, 'Up'))),
      tbody))),
  ]));
  async function refresh() {
    let res;
    try {
      res = await api('GET', '/nodes');
    } catch (e) {
      if (e.status === 404) {
        notice.textContent = e.message;
        notice.classList.remove('hidden');
        tbody.replaceChildren(h('tr', {}, h('td', { class: 'empty', colspan: 10 }, 'Not a cluster: this broker runs alone')));
        return;
      }
      throw e;
    }
    const count = document.getElementById('nodes-count');
    if (count) {
      count.textContent = `${fmtInt(res.items.length)} nodes · ${fmtInt(res.reachable)} reachable` +
        (res.unreachable ? ` · ${fmtInt(res.unreachable)} unreachable (down, or cut off from ${res.node})` : '') + ` · seen from ${res.node}`;
    }
    tbody.replaceChildren(...res.items.map((n) => h('tr', { dataset: { node: n.node }, class: n.reachable ? '' : 'dim' },
      h('td', {}, h('strong', {}, n.node), n.local ? h('span', { class: 'muted' }, ' · this node') : null,
        h('div', { class: 'muted' }, n.version)),
      h('td', { class: 'soft' }, nodeHealth(n),
        !n.reachable ? h('div', { class: 'muted' }, 'silent since ' + fmtSince(n.unreachable_since || n.last_seen)) : null),
      h('td', { class: 'num' }, n.routes < 0 ? 'external' : fmtInt(n.routes)),
      h('td', { class: 'num' }, fmtInt(n.clients_connected)), h('td', { class: 'num' }, fmtInt(n.sessions_offline)),
      h('td', { class: 'num' }, fmtInt(n.subscriptions)),
      h('td', { class: 'num' }, fmtNum(n.messages_in_rate || 0)), h('td', { class: 'num' }, fmtNum(n.messages_out_rate || 0)),
      h('td', { class: 'mono soft' }, (n.listeners || []).map((l) => h('div', {}, l))),
      h('td', { title: n.started_at }, fmtSince(n.started_at).replace(' ago', '')))));
  }
  every(2000, refresh);
}

// ---------- bridges ----------

// bridgeBadge shows a bridge's state: connected is good, backoff and
// connecting (a link that does not come up) are warnings.
function bridgeBadge(b) {
  const cls = { connected: 'on', stopped: 'off', backoff: 'err', connecting: 'warn' }[b.state] || 'off';
  const label = b.state === 'backoff' ? `retry in ${fmtNum(b.backoff_seconds)}s` : b.state;
  return h('span', { class: 'badge ' + cls }, label);
}

function bridgesPage() {
  const tbody = h('tbody', { id: 'bridges-body' });
  const notice = h('div', { class: 'notice hidden' });
  const reload = isAdmin() ? h('button', {
    id: 'bridges-reload', title: 'Read the configuration file again and apply what can change live (as SIGHUP does)',
    onclick: async () => {
      try {
        const res = await api('POST', '/reload');
        const b = res.bridges;
        const restart = res.needs_restart?.length ? ` · needs a restart: ${res.needs_restart.join(', ')}` : '';
        toast(`Reloaded: bridges ${b.added.length} added, ${b.changed.length} changed, ${b.removed.length} removed; ${res.changed?.length || 0} keys changed${restart}`);
      } catch (e) { toast(e.message, true); }
      refresh();
    },
  }, 'Reload configuration') : null;
  app.replaceChildren(shell('bridges', [
    pageHead('Bridges', 'Links to other brokers, from the bridges section of the configuration', reload),
    notice,
    h('div', { class: 'panel' }, h('div', { class: 'table-wrap' }, h('table', {},
      h('thead', {}, h('tr', {},
        h('th', {}, 'Name'), h('th', {}, 'State'), h('th', {}, 'Remote'), h('th', {}, 'Topics'),
        h('th', { class: 'num' }, 'Out'), h('th', { class: 'num' }, 'In'), h('th', { class: 'num' }, 'Queued'),
        h('th', { class: 'num' }, 'Dropped'), isAdmin() ? h('th', {}) : null)),
      tbody))),
  ]));
  async function act(b, action) {
    try {
      await api('POST', `/bridges/${encodeURIComponent(b.name)}/${action}`);
      toast(action === 'stop' ? 'Stopped: its local session queues what it would forward' : 'Started');
    } catch (e) { toast(e.message, true); }
    refresh();
  }
  async function refresh() {
    let res;
    try {
      res = await api('GET', '/bridges?limit=1000');
    } catch (e) {
      if (e.status === 501) {
        notice.textContent = e.message;
        notice.classList.remove('hidden');
        tbody.replaceChildren(h('tr', {}, h('td', { class: 'empty', colspan: 9 }, 'Bridges unavailable')));
        return;
      }
      throw e;
    }
    const dropped = (b) => Object.values(b.dropped || {}).reduce((a, n) => a + n, 0);
    tbody.replaceChildren(...(res.items.length ? res.items.map((b) => h('tr', { dataset: { bridge: b.name } },
      h('td', {}, h('strong', {}, b.name), h('div', { class: 'muted' }, 'MQTT ' + b.protocol + (b.loop_prevention ? ' · ' + b.loop_prevention.replace('_', ' ') : ''))),
      h('td', { class: 'soft' }, bridgeBadge(b),
        b.connected_since ? h('div', { class: 'muted' }, 'up ' + fmtSince(b.connected_since).replace(' ago', '')) : null,
        b.reconnects ? h('div', { class: 'muted' }, `${fmtInt(b.reconnects)} reconnects`) : null,
        b.state !== 'connected' && b.last_error ? h('div', { class: 'error-text' }, b.last_error) : null),
      h('td', { class: 'mono soft' }, b.address, b.addresses.length > 1 ? h('div', { class: 'muted' }, `${b.addresses.length} addresses`) : null),
      h('td', { class: 'mono soft' }, b.topics.map((r) => h('div', {}, `${r.direction} ${r.qos} ${r.local_prefix || ''}${r.topic}` +
        (r.local_prefix !== r.remote_prefix ? ` ⇄ ${r.remote_prefix || ''}${r.topic}` : '')))),
      h('td', { class: 'num' }, fmtInt(b.messages_out)), h('td', { class: 'num' }, fmtInt(b.messages_in)),
      h('td', { class: 'num' }, fmtInt(b.queued)), h('td', { class: 'num' }, fmtInt(dropped(b))),
      isAdmin() ? h('td', { class: 'num' }, b.state === 'stopped'
        ? h('button', { class: 'small', onclick: () => act(b, 'start') }, 'Start')
        : h('button', { class: 'small', onclick: () => act(b, 'stop') }, 'Stop')) : null))
      : [h('tr', {}, h('td', { class: 'empty', colspan: 9 }, 'No bridges: add them to the bridges section of the configuration file'))]));
  }
  every(5000, refresh);
}

// ---------- audit ----------

// auditPage lists GET /audit: who changed what through the API, newest
// first. Admins only: the API refuses viewers.
function auditPage() {
  const tbody = h('tbody', { id: 'audit-body' });
  const outcome = { ok: 'on', refused: 'warn', failed: 'err' };
  app.replaceChildren(shell('audit', [
    pageHead('Audit', 'Admin actions and dashboard logins, newest first; the last 1,000 since start (the broker log keeps them all)'),
    h('div', { class: 'panel' }, h('div', { class: 'table-wrap' }, h('table', {},
      h('thead', {}, h('tr', {},
        h('th', {}, 'Time'), h('th', {}, 'User'), h('th', {}, 'From'), h('th', {}, 'Action'),
        h('th', {}, 'Target'), h('th', {}, 'Outcome'))),
      tbody))),
  ]));
  async function refresh() {
    const res = await api('GET', '/audit?limit=1000');
    tbody.replaceChildren(...(res.items.length ? res.items.map((e) => h('tr', {},
      h('td', { class: 'soft' }, fmtDate(e.time)),
      h('td', {}, e.user || '—', h('div', { class: 'muted' }, e.auth)),
      h('td', { class: 'mono soft' }, e.remote),
      h('td', { class: 'mono' }, e.action),
      h('td', { class: 'mono soft' }, e.target || ''),
      h('td', {}, h('span', { class: 'badge ' + (outcome[e.outcome] || '') }, `${e.status} ${e.outcome}`))))
      : [h('tr', {}, h('td', { class: 'empty', colspan: 6 }, 'No admin actions since start'))]));
  }
  every(5000, refresh);
}

// ---------- users ----------

// usersPage lists the dashboard users (GET /users) for admins: add one,
// change a role, reset a password, delete. The configured admin (builtin)
// is neither demoted nor deleted, and the server keeps at least one admin;
// a new role or password ends that user's sessions.
function usersPage() {
  const tbody = h('tbody', { id: 'users-body' });
  const name = h('input', { id: 'user-name', placeholder: 'e.g. alice', required: true, autocomplete: 'off', maxlength: 64 });
  const role = h('select', { id: 'user-role' }, ['viewer', 'admin'].map((r) => h('option', { value: r }, r)));
  const pass = h('input', {
    id: 'user-pass', type: 'password', autocomplete: 'new-password', required: true, minlength: 8, maxlength: 72,
    placeholder: '8 to 72 characters',
  });
  const desc = h('input', { id: 'user-desc', placeholder: 'optional', maxlength: 256 });
  const form = h('form', {
    class: 'panel', id: 'user-form',
    onsubmit: async (e) => {
      e.preventDefault();
      try {
        await api('POST', '/users', { name: name.value, role: role.value, password: pass.value, description: desc.value });
        toast(`Added ${name.value}`);
        name.value = pass.value = desc.value = '';
        refresh();
      } catch (ex) { toast(ex.message, true); }
    },
  }, h('h2', {}, 'Add user'),
  h('div', { class: 'row' },
    h('div', { class: 'field' }, h('label', { for: 'user-name' }, 'Name'), name),
    h('div', { class: 'field narrow' }, h('label', { for: 'user-role' }, 'Role'), role),
    h('div', { class: 'field' }, h('label', { for: 'user-pass' }, 'Password'), pass),
    h('div', { class: 'field' }, h('label', { for: 'user-desc' }, 'Description'), desc),
    h('button', { class: 'primary', type: 'submit', id: 'user-add' }, 'Add')));
  form.style.marginBottom = '16px';
  app.replaceChildren(shell('users', [
    pageHead('Users', 'Who may log in to this dashboard: viewers read, admins also act; passwords are kept as bcrypt hashes only'),
    form,
    h('div', { class: 'panel' }, h('div', { class: 'table-wrap' }, h('table', {},
      h('thead', {}, h('tr', {}, h('th', {}, 'Name'), h('th', {}, 'Role'), h('th', {}, 'Description'),
        h('th', {}, 'Updated'), h('th', {}))),
      tbody))),
  ]));
  async function change(u, body, done) {
    try {
      await api('PUT', `/users/${encodeURIComponent(u.name)}`, body);
      toast(done);
    } catch (ex) { toast(ex.message, true); }
    if (u.name === state.me.user && (body.role || body.password)) {
      state.me = null; // our own sessions ended with the change
      route();
      return;
    }
    refresh();
  }
  async function resetPassword(u) {
    const pw = h('input', { id: 'reset-pass', type: 'password', autocomplete: 'new-password', minlength: 8, maxlength: 72, required: true });
    const ok = await modal([h('p', {}, `New password for ${u.name}; their sessions and tokens end.`),
      h('div', { class: 'field' }, h('label', { for: 'reset-pass' }, 'Password'), pw)], 'Set password', 'primary');
    if (ok) change(u, { password: pw.value }, `Password of ${u.name} set`);
  }
  async function remove(u) {
    if (!await confirmModal(`Delete ${u.name}? Their sessions and tokens end.`, 'Delete')) return;
    try {
      await api('DELETE', `/users/${encodeURIComponent(u.name)}`);
      toast(`Deleted ${u.name}`);
    } catch (ex) { toast(ex.message, true); }
    if (u.name === state.me.user) { state.me = null; route(); return; }
    refresh();
  }
  async function refresh() {
    const res = await api('GET', '/users');
    tbody.replaceChildren(...res.items.map((u) => {
      const roleCell = u.builtin
        ? h('span', { class: 'badge' }, u.role)
        : h('select', {
          'aria-label': `role of ${u.name}`, id: `role-${u.name}`,
          onchange: (e) => change(u, { role: e.target.value }, `${u.name} is now ${e.target.value}`),
        }, ['viewer', 'admin'].map((r) => h('option', { value: r, selected: r === u.role }, r)));
      return h('tr', { id: `user-${u.name}` },
        h('td', {}, u.name, u.builtin ? h('div', { class: 'muted' }, 'configured (web.admin_user)') : null),
        h('td', {}, roleCell),
        h('td', { class: 'soft' }, u.description || ''),
        h('td', { class: 'soft' }, u.updated_at ? fmtDate(u.updated_at) : '—'),
        h('td', { class: 'num' },
          h('button', { class: 'small', onclick: () => resetPassword(u) }, 'Reset password'), ' ',
          u.builtin ? null : h('button', { class: 'small danger', onclick: () => remove(u) }, 'Delete')));
    }));
  }
  refresh().catch((e) => toast(e.message, true));
}

// ---------- account ----------

// accountPage shows who is logged in and lets a user change their own
// password (POST /auth/password), which ends all their sessions and
// tokens: the dashboard then asks for the new password. API keys and
// anonymous access have no password.
function accountPage() {
  const me = state.me;
  const hasPassword = me.auth !== 'api_key' && me.auth !== 'anonymous' && !me.user.startsWith('key:');
  const err = h('div', { class: 'error-text', id: 'password-error' });
  const old = h('input', { id: 'password-old', type: 'password', autocomplete: 'current-password', required: true });
  const pw = h('input', { id: 'password-new', type: 'password', autocomplete: 'new-password', required: true, minlength: 8, maxlength: 72 });
  const again = h('input', { id: 'password-again', type: 'password', autocomplete: 'new-password', required: true });
  const form = h('form', {
    class: 'panel', id: 'password-form',
    onsubmit: async (e) => {
      e.preventDefault();
      err.textContent = '';
      if (pw.value !== again.value) { err.textContent = 'The two new passwords differ.'; return; }
      try {
        await api('POST', '/auth/password', { old_password: old.value, new_password: pw.value });
        state.me = null;
        if (state.mqtt) state.mqtt.close('password changed');
        toast('Password changed: log in with the new one');
        route();
      } catch (ex) { err.textContent = ex.message; }
    },
  }, h('h2', {}, 'Change password'),
  h('div', { class: 'row' },
    h('div', { class: 'field' }, h('label', { for: 'password-old' }, 'Current password'), old),
    h('div', { class: 'field' }, h('label', { for: 'password-new' }, 'New password'), pw),
    h('div', { class: 'field' }, h('label', { for: 'password-again' }, 'New password again'), again),
    h('button', { class: 'primary', type: 'submit', id: 'password-submit' }, 'Change')),
  err,
  h('p', { class: 'muted' }, 'Every session and token of yours ends, this one included.'));
  app.replaceChildren(shell('account', [
    pageHead('Account', `${me.user} · ${me.role} · logged in by ${me.auth}`),
    hasPassword ? form : h('div', { class: 'notice' }, 'You came in with an API key or anonymous access: there is no password to change.'),
  ]));
}

// ---------- traces ----------

// traceTarget says what a trace follows.
function traceTarget(t) {
  if (t.client_id) return ['client id', t.client_id];
  if (t.username) return ['user', t.username];
  if (t.ip) return ['ip', t.ip];
  return ['topic', t.topic];
}

function tracesPage() {
  const tbody = h('tbody', { id: 'traces-body' });
  const notice = h('div', { class: 'notice hidden' });
  const kind = h('select', { id: 'trace-kind' },
    [['client_id', 'client id'], ['username', 'user name'], ['ip', 'IP or prefix'], ['topic', 'topic filter']].map(([v, l]) => h('option', { value: v }, l)));
  const value = h('input', { id: 'trace-value', placeholder: 'e.g. sensor-7, alice, 10.0.0.0/24 or alarms/#', required: true });
  const duration = h('select', { id: 'trace-duration' },
    [['1m', '1 minute'], ['5m', '5 minutes'], ['15m', '15 minutes'], ['1h', '1 hour']].map(([v, l]) => h('option', { value: v, selected: v === '5m' }, l)));
  const payload = h('input', { id: 'trace-payload', type: 'checkbox' });
  const form = h('form', {
    class: 'panel',
    onsubmit: async (e) => {
      e.preventDefault();
      try {
        const t = await api('POST', '/traces', { [kind.value]: value.value.trim(), duration: duration.value, payload: payload.checked });
        value.value = '';
        toast(`Trace ${t.name} started`);
        refresh();
      } catch (ex) { toast(ex.message, true); }
    },
  }, h('h2', {}, 'Start a trace'),
  h('p', { class: 'muted' }, 'Every packet of the matching connections, both ways, goes to the trace\'s file: type, fields and payload size (the payload itself if asked). Connections that do not match cost nothing.'),
  h('div', { class: 'row' },
    h('div', { class: 'field narrow' }, h('label', {}, 'Follow'), kind),
    h('div', { class: 'field' }, h('label', {}, 'Value'), value),
    h('div', { class: 'field narrow' }, h('label', {}, 'For'), duration),
    h('div', { class: 'field narrow' }, h('label', {}, h('span', {}, payload, ' payloads'))),
    h('button', { class: 'primary', type: 'submit', id: 'trace-start' }, 'Start')));
  form.style.marginBottom = '16px';
  app.replaceChildren(shell('traces', [
    pageHead('Traces', 'Packet traces of chosen clients, users, addresses or topics, each in its own file'),
    notice,
    isAdmin() ? form : null,
    h('div', { class: 'panel' }, h('div', { class: 'table-wrap' }, h('table', {},
      h('thead', {}, h('tr', {}, h('th', {}, 'Name'), h('th', {}, 'Follows'), h('th', {}, 'State'),
        h('th', { class: 'num' }, 'Packets'), h('th', { class: 'num' }, 'Size'), h('th', {}, 'Started'), h('th', {}))),
      tbody))),
  ]));
  async function act(method, path, done) {
    try {
      await api(method, path);
      toast(done);
    } catch (e) { toast(e.message, true); }
    refresh();
  }
  async function refresh() {
    let res;
    try {
      res = await api('GET', '/traces?limit=1000');
    } catch (e) {
      if (e.status === 501) {
        notice.textContent = e.message;
        notice.classList.remove('hidden');
        form.classList.add('hidden');
        tbody.replaceChildren(h('tr', {}, h('td', { class: 'empty', colspan: 7 }, 'Traces unavailable')));
        return;
      }
      throw e;
    }
    tbody.replaceChildren(...(res.items.length ? res.items.map((t) => {
      const [what, v] = traceTarget(t);
      const name = encodeURIComponent(t.name);
      return h('tr', { dataset: { trace: t.name } },
        h('td', { class: 'mono' }, t.name),
        h('td', {}, h('span', { class: 'badge' }, what), ' ', h('span', { class: 'mono' }, v), t.payload ? h('div', { class: 'muted' }, 'with payloads') : null),
        h('td', {}, h('span', { class: 'badge ' + (t.state === 'running' ? 'on' : 'off') }, t.state),
          t.state === 'running' ? h('div', { class: 'muted' }, 'until ' + new Date(t.until).toLocaleTimeString())
            : h('div', { class: 'muted' }, t.stop_reason || '')),
        h('td', { class: 'num' }, fmtInt(t.packets)), h('td', { class: 'num' }, fmtBytes(t.bytes) + ' of ' + fmtBytes(t.max_bytes)),
        h('td', {}, fmtSince(t.started_at)),
        h('td', { class: 'num' },
          h('a', { class: 'button small', href: `${API}/traces/${name}/download`, download: t.name + '.log' }, 'Download'),
          isAdmin() && t.state === 'running' ? h('button', { class: 'small', onclick: () => act('POST', `/traces/${name}/stop`, 'Stopped') }, 'Stop') : null,
          isAdmin() ? h('button', { class: 'small', onclick: () => act('DELETE', `/traces/${name}`, 'Deleted') }, 'Delete') : null));
    }) : [h('tr', {}, h('td', { class: 'empty', colspan: 7 }, 'No traces yet'))]));
  }
  every(3000, refresh);
}

// ---------- MQTT client ----------

function mqttPage() {
  const m = state;
  const ov = state.overview;
  const urls = (ov?.listeners || []).filter((l) => l.url).map((l) => l.url);
  const saved = JSON.parse(sessionStorage.getItem('xmq-mqtt') || '{}');
  const url = h('input', { id: 'mq-url', list: 'mq-urls', value: saved.url || (ov ? pickURL(ov) : ''), placeholder: 'ws://host:8083/mqtt' });
  // Fields show examples as placeholders, never as values one must erase;
  // only what the page knows (a listener's URL, the last session's
  // entries) is filled in.
  const clientId = h('input', { id: 'mq-client-id', value: saved.clientId || '', placeholder: 'empty: a random id' });
  const version = h('select', { id: 'mq-version' }, [['5', 'MQTT 5.0'], ['4', 'MQTT 3.1.1']].map(([v, l]) =>
    h('option', { value: v, selected: String(saved.version || 5) === v }, l)));
  const user = h('input', { id: 'mq-user', value: saved.user || '', autocomplete: 'off', placeholder: 'empty: your dashboard login' });
  const pass = h('input', { id: 'mq-pass', type: 'password', autocomplete: 'new-password', placeholder: 'empty with your login' });
  const status = h('span', { id: 'mq-status', class: 'badge off' }, 'disconnected');
  const connectBtn = h('button', { id: 'mq-connect', class: 'primary' }, 'Connect');
  const subFilter = h('input', { id: 'mq-sub-filter', value: saved.subFilter || '', placeholder: 'e.g. sensors/+/temp or #' });
  const subQoS = h('select', { id: 'mq-sub-qos' }, [0, 1, 2].map((q) => h('option', { value: q }, 'QoS ' + q)));
  const subList = h('ul', { class: 'subs', id: 'mq-subs' });
  const pubTopic = h('input', { id: 'mq-pub-topic', value: saved.pubTopic || '', placeholder: 'e.g. sensors/1/temp' });
  const pubPayload = h('textarea', { id: 'mq-pub-payload', rows: 4, placeholder: 'the message, e.g. {"temp": 21.5}; empty is an empty payload' }, saved.pubPayload || '');
  const pubQoS = h('select', { id: 'mq-pub-qos' }, [0, 1, 2].map((q) => h('option', { value: q }, 'QoS ' + q)));
  const pubRetain = h('input', { id: 'mq-pub-retain', type: 'checkbox' });
  // MQTT 5 properties of the PUBLISH; empty ones are not sent.
  const pubContentType = h('input', { id: 'mq-pub-content-type', placeholder: 'e.g. application/json' });
  const pubResponseTopic = h('input', { id: 'mq-pub-response-topic', placeholder: 'e.g. replies/web' });
  const pubExpiry = h('input', { id: 'mq-pub-expiry', type: 'number', min: 0, placeholder: 'seconds; empty: never' });
  const pubUserProps = h('textarea', { id: 'mq-pub-user-props', rows: 2, placeholder: 'key=value, one a line' });
  const v5Fields = h('div', { class: 'v5', id: 'mq-v5' },
    h('div', { class: 'row' },
      h('div', { class: 'field' }, h('label', { for: 'mq-pub-content-type' }, 'Content type'), pubContentType),
      h('div', { class: 'field' }, h('label', { for: 'mq-pub-response-topic' }, 'Response topic'), pubResponseTopic)),
    h('div', { class: 'row' },
      h('div', { class: 'field narrow' }, h('label', { for: 'mq-pub-expiry' }, 'Message expiry'), pubExpiry),
      h('div', { class: 'field' }, h('label', { for: 'mq-pub-user-props' }, 'User properties'), pubUserProps)));
  const noWS = h('div', { class: 'notice hidden', id: 'mq-no-ws' });
  const stream = h('ul', { class: 'stream', id: 'mq-messages' });
  const count = h('span', { class: 'muted', id: 'mq-count' });

  const save = () => sessionStorage.setItem('xmq-mqtt', JSON.stringify({
    url: url.value, clientId: clientId.value, user: user.value, subFilter: subFilter.value, pubTopic: pubTopic.value, pubPayload: pubPayload.value,
    version: Number(version.value),
  }));
  // The MQTT 5 fields show while the connection (or the choice, when
  // disconnected) is MQTT 5.
  const renderVersion = () => {
    const v = m.mqtt && m.mqtt.state !== 'closed' ? m.mqtt.version : Number(version.value);
    v5Fields.classList.toggle('hidden', v !== 5);
  };
  version.addEventListener('change', renderVersion);
  if (ov && !urls.length) {
    noWS.textContent = noWebSocketText();
    noWS.classList.remove('hidden');
  }

  const renderState = () => {
    const s = m.mqtt?.state || 'closed';
    status.className = 'badge ' + (s === 'connected' ? 'on' : s === 'connecting' ? 'warn' : 'off');
    status.textContent = s === 'closed' ? 'disconnected' : s;
    connectBtn.textContent = s === 'closed' ? 'Connect' : 'Disconnect';
    connectBtn.className = s === 'closed' ? 'primary' : 'danger';
    // Nothing to dial: no ws or wss listener and no URL typed.
    connectBtn.disabled = s === 'closed' && !url.value.trim();
    connectBtn.title = connectBtn.disabled ? NO_WS : '';
    for (const el of [url, clientId, user, pass, version]) el.disabled = s !== 'closed';
    for (const el of document.querySelectorAll('.needs-conn')) el.disabled = s !== 'connected';
    renderVersion();
  };
  const renderSubs = () => subList.replaceChildren(...m.mqttSubs.map((s) => h('li', {}, s.filter, h('span', { class: 'muted' }, ' q' + s.qos),
    h('button', {
      title: 'Unsubscribe', onclick: async () => {
        try { await m.mqtt.unsubscribe(s.filter); } catch (e) { toast(e.message, true); }
        m.mqttSubs = m.mqttSubs.filter((x) => x !== s);
        renderSubs();
      },
    }, '×'))));
  const renderMsg = (msg, fresh) => {
    let text = new TextDecoder('utf-8', { fatal: false }).decode(msg.payload);
    if (/[\u0000-\u0008\u000e-\u001f\ufffd]/.test(text)) text = 'hex: ' + Array.from(msg.payload, (b) => b.toString(16).padStart(2, '0')).join(' ');
    const p = msg.props || {};
    const props = [];
    if (p.contentType) props.push(['content type', p.contentType]);
    if (p.payloadFormat !== undefined) props.push(['payload format', p.payloadFormat === 1 ? 'UTF-8' : 'bytes']);
    if (p.responseTopic) props.push(['response topic', p.responseTopic]);
    if (p.correlationData) props.push(['correlation data', 'hex ' + Array.from(p.correlationData, (b) => b.toString(16).padStart(2, '0')).join('')]);
    if (p.messageExpiry !== undefined) props.push(['expires in', fmtDuration(p.messageExpiry)]);
    for (const [k, v] of p.userProperties || []) props.push([k, v]);
    return h('li', { class: fresh ? 'fresh' : '' },
      h('div', { class: 'meta' }, h('span', { class: 'topic' }, msg.topic), h('span', { class: 'badge' }, 'QoS ' + msg.qos),
        msg.retain ? h('span', { class: 'badge warn' }, 'retained') : null, h('span', {}, fmtTime(msg.time)), h('span', {}, fmtBytes(msg.payload.length))),
      props.length ? h('div', { class: 'props' }, props.map(([k, v]) => h('span', { class: 'prop' }, h('b', {}, k), ' ', v))) : null,
      h('pre', {}, text || h('span', { class: 'muted' }, '(empty)')));
  };
  const renderCount = () => { count.textContent = m.mqttLog.length ? `${m.mqttLog.length} received` : ''; };
  const renderStream = () => {
    stream.replaceChildren(...(m.mqttLog.length ? m.mqttLog.map((x) => renderMsg(x, false))
      : [h('li', { class: 'empty' }, 'Messages on your subscriptions appear here')]));
    renderCount();
  };

  const attach = (c) => {
    c.onstate = () => { if (document.body.contains(status)) renderState(); };
    c.onmessage = (msg) => {
      m.mqttLog.unshift(msg);
      if (m.mqttLog.length > 500) m.mqttLog.pop();
      if (!document.body.contains(stream)) return;
      if (stream.querySelector('.empty')) stream.replaceChildren();
      stream.prepend(renderMsg(msg, true));
      while (stream.children.length > 500) stream.lastChild.remove();
      renderCount();
    };
    c.onclose = (why) => {
      m.mqttSubs = [];
      if (document.body.contains(subList)) { renderSubs(); toast('MQTT: ' + why); }
    };
  };

  connectBtn.addEventListener('click', async () => {
    if (m.mqtt && m.mqtt.state !== 'closed') { m.mqtt.close('disconnected by you'); return; }
    save();
    let login = { username: user.value, password: pass.value };
    try {
      // No user name: log in as this dashboard session.
      if (!user.value) login = await dashboardLogin();
    } catch (e) {
      toast('MQTT: ' + e.message, true);
      return;
    }
    const c = new MQTTClient(url.value.trim(), { clientId: clientId.value.trim(), ...login, keepalive: 30, version: Number(version.value) });
    m.mqtt = c;
    attach(c);
    try {
      await c.connect();
      toast('Connected as ' + c.clientId);
    } catch (e) {
      // A browser tells a WebSocket that could not open only by close
      // code 1006; without a ws listener of its own that is the reason.
      toast(urls.length ? 'MQTT: ' + e.message : NO_WS, true);
    }
  });
  url.addEventListener('input', renderState);

  const subForm = h('form', {
    onsubmit: async (e) => {
      e.preventDefault();
      save();
      const f = subFilter.value.trim(), qos = Number(subQoS.value);
      try {
        const granted = await m.mqtt.subscribe(f, qos);
        m.mqttSubs = m.mqttSubs.filter((s) => s.filter !== f).concat([{ filter: f, qos: granted }]);
        renderSubs();
      } catch (ex) { toast(ex.message, true); }
    },
  }, h('div', { class: 'row' },
    h('div', { class: 'field' }, h('label', { for: 'mq-sub-filter' }, 'Topic filter (+ and # wildcards)'), subFilter),
    h('div', { class: 'field narrow' }, h('label', {}, 'Max QoS'), subQoS),
    h('button', { id: 'mq-sub-btn', class: 'primary needs-conn', type: 'submit' }, 'Subscribe')), subList);

  const pubForm = h('form', {
    onsubmit: async (e) => {
      e.preventDefault();
      save();
      try {
        const userProperties = [];
        for (const line of pubUserProps.value.split('\n')) {
          if (!line.trim()) continue;
          const i = line.indexOf('=');
          if (i < 1) throw new Error(`user property “${line}”: write key=value`);
          userProperties.push([line.slice(0, i).trim(), line.slice(i + 1).trim()]);
        }
        const props = {
          contentType: pubContentType.value.trim(), responseTopic: pubResponseTopic.value.trim(),
          messageExpiry: pubExpiry.value ? Number(pubExpiry.value) : 0, userProperties,
        };
        await m.mqtt.publish(pubTopic.value, pubPayload.value, { qos: Number(pubQoS.value), retain: pubRetain.checked, props });
        toast('Published to ' + pubTopic.value);
      } catch (ex) { toast(ex.message, true); }
    },
  }, h('div', { class: 'field' }, h('label', { for: 'mq-pub-topic' }, 'Topic'), pubTopic),
  h('div', { class: 'field' }, h('label', { for: 'mq-pub-payload' }, 'Payload'), pubPayload),
  v5Fields,
  h('div', { class: 'row' },
    h('div', { class: 'field narrow' }, h('label', {}, 'QoS'), pubQoS),
    h('label', { class: 'check' }, pubRetain, 'Retain'),
    h('button', { id: 'mq-pub-btn', class: 'primary needs-conn', type: 'submit' }, 'Publish')));
  for (const el of [subForm, pubForm]) el.style.display = 'grid';
  for (const el of [subForm, pubForm]) el.style.gap = '12px';

  app.replaceChildren(shell('mqtt', [
    pageHead('MQTT client', 'MQTT 5.0 or 3.1.1 over WebSocket, from this browser to the broker'),
    noWS,
    h('div', { class: 'grid mqtt' },
      h('div', {},
        h('div', { class: 'panel' },
          h('div', { class: 'chart-head' }, h('h2', {}, 'Connection'), status),
          h('div', { class: 'field' }, h('label', { for: 'mq-url' }, 'Broker URL'), url,
            h('datalist', { id: 'mq-urls' }, urls.map((u) => h('option', { value: u })))),
          h('div', { class: 'row' },
            h('div', { class: 'field' }, h('label', { for: 'mq-client-id' }, 'Client id'), clientId),
            h('div', { class: 'field narrow' }, h('label', { for: 'mq-version' }, 'Protocol'), version)),
          h('div', { class: 'row' },
            h('div', { class: 'field' }, h('label', { for: 'mq-user' }, 'User name'), user),
            h('div', { class: 'field' }, h('label', { for: 'mq-pass' }, 'Password'), pass)),
          h('div', { class: 'row' }, connectBtn)),
        h('div', { class: 'panel' }, h('h2', {}, 'Subscribe'), subForm),
        h('div', { class: 'panel' }, h('h2', {}, 'Publish'), pubForm)),
      h('div', { class: 'panel' },
        h('div', { class: 'chart-head' }, h('h2', {}, 'Messages'),
          h('div', { class: 'row' }, count, h('button', { class: 'small', onclick: () => { m.mqttLog = []; renderStream(); } }, 'Clear'))),
        stream)),
  ]));
  for (const el of app.querySelectorAll('.mqtt .field, .mqtt .row')) el.style.marginBottom = '12px';
  for (const el of v5Fields.querySelectorAll('.row')) el.style.marginBottom = '0';
  if (m.mqtt) attach(m.mqtt);
  renderState();
  renderSubs();
  renderStream();
}

// ---------- routing ----------

async function route() {
  for (const f of state.cleanup.splice(0)) f();
  if (!state.me) {
    try {
      const me = await api('GET', '/auth/me');
      state.me = me.authenticated === false ? null : me;
    } catch {
      state.me = null;
    }
  }
  if (!state.me) { loginPage(); return; }
  if (state.clustered === undefined) {
    // The overview names the cluster node; a broker alone has none.
    try { state.overview = await api('GET', '/overview?history=0'); state.clustered = !!state.overview.cluster_node; } catch { /* asked again on the next page */ }
  }
  const [, page, ...rest] = (location.hash || '#/overview').split('/');
  switch (page) {
    case 'clients':
      if (rest.length) clientPage(decodeURIComponent(rest.join('/')));
      else clientsPage();
      break;
    case 'subscriptions': subscriptionsPage(); break;
    case 'retained': retainedPage(); break;
    case 'banned': bannedPage(); break;
    case 'bridges': bridgesPage(); break;
    case 'nodes': nodesPage(); break;
    case 'traces': tracesPage(); break;
    case 'audit': auditPage(); break;
    case 'users': usersPage(); break;
    case 'account': accountPage(); break;
    case 'mqtt':
      if (!state.overview) {
        try { state.overview = await api('GET', '/overview?history=0'); } catch { /* the page still works with a typed URL */ }
      }
      mqttPage();
      break;
    default: overviewPage();
  }
  window.scrollTo(0, 0);
}

window.addEventListener('hashchange', route);
app.classList.remove('boot');
route();
