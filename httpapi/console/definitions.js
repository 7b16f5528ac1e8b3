// The console's projection and reaction pages.

import { el, put, route, link, fmtTime, fmtNum, pretty, pre, table, td, notice, confirmButton, stat } from "./dom.js";
import { api, seg } from "./api.js";
import { render, currentStatus, STATUSES } from "./app.js";

export function projectionState(p) {
  if (p.rebuildReason) return el("span", { class: "warn", title: p.rebuildReason }, "rebuilding after a rewind");
  if (p.rebuilding) return el("span", { class: "warn" }, "rebuilding");
  if (p.behind > 0) return el("span", { class: "warn" }, "catching up");
  return el("span", { class: "ok" }, "up to date");
}

export function projectionTable(list) {
  return table(["Projection", ["Kind", { class: "hide-narrow" }], ["Feed", { class: "hide-narrow" }], "Status", ["Lag", { class: "num" }], ["Instances", { class: "num hide-narrow" }], ["Errors", { class: "num" }]],
    list.map(p => el("tr", { "data-projection": p.projectionName }, td(link(p.projectionName, "projection", p.projectionName)),
      td(p.aggregated ? "aggregated" : "single", "hide-narrow"), td(p.feedName || "_all", "hide-narrow"), td(projectionState(p)),
      td(fmtNum(p.behind), "num"), td(fmtNum(p.projectionsCount), "num hide-narrow"),
      td(el("span", { class: p.errors.length ? "bad" : "" }, fmtNum(p.errors.length)), "num"))));
}

// ---- projections ------------------------------------------------------

export const TEMPLATE = {
  projectionName: "order-totals", feedName: "order", handlers: [
    { eventType: "OrderPlaced", functions: [{ function: "set", targetSelector: "$.projection.total", eventSelector: "$.event.total" }] }],
};

export async function projectionsPage(root, parts, q, signal) {
  root.append(el("h1", {}, "Projections"));
  if (parts[0] === "new") return editDefinition(root, null, signal);
  const [defs, ov] = await Promise.all([api("GET", "/projections/definitions", { signal, query: { limit: 1000 } }), api("GET", "/projections", { signal })]);
  root.append(el("div", { class: "toolbar" }, el("a", { href: route("projections", "new"), id: "new-projection" }, "New definition")));
  const byName = new Map(ov.projections.map(p => [p.projectionName, p]));
  root.append(el("section", {}, el("h2", {}, "Status"), projectionTable(ov.projections)));
  root.append(el("section", {}, el("h2", {}, "Definitions"), table(["Name", "Feed", "Kind", "Handlers", "Description"],
    defs.definitions.map(d => el("tr", {}, td(link(d.projectionName, "projection", d.projectionName)), td(d.feedName || "_all"),
      td(d.aggregated ? "aggregated" : "single"), td(d.handlers.map(h => el("span", { class: "tag" }, h.eventType))),
      td(d.description || "", "muted"))))));
  if (defs.hasMore) root.append(el("p", { class: "muted" }, "More definitions than shown."));
  void byName;
}

export async function editDefinition(root, def, signal) {
  const ta = el("textarea", { id: "definition-json", spellcheck: "false", "aria-label": "definition JSON" });
  ta.value = pretty(def || TEMPLATE);
  const msg = el("div", { role: "status" });
  const save = el("button", { type: "button", id: "save-definition", onclick: async () => {
    let body;
    try { body = JSON.parse(ta.value); } catch (e) { put(msg, notice("Not JSON: " + e.message, true)); return; }
    try {
      const name = def ? def.projectionName : body.projectionName;
      if (def) await api("PUT", "/projections/definitions/" + seg(def.projectionName), { body, signal });
      else await api("POST", "/projections/definitions", { body, signal });
      location.hash = route("projection", name || "");
    } catch (e) {
      put(msg, notice(e.message, true), e.body && e.body.errors && e.body.errors.length ?
        el("ul", { class: "error" }, e.body.errors.map(x => el("li", {}, x.field + ": " + x.message))) : null);
    }
  } }, def ? "Replace (rebuilds it)" : "Create");
  root.append(el("h2", {}, def ? "Replace " + def.projectionName : "New definition"), ta, el("div", { class: "toolbar" }, save,
    el("a", { href: def ? route("projection", def.projectionName) : route("projections") }, "Cancel")), msg);
}

export async function projectionPage(root, parts, q, signal) {
  const name = parts[0];
  const dpath = "/projections/definitions/" + seg(name);
  if (parts[1] === "edit") {
    root.append(el("h1", {}, "Projection ", el("span", { class: "mono" }, name)));
    return editDefinition(root, await api("GET", dpath, { signal }), signal);
  }
  if (parts[1] === "instance") return instancePage(root, name, parts[2], signal);
  const [def, ov] = await Promise.all([api("GET", dpath, { signal }), api("GET", "/projections", { signal })]);
  const p = ov.projections.find(x => x.projectionName === name);
  const kind = def.aggregated ? "aggregated" : "single";
  root.append(el("h1", {}, "Projection ", el("span", { class: "mono" }, name)));
  const msg = el("div");
  root.append(el("div", { class: "toolbar" }, el("a", { href: route("projection", name, "edit"), id: "edit" }, "Replace…"),
    confirmButton("Reset", "Drop every instance and rebuild from the feed?", async () => {
      await api("DELETE", "/projections/" + kind + "/" + seg(name), { signal });
      put(msg, notice("Reset: it is being rebuilt."));
    }),
    confirmButton("Delete", "Delete " + name + " with all its instances?", async () => {
      await api("DELETE", dpath, { signal });
      location.hash = route("projections");
    })), msg);
  if (p) {
    root.append(el("div", { class: "grid", id: "projection-status" }, stat(projectionState(p), "status"),
      stat(fmtNum(p.checkpoint), "checkpoint", "", "checkpoint"), stat(fmtNum(p.head), "feed head"),
      stat(fmtNum(p.behind), "lag (positions behind)", p.behind ? "warn" : "", "lag"),
      stat(fmtNum(p.projectionsCount), "instances", "", "instances"),
      stat(fmtNum(p.errors.length), "recorded errors", p.errors.length ? "bad" : "", "error-count")));
    if (p.rebuildReason) root.append(notice("Rebuilding: " + p.rebuildReason));
    root.append(el("section", { id: "errors" }, el("h2", {}, "Recorded errors"), table(["Position", "Event", "Instance", "Message"],
      p.errors.map(e => el("tr", { class: "projection-error" },
        td(e.position ? link("#" + e.position, "feed", "_all", { since: Math.max(0, e.position - 1), at: e.eventId }) : ""),
        td(el("span", {}, el("span", { class: "tag" }, e.eventType || ""), el("span", { class: "mono muted" }, e.eventId || ""))),
        td(e.instanceId || "", "mono"), td(e.message, "error"))))));
  }
  root.append(el("section", {}, el("h2", {}, "Definition"), pre(def)));
  if (def.aggregated) {
    let inst = null;
    try { inst = await api("GET", "/projections/aggregated/" + seg(name), { signal }); } catch (e) { if (e.status !== 404) throw e; }
    root.append(el("section", {}, el("h2", {}, "Aggregated instance"), inst ? pre(inst.data) : el("p", { class: "muted" }, "None yet")));
    return;
  }
  await instancesList(root, name, def, q, signal);
}

export async function instancesList(root, name, def, q, signal) {
  const sort = q.get("sort") || "", search = q.get("search") || "", skip = parseInt(q.get("skip") || "0", 10) || 0, limit = 25;
  const form = el("form", { class: "toolbar", onsubmit: ev => {
    ev.preventDefault();
    location.hash = route("projection", name, { search: form.elements.search ? form.elements.search.value : "", sort: form.elements.sort.value });
  } },
  def.indexedFields && def.indexedFields.length ? el("input", { name: "search", value: search, placeholder: "search " + def.indexedFields.join(", "), "aria-label": "search" }) : null,
  el("select", { name: "sort", "aria-label": "sort" }, ["", "-updatedAt", "updatedAt", "-createdAt", "createdAt", "projectionId", "-projectionId", "reference"].map(s =>
    el("option", { value: s, selected: s === sort }, s || "default order"))),
  el("button", { type: "submit" }, "Apply"));
  const r = await api("GET", "/projections/single/" + seg(name), { signal, query: { skip, limit, sort, search } });
  root.append(el("section", { id: "instances" }, el("h2", {}, "Instances (" + fmtNum(r.totalCount) + ")"), form,
    table(["Id", "Reference", "Updated", "Data"], r.projections.map(p => el("tr", {},
      td(link(p.projectionId, "projection", name, "instance", p.projectionId), "mono"), td(p.reference || ""), td(fmtTime(p.updatedAt)),
      td(el("span", { class: "mono muted" }, JSON.stringify(p.data).slice(0, 120)))))),
    el("div", { class: "toolbar" },
      skip > 0 ? link("← Previous", "projection", name, { skip: Math.max(0, skip - limit), sort, search }) : null,
      r.hasMore ? link("Next →", "projection", name, { skip: skip + limit, sort, search }) : null)));
}

export async function instancePage(root, name, id, signal) {
  root.append(el("h1", {}, el("span", { class: "mono" }, name), " / ", el("span", { class: "mono" }, id)),
    el("p", {}, link("Back to " + name, "projection", name)));
  const p = await api("GET", "/projections/single/" + seg(name) + "/" + seg(id), { signal });
  root.append(el("section", {}, el("p", { class: "muted" }, "updated " + fmtTime(p.updatedAt) + (p.reference ? " · reference " + p.reference : "")), pre(p.data)));
}

// ---- reactions --------------------------------------------------------

export async function reactionsPage(root, parts, q, signal) {
  root.append(el("h1", {}, "Reactions"));
  if (currentStatus() && !currentStatus().reactions) { root.append(notice("This server does not serve reactions.")); return; }
  const st = q.get("status") || "SCHEDULED", skip = parseInt(q.get("skip") || "0", 10) || 0, limit = 50;
  const [defs, list] = await Promise.all([
    api("GET", "/reactions/definitions", { signal, query: { limit: 1000 } }),
    api("GET", "/reactions", { signal, query: { status: st, skip, limit } })]);
  const msg = el("div");
  root.append(msg, el("section", { id: "reaction-definitions" }, el("h2", {}, "Definitions"), table(["Name", "Feed", "On event", "Action", ""],
    defs.definitions.map(d => el("tr", { "data-reaction": d.reactionName }, td(d.reactionName, "mono"), td(d.feedName), td(d.reactOnEventType),
      td(el("details", {}, el("summary", {}, d.action.actionType + (d.action.targetUri ? " " + d.action.targetUri : "")), pre(d))),
      td(confirmButton("Delete", "Delete " + d.reactionName + "?", async () => {
        await api("DELETE", "/reactions/definitions/" + seg(d.reactionName), { signal });
        render();
      })))))));
  const tabs = el("div", { class: "toolbar", id: "status-tabs" }, STATUSES.map(x =>
    x === st ? el("b", {}, x.toLowerCase()) : link(x.toLowerCase(), "reactions", { status: x })));
  const rows = list.reactions.map(x => {
    const execute = ["SCHEDULED", "READY", "FAILED"].includes(x.status) ? el("button", { type: "button", class: "execute", onclick: async ev => {
      ev.target.disabled = true;
      try {
        await api("POST", "/reactions/" + seg(x.reactionId) + "/execute", { signal });
        put(msg, notice("Executing " + x.reactionName + " now."));
        setTimeout(() => { if (!signal.aborted) render(); }, 800);
      } catch (e) {
        put(msg, notice(e.message, true));
        ev.target.disabled = false;
      }
    } }, "Execute now") : null;
    const del = confirmButton("Delete", "Delete this reaction?", async () => {
      await api("DELETE", "/reactions/" + seg(x.reactionId), { signal });
      render();
    });
    return el("tr", { "data-reaction-id": x.reactionId },
      td(el("span", {}, el("b", {}, x.reactionName), el("br"), el("span", { class: "mono muted" }, x.reactionId))),
      td(link(x.aggregateType + " / " + x.aggregateId, "aggregate", x.aggregateType, x.aggregateId)),
      td(x.eventType), td(fmtTime(x.triggerAt) + (x.finishedAt ? " · done " + fmtTime(x.finishedAt) : "")),
      td(fmtNum(x.attempts), "num attempts"), td(x.lastError || "", "error"),
      td(el("span", { class: "toolbar" }, execute, del)));
  });
  root.append(el("section", { id: "reactions" },
    el("h2", {}, "Reactions (" + fmtNum(list.totalCount) + " " + st.toLowerCase() + ")"), tabs,
    table(["Reaction", "Aggregate", "Event", "Trigger at", ["Attempts", { class: "num" }], "Last error", ""], rows),
    el("div", { class: "toolbar" },
      skip > 0 ? link("← Previous", "reactions", { status: st, skip: Math.max(0, skip - limit) }) : null,
      list.hasMore ? link("Next →", "reactions", { status: st, skip: skip + limit }) : null)));
}
