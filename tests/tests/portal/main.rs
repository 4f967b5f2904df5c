//! The customer portal over HTTP: login links are single use (however many exchanges race)
//! and expire; a session reaches its own contact only; the customer's profile, consent,
//! bookings (cancel within the window, 409 inside it), emails, export and erasure; logout;
//! the per-session rate class.

mod pages;

use e2e::{Client, harness};
use futures_util::future::join_all;
use serde_json::{Value, json};
use std::time::Duration;

async fn created(c: &Client, path: &str, body: Value, status: u16) -> Value {
    let r = c.post(path, &body).await;
    assert_eq!(r.status, status, "POST {path}: {}", r.json);
    r.json["data"].clone()
}

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_login_link_is_exchanged_once_and_expires() {
    let h = harness();
    let (_, key) = h.workspace("portal links").await;
    let c = Client::new(&h.base_bulk, &key);
    let ct = id(&created(&c, "/contacts", json!({"email": "pia@example.org"}), 201).await);
    let link = created(&c, "/portal/sessions", json!({"contact_id": ct, "delivery": "return"}), 201).await;
    let token = link["token"].as_str().unwrap().to_string();
    assert!(token.starts_with("psl_") && token.len() == 47, "{link}");
    assert!(link["url"].is_null());

    let anon = Client::anonymous(&h.base_bulk);
    let body = json!({"token": token});
    let tries = join_all((0..10).map(|_| anon.post("/portal/sessions/exchange", &body))).await;
    let won: Vec<_> = tries.iter().filter(|r| r.status == 201).collect();
    assert_eq!(won.len(), 1, "{:?}", tries.iter().map(|r| r.status).collect::<Vec<_>>());
    let message = tries.iter().find(|r| r.status == 401).unwrap().json["error"]["message"].clone();
    assert!(tries.iter().filter(|r| r.status != 201).all(|r| r.code() == "UNAUTHORIZED" && r.json["error"]["message"] == message));
    let s = &won[0].json["data"];
    assert_eq!(s["contact"]["id"], ct.as_str());
    assert!(s["session_token"].as_str().unwrap().starts_with("pss_"));

    // Wrong and expired tokens get the very same answer.
    let wrong = anon.post("/portal/sessions/exchange", &json!({"token": format!("psl_{}", "A".repeat(43))})).await;
    assert_eq!((wrong.status, &wrong.json["error"]["message"]), (401, &message));
    let garbage = anon.post("/portal/sessions/exchange", &json!({"token": "nope"})).await;
    assert_eq!((garbage.status, &garbage.json["error"]["message"]), (401, &message));
    let stale = created(&c, "/portal/sessions", json!({"contact_id": ct, "delivery": "return"}), 201).await;
    let stale_token = stale["token"].as_str().unwrap();
    let app = h.app().await;
    app.db
        .update(
            domain::keys::PORTAL_LINK.pk(&shared::auth::hash_api_key(stale_token)),
            domain::keys::PORTAL_LINK.table.sk,
            "SET expires_at = :past",
        )
        .value(":past", shared::store::n(chrono::Utc::now().timestamp() - 1))
        .required()
        .await
        .unwrap();
    let r = anon.post("/portal/sessions/exchange", &json!({"token": stale_token})).await;
    assert_eq!((r.status, &r.json["error"]["message"]), (401, &message));

    // A link for no contact of this workspace is 404; the token is stored only hashed.
    let r = c.post("/portal/sessions", &json!({"contact_id": "ct_01HF6Z3Q8M4W2T9K7R5N1B0C6D", "delivery": "return"})).await;
    assert_eq!(r.status, 404);
    let items = app.db.scan_all().await.unwrap();
    assert!(items.iter().all(|i| !format!("{i:?}").contains(stale_token)), "a token is never stored");
}

#[tokio::test]
async fn a_return_url_must_be_https_on_an_allowed_origin() {
    let h = harness();
    let (_, key) = h.workspace("portal origins").await;
    let c = Client::new(&h.base_bulk, &key);
    let ct = id(&created(&c, "/contacts", json!({"email": "oli@example.org"}), 201).await);
    let r = c
        .post("/portal/sessions", &json!({"contact_id": ct, "return_url": "https://shop.example.com/account", "delivery": "return"}))
        .await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("return_url")), "{}", r.json);
    let r = c.patch("/workspaces/current", &json!({"portal_origins": ["http://shop.example.com"]})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("portal_origins[0]")), "{}", r.json);
    let r = c.patch("/workspaces/current", &json!({"portal_origins": ["https://shop.example.com/"]})).await;
    assert_eq!(r.json["data"]["portal_origins"], json!(["https://shop.example.com"]), "{}", r.json);
    let link = created(
        &c,
        "/portal/sessions",
        json!({"contact_id": ct, "return_url": "https://shop.example.com/account", "delivery": "return"}),
        201,
    )
    .await;
    let url = link["url"].as_str().unwrap();
    assert_eq!(url, format!("https://shop.example.com/account#portal_token={}", link["token"].as_str().unwrap()));
    for bad in ["http://shop.example.com/account", "https://shop.example.com.evil.org/", "https://other.example.com/"] {
        let r = c.post("/portal/sessions", &json!({"contact_id": ct, "return_url": bad, "delivery": "return"})).await;
        assert_eq!(r.status, 400, "{bad}: {}", r.json);
    }
}

#[tokio::test]
async fn a_session_reaches_its_own_contact_only_and_does_what_a_customer_may() {
    let h = harness();
    let (ws, key) = h.workspace("portal session").await;
    let c = Client::new(&h.base_bulk, &key);
    let from = format!("a@{}", e2e::verified_domain(&c, &ws).await);
    let me = id(&created(&c, "/contacts", json!({"email": "cy@example.org", "first_name": "Cy"}), 201).await);
    let other = id(&created(&c, "/contacts", json!({"email": "di@example.org"}), 201).await);
    let day = json!([{"start": "00:00", "end": "24:00"}]);
    let hours = json!({"mon": day, "tue": day, "wed": day, "thu": day, "fri": day, "sat": day, "sun": day});
    let res =
        created(&c, "/bookings/resources", json!({"name": "Desk", "timezone": "UTC", "opening_hours": hours, "capacity": 5}), 201).await;
    let strict = created(
        &c,
        "/bookings/services",
        json!({"name": "Strict", "duration_minutes": 30, "resource_ids": [res["id"]], "cancellation_window_minutes": 4320}),
        201,
    )
    .await;
    let loose = created(&c, "/bookings/services", json!({"name": "Loose", "duration_minutes": 30, "resource_ids": [res["id"]]}), 201).await;
    let day2 = (chrono::Utc::now() + chrono::Duration::days(2)).format("%Y-%m-%d").to_string();
    let b_strict =
        id(&created(&c, "/bookings", json!({"service_id": strict["id"], "start": format!("{day2}T09:00:00Z"), "contact_id": me}), 201)
            .await);
    let b_loose =
        id(&created(&c, "/bookings", json!({"service_id": loose["id"], "start": format!("{day2}T11:00:00Z"), "contact_id": me}), 201)
            .await);
    let b_other =
        id(&created(&c, "/bookings", json!({"service_id": loose["id"], "start": format!("{day2}T10:00:00Z"), "contact_id": other}), 201)
            .await);
    created(
        &c,
        "/emails",
        json!({"from": from, "to": ["cy@example.org"], "subject": "Welcome", "text": "secret body", "contact_id": me}),
        202,
    )
    .await;
    created(&c, "/emails", json!({"from": from, "to": ["di@example.org"], "subject": "Not yours", "text": "x", "contact_id": other}), 202)
        .await;
    let other_export = created(&c, "/gdpr/exports", json!({"subject": {"contact_id": other}}), 202).await;

    let session = e2e::portal_session(&c, &me).await;
    let p = Client::portal(&h.base_bulk, &session);
    let r = p.get("/portal/me").await;
    assert_eq!((r.status, r.json["data"]["contact"]["id"].as_str()), (200, Some(me.as_str())), "{}", r.json);
    assert!(r.json["data"]["marketing_consent"].is_null());

    // The credentials do not mix: no key on portal routes, no session on API routes.
    assert_eq!(Client::new(&h.base_bulk, &key).get("/portal/me").await.status, 401);
    assert_eq!(p.get("/contacts").await.status, 401);
    assert_eq!(Client::portal(&h.base_bulk, "pss_nonsense").get("/portal/me").await.status, 401);

    // Another contact's things are 404.
    assert_eq!(p.post(&format!("/portal/me/bookings/{b_other}/cancel"), &json!({})).await.status, 404);
    assert_eq!(p.get(&format!("/portal/me/exports/{}", id(&other_export))).await.status, 404);
    let emails = p.get("/portal/me/emails").await;
    assert_eq!(emails.status, 200, "{}", emails.json);
    let list = emails.json["data"].as_array().unwrap();
    assert_eq!((list.len(), list[0]["subject"].as_str()), (1, Some("Welcome")), "{}", emails.json);
    assert!(!emails.json.to_string().contains("secret body"), "no bodies");

    // Bookings: upcoming, soonest first; cancel inside the window is 409, outside it works.
    let r = p.get("/portal/me/bookings").await;
    assert_eq!(
        r.json["data"].as_array().unwrap().iter().map(id).collect::<Vec<_>>(),
        vec![b_strict.clone(), b_loose.clone()],
        "{}",
        r.json
    );
    let r = p.get("/portal/me/bookings?limit=1").await;
    let next = p.get(&format!("/portal/me/bookings?limit=1&cursor={}", r.json["next_cursor"].as_str().unwrap())).await;
    assert_eq!(next.json["data"].as_array().unwrap().iter().map(id).collect::<Vec<_>>(), vec![b_loose.clone()], "{}", next.json);
    assert_eq!(p.get("/portal/me/bookings?when=past").await.json["data"], json!([]));
    let r = p.post(&format!("/portal/me/bookings/{b_strict}/cancel"), &json!({"reason": "busy"})).await;
    assert_eq!((r.status, r.code()), (409, "CONFLICT"), "{}", r.json);
    let r = p.post(&format!("/portal/me/bookings/{b_loose}/cancel"), &json!({"reason": "busy"})).await;
    assert_eq!(
        (r.status, r.json["data"]["status"].as_str(), r.json["data"]["cancelled_by"].as_str()),
        (200, Some("cancelled"), Some("customer")),
        "{}",
        r.json
    );

    // Profile and marketing consent (a ledger event with source portal).
    let r = p
        .patch(
            "/portal/me",
            &json!({"first_name": "Cyrus", "marketing_consent": false, "consent_text": "No news please", "consent_text_version": "p1"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(
        (r.json["data"]["contact"]["first_name"].as_str(), r.json["data"]["marketing_consent"].as_bool()),
        (Some("Cyrus"), Some(false))
    );
    assert_eq!(r.json["data"]["contact"]["email_status"], "unsubscribed");
    let ledger = c.get(&format!("/gdpr/consents?contact_id={me}")).await;
    assert_eq!(ledger.json["data"]["history"][0]["source"], "portal", "{}", ledger.json);
    let r = p.patch("/portal/me", &json!({"email": "new@example.org"})).await;
    assert_eq!(r.status, 400, "the customer cannot change the address here: {}", r.json);

    // Their own export.
    let job = created(&p, "/portal/me/export", json!({}), 202).await;
    let path = format!("/portal/me/exports/{}", id(&job));
    let mut done = Value::Null;
    for _ in 0..150 {
        done = p.get(&path).await.json["data"].clone();
        if done["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(done["status"], "completed", "{done}");
    assert!(done["download_url"].is_null(), "a session the API caller opened (delivery return) sees no link: {done}");
    // The customer's own sign-in (a code from their inbox) sees it.
    let slug = c.get("/workspaces/current").await.json["data"]["slug"].as_str().unwrap().to_string();
    // On a gateway whose sign-in class is generous: the class's bucket is per network address,
    // which every test here shares.
    let anon = Client::anonymous(&format!("{}/api/v1", h.pages_gateway(h.generous_config()).await));
    let started = anon.post("/portal/sign-in", &json!({"workspace": slug, "email": "cy@example.org"})).await;
    assert_eq!(started.status, 202, "{}", started.json);
    let mut mail_id = None;
    for _ in 0..100 {
        let listed = c.get("/emails?tag=portal").await.json["data"].clone();
        mail_id = listed.as_array().unwrap().iter().find(|e| e["to"].to_string().contains("cy@example.org")).map(id);
        if mail_id.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let code = emailed_code(&c, &mail_id.expect("the sign-in mail")).await;
    let opened = anon.post("/portal/sign-in/verify", &json!({"attempt": started.json["data"]["attempt"], "code": code})).await;
    assert_eq!(opened.status, 201, "{}", opened.json);
    let own = Client::portal(&h.base_bulk, opened.json["data"]["session_token"].as_str().unwrap());
    let seen = own.get(&path).await.json["data"].clone();
    assert!(seen["download_url"].is_string(), "{seen}");

    // Logout ends the session.
    assert_eq!(p.post("/portal/logout", &json!({})).await.status, 204);
    assert_eq!(p.get("/portal/me").await.status, 401);
}

/// The 6 digits of a portal email as the customer received it: the stored copy, which any
/// key with the read scope can see, holds a placeholder instead.
async fn emailed_code(c: &Client, email_id: &str) -> String {
    let r = c.get(&format!("/emails/{email_id}")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let stored = r.json["data"]["text"].as_str().unwrap().to_string();
    assert!(stored.contains("[[secret:code]]") && !stored.split(|ch: char| !ch.is_ascii_digit()).any(|w| w.len() == 6), "{stored}");
    let text = harness().delivered_text(c, email_id).await;
    text.split(|ch: char| !ch.is_ascii_digit()).find(|w| w.len() == 6).expect("a 6-digit code").to_string()
}

#[tokio::test]
async fn a_customer_erases_themselves_only_with_the_code_sent_to_their_address() {
    let h = harness();
    let (ws, key) = h.workspace("portal erasure").await;
    let c = Client::new(&h.base_bulk, &key);
    e2e::verified_domain(&c, &ws).await;
    let me = id(&created(&c, "/contacts", json!({"email": "gone@example.org"}), 201).await);
    let session = e2e::portal_session(&c, &me).await;
    let p = Client::portal(&h.base_bulk, &session);
    // No code, a malformed one, a guess before any was sent: refused, nothing erased.
    let r = p.post("/portal/me/erasure", &json!({})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("code")), "{}", r.json);
    let r = p.post("/portal/me/erasure", &json!({"code": "123456"})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("code")), "{}", r.json);
    // The code goes to the contact's own address.
    let sent = created(&p, "/portal/me/erasure/code", json!({}), 202).await;
    let email = c.get(&format!("/emails/{}", sent["email_id"].as_str().unwrap())).await.json["data"].clone();
    assert_eq!((email["to"][0].as_str(), email["contact_id"].as_str()), (Some("gone@example.org"), Some(me.as_str())), "{email}");
    let code = emailed_code(&c, sent["email_id"].as_str().unwrap()).await;
    let wrong = if code == "000000" { "111111" } else { "000000" };
    let r = p.post("/portal/me/erasure", &json!({"code": wrong})).await;
    assert_eq!(r.status, 400, "a wrong code: {}", r.json);
    assert_eq!(c.get(&format!("/contacts/{me}")).await.status, 200, "nothing erased yet");
    let e = created(&p, "/portal/me/erasure", json!({"code": code}), 202).await;
    assert_eq!(p.get("/portal/me").await.status, 401, "the session is revoked with the request");
    let path = format!("/gdpr/erasures/{}", id(&e));
    for _ in 0..150 {
        if c.get(&path).await.json["data"]["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let done = c.get(&path).await.json["data"].clone();
    assert_eq!(
        (done["status"].as_str(), done["requested_by"].as_str()),
        (Some("completed"), Some(format!("portal:{me}").as_str())),
        "{done}"
    );
    assert_eq!(c.get(&format!("/contacts/{me}")).await.status, 404);
}

#[tokio::test]
async fn a_code_is_spent_once_and_guesses_are_limited() {
    let h = harness();
    let (ws, key) = h.workspace("portal code guesses").await;
    let c = Client::new(&h.base_bulk, &key);
    e2e::verified_domain(&c, &ws).await;
    let me = id(&created(&c, "/contacts", json!({"email": "guess@example.org"}), 201).await);
    let p = Client::portal(&h.base_bulk, &e2e::portal_session(&c, &me).await);
    let sent = created(&p, "/portal/me/erasure/code", json!({}), 202).await;
    let code = emailed_code(&c, sent["email_id"].as_str().unwrap()).await;
    let wrong = if code == "000000" { "111111" } else { "000000" };
    for _ in 0..5 {
        assert_eq!(p.post("/portal/me/erasure", &json!({"code": wrong})).await.status, 400);
    }
    let r = p.post("/portal/me/erasure", &json!({"code": code})).await;
    assert_eq!(r.status, 400, "after 5 guesses even the right code is refused: {}", r.json);
    // A new code brings no new guesses: the session has spent them.
    let sent = created(&p, "/portal/me/erasure/code", json!({}), 202).await;
    let code = emailed_code(&c, sent["email_id"].as_str().unwrap()).await;
    let r = p.post("/portal/me/erasure", &json!({"code": code})).await;
    assert_eq!(r.status, 400, "the guesses are the session's, not the code's: {}", r.json);
    // And a session gets three codes.
    created(&p, "/portal/me/erasure/code", json!({}), 202).await;
    let r = p.post("/portal/me/erasure/code", &json!({})).await;
    assert_eq!((r.status, r.code()), (409, "CONFLICT"), "a fourth code: {}", r.json);
    assert_eq!(c.get(&format!("/contacts/{me}")).await.status, 200);
}

/// A `write` key cannot erase people, so it must not be able to point a contact at its own
/// inbox and erase them through the portal: an address rewritten by such a credential does
/// not confirm an erasure; one an admin set does.
#[tokio::test]
async fn an_address_rewritten_by_a_credential_that_cannot_erase_does_not_confirm_an_erasure() {
    let h = harness();
    let (ws, key) = h.workspace("portal rewritten address").await;
    let admin = Client::new(&h.base_bulk, &key);
    e2e::verified_domain(&admin, &ws).await;
    let r = admin.post("/workspaces/current/api-keys", &json!({"name": "writer", "scopes": ["read", "write"]})).await;
    let writer = Client::new(&h.base_bulk, r.json["data"]["secret"].as_str().unwrap());
    let me = id(&created(&admin, "/contacts", json!({"email": "victim@example.org"}), 201).await);
    let r = writer.patch(&format!("/contacts/{me}"), &json!({"email": "attacker@example.org"})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json["data"]["email_changed"]["by_admin"], false, "{}", r.json);
    let p = Client::portal(&h.base_bulk, &e2e::portal_session(&admin, &me).await);
    let r = p.post("/portal/me/erasure/code", &json!({})).await;
    assert_eq!((r.status, r.code()), (403, "FORBIDDEN"), "{}", r.json);
    let r = p.post("/portal/me/erasure", &json!({"code": "123456"})).await;
    assert_eq!(r.status, 403, "{}", r.json);
    assert_eq!(admin.get(&format!("/contacts/{me}")).await.status, 200, "nothing erased");
    let r = p.post("/portal/me/export", &json!({})).await;
    assert_eq!(r.status, 403, "nor take their data out: {}", r.json);
    // Nor does an admin key that needs a person's approval to erase.
    let r = admin
        .post(
            "/workspaces/current/api-keys",
            &json!({"name": "agent", "scopes": ["read", "write", "admin"], "requires_confirmation": ["gdpr.erasure"]}),
        )
        .await;
    let agent = Client::new(&h.base_bulk, r.json["data"]["secret"].as_str().unwrap());
    let r = agent.patch(&format!("/contacts/{me}"), &json!({"email": "agent-inbox@example.org"})).await;
    assert_eq!((r.status, &r.json["data"]["email_changed"]["by_admin"]), (200, &json!(false)), "{}", r.json);
    assert_eq!(p.post("/portal/me/erasure/code", &json!({})).await.status, 403);
    // An admin's change vouches for the address.
    let r = admin.patch(&format!("/contacts/{me}"), &json!({"email": "new-home@example.org"})).await;
    assert_eq!((r.status, &r.json["data"]["email_changed"]["by_admin"]), (200, &json!(true)), "{}", r.json);
    let sent = created(&p, "/portal/me/erasure/code", json!({}), 202).await;
    let to = admin.get(&format!("/emails/{}", sent["email_id"].as_str().unwrap())).await.json["data"]["to"][0].clone();
    assert_eq!(to, "new-home@example.org");
}

/// A consent given in the portal says which session recorded it and how that session was
/// opened, so the ledger tells a customer's own choice from one made through a session a
/// workspace's server held.
#[tokio::test]
async fn a_portal_consent_records_the_session_that_gave_it() {
    let h = harness();
    let (_, key) = h.workspace("portal consent proof").await;
    let c = Client::new(&h.base_bulk, &key);
    let me = id(&created(&c, "/contacts", json!({"email": "proof@example.org"}), 201).await);
    let p = Client::portal(&h.base_bulk, &e2e::portal_session(&c, &me).await);
    let r = p.patch("/portal/me", &json!({"marketing_consent": true})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let ledger = c.get(&format!("/gdpr/consents?contact_id={me}")).await;
    let entry = &ledger.json["data"]["history"][0];
    assert_eq!(entry["source"], "portal", "{}", ledger.json);
    assert_eq!(entry["proof"]["delivery"], "return", "{}", ledger.json);
    assert!(entry["proof"]["session_id"].as_str().unwrap().starts_with("psess_"), "{}", ledger.json);
    assert!(entry["proof"]["opened_by"].as_str().unwrap().starts_with("key:"), "{}", ledger.json);
    let api = c
        .post(
            "/gdpr/consents",
            &json!({"contact_id": me, "purpose": "analytics", "granted": true, "source": "form", "text_shown": "Stats?", "text_version": "1"}),
        )
        .await;
    assert_eq!((api.status, &api.json["data"]["proof"]), (201, &Value::Null), "{}", api.json);
}

#[tokio::test]
async fn a_login_link_goes_to_the_inbox_unless_an_admin_asks_for_it() {
    let h = harness();
    let (ws, key) = h.workspace("portal delivery").await;
    let owner = Client::new(&h.base_bulk, &key);
    e2e::verified_domain(&owner, &ws).await;
    let r = owner.patch("/workspaces/current", &json!({"portal_origins": ["https://shop.example.com"]})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let ct = id(&created(&owner, "/contacts", json!({"email": "inbox@example.org"}), 201).await);
    let r = owner.post("/workspaces/current/api-keys", &json!({"name": "writer", "scopes": ["read", "write"]})).await;
    let writer = Client::new(&h.base_bulk, r.json["data"]["secret"].as_str().unwrap());

    // A write key: the link is emailed to the contact, and the caller sees no token.
    let link = created(&writer, "/portal/sessions", json!({"contact_id": ct}), 201).await;
    assert_eq!((link["delivery"].as_str(), link["token"].as_str(), link["url"].as_str()), (Some("email"), None, None), "{link}");
    let email = owner.get(&format!("/emails/{}", link["email_id"].as_str().unwrap())).await.json["data"].clone();
    assert_eq!(email["to"][0], "inbox@example.org");
    // A key that reads emails does not read the link: it is sealed until SES gets it.
    let stored = email["text"].as_str().unwrap();
    assert!(stored.contains("[[secret:link]]") && !stored.contains("psl_"), "{stored}");
    let text = h.delivered_text(&owner, link["email_id"].as_str().unwrap()).await;
    let token = text.split("#portal_token=").nth(1).unwrap().split_whitespace().next().unwrap();
    assert!(text.contains("https://shop.example.com/#portal_token=psl_"), "{text}");
    let r = Client::anonymous(&h.base_bulk).post("/portal/sessions/exchange", &json!({"token": token})).await;
    assert_eq!(r.status, 201, "the emailed link signs in: {}", r.json);
    // ... and cannot take the token for itself.
    let r = writer.post("/portal/sessions", &json!({"contact_id": ct, "delivery": "return"})).await;
    assert_eq!((r.status, r.code()), (403, "FORBIDDEN"), "{}", r.json);
}

#[tokio::test]
async fn a_deleted_contacts_session_ends_on_every_route() {
    let h = harness();
    let (_, key) = h.workspace("portal deleted contact").await;
    let c = Client::new(&h.base_bulk, &key);
    let me = id(&created(&c, "/contacts", json!({"email": "deleted@example.org"}), 201).await);
    let p = Client::portal(&h.base_bulk, &e2e::portal_session(&c, &me).await);
    assert_eq!(p.get("/portal/me/bookings").await.status, 200);
    assert_eq!(c.delete(&format!("/contacts/{me}")).await.status, 200);
    for path in ["/portal/me", "/portal/me/bookings", "/portal/me/emails", "/portal/me/exports/gx_01HF6Z3Q8M4W2T9K7R5N1B0C6D"] {
        assert_eq!(p.get(path).await.status, 401, "GET {path}");
    }
    for path in ["/portal/me/export", "/portal/me/erasure/code", "/portal/me/bookings/bk_01HF6Z3Q8M4W2T9K7R5N1B0C6D/cancel"] {
        assert_eq!(p.post(path, &json!({})).await.status, 401, "POST {path}");
    }
}

#[tokio::test]
async fn portal_routes_have_their_own_rate_class_per_session() {
    let h = harness();
    let (_, key) = h.workspace("portal limits").await;
    let c = Client::new(&h.base_bulk, &key);
    let me = id(&created(&c, "/contacts", json!({"email": "rl@example.org"}), 201).await);
    let first = Client::portal(&h.base, &e2e::portal_session(&c, &me).await);
    let second = Client::portal(&h.base, &e2e::portal_session(&c, &me).await);
    let answers = join_all((0..25).map(|_| first.get("/portal/me"))).await;
    let limited: Vec<_> = answers.iter().filter(|r| r.status == 429).collect();
    assert!(!limited.is_empty() && limited.len() <= 5, "burst 20: {:?}", answers.iter().map(|r| r.status).collect::<Vec<_>>());
    assert!(limited[0].header("ratelimit-policy").unwrap().starts_with("\"portal\";q=20"));
    assert_eq!(second.get("/portal/me").await.status, 200, "another session has its own bucket");
}

#[tokio::test]
async fn a_session_slides_with_use_up_to_its_hard_limit_and_then_ends() {
    let h = harness();
    let (_, key) = h.workspace("portal sliding").await;
    let c = Client::new(&h.base_bulk, &key);
    let me = id(&created(&c, "/contacts", json!({"email": "slide@example.org"}), 201).await);
    let session = e2e::portal_session(&c, &me).await;
    let p = Client::portal(&h.base_bulk, &session);
    let app = h.app().await;
    let pk = shared::auth::portal_session_pk(&session);
    let sk = domain::keys::PORTAL_SESSION.table.sk;
    let set = |expires: i64, hard: i64| {
        let (app, pk) = (&app, pk.clone());
        async move {
            app.db
                .update(pk, sk, "SET expires_at = :e, hard_expires_at = :h")
                .value(":e", shared::store::n(expires))
                .value(":h", shared::store::n(hard))
                .required()
                .await
                .unwrap();
        }
    };
    let expires = || async { shared::store::get_i64(&app.db.get(&pk, sk).await.unwrap().unwrap(), "expires_at").unwrap() };
    let now = chrono::Utc::now().timestamp();

    // Idle for 58 minutes: a request moves the end an hour past now.
    set(now + 120, now + 8 * 3600).await;
    assert_eq!(p.get("/portal/me").await.status, 200);
    assert!(expires().await >= now + 3590, "slid to an hour from now");
    // Near the hard limit: it slides to the limit, no further.
    set(now + 100, now + 300).await;
    assert_eq!(p.get("/portal/me").await.status, 200);
    assert_eq!(expires().await, now + 300);
    // Past its end: the same 401 as an unknown session.
    set(now - 1, now + 300).await;
    let r = p.get("/portal/me").await;
    assert_eq!((r.status, r.code()), (401, "UNAUTHORIZED"), "{}", r.json);
}
