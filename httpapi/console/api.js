// The console's calls to the API, with the key pair of this tab.

export const KEYS = "eventstore.console.keys";
export const TENANT = "eventstore.console.tenant";
// The API is mounted where the console's folder is: /console/ -> /.
const API = new URL("../", document.baseURI);
// onUnauthorized is called when the API refuses the key pair.
let onUnauthorized = () => {};
export function setUnauthorized(fn) { onUnauthorized = fn; }

// ---- the API ----------------------------------------------------------

export function keys() {
  try { return JSON.parse(sessionStorage.getItem(KEYS)); } catch { return null; }
}
export function tenant() { return sessionStorage.getItem(TENANT) || ""; }

// tenantScoped mirrors the server: these paths serve a tenant's data.
export function tenantScoped(path) {
  return path.startsWith("/aggregates/") || path === "/feeds" || path.startsWith("/feeds/") ||
    path.startsWith("/projections/single/") || path.startsWith("/projections/aggregated/") || path === "/projections" ||
    path === "/reactions" || (path.startsWith("/reactions/") && !path.startsWith("/reactions/definitions"));
}

export class APIError extends Error {
  constructor(status, body) {
    super((body && body.message) || ("HTTP " + status));
    this.status = status;
    this.body = body;
  }
}

// api calls the API; path segments must be escaped by the caller (seg).
export async function api(method, path, { query, body, signal, raw } = {}) {
  const k = keys();
  const u = new URL(path.slice(1), API);
  if (query) for (const [n, v] of Object.entries(query)) {
    if (Array.isArray(v)) v.forEach(x => u.searchParams.append(n, x));
    else if (v !== undefined && v !== null && v !== "") u.searchParams.set(n, v);
  }
  const h = { "Service-Access-Key": k ? k.access : "", "Service-Secret-Access-Key": k ? k.secret : "" };
  const t = tenant();
  if (t && tenantScoped(decodeURI(path.split("?")[0]))) h["Serialized-Tenant-Id"] = t;
  if (body !== undefined) h["Content-Type"] = "application/json";
  const res = await fetch(u, { method, headers: h, signal, cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer",
    body: body === undefined ? undefined : (typeof body === "string" ? body : JSON.stringify(body)) });
  if (raw) return res;
  const text = method === "HEAD" ? "" : await res.text();
  let data = null;
  if (text) { try { data = JSON.parse(text, keepNumbers); } catch { data = null; } }
  if (res.status === 401 && path !== "/status") { onUnauthorized("The key pair was refused."); throw new APIError(401, data); }
  if (!res.ok) throw new APIError(res.status, data);
  return data;
}

// keepNumbers keeps a number whose text a float64 would change (a big
// integer, 19.990) as it was written, so that event data shows exactly as
// stored, where the browser can (JSON.parse source text and JSON.rawJSON).
function keepNumbers(key, value, ctx) {
  if (typeof value === "number" && ctx && typeof ctx.source === "string" && ctx.source !== String(value) && JSON.rawJSON) {
    return JSON.rawJSON(ctx.source);
  }
  return value;
}

export function seg(s) { return encodeURIComponent(s); }
