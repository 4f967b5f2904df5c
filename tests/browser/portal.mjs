// The portal's pages in Debian's Chromium, driven by playwright-core: every flow a customer has,
// axe-core on every page (no serious or critical violation), keyboard-only sign-in and cancel,
// and screenshots at a phone and a desktop width in English and Norwegian Bokmål.
// Started by tests/tests/portal/pages.rs with the stack's addresses and the seeded ids.

import PostalMime from "postal-mime";
import assert from "node:assert/strict";
import { WIDTHS, check, env, finish, launch, log, watch } from "./pages.mjs";

const base = env("PORTAL_URL");
const moto = env("MOTO_URL");
const email = env("CUSTOMER_EMAIL");
const ids = { cancel: env("CANCEL_ME"), move: env("MOVE_ME"), late: env("TOO_LATE"), other: env("NOT_MINE") };

// Every message moto's SES sent to the customer whose subject has `subject`.
async function mails(subject) {
  for (let i = 0; i < 30; i++) {
    const r = await fetch(`${moto}/moto-api/data.json`);
    try {
      const data = await r.json();
      // The sender sends raw MIME; moto keeps it as it came. postal-mime reads it back.
      const all = await Promise.all(
        (data.ses?.RawMessage ?? []).map(async (m) => {
          const parsed = await PostalMime.parse(m.raw_data);
          return { destinations: m.destinations, subject: parsed.subject ?? "", body: parsed.html ?? parsed.text ?? "" };
        }),
      );
      return all.filter((m) => JSON.stringify(m.destinations).includes(email) && m.subject.includes(subject));
    } catch {
      await new Promise((ok) => setTimeout(ok, 200));
    }
  }
  throw new Error("moto's data.json did not answer JSON");
}

// The next mail with `subject` after `seen` of them.
async function nextMail(subject, seen) {
  for (let i = 0; i < 150; i++) {
    const all = await mails(subject);
    if (all.length > seen) return all[all.length - 1];
    await new Promise((ok) => setTimeout(ok, 200));
  }
  throw new Error(`no mail "${subject}" after ${seen}`);
}

const codeOf = (m) => m.body.match(/\b(\d{6})\b/)[1];
const linkOf = (m) => m.body.match(/(http\S+\/link\?token=psl_[A-Za-z0-9]+)/)[1];

async function tabTo(page, selector) {
  for (let i = 0; i < 30; i++) {
    await page.keyboard.press("Tab");
    if (await page.evaluate((s) => document.activeElement?.matches(s), selector)) return;
  }
  throw new Error(`Tab never reached ${selector}`);
}

// Sign in by keyboard alone: the address, Enter, the emailed code, Enter. With `screens`, the
// emailed link's page too (before the code spends the link with it).
async function signInWithCode(page, lang, subject, screens) {
  await page.goto(`${base}/`);
  if (screens) await check(page, "sign-in", lang);
  const seen = (await mails(subject)).length;
  await tabTo(page, "#email");
  await page.keyboard.type(email);
  await Promise.all([page.waitForURL(/\/code$/), page.keyboard.press("Enter")]);
  if (screens) await check(page, "code", lang);
  const mail = await nextMail(subject, seen);
  const code = codeOf(mail);
  if (screens) {
    await page.goto(linkOf(mail));
    assert.match(await page.locator("main").innerText(), /@example\.org/, "the link's page names the account");
    await check(page, "link", lang);
    await page.goto(`${base}/code`);
  }
  await tabTo(page, "#code");
  await page.keyboard.type(code);
  await Promise.all([page.waitForURL(/\/account$/), page.keyboard.press("Enter")]);
}

const browser = await launch();

try {
  // ---------- English, desktop ----------
  const en = await browser.newContext({ locale: "en-GB", timezoneId: "Europe/Oslo", viewport: WIDTHS.desktop });
  const page = await en.newPage();
  watch(page, "en");
  await signInWithCode(page, "en", "sign-in link", true);
  log("signed in with the code, by keyboard");
  assert.equal(await page.locator("html").getAttribute("lang"), "en");
  const cookies = await en.cookies();
  const session = cookies.find((c) => c.name === "portal_session");
  assert.ok(session && session.httpOnly && session.secure && session.sameSite === "Lax", JSON.stringify(session));
  assert.equal(await page.evaluate(() => document.cookie.includes("portal_session")), false, "no script reads the session");

  // Profile and consent.
  await check(page, "account", "en");
  await page.fill("#first_name", "Augusta");
  await page.check("#marketing");
  await Promise.all([page.waitForURL(/account\?m=saved/), page.click("main button[type=submit]")]);
  assert.equal(await page.inputValue("#first_name"), "Augusta");
  assert.ok(await page.isChecked("#marketing"));
  // The ledger holds the choice with source portal and the words the page showed.
  const ledger = await (await fetch(`${env("API_URL")}/gdpr/consents?contact_id=${env("CONTACT_ID")}`, { headers: { authorization: `Bearer ${env("API_KEY")}` } })).json();
  const entry = ledger.data.history[0];
  assert.equal(entry.source, "portal", JSON.stringify(ledger));
  assert.match(entry.text_shown, /^Send me news and offers from .+ by email\.$/, JSON.stringify(entry));
  assert.equal(entry.granted, true, JSON.stringify(entry));
  log("profile and consent saved; the ledger has the words shown");

  // Bookings: cancel by keyboard; inside the window refused; another contact's refused.
  await page.goto(`${base}/bookings`);
  await check(page, "bookings", "en");
  await page.locator(`form[action$="/bookings/${ids.cancel}/cancel"] button`).focus();
  await Promise.all([page.waitForURL(/m=cancelled/), page.keyboard.press("Enter")]);
  assert.ok(await page.locator(".notice.done").isVisible());
  log("cancelled by keyboard");
  const [late] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith(`/bookings/${ids.late}/cancel`)),
    page.click(`form[action$="/bookings/${ids.late}/cancel"] button`),
  ]);
  assert.equal(late.status(), 409);
  assert.match(await page.locator(".notice.problem").innerText(), /cannot cancel/);
  log("a cancel inside the window is refused on the page");
  const csrf = await page.locator("input[name=csrf]").first().inputValue();
  const other = await page.request.post(`${base}/bookings/${ids.other}/cancel`, { form: { csrf }, maxRedirects: 0 });
  assert.equal(other.status(), 404, "another contact's booking");
  const forged = await page.request.post(`${base}/bookings/${ids.late}/cancel`, { form: { csrf: "x" }, maxRedirects: 0 });
  assert.equal(forged.status(), 403, "a form without its token");

  // Move to an open slot.
  await page.click(`a[href$="/bookings/${ids.move}/move"]`);
  await page.waitForURL(/\/move/);
  await check(page, "move", "en");
  await Promise.all([page.waitForURL(/m=moved/), page.locator("form.slots button").first().click()]);
  log("moved to an open slot");

  await page.goto(`${base}/emails`);
  await check(page, "emails", "en");
  assert.ok((await page.locator("ul.cards li").count()) >= 1);

  // Data download: the link goes to the customer's address.
  await page.goto(`${base}/data`);
  await check(page, "data", "en");
  await Promise.all([page.waitForURL(/\/data\/exports\//), page.click("form[action$='/data/export'] button")]);
  for (let i = 0; i < 120 && (await page.locator("form[action$='/send'] button").count()) === 0; i++) {
    await new Promise((ok) => setTimeout(ok, 500));
    await page.reload();
  }
  await check(page, "export", "en");
  const dataMails = (await mails("Your data from")).length;
  await Promise.all([page.waitForURL(/m=sent/), page.click("form[action$='/send'] button")]);
  assert.match((await nextMail("Your data from", dataMails)).body, /https?:\/\/\S+/);
  log("export link emailed");

  // Sign-out ends the session everywhere; then the emailed link signs in once.
  await Promise.all([page.waitForURL(/m=signed_out/), page.click("nav button")]);
  const r = await page.request.get(`${base}/account`, { maxRedirects: 0 });
  assert.equal(r.status(), 303, "signed out");
  const seen = (await mails("sign-in link")).length;
  await page.fill("#email", email);
  await Promise.all([page.waitForURL(/\/code$/), page.click("main button")]);
  const link = linkOf(await nextMail("sign-in link", seen));
  await page.goto(link);
  await Promise.all([page.waitForURL(/\/account$/), page.click("main button")]);
  log("signed in with the link");
  const reused = await page.goto(link);
  assert.equal(reused.status(), 401, "a used link");
  assert.ok(await page.locator(".notice.problem").isVisible());
  log("a used link is refused");

  // ---------- Norwegian Bokmål ----------
  const nb = await browser.newContext({ locale: "nb-NO", timezoneId: "Europe/Oslo", viewport: WIDTHS.desktop });
  const side = await nb.newPage();
  watch(side, "nb");
  await signInWithCode(side, "nb", "Innloggingslenken", true);
  assert.equal(await side.locator("html").getAttribute("lang"), "nb");
  assert.match(await side.locator("h1").innerText(), /Profilen din/);
  await check(side, "account", "nb");
  await side.goto(`${base}/bookings`);
  await check(side, "bookings", "nb");
  await side.click("a[href$='/move']");
  await check(side, "move", "nb");
  await side.goto(`${base}/emails`);
  await check(side, "emails", "nb");
  await side.goto(`${base}/data`);
  await check(side, "data", "nb");

  // ---------- Erasure (in the session the link opened), with the emailed code; the session ends ----------
  await page.goto(`${base}/data`);
  const erasures = (await mails("Confirm the erasure")).length;
  await Promise.all([page.waitForURL(/\/data\/erasure$/), page.click("form[action$='/data/erasure/code'] button")]);
  await check(page, "erasure", "en");
  await page.fill("#code", codeOf(await nextMail("Confirm the erasure", erasures)));
  await page.click("main button.danger");
  await page.waitForSelector("text=Your data is erased");
  await check(page, "erased", "en");
  const after = await page.request.get(`${base}/account`, { maxRedirects: 0 });
  assert.equal(after.status(), 303, "the session ended with the erasure");
  log("erased; the session is gone");
} finally {
  await browser.close();
}

finish();
