// The hosted approval pages in Debian's Chromium, driven by playwright-core: a member signs in
// through the local OpenID provider (oidc-provider) and approves an email whose preview is the
// email itself, is offered nothing to click on an admin's effect, signs out; an admin signs in,
// approves one webhook and denies another. axe-core on every page (no serious or critical
// violation), screenshots at a phone and a desktop width in English and Norwegian Bokmål.
// Started by tests/tests/capabilities.rs with the stack's addresses and the requests' pages.

import { chromium } from "playwright-core";
import { readFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import assert from "node:assert/strict";

const require = createRequire(import.meta.url);
const axeSource = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const pages = { email: env("EMAIL_PAGE"), hook: env("HOOK_PAGE"), denied: env("DENY_PAGE") };
const home = env("HOME_PAGE");
const member = { login: env("MEMBER_LOGIN"), password: env("MEMBER_PASSWORD") };
const admin = { login: env("ADMIN_LOGIN"), password: env("ADMIN_PASSWORD") };
const subject = env("EMAIL_SUBJECT");
const shots = env("SHOTS_DIR");
mkdirSync(shots, { recursive: true });

const WIDTHS = { phone: { width: 390, height: 844 }, desktop: { width: 1280, height: 800 } };
const problems = [];
const log = (...a) => console.log(new Date().toISOString().slice(11, 23), ...a);

async function check(page, name, lang) {
  await page.evaluate(axeSource);
  const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ["violations"] }));
  const bad = result.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  for (const v of bad) problems.push(`${name} (${lang}): ${v.id} ${v.help}: ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
  for (const [width, size] of Object.entries(WIDTHS)) {
    await page.setViewportSize(size);
    await page.screenshot({ path: `${shots}/${name}-${lang}-${width}.png`, fullPage: true });
  }
  await page.setViewportSize(WIDTHS.desktop);
  log(`${name} (${lang}): ${bad.length} serious/critical`);
}

function watch(page, lang) {
  page.on("console", (m) => {
    if (/Content Security Policy|Refused to/.test(m.text())) problems.push(`CSP (${lang}): ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`script error (${lang}): ${e.message}`));
}

// From a request's page, signed out: the pages send the browser to the provider's login, and
// back to the page once the person signed in there.
async function signIn(page, url, who, lang, screens) {
  await page.goto(url);
  await page.waitForSelector("input[name=login]", { timeout: 10000 }).catch(async (e) => {
    throw new Error(`no login form at ${page.url()}: ${(await page.content()).slice(0, 800)}`);
  });
  if (screens) await check(page, "provider-login", lang);
  await page.fill("input[name=login]", who.login);
  await page.fill("input[name=password]", who.password);
  await Promise.all([page.waitForURL((u) => u.toString().startsWith(url)), page.click("button[type=submit]")]);
}

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
});

try {
  // ---------- a member: signed out, the home page; then an email to approve ----------
  const en = await browser.newContext({ locale: "en-GB", viewport: WIDTHS.desktop });
  const page = await en.newPage();
  watch(page, "en");
  await page.goto(home);
  await check(page, "approvals-signed-out", "en");
  await signIn(page, pages.email, member, "en", true);
  const text = await page.locator("main").innerText();
  assert.match(text, new RegExp(subject), "the email's subject is shown");
  assert.match(text, /ann@example\.org/, "its recipient is shown");
  assert.equal(await page.locator(".email-html h2").count(), 1, "the email's HTML is shown, cleaned");
  assert.equal(await page.locator(".email-html script").count(), 0, "no script survives");
  await check(page, "approval-email", "en");
  await Promise.all([page.waitForURL(/done=approved/), page.click("form[action$='/approve'] button")]);
  assert.match(await page.locator("[role=status]").innerText(), /Approved/);
  await check(page, "approval-approved", "en");

  // An admin's effect: the member is told why and offered nothing to click.
  await page.goto(pages.hook);
  assert.match(await page.locator("[role=alert]").innerText(), /cannot approve/);
  assert.equal(await page.locator("form[action$='/approve']").count(), 0, "no approve button");
  assert.equal(await page.locator("form[action$='/deny']").count(), 0, "no deny button");
  await check(page, "approval-not-yours", "en");
  await Promise.all([page.waitForURL(/\/approvals\/[^/]+\/$/), page.click("header form button")]);
  log("the member signed out");

  // ---------- an admin approves the webhook and denies the other ----------
  await signIn(page, pages.hook, admin, "en", false);
  await Promise.all([page.waitForURL(/done=approved/), page.click("form[action$='/approve'] button")]);
  await page.goto(pages.denied);
  await page.fill("#reason", "Not this endpoint");
  await Promise.all([page.waitForURL(/done=denied/), page.click("form[action$='/deny'] button")]);
  assert.match(await page.locator("main").innerText(), /Not this endpoint/);
  await check(page, "approval-denied", "en");
  await page.goto(home);
  await check(page, "approvals-list", "en");

  // ---------- Norwegian ----------
  const nb = await browser.newContext({ locale: "nb-NO", viewport: WIDTHS.desktop });
  const side = await nb.newPage();
  watch(side, "nb");
  await side.goto(home);
  await check(side, "approvals-signed-out", "nb");
  await signIn(side, pages.hook, admin, "nb", false);
  assert.match(await side.locator("main").innerText(), /Godkjent/);
  await check(side, "approval-approved", "nb");
} finally {
  await browser.close();
}

if (problems.length) {
  console.error(problems.join("\n"));
  process.exit(1);
}
log("every flow passed");
