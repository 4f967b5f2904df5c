// The hosted approval pages in Debian's Chromium, driven by playwright-core: a member signs in
// through the local OpenID provider (oidc-provider) and approves an email whose preview is the
// email itself, is offered nothing to click on an admin's effect, signs out; an admin signs in,
// approves one webhook and denies another. axe-core on every page (no serious or critical
// violation), screenshots at a phone and a desktop width in English and Norwegian Bokmål.
// Started by tests/tests/capabilities.rs with the stack's addresses and the requests' pages.

import assert from "node:assert/strict";
import { WIDTHS, check, env, finish, launch, log, watch } from "./pages.mjs";

const pages = { email: env("EMAIL_PAGE"), hook: env("HOOK_PAGE"), denied: env("DENY_PAGE") };
const home = env("HOME_PAGE");
const member = { login: env("MEMBER_LOGIN"), password: env("MEMBER_PASSWORD") };
const admin = { login: env("ADMIN_LOGIN"), password: env("ADMIN_PASSWORD") };
const subject = env("EMAIL_SUBJECT");
const value = JSON.parse(env("EMAIL_VALUE"));

// Every field name of a value, at any depth.
const fieldsOf = (v) =>
  Array.isArray(v) ? v.flatMap(fieldsOf) : v && typeof v === "object" ? Object.entries(v).flatMap(([k, x]) => [k, ...fieldsOf(x)]) : [];

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

const browser = await launch();

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
  // The effect's value, whole: every field it has is on the page, by name, with its digest.
  const named = new Set(await page.locator(".effect-value dt code").allInnerTexts());
  for (const f of new Set(fieldsOf(value.value))) assert.ok(named.has(f), `the value's field ${f} is shown`);
  assert.equal(await page.locator("code.digest").innerText(), value.digest, "the digest the approval binds is shown");
  // What cleaning removed, and where the link really goes.
  assert.match(await page.locator(".removed").innerText(), /t\.example/, "the remote image's host is listed");
  assert.match(await page.locator(".links").innerText(), /Pay at bank\.example.*https:\/\/evil\.example\/pay/s, "the link's target is beside its text");
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

finish();
