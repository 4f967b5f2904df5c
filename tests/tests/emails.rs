//! Emails end to end over HTTP: the sender and the tick run in the local stack and send through
//! moto's SES; what left is read back from moto's record of sent messages.

use e2e::{Client, harness};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The From of a workspace's emails: an address at its own verified sending domain.
fn from(ws: &str) -> String {
    format!("Acme Support <support@{}.example.test>", ws.trim_start_matches("ws_").to_ascii_lowercase())
}

/// A fresh workspace with a verified sending domain of its own (see `from`).
async fn sender_workspace(name: &str) -> (Client, String) {
    let h = harness();
    let (ws, key) = h.workspace(name).await;
    let c = Client::new(&h.base, &key);
    e2e::verified_domain(&c, &ws).await;
    (c, ws)
}

async fn send(c: &Client, body: Value) -> Value {
    let r = c.post("/emails", &body).await;
    assert_eq!(r.status, 202, "{}", r.json);
    r.json["data"].clone()
}

/// Poll an email until its status is one of `want`.
async fn wait_status(c: &Client, id: &str, want: &[&str], secs: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let r = c.get(&format!("/emails/{id}")).await;
        assert_eq!(r.status, 200, "{}", r.json);
        let st = r.json["data"]["status"].as_str().unwrap().to_string();
        if want.contains(&st.as_str()) {
            return r.json["data"].clone();
        }
        assert!(Instant::now() < deadline, "email {id} still {st}, wanted {want:?}: {}", r.json);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The messages moto's SES recorded with this subject.
async fn ses_with_subject(subject: &str) -> Vec<Value> {
    harness().ses_sent().await.into_iter().filter(|m| m["subject"] == subject).collect()
}

fn unique(prefix: &str) -> String {
    format!("{prefix} {}", shared::ids::new_id("t"))
}

#[tokio::test]
async fn a_templated_email_leaves_through_ses_rendered_and_escaped() {
    let (c, ws) = sender_workspace("templated email").await;
    let from = from(&ws);
    let tag = unique("Welcome");
    let r = c
        .post(
            "/emails/templates",
            &json!({
                "slug": "welcome",
                "subject": format!("{tag} {{{{ name }}}}"),
                "html": "<h1>Hello {{name}}</h1><p>Plan: {{account.plan}}</p>",
                "text": "Hello {{name}}",
                "required_variables": ["name"],
                "variants": {"de": {"subject": format!("{tag} Hallo {{{{name}}}}"), "html": "<h1>Hallo {{name}}</h1>"}}
            }),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(c.post("/emails/templates", &json!({"slug": "welcome", "subject": "x", "text": "y"})).await.status, 409);
    let bad = c.post("/emails/templates", &json!({"slug": "broken", "subject": "Hi {{ name", "text": "y"})).await;
    assert_eq!((bad.status, bad.json["error"]["details"][0]["field"].as_str()), (400, Some("subject")), "{}", bad.json);

    // A missing required variable is a validation error naming it.
    let r = c.post("/emails", &json!({"from": from, "to": ["ann@example.org"], "template_slug": "welcome", "variables": {}})).await;
    assert_eq!((r.status, r.code()), (400, "VALIDATION_ERROR"));
    assert_eq!(r.json["error"]["details"][0]["field"], "variables.name", "{}", r.json);

    let email = send(
        &c,
        json!({"from": from, "to": ["Ann@Example.org"], "cc": ["cc@example.org"], "template_slug": "welcome",
            "variables": {"name": "<b>Ann & \"Co\"</b>", "account": {"plan": "pro"}}, "tags": ["onboarding"],
            "headers": {"X-Campaign": "spring", "List-Unsubscribe": "<mailto:unsubscribe@example.com>"}}),
    )
    .await;
    assert_eq!(email["status"], "queued");
    assert_eq!(email["to"], json!(["ann@example.org"]));
    let id = email["id"].as_str().unwrap();
    let sent = wait_status(&c, id, &["sent"], 30).await;
    assert!(sent["timestamps"]["queued"].is_string() && sent["timestamps"]["sent"].is_string(), "{sent}");
    assert_eq!(sent["attempts"], 1);
    let subject = format!("{tag} <b>Ann & \"Co\"</b>");
    assert_eq!(sent["subject"], subject.as_str());
    assert_eq!(sent["html"], "<h1>Hello &lt;b&gt;Ann &amp; &quot;Co&quot;&lt;/b&gt;</h1><p>Plan: pro</p>");
    assert_eq!(sent["text"], "Hello <b>Ann & \"Co\"</b>");

    // What SES recorded is exactly that, once, from the sender, to the recipients.
    let msgs = ses_with_subject(&subject).await;
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    let m = &msgs[0];
    assert_eq!(m["id"], sent["provider_message_id"]);
    // SES gets the bare address; the message's own From carries the name.
    assert_eq!(m["source"], from.split('<').nth(1).unwrap().trim_end_matches('>'));
    assert_eq!(m["headers"]["From"].as_str().unwrap().replace('"', ""), from);
    assert_eq!(m["body"], "<h1>Hello &lt;b&gt;Ann &amp; &quot;Co&quot;&lt;/b&gt;</h1><p>Plan: pro</p>");
    assert_eq!(m["destinations"]["ToAddresses"], json!(["ann@example.org"]));
    assert_eq!(m["destinations"]["CcAddresses"], json!(["cc@example.org"]));

    // A locale variant (de-AT falls back to de).
    let de = send(
        &c,
        json!({"from": from, "to": ["ben@example.org"], "template_slug": "welcome", "locale": "de-AT", "variables": {"name": "Ben"}}),
    )
    .await;
    assert_eq!((de["locale"].as_str(), de["subject"].as_str()), (Some("de"), Some(format!("{tag} Hallo Ben").as_str())));
    let de = wait_status(&c, de["id"].as_str().unwrap(), &["sent"], 30).await;
    assert_eq!(ses_with_subject(de["subject"].as_str().unwrap()).await[0]["body"], "<h1>Hallo Ben</h1>");

    // Round trips of an accept (the key's look-up is kept by the container): bucket, then
    // workspace senders | template | recipients' contact claims concurrently, then one
    // transaction (the queue message is SQS).
    let r = c
        .post("/emails", &json!({"from": from, "to": ["cal@example.org"], "template_slug": "welcome", "variables": {"name": "Cal"}}))
        .await;
    assert_eq!((r.status, r.ddb_calls()), (202, 5), "{}", r.json);
    let r = c.post("/emails", &json!({"from": from, "to": ["dan@example.org"], "subject": "raw", "text": "t"})).await;
    assert_eq!((r.status, r.ddb_calls()), (202, 4), "{}", r.json);
    let r = c.get(&format!("/emails/{id}")).await;
    assert_eq!(r.ddb_calls(), 2, "bucket, one BatchGetItem for the email and its bodies");

    // Filters: by tag, by status; bodies are left out of lists.
    let listed = c.get("/emails?tag=onboarding").await;
    assert_eq!(listed.json["data"].as_array().unwrap().len(), 1, "{}", listed.json);
    assert!(listed.json["data"][0].get("html").is_none());
    let listed = c.get("/emails?limit=2").await;
    assert_eq!(listed.json["data"].as_array().unwrap().len(), 2);
    let ids: Vec<&str> = listed.json["data"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert!(ids[0] > ids[1], "newest first: {ids:?}");
    let rest = c.get(&format!("/emails?limit=2&cursor={}", listed.json["next_cursor"].as_str().unwrap())).await;
    assert_eq!(rest.json["data"].as_array().unwrap().len(), 2, "4 emails in all: {}", rest.json);
    assert_eq!(rest.json["has_more"], false);
    let listed = c.get("/emails?status=sent").await;
    assert!(listed.json["data"].as_array().unwrap().iter().any(|e| e["id"] == de["id"]));

    // Templates can change without touching what was accepted.
    let r = c.patch("/emails/templates/welcome", &json!({"text": null, "required_variables": null})).await;
    assert_eq!((r.status, r.json["data"]["text"].clone()), (200, Value::Null), "{}", r.json);
    assert_eq!(c.get("/emails/templates").await.json["data"].as_array().unwrap().len(), 1);
    assert_eq!(c.delete("/emails/templates/welcome").await.status, 200);
    assert_eq!(c.get("/emails/templates/welcome").await.status, 404);
    assert_eq!(c.get(&format!("/emails/{id}")).await.json["data"]["subject"], subject.as_str());
}

#[tokio::test]
async fn sends_are_validated_field_by_field() {
    let (c, ws) = sender_workspace("email validation").await;
    let from = from(&ws);
    let soon = shared::ids::format_time(chrono::Utc::now() - chrono::Duration::minutes(1));
    let far = shared::ids::format_time(chrono::Utc::now() + chrono::Duration::days(31));
    let too_many: Vec<String> = (0..51).map(|i| format!("r{i}@example.org")).collect();
    let cases = [
        (json!({"from": "not an address", "to": ["a@example.org"], "subject": "s", "text": "t"}), "from"),
        (json!({"from": "x@not-ours.org", "to": ["a@example.org"], "subject": "s", "text": "t"}), "from"),
        (json!({"from": from, "to": [], "subject": "s", "text": "t"}), "to"),
        (json!({"from": from, "to": ["nope"], "subject": "s", "text": "t"}), "to[0]"),
        (json!({"from": from, "to": too_many, "subject": "s", "text": "t"}), "to"),
        (json!({"from": from, "to": ["a@example.org"], "text": "t"}), "subject"),
        (json!({"from": from, "to": ["a@example.org"], "subject": "s"}), "html"),
        (json!({"from": from, "to": ["a@example.org"], "subject": "line\r\nBcc: x@evil.org", "text": "t"}), "subject"),
        (json!({"from": from, "to": ["a@example.org"], "subject": "s", "text": "t", "headers": {"Bcc": "x@evil.org"}}), "headers.Bcc"),
        (json!({"from": from, "to": ["a@example.org"], "subject": "s", "text": "t", "headers": {"X-Ok": "a\r\nb"}}), "headers.X-Ok"),
        (json!({"from": from, "to": ["a@example.org"], "subject": "s", "text": "t", "scheduled_at": soon}), "scheduled_at"),
        (json!({"from": from, "to": ["a@example.org"], "subject": "s", "text": "t", "scheduled_at": far}), "scheduled_at"),
        (json!({"from": from, "to": ["a@example.org"], "subject": "s", "template_slug": "x"}), "subject"),
        (json!({"from": from, "to": ["a@example.org"], "template_slug": "missing"}), "template_slug"),
        (
            json!({"from": from, "to": ["a@example.org"], "subject": "s", "text": "t", "contact_id": "ct_01HF6Z3Q8M4W2T9K7R5N1B0C6D"}),
            "contact_id",
        ),
        (json!({"from": from, "to": ["a@example.org"], "subject": "s", "text": "t", "tags": ["no spaces"]}), "tags[0]"),
        (json!({"from": from, "to": ["a@example.org"], "subject": "s", "text": "t", "surprise": 1}), "surprise"),
    ];
    for (body, field) in cases {
        let r = c.post("/emails", &body).await;
        assert_eq!((r.status, r.code()), (400, "VALIDATION_ERROR"), "{body}: {}", r.json);
        let fields: Vec<&str> = r.json["error"]["details"].as_array().unwrap().iter().filter_map(|d| d["field"].as_str()).collect();
        assert!(fields.iter().any(|f| f.contains(field)), "{body}: expected {field} in {fields:?}");
    }
    // Nothing was accepted.
    assert_eq!(c.get("/emails").await.json["data"], json!([]));
    // The deployment-wide sender list is gone: senders are sending domains.
    let r = c.patch("/workspaces/current", &json!({"email_senders": ["other.org"]})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("email_senders")), "{}", r.json);
}

#[tokio::test]
async fn sending_domains_belong_to_one_workspace_and_gate_every_send() {
    let h = harness();
    let (a, ws_a) = sender_workspace("domain owner").await;
    let (b, ws_b) = sender_workspace("domain neighbour").await;
    let name = format!("acme-{}.example.test", ws_a.trim_start_matches("ws_").to_ascii_lowercase());

    // Added pending with an id, lower-cased, trailing dot dropped; verified once SES says so.
    let r = a.post("/emails/domains", &json!({"name": format!("{}.", name.to_uppercase())})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let d = r.json["data"].clone();
    assert_eq!(
        (d["name"].as_str(), d["status"].as_str(), d["object"].as_str()),
        (Some(name.as_str()), Some("pending"), Some("email_domain"))
    );
    let id = d["id"].as_str().unwrap().to_string();
    let pending = a.post("/emails", &json!({"from": format!("x@{name}"), "to": ["r@example.org"], "subject": "s", "text": "t"})).await;
    assert_eq!((pending.status, pending.json["error"]["details"][0]["field"].as_str()), (400, Some("from")), "pending is not verified");
    let r = a.get(&format!("/emails/domains/{id}")).await;
    assert_eq!((r.status, r.json["data"]["status"].as_str()), (200, Some("verified")), "{}", r.json);
    assert!(r.json["data"]["verified_at"].is_string());
    let listed = a.get("/emails/domains").await.json["data"].as_array().unwrap().iter().map(|d| d["name"].clone()).collect::<Vec<_>>();
    assert!(listed.contains(&json!(name)), "{listed:?}");

    // The domain and its subdomains send for A; B can neither claim it nor send from it.
    let sub = json!({"from": format!("News <n@mail.{name}>"), "to": ["r@example.org"], "subject": "s", "text": "t", "scheduled_at": e2e::in_hours(24)});
    assert_eq!(a.post("/emails", &sub).await.status, 202);
    let r = b.post("/emails/domains", &json!({"name": name})).await;
    assert_eq!((r.status, r.code(), r.json["error"]["details"][0]["field"].as_str()), (409, "CONFLICT", Some("name")), "{}", r.json);
    let r = b.post("/emails", &json!({"from": format!("x@{name}"), "to": ["r@example.org"], "subject": "s", "text": "t"})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("from")), "{}", r.json);
    assert_eq!(b.get(&format!("/emails/domains/{id}")).await.status, 404);
    assert_eq!(b.delete(&format!("/emails/domains/{id}")).await.status, 404);
    for bad in ["localhost", "10.0.0.1", "a..b.com", "-x.com", "x"] {
        let r = b.post("/emails/domains", &json!({"name": bad})).await;
        assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("name")), "{bad}: {}", r.json);
    }

    // Eight workspaces race for one new name: exactly one gets it.
    let contested = format!("race-{}.example.test", ws_b.trim_start_matches("ws_").to_ascii_lowercase());
    let mut racers = vec![];
    for i in 0..8 {
        let (_, key) = h.workspace(&format!("domain racer {i}")).await;
        racers.push(Client::new(&h.base, &key));
    }
    let body = json!({"name": contested});
    let results = futures_util::future::join_all(racers.iter().map(|c| c.post("/emails/domains", &body))).await;
    let mut statuses: Vec<u16> = results.iter().map(|r| r.status).collect();
    statuses.sort();
    assert_eq!(statuses, vec![201, 409, 409, 409, 409, 409, 409, 409]);

    // A scheduled email whose domain is deleted before its time fails instead of leaving.
    let subject = unique("Orphaned");
    let soon = shared::ids::format_time(chrono::Utc::now() + chrono::Duration::seconds(4));
    let e = send(&a, json!({"from": format!("x@{name}"), "to": ["r@example.org"], "subject": subject, "text": "t", "scheduled_at": soon}))
        .await;
    let r = a.delete(&format!("/emails/domains/{id}")).await;
    assert_eq!((r.status, r.json["data"]["deleted"].as_bool()), (200, Some(true)), "{}", r.json);
    let failed = wait_status(&a, e["id"].as_str().unwrap(), &["failed", "sent"], 30).await;
    assert_eq!((failed["status"].as_str(), failed["error"]["code"].as_str()), (Some("failed"), Some("sender_not_verified")), "{failed}");
    assert!(ses_with_subject(&subject).await.is_empty());
    // Deleted, the name is free again.
    assert_eq!(b.post("/emails/domains", &json!({"name": name})).await.status, 201);
    assert_eq!(a.get(&format!("/emails/domains/{id}")).await.status, 404);
}

#[tokio::test]
async fn batches_are_strict_by_default_and_permissive_on_request() {
    let (c, ws) = sender_workspace("email batches").await;
    let from = from(&ws);
    let subject = unique("Batch");
    let good = |i: usize| json!({"from": from, "to": [format!("b{i}@example.org")], "subject": subject, "text": format!("n{i}")});
    let emails = json!([good(0), {"from": from, "to": ["broken"], "subject": "s", "text": "t"}, good(2), {"to": 5}]);

    let r = c.post("/emails/batch", &json!({"emails": emails})).await;
    assert_eq!((r.status, r.code()), (400, "VALIDATION_ERROR"), "{}", r.json);
    let fields: Vec<&str> = r.json["error"]["details"].as_array().unwrap().iter().filter_map(|d| d["field"].as_str()).collect();
    assert!(fields.contains(&"emails[1].to[0]") && fields.iter().any(|f| f.starts_with("emails[3].")), "{fields:?}");
    assert_eq!(c.get("/emails").await.json["data"], json!([]), "strict: nothing accepted");

    // Permissive lists the sends it cannot send; an entry that is not a send (a wrong type, an
    // unknown field) refuses the request in either mode.
    let r = c.post("/emails/batch", &json!({"emails": emails, "validation": "permissive"})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("emails[1].to[0]")), "{}", r.json);
    assert!(r.json["error"]["details"].as_array().unwrap().iter().any(|d| d["field"] == "emails[3].to"), "{}", r.json);
    let strange = json!([good(0), {"from": from, "to": ["x@example.org"], "subject": "s", "text": "t", "colour": "red"}]);
    let r = c.post("/emails/batch", &json!({"emails": strange, "validation": "permissive"})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("emails[1].colour")), "{}", r.json);
    // A malformed contact id is one of its entry's problems, not the batch's.
    let emails = json!([good(0), {"from": from, "to": ["broken"], "subject": "s", "text": "t"}, good(2),
        {"from": from, "to": ["bad@"], "subject": "s", "text": "t", "contact_id": "ct_nope"}]);
    let r = c.post("/emails/batch", &json!({"emails": emails, "validation": "permissive"})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    let b = &r.json["data"];
    assert!(b["id"].as_str().unwrap().starts_with("eb_"));
    let accepted: Vec<u64> = b["emails"].as_array().unwrap().iter().map(|e| e["index"].as_u64().unwrap()).collect();
    let rejected: Vec<u64> = b["errors"].as_array().unwrap().iter().map(|e| e["index"].as_u64().unwrap()).collect();
    assert_eq!((accepted, rejected), (vec![0, 2], vec![1, 3]));
    assert_eq!(b["errors"][0]["errors"][0]["field"], "to[0]");
    let third: Vec<&str> = b["errors"][1]["errors"].as_array().unwrap().iter().filter_map(|e| e["field"].as_str()).collect();
    assert_eq!(third, ["to[0]", "contact_id"], "{}", b["errors"]);

    let listed = c.get(&format!("/emails?batch_id={}", b["id"].as_str().unwrap())).await;
    let ids: Vec<&str> = listed.json["data"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec![b["emails"][0]["id"].as_str().unwrap(), b["emails"][1]["id"].as_str().unwrap()]);
    for e in &ids {
        wait_status(&c, e, &["sent"], 30).await;
    }
    assert_eq!(ses_with_subject(&subject).await.len(), 2);
    let r = c.post("/emails/batch", &json!({"emails": (0..101).map(good).collect::<Vec<_>>()})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("emails")));
}

#[tokio::test]
async fn send_and_batch_limits_are_independent_of_each_other_and_of_writes() {
    let (c, ws) = sender_workspace("email limits").await;
    let from = from(&ws);
    let subject = unique("Burst");
    let body = json!({"from": from, "to": ["burst@example.org"], "subject": subject, "text": "t"});
    // One burst of 60: the bucket holds 50 and refills 100/min while the burst runs.
    let started = Instant::now();
    let rs = futures_util::future::join_all((0..60).map(|_| c.post("/emails", &body))).await;
    let refill = (started.elapsed().as_secs_f64() * 100.0 / 60.0).ceil() as usize;
    let accepted = rs.iter().filter(|r| r.status == 202).count();
    let limited: Vec<&e2e::Resp> = rs.iter().filter(|r| r.status == 429).collect();
    assert_eq!(accepted + limited.len(), 60, "only 202 or 429");
    assert!((50..=50 + refill).contains(&accepted), "{accepted} accepted, refill {refill}");
    for r in &limited {
        assert_eq!(r.code(), "RATE_LIMITED");
        assert!(r.header("retry-after").is_some_and(|v| v.parse::<u64>().unwrap() >= 1));
    }
    // Other classes still have their own tokens.
    assert_eq!(c.post("/contacts", &json!({"email": "limits@example.org"})).await.status, 201);
    assert_eq!(c.post("/emails/batch", &json!({"emails": [body]})).await.status, 202);
}

#[tokio::test]
async fn a_scheduled_email_waits_for_its_time_and_can_be_cancelled() {
    let (c, ws) = sender_workspace("scheduled email").await;
    let from = from(&ws);
    let subject = unique("Later");
    let at = chrono::Utc::now() + chrono::Duration::seconds(5);
    let e = send(
        &c,
        json!({"from": from, "to": ["later@example.org"], "subject": subject, "text": "t",
        "scheduled_at": shared::ids::format_time(at)}),
    )
    .await;
    assert_eq!(e["status"], "scheduled");
    let id = e["id"].as_str().unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(c.get(&format!("/emails/{id}")).await.json["data"]["status"], "scheduled");
    assert!(ses_with_subject(&subject).await.is_empty(), "not before its time");
    let sent = wait_status(&c, id, &["sent"], 30).await;
    let sent_at = chrono::DateTime::parse_from_rfc3339(sent["timestamps"]["sent"].as_str().unwrap()).unwrap();
    assert!(sent_at >= at - chrono::Duration::seconds(1), "sent at {sent_at}, due {at}");
    assert_eq!(ses_with_subject(&subject).await.len(), 1);
    assert_eq!(c.post(&format!("/emails/{id}/cancel"), &json!({})).await.status, 409, "sent emails cannot be cancelled");

    // Cancel one scheduled days ahead: it never leaves, and cancelling again is a conflict.
    let later = send(
        &c,
        json!({"from": from, "to": ["later@example.org"], "subject": format!("{subject} 2"), "text": "t",
        "scheduled_at": e2e::in_hours(48)}),
    )
    .await;
    let r = c.post(&format!("/emails/{}/cancel", later["id"].as_str().unwrap()), &json!({})).await;
    assert_eq!((r.status, r.json["data"]["status"].as_str()), (200, Some("cancelled")), "{}", r.json);
    assert!(r.json["data"]["timestamps"]["cancelled"].is_string());
    assert_eq!(c.post(&format!("/emails/{}/cancel", later["id"].as_str().unwrap()), &json!({})).await.status, 409);
    assert_eq!(c.get("/emails?status=cancelled").await.json["data"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn an_email_whose_queue_message_was_lost_is_sent_by_the_tick() {
    let h = harness();
    let (c, ws) = sender_workspace("lost message").await;
    let from = from(&ws);
    // Same workspace through the gateway whose SQS endpoint is unreachable.
    let noqueue = Client::new(&h.base_noqueue, c.auth.as_deref().unwrap());
    let subject = unique("Lost");
    let e = send(&noqueue, json!({"from": from, "to": ["lost@example.org"], "subject": subject, "text": "t"})).await;
    assert_eq!(e["status"], "queued");
    wait_status(&c, e["id"].as_str().unwrap(), &["sent"], 30).await;
    assert_eq!(ses_with_subject(&subject).await.len(), 1);
}

#[tokio::test]
async fn duplicate_queue_messages_send_an_email_once() {
    let h = harness();
    let (c, ws) = sender_workspace("duplicate messages").await;
    let from = from(&ws);
    let subject = unique("Once");
    let e = send(&c, json!({"from": from, "to": ["once@example.org"], "subject": subject, "text": "t"})).await;
    let id = e["id"].as_str().unwrap().to_string();
    // Three more copies of the job race the one the worker received, as SQS may deliver them.
    let sender = h.sender().await;
    let job = serde_json::to_string(&domain::emails::SendJob {
        workspace_id: shared::auth::WorkspaceId::trusted(ws.clone()),
        email_ids: vec![domain::ids::EmailId::trusted(id.as_str())],
    })
    .unwrap();
    let records: Vec<shared::sqs::SqsMessage> =
        (0..3).map(|i| shared::sqs::message(&format!("dup-{i}"), &format!("r{i}"), &job.clone())).collect();
    let copies = (0..3).map(|i| sender.handle_sqs(shared::sqs::event(vec![records[i].clone()])));
    for resp in futures_util::future::join_all(copies).await {
        assert!(resp.batch_item_failures.is_empty(), "{resp:?}");
    }
    let sent = wait_status(&c, &id, &["sent"], 30).await;
    // And one more after it was sent.
    sender.handle_sqs(shared::sqs::event(vec![records[0].clone()])).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let msgs = ses_with_subject(&subject).await;
    assert_eq!(msgs.len(), 1, "sent exactly once: {msgs:?}");
    assert_eq!(msgs[0]["id"], sent["provider_message_id"]);
    assert_eq!(c.get(&format!("/emails/{id}")).await.json["data"]["attempts"], 1);
}

#[tokio::test]
async fn unsubscribed_bounced_and_complained_contacts_are_suppressed() {
    let (c, ws) = sender_workspace("suppression").await;
    let from = from(&ws);
    let unsub = c.post("/contacts", &json!({"email": "unsub@example.org", "email_status": "unsubscribed"})).await;
    assert_eq!(unsub.status, 201, "{}", unsub.json);
    let contact_id = unsub.json["data"]["id"].as_str().unwrap();
    let subject = unique("Newsletter");
    let e = send(&c, json!({"from": from, "to": ["unsub@example.org"], "subject": subject, "text": "t", "contact_id": contact_id})).await;
    assert_eq!(e["status"], "suppressed", "{e}");
    assert_eq!(e["suppressed_recipients"][0]["reason"], "unsubscribed");
    // With another, reachable recipient only the unsubscribed one is left out.
    let both =
        send(&c, json!({"from": from, "to": ["unsub@example.org", "ok@example.org"], "subject": format!("{subject} both"), "text": "t"}))
            .await;
    assert_eq!(both["status"], "queued");
    let both = wait_status(&c, both["id"].as_str().unwrap(), &["sent"], 30).await;
    assert_eq!(ses_with_subject(both["subject"].as_str().unwrap()).await[0]["destinations"]["ToAddresses"], json!(["ok@example.org"]));
    // Transactional mail still reaches unsubscribed contacts.
    let receipt = send(
        &c,
        json!({"from": from, "to": ["unsub@example.org"], "subject": format!("{subject} receipt"), "text": "t",
        "transactional": true, "contact_id": contact_id}),
    )
    .await;
    assert_eq!(receipt["status"], "queued");
    wait_status(&c, receipt["id"].as_str().unwrap(), &["sent"], 30).await;
    assert!(ses_with_subject(&subject).await.is_empty(), "the suppressed email never left");

    // The contact's timeline and the contact filter show both.
    let acts = c.get(&format!("/contacts/{contact_id}/activities")).await;
    let kinds: Vec<&str> = acts.json["data"].as_array().unwrap().iter().filter_map(|a| a["type"].as_str()).collect();
    assert!(kinds.contains(&"email.suppressed") && kinds.contains(&"email.sent"), "{kinds:?}");
    let mine = c.get(&format!("/emails?contact_id={contact_id}")).await;
    assert_eq!(mine.json["data"].as_array().unwrap().len(), 2, "{}", mine.json);

    // Bounced addresses are suppressed even for transactional mail.
    c.post("/contacts", &json!({"email": "gone@example.org", "email_status": "bounced"})).await;
    let e = send(&c, json!({"from": from, "to": ["gone@example.org"], "subject": "s", "text": "t", "transactional": true})).await;
    assert_eq!((e["status"].as_str(), e["suppressed_recipients"][0]["reason"].as_str()), (Some("suppressed"), Some("bounced")));
}

/// SES's notification as SNS delivers it to SQS.
fn sns_envelope(notification: Value) -> String {
    json!({"Type": "Notification", "MessageId": "sns-1", "TopicArn": "arn:aws:sns:us-east-1:123456789012:ses-feedback",
        "Message": notification.to_string(), "Timestamp": "2026-11-22T10:00:00.000Z"})
    .to_string()
}

#[tokio::test]
async fn delivery_bounce_and_complaint_notifications_move_emails_and_contacts() {
    let h = harness();
    let (c, ws) = sender_workspace("feedback").await;
    let from = from(&ws);
    let sqs = h.sqs().await;
    let notify = |body: String| {
        let sqs = sqs.clone();
        async move { sqs.send_message().queue_url(&h.resources.email_feedback_queue_url).message_body(body).send().await.unwrap() }
    };
    let bouncer = c.post("/contacts", &json!({"email": "bouncer@example.org"})).await.json["data"].clone();
    let complainer = c.post("/contacts", &json!({"email": "complainer@example.org"})).await.json["data"].clone();

    let e = send(&c, json!({"from": from, "to": ["bouncer@example.org"], "subject": unique("Bounce"), "text": "t"})).await;
    let e = wait_status(&c, e["id"].as_str().unwrap(), &["sent"], 30).await;
    let mid = e["provider_message_id"].as_str().unwrap();
    notify(sns_envelope(
        json!({"notificationType": "Delivery", "mail": {"messageId": mid}, "delivery": {"timestamp": "2026-11-22T10:00:01.000Z"}}),
    ))
    .await;
    let e = wait_status(&c, e["id"].as_str().unwrap(), &["delivered"], 30).await;
    assert_eq!(e["timestamps"]["delivered"], "2026-11-22T10:00:01Z");
    notify(sns_envelope(json!({"notificationType": "Bounce", "mail": {"messageId": mid},
        "bounce": {"bounceType": "Permanent", "bounceSubType": "General", "timestamp": "2026-11-22T10:00:02.000Z",
            "bouncedRecipients": [{"emailAddress": "Bouncer@example.org", "diagnosticCode": "smtp; 550 5.1.1 user unknown"}]}})))
    .await;
    let e = wait_status(&c, e["id"].as_str().unwrap(), &["bounced"], 30).await;
    assert_eq!(e["feedback"]["diagnostic"], "smtp; 550 5.1.1 user unknown");
    assert_eq!(e["feedback"]["type"], "Permanent");
    let deadline = Instant::now() + Duration::from_secs(15);
    while c.get(&format!("/contacts/{}", bouncer["id"].as_str().unwrap())).await.json["data"]["email_status"] != "bounced" {
        assert!(Instant::now() < deadline, "the contact was not marked bounced");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A late delivery notification does not move it back.
    notify(sns_envelope(json!({"notificationType": "Delivery", "mail": {"messageId": mid}}))).await;
    // And the next email to that address is suppressed.
    let next = send(&c, json!({"from": from, "to": ["bouncer@example.org"], "subject": "again", "text": "t"})).await;
    assert_eq!(next["status"], "suppressed");

    // Complaints arrive the same way (configuration-set event publishing, raw delivery shape).
    let e2 = send(&c, json!({"from": from, "to": ["complainer@example.org"], "subject": unique("Complaint"), "text": "t"})).await;
    let e2 = wait_status(&c, e2["id"].as_str().unwrap(), &["sent"], 30).await;
    notify(
        json!({"eventType": "Complaint", "mail": {"messageId": e2["provider_message_id"], "tags": {"email_id": [e2["id"]]}},
        "complaint": {"complaintFeedbackType": "abuse", "complainedRecipients": [{"emailAddress": "complainer@example.org"}]}})
        .to_string(),
    )
    .await;
    wait_status(&c, e2["id"].as_str().unwrap(), &["complained"], 30).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    while c.get(&format!("/contacts/{}", complainer["id"].as_str().unwrap())).await.json["data"]["email_status"] != "complained" {
        assert!(Instant::now() < deadline, "the contact was not marked complained");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(c.get(&format!("/emails/{}", e["id"].as_str().unwrap())).await.json["data"]["status"], "bounced", "still bounced");
}

#[tokio::test]
async fn emails_and_templates_of_another_workspace_are_404() {
    let (a, ws_a) = sender_workspace("email owner").await;
    let (b, ws_b) = sender_workspace("email intruder").await;
    let (from_a, from_b) = (from(&ws_a), from(&ws_b));
    assert_eq!(a.post("/emails/templates", &json!({"slug": "private", "subject": "s", "text": "t"})).await.status, 201);
    let e =
        send(&a, json!({"from": from_a, "to": ["x@example.org"], "subject": "s", "text": "t", "scheduled_at": e2e::in_hours(24)})).await;
    let id = e["id"].as_str().unwrap();
    assert_eq!(b.get(&format!("/emails/{id}")).await.status, 404);
    assert_eq!(b.post(&format!("/emails/{id}/cancel"), &json!({})).await.status, 404);
    assert_eq!(b.get("/emails/templates/private").await.status, 404);
    assert_eq!(b.get("/emails").await.json["data"], json!([]));
    let r = b.post("/emails", &json!({"from": from_b, "to": ["x@example.org"], "template_slug": "private"})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("template_slug")));
    assert_eq!(b.get("/emails/em_garbage").await.status, 404);
    assert_eq!(a.get(&format!("/emails/{id}")).await.json["data"]["status"], "scheduled");
}

/// A small template repeating a large variable (`{{a}}` x 50,000 with 60 KB: 3 GB rendered)
/// is refused quickly with the part named, instead of rendering until the function dies.
#[tokio::test]
async fn a_template_that_would_render_gigabytes_is_refused_naming_the_part() {
    let (c, ws) = sender_workspace("template bomb").await;
    let from = from(&ws);
    let r = c.post("/emails/templates", &json!({"slug": "bomb", "subject": "Hi", "html": "{{a}}".repeat(50_000)})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let started = Instant::now();
    let r = c
        .post("/emails", &json!({"from": from, "to": ["a@example.org"], "template_slug": "bomb", "variables": {"a": "x".repeat(60_000)}}))
        .await;
    assert_eq!((r.status, r.code()), (400, "VALIDATION_ERROR"), "{}", r.json);
    assert_eq!(r.json["error"]["details"][0]["field"], "html", "{}", r.json);
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
}

/// A completed write whose response is too large to keep for replay (a 340 KB template) still
/// marks its Idempotency-Key done: the retry gets a clear 409, never a second execution. And
/// `POST /emails` answers without the bodies, so its response is always kept.
#[tokio::test]
async fn an_idempotent_write_runs_once_even_when_its_response_cannot_be_kept() {
    let (c, ws) = sender_workspace("large idempotent").await;
    let from = from(&ws);
    let body = json!({"slug": "large", "subject": "Hi", "html": "h".repeat(240_000), "text": "t".repeat(100_000)});
    let send = || c.send(c.request("POST", "/emails/templates").header("idempotency-key", "tpl-1").json(&body));
    let first = send().await;
    assert_eq!(first.status, 201, "{}", first.json);
    let again = send().await;
    assert_eq!((again.status, again.code()), (409, "CONFLICT"), "{}", again.json);
    assert!(again.json["error"]["message"].as_str().unwrap().contains("could not be kept"), "{}", again.json);

    let email = json!({"from": from, "to": ["a@example.org"], "subject": unique("kept"), "html": "<p>".repeat(1000)});
    let post = || c.send(c.request("POST", "/emails").header("idempotency-key", "em-1").json(&email));
    let r = post().await;
    assert_eq!(r.status, 202, "{}", r.json);
    assert!(r.json["data"].get("html").is_none(), "bodies are left out: {}", r.json);
    let replay = post().await;
    assert_eq!((replay.status, replay.header("idempotent-replayed")), (202, Some("true")));
    assert_eq!(replay.json["data"]["id"], r.json["data"]["id"]);
}

/// The suppression list holds every bounced or complaining address, contact or not: sends to
/// it are suppressed (transactional ones too), deleting and recreating a contact does not lift
/// it, PATCH cannot lower a bounced contact, and only an admin removes it, with a reason.
#[tokio::test]
async fn the_suppression_list_holds_until_an_admin_removes_an_address() {
    let h = harness();
    let (c, ws) = sender_workspace("suppression list").await;
    let from = from(&ws);
    let sqs = h.sqs().await;
    let contact = c.post("/contacts", &json!({"email": "known@example.org"})).await.json["data"].clone();
    let e = send(&c, json!({"from": from, "to": ["stranger@example.org", "known@example.org"], "subject": unique("S"), "text": "t"})).await;
    let e = wait_status(&c, e["id"].as_str().unwrap(), &["sent"], 30).await;
    let note = json!({"notificationType": "Bounce", "mail": {"messageId": e["provider_message_id"]},
        "bounce": {"bounceType": "Permanent", "bouncedRecipients": [{"emailAddress": "Stranger@example.org"}, {"emailAddress": "known@example.org"}]}});
    sqs.send_message().queue_url(&h.resources.email_feedback_queue_url).message_body(sns_envelope(note)).send().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let listed = loop {
        let l = c.get("/emails/suppressions").await.json["data"].clone();
        if l.as_array().unwrap().len() == 2 || Instant::now() > deadline {
            break l;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(listed[0]["address"], "known@example.org", "{listed}");
    assert_eq!((listed[1]["address"].as_str(), listed[1]["reason"].as_str()), (Some("stranger@example.org"), Some("bounced")));

    // A transactional send to the stranger (no contact) is suppressed.
    let t = send(&c, json!({"from": from, "to": ["stranger@example.org"], "subject": "t", "text": "t", "transactional": true})).await;
    assert_eq!((t["status"].as_str(), t["suppressed_recipients"][0]["contact_id"].as_str()), (Some("suppressed"), None));
    // The bounced contact cannot be PATCHed back; deleting and recreating it does not help.
    let id = contact["id"].as_str().unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while c.get(&format!("/contacts/{id}")).await.json["data"]["email_status"] != "bounced" && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let r = c.patch(&format!("/contacts/{id}"), &json!({"email_status": "subscribed"})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("email_status")), "{}", r.json);
    assert_eq!(c.delete(&format!("/contacts/{id}")).await.status, 200);
    assert_eq!(c.post("/contacts", &json!({"email": "known@example.org"})).await.status, 201);
    let again = send(&c, json!({"from": from, "to": ["known@example.org"], "subject": "again", "text": "t"})).await;
    assert_eq!(again["status"], "suppressed");

    // Removal: admins only, with a reason; then the address receives mail again.
    let r = c.send(c.request("DELETE", "/emails/suppressions/stranger@example.org").json(&json!({}))).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("reason")), "{}", r.json);
    let member = format!("member-{}", shared::ids::new_id("u"));
    let ws = c.get("/workspaces/current").await.json["data"]["id"].as_str().unwrap().to_string();
    domain::workspaces::add_member(&h.app().await, &shared::auth::WorkspaceId::trusted(ws.clone()), &member, "member").await.unwrap();
    let mut m = Client::new(&h.base, &tools::admin::mint_token(&member, "read write admin", 600).unwrap());
    m.workspace = Some(ws);
    let why = json!({"reason": "the customer fixed their mailbox"});
    assert_eq!(m.send(m.request("DELETE", "/emails/suppressions/stranger@example.org").json(&why)).await.status, 403);
    let r = c.send(c.request("DELETE", "/emails/suppressions/Stranger@example.org").json(&why)).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let ok = send(&c, json!({"from": from, "to": ["stranger@example.org"], "subject": "welcome back", "text": "t"})).await;
    assert_eq!(ok["status"], "queued");
}

/// Move a name's claim expiry into the past (three days pass).
async fn expire_claim(name: &str) {
    let app = harness().app().await;
    app.db
        .update(domain::keys::SENDING_DOMAIN_CLAIM.pk(name), domain::keys::SENDING_DOMAIN_CLAIM.table.sk, "SET pending_until = :past")
        .value(":past", shared::store::n(chrono::Utc::now().timestamp() - 1))
        .required()
        .await
        .unwrap();
}

/// Two sender workspaces on a gateway whose SES is as AWS documents it (moto overwrites an
/// existing identity instead of refusing, and verifies every identity at once): through a
/// proxy in front of moto, kept alive by the caller. Answers the second one's workspace id.
async fn behind_ses_proxy(a_name: &str, b_name: &str) -> (e2e::ses_proxy::SesProxy, Client, Client, String) {
    let h = harness();
    let proxy = e2e::ses_proxy::SesProxy::start(&h.moto_endpoint).await;
    let base = h.gateway_via(&proxy.url).await;
    let (a0, _) = sender_workspace(a_name).await;
    let (b0, ws_b) = sender_workspace(b_name).await;
    let a = Client::new(&base, a0.auth.as_deref().unwrap()).during_outage();
    let b = Client::new(&base, b0.auth.as_deref().unwrap()).during_outage();
    (proxy, a, b, ws_b)
}

#[tokio::test]
async fn unproved_claims_expire_subdomains_of_verified_domains_are_refused_and_a_lost_create_is_taken_over() {
    let h = harness();
    let app = h.app().await;
    let (proxy, a, b, ws_b) = behind_ses_proxy("claim squatter", "claim owner").await;
    let u = ulid::Ulid::generate().to_string().to_lowercase();
    let name = format!("squat-{u}.example.test");

    // A claims a name and never proves it; B is refused while the claim holds.
    proxy.hold_pending(&name, true);
    let r = a.post("/emails/domains", &json!({"name": name})).await;
    assert_eq!((r.status, r.json["data"]["status"].as_str()), (201, Some("pending")), "{}", r.json);
    let a_dom = r.json["data"]["id"].as_str().unwrap().to_string();
    assert_eq!(a.get(&format!("/emails/domains/{a_dom}")).await.json["data"]["status"], "pending");
    assert_eq!(b.post("/emails/domains", &json!({"name": name})).await.status, 409);
    // Three days pass: the unproved claim blocks no one, and B gets a new identity of its own.
    expire_claim(&name).await;
    let r = b.post("/emails/domains", &json!({"name": name})).await;
    assert_eq!(r.status, 201, "an expired claim blocks no one: {}", r.json);
    let b_dom = r.json["data"]["id"].as_str().unwrap().to_string();
    let identity = domain::emails::domains::get_identity(&app, &name).await.unwrap();
    assert!(identity.tags.iter().any(|(k, v)| k == shared::aws::WORKSPACE_TAG_KEY && *v == ws_b), "{identity:?}");
    proxy.hold_pending(&name, false);
    assert_eq!(b.get(&format!("/emails/domains/{b_dom}")).await.json["data"]["status"], "verified");
    assert_eq!(a.get(&format!("/emails/domains/{a_dom}")).await.json["data"]["status"], "failed", "A lost it");
    // A's deletion leaves B's identity and claim alone; a verified claim never expires.
    assert_eq!(a.delete(&format!("/emails/domains/{a_dom}")).await.status, 200);
    assert_eq!(b.get(&format!("/emails/domains/{b_dom}")).await.json["data"]["status"], "verified");
    let mail = b.post("/emails", &json!({"from": format!("x@{name}"), "to": ["r@example.org"], "subject": "s", "text": "t"})).await;
    assert_eq!(mail.status, 202, "{}", mail.json);
    expire_claim(&name).await;
    assert_eq!(a.post("/emails/domains", &json!({"name": name})).await.status, 409);

    // A claim whose domain SES verified (nobody has read it since, so its flag is still
    // unset) is not taken when it "expires": SES is asked.
    let held = format!("held-{u}.example.test");
    assert_eq!(a.post("/emails/domains", &json!({"name": held})).await.status, 201);
    expire_claim(&held).await;
    let r = b.post("/emails/domains", &json!({"name": held})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (409, Some("name")), "{}", r.json);

    // Under B's verified domain, another workspace gets no subdomain; B does.
    let r = a.post("/emails/domains", &json!({"name": format!("help.{name}")})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (409, Some("name")), "{}", r.json);
    assert_eq!(b.post("/emails/domains", &json!({"name": format!("help.{name}")})).await.status, 201);

    // A create whose answer is lost is retried, SES says the identity exists, and the API
    // recognises its own by its tag and takes it over instead of refusing a name nobody
    // manages. (The SES client retries the lost call itself.)
    let lost = format!("lost-{u}.example.test");
    proxy.drop_next_create();
    let r = b.post("/emails/domains", &json!({"name": lost})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert!(proxy.dropped() && proxy.refused.load(std::sync::atomic::Ordering::SeqCst) >= 1, "the answer was lost, the retry refused");
    let id = r.json["data"]["id"].as_str().unwrap();
    assert_eq!(b.get(&format!("/emails/domains/{id}")).await.json["data"]["status"], "verified");
    // One made outside the API (without the API's tag) is still not handed to anyone.
    let foreign = format!("foreign-{u}.example.test");
    domain::emails::domains::create_identity(&app, &foreign, &[]).await.unwrap();
    let r = b.post("/emails/domains", &json!({"name": foreign})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (409, Some("name")), "{}", r.json);
}

/// An email whose SES answer was cut ends `failed` / `outcome_unknown` (it is never sent twice).
/// When SES's notification about it comes (it had the email after all), the tags it was sent
/// with find it: it moves to what the notification says, its recipient is suppressed and their
/// contact marked, and SES's id finds it from then on.
#[tokio::test]
async fn feedback_for_an_email_whose_send_went_unrecorded_still_reaches_it() {
    let h = harness();
    // A queue of this test's own: no stack worker sends the email before the faulty sender.
    let queue = h.own_queue("unknown").await;
    let mut cfg = h.config.clone();
    cfg.emails_queue_url = queue;
    let (ws, key) = h.workspace("feedback unknown").await;
    let c = Client::new(&h.gateway_with(cfg.clone()).await, &key);
    e2e::verified_domain(&c, &ws).await;
    let contact = c.post("/contacts", &json!({"email": "lost-answer@example.org"})).await.json["data"].clone();
    let e = send(&c, json!({"from": from(&ws), "to": ["lost-answer@example.org"], "subject": unique("Unknown"), "text": "t"})).await;
    let id = e["id"].as_str().unwrap();

    let proxy = e2e::faults::FaultProxy::start(&h.moto_endpoint).await;
    proxy.set(e2e::faults::Fault::Cut, Some("ses"));
    let sdk = tools::admin::local_sdk_config(&proxy.url).await;
    let app = shared::App::with_dynamodb_endpoint(cfg, &sdk, Some(&h.dynamodb_endpoint)).unwrap();
    let sender = domain::sending::Sender::new(app);
    let _ =
        domain::sending::send::send_one(&sender, &shared::auth::WorkspaceId::trusted(ws.clone()), &domain::ids::EmailId::trusted(id)).await;
    assert!(proxy.clear() > 0, "SES was called");
    let failed = c.get(&format!("/emails/{id}")).await.json["data"].clone();
    assert_eq!((failed["status"].as_str(), failed["error"]["code"].as_str()), (Some("failed"), Some("outcome_unknown")), "{failed}");

    let mid = format!("0100019{}", ulid::Ulid::generate().to_string().to_lowercase());
    let bounce = json!({"eventType": "Bounce", "mail": {"messageId": mid, "tags": {"email_id": [id], "workspace_id": [ws]}},
        "bounce": {"bounceType": "Permanent", "bounceSubType": "General", "timestamp": "2026-11-22T10:00:02.000Z",
            "bouncedRecipients": [{"emailAddress": "lost-answer@example.org", "diagnosticCode": "smtp; 550 5.1.1 user unknown"}]}});
    let n = domain::sending::feedback::parse(&sns_envelope(bounce.clone())).expect("a notification");
    domain::sending::feedback::apply(&h.sender().await, &n).await.expect("applied");
    let e = c.get(&format!("/emails/{id}")).await.json["data"].clone();
    assert_eq!((e["status"].as_str(), e["provider_message_id"].as_str()), (Some("bounced"), Some(mid.as_str())), "{e}");
    assert!(e["error"].is_null(), "{e}");
    let ct = c.get(&format!("/contacts/{}", contact["id"].as_str().unwrap())).await.json["data"].clone();
    assert_eq!(ct["email_status"], "bounced", "{ct}");
    let next = send(&c, json!({"from": from(&ws), "to": ["lost-answer@example.org"], "subject": "again", "text": "t"})).await;
    assert_eq!(next["status"], "suppressed", "{next}");

    // From now on SES's id alone finds it (the look-up was written).
    let complaint = json!({"notificationType": "Complaint", "mail": {"messageId": mid},
        "complaint": {"complaintFeedbackType": "abuse", "complainedRecipients": [{"emailAddress": "lost-answer@example.org"}]}});
    let n = domain::sending::feedback::parse(&sns_envelope(complaint)).expect("a notification");
    domain::sending::feedback::apply(&h.sender().await, &n).await.expect("applied");
    assert_eq!(c.get(&format!("/emails/{id}")).await.json["data"]["status"], "complained");
    let reason = || async {
        let list = c.get("/emails/suppressions?limit=100").await.json["data"].clone();
        list.as_array().unwrap().iter().find(|s| s["address"] == "lost-answer@example.org").map(|s| s["reason"].clone())
    };
    assert_eq!(reason().await, Some(json!("complained")));
    // A late copy of the bounce leaves the complaint as it is: a complaint is never downgraded.
    let n = domain::sending::feedback::parse(&sns_envelope(bounce)).expect("a notification");
    domain::sending::feedback::apply(&h.sender().await, &n).await.expect("applied");
    assert_eq!(reason().await, Some(json!("complained")));
}

/// A verified domain owns its subdomains, whoever claimed one first: inbound mail to a
/// subdomain goes to the parent's workspace (another workspace's pending claim no longer
/// black-holes it), that workspace's claim reads `failed` even when SES counts it verified
/// through the parent, and no other workspace can claim a subdomain, even before the parent's
/// flag is set. An unproved claim carries the table's TTL; a verified one does not.
#[tokio::test]
async fn a_verified_domain_owns_its_subdomains_for_routing_and_claiming() {
    let h = harness();
    let app = h.app().await;
    let (proxy, a, b, _) = behind_ses_proxy("parent owner", "subdomain squatter").await;
    let u = ulid::Ulid::generate().to_string().to_lowercase();
    let name = format!("acme-{u}.example.test");
    let sub = format!("help.{name}");
    let claim = async |n: &str| {
        app.db.get(&domain::keys::SENDING_DOMAIN_CLAIM.pk(n), domain::keys::SENDING_DOMAIN_CLAIM.table.sk).await.unwrap().unwrap()
    };

    // B claims the subdomain first and cannot prove it (SES holds it pending).
    proxy.hold_pending(&sub, true);
    let r = b.post("/emails/domains", &json!({"name": sub})).await;
    assert_eq!((r.status, r.json["data"]["status"].as_str()), (201, Some("pending")), "{}", r.json);
    let b_dom = r.json["data"]["id"].as_str().unwrap().to_string();
    let pending = claim(&sub).await;
    assert_eq!(shared::store::get_i64(&pending, "expires_at"), shared::store::get_i64(&pending, "pending_until"), "{pending:?}");
    assert!(shared::store::get_i64(&pending, "expires_at").is_some());

    // A claims and verifies the parent; its claim never expires.
    let r = a.post("/emails/domains", &json!({"name": name})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let r = a.get(&format!("/emails/domains/{}", r.json["data"]["id"].as_str().unwrap())).await;
    assert_eq!(r.json["data"]["status"], "verified", "{}", r.json);
    assert!(shared::store::get_i64(&claim(&name).await, "expires_at").is_none());

    // Mail to the subdomain reaches A, not B's pending claim.
    let raw = format!(
        "From: Kari <kari-{u}@example.org>\r\nTo: support@{sub}\r\nSubject: Help please {u}\r\nMessage-ID: <{u}@mail.example.org>\r\n\r\nhello\r\n"
    );
    let body = tools::admin::store_inbound(app.s3(), &h.resources.mail_bucket, raw.as_bytes(), &[format!("support@{sub}")], "PASS", "PASS")
        .await
        .unwrap();
    domain::helpdesk::mail::handle(&app, &domain::helpdesk::mail::receipt(&body).unwrap()).await.unwrap();
    let theirs = a.get("/helpdesk/conversations?limit=50").await.json["data"].clone();
    let conv = theirs.as_array().unwrap().iter().find(|c| c["subject"] == format!("Help please {u}")).expect("routed to A");
    assert_eq!(conv["mailbox"].as_str(), Some(format!("support@{sub}").as_str()));
    assert_eq!(b.get("/helpdesk/conversations?limit=50").await.json["data"].as_array().unwrap().len(), 0);

    // SES may count B's subdomain verified through the parent: it is A's all the same.
    proxy.hold_pending(&sub, false);
    let r = b.get(&format!("/emails/domains/{b_dom}")).await;
    assert_eq!(r.json["data"]["status"], "failed", "{}", r.json);
    let r = b.post("/emails", &json!({"from": format!("x@{sub}"), "to": ["r@example.org"], "subject": "s", "text": "t"})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("from")), "{}", r.json);
    let r = b.post("/emails/domains", &json!({"name": format!("news.{name}")})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (409, Some("name")), "{}", r.json);

    // A parent SES verified whose flag nobody set yet (never read since) still owns its subdomains.
    let quiet = format!("quiet-{u}.example.test");
    assert_eq!(a.post("/emails/domains", &json!({"name": quiet})).await.json["data"]["status"], "pending");
    assert_eq!(claim(&quiet).await.get("verified"), Some(&aws_sdk_dynamodb::types::AttributeValue::Bool(false)));
    let r = b.post("/emails/domains", &json!({"name": format!("help.{quiet}")})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (409, Some("name")), "{}", r.json);
    assert_eq!(claim(&quiet).await.get("verified"), Some(&aws_sdk_dynamodb::types::AttributeValue::Bool(true)), "SES was asked");
}

/// A batch whose writes fail part-way (a transaction of emails after the first one) is completed by
/// the client's retry with the same Idempotency-Key: the same batch and email ids, each email
/// once, nothing else; a third call replays the answer.
#[tokio::test]
async fn a_batch_that_fails_part_way_is_completed_by_its_retry_and_nothing_else() {
    let h = harness();
    let (c0, ws) = sender_workspace("batch resume").await;
    let ddb = e2e::faults::FaultProxy::start(&h.dynamodb_endpoint).await;
    let mut cfg = h.generous_config();
    cfg.timeouts = shared::config::Timeouts::default();
    let sdk = tools::admin::local_sdk_config(&h.moto_endpoint).await;
    let app = shared::App::with_dynamodb_endpoint(cfg, &sdk, Some(&ddb.url)).expect("app");
    let (addr, _task) = tools::gateway::start(std::sync::Arc::new(app), 0).await.expect("gateway");
    let c = Client::new(&format!("http://{addr}{}", tools::gateway::BASE_PATH), c0.auth.as_deref().unwrap()).during_outage();
    let from = from(&ws);
    let tag = unique("resume");
    let emails: Vec<Value> = (0..40)
        .map(|i| json!({"from": from, "to": [format!("r{i}@example.org")], "subject": format!("{tag} {i}"), "text": "t", "scheduled_at": e2e::in_hours(2)}))
        .collect();
    let body = json!({"emails": emails});
    let post = || c.send(c.request("POST", "/emails/batch").header("idempotency-key", "batch-resume-1").json(&body));

    // The second transaction of emails fails (the SDK's retries too): the batch is half written.
    ddb.set_after(e2e::faults::Fault::ServerError, Some("dynamodb"), &["TransactWriteItems"], 1);
    let first = post().await;
    ddb.clear();
    assert!(first.status >= 500, "{} {}", first.status, first.json);
    let ours = || async {
        let mut all = e2e::load::all(&c0, "/emails").await;
        all.retain(|e| e["subject"].as_str().is_some_and(|s| s.starts_with(&tag)));
        all
    };
    let partial = ours().await;
    assert!(!partial.is_empty() && partial.len() < 40, "part of the batch was written: {}", partial.len());

    let second = post().await;
    assert_eq!(second.status, 202, "the retry completes it: {}", second.json);
    let answered: Vec<String> =
        second.json["data"]["emails"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(answered.len(), 40);
    let all = ours().await;
    assert_eq!(all.len(), 40, "each email once, nothing else");
    let mut ids: Vec<String> = all.iter().map(|e| e["id"].as_str().unwrap().to_string()).collect();
    ids.sort();
    let mut expected = answered.clone();
    expected.sort();
    assert_eq!(ids, expected, "the retry named the same emails");
    for p in &partial {
        assert!(answered.contains(&p["id"].as_str().unwrap().to_string()), "an email of the first run is the batch's");
    }
    assert!(all.iter().all(|e| e["batch_id"] == second.json["data"]["id"]), "one batch");
    let third = post().await;
    assert_eq!((third.status, third.header("idempotent-replayed")), (202, Some("true")));
    assert_eq!(third.json["data"]["id"], second.json["data"]["id"]);
}

/// The `List-Unsubscribe` link of an email as it left (moto's record of the raw message):
/// waits for the sender. Readers of the email see a placeholder, never the link.
async fn unsubscribe_link(c: &Client, e: &Value) -> String {
    assert_eq!(e["headers"]["List-Unsubscribe"], "<[[secret:list_unsubscribe]]>", "{e}");
    let sent = wait_status(c, e["id"].as_str().unwrap(), &["sent"], 30).await;
    let m = harness().ses_sent().await.into_iter().find(|m| m["id"] == sent["provider_message_id"]).expect("in moto's record");
    assert_eq!(m["headers"]["List-Unsubscribe-Post"], "List-Unsubscribe=One-Click", "{m}");
    let link = m["headers"]["List-Unsubscribe"].as_str().unwrap().trim_start_matches('<').trim_end_matches('>').to_string();
    assert!(!m["raw"].as_str().unwrap().contains("[[secret:"), "{m}");
    link
}

/// A POST as a mail provider makes it (RFC 8058): no cookie, no credential, the one-click
/// body; `form` instead for the page's buttons.
async fn post_link(link: &str, body: &str) -> (u16, String, bool) {
    let r = reqwest::Client::new()
        .post(link)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("user-agent", "Mail-Provider/1.0")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let cookie = r.headers().contains_key("set-cookie");
    (r.status().as_u16(), r.text().await.unwrap(), cookie)
}

async fn ledger(c: &Client, address: &str) -> Vec<Value> {
    let r = c.get(&format!("/gdpr/consents?email={address}")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    r.json["data"]["history"].as_array().unwrap().clone()
}

#[tokio::test]
async fn marketing_mail_has_a_one_click_unsubscribe_that_stops_marketing_only() {
    let (c, ws) = sender_workspace("one-click unsubscribe").await;
    let from = from(&ws);
    let rx = e2e::receiver::Receiver::start().await;
    let r = c.post("/webhooks", &json!({"url": rx.url, "event_types": ["contact.unsubscribed"]})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let who = format!("uma-{}@example.org", ulid::Ulid::generate().to_string().to_lowercase());
    let ct = c.post("/contacts", &json!({"email": who, "first_name": "Uma"})).await;
    assert_eq!(ct.status, 201, "{}", ct.json);
    let ct = ct.json["data"]["id"].as_str().unwrap().to_string();

    // Marketing (the default) to one recipient: both headers; the message leaves with them.
    let subject = unique("News");
    let e = send(&c, json!({"from": from, "to": [who], "subject": subject, "text": "news"})).await;
    let link = unsubscribe_link(&c, &e).await;
    assert!(link.contains("/p/") && link.contains("/unsubscribe?token=") && !link.contains(&who), "{link}");
    // Transactional mail, mail to several recipients, and a caller's own header: none of ours.
    let t = send(&c, json!({"from": from, "to": [who], "subject": "receipt", "text": "t", "transactional": true})).await;
    assert!(t["headers"].get("List-Unsubscribe").is_none(), "{t}");
    let two = send(&c, json!({"from": from, "to": [who, "x@example.org"], "subject": "two", "text": "t"})).await;
    assert!(two["headers"].get("List-Unsubscribe").is_none(), "{two}");
    let own = send(
        &c,
        json!({"from": from, "to": [who], "subject": "own", "text": "t", "headers": {"List-Unsubscribe": "<mailto:u@example.org>"}}),
    )
    .await;
    assert_eq!(own["headers"]["List-Unsubscribe"], "<mailto:u@example.org>", "{own}");
    let t = wait_status(&c, t["id"].as_str().unwrap(), &["sent"], 30).await;

    // A scanner's GET changes nothing; it shows the question.
    let page = reqwest::get(&link).await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("Stop marketing email"));
    assert!(ledger(&c, &who).await.is_empty());

    // Altered, truncated, moved to another email (even one that left) or workspace: refused,
    // nothing recorded. A bare POST is not a one-click request. The API cannot forge the source.
    let (base, tag) = link.rsplit_once('.').unwrap();
    let flipped = format!("{base}.{}{}", if tag.starts_with('A') { "B" } else { "A" }, &tag[1..]);
    let other_email = link.replace(e["id"].as_str().unwrap(), t["id"].as_str().unwrap());
    for bad in [flipped, format!("{base}."), other_email, link.replace(&ws, "ws_01HZZZZZZZZZZZZZZZZZZZZZZZ")] {
        let (status, _, _) = post_link(&bad, "List-Unsubscribe=One-Click").await;
        assert_eq!(status, 404, "{bad}");
    }
    assert_eq!(post_link(&link, "").await.0, 400);
    // The API cannot give a consent the link's evidence.
    let forged = c.post("/gdpr/consents", &json!({"email": who, "purpose": "marketing_email", "granted": true, "source": "portal", "text_shown": "x", "text_version": "1", "email_id": e["id"]})).await;
    assert_eq!(forged.status, 400, "{}", forged.json);
    assert!(ledger(&c, &who).await.is_empty());

    // The one-click POST: no credential, no cookie set; the contact is unsubscribed, the
    // ledger has the withdrawal with its evidence, and the event goes out. Again: nothing new.
    for _ in 0..2 {
        let (status, body, cookie) = post_link(&link, "List-Unsubscribe=One-Click").await;
        assert_eq!((status, cookie), (200, false), "{body}");
        assert!(body.contains("You are unsubscribed"), "{body}");
    }
    let got = c.get(&format!("/contacts/{ct}")).await;
    assert_eq!(got.json["data"]["email_status"], "unsubscribed");
    let l = ledger(&c, &who).await;
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!((l[0]["granted"].as_bool(), l[0]["source"].as_str()), (Some(false), Some("portal")));
    assert_eq!((l[0]["email_id"].as_str(), l[0]["user_agent"].as_str()), (e["id"].as_str(), Some("Mail-Provider/1.0")));
    let events = rx.wait_until(30, |r| !r.is_empty()).await;
    let ev: Value = serde_json::from_slice(&events[0].body).unwrap();
    assert_eq!(
        (ev["type"].as_str(), ev["data"]["contact_id"].as_str(), ev["data"]["via"].as_str()),
        (Some("contact.unsubscribed"), Some(ct.as_str()), Some("one_click"))
    );
    // The delivered event is what the catalog says it is (checked by `jsonschema`).
    let schema = c.get("/webhooks/event-types/contact.unsubscribed").await.json["data"]["schema"].clone();
    let failures =
        e2e::python("tests/validate_json_schema.py", &json!([{"name": "contact.unsubscribed", "schema": schema, "instance": ev}]));
    assert_eq!(failures, json!({}), "the event does not match its catalog schema");

    // Marketing is suppressed now; transactional mail still goes.
    let m = send(&c, json!({"from": from, "to": [who], "subject": "more news", "text": "t"})).await;
    assert_eq!((m["status"].as_str(), m["suppressed_recipients"][0]["reason"].as_str()), (Some("suppressed"), Some("unsubscribed")));
    let t = send(&c, json!({"from": from, "to": [who], "subject": "receipt 2", "text": "t", "transactional": true})).await;
    assert_eq!(t["status"], "queued");

    // The page's undo subscribes again (a second consent event), and marketing flows.
    let (status, body, _) = post_link(&link, "action=subscribe").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("subscribed again"), "{body}");
    assert_eq!(c.get(&format!("/contacts/{ct}")).await.json["data"]["email_status"], "subscribed");
    assert_eq!(ledger(&c, &who).await.len(), 2);
    let m = send(&c, json!({"from": from, "to": [who], "subject": "news again", "text": "t"})).await;
    assert_eq!(m["status"], "queued", "{m}");

    // A link undoes only its own unsubscribe: after the next email's link unsubscribed the
    // address (from its page's button), the first link cannot subscribe it again.
    let second = unsubscribe_link(&c, &m).await;
    assert_eq!(post_link(&second, "action=unsubscribe").await.0, 200);
    let (status, body, _) = post_link(&link, "action=subscribe").await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(c.get(&format!("/contacts/{ct}")).await.json["data"]["email_status"], "unsubscribed");
    assert_eq!(ledger(&c, &who).await.len(), 3);
}

#[tokio::test]
async fn an_address_without_a_contact_unsubscribes_once_however_many_posts_race() {
    let (c, ws) = sender_workspace("unsubscribe race").await;
    let from = from(&ws);
    let who = format!("nobody-{}@example.org", ulid::Ulid::generate().to_string().to_lowercase());
    let e = send(&c, json!({"from": from, "to": [who], "subject": "hello", "text": "t"})).await;
    let link = unsubscribe_link(&c, &e).await;
    // RFC 8058 prefers multipart/form-data: accepted as well.
    let posts = (0..6).map(|i| {
        let link = link.clone();
        async move {
            let rb = reqwest::Client::new().post(&link);
            let rb = if i % 2 == 0 {
                rb.header("content-type", "multipart/form-data; boundary=b")
                    .body("--b\r\nContent-Disposition: form-data; name=\"List-Unsubscribe\"\r\n\r\nOne-Click\r\n--b--\r\n")
            } else {
                rb.header("content-type", "application/x-www-form-urlencoded").body("List-Unsubscribe=One-Click")
            };
            rb.send().await.unwrap().status().as_u16()
        }
    });
    assert!(futures_util::future::join_all(posts).await.iter().all(|s| *s == 200));
    let l = ledger(&c, &who).await;
    assert_eq!(l.len(), 1, "one withdrawal however many posts: {l:?}");
    let s = c.get("/emails/suppressions").await;
    let entry: Vec<&Value> = s.json["data"].as_array().unwrap().iter().filter(|x| x["address"] == who.as_str()).collect();
    assert_eq!(entry.len(), 1, "{}", s.json);
    assert_eq!(entry[0]["reason"], "unsubscribed");
    // For marketing only.
    let m = send(&c, json!({"from": from, "to": [who], "subject": "again", "text": "t"})).await;
    assert_eq!(m["status"], "suppressed");
    let t = send(&c, json!({"from": from, "to": [who], "subject": "receipt", "text": "t", "transactional": true})).await;
    assert_eq!(t["status"], "queued");
}

/// `n` bytes that hold every byte value, after `magic`.
fn file(magic: &[u8], n: usize) -> Vec<u8> {
    let mut b = magic.to_vec();
    b.extend((0..n).map(|i| (i * 7919 % 256) as u8));
    b
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

/// The email's objects in the mail bucket.
async fn stored_files(ws: &str, email_id: &str) -> Vec<(String, Vec<u8>)> {
    let h = harness();
    h.bucket_objects(&h.resources.mail_bucket, &format!("outbound/{ws}/{email_id}/")).await
}

async fn gone(ws: &str, email_id: &str) -> bool {
    for _ in 0..50 {
        if stored_files(ws, email_id).await.is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

#[tokio::test]
async fn files_reach_ses_byte_for_byte_with_inline_images_by_content_id_and_are_deleted_once_sent() {
    let (c, ws) = sender_workspace("attachments").await;
    let from = from(&ws);
    let subject = unique("Invoice");
    let (pdf, png) = (file(b"%PDF-1.7\n", 300_000), file(PNG, 2_000));
    let e = send(
        &c,
        json!({"from": from, "to": ["billing@example.org"], "subject": subject, "transactional": true,
        "text": "Your invoice", "html": "<p>Your invoice <img src=\"cid:logo@acme\"></p>",
        "attachments": [
            {"filename": "Rechnung März.pdf", "content": b64(&pdf)},
            {"filename": "logo.png", "content_type": "image/png", "content": b64(&png), "content_id": "logo@acme"},
        ]}),
    )
    .await;
    let sha = |b: &[u8]| shared::crypto::sha256_hex(b);
    assert_eq!(
        e["attachments"],
        json!([
            {"filename": "Rechnung März.pdf", "content_type": "application/pdf", "size": pdf.len(), "content_id": null, "sha256": sha(&pdf)},
            {"filename": "logo.png", "content_type": "image/png", "size": png.len(), "content_id": "logo@acme", "sha256": sha(&png)},
        ]),
        "the record lists the files, never their bytes"
    );
    let id = e["id"].as_str().unwrap();
    wait_status(&c, id, &["sent"], 30).await;
    let raw: Vec<String> = ses_with_subject(&subject).await.iter().map(|m| m["raw"].as_str().unwrap().to_string()).collect();
    assert_eq!(raw.len(), 1);
    let read = e2e::python("tests/read_attachments.py", &json!(raw));
    let m = &read[0];
    assert_eq!(m["shape"], "multipart/mixed[multipart/related[multipart/alternative[text/plain,text/html],image/png],application/pdf]");
    let part = |t: &str| m["parts"].as_array().unwrap().iter().find(|p| p["content_type"] == t).unwrap().clone();
    let (p, i) = (part("application/pdf"), part("image/png"));
    assert_eq!(
        (p["bytes"].as_str(), p["filename"].as_str(), p["disposition"].as_str()),
        (Some(b64(&pdf).as_str()), Some("Rechnung März.pdf"), Some("attachment"))
    );
    assert_eq!(
        (i["bytes"].as_str(), i["content_id"].as_str(), i["disposition"].as_str()),
        (Some(b64(&png).as_str()), Some("<logo@acme>"), Some("inline"))
    );
    assert!(gone(&ws, id).await, "a sent email's files are deleted");
    assert_eq!(c.get(&format!("/emails/{id}")).await.json["data"]["attachments"], e["attachments"], "and still listed");

    // A batch's entries carry their own files.
    let subject = unique("Tickets");
    let entry = |n: usize| {
        json!({"from": from, "to": [format!("guest{n}@example.org")], "subject": subject, "text": "Your ticket",
            "attachments": [{"filename": format!("ticket-{n}.txt"), "content_type": "text/plain", "content": b64(format!("ticket {n}").as_bytes())}]})
    };
    let r = c.post("/emails/batch", &json!({"emails": [entry(1), entry(2)]})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    for entry in r.json["data"]["emails"].as_array().unwrap() {
        wait_status(&c, entry["id"].as_str().unwrap(), &["sent"], 30).await;
    }
    let raw: Vec<String> = ses_with_subject(&subject).await.iter().map(|m| m["raw"].as_str().unwrap().to_string()).collect();
    let mut files: Vec<String> = e2e::python("tests/read_attachments.py", &json!(raw))
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let p = m["parts"].as_array().unwrap().iter().find(|p| p["disposition"] == "attachment").unwrap();
            format!("{} {}", p["filename"].as_str().unwrap(), p["bytes"].as_str().unwrap())
        })
        .collect();
    files.sort();
    assert_eq!(files, [format!("ticket-1.txt {}", b64(b"ticket 1")), format!("ticket-2.txt {}", b64(b"ticket 2"))]);
}

#[tokio::test]
async fn files_are_typed_by_their_bytes_and_the_whole_message_is_measured_before_anything_is_stored() {
    let h = harness();
    let (ws, key) = h.workspace("attachment checks").await;
    // Many refused sends in a row: a stack without the send class's limit.
    let c = Client::new(&h.gateway_with(h.generous_config()).await, &key);
    e2e::verified_domain(&c, &ws).await;
    let from = from(&ws);
    let base =
        |attachments: Value| json!({"from": from, "to": ["x@example.org"], "subject": "files", "text": "t", "attachments": attachments});
    let refused = |r: &e2e::Resp| -> Vec<(String, String)> {
        assert_eq!(r.status, 400, "{}", r.json);
        r.json["error"]["details"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| (d["field"].as_str().unwrap_or_default().to_string(), d["message"].as_str().unwrap_or_default().to_string()))
            .collect()
    };
    let exe = file(b"MZ\x90\0\x03\0\0\0\x04\0\0\0\xff\xff\0\0", 64);
    let cases = [
        (
            json!([{"filename": "invoice.pdf", "content_type": "application/pdf", "content": b64(&exe)}]),
            "attachments[0].content",
            "programs",
        ),
        (
            json!([{"filename": "photo.pdf", "content_type": "application/pdf", "content": b64(&file(PNG, 10))}]),
            "attachments[0].content_type",
            "image/png",
        ),
        (json!([{"filename": "run.vbs", "content": b64(b"MsgBox 1")}]), "attachments[0].filename", "not sent"),
        (json!([{"filename": "a.txt", "content": "not base64!"}]), "attachments[0].content", "base64"),
        (
            json!([{"filename": "a.png", "content": b64(&file(PNG, 1)), "content_id": "x"}, {"filename": "b.png", "content": b64(&file(PNG, 2)), "content_id": "x"}]),
            "attachments[1].content_id",
            "another file",
        ),
        (
            json!((0..21).map(|i| json!({"filename": format!("{i}.txt"), "content": "eA=="})).collect::<Vec<_>>()),
            "attachments",
            "at most 20",
        ),
    ];
    for (files, field, says) in cases {
        let details = refused(&c.post("/emails", &base(files)).await);
        assert!(details.iter().any(|(f, m)| f == field && m.contains(says)), "{field}: {details:?}");
    }
    let r = c.post("/emails", &base(json!([{"filename": "a.txt", "content": "eA==", "colour": "red"}]))).await;
    assert_eq!(r.status, 400, "unknown fields of a file are refused: {}", r.json);

    // A stack whose limit is 300 kB: the second file crosses it, and is named.
    let mut cfg = h.generous_config();
    cfg.email.max_message_bytes = 300_000;
    let small = Client::new(&h.gateway_with(cfg).await, &key);
    let subject = unique("Too big");
    let body = json!({"from": from, "to": ["x@example.org"], "subject": subject, "text": "t", "attachments": [
        {"filename": "first.bin", "content": b64(&file(b"", 100_000))},
        {"filename": "second.bin", "content": b64(&file(b"", 150_000))},
    ]});
    let details = refused(&small.post("/emails", &body).await);
    assert!(details.iter().any(|(f, m)| f == "attachments[1]" && m.contains("second.bin") && m.contains("0.3 MB")), "{details:?}");
    let r = small.post("/emails/batch", &json!({"emails": [body]})).await;
    assert_eq!(r.status, 400, "a batch entry is measured the same way: {}", r.json);
    assert!(r.json.to_string().contains("emails[0].attachments[1]"), "{}", r.json);
    assert!(c.get("/emails").await.json["data"].as_array().unwrap().is_empty(), "nothing was accepted");
    assert!(h.bucket_objects(&h.resources.mail_bucket, &format!("outbound/{ws}/")).await.is_empty(), "nothing was stored");
    assert!(ses_with_subject(&subject).await.is_empty());
}

#[tokio::test]
async fn a_scheduled_email_s_files_are_linked_then_erased_with_its_recipient_or_deleted_when_it_is_cancelled() {
    let h = harness();
    let (c, ws) = sender_workspace("attachment erasure").await;
    let who = format!("{}@example.org", shared::ids::new_id("erased").to_ascii_lowercase());
    let e = send(
        &c,
        json!({"from": from(&ws), "to": [who], "subject": "Your contract", "text": "attached", "scheduled_at": e2e::in_hours(48),
            "attachments": [{"filename": "contract-ada.pdf", "content": b64(&file(b"%PDF-1.4\n", 1000))}]}),
    )
    .await;
    let id = e["id"].as_str().unwrap();
    let files = stored_files(&ws, id).await;
    assert_eq!(files.len(), 1);
    assert!(!h.object_tags(&h.resources.mail_bucket, &files[0].0).await.contains("unlinked"), "a recorded email's file does not expire");
    e2e::erase(&c, &who).await;
    let after = c.get(&format!("/emails/{id}")).await.json["data"].clone();
    assert_eq!(after["status"], "cancelled");
    assert_eq!(after["attachments"][0]["filename"], "[erased]");
    assert_eq!(after["attachments"][0]["sha256"], Value::Null);
    assert!(stored_files(&ws, id).await.is_empty(), "the file is erased with its recipient");

    // A cancelled email's files go too.
    let e = send(
        &c,
        json!({"from": from(&ws), "to": ["kept@example.org"], "subject": "Later", "text": "attached", "scheduled_at": e2e::in_hours(48),
            "attachments": [{"filename": "a.txt", "content": b64(b"later")}]}),
    )
    .await;
    let id = e["id"].as_str().unwrap();
    assert_eq!(stored_files(&ws, id).await.len(), 1);
    assert_eq!(c.post(&format!("/emails/{id}/cancel"), &json!({})).await.status, 200);
    assert!(stored_files(&ws, id).await.is_empty(), "a cancelled email's file is deleted");

    // A file gone before its email's time (here deleted by hand; in life expired unlinked):
    // the email fails, it does not go out without it.
    let subject = unique("Missing file");
    let e = send(
        &c,
        json!({"from": from(&ws), "to": ["kept@example.org"], "subject": subject, "text": "attached",
            "scheduled_at": shared::ids::format_time(chrono::Utc::now() + chrono::Duration::seconds(4)),
            "attachments": [{"filename": "a.txt", "content": b64(b"soon")}]}),
    )
    .await;
    let id = e["id"].as_str().unwrap();
    let app = h.app().await;
    for (key, _) in stored_files(&ws, id).await {
        app.s3().delete_object().bucket(&h.resources.mail_bucket).key(key).send().await.unwrap();
    }
    let failed = wait_status(&c, id, &["failed", "sent"], 30).await;
    assert_eq!((failed["status"].as_str(), failed["error"]["code"].as_str()), (Some("failed"), Some("attachment_missing")), "{failed}");
    assert!(ses_with_subject(&subject).await.is_empty());
}

#[tokio::test]
async fn a_file_too_large_for_a_request_body_goes_through_a_presigned_upload_named_by_sends() {
    let h = harness();
    let (c, ws) = sender_workspace("attachment uploads").await;
    let sender = from(&ws);
    // Larger than a request body may be (2.5 MiB), even before base64.
    let big = file(b"%PDF-1.7\n", 3_000_000);
    let r = c.post("/emails/attachments", &json!({"size": big.len(), "sha256": shared::crypto::sha256_hex(&big)})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let up = r.json["data"].clone();
    assert_eq!((up["object"].as_str(), up["size"].as_u64()), (Some("email_upload"), Some(big.len() as u64)));
    let mut put = reqwest::Client::new().put(up["upload_url"].as_str().unwrap());
    for (k, v) in up["headers"].as_object().unwrap() {
        put = put.header(k.as_str(), v.as_str().unwrap());
    }
    let stored = put.body(big.clone()).send().await.unwrap();
    assert!(stored.status().is_success(), "{}", stored.text().await.unwrap());

    // Two sends of a batch name the one upload; each message carries it whole.
    let subject = unique("Big file");
    let entry = |n: usize| {
        json!({"from": sender, "to": [format!("big{n}@example.org")], "subject": subject, "text": "attached",
            "attachments": [{"filename": "manual.pdf", "upload_id": up["id"]}]})
    };
    let r = c.post("/emails/batch", &json!({"emails": [entry(1), entry(2)]})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    for entry in r.json["data"]["emails"].as_array().unwrap() {
        let e = wait_status(&c, entry["id"].as_str().unwrap(), &["sent"], 60).await;
        assert_eq!(e["attachments"][0]["sha256"], shared::crypto::sha256_hex(&big));
        assert_eq!(e["attachments"][0]["content_type"], "application/pdf");
    }
    let raw: Vec<String> = ses_with_subject(&subject).await.iter().map(|m| m["raw"].as_str().unwrap().to_string()).collect();
    assert_eq!(raw.len(), 2);
    for m in e2e::python("tests/read_attachments.py", &json!(raw)).as_array().unwrap() {
        let p = m["parts"].as_array().unwrap().iter().find(|p| p["content_type"] == "application/pdf").unwrap();
        assert!(p["bytes"].as_str() == Some(b64(&big).as_str()), "the upload arrives byte for byte");
    }

    // An upload is the workspace's own, exists once written, and fits a message.
    let (ows, okey) = h.workspace("attachment uploads elsewhere").await;
    let other = Client::new(&h.base, &okey);
    e2e::verified_domain(&other, &ows).await;
    let named = |from: &str, id: &Value| json!({"from": from, "to": ["x@example.org"], "subject": "s", "text": "t", "attachments": [{"filename": "a.pdf", "upload_id": id}]});
    let field = |r: &e2e::Resp| (r.status, r.json["error"]["details"][0]["field"].as_str().map(String::from));
    let r = c.post("/emails", &named(&sender, &json!("eup_01J00000000000000000000000"))).await;
    assert_eq!(field(&r), (400, Some("attachments[0].upload_id".into())), "{}", r.json);
    let r = other.post("/emails", &named(&from(&ows), &up["id"])).await;
    assert_eq!(field(&r), (400, Some("attachments[0].upload_id".into())), "another workspace's upload is not found: {}", r.json);
    let ten = shared::crypto::sha256_hex(b"0123456789");
    let unwritten = c.post("/emails/attachments", &json!({"size": 10, "sha256": ten})).await.json["data"]["id"].clone();
    let r = c.post("/emails", &named(&sender, &unwritten)).await;
    assert!(r.json["error"]["details"][0]["message"].as_str().unwrap_or_default().contains("no such upload"), "{}", r.json);
    let r = c.post("/emails/attachments", &json!({"size": 40_000_000, "sha256": ten})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("size")), "{}", r.json);

    // Bytes of the signed length that are not the declared file are refused when a send reads them.
    let up = c.post("/emails/attachments", &json!({"size": 10, "sha256": ten})).await.json["data"].clone();
    let mut put = reqwest::Client::new().put(up["upload_url"].as_str().unwrap());
    for (k, v) in up["headers"].as_object().unwrap() {
        put = put.header(k.as_str(), v.as_str().unwrap());
    }
    assert!(put.body(b"9876543210".to_vec()).send().await.unwrap().status().is_success());
    let r = c.post("/emails", &named(&sender, &up["id"])).await;
    assert!(r.json["error"]["details"][0]["message"].as_str().unwrap_or_default().contains("SHA-256"), "{}", r.json);
}

/// Mail to an address, as SES's receipt rule hands it to the inbound worker (invoked now, as
/// Lambda would).
async fn mail_to(to: &str, from: &str, subject: &str) {
    let h = harness();
    let app = h.app().await;
    let id = ulid::Ulid::generate().to_string().to_lowercase();
    let raw = format!(
        "From: {from}\r\nTo: {to}\r\nSubject: {subject}\r\nMessage-ID: <{id}@mail.example.org>\r\nDate: Sun, 29 Nov 2026 10:00:00 +0000\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{subject}\r\n"
    );
    let body =
        tools::admin::store_inbound(app.s3(), &h.resources.mail_bucket, raw.as_bytes(), &[to.to_string()], "PASS", "PASS").await.unwrap();
    let receipt = domain::helpdesk::mail::receipt(&body).expect("an SES receipt notification");
    domain::helpdesk::mail::handle(&app, &receipt).await.unwrap();
}

#[tokio::test]
async fn marketing_mail_from_a_domain_that_receives_mail_offers_a_mailto_unsubscribe() {
    let h = harness();
    let (ws, key) = h.workspace("mailto unsubscribe").await;
    let domain = e2e::verified_domain(&Client::new(&h.base, &key), &ws).await;
    let mut cfg = h.generous_config();
    cfg.email.inbound_domains = vec![domain.clone()];
    let c = Client::new(&h.gateway_with(cfg).await, &key);
    let who = format!("mo-{}@example.org", ulid::Ulid::generate().to_string().to_lowercase());
    let ct = c.post("/contacts", &json!({"email": who})).await;
    assert_eq!(ct.status, 201, "{}", ct.json);
    let ct = ct.json["data"]["id"].as_str().unwrap().to_string();

    let e = send(&c, json!({"from": format!("News <support@{domain}>"), "to": [who], "subject": unique("News"), "text": "n"})).await;
    assert_eq!(e["headers"]["List-Unsubscribe"], "<[[secret:list_unsubscribe]]>, <[[secret:list_unsubscribe_mailto]]>", "{e}");
    let sent = wait_status(&c, e["id"].as_str().unwrap(), &["sent"], 30).await;
    let m = h.ses_sent().await.into_iter().find(|m| m["id"] == sent["provider_message_id"]).expect("in moto's record");
    let header = m["headers"]["List-Unsubscribe"].as_str().unwrap().to_string();
    let mailto = header.split(", ").nth(1).unwrap().trim_start_matches("<mailto:").trim_end_matches('>').to_string();
    let address = mailto.strip_suffix("?subject=unsubscribe").unwrap_or_else(|| panic!("{header}"));
    assert!(address.starts_with("support+u") && address.ends_with(&format!("@{domain}")) && !address.contains("mo-"), "{header}");
    assert!(address.split('@').next().unwrap().len() <= 64);

    // An altered token changes nothing and starts no conversation.
    let (local, at) = address.split_once('@').unwrap();
    let last = local.chars().last().unwrap();
    let altered = format!("{}{}@{at}", &local[..local.len() - 1], if last == '0' { '1' } else { '0' });
    mail_to(&altered, &who, "unsubscribe").await;
    assert_eq!(c.get(&format!("/contacts/{ct}")).await.json["data"]["email_status"], "subscribed");

    // The real one, in another case (mail systems may change it): unsubscribed, with the
    // ledger's entry, once even when the mail comes twice; no conversation either way.
    for _ in 0..2 {
        mail_to(&format!("{}@{at}", local.to_ascii_uppercase()), &who, "unsubscribe").await;
    }
    assert_eq!(c.get(&format!("/contacts/{ct}")).await.json["data"]["email_status"], "unsubscribed");
    let l = ledger(&c, &who).await;
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!((l[0]["granted"].as_bool(), l[0]["email_id"].as_str()), (Some(false), e["id"].as_str()));
    assert!(l[0]["text_shown"].as_str().unwrap().contains("mailto"), "{l:?}");
    let convs = c.get("/helpdesk/conversations").await;
    assert_eq!(convs.json["data"].as_array().map(Vec::len), Some(0), "{}", convs.json);
}
