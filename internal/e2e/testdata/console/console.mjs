// Drives the console in headless Chromium (Debian's, through
// playwright-core) against a running server, as a person would: signs in
// with the key pair, reads the overview's counts, opens an aggregate,
// watches a save appear in the live feed, creates a projection and sees it
// catch up with a recorded error, executes a reaction, and checks that
// markup in events and definitions never runs. Writes a screenshot of each
// page to SHOTS_DIR and prints the page weight and time to first render.
//
//   node console.mjs BASE_URL ACCESS_KEY SECRET_KEY SHOTS_DIR LABEL
import { chromium } from "playwright-core";
import { mkdtempSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import http from "node:http";
import { randomUUID } from "node:crypto";

const [base, access, secret, shots, label = "sqlite"] = process.argv.slice(2);
mkdirSync(shots, { recursive: true });
let passed = 0, failed = 0;
function check(ok, what) {
  if (ok) { passed++; console.log("ok   " + what); } else { failed++; console.log("FAIL " + what); }
}

const keyHeaders = { "Service-Access-Key": access, "Service-Secret-Access-Key": secret, "Content-Type": "application/json" };
async function call(method, path, body) {
  const res = await fetch(base + path, { method, headers: keyHeaders, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}
const ev = (eventType, data) => ({ eventId: randomUUID(), eventType, data });
const XSS = `<img src=x onerror="window.__pwned='img'"><script>window.__pwned='script'</script>`;
const XSS_NAME = `<img src=x onerror=window.__pwned=1>`; // no slash: a name

// A receiver for the reaction's HTTP_POST.
const received = [];
const target = http.createServer((req, res) => {
  let b = "";
  req.on("data", c => { b += c; });
  req.on("end", () => { received.push(b); res.end("ok"); });
});
await new Promise(r => target.listen(0, "127.0.0.1", r));
const targetUri = `http://127.0.0.1:${target.address().port}/hook`;

// Data: a reaction definition first (it reacts to later events), then
// orders, one of them without the customerId the projection needs.
await call("POST", "/reactions/definitions", {
  reactionName: "notify-shipping", feedName: "order", reactOnEventType: "OrderPlaced", offset: "P1D",
  description: XSS, action: { actionType: "HTTP_POST", targetUri },
});
await call("POST", "/reactions/definitions", {
  reactionName: XSS_NAME, feedName: "order", reactOnEventType: XSS_NAME, offset: "P1D",
  action: { actionType: "HTTP_POST", targetUri },
});
for (let i = 1; i <= 3; i++) {
  await call("POST", `/aggregates/order/o-${i}/events`, { events: [ev("OrderPlaced", { customerId: "c" + (i % 2), total: 10 * i, note: "order " + i })] });
}
await call("POST", "/aggregates/order/o-1/events", { events: [ev("OrderPaid", { amount: "10.50" }), ev("OrderShipped", { carrier: "post" })] });
// Numbers that a float64 would change: shown as stored.
{
  const body = `{"events":[{"eventId":"${randomUUID()}","eventType":"OrderNoted","data":{"big":12345678901234567890,"price":19.990}}]}`;
  const res = await fetch(base + "/aggregates/order/o-2/events", { method: "POST", headers: keyHeaders, body });
  if (!res.ok) throw new Error("save o-2: " + res.status);
}
await call("POST", "/aggregates/order/o-nocustomer/events", { events: [ev("OrderPlaced", { total: 1 })] });
await call("POST", "/aggregates/customer/c-1/events", { events: [ev("CustomerRegistered", { name: "Ada" })] });
// Markup everywhere a user could put it.
await call("POST", `/aggregates/order/${encodeURIComponent(XSS_NAME)}/events`, {
  events: [ev(XSS_NAME, { html: XSS, nested: { [XSS_NAME]: XSS } })],
});
await call("POST", "/projections/definitions", {
  projectionName: XSS_NAME, feedName: "order", description: XSS,
  handlers: [{ eventType: XSS_NAME, functions: [{ function: "set", targetSelector: "$.projection.html", eventSelector: "$.event.html" }] }],
});
// Metadata, when the server takes it (events over HTTP carry an optional
// metadata object): the console must show it.
let withMetadata = false;
{
  const res = await fetch(base + "/aggregates/order/o-meta/events", { method: "POST", headers: keyHeaders,
    body: JSON.stringify({ events: [{ ...ev("OrderPlaced", { customerId: "c0", total: 1 }), metadata: { correlationId: "corr-42", source: XSS } }] }) });
  if (res.ok) {
    // Checked in the page only when the API gives it back (a backend may
    // not store it yet).
    const a = await call("GET", "/aggregates/order/o-meta");
    withMetadata = !!(a.events[0] && a.events[0].metadata && a.events[0].metadata.correlationId === "corr-42");
  }
  if (!withMetadata) console.log(`event metadata not returned by this server (save ${res.status}): its display is not checked`);
}
// 30 batches in one bulk save, so that the live feed has older entries.
await call("POST", "/aggregates/bulk/events", { batches: Array.from({ length: 30 }, (_, i) => ({ aggregateId: "b-" + i, events: [ev("Filled", { i })] })) });
// A tenant with a markup reference, and one event of its own.
const tenantId = randomUUID();
await call("POST", "/tenants", { tenantId, reference: XSS });
{
  const res = await fetch(base + "/aggregates/invoice/i-1/events", { method: "POST", headers: { ...keyHeaders, "Serialized-Tenant-Id": tenantId },
    body: JSON.stringify({ events: [ev("InvoiceSent", { amount: 3 })] }) });
  if (!res.ok) throw new Error("tenant save: " + res.status + " " + await res.text());
}
const feeds = await call("GET", "/feeds");
const totalEvents = feeds.feeds.reduce((a, f) => a + f.eventCount, 0);
const totalAggregates = feeds.feeds.reduce((a, f) => a + f.aggregateCount, 0);

// A fresh profile each run (playwright passes it as --user-data-dir).
const context = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), "console-chromium-")), {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium", headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync"],
  viewport: { width: 1280, height: 860 },
});
const page = context.pages()[0] || await context.newPage();
const dialogs = [], pageErrors = [], cspViolations = [], foreign = [];
page.on("dialog", d => { dialogs.push(d.message()); d.dismiss().catch(() => {}); });
page.on("pageerror", e => pageErrors.push(e.message));
page.on("console", m => { if (/Content Security Policy|Trusted Type/i.test(m.text())) cspViolations.push(m.text()); });
page.on("request", r => { if (!r.url().startsWith(base) && !r.url().startsWith("data:")) foreign.push(r.url()); });
const shot = async name => { await page.screenshot({ path: join(shots, `${label}-${name}.png`), fullPage: true }); };
const ready = async () => { await page.waitForSelector(".page[data-ready]", { timeout: 10000 }); };
const go = async hash => { await page.evaluate(h => { location.hash = h; }, hash); await ready(); };

// Sign in: the page loads without keys; the keys go to sessionStorage.
const t0 = Date.now();
const first = await page.goto(base + "/console/");
check(first.status() === 200, "the console loads without keys");
const csp = first.headers()["content-security-policy"] || "";
check(csp.includes("script-src 'self'") && !csp.includes("unsafe-inline") && csp.includes("require-trusted-types-for 'script'"), "a strict CSP: " + csp);
await page.waitForSelector("#login");
await shot("login");
await page.fill("input[name=access]", access);
await page.fill("input[name=secret]", "wrong");
await page.click("button[type=submit]");
await page.waitForFunction(() => document.querySelector("#login-error").textContent !== "");
check(await page.isVisible("#login"), "a wrong secret is refused");
await page.fill("input[name=secret]", secret);
await page.click("button[type=submit]");
await ready();
const perf = await page.evaluate(() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const fcp = performance.getEntriesByName("first-contentful-paint")[0];
  const res = performance.getEntriesByType("resource").filter(r => /\/console\//.test(r.name));
  return {
    fcp: fcp ? fcp.startTime : -1, domContentLoaded: nav.domContentLoadedEventEnd,
    transfer: nav.transferSize + res.reduce((a, r) => a + r.transferSize, 0),
    decoded: nav.decodedBodySize + res.reduce((a, r) => a + r.decodedBodySize, 0),
    files: 1 + res.length,
  };
});
console.log(`page weight: ${perf.files} files, ${perf.transfer} bytes transferred, ${perf.decoded} bytes decoded; ` +
  `first contentful paint ${perf.fcp.toFixed(0)} ms, DOMContentLoaded ${perf.domContentLoaded.toFixed(0)} ms`);
check(await page.evaluate(() => document.cookie === "" && !location.href.includes("secret")), "no cookie, no keys in the URL");
check(await page.evaluate(k => sessionStorage.getItem("eventstore.console.keys").includes(k) && localStorage.length === 0, secret),
  "the keys are in sessionStorage only");

// Overview.
check((await page.textContent("#total-events")).replace(/\D/g, "") === String(totalEvents), `the overview counts ${totalEvents} events`);
check((await page.textContent("#total-aggregates")).replace(/\D/g, "") === String(totalAggregates), `the overview counts ${totalAggregates} aggregates`);
const orderRow = await page.textContent("tr[data-type=order]");
check(orderRow.includes(String(feeds.feeds.find(f => f.aggregateType === "order").eventCount)), "the order type's row: " + orderRow.replace(/\s+/g, " "));
check(await page.$$eval("svg.chart rect", rs => rs.length === 60 && rs.some(r => Number(r.getAttribute("height")) > 0)),
  "the saves-per-second chart shows the saves");
check((await page.textContent("#server")).includes(label === "memory" ? "memory" : label === "postgres" ? "postgres" : "sqlite"), "the storage is named");
check((await page.textContent("#reaction-counts [data-status=SCHEDULED] b")) !== "0", "scheduled reactions are counted");
await shot("overview");
await page.setViewportSize({ width: 390, height: 844 });
await page.waitForTimeout(200);
await shot("overview-phone");
check(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth + 1), "no sideways scrolling on a phone");
await page.setViewportSize({ width: 1280, height: 860 });

// Tenants: the picker switches the data space, and back.
const option = await page.$eval(`#tenant option[value="${tenantId}"]`, o => o.textContent);
check(option.startsWith(XSS), "the tenant picker shows the tenant's reference as text");
await page.selectOption("#tenant", tenantId);
await page.waitForFunction(() => document.querySelector("[data-page=overview][data-ready] #total-events") !== null);
check((await page.textContent("#total-events")).replace(/\D/g, "") === "1" &&
  (await page.textContent("tr[data-type=invoice]")).includes("invoice"), "the tenant's overview: its one event");
await shot("tenant");
await page.selectOption("#tenant", "");
await page.waitForFunction(t => document.querySelector("[data-page=overview][data-ready] #total-events") &&
  document.querySelector("#total-events").textContent.replace(/\D/g, "") === t, String(totalEvents));
check(true, "back in the project's own data space");

// Aggregates: the list, the prefix search, one aggregate's events.
await go("#/aggregates/order");
check((await page.$$("tr[data-id]")).length >= 5, "the order aggregates are listed");
await shot("aggregates");
await page.fill("input[name=prefix]", "o-n");
await page.click("form.toolbar button[type=submit]");
await page.waitForFunction(() => location.hash.includes("prefix="));
await ready();
const ids = await page.$$eval("tr[data-id]", rows => rows.map(r => r.dataset.id));
check(ids.length === 1 && ids[0] === "o-nocustomer", "the prefix o-n finds o-nocustomer: " + ids);
await go("#/aggregate/order/o-1");
const types = await page.$$eval("#events .event-type", es => es.map(e => e.textContent));
check(types.join() === "OrderPlaced,OrderPaid,OrderShipped", "o-1's events in order: " + types);
check((await page.textContent("#events")).includes('"amount": "10.50"'), "event data as formatted JSON");
await shot("aggregate");
await page.click("#events .event a");
await ready();
check((await page.$$eval(".entry", es => es.map(e => e.dataset.aggregate))).includes("o-1"), "an event's link opens its place in the feed");
await go("#/aggregate/order/o-2");
const o2 = await page.textContent("#events");
check(o2.includes('"big": 12345678901234567890') && o2.includes('"price": 19.990'), "numbers show exactly as stored");
if (withMetadata) {
  await go("#/aggregate/order/o-meta");
  const meta = await page.textContent("#events");
  check(meta.includes("corr-42") && meta.includes("<script>window.__pwned='script'</script>"), "an event's metadata is shown, as text");
}

// Live feed: a save appears within a second; paused, it does not.
await go("#/feed/_all");
await page.waitForFunction(() => /following/.test(document.querySelector("#feed-state").textContent));
await page.waitForTimeout(300); // the long poll is waiting
const before = Date.now();
await call("POST", "/aggregates/order/o-live/events", { events: [ev("OrderPlaced", { customerId: "c1", total: 5 })] });
await page.waitForSelector(".entry[data-aggregate=o-live]", { timeout: 5000 });
const latency = Date.now() - before;
check(latency < 1000, `a save appears in the live feed in ${latency} ms (< 1000)`);
await shot("feed");
await page.click("#pause");
await page.waitForFunction(() => /paused/.test(document.querySelector("#feed-state").textContent) || document.querySelector("#pause").textContent === "Resume");
await call("POST", "/aggregates/order/o-paused/events", { events: [ev("OrderPlaced", { customerId: "c1", total: 6 })] });
await page.waitForTimeout(1200);
// The poll in flight may deliver one more answer; after it, none.
const whilePaused = await page.$$(".entry[data-aggregate=o-paused]");
await page.click("#pause");
await page.waitForSelector(".entry[data-aggregate=o-paused]", { timeout: 5000 });
check(whilePaused.length <= 1, "pause and resume the feed");
const live = (await page.$$(".entry")).length;
await page.click("#older");
await page.waitForFunction(n => document.querySelectorAll(".entry").length > n, live);
const all = (await call("GET", "/feeds/_all?limit=1000")).entries.length;
check(all > 50 || (await page.$$(".entry")).length === all, `Older pages back: ${live} entries, then all ${all}`);
await go("#/feed/order?eventType=OrderPaid");
check((await page.$$eval(".entry", es => es.map(e => e.dataset.aggregate))).join() === "o-1", "the feed filtered by event type");
await go("#/feed/_all?since=0");
check((await page.$$(".entry")).length >= 8, "the feed's history from the start");

// Projections: create one, see it catch up and its recorded error.
await go("#/projections/new");
await page.fill("#definition-json", JSON.stringify({
  projectionName: "customer-orders", feedName: "order", idField: "customerId", indexedFields: ["customerId"],
  handlers: [{ eventType: "OrderPlaced", functions: [{ function: "inc", targetSelector: "$.projection.orders" },
    { function: "add", targetSelector: "$.projection.total", eventSelector: "$.event.total" }] }],
}, null, 2));
await page.click("#save-definition");
await page.waitForFunction(() => location.hash.startsWith("#/projection/customer-orders"));
await ready();
let caughtUp = false;
for (let i = 0; i < 50 && !caughtUp; i++) {
  await go("#/projection/customer-orders?r=" + i);
  caughtUp = (await page.textContent("#lag b")) === "0" && (await page.textContent("#error-count b")) === "1";
  if (!caughtUp) await page.waitForTimeout(200);
}
check(caughtUp, "the projection catches up (lag 0) with one recorded error");
const errRow = await page.textContent("#errors .projection-error");
check(errRow.includes("customerId") && errRow.includes("OrderPlaced"), "the recorded error names the event: " + errRow.replace(/\s+/g, " "));
check((await page.$$("#instances tbody tr a")).length === 2, "its two instances are listed");
await shot("projection");
await page.click("#instances tbody tr a");
await ready();
check((await page.textContent("pre")).includes('"orders"'), "an instance opens");
// Reset from the page: it is rebuilt from the feed.
await go("#/projection/customer-orders");
await page.click("text=Reset");
await page.click("[data-confirm=yes]");
await page.waitForSelector(".notice");
let rebuilt = false;
for (let i = 0; i < 50 && !rebuilt; i++) {
  await page.waitForTimeout(200);
  await go("#/projection/customer-orders?reset=" + i);
  rebuilt = (await page.textContent("#lag b")) === "0" && (await page.$$("#instances tbody tr a")).length === 2;
}
check(rebuilt, "Reset rebuilds the projection");
await go("#/projections");
await shot("projections");

// Reactions: execute a scheduled one now.
await go("#/reactions?status=SCHEDULED");
const rows = await page.$$("tr[data-reaction-id]");
check(rows.length >= 4, `${rows.length} scheduled reactions listed`);
await shot("reactions");
const n = received.length;
await page.click("tr[data-reaction-id] button.execute");
for (let i = 0; i < 100 && received.length === n; i++) await page.waitForTimeout(100);
check(received.length > n, "Execute now delivers the reaction");
await go("#/reactions?status=COMPLETED");
let completed = (await page.$$("tr[data-reaction-id]")).length;
for (let i = 0; i < 30 && completed === 0; i++) {
  await page.waitForTimeout(200);
  await go("#/reactions?status=COMPLETED&r=" + i);
  completed = (await page.$$("tr[data-reaction-id]")).length;
}
check(completed === 1, "the executed reaction is completed");
check((await page.textContent("tr[data-reaction-id] .attempts")) === "1", "with one attempt");

// Script injection: the markup shows as text, and nothing ran.
await go(`#/aggregate/order/${encodeURIComponent(XSS_NAME)}`);
check((await page.textContent("#aggregate-id")) === XSS_NAME, "a markup id shows as text");
check((await page.textContent("#events")).includes("<script>window.__pwned='script'</script>"), "markup in data shows as text");
await shot("injection-aggregate");
for (const h of ["#/", "#/aggregates/order", "#/feed/_all", "#/feed/_all?since=0", "#/projections",
  `#/projection/${encodeURIComponent(XSS_NAME)}`, "#/reactions?status=SCHEDULED", "#/reactions?status=COMPLETED"]) {
  await go(h);
  await page.$$eval("details", ds => ds.forEach(d => { d.open = true; }));
}
await page.waitForTimeout(500);
await shot("injection-reactions");
check(await page.evaluate(() => window.__pwned === undefined), "no injected script ran (window.__pwned unset)");
check(dialogs.length === 0, "no dialog opened: " + dialogs);
check(await page.evaluate(() => document.querySelectorAll("main img, main script, main [onerror]").length === 0), "no element made from stored markup");
check(pageErrors.length === 0, "no page errors: " + pageErrors.join(" | "));
check(cspViolations.length === 0, "no CSP or Trusted Types violations: " + cspViolations.join(" | "));
check(foreign.length === 0, "no request left the server's origin: " + foreign.join(" "));

// Deleting, after a confirmation in the page: a projection, a reaction.
await go(`#/projection/${encodeURIComponent(XSS_NAME)}`);
await page.click("text=Delete");
check(await page.isVisible("[data-confirm=yes]"), "Delete asks first");
await page.click("[data-confirm=yes]");
await page.waitForFunction(() => location.hash === "#/projections");
const gone = await fetch(base + "/projections/definitions/" + encodeURIComponent(XSS_NAME), { headers: keyHeaders });
check(gone.status === 404, "the projection is deleted");
await go("#/reactions?status=SCHEDULED");
const scheduled = (await page.$$("tr[data-reaction-id]")).length;
await page.click("tr[data-reaction-id] >> text=Delete");
await page.click("[data-confirm=yes]");
await page.waitForFunction(n => document.querySelector(".page[data-ready]") && document.querySelectorAll("tr[data-reaction-id]").length === n - 1, scheduled);
check(true, "a reaction is deleted");
check(dialogs.length === 0, "still no browser dialog");

// Sign out forgets the keys.
await page.click("#logout");
check(await page.evaluate(() => sessionStorage.length === 0), "sign out clears the keys");
await context.close();
target.close();
console.log(`the browser part took ${Date.now() - t0} ms`);
console.log(`${passed} passed, ${failed} failed`);
if (failed === 0) console.log("all checks passed");
process.exit(failed === 0 ? 0 : 1);
