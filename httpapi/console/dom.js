// The console's DOM helpers: every string becomes a text node or an
// attribute value, never markup.

// ---- DOM helpers: text only -------------------------------------------

// el builds an element; children are nodes or strings (as text nodes);
// attrs are set with setAttribute, except on* which are listeners given
// as functions. A string is never parsed as markup.
export function el(tag, attrs, ...children) {
  const e = tag === "svg" || tag === "rect" || tag === "line" || tag === "title"
    ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  append(e, children);
  return e;
}

// put replaces e's children, as append adds them.
export function put(e, ...children) {
  e.replaceChildren();
  return append(e, children);
}

export function append(e, children) {
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// route builds a hash link from path segments, each escaped.
export function route(...segs) {
  let q = "";
  const last = segs[segs.length - 1];
  if (last && typeof last === "object") {
    segs = segs.slice(0, -1);
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(last)) if (v !== undefined && v !== "" && v !== null) p.set(k, v);
    if ([...p].length) q = "?" + p;
  }
  return "#/" + segs.map(s => encodeURIComponent(String(s))).join("/") + q;
}

export function link(text, ...segs) { return el("a", { href: route(...segs) }, text); }
export function fmtTime(ms) { return ms ? new Date(ms).toLocaleString() : ""; }
export function fmtNum(n) { return typeof n === "number" ? n.toLocaleString() : String(n ?? ""); }
export function pretty(v) { return JSON.stringify(v, null, 2); }
export function pre(v) { return el("pre", {}, typeof v === "string" ? v : pretty(v)); }

export function table(head, rows) {
  return el("div", { class: "table-wrap" }, el("table", {},
    el("thead", {}, el("tr", {}, head.map(h => typeof h === "string" ? el("th", {}, h) : el("th", h[1], h[0])))),
    el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: head.length, class: "muted" }, "None")))));
}

export function td(v, cls) { return el("td", cls ? { class: cls } : {}, v); }
export function notice(text, bad) { return el("p", { class: bad ? "notice error" : "notice", role: bad ? "alert" : "status" }, text); }

// confirmButton asks in the page (no dialog) before it runs act.
export function confirmButton(label, question, act) {
  const box = el("span", { class: "confirm" });
  const ask = el("button", { type: "button", class: "danger", onclick: () => {
    put(box, el("span", {}, question),
      el("button", { type: "button", class: "danger", "data-confirm": "yes", onclick: async () => {
        put(box, el("span", { class: "muted" }, "Working…"));
        try { await act(); } catch (e) { put(box, el("span", { class: "error" }, e.message)); }
      } }, "Yes, " + label.toLowerCase()),
      el("button", { type: "button", class: "plain", onclick: () => put(box, ask) }, "Cancel"));
  } }, label);
  box.append(ask);
  return box;
}

export function stat(value, label, cls, id) {
  return el("div", { class: "stat", id }, el("b", { class: cls || "" }, value), el("span", {}, label));
}

// chart draws per-interval values as bars.
export function chart(values, interval, until) {
  const w = 600, h = 80, max = Math.max(1e-9, ...values), bw = w / values.length;
  const svg = el("svg", { class: "chart", viewBox: `0 0 ${w} ${h + 10}`, preserveAspectRatio: "none", role: "img",
    "aria-label": "saves per second, peak " + max.toFixed(2) });
  svg.append(el("line", { class: "axis", x1: 0, y1: h, x2: w, y2: h }));
  values.forEach((v, i) => {
    const bh = v > 0 ? Math.max(1, (v / max) * h) : 0;
    const start = until - (values.length - i) * interval * 1000;
    svg.append(el("rect", { x: i * bw + 0.5, y: h - bh, width: Math.max(1, bw - 1), height: bh },
      el("title", {}, new Date(start).toLocaleTimeString() + ": " + v.toFixed(2) + "/s")));
  });
  return svg;
}

export function sleep(ms, signal) {
  return new Promise((res, rej) => {
    const t = setTimeout(res, ms);
    signal.addEventListener("abort", () => { clearTimeout(t); rej(new DOMException("aborted", "AbortError")); }, { once: true });
  });
}
