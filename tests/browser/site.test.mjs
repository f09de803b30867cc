// lcx publish's site in a real headless Chromium (@sparticuz/chromium with
// puppeteer-core; no system browser): a database made by lcx itself,
// published, then opened from the file system.
//
//   LCX_BIN=target/debug/lcx node tests/browser/site.test.mjs
//   LCX_SCREENSHOTS=docs/screenshots  also writes the README's screenshots
//
// Exit 0 when every check passed; 1 with the failures listed otherwise.

import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

import chromium from "@sparticuz/chromium";
import puppeteer from "puppeteer-core";

const require = createRequire(import.meta.url);
const lcxBin = path.resolve(process.env.LCX_BIN ?? "target/debug/lcx");
const work = fs.mkdtempSync(path.join(os.tmpdir(), "lcx-site-"));
const db = path.join(work, "lcx.db");
const site = path.join(work, "site");
const failures = [];

function check(ok, what) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures.push(what);
}

function lcx(...args) {
  return execFileSync(lcxBin, [...args, "--db", db], {
    cwd: work,
    encoding: "utf8",
    env: { ...process.env, LCX_HOST_LOCK: path.join(work, "host.lock") },
    stdio: ["ignore", "pipe", "pipe"],
  });
}

function lcxMayFail(...args) {
  try {
    return lcx(...args);
  } catch (e) {
    return e.stdout ?? "";
  }
}

// A command whose level comes from a file: the same command (one series)
// that becomes slower half-way through the history.
const level = path.join(work, "level");
// TOML literal strings: the shell gets the backslashes as written.
const emit = (divisor) =>
  `'v=$(( $(cat ${level}) / ${divisor} )); for i in $(seq 1 $LCX_ITERATIONS); do ` +
  `echo "{\\"iteration\\": $i, \\"time_s\\": $v.$i$i}"; done'`;
fs.writeFileSync(
  path.join(work, "steady.toml"),
  `name = "steady"
workload = "command"
iterations = 5
repeats = 2
baseline = "before"
[[arms]]
name = "before"
command = ${emit(1)}

[[arms]]
name = "after"
command = ${emit(2)}

[gate]
metric = "time_s"
arm = "after"
min_speedup = 1.2

# The site is under test here, not the machine: a busy CI box must not
# turn the gate's PASS into a contended INCONCLUSIVE.
[measurement]
max_foreign_cpu = 64
`,
);
fs.writeFileSync(
  path.join(work, "broken.toml"),
  `name = "broken"
workload = "command"
iterations = 3

[[arms]]
name = "works"
command = 'for i in 1 2 3; do echo "{\\"time_s\\": 1.$i}"; done'

[[arms]]
name = "crashes"
command = 'echo "{\\"time_s\\": 1}"; exit 3'
`,
);
// An experiment written by an adversary: script in every field an
// experiment file or a child controls, in every encoding a browser decodes.
const attacks = [
  "[name](javascript:alert('link'))",
  "[ent](&#106;avascript:alert('entity'))",
  "[hex](&#x6A;avascript:alert('hex'))",
  "[colon](javascript&colon;alert('colon'))",
  "[ref][r]\n\n[r]: javascript:alert('reference')",
  "<javascript:alert('autolink')>",
  "[data](data:text/html,<script>alert('data')</script>)",
  "[vb](vbscript:msgbox('vb'))",
  "<img src=x onerror=alert('img')>",
  "<script>alert('script')</script>",
  "<a href=\"javascript:alert('a')\">a</a>",
  "\u001b]0;owned\u0007 \u202eevil",
];
const hostileText = attacks.join(" ");
// TOML basic strings read JSON's escapes.
const toml = (text) => JSON.stringify(text);
const stderrAttack = attacks.slice(0, 10).join(" ").replace(/'/g, "");
fs.writeFileSync(
  path.join(work, "hostile.toml"),
  `name = ${toml("[pwn](javascript:alert('title')) <img src=x onerror=alert('title')>")}
description = ${toml(hostileText)}
notes = ${toml(attacks.join("\n"))}
workload = "command"
iterations = 3

[[arms]]
name = "base"
label = ${toml(attacks[0] + " " + attacks[8])}
command = 'for i in 1 2 3; do echo "{\"time_s\": 1.$i, \"<script>alert(1)</script>\": 2}"; done'

[[arms]]
name = "evil"
label = ${toml(attacks[2] + " " + attacks[9])}
command = ${toml(`echo '${stderrAttack}' >&2; exit 1`)}

[[columns]]
metric = "time_s"
label = ${toml(attacks[3] + " " + attacks[10])}
`,
);
lcxMayFail("run", path.join(work, "hostile.toml"));
// A sweep with a planted crossover: `fast` takes 1 s up to n = 16 and
// 0.5 s from n = 64 on, the baseline 1 s everywhere (little noise).
fs.writeFileSync(
  path.join(work, "sweep.toml"),
  `name = "sweep"
workload = "command"
iterations = 4
repeats = 3
baseline = "base"

[[arms]]
name = "base"
command = 'for i in $(seq 1 $LCX_ITERATIONS); do echo "{\\"iteration\\": $i, \\"time_s\\": 1.0$i}"; done'

[[arms]]
name = "fast"
command = 'if [ "$N" -ge 64 ]; then v=0.5; else v=1.0; fi; for i in $(seq 1 $LCX_ITERATIONS); do echo "{\\"iteration\\": $i, \\"time_s\\": $v$i}"; done'

[sweep]
"env.N" = [4, 16, 64, 4096]

[measurement]
max_foreign_cpu = 64
`,
);
lcx("run", path.join(work, "sweep.toml"));

for (const [i, v] of [4, 4, 4, 4, 8, 8, 8, 8].entries()) {
  fs.writeFileSync(level, `${v}\n`);
  lcx("run", path.join(work, "steady.toml"));
  if (i === 3) lcxMayFail("run", path.join(work, "broken.toml"));
}
const listed = JSON.parse(lcx("list", "--format", "json"));
const published = lcx("publish", site);
console.log(published.trim());
check(fs.existsSync(path.join(site, "index.html")), "publish wrote index.html");

const browser = await puppeteer.launch({
  args: chromium.args,
  executablePath: await chromium.executablePath(),
  headless: true,
});
const page = await browser.newPage();
const consoleErrors = [];
const outside = [];
const siteUrl = pathToFileURL(site).href;
page.on("console", (m) => m.type() === "error" && consoleErrors.push(m.text()));
page.on("pageerror", (e) => consoleErrors.push(String(e)));
await page.setRequestInterception(true);
page.on("request", (r) => {
  const url = r.url();
  if (url.startsWith(siteUrl + "/") || url.startsWith("data:")) {
    r.continue();
  } else {
    outside.push(url);
    r.abort();
  }
});
await page.setViewport({ width: 1280, height: 900 });
const axe = fs.readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
async function accessible(what) {
  await page.evaluate(axe);
  const result = await page.evaluate(async () =>
    // eslint-disable-next-line no-undef
    axe.run(document, { runOnly: ["wcag2a", "wcag2aa"] }),
  );
  const serious = result.violations.filter((v) => ["serious", "critical"].includes(v.impact));
  check(
    serious.length === 0,
    `${what}: no serious accessibility violation (axe-core)` +
      (serious.length ? `: ${serious.map((v) => `${v.id} (${v.nodes.length})`).join(", ")}` : ""),
  );
}

// 1. The index lists every experiment.
await page.goto(`${siteUrl}/index.html`, { waitUntil: "load" });
const ids = await page.$$eval("#experiments tbody tr", (rows) =>
  rows.map((r) => Number(r.cells[0].textContent)),
);
check(
  ids.length === listed.length && listed.every((e) => ids.includes(e.id)),
  `the index lists all ${listed.length} experiments (shows ${ids.length})`,
);
check(
  (await page.$$eval("table th", (t) => t.length)) > 0,
  "the index's table has headers",
);
// A narrow window still shows the last column: the table wraps its
// cells rather than running past the page.
await page.setViewport({ width: 800, height: 900 });
const overflow = await page.$eval("#experiments", (t) => {
  const heads = t.tHead.rows[0].cells;
  return heads[heads.length - 1].getBoundingClientRect().right - document.documentElement.clientWidth;
});
check(overflow <= 0, `at 800 px the index's last column is in view (${Math.round(overflow)} px past the edge)`);
await page.setViewport({ width: 1280, height: 900 });
const checks = await page.$$eval(".badge", (b) => b.map((x) => x.textContent));
check(
  checks.includes("PASS") && checks.includes("INCONCLUSIVE"),
  `verdicts are shown as words (${[...new Set(checks)].join(", ")})`,
);
if (process.env.LCX_SCREENSHOTS) {
  fs.mkdirSync(process.env.LCX_SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(process.env.LCX_SCREENSHOTS, "index.png") });
}
await accessible("index");

// 2. Filtering by name works.
await page.type("#f-name", "brok");
const visible = await page.$$eval("#experiments tbody tr", (rows) =>
  rows.filter((r) => !r.hidden).map((r) => r.dataset.name),
);
check(
  visible.length === 1 && visible[0] === "broken",
  `filtering by name "brok" leaves the one broken experiment (${visible.join(", ")})`,
);
// Sorting by id ascending puts the oldest first.
await page.click("#experiments th");
const first = await page.$eval("#experiments tbody tr", (r) => Number(r.cells[0].textContent));
check(first === Math.min(...ids), `sorting by # puts #${Math.min(...ids)} first (got #${first})`);

// 3. An experiment page shows the gate's verdict and a plot.
const newest = listed.find((e) => e.name === "steady");
await page.goto(`${siteUrl}/e/${newest.id}.html`, { waitUntil: "load" });
const text = await page.$eval("main", (m) => m.textContent);
check(/Gate/.test(text) && /PASS|FAIL|INCONCLUSIVE/.test(text), "the experiment page states its gate and verdict");
const plots = await page.$$eval(".report img", (imgs) =>
  imgs.map((i) => ({ ok: i.complete && i.naturalWidth > 0, alt: i.alt })),
);
check(plots.length > 0 && plots.every((p) => p.ok), `the experiment page shows its plots (${plots.length})`);
check(plots.every((p) => p.alt.trim().length > 0), "every plot has a text alternative");
check(/experiment file as run/i.test(text), "the experiment page shows the file as run");
check((await page.$("#diff")) !== null, "the experiment page diffs against the previous run");
await accessible("experiment page");

// 4. A history page marks the change point.
const href = await page.$$eval(".histories a", (as) =>
  as.map((a) => a.getAttribute("href")).find((h) => h.includes("--before--time-s")),
);
check(Boolean(href), "the experiment page links its history pages");
await page.goto(new URL(href, page.url()).href, { waitUntil: "load" });
const steps = await page.$$eval("svg.chart g.step", (g) => g.map((x) => x.textContent));
check(steps.length === 1, `the history marks one step change (${steps.join("; ")})`);
const chartTitle = await page.$eval("svg.chart title", (t) => t.textContent);
check(chartTitle.length > 0, "the chart has a text alternative");
const points = await page.$$eval("svg.chart a.point", (a) => a.length);
check(points === 8, `the history has one point per run of the arm (${points})`);
if (process.env.LCX_SCREENSHOTS) {
  await page.screenshot({ path: path.join(process.env.LCX_SCREENSHOTS, "history.png"), fullPage: true });
}
await accessible("history page");
// Clicking a point opens its experiment.
await Promise.all([page.waitForNavigation(), page.click("svg.chart a.point")]);
check(/\/e\/\d+\.html$/.test(page.url()), `a point opens its experiment (${page.url()})`);

// 5. The hostile experiment's pages run nothing: no script but the site's,
// no event attribute, no link to a scheme that runs, and clicking every
// link raises no dialog.
const dialogs = [];
page.on("dialog", async (d) => {
  dialogs.push(d.message());
  await d.dismiss();
});
const hostileId = listed.find((e) => e.name.startsWith("[pwn]")).id;
const hostilePages = [`${siteUrl}/index.html`, `${siteUrl}/e/${hostileId}.html`];
await page.goto(hostilePages[1], { waitUntil: "load" });
for (const h of await page.$$eval(".histories a", (as) => as.map((a) => a.href))) {
  hostilePages.push(h);
}
let clicked = 0;
let links = 0;
for (const url of hostilePages) {
  await page.goto(url, { waitUntil: "load" });
  const found = await page.evaluate(() => {
    const links = [...document.querySelectorAll("a[href], area[href]")].map(
      (a) => a.getAttribute("href") ?? a.getAttribute("xlink:href"),
    );
    const events = [...document.querySelectorAll("*")].flatMap((el) =>
      [...el.attributes].filter((a) => /^on/i.test(a.name)).map((a) => `${el.tagName} ${a.name}`),
    );
    const scripts = [...document.scripts].map((s) => s.getAttribute("src") ?? "inline");
    return { links, events, scripts };
  });
  const running = found.links.filter((h) => {
    const protocol = new URL(h, url).protocol;
    return !["file:", "http:", "https:"].includes(protocol);
  });
  check(running.length === 0, `${url}: no link to a scheme that runs (${running.join(", ")})`);
  check(found.events.length === 0, `${url}: no event attribute (${found.events.join(", ")})`);
  check(
    found.scripts.length === 1 && found.scripts[0].endsWith("assets/site.js"),
    `${url}: the site's one script and no other (${found.scripts.join(", ")})`,
  );
  links += found.links.length;
  for (let i = 0; i < found.links.length; i++) {
    await page.goto(url, { waitUntil: "load" });
    const links = await page.$$("a[href], area[href]");
    if (!links[i]) continue;
    await Promise.all([
      page.waitForNavigation({ timeout: 1000 }).catch(() => {}),
      links[i].evaluate((a) => a.click()),
    ]);
    clicked += 1;
  }
}
check(
  links > 0 && clicked === links,
  `every link of the hostile experiment's pages was clicked (${clicked} of ${links})`,
);
check(dialogs.length === 0, `no click raised a dialog (${dialogs.join("; ")})`);

// 3b. A sweep page shows its plots right after the sweep's section, the
// speedup on log axes with the crossover marked between 16 and 64.
const sweep = JSON.parse(lcx("list", "--format", "json")).find((e) => e.name === "sweep");
await page.goto(`${siteUrl}/e/${sweep.id}.html`, { waitUntil: "load" });
const order = await page.$$eval(".report h2", (hs) => hs.map((h) => h.textContent));
const at = (word) => order.findIndex((h) => h.includes(word));
check(
  at("Sweep") >= 0 && at("Sweep") < at("Plots") && at("Plots") < at("Cells"),
  `the sweep page shows its plots after the sweep and before the cells (${order.join(" / ")})`,
);
const sweepPlots = await page.$$eval(".report img", (imgs) =>
  imgs.map((i) => ({ ok: i.complete && i.naturalWidth > 0, src: i.getAttribute("src") })),
);
const speedupPlot = sweepPlots.find((p) => p.src.includes("speedup-by"));
check(Boolean(speedupPlot && speedupPlot.ok), "the sweep page shows its speedup plot");
if (speedupPlot) {
  const svg = fs.readFileSync(path.join(site, "e", speedupPlot.src), "utf8");
  check(
    svg.includes("crossover: fast pays from n 64") && svg.includes("(log scale)"),
    "the speedup plot marks the crossover on log axes",
  );
  const plotTop = await page.$eval(`.report img[src="${speedupPlot.src}"]`, (i) => i.getBoundingClientRect().top + window.scrollY);
  check(plotTop < 2500, `the speedup plot is near the top of the page (${Math.round(plotTop)} px down)`);
  if (process.env.LCX_SCREENSHOTS) {
    const img = await page.$(`.report img[src="${speedupPlot.src}"]`);
    await img.screenshot({ path: path.join(process.env.LCX_SCREENSHOTS, "sweep-crossover.png") });
  }
}

// 6. Nothing asked for outside the folder; no console error.
check(outside.length === 0, `no request left the site's folder (${outside.join(", ")})`);
check(consoleErrors.length === 0, `no console errors (${consoleErrors.join("; ")})`);

// 7. A second publish rewrites nothing.
const again = lcx("publish", site);
check(/ 0 file\(s\) written/.test(again), `a second publish rewrites nothing (${again.trim()})`);

await browser.close();
if (failures.length) {
  // The database and the site stay for a look.
  console.log(`\n${failures.length} browser check(s) failed; kept ${work}`);
  process.exit(1);
}
fs.rmSync(work, { recursive: true, force: true });
console.log("\nall browser checks passed");
