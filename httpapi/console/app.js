// The event store console: a page that talks to the HTTP API of the
// server that serves it, with the key pair the user gives once (kept in
// this tab's sessionStorage, sent in headers, never in a cookie or URL).
// Everything the store holds is attacker-controlled text: it is only ever
// written with textContent or as attribute values, never parsed as HTML
// (the Content-Security-Policy requires Trusted Types, so the browser
// itself refuses to turn a string into markup).
import { el, put, route, link, fmtTime, fmtNum, pre, table, td, notice, stat, chart, sleep } from "./dom.js";
import { KEYS, TENANT, keys, tenant, api, seg, setUnauthorized } from "./api.js";
import { projectionTable, projectionsPage, projectionPage, reactionsPage } from "./definitions.js";

export const STATUSES = ["SCHEDULED", "READY", "ONGOING", "FAILED", "COMPLETED", "CANCELED"];
const main = document.getElementById("main");
let view = null; // {abort: AbortController} of the page on screen
let status = null; // the last GET /status

// currentStatus is the last GET /status, or null.
export function currentStatus() { return status; }

// ---- sign in, tenant, navigation --------------------------------------

function signOut(message) {
  sessionStorage.removeItem(KEYS);
  sessionStorage.removeItem(TENANT);
  if (view) view.abort.abort();
  showLogin(message);
}

function showLogin(message) {
  document.getElementById("nav").hidden = true;
  document.getElementById("logout").hidden = true;
  document.getElementById("tenant-box").hidden = true;
  const form = document.importNode(document.getElementById("login-template").content, true).firstElementChild;
  put(main, form);
  const err = form.querySelector("#login-error");
  if (message) err.textContent = message;
  form.addEventListener("submit", async ev => {
    ev.preventDefault();
    const access = form.elements.access.value.trim(), secret = form.elements.secret.value.trim();
    sessionStorage.setItem(KEYS, JSON.stringify({ access, secret }));
    try {
      status = await api("GET", "/status");
    } catch (e) {
      sessionStorage.removeItem(KEYS);
      err.textContent = e.status === 401 ? "These keys open no project of this server." : e.message;
      return;
    }
    await started();
  });
  form.elements.access.focus();
}

async function started() {
  document.getElementById("nav").hidden = false;
  document.getElementById("logout").hidden = false;
  await loadTenants();
  render();
}

// loadTenants fills the tenant picker when the server serves tenants.
async function loadTenants() {
  const box = document.getElementById("tenant-box"), sel = document.getElementById("tenant");
  box.hidden = true;
  if (!status || !status.tenants) return;
  let list;
  try { list = (await api("GET", "/tenants")).tenants; } catch { return; }
  const cur = tenant();
  put(sel, el("option", { value: "" }, "Project (no tenant)"),
    list.filter(t => !t.deleted).map(t => el("option", { value: t.tenantId, selected: t.tenantId === cur },
      (t.reference ? t.reference + " · " : "") + "#" + t.tenantNumber + " " + t.tenantId.slice(0, 8))));
  if (cur && !list.some(t => t.tenantId === cur && !t.deleted)) sessionStorage.removeItem(TENANT);
  box.hidden = false;
}

document.getElementById("tenant").addEventListener("change", ev => {
  if (ev.target.value) sessionStorage.setItem(TENANT, ev.target.value);
  else sessionStorage.removeItem(TENANT);
  render();
});
document.getElementById("logout").addEventListener("click", () => signOut(""));
window.addEventListener("hashchange", () => { if (keys()) render(); });

function parseHash() {
  const h = location.hash.replace(/^#\/?/, "");
  const [p, q] = h.split("?");
  const parts = p ? p.split("/").map(s => { try { return decodeURIComponent(s); } catch { return s; } }) : [];
  return { parts, q: new URLSearchParams(q || "") };
}

const pages = {
  "": overviewPage,
  aggregates: aggregatesPage,
  aggregate: aggregatePage,
  feed: feedPage,
  projections: projectionsPage,
  projection: projectionPage,
  reactions: reactionsPage,
};

export async function render() {
  if (view) view.abort.abort();
  const v = view = { abort: new AbortController() };
  const { parts, q } = parseHash();
  const page = pages[parts[0] || ""] || notFoundPage;
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.nav === (parts[0] === "aggregate" ? "aggregates" : parts[0] === "projection" ? "projections" : parts[0] || "overview"));
  }
  const root = el("div", { class: "page", "data-page": parts[0] || "overview" });
  put(main, root);
  try {
    await page(root, parts.slice(1), q, v.abort.signal);
  } catch (e) {
    if (e.name === "AbortError" || v !== view) return;
    root.append(notice(e.message, true));
  }
  if (v === view) root.setAttribute("data-ready", "");
}

function notFoundPage(root) { root.append(el("h1", {}, "Nothing here"), link("Back to the overview", "")); }

// ---- overview ---------------------------------------------------------

async function overviewPage(root, _, __, signal) {
  root.append(el("h1", {}, "Overview"));
  // Every call at once; the reaction counts when the server said it has
  // reactions at sign-in.
  const reactionCounts = () => Promise.all(STATUSES.map(x =>
    api("GET", "/reactions", { signal, query: { status: x, limit: 1 } }).then(r => r.totalCount).catch(e => e.message)));
  const early = status && status.reactions ? reactionCounts() : null;
  const [st, feeds, projs] = await Promise.all([
    api("GET", "/status", { signal }), api("GET", "/feeds", { signal }), api("GET", "/projections", { signal })]);
  status = st;
  const tot = feeds.feeds.reduce((a, f) => ({ aggs: a.aggs + f.aggregateCount, events: a.events + f.eventCount }), { aggs: 0, events: 0 });
  root.append(el("div", { class: "grid", id: "server" },
    stat(st.ready ? "ready" : "not ready", "readiness", st.ready ? "ok" : "bad"),
    stat(st.version, "server version"), stat(st.storage || "not said", "storage"),
    stat(fmtNum(feeds.feeds.length), "aggregate types"), stat(fmtNum(tot.aggs), "aggregates", "", "total-aggregates"),
    stat(fmtNum(tot.events), "events", "", "total-events"), stat(tenant() ? "tenant " + tenant().slice(0, 8) : "project", "data space")));

  const s = st.saves, n = s.batches.length;
  const perSec = s.batches.map(b => b / s.intervalSeconds);
  // The last minute: the last six buckets, the current one partly elapsed.
  const span = 5 * s.intervalSeconds + Math.min(s.intervalSeconds, Math.max(1, s.intervalSeconds - (s.until - Date.now()) / 1000));
  const lastMin = xs => xs.slice(n - 6).reduce((a, b) => a + b, 0) / span;
  root.append(el("section", {}, el("h2", {}, "Saves per second, last " + (n * s.intervalSeconds / 60) + " minutes"),
    chart(perSec, s.intervalSeconds, s.until),
    el("p", { class: "muted", id: "save-rate" }, "Last minute: " + lastMin(s.batches).toFixed(2) + " saves/s (" + lastMin(s.events).toFixed(2) +
      " events/s). Counts the saves this server process stored, all data spaces together.")));

  const heads = await Promise.all(feeds.feeds.slice(0, 100).map(f =>
    api("HEAD", "/feeds/" + seg(f.aggregateType), { signal, raw: true }).then(r => r.headers.get("Serialized-SequenceNumber-Current")).catch(() => "")));
  root.append(el("section", {}, el("h2", {}, "Aggregate types"), table(
    ["Type", ["Aggregates", { class: "num" }], ["Batches", { class: "num hide-narrow" }], ["Events", { class: "num" }], ["Feed head", { class: "num" }], ""],
    feeds.feeds.map((f, i) => el("tr", { "data-type": f.aggregateType }, td(link(f.aggregateType, "aggregates", f.aggregateType)),
      td(fmtNum(f.aggregateCount), "num"), td(fmtNum(f.batchCount), "num hide-narrow"), td(fmtNum(f.eventCount), "num"),
      td(heads[i] ?? "", "num"), td(link("feed", "feed", f.aggregateType)))))));

  root.append(el("section", {}, el("h2", {}, "Projections"), projectionTable(projs.projections)));

  if (st.reactions) {
    const counts = await (early || reactionCounts());
    root.append(el("section", {}, el("h2", {}, "Reactions"), el("div", { class: "grid", id: "reaction-counts" },
      STATUSES.map((x, i) => el("a", { href: route("reactions", { status: x }), class: "stat", "data-status": x },
        el("b", {}, fmtNum(counts[i])), el("span", {}, x.toLowerCase()))))));
  }
}

// ---- aggregates -------------------------------------------------------

// utf8Less compares ids as the server orders them: by UTF-8 bytes.
const enc = new TextEncoder();
function utf8Less(a, b) {
  const x = enc.encode(a), y = enc.encode(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] < y[i];
  return x.length < y.length;
}

async function aggregatesPage(root, parts, q, signal) {
  const type = parts[0];
  if (!type) {
    root.append(el("h1", {}, "Aggregates"));
    const feeds = await api("GET", "/feeds", { signal });
    root.append(el("section", {}, table(["Type", ["Aggregates", { class: "num" }], ["Events", { class: "num" }]],
      feeds.feeds.map(f => el("tr", {}, td(link(f.aggregateType, "aggregates", f.aggregateType)),
        td(fmtNum(f.aggregateCount), "num"), td(fmtNum(f.eventCount), "num"))))));
    return;
  }
  const limit = 50, prefix = q.get("prefix") || "";
  let skip = Math.max(0, parseInt(q.get("skip") || "0", 10) || 0);
  root.append(el("h1", {}, "Aggregates of ", el("span", { class: "mono" }, type)));
  const form = el("form", { class: "toolbar", onsubmit: ev => {
    ev.preventDefault();
    const id = form.elements.open.value;
    if (id) location.hash = route("aggregate", type, id);
    else location.hash = route("aggregates", type, { prefix: form.elements.prefix.value });
  } },
  el("input", { name: "prefix", placeholder: "id prefix", value: prefix, "aria-label": "id prefix" }),
  el("input", { name: "open", placeholder: "open an id", "aria-label": "open an id" }),
  el("button", { type: "submit" }, "Go"));
  root.append(form);
  if (prefix && !q.has("skip")) {
    // The list is in byte order of ids: find the first id not below the
    // prefix by bisection over skip (one aggregate per call).
    const first = await api("GET", "/aggregates/" + seg(type), { signal, query: { limit: 1 } });
    let lo = 0, hi = first.totalCount;
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      const r = await api("GET", "/aggregates/" + seg(type), { signal, query: { skip: mid, limit: 1 } });
      if (!r.aggregates.length) { hi = mid; continue; }
      if (utf8Less(r.aggregates[0].aggregateId, prefix)) lo = mid + 1; else hi = mid;
    }
    skip = lo;
  }
  const page = await api("GET", "/aggregates/" + seg(type), { signal, query: { skip, limit } });
  const rows = page.aggregates.filter(a => !prefix || a.aggregateId.startsWith(prefix));
  root.append(el("p", { class: "muted" }, fmtNum(page.totalCount) + " aggregates" + (prefix ? `; from #${skip + 1}, ids starting with the prefix` : `; #${skip + 1}–${skip + page.aggregates.length}`)));
  root.append(el("section", {}, table(["Id", ["Version", { class: "num" }], ["Created", { class: "hide-narrow" }], "Updated"],
    rows.map(a => el("tr", { "data-id": a.aggregateId }, td(link(a.aggregateId, "aggregate", type, a.aggregateId), "mono"),
      td(fmtNum(a.aggregateVersion), "num"), td(fmtTime(a.createdAt), "hide-narrow"), td(fmtTime(a.updatedAt)))))));
  const nav = el("div", { class: "toolbar" });
  if (skip > 0) nav.append(link("← Previous", "aggregates", type, { skip: Math.max(0, skip - limit), prefix }));
  if (page.hasMore && (!prefix || rows.length === page.aggregates.length)) nav.append(link("Next →", "aggregates", type, { skip: skip + limit, prefix }));
  root.append(nav);
}

async function aggregatePage(root, parts, q, signal) {
  const [type, id] = parts;
  root.append(el("h1", {}, el("span", { class: "mono" }, type), " / ", el("span", { class: "mono", id: "aggregate-id" }, id)));
  const list = el("section", { id: "events" });
  root.append(el("p", {}, link("All aggregates of " + type, "aggregates", type), " · ", link("Feed of " + type, "feed", type)), list);
  let since = 0, version = 0;
  const more = el("button", { type: "button", class: "plain", hidden: true, onclick: () => load().catch(e => list.append(notice(e.message, true))) }, "Load more");
  root.append(more);
  async function load() {
    const a = await api("GET", "/aggregates/" + seg(type) + "/" + seg(id), { signal, query: { since } });
    version = a.aggregateVersion;
    for (const e of a.events) list.append(eventView(e, type));
    if (a.events.length) since = a.events[a.events.length - 1].version;
    more.hidden = !a.hasMore;
    root.querySelector("#version").textContent = "version " + version;
  }
  root.insertBefore(el("p", { class: "muted", id: "version" }), list);
  await load();
}

function eventView(e, type) {
  return el("div", { class: "event", "data-event-id": e.eventId },
    el("div", { class: "event-head" }, el("b", { class: "event-type" }, e.eventType), el("span", {}, "v" + e.version + " · seq " + e.sequence),
      el("span", { class: "muted" }, fmtTime(e.recordedAt)),
      el("span", { class: "muted mono" }, e.eventId),
      link("position " + e.position + " in the feed", "feed", "_all", { since: Math.max(0, e.position - 1), at: e.eventId }),
    ),
    e.metadata ? el("div", {}, el("span", { class: "muted" }, "metadata"), pre(e.metadata)) : null,
    e.data !== undefined ? pre(e.data) : el("p", { class: "muted" }, "no data"),
    e.encryptedData ? el("div", {}, el("span", { class: "muted" }, "encryptedData"), pre(e.encryptedData)) : null);
}

// ---- live feed --------------------------------------------------------

async function feedPage(root, parts, q, signal) {
  const type = parts[0] || "_all";
  const path = "/feeds/" + seg(type);
  const filter = q.get("eventType") || "";
  const sinceParam = q.get("since");
  const feeds = await api("GET", "/feeds", { signal });
  root.append(el("h1", {}, "Feed ", el("span", { class: "mono" }, type)));
  const pick = el("select", { "aria-label": "feed", onchange: ev => { location.hash = route("feed", ev.target.value, { eventType: filter }); } },
    el("option", { value: "_all", selected: type === "_all" }, "_all (every type)"),
    feeds.feeds.map(f => el("option", { value: f.aggregateType, selected: f.aggregateType === type }, f.aggregateType)));
  const filterIn = el("input", { placeholder: "event type", value: filter, "aria-label": "filter by event type" });
  filterIn.addEventListener("change", () => { location.hash = route("feed", type, { since: sinceParam, eventType: filterIn.value }); });
  const pauseBtn = el("button", { type: "button", id: "pause" }, "Pause");
  const olderBtn = el("button", { type: "button", class: "plain", id: "older" }, "Older");
  const state = el("span", { class: "muted", id: "feed-state" });
  root.append(el("div", { class: "toolbar" }, pick, filterIn, pauseBtn, olderBtn, state));
  const list = el("section", { id: "entries" });
  const tail = el("div", { class: "toolbar" });
  root.append(list, tail);

  let first = null, cursor = 0, live = sinceParam === null, shown = 0;
  const keep = ent => !filter || ent.events.some(e => e.eventType === filter);
  function entryView(ent, fresh) {
    const at = q.get("at");
    return el("div", { class: "entry" + (fresh ? " new" : ""), "data-seq": ent.sequenceNumber, "data-aggregate": ent.aggregateId },
      el("div", { class: "event-head" }, el("b", {}, "#" + ent.sequenceNumber), el("span", { class: "muted" }, fmtTime(ent.timestamp)),
        link(ent.aggregateType + " / " + ent.aggregateId, "aggregate", ent.aggregateType, ent.aggregateId),
        el("span", {}, ent.events.map(e => el("span", { class: "tag event-type" + (e.eventId === at ? " warn" : "") }, e.eventType + " v" + e.version)))),
      el("details", {}, el("summary", { class: "muted" }, "events"), ent.events.map(e => eventView(e))));
  }
  // older reads the page of entries before the first shown one: the API
  // reads forward only, so it reads from further back until a page fills.
  async function older(n) {
    const before = first === null ? Infinity : first;
    let step = n, got = [];
    for (let tries = 0; tries < 6; tries++) {
      const from = before === Infinity ? 0 : Math.max(0, before - 1 - step);
      const r = await api("GET", path, { signal, query: { since: from, limit: 1000 } });
      got = r.entries.filter(e => e.sequenceNumber < before);
      if (before === Infinity) { got = r.entries; cursor = Math.max(cursor, r.currentSequenceNumber); }
      if (got.length >= n || from === 0 || before === Infinity) break;
      step *= 4;
    }
    got = got.slice(-n);
    if (got.length) first = got[0].sequenceNumber;
    for (const ent of got.reverse()) if (keep(ent)) { list.append(entryView(ent)); shown++; }
    olderBtn.disabled = !got.length || first <= 1;
  }
  olderBtn.addEventListener("click", () => older(25).catch(e => list.append(notice(e.message, true))));

  if (!live) {
    // History from since, oldest first, paged forward.
    let since = Math.max(0, parseInt(sinceParam, 10) || 0);
    pauseBtn.hidden = true;
    olderBtn.hidden = true;
    const r = await api("GET", path, { signal, query: { since, limit: 50 } });
    for (const ent of r.entries) if (keep(ent)) list.append(entryView(ent));
    state.textContent = "history from #" + since;
    if (r.entries.length) since = r.entries[r.entries.length - 1].sequenceNumber;
    if (since > 50) tail.append(link("← Earlier", "feed", type, { since: Math.max(0, parseInt(sinceParam, 10) - 50), eventType: filter }));
    if (r.hasMore) tail.append(link("Later →", "feed", type, { since, eventType: filter }));
    tail.append(link("Follow live", "feed", type, { eventType: filter }));
    return;
  }
  // Live: the latest entries, then long polls from the cursor.
  const head = await api("HEAD", path, { signal, raw: true });
  if (head.status === 404) { state.textContent = "no events yet"; }
  cursor = parseInt(head.headers.get("Serialized-SequenceNumber-Current") || "0", 10) || 0;
  first = cursor + 1;
  if (cursor > 0) await older(25);
  let paused = false;
  pauseBtn.addEventListener("click", () => {
    paused = !paused;
    pauseBtn.textContent = paused ? "Resume" : "Pause";
    if (!paused) poll();
  });
  let polling = false;
  async function poll() {
    if (polling) return;
    polling = true;
    state.textContent = "following from #" + cursor;
    state.className = "ok";
    try {
      while (!paused && !signal.aborted) {
        let r;
        try {
          r = await api("GET", path, { signal, query: { since: cursor, limit: 100, waitTime: 20000 } });
        } catch (e) {
          if (e.name === "AbortError") return;
          if (e.status === 404) { await sleep(1000, signal); continue; }
          state.textContent = e.message; state.className = "error";
          await sleep(2000, signal);
          continue;
        }
        for (const ent of r.entries) {
          if (keep(ent)) { list.prepend(entryView(ent, true)); shown++; }
          cursor = ent.sequenceNumber;
        }
        while (list.childElementCount > 500) list.lastElementChild.remove();
        state.textContent = (paused ? "paused at #" : "following from #") + cursor;
      }
    } finally {
      polling = false;
      if (paused) { state.textContent = "paused at #" + cursor; state.className = "muted"; }
    }
  }
  poll();
}

// ---- start ------------------------------------------------------------

setUnauthorized(signOut);
(async function start() {
  if (!keys()) { showLogin(""); return; }
  try { status = await api("GET", "/status"); } catch (e) { signOut(e.status === 401 ? "The key pair was refused." : e.message); return; }
  await started();
})();
