//! GDPR over HTTP: a subject's export holds every area's data about them and nothing of anyone
//! else; an erasure leaves no trace of the address in any item of the table (a full Scan) but
//! the hashed tombstone and the audit record, and an erased address stays out until new
//! consent; the consent ledger and its effect on sends; a workspace export that survives its
//! worker dying mid-way.

use e2e::receiver::Receiver;
use e2e::{Client, harness};
use serde_json::{Value, json};
use std::time::Duration;

async fn created(c: &Client, path: &str, body: Value, status: u16) -> Value {
    let r = c.post(path, &body).await;
    assert_eq!(r.status, status, "POST {path}: {}", r.json);
    r.json["data"].clone()
}

/// Download and decode an export document.
async fn document(url: &str) -> Value {
    use std::io::Read;
    let bytes = reqwest::get(url).await.unwrap().error_for_status().unwrap().bytes().await.unwrap();
    let mut text = String::new();
    flate2::read::MultiGzDecoder::new(&bytes[..]).read_to_string(&mut text).expect("gzip");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("the document is JSON ({e}): {}", &text[..text.len().min(500)]))
}

fn ids(list: &Value) -> Vec<String> {
    list.as_array().map(|a| a.iter().filter_map(|i| i["id"].as_str().map(String::from)).collect()).unwrap_or_default()
}

/// Wait until the webhook endpoint has seen no new delivery for two seconds (the events of the
/// setup have been fanned out).
/// Waits for the first delivery, then until deliveries stop: under load the dispatcher may not
/// have started when the setup ends, and "no change in 2 s" alone would pass at zero.
async fn quiet(rx: &Receiver) {
    rx.wait_until(90, |got| !got.is_empty()).await;
    let mut last = usize::MAX;
    for _ in 0..60 {
        let n = rx.received().len();
        if n == last {
            return;
        }
        last = n;
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

#[tokio::test]
async fn a_subject_export_holds_every_area_about_them_and_nothing_of_anyone_else() {
    let h = harness();
    let (ws, key) = h.workspace("gdpr export").await;
    let c = Client::new(&h.base_bulk, &key);
    let seeded = e2e::seed_every_area(&c, &ws).await;
    let ct = seeded["/contacts/{id}"].clone();
    let ann = created(&c, "/contacts", json!({"email": "ann@example.org", "first_name": "Ann"}), 201).await;
    let ann_id = ann["id"].as_str().unwrap();
    created(&c, &format!("/contacts/{ann_id}/notes"), json!({"body": "ann's note"}), 201).await;
    created(&c, "/deals", json!({"title": "Ann's", "value": 5, "currency": "EUR", "contact_id": ann_id}), 201).await;
    // The seed's webhook endpoint fails; its deliveries still record the payloads.
    let wh = &seeded["/webhooks/{id}"];
    for _ in 0..100 {
        if c.get(&format!("/webhooks/{wh}/deliveries")).await.json["data"].as_array().is_some_and(|d| d.len() >= 3) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let job = created(&c, "/gdpr/exports", json!({"subject": {"email": "ZOE@example.org"}}), 202).await;
    assert_eq!(job["status"], "pending");
    assert!(job["due_at"].as_str().unwrap() > job["created_at"].as_str().unwrap(), "{job}");
    let path = format!("/gdpr/exports/{}", job["id"].as_str().unwrap());
    let done = e2e::finished(&c, &path).await;
    assert_eq!(done["status"], "completed", "{done}");
    let url = done["download_url"].as_str().expect("a completed export has a link");
    assert!(url.contains("X-Amz-Expires=3600") && url.contains("X-Amz-Signature="), "a presigned link valid 1 hour: {url}");
    let doc = document(url).await;
    let s = &doc["sections"];

    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["subject"]["email"], "zoe@example.org");
    assert_eq!(ids(&s["contacts"]["contact"]), vec![ct.clone()]);
    let timeline = s["contacts"]["activity"].to_string();
    assert!(timeline.contains("\"met\""), "the note is in the timeline: {timeline}");
    assert_eq!(ids(&s["deals"]["deal"]), vec![seeded["/deals/{id}"].clone()]);
    let emails = s["emails"]["email"].as_array().unwrap();
    assert_eq!(emails.len(), 2, "both emails to the address, linked or not: {}", s["emails"]);
    assert!(emails.iter().all(|e| e["email_bodies"][0]["text"] == "x"), "with their bodies: {}", s["emails"]);
    assert_eq!(ids(&s["bookings"]["booking"]), vec![seeded["/bookings/{id}"].clone()]);
    let consents = s["consents"]["consent_event"].as_array().unwrap();
    assert_eq!(consents.len(), 1);
    assert_eq!(consents[0]["purpose"], "analytics");
    assert_eq!(s["portal"]["portal_session"].as_array().unwrap().len(), 1);
    let events = s["webhooks"]["webhook_event"].as_array().unwrap();
    assert!(!events.is_empty(), "{}", s["webhooks"]);
    for ev in events {
        let body = ev["body"].as_str().unwrap();
        assert!(body.contains(&ct) || body.contains("zoe@example.org"), "{body}");
        assert!(!ev["webhook_delivery"].as_array().unwrap().is_empty(), "with its deliveries: {ev}");
    }
    // The manifest counts what the sections hold.
    let mut total = 0;
    for (area, kinds) in doc["manifest"]["areas"].as_object().unwrap() {
        for (kind, n) in kinds.as_object().unwrap() {
            assert_eq!(s[area][kind].as_array().map(|a| a.len()), n.as_u64().map(|n| n as usize), "{area}.{kind}");
            total += n.as_u64().unwrap();
        }
    }
    assert_eq!(doc["manifest"]["total_items"], total);
    assert_eq!(done["progress"]["emails"], 2, "two emails (their bodies go with them): {}", done["progress"]);
    // Nothing of another contact, and no keys or secrets.
    let text = doc.to_string();
    for other in [ann_id, "ann@example.org", "ann's note", "bob@example.org"] {
        assert!(!text.contains(other), "the export names {other}");
    }
    for secret in ["\"pk\"", "\"gsi1pk\"", "\"hash\"", "\"credentials\"", "\"secrets\""] {
        assert!(!text.contains(secret), "the export holds {secret}");
    }

    // Another workspace cannot see the job; the list shows it without a link.
    let (_, other_key) = h.workspace("gdpr export other").await;
    let r = Client::new(&h.base_bulk, &other_key).get(&path).await;
    assert_eq!((r.status, r.code()), (404, "NOT_FOUND"), "{}", r.json);
    let list = c.get("/gdpr/exports?limit=10").await;
    assert!(ids(&list.json["data"]).contains(&job["id"].as_str().unwrap().to_string()));
    assert!(list.json["data"].as_array().unwrap().iter().all(|j| j.get("download_url").is_none()));

    // After its 7 days the job mints no link (S3's lifecycle rule deletes the object then).
    let app = h.app().await;
    app.db
        .update(
            shared::store::ws_pk(&shared::ids::WorkspaceId::trusted(&ws)),
            domain::keys::EXPORT_JOB.sk(&domain::ids::ExportId::trusted(job["id"].as_str().unwrap())),
            "SET expires_at = :past",
        )
        .value(":past", shared::store::s("2020-01-01T00:00:00Z"))
        .required()
        .await
        .unwrap();
    let r = c.get(&path).await;
    assert!(r.json["data"].get("download_url").is_none(), "{}", r.json);
}

#[tokio::test]
async fn an_erasure_leaves_no_trace_of_the_address_and_keeps_it_out_until_new_consent() {
    let h = harness();
    let (ws, key) = h.workspace("gdpr erasure").await;
    let c = Client::new(&h.base_bulk, &key);
    let addr = format!("erase-{}@example.org", ulid::Ulid::generate().to_string().to_lowercase());
    let rx = Receiver::start().await;
    created(&c, "/webhooks", json!({"url": rx.url}), 201).await;
    let from = format!("a@{}", e2e::verified_domain(&c, &ws).await);

    // The subject in every area: a contact created with an idempotency key (its response is
    // stored), a note, a deal, a sent and a scheduled email, a booking, consent, a portal
    // session, an import that names them, an export of them.
    let r = c
        .send(
            c.request("POST", "/contacts")
                .header("idempotency-key", "erase-me")
                .json(&json!({"email": addr, "first_name": "Eve", "last_name": "Erasable"})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    let ct = r.json["data"]["id"].as_str().unwrap().to_string();
    created(&c, &format!("/contacts/{ct}/notes"), json!({"body": format!("call {addr}")}), 201).await;
    // After a line break, in another customer's conversation: the message's stored copies
    // (its event, its stored response) hold it as `\n<addr>`, and name the other contact only.
    let other = format!("other-{}@example.org", ulid::Ulid::generate().to_string().to_lowercase());
    let r = c
        .send(c.request("POST", "/helpdesk/conversations").header("idempotency-key", format!("conv-{addr}")).json(&json!({
            "subject": "Forwarded", "mailbox": format!("support@{}", from.split_once('@').unwrap().1), "contact": {"email": other},
            "message": {"type": "inbound", "body_text": format!("See below.\n\nregards,\n{addr}")}})))
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    let deal = created(&c, "/deals", json!({"title": "Kept", "value": 900, "currency": "EUR", "contact_id": ct}), 201).await;
    let sent = created(
        &c,
        "/emails",
        json!({"from": from, "to": [addr.to_uppercase()], "subject": format!("For {addr}"), "text": "hi", "contact_id": ct}),
        202,
    )
    .await;
    let later =
        created(&c, "/emails", json!({"from": from, "to": [addr], "subject": "Later", "text": "x", "scheduled_at": e2e::in_hours(3)}), 202)
            .await;
    // Someone whose address holds theirs (`lerase-…@`): not the subject, left as it was.
    let neighbour = created(
        &c,
        "/emails",
        json!({"from": from, "to": [format!("l{addr}")], "subject": "Neighbour", "text": "x", "scheduled_at": e2e::in_hours(3)}),
        202,
    )
    .await;
    let day = json!([{"start": "00:00", "end": "24:00"}]);
    let hours = json!({"mon": day, "tue": day, "wed": day, "thu": day, "fri": day, "sat": day, "sun": day});
    let res = created(&c, "/bookings/resources", json!({"name": "Room", "timezone": "UTC", "opening_hours": hours}), 201).await;
    let svc = created(&c, "/bookings/services", json!({"name": "Talk", "duration_minutes": 30, "resource_ids": [res["id"]]}), 201).await;
    let start = format!("{}T10:00:00Z", (chrono::Utc::now() + chrono::Duration::days(3)).format("%Y-%m-%d"));
    let booking = created(
        &c,
        "/bookings",
        json!({"service_id": svc["id"], "start": start, "contact_id": ct, "notes": format!("{addr} prefers tea")}),
        201,
    )
    .await;
    created(&c, "/gdpr/consents", json!({"contact_id": ct, "purpose": "marketing_email", "granted": true, "source": "form", "text_shown": "News?", "text_version": "1"}), 201).await;
    let session = e2e::portal_session(&c, &ct).await;
    let import = created(&c, "/contacts/imports", json!({"rows": [{"email": addr}, {"email": "someone-else@example.org"}]}), 202).await;
    e2e::finished(&c, &format!("/contacts/imports/{}", import["id"].as_str().unwrap())).await;
    let export = created(&c, "/gdpr/exports", json!({"subject": {"contact_id": ct}}), 202).await;
    let export_path = format!("/gdpr/exports/{}", export["id"].as_str().unwrap());
    assert_eq!(e2e::finished(&c, &export_path).await["status"], "completed");
    for _ in 0..100 {
        if c.get(&format!("/emails/{}", sent["id"].as_str().unwrap())).await.json["data"]["status"] == "sent" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The erasure must meet deliveries that name them (the webhooks area): on a slow run the
    // first delivery to arrive can be another event while theirs still wait in the outbox.
    let names_them = |got: &[e2e::receiver::Received]| got.iter().any(|r| String::from_utf8_lossy(&r.body).contains(&addr));
    assert!(names_them(&rx.wait_until(90, names_them).await), "no delivery named the subject");
    quiet(&rx).await;
    let app = h.app().await;
    let scan_items = || async {
        app.db
            .scan_all()
            .await
            .unwrap()
            .into_iter()
            // A plain substring, stricter than the erasure's matching; the neighbour's
            // address (which holds theirs) taken out first.
            .filter(|i| e2e::item_text(i).replace(&format!("l{addr}"), "").contains(&addr))
            .collect::<Vec<_>>()
    };
    let scan_hits = || async { scan_items().await.into_iter().map(|i| domain::privacy::exported(i).to_string()).collect::<Vec<_>>() };
    let before = scan_items().await;
    assert!(before.len() > 15, "the setup put the address in many items");
    // An event that names them, as queued: fanned out already (its record) or not yet (outbox).
    let event_body = |i: &shared::store::Item| {
        let (pk, sk) = (shared::store::get_str(i, "pk")?, shared::store::get_str(i, "sk")?);
        (sk.starts_with("WHEVENT#") || pk.starts_with("OUTBOX#")).then(|| shared::store::get_str(i, "body")).flatten().map(str::to_string)
    };
    let late = before.iter().find_map(event_body).expect("an event names the subject");

    let e = created(&c, "/gdpr/erasures", json!({"subject": {"email": addr}, "reason": "Art. 17 request"}), 202).await;
    assert!(e.get("subject").is_none() && !e.to_string().contains(&addr), "the audit record names no one: {e}");
    let done = e2e::finished(&c, &format!("/gdpr/erasures/{}", e["id"].as_str().unwrap())).await;
    assert_eq!(done["status"], "completed", "{done}");
    let kept = c.get(&format!("/emails/{}", neighbour["id"].as_str().unwrap())).await.json["data"].clone();
    assert_eq!((kept["status"].as_str(), kept["subject"].as_str()), (neighbour["status"].as_str(), Some("Neighbour")), "{kept}");
    assert_eq!(kept["to"], json!([format!("l{addr}")]));
    let others = e2e::load::all(&c, "/contacts").await;
    assert!(others.iter().any(|ct| ct["email"] == other.as_str()), "the other customer stays");
    let hits = scan_hits().await;
    assert!(hits.is_empty(), "items still naming the address: {hits:?}");

    // A late copy of an event that named them (SQS redelivers, the outbox sweep re-sends),
    // reaching the dispatcher after the erasure, stores and sends nothing again: the erased
    // event's record still dedupes it.
    let event_id = serde_json::from_str::<serde_json::Value>(&late).unwrap()["id"].as_str().unwrap().to_string();
    let copies = || rx.received().iter().filter(|r| String::from_utf8_lossy(&r.body).contains(&event_id)).count();
    let sent_before = copies();
    let copy = shared::sqs::event(vec![shared::sqs::message("late-copy", "late-copy", &late)]);
    assert!(h.dispatcher(h.config.clone()).await.handle_sqs(copy).await.batch_item_failures.is_empty());
    let hits = scan_hits().await;
    assert!(hits.is_empty(), "a late copy of an erased event stored it again: {hits:?}");
    assert_eq!(copies(), sent_before, "a late copy of an erased event was delivered again");
    for area in ["contacts", "deals", "emails", "bookings", "consents", "portal", "gdpr", "webhooks", "platform"] {
        assert!(done["counts"][area].as_u64().unwrap_or(0) > 0, "{area} erased nothing: {}", done["counts"]);
    }
    let tomb = app.db.query_page(keys_query(&ws, "TOMBSTONE#")).await.unwrap();
    assert_eq!(tomb.items.len(), 1, "one hashed tombstone");

    // What stays, without the person: the deal's value, the booking's slot.
    let d = c.get(&format!("/deals/{}", deal["id"].as_str().unwrap())).await;
    assert_eq!((d.json["data"]["value"].as_i64(), d.json["data"]["contact_id"].is_null()), (Some(900), true), "{}", d.json);
    let b = c.get(&format!("/bookings/{}", booking["id"].as_str().unwrap())).await;
    assert_eq!((b.json["data"]["contact_id"].as_str(), b.json["data"]["notes"].is_null()), (Some(""), true), "{}", b.json);
    assert_eq!(c.get(&format!("/emails/{}", later["id"].as_str().unwrap())).await.json["data"]["status"], "cancelled");
    assert_eq!(c.get(&format!("/contacts/{ct}")).await.status, 404);
    assert_eq!(c.get(&export_path).await.status, 404, "the export about them is gone with its document");
    assert_eq!(Client::portal(&h.base_bulk, &session).get("/portal/me").await.status, 401);

    // The address stays out: no create, no import, no email, without new consent.
    let r = c.post("/contacts", &json!({"email": addr})).await;
    assert_eq!((r.status, r.code()), (409, "CONFLICT"), "{}", r.json);
    assert_eq!(r.json["error"]["details"][0]["field"], "email");
    // Nor by another contact's change of address, in either case.
    let other =
        created(&c, "/contacts", json!({"email": format!("other-{}@example.org", ulid::Ulid::generate().to_string().to_lowercase())}), 201)
            .await;
    let other_path = format!("/contacts/{}", other["id"].as_str().unwrap());
    let r = c.patch(&other_path, &json!({"email": addr.to_uppercase()})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (409, Some("email")), "{}", r.json);
    assert_eq!(c.get(&other_path).await.json["data"]["email"], other["email"], "unchanged");
    c.delete(&other_path).await;
    let imp = created(&c, "/contacts/imports", json!({"rows": [{"email": addr}]}), 202).await;
    let imp_path = format!("/contacts/imports/{}", imp["id"].as_str().unwrap());
    assert_eq!(e2e::finished(&c, &imp_path).await["failed"], 1);
    let errs = c.get(&format!("{imp_path}/errors")).await;
    assert!(errs.json["data"][0]["message"].as_str().unwrap().contains("erased"), "{}", errs.json);
    let mail = created(&c, "/emails", json!({"from": from, "to": [addr], "subject": "Hi", "text": "x"}), 202).await;
    assert_eq!(mail["status"], "suppressed", "{mail}");
    assert_eq!(mail["suppressed_recipients"][0]["reason"], "erased");
    assert!(!mail.to_string().contains(&addr), "not stored again, even as suppressed: {mail}");
    // Nor as a reply-to, which would be kept on the email and go out with it.
    let r = c
        .post(
            "/emails",
            &json!({"from": from, "to": ["someone-else@example.org"], "reply_to": [addr.to_uppercase()], "subject": "Hi", "text": "x"}),
        )
        .await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("reply_to")), "{}", r.json);
    assert!(!r.json.to_string().to_lowercase().contains(&addr), "{}", r.json);

    // Twice is harmless: the second run finds only what named them since (the refused
    // import's rows), and nothing of their records.
    let since = scan_hits().await;
    let again = created(&c, "/gdpr/erasures", json!({"subject": {"email": addr}, "reason": "again"}), 202).await;
    let again = e2e::finished(&c, &format!("/gdpr/erasures/{}", again["id"].as_str().unwrap())).await;
    assert_eq!(again["status"], "completed", "{again}");
    for area in ["deals", "bookings", "consents", "portal", "webhooks"] {
        assert_eq!(again["counts"][area], 0, "{again}; items naming the address before it ran: {since:?}");
    }
    let hits = scan_hits().await;
    assert!(hits.is_empty(), "items naming the address after the second erasure: {hits:?}");
    assert_eq!(again["subject_hash"], done["subject_hash"]);
    let audit = c.get("/gdpr/erasures?limit=10").await;
    assert_eq!(audit.json["data"].as_array().unwrap().len(), 2);
    assert!(!audit.json.to_string().contains(&addr));

    // New consent brings them back, recorded in the ledger.
    let r = c.post("/contacts", &json!({"email": addr, "resubscribe": true})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("consent")), "{}", r.json);
    let back = created(
        &c,
        "/contacts",
        json!({"email": addr, "resubscribe": true, "consent": {"text_shown": "Yes, again", "text_version": "2"}}),
        201,
    )
    .await;
    let ledger = c.get(&format!("/gdpr/consents?contact_id={}", back["id"].as_str().unwrap())).await;
    let history = ledger.json["data"]["history"].as_array().unwrap();
    // The consent from before the erasure, kept hashed, and the new one.
    assert_eq!(history.len(), 2, "{}", ledger.json);
    assert_eq!((history[0]["erased"].as_bool(), history[0]["contact_id"].is_null()), (Some(true), true), "{}", ledger.json);
    assert_eq!((history[1]["erased"].as_bool(), history[1]["text_shown"].as_str()), (Some(false), Some("Yes, again")));
    assert_eq!(ledger.json["data"]["purposes"]["marketing_email"]["granted"], true);
}

/// Raw MIME from `from` to `to`, with a file, for the inbound path.
fn inbound_message(from: &str, name: &str, to: &str, text: &str) -> String {
    let id = ulid::Ulid::generate().to_string().to_lowercase();
    format!(
        "From: {name} <{from}>\r\nTo: {to}\r\nSubject: Help for {name}\r\nMessage-ID: <{id}@mail.example.org>\r\n\
         MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\n{text}\r\n\
         --b\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=\"id.pdf\"\r\n\r\n%PDF-1.4 {text}\r\n--b--\r\n"
    )
}

async fn deliver_inbound(raw: &str, to: &str) {
    let h = harness();
    let app = h.app().await;
    let body =
        tools::admin::store_inbound(app.s3(), &h.resources.mail_bucket, raw.as_bytes(), &[to.to_string()], "PASS", "PASS").await.unwrap();
    domain::helpdesk::mail::handle(&app, &domain::helpdesk::mail::receipt(&body).unwrap()).await.unwrap();
}

#[tokio::test]
async fn an_erasure_finds_the_person_by_every_address_phone_and_name_they_ever_had() {
    let h = harness();
    let (ws, key) = h.workspace("gdpr identities").await;
    let c = Client::new(&h.base_bulk, &key);
    let domain = e2e::verified_domain(&c, &ws).await;
    let (from, mailbox) = (format!("a@{domain}"), format!("support@{domain}"));
    let u = ulid::Ulid::generate().to_string().to_lowercase();
    let (old, new) = (format!("old-{u}@example.org"), format!("new-{u}@example.org"));
    let (first, last, later_last) = (format!("Adaqz{}", &u[20..]), format!("Lovelacexy{}", &u[20..]), format!("Byronqq{}", &u[20..]));
    let (phone, later_phone) =
        (format!("+47900{}", &u.bytes().take(5).map(|b| (b % 10).to_string()).collect::<String>()), "+4790033344".to_string());
    let free = format!("freetext-{u}");

    // Who they were: the old address, name and phone, in every area that names people.
    let ct = created(&c, "/contacts", json!({"email": old, "first_name": first, "last_name": last, "phone": phone}), 201).await;
    let ct = ct["id"].as_str().unwrap().to_string();
    created(
        &c,
        "/emails",
        json!({"from": from, "to": [old], "subject": format!("Welcome, {first} {last}"), "text": "hi",
            "contact_id": ct, "headers": {"X-Customer": format!("{first} {last}")}, "metadata": {"who": format!("{first} {last}")}}),
        202,
    )
    .await;
    created(&c, "/gdpr/consents", json!({"email": old, "purpose": "marketing_email", "granted": false, "source": "form", "text_shown": "News?", "text_version": "1", "ip_address": "192.0.2.7"}), 201).await;
    let app = h.app().await;
    domain::emails::suppressions::add(&app, &shared::auth::WorkspaceId::trusted(ws.clone()), std::slice::from_ref(&old), "bounced", None)
        .await
        .unwrap();
    deliver_inbound(&inbound_message(&old, &format!("{first} {last}"), &mailbox, &format!("{free} call {phone}")), &mailbox).await;
    let convs = c.get(&format!("/helpdesk/conversations?contact_id={ct}")).await;
    assert_eq!(convs.json["data"].as_array().unwrap().len(), 1, "{}", convs.json);

    // Who they became.
    let r = c.patch(&format!("/contacts/{ct}"), &json!({"email": new, "last_name": later_last, "phone": later_phone})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let day = json!([{"start": "00:00", "end": "24:00"}]);
    let hours = json!({"mon": day, "tue": day, "wed": day, "thu": day, "fri": day, "sat": day, "sun": day});
    let res = created(&c, "/bookings/resources", json!({"name": "Room", "timezone": "UTC", "opening_hours": hours}), 201).await;
    let svc = created(&c, "/bookings/services", json!({"name": "Talk", "duration_minutes": 30, "resource_ids": [res["id"]]}), 201).await;
    let start = format!("{}T11:00:00Z", (chrono::Utc::now() + chrono::Duration::days(4)).format("%Y-%m-%d"));
    let b = created(
        &c,
        "/bookings",
        json!({"service_id": svc["id"], "start": start, "contact_id": ct, "notes": free, "metadata": {"k": free}}),
        201,
    )
    .await;
    let b_path = format!("/bookings/{}", b["id"].as_str().unwrap());
    let r = c.post(&format!("{b_path}/cancel"), &json!({"reason": free})).await;
    assert_eq!(r.status, 200, "{}", r.json);

    let needles =
        vec![old.clone(), new.clone(), first.clone(), last.clone(), later_last.clone(), phone.clone(), later_phone.clone(), free.clone()];
    let before = h.traces(&needles).await;
    assert!(before.iter().any(|t| t.contains(&old)) && before.iter().any(|t| t.starts_with("s3://")), "the setup named them: {before:?}");

    let e = created(&c, "/gdpr/erasures", json!({"subject": {"contact_id": ct}, "reason": "Art. 17"}), 202).await;
    let done = e2e::finished(&c, &format!("/gdpr/erasures/{}", e["id"].as_str().unwrap())).await;
    assert_eq!(done["status"], "completed", "{done}");
    let left = h.traces(&needles).await;
    assert!(left.is_empty(), "traces of the person after the erasure: {left:?}");

    // What stays names no one, and still works.
    let bk = c.get(&b_path).await.json["data"].clone();
    assert_eq!(
        (bk["status"].as_str(), bk["cancel_reason"].is_null(), bk["metadata"].as_object().map(|m| m.is_empty())),
        (Some("cancelled"), true, Some(true)),
        "{bk}"
    );
    let tombs = app.db.query_page(keys_query(&ws, "TOMBSTONE#")).await.unwrap();
    assert_eq!(tombs.items.len(), 2, "a tombstone for each address they had");
    let ledger = c.get(&format!("/gdpr/consents?email={old}")).await;
    let history = ledger.json["data"]["history"].as_array().unwrap();
    assert_eq!(history.len(), 1, "{}", ledger.json);
    assert_eq!(
        (history[0]["erased"].as_bool(), history[0]["granted"].as_bool(), history[0]["ip_address"].is_null()),
        (Some(true), Some(false), true)
    );
    // The old address comes back with new consent; it bounced before, so it stays suppressed.
    created(&c, "/contacts", json!({"email": old, "resubscribe": true, "consent": {"text_shown": "Yes", "text_version": "2"}}), 201).await;
    let mail =
        created(&c, "/emails", json!({"from": from, "to": [old], "subject": "Back?", "text": "x", "transactional": true}), 202).await;
    assert_eq!(
        (mail["status"].as_str(), mail["suppressed_recipients"][0]["reason"].as_str()),
        (Some("suppressed"), Some("bounced")),
        "{mail}"
    );
}

fn keys_query(ws: &str, prefix: &str) -> shared::store::QuerySpec<'static> {
    shared::store::QuerySpec::new(shared::store::ws_pk(&shared::ids::WorkspaceId::trusted(ws)), prefix, None, 10)
}

#[tokio::test]
async fn the_consent_ledger_keeps_history_and_withdrawing_marketing_unsubscribes() {
    let h = harness();
    let (ws, key) = h.workspace("gdpr consents").await;
    let c = Client::new(&h.base_bulk, &key);
    let from = format!("a@{}", e2e::verified_domain(&c, &ws).await);
    let ct = created(&c, "/contacts", json!({"email": "lia@example.org"}), 201).await["id"].as_str().unwrap().to_string();
    let consent = |granted: bool, version: &str| {
        json!({"email": "Lia@Example.org", "purpose": "marketing_email", "granted": granted, "source": "form",
            "text_shown": "Newsletter?", "text_version": version, "ip_address": "203.0.113.9", "user_agent": "test"})
    };
    created(&c, "/gdpr/consents", consent(true, "1"), 201).await;
    let w = created(&c, "/gdpr/consents", consent(false, "2"), 201).await;
    assert_eq!((w["contact_id"].as_str(), w["email"].as_str()), (Some(ct.as_str()), Some("lia@example.org")));
    assert_eq!(c.get(&format!("/contacts/{ct}")).await.json["data"]["email_status"], "unsubscribed", "withdrawn in the same transaction");
    let marketing = created(&c, "/emails", json!({"from": from, "to": ["lia@example.org"], "subject": "Sale", "text": "x"}), 202).await;
    assert_eq!(marketing["status"], "suppressed");
    let receipt = created(
        &c,
        "/emails",
        json!({"from": from, "to": ["lia@example.org"], "subject": "Receipt", "text": "x", "transactional": true}),
        202,
    )
    .await;
    assert_eq!(receipt["status"], "queued", "transactional mail still goes");
    created(
        &c,
        "/gdpr/consents",
        json!({"contact_id": ct, "purpose": "analytics", "granted": true, "source": "api", "text_shown": "Stats?", "text_version": "a"}),
        201,
    )
    .await;

    let state = c.get("/gdpr/consents?email=lia@example.org").await;
    assert_eq!(state.status, 200, "{}", state.json);
    let d = &state.json["data"];
    assert_eq!(d["history"].as_array().unwrap().len(), 3);
    assert_eq!(d["purposes"]["marketing_email"]["granted"], false);
    assert_eq!(d["purposes"]["marketing_email"]["text_version"], "2");
    assert_eq!(d["purposes"]["analytics"]["granted"], true);
    assert_eq!(c.get(&format!("/gdpr/consents?contact_id={ct}")).await.json["data"]["history"], d["history"]);
    // Granting again subscribes again.
    created(&c, "/gdpr/consents", consent(true, "3"), 201).await;
    assert_eq!(c.get(&format!("/contacts/{ct}")).await.json["data"]["email_status"], "subscribed");
    // An address without a contact has a ledger too.
    created(&c, "/gdpr/consents", json!({"email": "walk-in@example.org", "purpose": "third_party_sharing", "granted": false, "source": "form", "text_shown": "Share?", "text_version": "1"}), 201).await;

    for (body, field) in [
        (
            json!({"purpose": "Bad Purpose", "granted": true, "source": "api", "text_shown": "x", "text_version": "1", "email": "a@example.org"}),
            "purpose",
        ),
        (json!({"purpose": "analytics", "granted": true, "source": "api", "text_shown": "x", "text_version": "1"}), "email"),
        (
            json!({"purpose": "analytics", "granted": true, "source": "api", "text_shown": "x", "text_version": "1", "email": "a@example.org", "ip_address": "nope"}),
            "ip_address",
        ),
    ] {
        let r = c.post("/gdpr/consents", &body).await;
        assert_eq!((r.status, r.code()), (400, "VALIDATION_ERROR"), "{}", r.json);
        assert_eq!(r.json["error"]["details"][0]["field"], field, "{}", r.json);
    }
    let r = c.post("/gdpr/consents", &json!({"contact_id": "ct_01HF6Z3Q8M4W2T9K7R5N1B0C6D", "purpose": "analytics", "granted": true, "source": "api", "text_shown": "x", "text_version": "1"})).await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn roles_and_the_export_rate_class_of_gdpr_routes() {
    let h = harness();
    let (_, key) = h.workspace("gdpr roles").await;
    let mut cfg = h.config.clone();
    cfg.limits.insert(shared::ratelimit::Class::GdprExport, shared::ratelimit::Limit::parse("100/s:100").unwrap());
    let c = Client::new(&h.gateway_with(cfg).await, &key);
    let r = c.post("/workspaces/current/api-keys", &json!({"name": "writer", "scopes": ["read", "write"]})).await;
    let writer = Client::new(&c.base, r.json["data"]["secret"].as_str().unwrap());
    let r = writer.post("/gdpr/erasures", &json!({"subject": {"email": "x@example.org"}, "reason": "r"})).await;
    assert_eq!((r.status, r.code()), (403, "FORBIDDEN"), "erasure needs admin: {}", r.json);
    let r = writer.post("/gdpr/exports", &json!({"scope": "workspace"})).await;
    assert_eq!((r.status, r.code()), (403, "FORBIDDEN"), "a workspace export needs admin: {}", r.json);
    let r = writer.post("/gdpr/exports", &json!({"subject": {"email": "x@example.org"}})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    let r = c.post("/gdpr/exports", &json!({"subject": {"email": "x@example.org"}, "scope": "workspace"})).await;
    assert_eq!(r.status, 400, "{}", r.json);
    // The dedicated class: 5 an hour, burst 2, per workspace.
    let (_, key) = h.workspace("gdpr export limit").await;
    let limited = Client::new(&h.base, &key);
    for _ in 0..2 {
        assert_eq!(limited.post("/gdpr/exports", &json!({"subject": {"email": "x@example.org"}})).await.status, 202);
    }
    let r = limited.post("/gdpr/exports", &json!({"subject": {"email": "x@example.org"}})).await;
    assert_eq!((r.status, r.code()), (429, "RATE_LIMITED"), "{}", r.json);
    assert!(r.header("retry-after").unwrap().parse::<u64>().unwrap() > 60);
    assert!(r.header("ratelimit-policy").unwrap().contains("gdpr_export"));
}

/// A workspace export of 1,500 contacts, cut into small parts, whose worker is killed again
/// and again mid-way: every restart resumes after the last uploaded part, and the document
/// holds every contact exactly once.
#[tokio::test]
async fn a_workspace_export_resumes_after_its_worker_dies_and_holds_everything_once() {
    let h = harness();
    let (ws, key) = h.workspace("gdpr workspace export").await;
    let c = Client::new(&h.base_bulk, &key);
    let rows: Vec<Value> = (0..1500).map(|i| json!({"email": format!("p{i}@example.org"), "first_name": format!("P{i}")})).collect();
    let imp = created(&c, "/contacts/imports", json!({"rows": rows}), 202).await;
    assert_eq!(e2e::finished(&c, &format!("/contacts/imports/{}", imp["id"].as_str().unwrap())).await["created"], 1500);

    // Jobs of this test go to a queue no worker polls: the test is the worker.
    let q = h.own_queue("gdpr-test").await;
    let mut cfg = h.config.clone();
    cfg.gdpr_queue_url = q;
    cfg.export_part_bytes = 1024;
    let app = h.app_with(cfg).await;
    let job = domain::gdpr::export::start_workspace(
        &shared::authority::Grant::operator("test", &[<domain::effects::ExportWorkspace as shared::authority::Effect>::INFO]),
        &app,
        &shared::auth::WorkspaceId::trusted(ws.clone()),
    )
    .await
    .unwrap();
    // A worker killed mid-way, three times: each run is stopped (its future dropped at whatever
    // it awaits, as a killed process stops) once it has saved a part more than the last one,
    // so every death lands between uploads however fast the machine is; then a run to the end.
    let parts = || async {
        let item = app
            .db
            .get(&shared::store::ws_pk(&shared::ids::WorkspaceId::trusted(&ws)), &domain::keys::EXPORT_JOB.sk(&job.id))
            .await
            .unwrap()
            .unwrap_or_default();
        let resume: Value = shared::store::get_str(&item, "resume").and_then(|j| serde_json::from_str(j).ok()).unwrap_or_default();
        resume["parts"].as_array().map_or(0, Vec::len)
    };
    let mut deaths = 0;
    let mut finished = false;
    while !finished {
        let before = parts().await;
        let wid = shared::auth::WorkspaceId::trusted(ws.clone());
        let run = shared::metrics::as_function("gdpr-worker", domain::gdpr::export::run(&app, &wid, &job.id));
        tokio::pin!(run);
        loop {
            tokio::select! {
                r = &mut run => {
                    r.unwrap();
                    finished = true;
                    break;
                }
                _ = tokio::time::sleep(Duration::from_millis(20)), if deaths < 3 => {
                    if parts().await > before {
                        deaths += 1;
                        break;
                    }
                }
            }
        }
    }
    assert!(deaths >= 2, "the worker died mid-way at least twice ({deaths})");
    let done = domain::gdpr::export::load(&app, &shared::auth::WorkspaceId::trusted(ws.clone()), &job.id).await.unwrap().unwrap();
    assert_eq!(done.status, domain::gdpr::jobs::JobStatus::Completed, "{done:?}");
    let doc = document(done.download_url.as_deref().unwrap()).await;
    let contacts = doc["sections"]["workspace"]["contact"].as_array().unwrap();
    let mut emails: Vec<&str> = contacts.iter().map(|c| c["email"].as_str().unwrap()).collect();
    emails.sort();
    let n = emails.len();
    emails.dedup();
    assert_eq!((n, emails.len()), (1500, 1500), "every contact exactly once");
    assert_eq!(doc["manifest"]["areas"]["workspace"]["contact"], 1500);
    assert!(doc["sections"]["workspace"]["api_key_listing"].to_string().contains("\"prefix\""));
    assert!(!doc.to_string().contains("\"hash\""), "no key hashes");
}

#[tokio::test]
async fn an_address_someone_else_holds_now_is_theirs_when_its_former_owner_is_erased() {
    let h = harness();
    let (ws, key) = h.workspace("gdpr former address").await;
    let c = Client::new(&h.base_bulk, &key);
    let from = format!("a@{}", e2e::verified_domain(&c, &ws).await);
    let u = ulid::Ulid::generate().to_string().to_lowercase();
    let (shared_addr, a_now) = (format!("shared-{u}@example.org"), format!("a-now-{u}@example.org"));
    let a = created(&c, "/contacts", json!({"email": shared_addr, "phone": "+4791234567"}), 201).await["id"].as_str().unwrap().to_string();
    assert_eq!(c.patch(&format!("/contacts/{a}"), &json!({"email": a_now})).await.status, 200);
    // B takes the address A left, with the same phone (a switchboard), and is mailed at it.
    let b = created(&c, "/contacts", json!({"email": shared_addr, "phone": "+4791234567"}), 201).await["id"].as_str().unwrap().to_string();
    let mail =
        created(&c, "/emails", json!({"from": from, "to": [shared_addr], "subject": "For B", "text": "x", "contact_id": b}), 202).await;

    let e = created(&c, "/gdpr/erasures", json!({"subject": {"contact_id": a}, "reason": "Art. 17"}), 202).await;
    assert_eq!(e2e::finished(&c, &format!("/gdpr/erasures/{}", e["id"].as_str().unwrap())).await["status"], "completed");
    // B, B's address and B's email are untouched; only A's own address is tombstoned.
    assert_eq!(c.get(&format!("/contacts/{b}")).await.json["data"]["email"], shared_addr.as_str());
    let m = c.get(&format!("/emails/{}", mail["id"].as_str().unwrap())).await.json["data"].clone();
    assert_eq!((m["to"][0].as_str(), m["subject"].as_str()), (Some(shared_addr.as_str()), Some("For B")), "{m}");
    let app = h.app().await;
    assert_eq!(app.db.query_page(keys_query(&ws, "TOMBSTONE#")).await.unwrap().items.len(), 1);
    let again = created(&c, "/emails", json!({"from": from, "to": [shared_addr], "subject": "Still B", "text": "x"}), 202).await;
    assert_ne!(again["status"], "suppressed", "{again}");
    assert!(h.traces(std::slice::from_ref(&a_now)).await.is_empty());
}

/// An email a stopped sender left claimed (killed after its claim: SES may have the email)
/// is not recorded `cancelled` by an erasure: it ends `failed` / `outcome_unknown`, as the
/// sender would record it, with the subject's traces gone all the same. An email nobody
/// claimed is cancelled.
#[tokio::test]
async fn an_erasure_does_not_call_an_email_a_stopped_sender_left_claimed_cancelled() {
    let h = harness();
    let (ws, key) = h.workspace("gdpr leftover claim").await;
    let c = Client::new(&h.base, &key);
    let from = format!("team@{}", e2e::verified_domain(&c, &ws).await);
    let addr = format!("claimed-{}@example.org", ulid::Ulid::generate().to_string().to_lowercase());
    let mut ids = vec![];
    for subject in ["left claimed", "never claimed"] {
        let body = json!({"from": from, "to": [addr], "subject": subject, "text": "t", "scheduled_at": e2e::in_hours(24)});
        ids.push(created(&c, "/emails", body, 202).await["id"].as_str().unwrap().to_string());
    }
    // What a sender killed after claiming the first email leaves: its claim, expired.
    let app = h.app().await;
    let past = chrono::Utc::now().timestamp() - 60;
    let sk = domain::keys::EMAIL.sk(&domain::ids::EmailId::trusted(&ids[0]));
    app.db
        .mark(shared::store::ws_pk(&shared::ids::WorkspaceId::trusted(&ws)), sk.clone(), "claim_token", shared::store::s("killed-sender"))
        .await;
    app.db.mark(shared::store::ws_pk(&shared::ids::WorkspaceId::trusted(&ws)), sk, "claim_until", shared::store::n(past)).await;

    let e = created(&c, "/gdpr/erasures", json!({"subject": {"email": addr}, "reason": "Art. 17"}), 202).await;
    assert_eq!(e2e::finished(&c, &format!("/gdpr/erasures/{}", e["id"].as_str().unwrap())).await["status"], "completed");
    let left = c.get(&format!("/emails/{}", ids[0])).await.json["data"].clone();
    assert_eq!((left["status"].as_str(), left["error"]["code"].as_str()), (Some("failed"), Some("outcome_unknown")), "{left}");
    assert!(!left.to_string().contains(&addr), "erased: {left}");
    let never = c.get(&format!("/emails/{}", ids[1])).await.json["data"].clone();
    assert_eq!(never["status"], "cancelled", "{never}");

    // SES did have the first email, and bounces it after the erasure: the feedback finds the
    // email by its tags, but names no one: the address comes back nowhere in the table (the
    // email's feedback, its events, the suppression list keeps it hashed only).
    let bounce = json!({"eventType": "Bounce", "mail": {"messageId": format!("0100019{}", ulid::Ulid::generate()), "tags": {"email_id": [ids[0]], "workspace_id": [ws]}},
        "bounce": {"bounceType": "Permanent", "bounceSubType": "General",
            "bouncedRecipients": [{"emailAddress": addr, "diagnosticCode": format!("smtp; 550 5.1.1 <{addr}> unknown")}]}});
    let n = domain::sending::feedback::parse(&bounce.to_string()).expect("a notification");
    domain::sending::feedback::apply(&h.sender().await, &n).await.expect("applied");
    let bounced = c.get(&format!("/emails/{}", ids[0])).await.json["data"].clone();
    assert_eq!(bounced["status"], "bounced", "{bounced}");
    assert_eq!(bounced["feedback"]["recipients"], json!([domain::emails::ERASED_ADDRESS]), "{bounced}");
    let hits: Vec<String> = app
        .db
        .scan_all()
        .await
        .unwrap()
        .into_iter()
        .map(|i| domain::privacy::exported(i).to_string())
        .filter(|s| s.contains(&addr))
        .collect();
    assert!(hits.is_empty(), "items naming the erased address after its bounce: {hits:?}");
    let again = created(&c, "/emails", json!({"from": from, "to": [addr], "subject": "s", "text": "t"}), 202).await;
    assert_eq!(again["status"], "suppressed", "{again}");
}

/// Feedback that arrives while an erasure is on its way (the address's tombstone is written
/// first; the email is reached later): the email it updates is redacted as the erasure would
/// redact it, so neither the stored email nor its event names the person.
#[tokio::test]
async fn feedback_during_an_erasure_names_no_one() {
    let h = harness();
    let (ws, key) = h.workspace("gdpr feedback midway").await;
    let c = Client::new(&h.base, &key);
    let from = format!("team@{}", e2e::verified_domain(&c, &ws).await);
    let addr = format!("midway-{}@example.org", ulid::Ulid::generate().to_string().to_lowercase());
    let e = created(&c, "/emails", json!({"from": from, "to": [addr], "subject": "Welcome, Ada", "text": "t"}), 202).await;
    let id = e["id"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let sent = loop {
        let e = c.get(&format!("/emails/{id}")).await.json["data"].clone();
        if e["status"] == "sent" || std::time::Instant::now() > deadline {
            break e;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(sent["status"], "sent", "{sent}");
    // The erasure's first step: the address's tombstone.
    let app = h.app().await;
    let wsid = shared::auth::WorkspaceId::trusted(ws.clone());
    let tomb = domain::privacy::tombstone_sk(&app, &wsid, &addr).await.unwrap();
    let item = shared::store::Record::new(shared::store::ws_pk(&wsid), tomb, &json!({"object": "erasure_tombstone"})).unwrap().item;
    app.db.batch_put(vec![item]).await.unwrap();

    let bounce = json!({"notificationType": "Bounce", "mail": {"messageId": sent["provider_message_id"]},
        "bounce": {"bounceType": "Permanent", "bounceSubType": "General",
            "bouncedRecipients": [{"emailAddress": addr, "diagnosticCode": format!("smtp; 550 <{addr}> unknown")}]}});
    let n = domain::sending::feedback::parse(&bounce.to_string()).expect("a notification");
    domain::sending::feedback::apply(&h.sender().await, &n).await.expect("applied");
    let e = c.get(&format!("/emails/{id}")).await.json["data"].clone();
    assert_eq!(e["status"], "bounced", "{e}");
    assert!(!e.to_string().contains(&addr) && !e.to_string().contains("Ada"), "the email names no one: {e}");
    // Suppressed by its hash only: the list names no one.
    let list = c.get("/emails/suppressions?limit=100").await;
    assert_eq!(list.status, 200, "{}", list.json);
    assert!(!list.json.to_string().contains(&addr), "{}", list.json);
    let again = created(&c, "/emails", json!({"from": from, "to": [addr], "subject": "s", "text": "t"}), 202).await;
    assert_eq!(again["status"], "suppressed", "{again}");

    // The tombstone landing between feedback's look and its write (an erasure that began in
    // between): the suppression's write checks the tombstone itself, so the address is still
    // kept by its hash only, and a plain one is written for an address with no tombstone.
    let late = format!("late-{}@example.org", ulid::Ulid::generate().to_string().to_lowercase());
    let tomb = domain::privacy::tombstone_sk(&app, &wsid, &late).await.unwrap();
    let item = shared::store::Record::new(shared::store::ws_pk(&wsid), tomb, &json!({"object": "erasure_tombstone"})).unwrap().item;
    app.db.batch_put(vec![item]).await.unwrap();
    let alive = format!("alive-{}@example.org", ulid::Ulid::generate().to_string().to_lowercase());
    domain::emails::suppressions::add(&app, &wsid, &[late.clone(), alive.clone()], "bounced", None).await.unwrap();
    let list = c.get("/emails/suppressions?limit=100").await.json["data"].clone();
    let listed = |a: &str| list.as_array().unwrap().iter().find(|s| s["address"] == a).map(|s| s["reason"].clone());
    assert_eq!((listed(&late), listed(&alive)), (None, Some(json!("bounced"))), "{list}");
    let hashed = app.db.query_page(keys_query(&ws, domain::keys::ERASED_SUPPRESSION.sk_prefix())).await.unwrap();
    assert_eq!(hashed.items.len(), 2, "the two erased addresses, by their hashes");
}

/// What the second review found outliving an erasure: a consent for an erased address (409,
/// nothing stored), consents racing the erasure (none survives it), a workspace export made
/// before it (withdrawn: no link, no document), a deleted contact's timeline and former
/// identities (purged), a contact found by a former address (erased by it).
#[tokio::test]
async fn nothing_outlives_an_erasure_consents_exports_or_a_deleted_contacts_history() {
    let h = harness();
    let (ws, key) = h.workspace("gdpr leftovers").await;
    let c = Client::new(&h.base_bulk, &key);
    let app = h.app().await;
    let u = ulid::Ulid::generate().to_string().to_lowercase();
    let naming = |needle: String| {
        let app = &app;
        async move { app.db.scan_all().await.unwrap().into_iter().filter(|i| e2e::item_text(i).contains(&needle)).collect::<Vec<_>>() }
    };
    let consent = |email: &str| json!({"email": email, "purpose": "marketing_email", "granted": true, "source": "form", "text_shown": "Yes", "text_version": "1"});

    // A workspace export made before the erasure.
    let addr = format!("ada-{u}@example.org");
    let ada = created(&c, "/contacts", json!({"email": addr, "first_name": "Ada"}), 201).await;
    created(&c, "/gdpr/consents", consent(&addr), 201).await;
    let wx = created(&c, "/gdpr/exports", json!({"scope": "workspace"}), 202).await;
    let wx_path = format!("/gdpr/exports/{}", wx["id"].as_str().unwrap());
    let wx_done = e2e::finished(&c, &wx_path).await;
    assert!(wx_done["download_url"].is_string(), "{wx_done}");
    assert!(document(wx_done["download_url"].as_str().unwrap()).await.to_string().contains(&addr));

    // Consents race the erasure: each is refused or erased, none survives.
    let e = created(&c, "/gdpr/erasures", json!({"subject": {"contact_id": ada["id"]}, "reason": "asked"}), 202).await;
    let e_path = format!("/gdpr/erasures/{}", e["id"].as_str().unwrap());
    let racer = {
        let (c, body) = (c.clone(), consent(&addr));
        tokio::spawn(async move {
            let mut statuses = vec![];
            for _ in 0..40 {
                statuses.push(c.post("/gdpr/consents", &body).await.status);
            }
            statuses
        })
    };
    assert_eq!(e2e::finished(&c, &e_path).await["status"], "completed");
    let statuses = racer.await.unwrap();
    // Recorded (then hashed by the erasure), refused as erased, or, while the contact is being
    // erased, not found.
    assert!(statuses.iter().all(|s| [201, 404, 409].contains(s)), "{statuses:?}");
    // After it, an erased address's consent is refused and stored nowhere.
    let r = c.post("/gdpr/consents", &consent(&addr.to_uppercase())).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (409, Some("email")), "{}", r.json);
    let left = naming(addr.clone()).await;
    assert!(left.is_empty(), "items naming the erased address: {:?}", left.iter().map(e2e::item_text).collect::<Vec<_>>());
    // The earlier workspace export is withdrawn: no link, and its document is gone.
    let wx_after = c.get(&wx_path).await.json["data"].clone();
    assert!(wx_after["download_url"].is_null(), "{wx_after}");
    assert_eq!(wx_after["error"]["code"], "withdrawn", "{wx_after}");
    let docs = h.bucket_objects(&h.resources.exports_bucket, &format!("exports/{ws}/{}", wx["id"].as_str().unwrap())).await;
    assert!(docs.is_empty(), "the document is deleted");

    // A contact found by a former address: erased by it, with its current one.
    let (old, new) = (format!("bo-old-{u}@example.org"), format!("bo-new-{u}@example.org"));
    let bo = created(&c, "/contacts", json!({"email": old}), 201).await;
    let bo_path = format!("/contacts/{}", bo["id"].as_str().unwrap());
    assert_eq!(c.patch(&bo_path, &json!({"email": new})).await.status, 200);
    let e = created(&c, "/gdpr/erasures", json!({"subject": {"email": old}, "reason": "asked by the old address"}), 202).await;
    let done = e2e::finished(&c, &format!("/gdpr/erasures/{}", e["id"].as_str().unwrap())).await;
    assert_eq!((done["status"].as_str(), done["counts"]["contacts"].as_u64().map(|n| n > 0)), (Some("completed"), Some(true)), "{done}");
    assert_eq!(c.get(&bo_path).await.status, 404, "the contact that had the address is erased");
    assert!(naming(new.clone()).await.is_empty() && naming(old.clone()).await.is_empty());

    // A deleted contact's history (timeline, former identities) goes with it.
    let (was, is) = (format!("cy-was-{u}@example.org"), format!("cy-is-{u}@example.org"));
    let cy = created(&c, "/contacts", json!({"email": was}), 201).await;
    let cy_id = cy["id"].as_str().unwrap().to_string();
    assert_eq!(c.patch(&format!("/contacts/{cy_id}"), &json!({"email": is})).await.status, 200);
    created(&c, &format!("/contacts/{cy_id}/notes"), json!({"body": "called about the invoice"}), 201).await;
    let history = |id: String| {
        let app = &app;
        let ws = ws.clone();
        async move {
            let mut n = 0;
            for prefix in [
                domain::keys::ACTIVITY.sk_prefix_of(&domain::ids::ContactId::trusted(&id)),
                domain::keys::CONTACT_FORMER.sk_prefix_of(&domain::ids::ContactId::trusted(&id)),
            ] {
                n += app
                    .db
                    .query_page(shared::store::QuerySpec::new(
                        shared::store::ws_pk(&shared::ids::WorkspaceId::trusted(&ws)),
                        &prefix,
                        None,
                        100,
                    ))
                    .await
                    .unwrap()
                    .items
                    .len();
            }
            n
        }
    };
    assert!(history(cy_id.clone()).await >= 2);
    assert_eq!(c.delete(&format!("/contacts/{cy_id}")).await.status, 200);
    let mut left = usize::MAX;
    for _ in 0..150 {
        left = history(cy_id.clone()).await;
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(left, 0, "the deleted contact's timeline and former identities are purged");
    // Only events (kept for their webhook deliveries until an erasure) still hold the address.
    let kept: Vec<String> = naming(was).await.iter().filter_map(|i| shared::store::get_str(i, "sk").map(String::from)).collect();
    assert!(kept.iter().all(|sk| sk.starts_with("WHEVENT#") || sk.starts_with("evt_") || sk.starts_with("IDEM")), "{kept:?}");
}
