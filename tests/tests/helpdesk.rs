//! The helpdesk over HTTP: a customer's message (recorded from an integration) opens a
//! conversation and a contact; a staff reply leaves through SES from the mailbox, answering to
//! the conversation's reply address; a note is never sent; a reply to a suppressed address is
//! 409; HTML comes back sanitised; assignment, status and filters; another workspace sees
//! nothing and cannot write into the conversation.

use e2e::{Client, harness};
use serde_json::{Value, json};

async fn created(c: &Client, path: &str, body: Value, status: u16) -> Value {
    let r = c.post(path, &body).await;
    assert_eq!(r.status, status, "POST {path}: {}", r.json);
    r.json["data"].clone()
}

fn ids(v: &Value) -> Vec<String> {
    v["data"].as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap().to_string()).collect()
}

/// moto's record of what SES sent, as JSON objects with Source, Destination, Subject, Body...
async fn sent_to(h: &e2e::Harness, address: &str) -> Vec<Value> {
    h.ses_sent().await.into_iter().filter(|m| m.to_string().contains(address)).collect()
}

#[tokio::test]
async fn a_conversation_from_inbound_to_reply_to_note_with_its_timeline() {
    let h = harness();
    let (ws, key) = h.workspace("helpdesk flow").await;
    let c = Client::new(&h.base_bulk, &key);
    let domain = e2e::verified_domain(&c, &ws).await;
    let mailbox = format!("support@{domain}");
    let customer = format!("kim-{}@example.org", ulid::Ulid::generate().to_string().to_lowercase());

    let conv = created(&c, "/helpdesk/conversations", json!({
        "subject": "Where is my order?", "mailbox": mailbox.to_uppercase(), "contact": {"email": customer, "name": "Kim Lee"},
        "message": {"type": "inbound", "body_text": "It has not arrived.",
            "body_html": "<p onclick=\"x()\">It has <b>not</b> arrived.<script>alert(1)</script><img src=\"https://track.example/p.gif\"></p>"},
        "tags": ["orders"]}), 201).await;
    let id = conv["id"].as_str().unwrap().to_string();
    assert_eq!(
        (conv["status"].as_str(), conv["mailbox"].as_str(), conv["message_count"].as_u64()),
        (Some("open"), Some(mailbox.as_str()), Some(1)),
        "{conv}"
    );
    let ct = conv["contact_id"].as_str().unwrap().to_string();
    let contact = c.get(&format!("/contacts/{ct}")).await;
    assert_eq!(
        (contact.json["data"]["email"].as_str(), contact.json["data"]["first_name"].as_str()),
        (Some(customer.as_str()), Some("Kim"))
    );

    let msgs = c.get(&format!("/helpdesk/conversations/{id}/messages")).await;
    let first = &msgs.json["data"][0];
    assert_eq!(first["type"], "inbound");
    let html = first["body_html"].as_str().unwrap();
    assert!(
        html.contains("<b>not</b>") && !html.contains("onclick") && !html.contains("script") && !html.contains("track.example"),
        "{html}"
    );

    // A reply: from the mailbox, to the customer, answering to the conversation's address.
    let reply =
        created(&c, &format!("/helpdesk/conversations/{id}/messages"), json!({"type": "reply", "body_text": "It ships today."}), 201).await;
    assert_eq!((reply["from"].as_str(), reply["delivery_status"].as_str()), (Some(mailbox.as_str()), Some("pending")), "{reply}");
    let email_id = reply["email_id"].as_str().unwrap().to_string();
    let mut sent = vec![];
    for _ in 0..100 {
        sent = sent_to(h, &customer).await;
        if !sent.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(sent.len(), 1, "one email reached SES");
    let raw = sent[0].to_string();
    assert!(raw.contains(&mailbox), "from the mailbox: {raw}");
    assert!(raw.contains("Re: Where is my order?"), "{raw}");
    let email = c.get(&format!("/emails/{email_id}")).await;
    assert_eq!(email.json["data"]["metadata"]["conversation_id"], id.as_str());
    let reply_to = email.json["data"]["reply_to"][0].as_str().unwrap();
    assert!(reply_to.starts_with("support+") && reply_to.ends_with(&format!("@{domain}")), "the conversation's reply address: {reply_to}");
    let after = c.get(&format!("/helpdesk/conversations/{id}")).await.json["data"].clone();
    assert_eq!((after["status"].as_str(), after["message_count"].as_u64()), (Some("pending"), Some(2)), "waiting on the customer: {after}");
    for _ in 0..50 {
        let m = c.get(&format!("/helpdesk/conversations/{id}/messages")).await;
        if m.json["data"][1]["delivery_status"] == "sent" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(c.get(&format!("/helpdesk/conversations/{id}/messages")).await.json["data"][1]["delivery_status"], "sent");

    // A note is internal: nothing more reaches SES.
    let note =
        created(&c, &format!("/helpdesk/conversations/{id}/messages"), json!({"type": "note", "body_text": "VIP, be quick"}), 201).await;
    assert!(note["email_id"].is_null() && note["delivery_status"].is_null(), "{note}");
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_eq!(sent_to(h, &customer).await.len(), 1, "a note is never sent");
    let msgs = c.get(&format!("/helpdesk/conversations/{id}/messages")).await;
    assert_eq!(
        msgs.json["data"].as_array().unwrap().iter().map(|m| m["type"].as_str().unwrap()).collect::<Vec<_>>(),
        vec!["inbound", "reply", "note"]
    );
    let p1 = c.get(&format!("/helpdesk/conversations/{id}/messages?limit=2")).await;
    let p2 = c.get(&format!("/helpdesk/conversations/{id}/messages?limit=2&cursor={}", p1.json["next_cursor"].as_str().unwrap())).await;
    assert_eq!(p2.json["data"][0]["type"], "note");

    // Every message is on the contact's timeline.
    let timeline = c.get(&format!("/contacts/{ct}/activities")).await.json.to_string();
    for kind in ["helpdesk.message.received", "helpdesk.message.sent", "helpdesk.note.added"] {
        assert!(timeline.contains(kind), "{kind} on the timeline: {timeline}");
    }
}

#[tokio::test]
async fn status_assignment_filters_suppression_and_isolation() {
    let h = harness();
    let (ws, key) = h.workspace("helpdesk admin").await;
    let c = Client::new(&h.base_bulk, &key);
    let domain = e2e::verified_domain(&c, &ws).await;
    let (support, sales) = (format!("support@{domain}"), format!("sales@{domain}"));
    let start = |mailbox: &str, email: &str, tags: Value| {
        json!({"subject": format!("About {email}"), "mailbox": mailbox, "contact": {"email": email},
            "message": {"type": "inbound", "body_text": "Hello"}, "tags": tags})
    };
    let a = created(&c, "/helpdesk/conversations", start(&support, "a@example.org", json!(["billing"])), 201).await;
    let b = created(&c, "/helpdesk/conversations", start(&sales, "b@example.org", json!([])), 201).await;
    let cc = created(&c, "/helpdesk/conversations", start(&support, "c@example.org", json!(["billing", "vip"])), 201).await;
    let (a, b, cc) = (a["id"].as_str().unwrap(), b["id"].as_str().unwrap(), cc["id"].as_str().unwrap());

    // Newest last message first.
    assert_eq!(ids(&c.get("/helpdesk/conversations").await.json), vec![cc, b, a]);
    let r = c.patch(&format!("/helpdesk/conversations/{a}"), &json!({"assignee": "agent-7", "priority": "urgent"})).await;
    assert_eq!((r.json["data"]["assignee"].as_str(), r.json["data"]["priority"].as_str()), (Some("agent-7"), Some("urgent")), "{}", r.json);
    assert_eq!(ids(&c.get("/helpdesk/conversations?assignee=agent-7").await.json), vec![a]);
    assert_eq!(ids(&c.get("/helpdesk/conversations?tag=billing").await.json), vec![cc, a]);
    assert_eq!(ids(&c.get(&format!("/helpdesk/conversations?mailbox={sales}")).await.json), vec![b]);
    let r = c.patch(&format!("/helpdesk/conversations/{b}"), &json!({"status": "closed"})).await;
    assert_eq!(r.json["data"]["status"], "closed");
    assert_eq!(ids(&c.get("/helpdesk/conversations?status=closed").await.json), vec![b]);
    assert_eq!(ids(&c.get("/helpdesk/conversations?status=open").await.json), vec![cc, a]);
    let contact = c.get(&format!("/helpdesk/conversations/{cc}")).await.json["data"]["contact_id"].as_str().unwrap().to_string();
    assert_eq!(ids(&c.get(&format!("/helpdesk/conversations?contact_id={contact}")).await.json), vec![cc]);
    let p1 = c.get("/helpdesk/conversations?limit=2").await;
    let p2 = c.get(&format!("/helpdesk/conversations?limit=2&cursor={}", p1.json["next_cursor"].as_str().unwrap())).await;
    assert_eq!(ids(&p2.json), vec![a]);

    // Snoozing needs a time in the future; the time goes when it is no longer snoozed.
    let r = c.patch(&format!("/helpdesk/conversations/{a}"), &json!({"status": "snoozed"})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("snoozed_until")), "{}", r.json);
    let r = c.patch(&format!("/helpdesk/conversations/{a}"), &json!({"status": "snoozed", "snoozed_until": e2e::in_hours(2)})).await;
    assert_eq!(r.json["data"]["status"], "snoozed", "{}", r.json);
    let r = c.patch(&format!("/helpdesk/conversations/{a}"), &json!({"status": "open"})).await;
    assert!(r.json["data"]["snoozed_until"].is_null());

    // A mailbox outside the workspace's verified domains, a note as first message: 400.
    let r = c.post("/helpdesk/conversations", &start("help@elsewhere.example", "d@example.org", json!([]))).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("mailbox")), "{}", r.json);

    // A reply to a bounced address is refused before anything is written.
    let bounced = created(&c, "/contacts", json!({"email": "gone@example.org", "email_status": "bounced"}), 201).await;
    let conv = created(
        &c,
        "/helpdesk/conversations",
        json!({"subject": "Hi", "mailbox": support, "contact_id": bounced["id"],
        "message": {"type": "inbound", "body_text": "Hello"}}),
        201,
    )
    .await;
    let r = c
        .post(&format!("/helpdesk/conversations/{}/messages", conv["id"].as_str().unwrap()), &json!({"type": "reply", "body_text": "Hi"}))
        .await;
    assert_eq!((r.status, r.code()), (409, "CONFLICT"), "{}", r.json);
    assert_eq!(
        c.get(&format!("/helpdesk/conversations/{}/messages", conv["id"].as_str().unwrap())).await.json["data"].as_array().unwrap().len(),
        1
    );

    // Another workspace sees nothing and cannot write into the conversation.
    let (_, other_key) = h.workspace("helpdesk other").await;
    let o = Client::new(&h.base_bulk, &other_key);
    assert_eq!(o.get(&format!("/helpdesk/conversations/{a}")).await.status, 404);
    assert_eq!(o.get(&format!("/helpdesk/conversations/{a}/messages")).await.status, 404);
    assert_eq!(o.post(&format!("/helpdesk/conversations/{a}/messages"), &json!({"type": "note", "body_text": "x"})).await.status, 404);
    assert_eq!(o.patch(&format!("/helpdesk/conversations/{a}"), &json!({"status": "closed"})).await.status, 404);
    assert!(ids(&o.get("/helpdesk/conversations").await.json).is_empty());
}

/// Starting a conversation with a reply is the effect "send an email": a key that needs a
/// person's confirmation for it is refused before anything is written, so the new address it
/// named does not become a contact.
#[tokio::test]
async fn a_refused_reply_leaves_no_contact_behind() {
    let h = harness();
    let (ws, key) = h.workspace("helpdesk refused reply").await;
    let owner = Client::new(&h.base_bulk, &key);
    let domain = e2e::verified_domain(&owner, &ws).await;
    let r = owner
        .post("/workspaces/current/api-keys", &json!({"name": "agent", "scopes": ["read", "write"], "requires_confirmation": true}))
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    let agent = Client::new(&h.base_bulk, r.json["data"]["secret"].as_str().unwrap());
    let customer = format!("never-{}@example.org", ulid::Ulid::generate().to_string().to_lowercase());
    let r = agent
        .post(
            "/helpdesk/conversations",
            &json!({"subject": "Hello", "mailbox": format!("support@{domain}"), "contact": {"email": customer},
                "message": {"type": "reply", "body_text": "Hi there"}}),
        )
        .await;
    assert_eq!((r.status, r.code()), (428, "CONFIRMATION_REQUIRED"), "{}", r.json);
    let found = owner.get(&format!("/contacts?q={}", customer.split('@').next().unwrap())).await;
    assert_eq!(found.json["data"].as_array().map(Vec::len), Some(0), "{}", found.json);
    assert!(sent_to(h, &customer).await.is_empty());
}
