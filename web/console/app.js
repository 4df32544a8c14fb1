// Sluice console: a client of the public API (/v1, /metrics), nothing else.
// No framework: a small DOM builder, a router over /ui/ paths, one event
// stream (GET /v1/events, read with fetch so the API key travels in the
// Authorization header), polling where the stream is absent. See
// web/README.md for why, and docs/console.md for what each page shows.

const KEY = "sluice.apiKey"; // sessionStorage: this tab only, never a cookie
const main = document.getElementById("main");
const dialog = document.getElementById("dialog");

// ---- DOM ----------------------------------------------------------------

// h builds an element: h("a", {href: "/ui/"}, "text", child, [more]).
// Text is always set as text (never parsed as HTML).
function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") el.className = v;
      else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else if (k === "text") el.textContent = v;
      else el.setAttribute(k, v === true ? "" : v);
    }
  }
  add(el, kids);
  return el;
}
function add(el, kids) {
  for (const k of kids) {
    if (k === undefined || k === null || k === false) continue;
    if (Array.isArray(k)) add(el, k);
    else el.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
}
const svgNS = "http://www.w3.org/2000/svg";
function s(tag, attrs, ...kids) {
  const el = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  for (const k of kids) el.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return el;
}
function table(head, rows, opts = {}) {
  return h("div", { class: "scroll" },
    h("table", { "aria-label": opts.label },
      opts.caption ? h("caption", { class: "visually-hidden" }, opts.caption) : null,
      h("thead", null, h("tr", null, head.map((c) => h("th", { scope: "col", class: /^(req\/s|p50|p99|errors|error rate|psi|samples|rows|memory|rss|loads|evictions|weight|observed|limit|queued|replicas)/i.test(c) ? "num" : null }, c)))),
      h("tbody", null, rows)));
}
function td(v, cls) { return h("td", { class: cls }, v); }
function num(v, cls) { return h("td", { class: "num" + (cls ? " " + cls : "") }, v); }
function toast(msg) {
  const t = document.getElementById("toast");
  t.textContent = msg;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => (t.textContent = ""), 5000);
}

// ---- formats ------------------------------------------------------------

const fmt = {
  ms: (v) => (v === undefined || v === null || !isFinite(v) ? "–" : v < 1 ? v.toFixed(2) + " ms" : v < 100 ? v.toFixed(1) + " ms" : Math.round(v) + " ms"),
  rate: (v) => (v === undefined || v === null || !isFinite(v) ? "–" : v < 10 ? v.toFixed(2) : v < 1000 ? v.toFixed(1) : Math.round(v).toString()),
  pct: (v) => (v === undefined || v === null || !isFinite(v) ? "–" : (v * 100).toFixed(v < 0.01 && v > 0 ? 2 : 1) + " %"),
  bytes: (v) => {
    if (!v && v !== 0) return "–";
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return (i ? v.toFixed(1) : v) + " " + u[i];
  },
  ago: (t) => {
    if (!t) return "–";
    const d = (Date.now() - new Date(t).getTime()) / 1000;
    if (!isFinite(d)) return "–";
    if (d < 1) return "just now";
    if (d < 90) return Math.round(d) + " s ago";
    if (d < 5400) return Math.round(d / 60) + " min ago";
    if (d < 129600) return Math.round(d / 3600) + " h ago";
    return Math.round(d / 86400) + " d ago";
  },
  time: (t) => (t ? new Date(t).toLocaleString() : "–"),
  num: (v) => (v === undefined || v === null ? "–" : typeof v === "number" && !Number.isInteger(v) ? v.toPrecision(4) : String(v)),
};
function stateChip(state, label) {
  return h("span", { class: "chip state-" + state }, label ? label + " " + state : state);
}

// ---- API ----------------------------------------------------------------

class APIError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || "HTTP " + status);
    this.status = status;
    this.code = e.code;
    this.field = e.field;
    this.requestId = e.requestId;
  }
}
function authHeaders() {
  const k = sessionStorage.getItem(KEY);
  return k ? { Authorization: "Bearer " + k } : {};
}
// api calls the public API with the tab's key; errors are APIError.
async function api(path, { method = "GET", body, raw = false } = {}) {
  const headers = authHeaders();
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, {
    method, headers, credentials: "omit", cache: "no-store",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (raw && r.ok) return r;
  const text = await r.text();
  let data = null;
  if (text && (r.headers.get("Content-Type") || "").includes("json")) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!r.ok) throw new APIError(r.status, data);
  return data;
}
// mapLimit runs fn over items, at most n at once, in order of start.
async function mapLimit(items, n, fn) {
  const out = new Array(items.length);
  let i = 0;
  async function worker() {
    while (i < items.length) {
      const j = i++;
      try { out[j] = await fn(items[j], j); } catch (e) { out[j] = e; }
    }
  }
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
  return out;
}

// ---- session: key and role ---------------------------------------------

const session = { admin: false, needsKey: false, checked: false };

// checkSession finds out whether the server wants a key (401 on
// /v1/models) and whether this key may change things (GET /v1/workers is
// admin-only: 200 admin, 403 read-only).
async function checkSession() {
  try {
    await api("/v1/models");
  } catch (e) {
    if (e.status === 401) {
      session.needsKey = true;
      return false;
    }
    throw e;
  }
  session.needsKey = !!sessionStorage.getItem(KEY);
  try {
    await api("/v1/workers");
    session.admin = true;
  } catch (e) {
    session.admin = false;
    if (e.status !== 403) session.admin = true; // workers absent for another reason: deployments decide (a 403 then says so)
  }
  session.checked = true;
  renderWho();
  return true;
}
function renderWho() {
  const who = document.getElementById("who");
  who.replaceChildren();
  if (!session.needsKey) {
    who.append("no tenants file: every caller is admin");
    return;
  }
  const k = sessionStorage.getItem(KEY) || "";
  who.append(h("span", null, "key …" + k.slice(-4) + " · " + (session.admin ? "admin" : "read-only") + " "),
    h("button", { class: "secondary", type: "button", onclick: () => { sessionStorage.removeItem(KEY); location.reload(); } }, "Sign out"));
}
function keyForm(message) {
  document.title = "API key · Sluice console";
  main.replaceChildren(h("h1", null, "API key"),
    h("p", null, "This server runs with a tenants file: every /v1 call needs an API key. The key stays in this tab (session storage) and is sent as the Authorization header; no cookie is set."),
    message ? h("p", { class: "error", role: "alert" }, message) : null,
    h("form", {
      onsubmit: async (ev) => {
        ev.preventDefault();
        const v = ev.target.elements.key.value.trim();
        if (!v) return;
        sessionStorage.setItem(KEY, v);
        if (await checkSession()) { route(); if (!live.started) streamEvents(); }
        else { sessionStorage.removeItem(KEY); keyForm("That key was refused (401): check it and try again."); }
      },
    },
    h("label", { for: "key" }, "API key"),
    h("input", { id: "key", name: "key", type: "password", autocomplete: "off", size: 50, required: true }),
    " ", h("button", { type: "submit" }, "Use this key")));
  document.getElementById("key").focus();
}

// ---- live updates --------------------------------------------------------

const live = { mode: "connecting", lastId: null, listeners: new Set(), ctrl: null };
function setLive(mode, text) {
  live.mode = mode;
  const el = document.getElementById("live");
  el.className = mode === "live" ? "on" : "off";
  el.textContent = text;
}
function onEvent(fn) { live.listeners.add(fn); return () => live.listeners.delete(fn); }
function dispatch(kind, data) {
  for (const fn of [...live.listeners]) {
    try { fn(kind, data); } catch (e) { console.warn("event listener", e); }
  }
}
// parseBlock reads one server-sent event (the lines before a blank line).
export function parseBlock(block) {
  const ev = { id: null, event: "message", data: [] };
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const i = line.indexOf(":");
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? "" : line.slice(i + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "id") ev.id = value;
    else if (field === "event") ev.event = value;
    else if (field === "data") ev.data.push(value);
  }
  return ev.data.length ? ev : null;
}
// streamEvents reads GET /v1/events (fetch, not EventSource: EventSource
// cannot send the Authorization header). A server without the stream
// (404) is polled instead; a broken stream reconnects with Last-Event-ID.
async function streamEvents() {
  live.started = true;
  let backoff = 500;
  for (;;) {
    live.ctrl = new AbortController();
    try {
      const headers = { ...authHeaders(), Accept: "text/event-stream" };
      if (live.lastId) headers["Last-Event-ID"] = live.lastId;
      const r = await fetch("/v1/events", { headers, credentials: "omit", cache: "no-store", signal: live.ctrl.signal });
      if (r.status === 404 || r.status === 405) {
        setLive("poll", "polling every 2 s (no /v1/events on this server)");
        return;
      }
      if (!r.ok) throw new Error("events: HTTP " + r.status);
      setLive("live", "live");
      backoff = 500;
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value.replace(/\r\n?/g, "\n");
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const ev = parseBlock(buf.slice(0, i));
          buf = buf.slice(i + 2);
          if (!ev) continue;
          if (ev.id) live.lastId = ev.id;
          let data = null;
          try { data = JSON.parse(ev.data.join("\n")); } catch { continue; }
          dispatch(ev.event, data);
        }
      }
    } catch (e) {
      if (e.name === "AbortError") return;
    }
    setLive("poll", "reconnecting…");
    await new Promise((res) => setTimeout(res, backoff));
    backoff = Math.min(backoff * 2, 10000);
  }
}

// ---- metrics (GET /metrics: the same figures as `sluice top`) -----------

// parseMetrics keeps, per model and version, the request counts by code and
// the total-latency histogram.
export function parseMetrics(text) {
  const out = new Map();
  const re = /^(sluice_requests_total|sluice_request_stage_seconds_bucket)\{([^}]*)\}\s+(\S+)/;
  const lab = /(\w+)="((?:[^"\\]|\\.)*)"/g;
  for (const line of text.split("\n")) {
    if (!line.startsWith("sluice_request")) continue;
    const m = re.exec(line);
    if (!m) continue;
    const l = {};
    for (const x of m[2].matchAll(lab)) l[x[1]] = x[2];
    if (!l.model || !l.version) continue;
    const version = l.version.includes("@") ? l.version.split("@")[1] : l.version;
    const key = l.model + "@" + version;
    let v = out.get(key);
    if (!v) { v = { model: l.model, version, ok: 0, err: 0, buckets: new Map() }; out.set(key, v); }
    const val = Number(m[3]);
    if (m[1] === "sluice_requests_total") {
      if (l.code && l.code.startsWith("2")) v.ok += val; else v.err += val;
    } else if (l.stage === "total") {
      v.buckets.set(l.le === "+Inf" ? Infinity : Number(l.le), val);
    }
  }
  return out;
}
// quantile is histogram_quantile over cumulative buckets (le → count).
export function quantile(q, buckets) {
  const bs = [...buckets.entries()].sort((a, b) => a[0] - b[0]);
  if (!bs.length) return NaN;
  const total = bs[bs.length - 1][1];
  if (!(total > 0)) return NaN;
  const rank = q * total;
  let prevLe = 0, prevC = 0;
  for (const [le, c] of bs) {
    if (c >= rank) {
      if (le === Infinity) return prevLe;
      if (c === prevC) return le;
      return prevLe + (le - prevLe) * ((rank - prevC) / (c - prevC));
    }
    prevLe = le; prevC = c;
  }
  return prevLe;
}
// rates turns two scrapes into per-version req/s, error share and p99 (ms).
export function rates(prev, cur, seconds) {
  const out = new Map();
  for (const [k, c] of cur) {
    const p = prev.get(k) || { ok: 0, err: 0, buckets: new Map() };
    const ok = Math.max(0, c.ok - p.ok), err = Math.max(0, c.err - p.err);
    const d = new Map();
    for (const [le, n] of c.buckets) d.set(le, Math.max(0, n - (p.buckets.get(le) || 0)));
    const n = ok + err;
    out.set(k, { model: c.model, version: c.version, rps: n / seconds, errRate: n ? err / n : NaN, p99: n ? quantile(0.99, d) * 1000 : NaN });
  }
  return out;
}
const scrape = { prev: null, prevAt: 0, rates: new Map(), available: true };
async function scrapeMetrics() {
  if (!scrape.available) return scrape.rates;
  let text;
  try {
    const r = await fetch("/metrics", { credentials: "omit", cache: "no-store" });
    if (!r.ok) { scrape.available = false; return scrape.rates; }
    text = await r.text();
  } catch { return scrape.rates; }
  const cur = parseMetrics(text), now = performance.now();
  if (scrape.prev && now - scrape.prevAt > 500) { scrape.rates = rates(scrape.prev, cur, (now - scrape.prevAt) / 1000); scrape.ready = true; }
  scrape.prev = cur; scrape.prevAt = now;
  return scrape.rates;
}

// ---- diffs ----------------------------------------------------------------

// trafficDiff describes a change of targets as the server's audit does:
// "calc@1 100→90, calc@2 0→10" (a shadow is "shadow").
export function trafficDiff(model, before, after) {
  const w = (t) => (t ? (t.shadow ? "shadow" : String(t.weight)) : "0");
  const vs = [...new Set([...before.map((t) => t.version), ...after.map((t) => t.version)])].sort((a, b) => a - b);
  const parts = [];
  for (const v of vs) {
    const a = w(before.find((t) => t.version === v)), b = w(after.find((t) => t.version === v));
    if (a !== b) parts.push(`${model}@${v} ${a}→${b}`);
  }
  return parts.join(", ") || "no change";
}

// ---- the page controller ----------------------------------------------------

// A page is {title, load(): data, render(data): Node, events?: kinds,
// poll?: ms}. The controller loads and renders it, again on its events
// (debounced) and on its poll, keeping focus and scroll.
let current = null;
function mount(page) {
  if (current) current.stop();
  const ctl = { stopped: false, timer: null, pending: null, unsub: null };
  let busy = false, again = false;
  async function refresh() {
    if (ctl.stopped) return;
    if (busy) { again = true; return; }
    busy = true;
    try {
      const data = await page.load();
      if (ctl.stopped) return;
      const focusId = document.activeElement && main.contains(document.activeElement) ? document.activeElement.id : null;
      const y = window.scrollY;
      main.replaceChildren(page.render(data));
      main.dataset.rendered = String(Date.now());
      if (page.after) page.after(data);
      if (focusId && document.getElementById(focusId)) document.getElementById(focusId).focus();
      window.scrollTo(0, y);
    } catch (e) {
      if (ctl.stopped) return;
      if (e.status === 401) { keyForm("The server refused the key (401)."); return; }
      main.replaceChildren(h("h1", null, page.title), h("p", { class: "error", role: "alert" }, e.message));
    } finally {
      busy = false;
      if (again && !ctl.stopped) { again = false; refresh(); }
    }
  }
  function soon() {
    clearTimeout(ctl.pending);
    ctl.pending = setTimeout(refresh, 150);
  }
  ctl.unsub = onEvent((kind, data) => {
    if (kind === "reset" || (page.events && page.events(kind, data))) soon(); // reset: events were missed, read everything again
  });
  const tick = () => {
    if (ctl.stopped) return;
    const every = live.mode === "live" ? page.poll || 0 : Math.min(page.poll || 2000, 2000);
    if (every) ctl.timer = setTimeout(() => { refresh().then(tick); }, every);
    else ctl.timer = setTimeout(tick, 2000);
  };
  ctl.stop = () => { ctl.stopped = true; clearTimeout(ctl.timer); clearTimeout(ctl.pending); ctl.unsub(); if (page.stop) page.stop(); };
  ctl.refresh = refresh;
  current = ctl;
  document.title = page.title + " · Sluice console";
  refresh().then(tick);
}

// ---- pages: models --------------------------------------------------------

function weightCell(dep) {
  if (!dep) return "–";
  if (dep instanceof Error) return dep.status === 404 ? "no deployment" : "–";
  return dep.targets.map((t) => h("span", { class: "chip" }, `v${t.version} ${t.shadow ? "shadow" : t.weight + "%"}`));
}
function rolloutCell(dep) {
  const r = dep && !(dep instanceof Error) && dep.rollout;
  if (!r || !["waiting", "shadow", "canary", "paused"].includes(r.phase)) return "";
  return h("span", { class: "phase-" + r.phase }, `v${r.candidate} ${r.phase} ${r.step}/${r.steps.length}`);
}
function modelsPage() {
  const deps = new Map(); // model → deployment (or Error), filled after the first render
  let models = [], filter = new URLSearchParams(location.search).get("q") || "";
  let depsPromise = null;
  // One GET /v1/deployments for every row (after the table is drawn);
  // a model missing from it has no deployment yet.
  function loadDeps() {
    depsPromise = api("/v1/deployments").then((l) => {
      deps.clear();
      for (const d of l.deployments) deps.set(d.model, d);
      for (const m of models) {
        if (!deps.has(m.name)) deps.set(m.name, new APIError(404, null));
        const row = document.getElementById("row-" + m.name);
        if (row) fillDeploymentCells(row, m.name);
      }
      main.dataset.deployments = String(Date.now());
      if (!performance.getEntriesByName("models-deployments").length) performance.mark("models-deployments");
    }).catch((e) => toast("deployments: " + e.message));
  }
  function fillDeploymentCells(row, name) {
    const d = deps.get(name);
    row.querySelector(".c-weights").replaceChildren(...[weightCell(d)].flat());
    row.querySelector(".c-rollout").replaceChildren(...[rolloutCell(d)].flat());
  }
  function fillRates(row, m, rs) {
    let rps = 0, errs = 0, n = 0, p99 = NaN;
    for (const v of m.versions) {
      const r = rs.get(m.name + "@" + v.version);
      if (!r) continue;
      rps += r.rps;
      if (isFinite(r.errRate)) { errs += r.errRate * r.rps; n += r.rps; }
      if (isFinite(r.p99)) p99 = isFinite(p99) ? Math.max(p99, r.p99) : r.p99;
    }
    row.querySelector(".c-rps").textContent = scrape.ready ? fmt.rate(rps) : "–"; // two scrapes make a rate
    row.querySelector(".c-p99").textContent = fmt.ms(p99);
    row.querySelector(".c-err").textContent = n ? fmt.pct(errs / n) : "–";
  }
  const page = {
    title: "Models",
    poll: 5000,
    async load() {
      const [list] = await Promise.all([api("/v1/models"), scrapeMetrics()]);
      models = list.models;
      depsPromise = null; // read again after this render
      return list;
    },
    render(list) {
      const rs = scrape.rates;
      const shown = models.filter((m) => !filter || m.name.includes(filter));
      const rows = shown.map((m) => {
        const tr = h("tr", { id: "row-" + m.name },
          h("th", { scope: "row" }, h("a", { href: "/ui/models/" + m.name }, m.name)),
          td(m.versions.length ? m.versions.map((v) => stateChip(v.state, "v" + v.version)) : m.invalidPackage ? h("span", { class: "err" }, "invalid package") : "no versions"),
          td(null, "c-weights"), td(null, "c-rollout"),
          num("–", "c-rps"), num("–", "c-p99"), num("–", "c-err"));
        if (deps.has(m.name)) fillDeploymentCells(tr, m.name);
        fillRates(tr, m, rs);
        return tr;
      });
      return h("div", null,
        h("h1", null, "Models ", h("span", { class: "muted" }, `(${models.length})`)),
        h("div", { class: "filters" },
          h("div", null, h("label", { for: "q" }, "Filter by name"),
            h("input", { id: "q", type: "search", value: filter, oninput: (ev) => { filter = ev.target.value; current.refresh(); } }))),
        models.length ? table(["Model", "Versions", "Traffic", "Rollout", "req/s", "p99", "Errors"], rows, { label: "Models" })
          : h("p", null, "No models yet: push one with ", h("code", null, "sluice push DIR"), "."),
        h("p", { class: "hint" }, scrape.available ? "req/s, p99 (of the model's versions, the largest) and errors: the last few seconds of /metrics." : "This server has no /metrics (--no-metrics): no rates."));
    },
    after() {
      if (!performance.getEntriesByName("models-rendered").length) performance.mark("models-rendered");
      if (!depsPromise) loadDeps();
    },
    events(kind, data) {
      return kind === "deployment" || kind === "rollout" || kind === "version";
    },
  };
  // A second scrape soon after the first gives rates at once.
  setTimeout(() => scrapeMetrics().then(() => current && current.refresh()), 1500);
  return page;
}

// ---- pages: one model -----------------------------------------------------

const PHASES_ACTIVE = ["waiting", "shadow", "canary", "paused"];

function modelPage(name) {
  const enc = encodeURIComponent(name);
  return {
    title: name,
    poll: 10000,
    async load() {
      const model = await api(`/v1/models/${enc}`);
      const [versions, dep, stats, hist] = await Promise.all([
        mapLimit(model.versions, 6, (v) => api(`/v1/models/${enc}/versions/${v.version}`)),
        api(`/v1/deployments/${enc}`).catch((e) => e),
        api(`/v1/models/${enc}/stats?window=1h`).catch((e) => e),
        api(`/v1/deployments/${enc}/history?limit=1000`).catch((e) => e),
      ]);
      const routed = dep instanceof Error ? [] : dep.targets.map((t) => t.version);
      const drift = await mapLimit(routed, 4, (v) => api(`/v1/models/${enc}/versions/${v}/drift`).then((d) => ({ version: v, d })));
      return { model, versions, dep, stats, hist, drift };
    },
    render(x) {
      const { model, versions, dep } = x;
      const hasDep = !(dep instanceof Error);
      const r = hasDep && dep.rollout;
      const active = r && PHASES_ACTIVE.includes(r.phase);
      const weightOf = (v) => { const t = hasDep && dep.targets.find((t) => t.version === v); return t ? (t.shadow ? "shadow" : t.weight + "%") : "–"; };
      const buttons = session.admin && hasDep ? h("div", { class: "actions", role: "group", "aria-label": "Actions" },
        !active ? h("button", { type: "button", id: "act-weights", onclick: () => weightsDialog(model, versions, dep) }, "Change weights") : null,
        !active ? h("button", { type: "button", id: "act-rollout", onclick: () => rolloutDialog(model, versions, dep) }, "Start rollout") : null,
        active && r.phase !== "paused" ? h("button", { type: "button", id: "act-pause", class: "secondary", onclick: () => steerDialog(model, dep, "pause") }, "Pause") : null,
        active && r.phase === "paused" ? h("button", { type: "button", id: "act-resume", onclick: () => steerDialog(model, dep, "resume") }, "Resume") : null,
        active ? h("button", { type: "button", id: "act-promote", onclick: () => steerDialog(model, dep, "promote") }, "Promote") : null,
        active ? h("button", { type: "button", id: "act-abort", class: "danger", onclick: () => steerDialog(model, dep, "abort") }, "Abort") : null,
        h("button", { type: "button", id: "act-rollback", class: "danger", onclick: () => rollbackDialog(model, versions, dep) }, "Roll back")) : null;
      return h("div", null,
        h("p", null, h("a", { href: "/ui/" }, "Models"), " / "),
        h("h1", null, name),
        buttons,
        h("h2", null, "Versions"),
        table(["Version", "State", "Weight", "Runtime", "Digest", "Artifact", "Replicas", "Queued", "Created"], versions.map((v) => v instanceof Error ? h("tr", null, td(v.message)) : h("tr", null,
          h("th", { scope: "row" }, v.id), td(stateChip(v.state)), num(weightOf(v.version)), td(v.runtime),
          td(h("code", { title: v.digest }, (v.digest || "").slice(0, 12))),
          td(h("code", { title: "sha256 " + v.artifactSha256 }, (v.artifactSha256 || "").slice(0, 12)), " ", h("span", { class: "muted" }, fmt.bytes(v.artifactBytes))),
          num(v.servingConfig ? `${v.servingConfig.readyReplicas ?? 0}/${v.servingConfig.replicas}` : "–"),
          num(v.servingConfig ? v.servingConfig.queuedInstances ?? 0 : "–"),
          td(fmt.time(v.createdAt)))), { label: "Versions" }),
        versions.some((v) => v.reason) ? h("ul", null, versions.filter((v) => v.reason).map((v) => h("li", null, h("strong", null, v.id + ": "), v.reason))) : null,
        deploymentSection(dep),
        rolloutSection(r),
        shadowSection(hasDep && dep.shadows),
        chartsSection(x.stats, r),
        driftSection(x.drift),
        historySection(x.hist));
    },
    events(kind, data) { return data && (data.model === name || (kind === "worker")); },
  };
}
function deploymentSection(dep) {
  if (dep instanceof Error) return [h("h2", null, "Deployment"), h("p", null, dep.message)];
  return [h("h2", null, "Deployment"),
    h("p", null, `Policy version ${dep.policyVersion}, by `, h("strong", null, dep.actor), ` ${fmt.ago(dep.updatedAt)}: `, dep.reason ? `“${dep.reason}”` : "", " ", h("code", null, dep.diff)),
    table(["Version", "Weight", "", "State"], dep.targets.map((t) => h("tr", null,
      h("th", { scope: "row" }, t.id || "v" + t.version), num(t.shadow ? "shadow" : t.weight + "%"),
      td(h("span", { class: "bar" + (t.shadow ? " shadow" : ""), style: undefined, "data-w": t.weight, role: "presentation" })),
      td(stateChip(t.state || "")))), { label: "Traffic" })];
}
function rolloutSection(r) {
  if (!r) return [h("h2", null, "Rollout"), h("p", { class: "muted" }, "No rollout yet.")];
  const active = PHASES_ACTIVE.includes(r.phase);
  return [h("h2", null, "Rollout"),
    h("div", { class: "card", id: "rollout", "data-phase": r.phase, "data-step": r.step },
      h("p", null, h("strong", null, `v${r.candidate}`), ` against baseline v${r.baseline}: `, h("span", { class: "phase-" + r.phase, id: "rollout-phase" }, r.phase),
        active ? ` — step ${r.step} of ${r.steps.length} at ${r.percent}%` : "", r.reason ? ` (${r.reason})` : ""),
      h("p", null, h("label", { class: "inline", for: "rollout-progress" }, "Steps ", r.steps.map((p) => p + "%").join(" → ")),
        h("progress", { id: "rollout-progress", max: r.steps.length, value: r.phase === "promoted" ? r.steps.length : Math.max(0, r.step - (active ? 1 : 0)) }),
        active && r.phase === "canary" ? ` next step in ${Math.max(0, r.nextStepInMs / 1000).toFixed(1)} s once the gates pass` : ""),
      h("p", { class: "hint" }, `Started ${fmt.time(r.started)} by ${r.actor}.`),
      r.gates && r.gates.length ? table(["Gate", "Observed", "Limit", "Samples", "Enough samples", "Passes"], r.gates.map((g) => h("tr", null,
        h("th", { scope: "row" }, g.name), num(fmt.num(g.observed)), num(fmt.num(g.limit)), num(g.samples),
        td(g.ready ? "yes" : "not yet", g.ready ? "pass" : "wait"), td(g.pass ? "pass" : "fail", g.pass ? "pass" : "fail"))), { label: "Gates" }) : h("p", { class: "muted" }, "No gate evaluated yet."))];
}
function shadowSection(shadows) {
  if (!shadows || !shadows.length) return [];
  return [h("h2", null, "Shadows"), table(["Version", "Requests", "Disagreement", "Mean |diff|", "p50", "p99", "Errors", "Dropped"], shadows.map((x) => h("tr", null,
    h("th", { scope: "row" }, "v" + x.version), num(x.requests), num(fmt.pct(x.disagreementRate)), num(fmt.num(x.meanAbsDiff)),
    num(fmt.ms(x.p50Ms)), num(fmt.ms(x.p99Ms)), num(x.errors), num(x.dropped))), { label: "Shadows" })];
}
function driftSection(drift) {
  const out = [h("h2", null, "Drift")];
  const have = drift.filter((d) => !(d instanceof Error));
  if (!have.length) return out.concat(h("p", { class: "muted" }, "No drift monitor on the routed versions (add drift: to model.yaml)."));
  for (const { version, d } of have) {
    const rows = [...(d.features || []), ...(d.outputs || [])].map((f) => h("tr", null,
      h("th", { scope: "row" }, f.name), num(f.enough ? f.psi.toFixed(3) : "–", f.flagged ? "fail" : ""),
      td(h("span", { class: "bar", "data-w": Math.min(100, (f.psi / 0.4) * 100), role: "presentation" })),
      td(f.flagged ? "drifted (PSI > 0.2)" : f.enough ? "ok" : "not enough samples", f.flagged ? "fail" : f.enough ? "pass" : "wait"),
      num(f.samples)));
    out.push(h("h3", null, `v${version}: ${d.samples} rows since ${fmt.time(d.start)}`), table(["Feature", "PSI", "", "", "Samples"], rows, { label: `Drift of v${version}` }));
  }
  return out;
}
function historySection(hist) {
  if (hist instanceof Error) return [];
  const ev = [...hist.events].reverse().slice(0, 10);
  return [h("h2", null, "Recent changes"), ev.length ? auditTable(ev.map((e) => ({ ...e, model: hist.model }))) : h("p", { class: "muted" }, "None."),
    h("p", null, h("a", { href: "/ui/audit?model=" + encodeURIComponent(hist.model) }, "The whole audit trail of this model"))];
}

// ---- charts ---------------------------------------------------------------

// lineChart draws series [{name, cls, dash, points: [[t, v]...]}] as an SVG
// with a time axis; a table of the last values follows for screen readers.
function lineChart(title, unit, series, fmtV) {
  const W = 480, H = 180, L = 46, R = 8, T = 8, B = 22;
  const all = series.flatMap((x) => x.points);
  const fig = h("figure", null, h("figcaption", null, title));
  if (!all.length) { fig.append(h("p", { class: "muted" }, "No traffic in the last hour.")); return fig; }
  // The last hour, ending now (or at the newest point, if the server's clock is ahead).
  const t1 = Math.max(Date.now(), ...all.map((p) => p[0])), t0 = Math.min(t1 - 3600e3, ...all.map((p) => p[0]));
  const vmax = Math.max(...all.map((p) => p[1]).filter(isFinite), 0) || 1;
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R), y = (v) => T + (1 - v / vmax) * (H - T - B);
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `${title}: ${series.map((x) => x.name).join(", ")}` });
  for (let i = 0; i <= 4; i++) {
    const v = (vmax * i) / 4;
    svg.append(s("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }), s("text", { x: L - 4, y: y(v) + 3, "text-anchor": "end" }, fmtV(v)));
  }
  for (let i = 0; i <= 3; i++) {
    const t = t0 + ((t1 - t0) * i) / 3;
    svg.append(s("text", { x: x(t), y: H - 6, "text-anchor": i === 0 ? "start" : i === 3 ? "end" : "middle" }, new Date(t).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })));
  }
  for (const se of series) {
    const pts = se.points.filter((p) => isFinite(p[1]));
    if (!pts.length) continue;
    const d = pts.map((p, i) => (i ? "L" : "M") + x(p[0]).toFixed(1) + " " + y(p[1]).toFixed(1)).join("");
    svg.append(s("path", { class: "line " + se.cls + (se.dash ? " dash" : ""), d }));
    if (pts.length === 1) svg.append(s("circle", { class: se.cls, cx: x(pts[0][0]), cy: y(pts[0][1]), r: 2.5, fill: "currentColor" }));
  }
  fig.append(svg, h("ul", { class: "legend" }, series.map((se) => {
    const last = se.points.filter((p) => isFinite(p[1])).at(-1);
    return h("li", null, h("span", { class: "swatch " + se.cls, "aria-hidden": "true" }), se.name, last ? `: ${fmtV(last[1])}${unit} (last minute)` : "");
  })));
  return fig;
}
function chartsSection(stats, r) {
  const out = [h("h2", null, "Last hour, per version")];
  if (stats instanceof Error) return out.concat(h("p", { class: "muted" }, stats.status === 404 ? "This server has no per-minute stats (GET /v1/models/{name}/stats): no charts." : stats.message));
  const vs = stats.versions || [];
  const role = (id) => {
    const n = Number(String(id).split("@").pop());
    if (r && PHASES_ACTIVE.includes(r.phase)) { if (n === r.candidate) return " (canary)"; if (n === r.baseline) return " (baseline)"; }
    return "";
  };
  const series = (f) => vs.map((v, i) => ({ name: v.version + role(v.version), cls: "c" + (i % 6), dash: role(v.version) === " (baseline)", points: (v.points || []).map((p) => [new Date(p.t).getTime(), f(p)]) }));
  const stepS = 60;
  return out.concat(h("div", { class: "charts" },
    lineChart("p50 latency", " ms", series((p) => (p.count ? p.p50Ms : NaN)), (v) => v.toFixed(v < 10 ? 1 : 0)),
    lineChart("p99 latency", " ms", series((p) => (p.count ? p.p99Ms : NaN)), (v) => v.toFixed(v < 10 ? 1 : 0)),
    lineChart("Throughput", " req/s", series((p) => p.count / stepS), (v) => v.toFixed(v < 10 ? 1 : 0)),
    lineChart("Errors", " %", series((p) => (p.count ? (100 * p.errors) / p.count : NaN)), (v) => v.toFixed(1))));
}

// ---- actions --------------------------------------------------------------

// confirmDialog shows a form, then the diff, asks for a reason and applies.
// fields(form) builds the inputs; plan(form) returns {diff, call} or throws
// a message; call(reason) does the request.
function actionDialog({ title, intro, fields, plan }) {
  dialog.replaceChildren();
  let step = "edit", planned = null;
  const err = h("p", { class: "error", role: "alert", id: "dialog-error" });
  const diffBox = h("div", { id: "dialog-diff", hidden: true },
    h("h3", null, "What will change"), h("div", { class: "diff", id: "diff-text" }),
    h("label", { for: "reason" }, "Reason (goes in the audit trail)"), h("textarea", { id: "reason", name: "reason", "aria-required": "true" }));
  const submit = h("button", { type: "submit", id: "dialog-submit" }, "Review the change");
  const form = h("form", { method: "dialog" },
    h("h2", { id: "dialog-title" }, title), intro ? h("p", null, intro) : null,
    h("div", { id: "dialog-fields" }, fields()),
    diffBox, err,
    h("div", { class: "actions" }, submit, h("button", { type: "button", class: "secondary", id: "dialog-cancel", onclick: () => dialog.close() }, "Cancel")));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    err.textContent = "";
    if (step === "edit") {
      try { planned = plan(form); } catch (e) { err.textContent = e.message; return; }
      document.getElementById("diff-text").textContent = planned.diff;
      diffBox.hidden = false;
      for (const el of form.querySelectorAll("#dialog-fields input, #dialog-fields select, #dialog-fields textarea")) el.readOnly = el.disabled = true;
      submit.textContent = "Apply";
      step = "confirm";
      document.getElementById("reason").focus();
      return;
    }
    const reason = form.elements.reason.value.trim();
    if (!reason) { err.textContent = "A reason is required: it goes in the audit trail with your name."; form.elements.reason.focus(); return; }
    submit.disabled = true;
    try {
      await planned.call(reason);
      dialog.close();
      toast(title + ": done");
      if (current) current.refresh();
    } catch (e) {
      err.textContent = (e.status === 403 ? "Not allowed (403): " : "") + e.message + (e.field ? ` (field ${e.field})` : "");
      submit.disabled = false;
    }
  });
  dialog.append(form);
  dialog.showModal();
  const first = form.querySelector("#dialog-fields input, #dialog-fields select, textarea");
  if (first) first.focus();
}
function readyVersions(versions) { return versions.filter((v) => !(v instanceof Error) && v.state === "ready"); }
function weightsDialog(model, versions, dep) {
  const vs = readyVersions(versions);
  actionDialog({
    title: `Change the traffic of ${model.name}`,
    intro: "Weights are percents of the traffic and must sum to 100; a shadow takes copies of the traffic and answers nobody.",
    fields: () => table(["Version", "Weight %", "Shadow"], vs.map((v) => {
      const t = dep.targets.find((t) => t.version === v.version);
      return h("tr", null, h("th", { scope: "row" }, h("label", { for: "w-" + v.version }, v.id)),
        td(h("input", { id: "w-" + v.version, name: "w-" + v.version, type: "number", min: 0, max: 100, step: 1, value: t && !t.shadow ? t.weight : 0, "aria-label": `weight of ${v.id}` })),
        td(h("input", { id: "s-" + v.version, name: "s-" + v.version, type: "checkbox", checked: !!(t && t.shadow), "aria-label": `${v.id} as a shadow` })));
    }), { label: "Weights" }),
    plan(form) {
      const targets = [];
      let sum = 0;
      for (const v of vs) {
        const shadow = form.elements["s-" + v.version].checked;
        const w = Number(form.elements["w-" + v.version].value);
        if (!Number.isInteger(w) || w < 0 || w > 100) throw new Error(`weight of ${v.id}: a whole percent between 0 and 100, got ${form.elements["w-" + v.version].value}`);
        if (shadow) targets.push({ version: v.version, shadow: true });
        else if (w > 0) { targets.push({ version: v.version, weight: w }); sum += w; }
      }
      if (sum !== 100) throw new Error(`the weights sum to ${sum}: they must sum to 100`);
      const diff = trafficDiff(model.name, dep.targets, targets);
      if (diff === "no change") throw new Error("nothing changes: edit a weight first");
      return { diff, call: (reason) => api(`/v1/deployments/${encodeURIComponent(model.name)}`, { method: "PUT", body: { targets, reason, expectPolicyVersion: dep.policyVersion } }) };
    },
  });
}
function rolloutDialog(model, versions, dep) {
  const primary = dep.targets.filter((t) => !t.shadow).sort((a, b) => b.weight - a.weight)[0];
  const vs = readyVersions(versions).filter((v) => !primary || v.version !== primary.version);
  if (!vs.length) { toast("No other ready version to roll out: push one first."); return; }
  actionDialog({
    title: `Start a rollout of ${model.name}`,
    fields: () => [
      h("label", { for: "ro-version" }, "Candidate version"),
      h("select", { id: "ro-version", name: "version" }, vs.map((v) => h("option", { value: v.version }, v.id))),
      h("label", { for: "ro-steps" }, "Steps (percents, ending at 100; empty: the package's release plan)"),
      h("input", { id: "ro-steps", name: "steps", placeholder: "10,50,100" }),
      h("label", { for: "ro-bake" }, "Bake per step (empty: the plan's)"),
      h("input", { id: "ro-bake", name: "bake", placeholder: "5m" }),
      h("label", { for: "ro-plan" }, "More of the plan (JSON, optional: gates, minSamples, shadow… as in model.yaml's release:)"),
      h("textarea", { id: "ro-plan", name: "plan", placeholder: '{"gates": {"maxP99Ratio": 2}, "minSamples": 100}' }),
    ],
    plan(form) {
      const version = Number(form.elements.version.value);
      let plan = {};
      const more = form.elements.plan.value.trim();
      if (more) {
        try { plan = JSON.parse(more); } catch (e) { throw new Error("plan: not JSON (" + e.message + ")"); }
        if (typeof plan !== "object" || Array.isArray(plan) || plan === null) throw new Error("plan: a JSON object, like {\"minSamples\": 100}");
      }
      const steps = form.elements.steps.value.trim();
      if (steps) {
        plan.steps = steps.split(/[ ,]+/).map(Number);
        if (plan.steps.some((p) => !Number.isInteger(p) || p < 1 || p > 100)) throw new Error(`steps: whole percents between 1 and 100, got "${steps}"`);
      }
      const bake = form.elements.bake.value.trim();
      if (bake) plan.bake = bake;
      const diff = `start a rollout of ${model.name}@${version} (baseline ${primary ? model.name + "@" + primary.version : "none"})` +
        (plan.steps ? `, steps ${plan.steps.join("% → ")}%` : ", the package's release plan") + (plan.bake ? `, bake ${plan.bake}` : "") + (more ? `, plan ${JSON.stringify(plan)}` : "") +
        `\nnow: ${dep.targets.map((t) => `${t.id || model.name + "@" + t.version} ${t.shadow ? "shadow" : t.weight + "%"}`).join(", ")}`;
      const body = { version, reason: "" };
      if (Object.keys(plan).length) body.plan = plan;
      return { diff, call: (reason) => api(`/v1/deployments/${encodeURIComponent(model.name)}/rollout`, { method: "POST", body: { ...body, reason } }) };
    },
  });
}
function steerDialog(model, dep, action) {
  const r = dep.rollout, m = model.name;
  const others = dep.targets.filter((t) => t.version !== r.candidate && t.version !== r.baseline);
  const what = {
    pause: `freeze the weights where they are (${trafficDiff(m, [], dep.targets).replace(/0→/g, "")})`,
    resume: `resume the rollout of ${m}@${r.candidate} at step ${r.step}; the step's bake starts again`,
    promote: trafficDiff(m, dep.targets, [{ version: r.candidate, weight: 100 }, ...others.filter((t) => t.shadow)]),
    abort: trafficDiff(m, dep.targets, [{ version: r.baseline, weight: 100 }, ...others.filter((t) => t.shadow)]),
  }[action];
  actionDialog({
    title: `${action[0].toUpperCase() + action.slice(1)} the rollout of ${m}@${r.candidate}`,
    fields: () => [],
    plan: () => ({ diff: what, call: (reason) => api(`/v1/deployments/${encodeURIComponent(m)}/rollout:${action}`, { method: "POST", body: { reason } }) }),
  });
}
function rollbackDialog(model, versions, dep) {
  const m = model.name;
  const primary = dep.targets.filter((t) => !t.shadow).sort((a, b) => b.weight - a.weight)[0];
  const vs = readyVersions(versions);
  const def = dep.rollout && dep.rollout.baseline ? dep.rollout.baseline : Math.max(0, ...vs.map((v) => v.version).filter((n) => !primary || n < primary.version));
  actionDialog({
    title: `Roll back ${m}`,
    intro: "All the traffic goes to one version at once.",
    fields: () => [h("label", { for: "rb-to" }, "Send 100 % to"),
      h("select", { id: "rb-to", name: "to" }, vs.map((v) => h("option", { value: v.version, selected: v.version === def }, v.id)))],
    plan(form) {
      const to = Number(form.elements.to.value);
      return { diff: trafficDiff(m, dep.targets, [{ version: to, weight: 100 }]), call: (reason) => api(`/v1/deployments/${encodeURIComponent(m)}:rollback`, { method: "POST", body: { reason, to } }) };
    },
  });
}

// ---- pages: workers, audit, jobs, experiments, lab -------------------------

function workersPage() {
  return {
    title: "Workers",
    poll: 5000,
    load: () => api("/v1/workers").catch((e) => e),
    render(w) {
      if (w instanceof Error) return h("div", null, h("h1", null, "Workers"), h("p", { class: "notice" }, w.status === 403 ? "Listing the workers needs an admin key (403)." : w.message));
      if (w.mode !== "workers" || !w.workers || !w.workers.length) return h("div", null, h("h1", null, "Workers"), h("p", null, "Mode ", h("strong", null, w.mode), ": the versions run inside the server process (start it with --workers N for worker processes)."));
      return h("div", null, h("h1", null, "Workers ", h("span", { class: "muted" }, `(${w.workers.length})`)),
        table(["Worker", "State", "PID", "Memory used / budget", "RSS", "Loads", "Evictions", "Heartbeat"], w.workers.map((x) => h("tr", null,
          h("th", { scope: "row" }, x.id), td([stateChip(x.state), x.reason ? h("div", { class: "hint" }, x.reason) : null]), num(x.pid),
          num(`${fmt.bytes(x.memoryUsedBytes)} / ${fmt.bytes(x.memoryBudgetBytes)}`), num(fmt.bytes(x.rssBytes)), num(x.loads), num(x.evictions), td(fmt.ago(x.lastHeartbeat)))), { label: "Workers" }),
        h("h2", null, "Versions held"),
        table(["Worker", "Version", "Tier", "State", "Replicas", "Queued", "Memory", "Last use", "Load time", "Loads", "Evictions"], w.workers.flatMap((x) => (x.versions || []).map((v) => h("tr", null,
          td(x.id), h("th", { scope: "row" }, v.version), td(v.tier), td(stateChip(v.state)), num(v.readyReplicas), num(v.queuedInstances),
          num(fmt.bytes(v.memoryBytes) + (v.memoryMeasured ? "" : " (estimate)")), td(v.lastUsed ? fmt.ago(v.lastUsed) : "never"), num(fmt.ms(v.loadTimeMs)), num(v.loads), num(v.evictions)))), { label: "Versions held" }),
        w.demand && w.demand.length ? [h("h2", null, "Demand"), table(["Version", "Replicas wanted", "Copies", "Replica memory"], w.demand.map((d) => h("tr", null, h("th", { scope: "row" }, d.version), num(d.replicas), num(d.copies), num(fmt.bytes(d.replicaMemoryBytes)))), { label: "Demand" })] : null);
    },
    events: (kind) => kind === "worker",
  };
}

function auditTable(events) {
  return table(["When", "Model", "Actor", "Action", "What", "Reason"], events.map((e) => h("tr", null,
    td(h("time", { datetime: e.at, title: fmt.time(e.at) }, fmt.ago(e.at))), td(h("a", { href: "/ui/models/" + e.model }, e.model)),
    td(e.actor), td(e.action), td(e.what), td(e.reason || ""))), { label: "Audit trail" });
}
function auditPage() {
  const q = new URLSearchParams(location.search);
  const f = { model: q.get("model") || "", actor: q.get("actor") || "", action: q.get("action") || "", text: q.get("q") || "" };
  let all = [];
  function apply() {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries({ model: f.model, actor: f.actor, action: f.action, q: f.text })) if (v) p.set(k, v);
    history.replaceState(null, "", "/ui/audit" + (p.toString() ? "?" + p : ""));
  }
  return {
    title: "Audit trail",
    poll: 15000,
    async load() {
      const names = f.model ? [f.model] : (await api("/v1/models")).models.map((m) => m.name);
      const per = await mapLimit(names, 6, async (name) => {
        const out = [];
        let cursor = "";
        for (let page = 0; page < 20; page++) { // at most 20,000 events a model
          const hh = await api(`/v1/deployments/${encodeURIComponent(name)}/history?limit=1000${cursor ? "&cursor=" + encodeURIComponent(cursor) : ""}`);
          for (const e of hh.events) out.push({ ...e, model: name });
          if (!hh.nextCursor) break;
          cursor = hh.nextCursor;
        }
        return out;
      });
      all = per.filter((x) => !(x instanceof Error)).flat().sort((a, b) => (a.at < b.at ? 1 : -1));
      return all;
    },
    render() {
      const match = (e) => (!f.actor || e.actor === f.actor) && (!f.action || e.action === f.action) &&
        (!f.text || (e.what + " " + (e.reason || "")).toLowerCase().includes(f.text.toLowerCase()));
      const shown = all.filter(match);
      const actors = [...new Set(all.map((e) => e.actor))].sort(), actions = [...new Set(all.map((e) => e.action))].sort();
      const sel = (id, label, key, opts) => h("div", null, h("label", { for: id }, label),
        h("select", { id, onchange: (ev) => { f[key] = ev.target.value; apply(); current.refresh(); } },
          h("option", { value: "" }, "any"), opts.map((o) => h("option", { value: o, selected: o === f[key] }, o))));
      return h("div", null, h("h1", null, "Audit trail"),
        h("form", { class: "filters", role: "search", onsubmit: (ev) => { ev.preventDefault(); f.model = ev.target.elements.model.value.trim(); f.text = ev.target.elements.q.value.trim(); f.modelTyped = f.textTyped = undefined; apply(); current.refresh(); } },
          h("div", null, h("label", { for: "f-model" }, "Model"), h("input", { id: "f-model", name: "model", value: f.modelTyped ?? f.model, placeholder: "all models", oninput: (ev) => { f.modelTyped = ev.target.value; } })),
          sel("f-actor", "Actor", "actor", actors), sel("f-action", "Action", "action", actions),
          h("div", null, h("label", { for: "f-q" }, "Text"), h("input", { id: "f-q", name: "q", type: "search", value: f.textTyped ?? f.text, oninput: (ev) => { f.textTyped = ev.target.value; } })),
          h("button", { type: "submit" }, "Filter")),
        h("p", { class: "muted", id: "audit-count" }, `${shown.length} of ${all.length} events, newest first${shown.length > 500 ? " (the first 500 shown)" : ""}.`),
        shown.length ? auditTable(shown.slice(0, 500)) : h("p", null, "No event matches."));
    },
    events: (kind, data) => kind === "audit" || kind === "deployment" || kind === "rollout",
  };
}

function jobsPage() {
  return {
    title: "Jobs",
    poll: 3000,
    load: () => api("/v1/jobs?limit=200").catch((e) => e),
    render(j) {
      const head = h("h1", null, "Batch jobs");
      if (j instanceof Error) return h("div", null, head, h("p", { class: "notice" }, j.message));
      if (!j.jobs.length) return h("div", null, head, h("p", null, "No jobs yet: submit one with ", h("code", null, "sluice job submit"), " or POST /v1/jobs."));
      return h("div", null, head, table(["Job", "Model", "State", "Progress", "Rows failed", "Rows/s", "ETA", "Created"], j.jobs.map((x) => h("tr", null,
        h("th", { scope: "row" }, h("code", null, x.id)), td(x.spec.versionId || x.spec.model), td(stateChip(x.state)),
        td([h("progress", { max: x.rowsTotal || 1, value: x.rowsDone, "aria-label": `progress of ${x.id}` }), ` ${x.rowsDone}/${x.rowsTotal || "?"}`]),
        num(x.rowsFailed), num(fmt.rate(x.rowsPerSecond)), num(x.etaSeconds >= 0 && x.state === "running" ? Math.round(x.etaSeconds) + " s" : "–"), td(fmt.ago(x.created)))), { label: "Jobs" }));
    },
  };
}

function experimentsPage() {
  const iv = (lo, hi, f) => `[${f(lo)}, ${f(hi)}]`;
  const signed = (v) => (v === undefined || v === null || !isFinite(v) ? "–" : (v > 0 ? "+" : "") + (v * 100).toFixed(2) + " %");
  const arm = (a) => [h("code", null, a.id), ` ${a.units} units, ${a.outcomes} outcomes, mean ${fmt.num(a.mean)} `, h("span", { class: "hint" }, iv(a.low, a.high, fmt.num))];
  return {
    title: "Experiments",
    poll: 10000,
    load: () => api("/v1/experiments").catch((e) => e),
    render(x) {
      const head = h("h1", null, "Experiments");
      if (x instanceof Error) return h("div", null, head, h("p", { class: x.status === 404 ? "notice" : "error" }, x.status === 404 ? "This server has no outcomes store, so no experiments (docs/experiments.md)." : x.message));
      const list = x.experiments || [];
      if (!list.length) return h("div", null, head, h("p", { id: "experiments-none" }, "No running experiments: start one with ", h("code", null, "sluice ab start MODEL --a V --b V --metric NAME"), " (docs/experiments.md)."));
      return h("div", null, head,
        h("p", { class: "hint" }, "Each model's experiment at its last refresh: the always-valid p-value stays valid however often this page is looked at; a broken split (SRM) means no result can be trusted."),
        table(["Model", "Metric", "Arm A", "Arm B", "Relative lift (95 %)", "p-value", "Split", "Decision", "Refreshed"], list.map((e) => h("tr", { "data-experiment": e.model },
          h("th", { scope: "row" }, h("a", { href: "/ui/models/" + e.model }, e.model)), td(e.spec.metric + (e.spec.direction === "decrease" ? " (lower is better)" : "")),
          td(arm(e.armA)), td(arm(e.armB)),
          td([signed(e.relLift), " ", h("span", { class: "hint" }, iv(e.relLow, e.relHigh, signed))]),
          num(e.pValue < 0.001 ? e.pValue.toExponential(1) : fmt.num(e.pValue), e.significant ? "good" : ""),
          td(e.srm ? h("span", { class: "chip state-failed" }, "broken (SRM)") : h("span", { class: "chip state-ready" }, "ok")),
          td(h("strong", { class: "decision" }, e.decision)), td(fmt.ago(e.refreshed)))), { label: "Running experiments" }));
    },
  };
}

function labPage() {
  return {
    title: "Lab",
    poll: 0,
    async load() {
      try {
        const r = await api("/v1/lab/report", { raw: true });
        return { type: r.headers.get("Content-Type") || "", body: await r.text() };
      } catch (e) { return e; }
    },
    render(x) {
      const head = h("h1", null, "Model Serving Lab");
      if (x instanceof Error) {
        if (x.status === 404) return h("div", null, head, h("p", { class: "notice", id: "lab-none" }, "No report yet. Run ", h("code", null, "sluice lab --quick --out report.html"), " (docs/lab.md): the server shows the last report here."));
        return h("div", null, head, h("p", { class: "error" }, x.message));
      }
      if (x.type.includes("json")) {
        let rep = {};
        try { rep = JSON.parse(x.body); } catch { /* shown raw below */ }
        return h("div", null, head, h("pre", { class: "diff" }, JSON.stringify(rep, null, 2)));
      }
      // The report is a self-contained HTML page: shown in a sandboxed frame
      // (no script runs, nothing it links is fetched beyond this server).
      // Its links (the CSV and JSON beside it) resolve under /v1/lab/.
      const body = x.body.replace(/<head([^>]*)>/i, '<head$1><base href="/v1/lab/">');
      return h("div", null, head, h("p", { class: "hint" }, "The report as GET /v1/lab/report serves it; sluice lab --publish DATA_DIR replaces it (docs/lab.md)."),
        h("iframe", { class: "report", title: "The last Lab report", sandbox: "", srcdoc: body }));
    },
  };
}

// ---- router ---------------------------------------------------------------

const routes = [
  [/^\/ui\/?$/, "models", () => modelsPage()],
  [/^\/ui\/models\/([a-z0-9-]+)$/, "models", (m) => modelPage(m[1])],
  [/^\/ui\/workers$/, "workers", () => workersPage()],
  [/^\/ui\/audit$/, "audit", () => auditPage()],
  [/^\/ui\/jobs$/, "jobs", () => jobsPage()],
  [/^\/ui\/experiments$/, "experiments", () => experimentsPage()],
  [/^\/ui\/lab$/, "lab", () => labPage()],
];
function route() {
  if (dialog.open) dialog.close();
  for (const [re, nav, make] of routes) {
    const m = re.exec(location.pathname);
    if (!m) continue;
    for (const a of document.querySelectorAll("[data-nav]")) {
      if (a.dataset.nav === nav) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
    }
    mount(make(m));
    return;
  }
  if (current) current.stop();
  main.replaceChildren(h("h1", null, "Not found"), h("p", null, "No console page at ", h("code", null, location.pathname), ". ", h("a", { href: "/ui/" }, "Models")));
}
document.addEventListener("click", (ev) => {
  const a = ev.target.closest && ev.target.closest("a[href^='/ui']");
  if (!a || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.button !== 0) return;
  ev.preventDefault();
  if (a.getAttribute("href") !== location.pathname + location.search) history.pushState(null, "", a.getAttribute("href"));
  route();
  main.focus();
});
window.addEventListener("popstate", route);
// Bars take their width from data-w (CSS attr() cannot size yet); set
// after each render without inline style attributes in the markup.
new MutationObserver(() => {
  for (const b of main.querySelectorAll(".bar[data-w]")) b.style.width = Math.max(0, Math.min(100, Number(b.dataset.w))) * 0.8 + "px";
}).observe(main, { childList: true, subtree: true });

async function start() {
  try {
    if (!(await checkSession())) { keyForm(); setLive("poll", "waiting for a key"); return; }
  } catch (e) {
    main.replaceChildren(h("h1", null, "Sluice console"), h("p", { class: "error", role: "alert" }, "The server did not answer: " + e.message));
    return;
  }
  route();
  streamEvents();
}
start();
