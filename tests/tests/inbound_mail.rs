//! Inbound email into the helpdesk, end to end: raw messages put into moto's S3 and SES
//! receipt notifications into the inbound queue exactly as SES would, handled by the stack's
//! inbound-mail worker (or invoked directly, as Lambda would, where a test counts DynamoDB
//! calls or must know a message was handled), then read over the HTTP API.

use e2e::{Client, harness};
use serde_json::{Value, json};
use std::time::Duration;

fn fixture(name: &str) -> String {
    std::fs::read_to_string(tools::localstack::repo_root().join("tests/fixtures/mail").join(name)).unwrap()
}

/// A fixture addressed to this test's mailbox from this test's customer, with its own
/// Message-ID (so tests never share one).
fn addressed(name: &str, to: &str, from: &str) -> String {
    let uniq = ulid::Ulid::generate().to_string().to_lowercase();
    fixture(name)
        .replace("support+0000000000@example.com", to)
        .replace("support@example.com", to)
        .replace("customer@example.org", from)
        .replace("@mail.example.org>", &format!(".{uniq}@mail.example.org>"))
        .replace("@mail.gmail.com>", &format!(".{uniq}@mail.gmail.com>"))
        .replace("@AM0PR01MB1234.eurprd01.prod.outlook.com>", &format!(".{uniq}@AM0PR01MB1234.eurprd01.prod.outlook.com>"))
}

struct Setup {
    c: Client,
    ws: String,
    mailbox: String,
    customer: String,
}

async fn setup(name: &str) -> Setup {
    let h = harness();
    let (ws, key) = h.workspace(name).await;
    let c = Client::new(&h.base_bulk, &key);
    let domain = e2e::verified_domain(&c, &ws).await;
    let customer = format!("kari-{}@example.org", ulid::Ulid::generate().to_string().to_lowercase());
    Setup { c, ws, mailbox: format!("support@{domain}"), customer }
}

/// Put the raw message into the mail bucket and handle its notification now (as Lambda
/// would); answers the DynamoDB calls it took.
async fn deliver(raw: &str, recipients: &[&str], spam: &str, virus: &str) -> u32 {
    let h = harness();
    let app = h.app().await;
    let rcpts: Vec<String> = recipients.iter().map(|r| r.to_string()).collect();
    let body = tools::admin::store_inbound(app.s3(), &h.resources.mail_bucket, raw.as_bytes(), &rcpts, spam, virus).await.unwrap();
    let receipt = domain::helpdesk::mail::receipt(&body).expect("an SES receipt notification");
    let (res, calls) = shared::metrics::count_ddb_calls(shared::metrics::as_function(
        "inbound-mail",
        Box::pin(domain::helpdesk::mail::handle(&app, &receipt)),
    ))
    .await;
    res.unwrap();
    calls
}

async fn conversations(c: &Client, query: &str) -> Vec<Value> {
    let r = c.get(&format!("/helpdesk/conversations?{query}")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    r.json["data"].as_array().unwrap().clone()
}

async fn messages(c: &Client, conv: &str) -> Vec<Value> {
    let r = c.get(&format!("/helpdesk/conversations/{conv}/messages")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    r.json["data"].as_array().unwrap().clone()
}

async fn conversation(c: &Client, conv: &str) -> Value {
    c.get(&format!("/helpdesk/conversations/{conv}")).await.json["data"].clone()
}

#[tokio::test]
async fn an_email_starts_a_conversation_a_reply_threads_and_the_answer_reopens_it_once() {
    let h = harness();
    let s = setup("inbound thread").await;
    let c = &s.c;
    let rx = e2e::receiver::Receiver::start().await;
    assert_eq!(c.post("/webhooks", &json!({"url": rx.url})).await.status, 201);

    // Through the queue, as SES delivers: a conversation and a contact appear.
    let rcpt = [s.mailbox.clone()];
    tools::admin::send_inbound(&h.app().await, &h.resources, addressed("plain.eml", &s.mailbox, &s.customer).as_bytes(), &rcpt)
        .await
        .unwrap();
    let mut list = vec![];
    for _ in 0..100 {
        list = conversations(c, &format!("mailbox={}", s.mailbox)).await;
        if !list.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(list.len(), 1, "the queued message became a conversation");
    let conv = list[0].clone();
    let id = conv["id"].as_str().unwrap().to_string();
    assert_eq!(
        (conv["subject"].as_str(), conv["status"].as_str(), conv["message_count"].as_u64()),
        (Some("My order has not arrived"), Some("open"), Some(1))
    );
    let contact = c.get(&format!("/contacts/{}", conv["contact_id"].as_str().unwrap())).await;
    assert_eq!(
        (contact.json["data"]["email"].as_str(), contact.json["data"]["first_name"].as_str()),
        (Some(s.customer.as_str()), Some("Kari"))
    );
    let first = &messages(c, &id).await[0];
    assert!(first["body_text"].as_str().unwrap().contains("order 10442"), "{first}");
    let timeline = c.get(&format!("/contacts/{}/activities", conv["contact_id"].as_str().unwrap())).await;
    assert!(timeline.json.to_string().contains("helpdesk.message.received"), "{}", timeline.json);

    // Staff reply: sent through SES from the mailbox, threaded on the customer's Message-ID.
    let r = c.post(&format!("/helpdesk/conversations/{id}/messages"), &json!({"type": "reply", "body_text": "It is on its way."})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let email_id = r.json["data"]["email_id"].as_str().unwrap().to_string();
    let mut email = Value::Null;
    for _ in 0..100 {
        email = c.get(&format!("/emails/{email_id}")).await.json["data"].clone();
        if email["status"] == "sent" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(email["status"], "sent", "{email}");
    assert_eq!(email["from"], s.mailbox.as_str());
    let in_reply_to = first["message_id"].as_str().unwrap();
    assert_eq!(email["headers"]["In-Reply-To"].as_str(), Some(format!("<{in_reply_to}>").as_str()), "{email}");
    assert_eq!(email["headers"]["References"].as_str(), Some(format!("<{in_reply_to}>").as_str()));
    let reply_to = email["reply_to"][0].as_str().unwrap().to_string();
    assert!(reply_to.starts_with("support+") && reply_to.ends_with(s.mailbox.split('@').nth(1).unwrap()), "{reply_to}");
    // moto keeps From and destinations of a simple message (not its custom headers).
    let sent = h.ses_sent().await;
    assert!(sent.iter().any(|m| m["source"].as_str().is_some_and(|f| f.contains(&s.mailbox)) && m.to_string().contains(&s.customer)));
    assert_eq!(conversation(c, &id).await["status"], "pending");
    let got = rx.wait_until(30, |r| r.iter().any(|e| e.event_type() == "helpdesk.message.delivery_updated")).await;
    let update = got.iter().find(|e| e.event_type() == "helpdesk.message.delivery_updated").expect("a delivery update event");
    let data = &update.json()["data"];
    assert_eq!(
        (data["conversation_id"].as_str(), data["email_id"].as_str(), data["delivery_status"].as_str()),
        (Some(id.as_str()), Some(email_id.as_str()), Some("sent")),
        "{data}"
    );

    // The customer answers from Gmail to the mailbox itself, In-Reply-To SES's Message-ID of
    // the reply: same conversation, reopened, quoted history cut off.
    let ses = format!("{}@email.amazonses.com", email["provider_message_id"].as_str().unwrap());
    let answer = addressed("gmail-reply.eml", &s.mailbox, &s.customer).replace("0000000000000000-reply@email.amazonses.com", &ses);
    let calls = deliver(&answer, &[&s.mailbox], "PASS", "PASS").await;
    let conv = conversation(c, &id).await;
    assert_eq!((conv["status"].as_str(), conv["message_count"].as_u64()), (Some("open"), Some(3)), "{conv}");
    let msgs = messages(c, &id).await;
    assert_eq!(msgs[2]["body_text"], "Thanks, it arrived today!");
    // Mailbox owner (claims, domain), the thread look-up, SES's id to our email, the
    // conversation, the transaction.
    assert_eq!(calls, 6, "DynamoDB calls for a reply threaded by SES's Message-ID");

    // The same email again (SES delivers at least once; a sender may resend): nothing added.
    assert_eq!(deliver(&answer, &[&s.mailbox], "PASS", "PASS").await, 3, "a duplicate stops at the look-up");
    assert_eq!(conversation(c, &id).await["message_count"], 3);

    // An auto-reply to the reply address neither reopens nor notifies.
    assert_eq!(c.patch(&format!("/helpdesk/conversations/{id}"), &json!({"status": "closed"})).await.status, 200);
    let auto = addressed("auto-reply.eml", &reply_to, &s.customer);
    let calls = deliver(&auto, &[&reply_to], "PASS", "PASS").await;
    assert_eq!(calls, 5, "DynamoDB calls for a message threaded by its reply address");
    let conv = conversation(c, &id).await;
    assert_eq!((conv["status"].as_str(), conv["message_count"].as_u64()), (Some("closed"), Some(4)), "{conv}");
    assert_eq!(messages(c, &id).await[3]["automatic"], "auto_reply");

    // Another workspace: sees nothing, cannot post into it, and its mail never joins it.
    let other = setup("inbound other").await;
    assert_eq!(other.c.get(&format!("/helpdesk/conversations/{id}")).await.status, 404);
    let r = other.c.post(&format!("/helpdesk/conversations/{id}/messages"), &json!({"type": "note", "body_text": "x"})).await;
    assert_eq!(r.status, 404);
    let stray = addressed("gmail-reply.eml", &other.mailbox, &s.customer).replace("0000000000000000-reply@email.amazonses.com", &ses);
    deliver(&stray, &[&other.mailbox], "PASS", "PASS").await;
    let theirs = conversations(&other.c, "").await;
    assert_eq!(theirs.len(), 1, "a new conversation of their own");
    assert_ne!(theirs[0]["id"].as_str(), Some(id.as_str()));
    assert_eq!(conversation(c, &id).await["message_count"], 4);
    let _ = s.ws;
}

#[tokio::test]
async fn html_is_sanitised_files_are_kept_and_charsets_decode() {
    let s = setup("inbound content").await;
    let c = &s.c;
    deliver(&addressed("html-script.eml", &s.mailbox, &s.customer), &[&s.mailbox], "PASS", "PASS").await;
    deliver(&addressed("attachments.eml", &s.mailbox, &s.customer), &[&s.mailbox], "PASS", "PASS").await;
    deliver(&addressed("iso-8859-1-qp.eml", &s.mailbox, &s.customer), &[&s.mailbox], "PASS", "PASS").await;
    deliver(&addressed("windows-1252-base64.eml", &s.mailbox, &s.customer), &[&s.mailbox], "PASS", "PASS").await;
    deliver(&addressed("outlook-reply.eml", &s.mailbox, &s.customer), &[&s.mailbox], "PASS", "PASS").await;
    let list = conversations(c, "limit=10").await;
    let by_subject = |sub: &str| {
        list.iter().find(|v| v["subject"] == sub).unwrap_or_else(|| panic!("{sub} in {list:?}"))["id"].as_str().unwrap().to_string()
    };

    let html = &messages(c, &by_subject("Look at this")).await[0];
    let body = html["body_html"].as_str().unwrap();
    for gone in ["<script", "onload", "onclick", "javascript:", "tracker.example", "<iframe", "<form", "document.cookie"] {
        assert!(!body.contains(gone), "{gone} in {body}");
    }
    assert!(body.contains("https://example.org/help") && html["body_text"].as_str().unwrap().contains("Please"), "{html}");

    let files = &messages(c, &by_subject("Photo of the broken part")).await[0];
    let atts = files["attachments"].as_array().unwrap();
    assert_eq!(atts.len(), 2, "{files}");
    assert_eq!((atts[0]["filename"].as_str(), atts[0]["inline"].as_bool()), (Some("lid.png"), Some(true)));
    let url = atts[1]["download_url"].as_str().unwrap();
    let pdf = reqwest::get(url).await.unwrap().bytes().await.unwrap();
    assert!(pdf.starts_with(b"%PDF"), "the stored file comes back through its link");
    assert!(files["body_html"].as_str().unwrap().contains("cid:lid@example.org"));

    let latin = &messages(c, &by_subject("Spørsmål om faktura æøå")).await[0];
    assert!(latin["body_text"].as_str().unwrap().contains("Beløpet på kr"), "{latin}");
    let cp = &messages(c, &by_subject("Kløktig spørsmål om pris")).await[0];
    assert_eq!(cp["body_text"], "Prisen er 50 € – «for høy», sier Grå Ærlig.");
    let outlook = &messages(c, &by_subject("RE: Invoice question")).await[0];
    assert_eq!(outlook["body_text"], "That explains it, thank you.");

    // 20 MB with photos: parsed, its files stored within the limits.
    let big = String::from_utf8(domain::helpdesk::mail::fixtures::large_message(20 * 1024 * 1024)).unwrap();
    deliver(&big.replace("support@example.com", &s.mailbox).replace("customer@example.org", &s.customer), &[&s.mailbox], "PASS", "PASS")
        .await;
    let list = conversations(c, "limit=10").await;
    let large = list.iter().find(|v| v["subject"] == "Photos of the damage").expect("the large message");
    let m = &messages(c, large["id"].as_str().unwrap()).await[0];
    assert!(
        m["attachments"].as_array().unwrap().iter().all(|a| a["stored"] == true && a["download_url"].is_string()),
        "{}",
        m["attachments"]
    );
}

#[tokio::test]
async fn spam_viruses_strangers_and_stray_bounces_are_kept_out() {
    let s = setup("inbound safety").await;
    let c = &s.c;
    deliver(&addressed("plain.eml", &s.mailbox, &s.customer), &[&s.mailbox], "FAIL", "PASS").await;
    let list = conversations(c, "").await;
    assert_eq!(list.len(), 1);
    assert_eq!((list[0]["status"].as_str(), list[0]["tags"][0].as_str()), (Some("closed"), Some("spam")), "spam is kept, quietly");

    deliver(&addressed("alternative.eml", &s.mailbox, &s.customer), &[&s.mailbox], "PASS", "FAIL").await;
    deliver(&addressed("bounce.eml", &s.mailbox, &s.customer), &[&s.mailbox], "PASS", "PASS").await;
    let calls = deliver(
        &addressed("alternative.eml", "support@nobody.example.test", &s.customer),
        &["support@nobody.example.test"],
        "PASS",
        "PASS",
    )
    .await;
    assert_eq!(calls, 1, "an unknown domain costs one look-up");
    assert_eq!(conversations(c, "").await.len(), 1, "a virus, a bounce answering nothing, a stranger's address: none recorded");
}

#[tokio::test]
async fn a_snoozed_conversation_wakes_up_on_time() {
    let s = setup("inbound snooze").await;
    let c = &s.c;
    deliver(&addressed("plain.eml", &s.mailbox, &s.customer), &[&s.mailbox], "PASS", "PASS").await;
    let id = conversations(c, "").await[0]["id"].as_str().unwrap().to_string();
    let until = shared::ids::format_time(chrono::Utc::now() + chrono::Duration::seconds(3));
    let r = c.patch(&format!("/helpdesk/conversations/{id}"), &json!({"status": "snoozed", "snoozed_until": until})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(conversation(c, &id).await["status"], "snoozed", "not before its time");
    let mut conv = Value::Null;
    for _ in 0..60 {
        conv = conversation(c, &id).await;
        if conv["status"] == "open" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!((conv["status"].as_str(), conv["snoozed_until"].is_null()), (Some("open"), true), "{conv}");
    // Snoozed again, the customer writes first: open at once, and the tick finds nothing stale.
    let until = shared::ids::format_time(chrono::Utc::now() + chrono::Duration::hours(2));
    assert_eq!(c.patch(&format!("/helpdesk/conversations/{id}"), &json!({"status": "snoozed", "snoozed_until": until})).await.status, 200);
    let ses_reply_to = conversation(c, &id).await;
    assert_eq!(ses_reply_to["status"], "snoozed");
    let msg_id = messages(c, &id).await[0]["message_id"].as_str().unwrap().to_string();
    let follow = addressed("alternative.eml", &s.mailbox, &s.customer)
        .replace("MIME-Version: 1.0", &format!("In-Reply-To: <{msg_id}>\r\nMIME-Version: 1.0"));
    deliver(&follow, &[&s.mailbox], "PASS", "PASS").await;
    let conv = conversation(c, &id).await;
    assert_eq!((conv["status"].as_str(), conv["message_count"].as_u64()), (Some("open"), Some(2)), "{conv}");
}

/// Erase a contact and wait for the erasure to complete.
async fn erase(c: &Client, contact_id: &str) {
    let e = c.post("/gdpr/erasures", &json!({"subject": {"contact_id": contact_id}, "reason": "asked"})).await;
    assert_eq!(e.status, 202, "{}", e.json);
    let path = format!("/gdpr/erasures/{}", e.json["data"]["id"].as_str().unwrap());
    for _ in 0..150 {
        if c.get(&path).await.json["data"]["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(c.get(&path).await.json["data"]["status"], "completed");
}

/// A multipart message from `from` to `to` with these extra parts (each `(headers, body)`).
fn multipart(from: &str, to: &str, subject: &str, text: &str, parts: &[(String, String)]) -> String {
    let id = ulid::Ulid::generate().to_string().to_lowercase();
    let mut m = format!(
        "From: Kari <{from}>\r\nTo: {to}\r\nSubject: {subject}\r\nMessage-ID: <{id}@mail.example.org>\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/mixed; boundary=\"bnd\"\r\n\r\n--bnd\r\nContent-Type: text/plain\r\n\r\n{text}\r\n"
    );
    for (headers, body) in parts {
        m.push_str(&format!("--bnd\r\n{headers}\r\n\r\n{body}\r\n"));
    }
    m.push_str("--bnd--\r\n");
    m
}

/// What SES concluded about a message's sender: its three verdicts (`NONE` leaves one out,
/// as SES does when it gave none) and the envelope sender (`mail.source`); and the domains
/// whose `DKIM-Signature` headers the message carries (`d=`).
struct Ses<'a> {
    spf: &'a str,
    dkim: &'a str,
    dmarc: &'a str,
    envelope: &'a str,
    signers: &'a [&'a str],
}

/// The message handled by the inbound worker as SES would deliver it, with these verdicts
/// and SES's own `Authentication-Results` header above the message's headers.
async fn deliver_with(raw: &str, to: &str, ses: Ses<'_>) {
    let h = harness();
    let app = h.app().await;
    let mut head = format!(
        "Authentication-Results: amazonses.com; spf={} (spfCheck: a test) client-ip=192.0.2.1; envelope-from={}; helo=mx.example; dmarc={}\r\n",
        ses.spf.to_lowercase(),
        ses.envelope,
        ses.dmarc.to_lowercase()
    );
    for d in ses.signers {
        head.push_str(&format!(
            "DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d={d}; s=k1; h=from:to:subject; bh=AAAA; b=BBBB\r\n"
        ));
    }
    let raw = format!("{head}{raw}");
    let body =
        tools::admin::store_inbound(app.s3(), &h.resources.mail_bucket, raw.as_bytes(), &[to.to_string()], "PASS", "PASS").await.unwrap();
    let mut outer: Value = serde_json::from_str(&body).unwrap();
    let mut inner: Value = serde_json::from_str(outer["Message"].as_str().unwrap()).unwrap();
    for (name, v) in [("spfVerdict", ses.spf), ("dkimVerdict", ses.dkim), ("dmarcVerdict", ses.dmarc)] {
        let receipt = inner["receipt"].as_object_mut().unwrap();
        if v == "NONE" {
            receipt.remove(name);
        } else {
            receipt.insert(name.into(), json!({"status": v}));
        }
    }
    inner["mail"]["source"] = json!(ses.envelope);
    outer["Message"] = json!(inner.to_string());
    let receipt = domain::helpdesk::mail::receipt(&outer.to_string()).unwrap();
    domain::helpdesk::mail::handle(&app, &receipt).await.unwrap();
}

/// The old shape: verdicts only, the envelope sender a stranger's, no SES header.
async fn deliver_with_verdicts(raw: &str, to: &str, spf: &str, dkim: &str, dmarc: &str) {
    deliver_with(raw, to, Ses { spf, dkim, dmarc, envelope: "bounce@mailer.example", signers: &[] }).await;
}

/// An object's tags as moto answers them (it wants a SigV4-shaped header, not a valid one).
/// Objects under the workspace's attachments, and whether each is still tagged unlinked.
async fn attachment_objects(ws: &str) -> Vec<(String, bool)> {
    let h = harness();
    // The emulator keeps tags (else "linked" below would prove nothing).
    let probe = format!("attachments/{ws}/probe");
    let app = h.app().await;
    let bucket = &h.resources.mail_bucket;
    let tag = shared::aws::UNLINKED_TAG;
    app.s3().put_object().bucket(bucket).key(&probe).tagging(tag).body(b"x".to_vec().into()).send().await.unwrap();
    let tags = h.object_tags(&h.resources.mail_bucket, &probe).await;
    assert!(tags.contains("unlinked"), "{tags}");
    app.s3().delete_object().bucket(bucket).key(&probe).send().await.unwrap();
    let mut out = vec![];
    for (key, _) in h.bucket_objects(&h.resources.mail_bucket, &format!("attachments/{ws}/")).await {
        let tags = h.object_tags(&h.resources.mail_bucket, &key).await;
        out.push((key, tags.contains("unlinked")));
    }
    out
}

#[tokio::test]
async fn oversized_bodies_and_thousands_of_parts_are_recorded_with_a_visible_truncation() {
    let s = setup("inbound limits").await;
    let c = &s.c;
    // 2 MB of HTML.
    let html = format!("<p>start</p>{}<p>end</p>", "<div>Lorem ipsum dolor sit amet</div>".repeat(2 * 1024 * 1024 / 34));
    let big = multipart(&s.customer, &s.mailbox, "Huge HTML", "see html", &[("Content-Type: text/html".into(), html.clone())]);
    deliver(&big, &[&s.mailbox], "PASS", "PASS").await;
    // 5,000 tiny files.
    let parts: Vec<(String, String)> = (0..5000)
        .map(|i| (format!("Content-Type: text/plain\r\nContent-Disposition: attachment; filename=\"f{i}.txt\""), format!("{i}")))
        .collect();
    deliver(&multipart(&s.customer, &s.mailbox, "Many parts", "files", &parts), &[&s.mailbox], "PASS", "PASS").await;

    let list = conversations(c, "limit=10").await;
    let find = |sub: &str| {
        list.iter().find(|v| v["subject"] == sub).unwrap_or_else(|| panic!("{sub} in {list:?}"))["id"].as_str().unwrap().to_string()
    };
    let m = &messages(c, &find("Huge HTML")).await[0];
    let kept = m["body_html"].as_str().unwrap();
    assert!(kept.len() <= domain::helpdesk::inbound::MAX_HTML_BYTES && kept.contains("start"), "{} bytes", kept.len());
    assert_eq!(m["truncated"]["html_bytes"].as_u64(), Some(html.len() as u64), "{}", m["truncated"]);
    let m = &messages(c, &find("Many parts")).await[0];
    let files = m["attachments"].as_array().unwrap();
    assert_eq!(files.len(), domain::helpdesk::inbound::MAX_LISTED_FILES);
    assert_eq!(
        m["truncated"]["files_omitted"].as_u64(),
        Some(5000 - domain::helpdesk::inbound::MAX_LISTED_FILES as u64),
        "{}",
        m["truncated"]
    );
    assert_eq!(files.iter().filter(|f| f["stored"] == true).count(), domain::helpdesk::mail::parse::MAX_ATTACHMENTS);
    let objects = attachment_objects(&s.ws).await;
    assert_eq!(objects.len(), domain::helpdesk::mail::parse::MAX_ATTACHMENTS, "{objects:?}");
    assert!(objects.iter().all(|(_, unlinked)| !unlinked), "recorded files are linked: {objects:?}");
}

#[tokio::test]
async fn one_delivery_three_times_at_once_is_one_message_and_its_files_once() {
    let s = setup("inbound race").await;
    let h = harness();
    let app = h.app().await;
    let raw = multipart(
        &s.customer,
        &s.mailbox,
        "Thrice",
        "once please",
        &[("Content-Type: application/pdf\r\nContent-Disposition: attachment; filename=\"a.pdf\"".into(), "%PDF-1.4 a".into())],
    );
    let body =
        tools::admin::store_inbound(app.s3(), &h.resources.mail_bucket, raw.as_bytes(), std::slice::from_ref(&s.mailbox), "PASS", "PASS")
            .await
            .unwrap();
    let receipt = domain::helpdesk::mail::receipt(&body).unwrap();
    let (a, b, c3) = tokio::join!(
        domain::helpdesk::mail::handle(&app, &receipt),
        domain::helpdesk::mail::handle(&app, &receipt),
        domain::helpdesk::mail::handle(&app, &receipt)
    );
    for r in [a, b, c3] {
        r.expect("every delivery is handled (recorded, or found recorded)");
    }
    let list = conversations(&s.c, "").await;
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(messages(&s.c, list[0]["id"].as_str().unwrap()).await.len(), 1);
    let contacts = s.c.get(&format!("/contacts?q={}", s.customer)).await;
    assert_eq!(contacts.json["data"].as_array().unwrap().len(), 1, "one contact: {}", contacts.json);
    assert_eq!(attachment_objects(&s.ws).await.iter().map(|(_, u)| *u).collect::<Vec<_>>(), [false], "one object, linked");
    assert!(h.bucket_objects(&h.resources.mail_bucket, &receipt.key).await.is_empty(), "the raw message is gone");
}

#[tokio::test]
async fn files_download_as_attachments_of_an_inert_type() {
    let s = setup("inbound files").await;
    let raw = multipart(
        &s.customer,
        &s.mailbox,
        "Risky files",
        "two files",
        &[
            (
                "Content-Type: text/html\r\nContent-Disposition: attachment; filename=\"page.html\"".into(),
                "<script>alert(1)</script>".into(),
            ),
            (
                "Content-Type: image/svg+xml\r\nContent-Disposition: attachment; filename=\"x\\\".svg\"".into(),
                "<svg onload=\"alert(1)\"/>".into(),
            ),
            ("Content-Type: application/pdf\r\nContent-Disposition: attachment; filename=\"ok.pdf\"".into(), "%PDF-1.4".into()),
        ],
    );
    deliver(&raw, &[&s.mailbox], "PASS", "PASS").await;
    let conv = conversations(&s.c, "").await[0]["id"].as_str().unwrap().to_string();
    let m = &messages(&s.c, &conv).await[0];
    let files = m["attachments"].as_array().unwrap();
    assert_eq!(files.len(), 3, "{m}");
    let mut seen = vec![];
    for f in files {
        let r = reqwest::get(f["download_url"].as_str().unwrap()).await.unwrap();
        assert_eq!(r.status(), 200);
        let header = |n: &str| r.headers().get(n).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        let disposition = header("content-disposition");
        assert!(disposition.starts_with("attachment;"), "{disposition}");
        assert!(!disposition.contains("x\".svg"), "the name is quoted safely: {disposition}");
        seen.push(header("content-type"));
    }
    assert_eq!(seen, ["application/octet-stream", "application/octet-stream", "application/pdf"]);
}

#[tokio::test]
async fn a_forged_sender_is_not_attributed_and_an_erased_one_starts_afresh() {
    let s = setup("inbound trust").await;
    let c = &s.c;
    let known =
        c.post("/contacts", &json!({"email": s.customer, "first_name": "Kari"})).await.json["data"]["id"].as_str().unwrap().to_string();

    // DMARC fails: recorded, visible, linked to no one.
    deliver_with_verdicts(&multipart(&s.customer, &s.mailbox, "Wire the money", "now", &[]), &s.mailbox, "FAIL", "PASS", "FAIL").await;
    let conv = conversations(c, "").await[0].clone();
    assert_eq!((conv["contact_id"].is_null(), conv["unverified"].as_bool()), (true, Some(true)), "{conv}");
    assert!(conv["tags"].as_array().unwrap().iter().any(|t| t == "unverified"));
    let m = &messages(c, conv["id"].as_str().unwrap()).await[0];
    assert_eq!((m["authentication"]["dmarc"].as_str(), m["authentication"]["verified"].as_bool()), (Some("FAIL"), Some(false)), "{m}");
    assert_eq!(c.get(&format!("/helpdesk/conversations?contact_id={known}")).await.json["data"].as_array().unwrap().len(), 0);
    let r = c
        .post(&format!("/helpdesk/conversations/{}/messages", conv["id"].as_str().unwrap()), &json!({"type": "reply", "body_text": "ok"}))
        .await;
    assert_eq!(r.status, 409, "no reply to a forged address: {}", r.json);
    let r = c
        .post(
            &format!("/helpdesk/conversations/{}/messages", conv["id"].as_str().unwrap()),
            &json!({"type": "note", "body_text": "fraud?"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    // SPF and DKIM both failing is the same; DMARC passing is enough.
    deliver_with_verdicts(&multipart(&s.customer, &s.mailbox, "Both fail", "x", &[]), &s.mailbox, "FAIL", "FAIL", "GRAY").await;
    deliver_with_verdicts(&multipart(&s.customer, &s.mailbox, "SPF only", "x", &[]), &s.mailbox, "FAIL", "PASS", "PASS").await;
    let list = conversations(c, "").await;
    let by = |sub: &str| list.iter().find(|v| v["subject"] == sub).unwrap().clone();
    assert!(by("Both fail")["contact_id"].is_null());
    assert_eq!(by("SPF only")["contact_id"].as_str(), Some(known.as_str()));

    // Erased, then they write again: a new contact, nothing of the old one.
    erase(c, &known).await;
    deliver(&multipart(&s.customer, &s.mailbox, "Me again", "hello", &[]), &[&s.mailbox], "PASS", "PASS").await;
    let list = conversations(c, "").await;
    let again = list.iter().find(|v| v["subject"] == "Me again").expect("a new conversation");
    let ct = again["contact_id"].as_str().expect("a new contact");
    assert_ne!(ct, known);
    let contact = c.get(&format!("/contacts/{ct}")).await.json["data"].clone();
    assert_eq!(
        (contact["email"].as_str(), contact["email_status"].as_str()),
        (Some(s.customer.as_str()), Some("unsubscribed")),
        "{contact}"
    );
}

/// The review's forgery and its neighbours: a message is attributed to its From address only
/// on positive evidence (DMARC PASS, or SPF or DKIM PASS for an aligned domain). Anything else
/// is recorded as an unverified conversation that touches no contact, timeline or tombstone.
#[tokio::test]
async fn mail_is_attributed_only_on_positive_aligned_evidence() {
    let s = setup("inbound evidence").await;
    let c = &s.c;
    let from_domain = s.customer.rsplit_once('@').unwrap().1.to_string();
    let known =
        c.post("/contacts", &json!({"email": s.customer, "first_name": "Kari"})).await.json["data"]["id"].as_str().unwrap().to_string();
    let fd = from_domain.as_str();
    let (own, both) = ([fd], ["mailer.example", fd]);
    // (subject, verdicts, attributed?)
    let cases: Vec<(&str, Ses, bool)> = vec![
        ("dmarc pass", Ses { spf: "PASS", dkim: "PASS", dmarc: "PASS", envelope: &s.customer, signers: &own }, true),
        (
            "forged gray",
            Ses { spf: "FAIL", dkim: "PASS", dmarc: "GRAY", envelope: "x@mailer.example", signers: &["mailer.example"] },
            false,
        ),
        ("aligned dkim", Ses { spf: "FAIL", dkim: "PASS", dmarc: "GRAY", envelope: "x@mailer.example", signers: &own }, true),
        // The forger's own valid signature beside one claiming the victim's domain: DKIM's
        // PASS is the message's, so it proves neither.
        ("two signatures", Ses { spf: "FAIL", dkim: "PASS", dmarc: "GRAY", envelope: "x@mailer.example", signers: &both }, false),
        ("aligned spf", Ses { spf: "PASS", dkim: "NONE", dmarc: "GRAY", envelope: &s.customer, signers: &[] }, true),
        ("no verdicts", Ses { spf: "NONE", dkim: "NONE", dmarc: "NONE", envelope: &s.customer, signers: &[] }, false),
        ("all fail", Ses { spf: "FAIL", dkim: "FAIL", dmarc: "FAIL", envelope: &s.customer, signers: &own }, false),
        ("dmarc fail", Ses { spf: "PASS", dkim: "PASS", dmarc: "FAIL", envelope: &s.customer, signers: &own }, false),
        ("unaligned spf", Ses { spf: "PASS", dkim: "NONE", dmarc: "GRAY", envelope: "x@mailer.example", signers: &[] }, false),
    ];
    for (subject, ses, attributed) in cases {
        // The forger adds an "SES" header of their own below SES's: it is never read.
        let raw = multipart(&s.customer, &s.mailbox, subject, "hello", &[]).replacen(
            "MIME-Version: 1.0",
            &format!("Authentication-Results: amazonses.com; dkim=pass header.d={from_domain}; dmarc=pass\r\nMIME-Version: 1.0"),
            1,
        );
        deliver_with(&raw, &s.mailbox, ses).await;
        let conv = conversations(c, "limit=50").await.into_iter().find(|v| v["subject"] == subject).expect(subject);
        let m = &messages(c, conv["id"].as_str().unwrap()).await[0];
        let reason = m["authentication"]["reason"].as_str().unwrap_or_default().to_string();
        assert_eq!(m["authentication"]["verified"].as_bool(), Some(attributed), "{subject}: {reason}");
        assert!(!reason.is_empty(), "{subject}: the message says why");
        if attributed {
            assert_eq!(conv["contact_id"].as_str(), Some(known.as_str()), "{subject}: {conv}");
        } else {
            assert!(conv["contact_id"].is_null() && conv["unverified"] == true, "{subject}: {conv}");
        }
    }
    assert!(
        messages(c, conversations(c, "limit=50").await.iter().find(|v| v["subject"] == "forged gray").unwrap()["id"].as_str().unwrap())
            .await[0]["authentication"]["reason"]
            .as_str()
            .unwrap()
            .contains("DKIM PASS for mailer.example, not aligned"),
    );
    // A From of two mailboxes, the first one invalid so that the second is the one read:
    // DMARC's PASS was for whichever SES judged, so it credits no one.
    let two_from = multipart(&s.customer, &s.mailbox, "two mailboxes", "hello", &[]).replacen(
        "From: Kari <",
        &format!("From: {}@mailer.example, Kari <", "a".repeat(65)),
        1,
    );
    deliver_with(&two_from, &s.mailbox, Ses { spf: "PASS", dkim: "PASS", dmarc: "PASS", envelope: "x@mailer.example", signers: &[] }).await;
    let conv = conversations(c, "limit=50").await.into_iter().find(|v| v["subject"] == "two mailboxes").expect("recorded");
    assert!(conv["contact_id"].is_null() && conv["unverified"] == true, "{conv}");
    // Only the attributed ones are on the contact's record.
    let theirs = c.get(&format!("/helpdesk/conversations?contact_id={known}&limit=50")).await.json["data"].as_array().unwrap().len();
    assert_eq!(theirs, 3);
    let activities = c.get(&format!("/contacts/{known}/activities?limit=100")).await.json.to_string();
    for subject in ["forged gray", "two signatures", "no verdicts", "all fail", "dmarc fail", "unaligned spf"] {
        assert!(!activities.contains(subject), "{subject} is on the timeline: {activities}");
    }

    // Erased: the forgery neither brings the address back nor lifts its tombstone.
    erase(c, &known).await;
    let forged = Ses { spf: "FAIL", dkim: "PASS", dmarc: "GRAY", envelope: "x@mailer.example", signers: &["mailer.example"] };
    deliver_with(&multipart(&s.customer, &s.mailbox, "It is me, Ada", "restore me", &[]), &s.mailbox, forged).await;
    let conv = conversations(c, "limit=50").await.into_iter().find(|v| v["subject"] == "It is me, Ada").expect("recorded");
    assert!(conv["contact_id"].is_null(), "{conv}");
    let found = c.get(&format!("/contacts?q={}", s.customer)).await;
    assert_eq!(found.json["data"].as_array().unwrap().len(), 0, "no contact came back: {}", found.json);
    let r = c.post("/contacts", &json!({"email": s.customer})).await;
    assert_eq!(r.status, 409, "the tombstone still holds: {}", r.json);
}

/// A message over the size whose files are stored one by one (SES takes up to 40 MB) is kept:
/// its text as usual, its files listed, and the original whole as the first file.
#[tokio::test]
async fn a_message_too_large_for_its_files_is_kept_whole() {
    use base64::Engine as _;
    let s = setup("inbound huge").await;
    let c = &s.c;
    let file = vec![7u8; 26 * 1024 * 1024];
    let encoded = base64::engine::general_purpose::STANDARD.encode(&file);
    let wrapped: String = encoded.as_bytes().chunks(76).map(|l| format!("{}\r\n", std::str::from_utf8(l).unwrap())).collect();
    let raw = multipart(
        &s.customer,
        &s.mailbox,
        "The whole archive",
        "see the attached archive",
        &[("Content-Type: application/zip\r\nContent-Disposition: attachment; filename=\"archive.zip\"\r\nContent-Transfer-Encoding: base64".into(), wrapped)],
    );
    assert!(raw.len() > domain::helpdesk::mail::parse::MAX_MESSAGE_BYTES, "{} bytes", raw.len());
    deliver(&raw, &[&s.mailbox], "PASS", "PASS").await;
    let conv = conversations(c, "").await.into_iter().find(|v| v["subject"] == "The whole archive").expect("recorded, not dropped");
    let m = &messages(c, conv["id"].as_str().unwrap()).await[0];
    assert!(m["body_text"].as_str().unwrap().contains("see the attached archive"), "{}", m["body_text"]);
    assert_eq!(m["truncated"]["message_bytes"].as_u64(), Some(raw.len() as u64), "{}", m["truncated"]);
    let files = m["attachments"].as_array().unwrap();
    assert_eq!((files[0]["filename"].as_str(), files[0]["stored"].as_bool()), (Some("original.eml"), Some(true)), "{files:?}");
    assert_eq!((files[1]["filename"].as_str(), files[1]["stored"].as_bool()), (Some("archive.zip"), Some(false)), "{files:?}");
    let original = reqwest::get(files[0]["download_url"].as_str().unwrap()).await.unwrap().bytes().await.unwrap();
    assert_eq!(original.len(), raw.len());
    assert!(original.starts_with(&raw.as_bytes()[..200]));
}
