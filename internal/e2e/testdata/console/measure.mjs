// Measures the console's time to first render against a running server,
// with a baseline from the same server in the same run: the first
// contentful paint of the console's own icon (icon.svg, one small file,
// no script) opened as a page. Each round loads both in a fresh tab of
// one browser, alternating; it prints the medians and their ratio, the
// time until the signed-in overview has its data, and the page weight.
//
//   node measure.mjs BASE_URL ACCESS_KEY SECRET_KEY [ROUNDS]
import { chromium } from "playwright-core";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [base, access, secret, roundsArg = "15"] = process.argv.slice(2);
const rounds = parseInt(roundsArg, 10);
const ctx = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), "console-measure-")), {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium", headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync"],
  viewport: { width: 1280, height: 860 },
});
const fcp = () => new Promise(res => {
  const e = performance.getEntriesByName("first-contentful-paint")[0];
  if (e) return res(e.startTime);
  new PerformanceObserver(l => res(l.getEntries()[0].startTime)).observe({ type: "paint", buffered: true });
});
const median = xs => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const icon = [], login = [], overview = [];
let weight = null;
for (let i = 0; i < rounds; i++) {
  for (const which of i % 2 ? ["console", "icon"] : ["icon", "console"]) {
    const page = await ctx.newPage();
    if (which === "icon") {
      await page.goto(base + "/console/icon.svg");
      icon.push(await page.evaluate(fcp));
    } else {
      // Cold: nothing cached (a new tab still shares the cache: ask again).
      await page.route("**/*", r => r.continue({ headers: { ...r.request().headers(), "cache-control": "no-cache", "if-none-match": "" } }));
      await page.goto(base + "/console/");
      await page.waitForSelector("#login");
      login.push(await page.evaluate(fcp));
      weight = await page.evaluate(() => {
        const nav = performance.getEntriesByType("navigation")[0];
        const res = performance.getEntriesByType("resource");
        return { files: 1 + res.length, transfer: nav.transferSize + res.reduce((a, r) => a + r.transferSize, 0),
          decoded: nav.decodedBodySize + res.reduce((a, r) => a + r.decodedBodySize, 0) };
      });
      // Signed in: from navigation to the overview with its data.
      await page.evaluate(k => sessionStorage.setItem("eventstore.console.keys", JSON.stringify(k)), { access, secret });
      const t0 = Date.now();
      await page.reload();
      await page.waitForSelector(".page[data-page=overview][data-ready]");
      overview.push(Date.now() - t0);
    }
    await page.close();
  }
}
await ctx.close();
const m = { icon: median(icon), login: median(login), overview: median(overview) };
console.log(`rounds ${rounds}; medians: baseline (icon.svg as a page) first paint ${m.icon.toFixed(1)} ms, ` +
  `console sign-in page first paint ${m.login.toFixed(1)} ms (ratio ${(m.login / m.icon).toFixed(2)}), ` +
  `signed-in overview with data ${m.overview} ms (ratio ${(m.overview / m.icon).toFixed(2)})`);
console.log(`page weight: ${weight.files} files, ${weight.transfer} bytes transferred (gzip, with headers), ${weight.decoded} bytes decoded`);
