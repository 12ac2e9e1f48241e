// The dashboard (docs/dashboard.md): one page, one script, one style sheet and an icon, as raw
// string literals. The page polls GET /api/dashboard once a second and asks only for history
// samples and events it does not have; the script is served from this listener (CSP
// `script-src 'self'`, no inline script or style), and it talks to nothing else.
#include "dashboard_assets.hpp"

#include <array>
#include <utility>

namespace sluice::admin {

namespace {

constexpr std::string_view page = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>sluice</title>
<link rel="icon" href="/favicon.svg">
<link rel="stylesheet" href="/dashboard.css">
<script src="/dashboard.js" defer></script>
</head>
<body>
<header>
  <h1>sluice</h1>
  <span id="connection" class="connecting">connecting</span>
  <span id="config"></span>
  <span id="http2"></span>
  <span class="spacer"></span>
  <button id="reload" type="button">Reload config</button>
  <button id="forget-token" type="button" hidden>Forget token</button>
</header>
<div id="message" hidden></div>
<main>
  <section id="fleet" hidden>
    <h2>Fleet</h2>
    <div id="fleet-summary"></div>
    <table id="fleet-instances">
      <thead><tr><th>instance</th><th>last heard</th><th>config</th><th>probes</th><th>draining (in flight)</th></tr></thead>
      <tbody></tbody>
    </table>
    <h3>Verdicts that differ</h3>
    <ul id="fleet-disagreements"></ul>
    <h3>Shared ejections</h3>
    <ul id="fleet-ejections"></ul>
  </section>
  <div id="upstreams"></div>
  <section id="certificates" hidden>
    <h2>ACME certificates</h2>
    <table>
      <thead><tr><th>domains</th><th>days to expiry</th><th>last failure</th></tr></thead>
      <tbody id="certificate-rows"></tbody>
    </table>
  </section>
  <section id="timeline">
    <h2>Events</h2>
    <ol id="events"></ol>
  </section>
</main>
</body>
</html>
)html";

constexpr std::string_view style = R"css(
:root { --up: #1a7f37; --slow: #9a6700; --down: #cf222e; --ejected: #bc4c00; --drain: #6639ba;
        --muted: #57606a; --line: #d0d7de; font-family: system-ui, sans-serif; font-size: 14px; }
body { margin: 0; color: #1f2328; background: #f6f8fa; }
header { display: flex; gap: 12px; align-items: center; padding: 8px 16px; background: #24292f; color: #fff; }
header h1 { font-size: 18px; margin: 0; }
.spacer { flex: 1; }
#config, #http2 { color: #d0d7de; }
#connection { padding: 2px 8px; border-radius: 10px; font-weight: 600; }
#connection.live { background: var(--up); }
#connection.connecting { background: var(--muted); }
#connection.disconnected { background: var(--down); }
button { cursor: pointer; border: 1px solid var(--line); border-radius: 6px; background: #fff; padding: 2px 10px; }
header button { background: #32383f; color: #fff; border-color: #57606a; }
#message { margin: 8px 16px; padding: 8px 12px; border-radius: 6px; background: #ddf4ff; white-space: pre-wrap; }
#message.error { background: #ffebe9; }
main { padding: 0 16px 16px; }
section.upstream { background: #fff; border: 1px solid var(--line); border-radius: 6px; margin: 12px 0; padding: 8px 12px; }
section.upstream h2 { font-size: 16px; margin: 4px 0 8px; }
.balance { color: var(--muted); font-weight: normal; font-size: 13px; }
canvas.chart { width: 100%; height: 120px; display: block; }
.legend { color: var(--muted); font-size: 12px; margin: 2px 0 8px; }
.legend .rps { color: #0969da; } .legend .errors { color: var(--down); } .legend .p99 { color: var(--slow); }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid var(--line); white-space: nowrap; }
th { color: var(--muted); font-weight: 600; font-size: 12px; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.state { white-space: normal; max-width: 420px; }
.address { color: var(--muted); font-size: 12px; }
.badge { display: inline-block; padding: 0 8px; border-radius: 10px; color: #fff; font-weight: 600; margin-right: 6px; }
.badge.up { background: var(--up); } .badge.slow_start { background: var(--slow); }
.badge.down { background: var(--down); } .badge.ejected { background: var(--ejected); }
.badge.draining, .badge.drained { background: var(--drain); }
.reason { color: var(--muted); }
#fleet { background: #fff; border: 1px solid var(--line); border-radius: 6px; margin: 12px 0; padding: 8px 12px; }
#fleet h2 { font-size: 16px; margin: 4px 0 8px; } #fleet h3 { font-size: 13px; margin: 8px 0 2px; color: var(--muted); }
#fleet-ejections, #fleet-disagreements { margin: 0; padding-left: 18px; }
.disagree { color: var(--down); font-weight: 600; }
#timeline, #certificates { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; }
#certificates { margin: 12px 0; }
#timeline h2, #certificates h2 { font-size: 16px; margin: 4px 0; }
#events { list-style: none; padding: 0; margin: 0; max-height: 320px; overflow-y: auto; font-size: 13px; }
#events li { padding: 2px 0; border-bottom: 1px dotted var(--line); }
#events .when { color: var(--muted); margin-right: 8px; font-variant-numeric: tabular-nums; }
#events .kind { font-weight: 600; margin-right: 6px; }
)css";

constexpr std::string_view script = R"js('use strict';
// sluice dashboard: polls /api/dashboard once a second (only new history samples and events),
// renders one row per server, a chart per upstream and the event timeline; drain, undrain and
// reload POST to this listener with the admin token from sessionStorage when one is needed.
(() => {
  const TOKEN_KEY = 'sluice-admin-token';
  const POLL_MS = 500;  // twice a second: a state change shows within half a second
  const CHART_SECONDS = 300;
  const $ = (id) => document.getElementById(id);
  const state = { tick: 0, event: 0, charts: new Map(), sections: new Map(), events: [] };

  function el(tag, className, text) {
    const e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function setText(e, text) { if (e.textContent !== text) e.textContent = text; }
  function ago(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 120) return s + ' s';
    if (s < 7200) return Math.round(s / 60) + ' min';
    return Math.round(s / 3600) + ' h';
  }
  function num(v, digits) { return v === null || v === undefined ? '–' : Number(v).toFixed(digits); }

  function showMessage(text, isError) {
    const m = $('message');
    m.hidden = false;
    m.className = isError ? 'error' : '';
    m.textContent = text;
  }

  // --- actions -----------------------------------------------------------------------------
  async function post(path) {
    for (let attempt = 0; attempt < 2; attempt++) {
      const headers = { 'Content-Type': 'application/json' };
      const token = sessionStorage.getItem(TOKEN_KEY);
      if (token) headers['Authorization'] = 'Bearer ' + token;
      const r = await fetch(path, { method: 'POST', headers, body: '{}', cache: 'no-store' });
      if (r.status !== 401) return r;
      sessionStorage.removeItem(TOKEN_KEY);
      const entered = window.prompt('Admin token (' + (token ? 'the stored one was refused' : 'required') + ')');
      if (!entered) return r;
      sessionStorage.setItem(TOKEN_KEY, entered.trim());
      updateTokenButton();
    }
  }
  async function drain(upstream, server, on) {
    const path = '/api/upstreams/' + encodeURIComponent(upstream) + '/servers/' +
                 encodeURIComponent(server) + '/' + (on ? 'drain' : 'undrain');
    try {
      const r = await post(path);
      const body = await r.json();
      if (r.ok) showMessage(upstream + '/' + server + ': ' + (on ? 'draining' : 'undrained'), false);
      else showMessage((on ? 'drain' : 'undrain') + ' failed (' + r.status + '): ' + (body.error || ''), true);
    } catch (e) { showMessage('drain failed: ' + e, true); }
    poll();
  }
  async function reload() {
    try {
      const r = await post('/api/reload');
      const body = await r.json();
      if (r.ok && body.ok) showMessage('reloaded: config version ' + body.version +
          (body.watch_ms ? '; watched for ' + body.watch_ms / 1000 + ' s (the verdict comes in the events)' : ''), false);
      else if (body.errors) showMessage('reload rejected; the previous configuration keeps serving:\n' + body.errors.join('\n'), true);
      else showMessage('reload failed (' + r.status + '): ' + (body.error || ''), true);
    } catch (e) { showMessage('reload failed: ' + e, true); }
    poll();
  }
  function updateTokenButton() { $('forget-token').hidden = !sessionStorage.getItem(TOKEN_KEY); }

  // --- rendering ---------------------------------------------------------------------------
  const COLUMNS = ['server', 'state', 'weight', 'in flight', 'req/s', 'errors', 'p50 ms', 'p99 ms',
                   'first byte ms', 'retries', 'ejections', 'pooled', ''];

  function section(u) {
    let s = state.sections.get(u.name);
    if (s) return s;
    const root = el('section', 'upstream');
    root.dataset.upstream = u.name;
    const h = el('h2', null, u.name + ' ');
    const balance = el('span', 'balance');
    h.appendChild(balance);
    const canvas = el('canvas', 'chart');
    canvas.width = 900; canvas.height = 120;
    const legend = el('div', 'legend');
    legend.append(el('span', 'rps', '— requests/s  '), el('span', 'errors', '— errors/s  '),
                  el('span', 'p99', '— p99 latency (ms, right axis)  '), el('span', 'span', 'last 5 min'));
    const table = el('table');
    const head = el('tr');
    for (const c of COLUMNS) head.appendChild(el('th', null, c));
    table.appendChild(el('thead')).appendChild(head);
    const body = table.appendChild(el('tbody'));
    root.append(h, canvas, legend, table);
    $('upstreams').appendChild(root);
    s = { root, balance, canvas, body, rows: new Map() };
    state.sections.set(u.name, s);
    return s;
  }

  function row(s, upstream, server) {
    let r = s.rows.get(server.identity);
    if (r) return r;
    const tr = el('tr');
    tr.dataset.upstream = upstream;
    tr.dataset.server = server.identity;
    const cells = COLUMNS.map((c, i) => el('td', i >= 2 && i <= 11 ? 'num' : (i === 1 ? 'state' : null)));
    const name = el('div', 'name'), address = el('div', 'address');
    cells[0].append(name, address);
    const badge = el('span', 'badge'), reason = el('span', 'reason');
    cells[1].append(badge, reason);
    const button = el('button', 'drain');
    button.type = 'button';
    button.addEventListener('click', () => drain(upstream, server.identity, !r.draining));
    cells[12].appendChild(button);
    tr.append(...cells);
    s.body.appendChild(tr);
    r = { tr, cells, name, address, badge, reason, button, draining: false };
    s.rows.set(server.identity, r);
    return r;
  }

  function stateText(sv) {
    if (sv.state === 'draining') return sv.in_flight + ' in flight';
    const since = sv.since_ms_ago === undefined ? '' : ago(sv.since_ms_ago);
    if (sv.state === 'drained') return 'no request in flight' + (sv.health_state ? '; health ' + sv.health_state : '');
    return since + (sv.reason ? ': ' + sv.reason : '');
  }

  function renderServer(r, sv) {
    setText(r.name, sv.identity);
    setText(r.address, sv.identity === sv.address ? '' : sv.address);
    r.badge.className = 'badge ' + sv.state;
    setText(r.badge, sv.state);
    r.cells[1].dataset.state = sv.state;
    setText(r.reason, stateText(sv));
    const weight = sv.effective_weight < sv.weight ? sv.effective_weight.toFixed(2) + ' / ' + sv.weight : String(sv.weight);
    const values = [weight, String(sv.in_flight), num(sv.rps, 1), num(sv.error_rate * 100, 1) + ' %',
                    num(sv.p50_ms, 1), num(sv.p99_ms, 1), num(sv.first_byte_ewma_ms, 1), String(sv.retries),
                    sv.ejections === undefined ? '–' : String(sv.ejections), String(sv.pooled)];
    values.forEach((v, i) => setText(r.cells[i + 2], v));
    r.draining = sv.draining;
    setText(r.button, sv.draining ? 'Undrain' : 'Drain');
  }

  function renderUpstreams(data) {
    const seen = new Set();
    for (const u of data.upstreams) {
      seen.add(u.name);
      const s = section(u);
      setText(s.balance, u.balance + ', ' + u.protocol + ', ' + u.servers.length + ' server(s)');
      const ids = new Set();
      for (const sv of u.servers) { ids.add(sv.identity); renderServer(row(s, u.name, sv), sv); }
      for (const [id, r] of s.rows) if (!ids.has(id)) { r.tr.remove(); s.rows.delete(id); }
      appendHistory(u.name, u.history);
      drawChart(s.canvas, state.charts.get(u.name));
    }
    for (const [name, s] of state.sections) {
      if (!seen.has(name)) { s.root.remove(); state.sections.delete(name); state.charts.delete(name); }
    }
  }

  // Fleet mode: this instance and every other live one, what each probes and holds draining;
  // a config that differs from this instance's and a Redis that does not answer stand out.
  function fleetRow(name, heard, config, same, probes, draining) {
    const tr = el('tr');
    tr.dataset.instance = name;
    const c = el('td', same ? 'config' : 'config disagree', config + (same ? '' : ' (differs from this one)'));
    tr.append(el('td', null, name), el('td', null, heard), c, el('td', 'probes', probes.join(', ') || '–'),
              el('td', 'draining', draining || '–'));
    return tr;
  }

  function renderFleet(f) {
    $('fleet').hidden = !f;
    if (!f) return;
    const summary = $('fleet-summary');
    setText(summary, 'Redis ' + f.redis + (f.redis_up ? ' answers' : ' does not answer: this instance is on its own') +
            ' · drains: ' + (f.drains.length ? f.drains.join(', ') : 'none') +
            (f.unpublished.length ? ' · ' + f.unpublished.length + ' change(s) not yet written' : ''));
    summary.className = f.redis_up ? '' : 'disagree';
    const rows = [fleetRow(f.name + ' (this one)', 'now', f.config, true, f.probes, f.drains.join(', '))];
    for (const [name, i] of Object.entries(f.instances)) {
      const draining = Object.entries(i.draining).map(([s, n]) => s + ' (' + n + ')').join(', ');
      rows.push(fleetRow(name, ago(i.last_heard_ms_ago) + ' ago', i.config, i.same_config, i.probes, draining));
    }
    $('fleet-instances').tBodies[0].replaceChildren(...rows);
    const differ = Object.entries(f.disagreements).map(([server, views]) => {
      const li = el('li', 'disagree', server + ': ' + Object.entries(views).map(([n, v]) => n + ' ' + v).join(', '));
      li.dataset.server = server;
      return li;
    });
    $('fleet-disagreements').replaceChildren(...(differ.length ? differ : [el('li', null, 'none')]));
    const ejections = f.share_ejections ? f.ejections.map((e) => {
      const li = el('li', null, e.server + ': ejected by ' + e.from + ', ' + Math.ceil(e.left_ms / 1000) +
                    ' s left: ' + e.reason);
      li.dataset.server = e.server;
      return li;
    }) : [el('li', null, 'not shared (share_ejections = false)')];
    if (f.share_ejections && ejections.length === 0) ejections.push(el('li', null, 'none'));
    $('fleet-ejections').replaceChildren(...ejections);
  }

  function appendHistory(name, h) {
    let c = state.charts.get(name);
    if (!c) { c = { rps: [], errors: [], p99: [] }; state.charts.set(name, c); }
    c.rps.push(...h.rps); c.errors.push(...h.errors); c.p99.push(...h.p99_ms);
    for (const k of ['rps', 'errors', 'p99']) if (c[k].length > CHART_SECONDS) c[k].splice(0, c[k].length - CHART_SECONDS);
  }

  function drawChart(canvas, c) {
    if (canvas.clientWidth && canvas.width !== canvas.clientWidth) canvas.width = canvas.clientWidth;
    canvas.dataset.samples = String(c.rps.length);
    const g = canvas.getContext('2d');
    const w = canvas.width, h = canvas.height, pad = 4;
    g.clearRect(0, 0, w, h);
    g.strokeStyle = '#d0d7de'; g.lineWidth = 1;
    g.strokeRect(0.5, 0.5, w - 1, h - 1);
    const maxRate = Math.max(1, ...c.rps, ...c.errors);
    const maxP99 = Math.max(1, ...c.p99.filter((v) => v !== null));
    const line = (values, max, color) => {
      g.strokeStyle = color; g.lineWidth = 1.5; g.beginPath();
      let started = false;
      values.forEach((v, i) => {
        if (v === null) { started = false; return; }
        const x = w - (values.length - 1 - i) * (w / CHART_SECONDS) - pad;
        const y = h - pad - (v / max) * (h - 2 * pad - 12);
        if (started) g.lineTo(x, y); else { g.moveTo(x, y); started = true; }
      });
      g.stroke();
    };
    line(c.rps, maxRate, '#0969da');
    line(c.errors, maxRate, '#cf222e');
    line(c.p99, maxP99, '#9a6700');
    g.fillStyle = '#57606a'; g.font = '11px system-ui, sans-serif';
    g.fillText('max ' + maxRate + ' req/s', 6, 12);
    const right = 'p99 max ' + maxP99.toFixed(1) + ' ms';
    g.fillText(right, w - g.measureText(right).width - 6, 12);
  }

  // A few rows (one per ACME certificate): rebuilt when what they show changes.
  function renderCertificates(data) {
    const certs = data.certificates || [];
    $('certificates').hidden = certs.length === 0;
    const key = JSON.stringify(certs);
    if (key === state.certificates) return;
    state.certificates = key;
    $('certificate-rows').replaceChildren(...certs.map((c) => {
      const tr = el('tr');
      tr.dataset.domain = c.domains[0];
      const failure = c.failures === 0 ? '–' : c.failures + ' failure(s): ' + c.last_error +
        (c.retry_in_s === null ? '' : '; retry in ' + c.retry_in_s + ' s');
      tr.append(el('td', null, c.domains.join(', ')), el('td', 'num', num(c.days_to_expiry, 1)),
                el('td', 'reason', failure));
      return tr;
    }));
  }

  function renderEvents(data) {
    const now = Date.now();
    for (const e of data.events) state.events.push({ ...e, at: now - e.ms_ago });
    if (state.events.length > 50) state.events.splice(0, state.events.length - 50);
    if (data.events.length === 0 && state.rendered) return;
    state.rendered = true;
    const list = $('events');
    list.replaceChildren(...state.events.slice().reverse().map((e) => {
      const li = el('li');
      li.dataset.kind = e.kind;
      const where = [e.upstream, e.server].filter(Boolean).join('/');
      li.append(el('span', 'when', new Date(e.at).toLocaleTimeString()), el('span', 'kind', e.kind),
                document.createTextNode((where ? where + ': ' : '') + e.text));
      return li;
    }));
  }

  // --- polling -----------------------------------------------------------------------------
  let timer = null;
  function connection(text) { const c = $('connection'); c.className = text; setText(c, text); }

  async function poll() {
    clearTimeout(timer);
    const abort = new AbortController();
    const giveUp = setTimeout(() => abort.abort(), 3000);
    try {
      const r = await fetch('/api/dashboard?tick=' + state.tick + '&event=' + state.event,
                            { cache: 'no-store', signal: abort.signal });
      if (!r.ok) throw new Error('HTTP ' + r.status);
      const data = await r.json();
      if (data.tick < state.tick) {  // sluice restarted: what the page holds is another process's
        state.tick = 0; state.event = 0; state.events = []; state.charts.clear();
        timer = setTimeout(poll, 0);
        return;
      }
      state.tick = data.tick;
      if (data.events.length) state.event = data.events[data.events.length - 1].seq;
      setText($('config'), 'config version ' + data.config_version + ' · ' + data.config_file);
      setText($('http2'), 'HTTP/2: ' + data.http2.connections + ' connection(s), ' + data.http2.streams +
              ' open stream(s)');
      renderFleet(data.fleet);
      renderUpstreams(data);
      renderCertificates(data);
      renderEvents(data);
      connection('live');
    } catch (e) {
      connection('disconnected');
    } finally {
      clearTimeout(giveUp);
    }
    timer = setTimeout(poll, POLL_MS);
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('reload').addEventListener('click', reload);
    $('forget-token').addEventListener('click', () => { sessionStorage.removeItem(TOKEN_KEY); updateTokenButton(); });
    updateTokenButton();
    poll();
  });
})();
)js";

constexpr std::string_view icon = R"svg(<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#24292f"/><path d="M3 5h10M3 8h10M3 11h10" stroke="#2da44e" stroke-width="2"/></svg>
)svg";

constexpr Asset page_asset{"text/html; charset=utf-8", page};
constexpr Asset script_asset{"text/javascript; charset=utf-8", script};
constexpr Asset style_asset{"text/css; charset=utf-8", style};
constexpr Asset icon_asset{"image/svg+xml", icon};

constexpr std::array<std::pair<std::string_view, const Asset*>, 5> assets{{
    {"", &page_asset},
    {"dashboard", &page_asset},
    {"dashboard.js", &script_asset},
    {"dashboard.css", &style_asset},
    {"favicon.svg", &icon_asset},
}};

}  // namespace

const Asset* dashboard_asset(std::string_view name) {
  for (const auto& [path, asset] : assets)
    if (path == name) return asset;
  return nullptr;
}

}  // namespace sluice::admin
