// With a key file of several projects, the console works inside the
// project whose keys it is given: signed in with one project's keys it
// shows that project's data and none of the other's.
//
//   node projects.mjs BASE_URL ACCESS_A SECRET_A ACCESS_B SECRET_B SHOTS_DIR
import { chromium } from "playwright-core";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomUUID } from "node:crypto";

const [base, accessA, secretA, accessB, secretB, shots] = process.argv.slice(2);
let passed = 0, failed = 0;
const check = (ok, what) => { if (ok) passed++; else failed++; console.log((ok ? "ok   " : "FAIL ") + what); };
async function save(access, secret, type, id, n) {
  const events = Array.from({ length: n }, (_, i) => ({ eventId: randomUUID(), eventType: "Happened", data: { i } }));
  const res = await fetch(`${base}/aggregates/${type}/${id}/events`, { method: "POST", body: JSON.stringify({ events }),
    headers: { "Service-Access-Key": access, "Service-Secret-Access-Key": secret, "Content-Type": "application/json" } });
  if (!res.ok) throw new Error(`save: ${res.status} ${await res.text()}`);
}
await save(accessA, secretA, "alpha-thing", "a-1", 2);
await save(accessB, secretB, "beta-thing", "b-1", 3);

const context = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), "console-chromium-")), {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium", headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync"],
  viewport: { width: 1280, height: 860 },
});
const page = context.pages()[0] || await context.newPage();
async function signIn(access, secret) {
  await page.goto(base + "/console/");
  await page.fill("input[name=access]", access);
  await page.fill("input[name=secret]", secret);
  await page.click("button[type=submit]");
  await page.waitForSelector(".page[data-page=overview][data-ready]");
}
await signIn(accessB, secretB);
check((await page.textContent("#total-events")).replace(/\D/g, "") === "3", "project B's keys: its 3 events");
check(await page.$("tr[data-type=beta-thing]") !== null && await page.$("tr[data-type=alpha-thing]") === null, "only project B's types");
await page.screenshot({ path: join(shots, "keyfile-project-b.png"), fullPage: true });
await page.click("#logout");
await signIn(accessA, secretA);
check((await page.textContent("#total-events")).replace(/\D/g, "") === "2", "project A's keys: its 2 events");
check(await page.$("tr[data-type=alpha-thing]") !== null && await page.$("tr[data-type=beta-thing]") === null, "only project A's types");
await context.close();
console.log(`${passed} passed, ${failed} failed`);
if (failed === 0) console.log("all checks passed");
process.exit(failed === 0 ? 0 : 1);
