// What the pages' browser tests share: Debian's Chromium through playwright-core, axe-core on a
// page (no serious or critical violation) with its screenshots at a phone and a desktop width,
// the CSP and script errors a page logs, and the run's verdict.

import { chromium } from "playwright-core";
import { readFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const axeSource = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

export const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};

export const WIDTHS = { phone: { width: 390, height: 844 }, desktop: { width: 1280, height: 800 } };
const problems = [];
const shots = env("SHOTS_DIR");
mkdirSync(shots, { recursive: true });

export function log(...a) {
  console.log(new Date().toISOString().slice(11, 23), ...a);
}

// axe on the page, and its screenshots at both widths.
export async function check(page, name, lang) {
  await page.evaluate(axeSource);
  const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ["violations"] }));
  const bad = result.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  for (const v of bad) problems.push(`${name} (${lang}): ${v.id} ${v.help}: ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
  for (const [width, size] of Object.entries(WIDTHS)) {
    await page.setViewportSize(size);
    await page.screenshot({ path: `${shots}/${name}-${lang}-${width}.png`, fullPage: true });
  }
  await page.setViewportSize(WIDTHS.desktop);
  const kb = Math.round(Buffer.byteLength(await page.content()) / 102.4) / 10;
  log(`${name} (${lang}): ${bad.length} serious/critical, ${kb} KB of HTML`);
}

// What the page logs that it should not: a CSP refusal, a script error.
export function watch(page, lang) {
  page.on("console", (m) => {
    if (/Content Security Policy|Refused to/.test(m.text())) problems.push(`CSP (${lang}): ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`script error (${lang}): ${e.message}`));
}

// Headless Chromium with no background traffic (the machine's network is closed).
export function launch() {
  return chromium.launch({
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--disable-dev-shm-usage",
    ],
  });
}

// The run's verdict: every problem found, or success.
export function finish() {
  if (problems.length) {
    console.error(problems.join("\n"));
    process.exit(1);
  }
  log("every flow passed");
}
