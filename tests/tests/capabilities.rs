//! Capability confirmations over HTTP. The per-route test walks `GET /capabilities`, so a route
//! that becomes confirmable is tested here without a new test.

use e2e::{Client, Resp, harness};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// A workspace with its owner's key, an agent key that needs confirmations, and a person (an
/// OAuth member with the `confirm` scope) who approves the agent's writes.
struct Setup {
    ws: String,
    owner: Client,
    agent: Client,
    agent_key_id: String,
    person: Client,
    base: String,
}

async fn setup(base: &str, name: &str, requires: Value) -> Setup {
    let h = harness();
    let (ws, key) = h.workspace(name).await;
    let owner = Client::new(base, &key);
    let r = owner
        .post(
            "/workspaces/current/api-keys",
            &json!({"name": "agent", "scopes": ["read", "write", "admin"], "requires_confirmation": requires}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(r.json["data"]["requires_confirmation"], requires);
    let agent = Client::new(base, r.json["data"]["secret"].as_str().unwrap());
    let agent_key_id = r.json["data"]["id"].as_str().unwrap().to_string();
    let subject = format!("person-{}", shared::ids::new_id("u"));
    domain::workspaces::add_member(&h.app().await, &shared::auth::WorkspaceId::trusted(ws.clone()), &subject, "admin").await.unwrap();
    // An admin approves: the approver holds every effect's authority themselves.
    let mut person = Client::new(base, &tools::admin::mint_token(&subject, "read write admin confirm", 600).unwrap());
    person.workspace = Some(ws.clone());
    Setup { ws, owner, agent, agent_key_id, person, base: base.to_string() }
}

fn sha(body: &[u8]) -> String {
    shared::crypto::hex(&Sha256::digest(body))
}

/// A concrete path of a pattern: each parameter becomes a well-formed id nobody has, of the
/// route's kind where the route names objects (so the confirmation binds their absence).
fn concrete(pattern: &str) -> String {
    let kind = domain::capabilities::path_id_kind(pattern).unwrap_or("x");
    let id = format!("{kind}_01HF6Z3Q8M4W2T9K7R5N1B0C6D");
    pattern.split('/').map(|s| if s.starts_with('{') { id.as_str() } else { s }).collect::<Vec<_>>().join("/")
}

fn body_for(method: &str) -> Vec<u8> {
    if method == "DELETE" { vec![] } else { b"{}".to_vec() }
}

/// Mint a confirmation of `agent_key_id`'s request; answers (id, token).
async fn mint(s: &Setup, capability: &str, method: &str, path: &str, key: &str, body: &[u8]) -> (String, String) {
    mint_with(s, capability, method, path, key, body, json!({})).await
}

/// The digest of the value the agent's request would have, as the approval request its
/// refusal records shows it (None where the request fails before its effect).
async fn digest_of(s: &Setup, method: &str, path: &str, body: &[u8], key: &str) -> Option<String> {
    let r = send(&s.agent, method, path, body, Some(&format!("{key}-asked")), None).await;
    let apr = r.json["error"]["details"][0]["meta"]["approval_request_id"].as_str()?.to_string();
    approval(s, &apr).await["effect_value"]["digest"].as_str().map(String::from)
}

/// Mint as an approving app does: with the digest of the value the person saw (unless `extra`
/// names `effect_digest`).
async fn mint_with(s: &Setup, capability: &str, method: &str, path: &str, key: &str, body: &[u8], mut extra: Value) -> (String, String) {
    if extra.get("effect_digest").is_none()
        && let Some(d) = digest_of(s, method, path, body, key).await
    {
        extra["effect_digest"] = d.into();
    }
    let mut req = json!({"capability": capability, "method": method, "path": path, "idempotency_key": key,
        "body_sha256": sha(body), "preview_summary": format!("{method} {path}"), "approved_by": "Ada", "api_key_id": s.agent_key_id});
    // The body, so what it names is bound (required where bodies name contacts or templates).
    if !body.is_empty() {
        req["body"] = String::from_utf8(body.to_vec()).unwrap().into();
    }
    for (k, v) in extra.as_object().unwrap() {
        req[k] = v.clone();
    }
    let r = s.person.post("/capability-confirmations", &req).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let token = r.json["data"]["confirmation_token"].as_str().expect("the token, once").to_string();
    (r.json["data"]["id"].as_str().unwrap().to_string(), token)
}

/// Mint with the body itself, so the confirmation binds what the body names; answers (bound, token).
async fn mint_with_body(s: &Setup, path: &str, key: &str, body: &[u8], capability: &str) -> (Value, String) {
    let req = json!({"capability": capability, "method": "POST", "path": path, "idempotency_key": key,
        "body_sha256": sha(body), "body": String::from_utf8(body.to_vec()).unwrap(), "preview_summary": "x", "approved_by": "Ada",
        "api_key_id": s.agent_key_id, "effect_digest": digest_of(s, "POST", path, body, key).await});
    let r = s.person.post("/capability-confirmations", &req).await;
    assert_eq!(r.status, 201, "{}", r.json);
    (r.json["data"]["bound"].clone(), r.json["data"]["confirmation_token"].as_str().unwrap().to_string())
}

async fn send(c: &Client, method: &str, path: &str, body: &[u8], key: Option<&str>, token: Option<&str>) -> Resp {
    let mut r = c.request(method, path);
    if !body.is_empty() {
        r = r.header("content-type", "application/json").body(body.to_vec());
    }
    if let Some(k) = key {
        r = r.header("idempotency-key", k);
    }
    if let Some(t) = token {
        r = r.header("x-capability-confirmation", t);
    }
    c.send(r).await
}

fn refused(r: &Resp, capability: &str, reason: &str, what: &str) {
    assert_eq!((r.status, r.code()), (428, "CONFIRMATION_REQUIRED"), "{what}: {}", r.json);
    let meta = &r.json["error"]["details"][0]["meta"];
    assert_eq!(meta["capability"], capability, "{what}: {}", r.json);
    assert_eq!(meta["reason"], reason, "{what}: {}", r.json);
}

#[tokio::test]
async fn every_confirmable_route_needs_its_exact_confirmation_once() {
    let base = harness().generous_gateway().await;
    let s = setup(&base, "confirm every route", json!(true)).await;
    let caps = s.agent.get("/capabilities").await;
    assert_eq!(caps.status, 200, "{}", caps.json);
    let caps = caps.json["data"].as_array().unwrap().clone();
    let names: Vec<&str> = caps.iter().map(|c| c["capability"].as_str().unwrap()).collect();
    for expected in [
        "emails.send",
        "posts.publish",
        "webhooks.create",
        "gdpr.erasure",
        "api_keys.revoke",
        "channels.update",
        "workspaces.update",
        "emails.domains.delete",
        "portal.sessions.return",
    ] {
        assert!(names.contains(&expected), "{expected} is published: {names:?}");
    }
    let confirmable = tools::gateway::all_routes().iter().map(|r| r.effects.iter().filter(|e| !e.public).count()).sum::<usize>();
    assert_eq!(caps.len(), confirmable);
    // A customer's own routes take a portal session, not this key (tests/tests/portal.rs).
    let caps: Vec<Value> = caps.into_iter().filter(|c| !c["path"].as_str().unwrap().starts_with("/portal/me")).collect();

    for (i, cap) in caps.iter().enumerate() {
        let (name, method, pattern) = (cap["capability"].as_str().unwrap(), cap["method"].as_str().unwrap(), cap["path"].as_str().unwrap());
        // A route that can cause several effects is refused naming the first it is restricted for.
        let first_of_route = caps.iter().find(|c| c["method"] == method && c["path"] == pattern).unwrap()["capability"].as_str().unwrap();
        let refused = |r: &Resp, _: &str, reason: &str, what: &str| refused(r, first_of_route, reason, what);
        let path = concrete(pattern);
        let body = body_for(method);
        let key = format!("k-{i}-{name}");
        let what = format!("{name} ({method} {path})");

        // Without a token: refused where the handler reaches the effect, or earlier for the
        // request's own faults (these objects do not exist), never run.
        let r = send(&s.agent, method, &path, &body, Some(&format!("{key}-none")), None).await;
        assert!((400..500).contains(&r.status), "{what}: without a token: {} {}", r.status, r.json);
        if r.status == 428 {
            assert_eq!(r.json["error"]["details"][0]["meta"]["reason"], "missing", "{what}: {}", r.json);
        }
        // A valued effect's confirmation carries the digest of the value the person saw (its
        // approval request shows it); without one the run is refused (tested below).
        let digest = match r.json["error"]["details"][0]["meta"]["approval_request_id"].as_str() {
            Some(apr) => approval(&s, apr).await["effect_value"]["digest"].as_str().map(String::from),
            None => None,
        };
        let extra = digest.map_or(json!({}), |d| json!({"effect_digest": d}));
        // With a token for another request.
        let (id, token) = mint_with(&s, name, method, &path, &key, &body, extra).await;
        let r = send(&s.agent, method, &path, &body, Some("another-key"), Some(&token)).await;
        refused(&r, name, "mismatch", &what);
        assert_eq!(r.json["error"]["details"][0]["meta"]["mismatch"], "idempotency_key");
        let r = send(&s.agent, method, &path, br#"{"other":1}"#, Some(&key), Some(&token)).await;
        refused(&r, name, "mismatch", &what);
        // Another confirmable route with this token: its path or method differs.
        let next = (1..caps.len())
            .map(|d| &caps[(i + d) % caps.len()])
            .find(|c| (c["method"].as_str(), c["path"].as_str()) != (Some(method), Some(pattern)))
            .expect("another route");
        let (next_method, next_path) = (next["method"].as_str().unwrap(), concrete(next["path"].as_str().unwrap()));
        let r = send(&s.agent, next_method, &next_path, &body_for(next_method), Some(&key), Some(&token)).await;
        assert_eq!((r.status, r.json["error"]["details"][0]["meta"]["reason"].as_str()), (428, Some("mismatch")), "{what}: {}", r.json);
        // Another credential cannot use it: the owner's key needs no token at all, so its write
        // just runs (never 428).
        let r = send(&s.owner, method, &path, &body, None, None).await;
        assert_ne!(r.status, 428, "{what}: a credential without requires_confirmation is unaffected");

        // The right token: the write runs (whatever the handler answers to `{}`), once.
        let first = send(&s.agent, method, &path, &body, Some(&key), Some(&token)).await;
        assert_ne!(first.status, 428, "{what}: {}", first.json);
        let replay = send(&s.agent, method, &path, &body, Some(&key), Some(&token)).await;
        assert_eq!((replay.status, replay.header("idempotent-replayed")), (first.status, Some("true")), "{what}: {}", replay.json);
        let same = |r: &Resp| {
            let mut v = r.json.clone();
            if v["error"].is_object() {
                v["error"]["request_id"] = Value::Null;
            }
            v
        };
        assert_eq!(same(&replay), same(&first), "{what}: the replay is the first answer (an error names its own request)");
        let r = send(&s.agent, method, &path, &body, Some("a-second-use"), Some(&token)).await;
        refused(&r, name, "used", &what);

        // The audit shows who approved it and which request used it.
        let a = s.person.get(&format!("/capability-confirmations/{id}")).await;
        assert_eq!(a.status, 200, "{}", a.json);
        assert_eq!(a.json["data"]["status"], "used", "{what}");
        assert_eq!(a.json["data"]["used_by_request_id"], first.header("request-id").unwrap(), "{what}");
        assert!(a.json["data"].get("confirmation_token").is_none(), "the token is never shown again");
    }
    let audit = s.person.get("/capability-confirmations?limit=100").await;
    assert_eq!(audit.json["data"].as_array().unwrap().len(), caps.len());
    assert!(audit.json["data"].as_array().unwrap().iter().all(|c| c["status"] == "used" && c["approved_by"] == "Ada"));
}

#[tokio::test]
async fn a_confirmed_email_is_sent_once_even_when_two_requests_race_with_one_token() {
    let h = harness();
    let s = setup(&h.base, "confirm race", json!(["emails.send"])).await;
    let domain = e2e::verified_domain(&s.owner, &s.ws).await;
    let body =
        serde_json::to_vec(&json!({"from": format!("a@{domain}"), "to": ["race@example.org"], "subject": "Once", "text": "x"})).unwrap();
    let (id, token) = mint(&s, "emails.send", "POST", "/api/v1/emails", "race-1", &body).await;

    let (a, b) = tokio::join!(
        send(&s.agent, "POST", "/emails", &body, Some("race-1"), Some(&token)),
        send(&s.agent, "POST", "/emails", &body, Some("race-1"), Some(&token)),
    );
    let ran: Vec<&Resp> = [&a, &b].into_iter().filter(|r| r.status == 202 && r.header("idempotent-replayed").is_none()).collect();
    assert_eq!(ran.len(), 1, "exactly one runs: {} {} / {} {}", a.status, a.json, b.status, b.json);
    for r in [&a, &b] {
        assert!(r.status == 202 || (r.status == 409 && r.code() == "CONFLICT"), "the other waits or replays: {} {}", r.status, r.json);
    }
    let emails = s.owner.get("/emails?limit=100").await;
    let to_race: Vec<&Value> = emails.json["data"].as_array().unwrap().iter().filter(|e| e["subject"] == "Once").collect();
    assert_eq!(to_race.len(), 1, "one email: {}", emails.json);

    // Used: a second send with another key is refused, and the key's other writes are not
    // gated (the list names emails.send only).
    refused(&send(&s.agent, "POST", "/emails", &body, Some("race-2"), Some(&token)).await, "emails.send", "used", "reuse");
    let r = s.agent.post("/webhooks", &json!({"url": "http://127.0.0.1:9/hook"})).await;
    assert_eq!(r.status, 201, "webhooks.create is not in this key's list: {}", r.json);
    let a = s.person.get(&format!("/capability-confirmations/{id}")).await;
    assert_eq!((a.json["data"]["status"].as_str(), a.json["data"]["path"].as_str()), (Some("used"), Some("/emails")));
}

#[tokio::test]
async fn expired_foreign_and_other_key_tokens_are_refused() {
    let h = harness();
    let s = setup(&h.base, "confirm refusals", json!(true)).await;
    let body = br#"{"url":"http://127.0.0.1:9/hook"}"#;

    // Expired: the token's end of life moved into the past in the table (no test waits a minute).
    let (id, token) = mint_with(&s, "webhooks.create", "POST", "/webhooks", "exp-1", body, json!({"expires_in": 60})).await;
    let app = h.app().await;
    app.db
        .update(
            shared::store::ws_pk(&shared::ids::WorkspaceId::trusted(&s.ws)),
            domain::keys::CAPABILITY_CONFIRMATION.sk(&domain::ids::ConfirmationId::trusted(&id)),
            "SET token_expires_ms = :past",
        )
        .value(":past", shared::store::n(shared::ids::now_ms() - 1_000))
        .required()
        .await
        .unwrap();
    refused(&send(&s.agent, "POST", "/webhooks", body, Some("exp-1"), Some(&token)).await, "webhooks.create", "expired", "expired");
    assert_eq!(s.person.get(&format!("/capability-confirmations/{id}")).await.json["data"]["status"], "expired");

    // Another workspace's token names nothing here.
    let other = setup(&h.base, "confirm other ws", json!(true)).await;
    let (_, foreign) = mint(&other, "webhooks.create", "POST", "/webhooks", "f-1", body).await;
    refused(&send(&s.agent, "POST", "/webhooks", body, Some("f-1"), Some(&foreign)).await, "webhooks.create", "unknown", "foreign");
    // Not a token at all: the request's own fault, for any credential.
    for c in [&s.agent, &s.owner] {
        let r = send(c, "POST", "/webhooks", body, Some("f-1"), Some("cct_garbage")).await;
        assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("X-Capability-Confirmation")), "{}", r.json);
    }

    // Minted for another key of the same workspace.
    let r = s
        .owner
        .post(
            "/workspaces/current/api-keys",
            &json!({"name": "agent 2", "scopes": ["read", "write", "admin"], "requires_confirmation": true}),
        )
        .await;
    let agent2 = Client::new(&s.base, r.json["data"]["secret"].as_str().unwrap());
    let (_, token) = mint(&s, "webhooks.create", "POST", "/webhooks", "o-1", body).await;
    refused(&send(&agent2, "POST", "/webhooks", body, Some("o-1"), Some(&token)).await, "webhooks.create", "credential", "other key");
    // ... which its own key can still use, once.
    let r = send(&s.agent, "POST", "/webhooks", body, Some("o-1"), Some(&token)).await;
    assert_eq!(r.status, 201, "{}", r.json);
}

#[tokio::test]
async fn only_a_person_with_the_confirm_scope_mints_and_the_request_must_fit_the_capability() {
    let h = harness();
    let s = setup(&h.base, "confirm minting", json!(true)).await;
    let ok = json!({"capability": "webhooks.delete", "method": "DELETE", "path": "/webhooks/wh_01HF6Z3Q8M4W2T9K7R5N1B0C6D",
        "idempotency_key": "m-1", "body_sha256": sha(b""), "preview_summary": "Delete the hook", "approved_by": "Ada",
        "api_key_id": s.agent_key_id});

    // API keys never confirm: not the owner's, and no key can be given the scope.
    let r = s.owner.post("/capability-confirmations", &ok).await;
    assert_eq!((r.status, r.code()), (403, "FORBIDDEN"), "{}", r.json);
    let r = s.owner.post("/workspaces/current/api-keys", &json!({"name": "x", "scopes": ["read", "confirm"]})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("scopes")), "{}", r.json);
    let r = s.owner.post("/workspaces/current/api-keys", &json!({"name": "x", "requires_confirmation": ["emails.fly"]})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("requires_confirmation[0]")), "{}", r.json);
    // A viewer's token asks for confirm in vain: the role does not grant it.
    let viewer = format!("viewer-{}", shared::ids::new_id("u"));
    domain::workspaces::add_member(&h.app().await, &shared::auth::WorkspaceId::trusted(s.ws.clone()), &viewer, "viewer").await.unwrap();
    let mut v = Client::new(&h.base, &tools::admin::mint_token(&viewer, "read confirm", 600).unwrap());
    v.workspace = Some(s.ws.clone());
    assert_eq!(v.post("/capability-confirmations", &ok).await.status, 403);

    // Each field is checked against the capability's one method and path.
    for (field, value) in [
        ("capability", json!("webhooks.fly")),
        ("method", json!("POST")),
        ("path", json!("/webhooks")),
        ("path", json!("/webhooks/wh_1/rotate-secret")),
        ("idempotency_key", json!("")),
        ("body_sha256", json!("ABC")),
        ("preview_summary", json!("")),
        ("preview_summary", json!("x".repeat(4001))),
        ("expires_in", json!(30)),
        ("expires_in", json!(901)),
        ("api_key_id", json!("key_01HF6Z3Q8M4W2T9K7R5N1B0C6D")),
    ] {
        let mut bad = ok.clone();
        bad[field] = value.clone();
        let r = s.person.post("/capability-confirmations", &bad).await;
        assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some(field)), "{field} = {value}: {}", r.json);
    }
    let r = s.person.post("/capability-confirmations", &ok).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let c = &r.json["data"];
    assert_eq!((c["status"].as_str(), c["confirmed_by"].as_str().map(|s| s.starts_with("person-"))), (Some("issued"), Some(true)));
    assert!(c["confirmation_token"].as_str().unwrap().starts_with("cct_"));
    // An idempotent replay of the mint does not show the token again.
    let again = s.person.send(s.person.request("POST", "/capability-confirmations").header("idempotency-key", "mint-1").json(&ok)).await;
    let replay = s.person.send(s.person.request("POST", "/capability-confirmations").header("idempotency-key", "mint-1").json(&ok)).await;
    assert!(again.json["data"]["confirmation_token"].is_string());
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert!(replay.json["data"].get("confirmation_token").is_none(), "{}", replay.json);

    // Filters of the audit list.
    let l = s.person.get(&format!("/capability-confirmations?capability=webhooks.delete&api_key_id={}", s.agent_key_id)).await;
    assert_eq!(l.json["data"].as_array().unwrap().len(), 2, "{}", l.json);
    assert_eq!(s.person.get("/capability-confirmations?capability=emails.send").await.json["data"].as_array().unwrap().len(), 0);
}

/// The token is consumed in the transaction that reserves the Idempotency-Key: a confirmed
/// write makes as many DynamoDB round trips as the same write with a key that needs none.
#[tokio::test]
async fn a_confirmed_write_costs_one_read_and_no_extra_write_round_trip() {
    let h = harness();
    let s = setup(&h.base, "confirm calls", json!(true)).await;
    let plain = {
        let r = s.owner.post("/workspaces/current/api-keys", &json!({"name": "plain", "scopes": ["read", "write", "admin"]})).await;
        Client::new(&h.base, r.json["data"]["secret"].as_str().unwrap())
    };
    let body = br#"{"url":"http://127.0.0.1:9/hook"}"#;
    // Warm both keys (the lazy last-used write), then compare the same write.
    plain.get("/webhooks").await;
    s.agent.get("/webhooks").await;
    let unconfirmed = send(&plain, "POST", "/webhooks", body, Some("c-1"), None).await;
    let (_, token) = mint(&s, "webhooks.create", "POST", "/webhooks", "c-2", body).await;
    let confirmed = send(&s.agent, "POST", "/webhooks", body, Some("c-2"), Some(&token)).await;
    assert_eq!((unconfirmed.status, confirmed.status), (201, 201), "{} / {}", unconfirmed.json, confirmed.json);
    // The confirmation is read once (which effect, which objects it binds); the token is
    // consumed in the reservation's own transaction.
    assert_eq!(confirmed.ddb_calls(), unconfirmed.ddb_calls() + 1, "one read for the token");
}

/// A confirmation binds the state the person approved: the contact a reply goes to, the
/// template's subject, the post's content. Any change before use is a 428 `stale` and no effect;
/// a fresh approval shows the new state and runs once.
#[tokio::test]
async fn an_approval_binds_the_state_the_person_saw() {
    let h = harness();
    let s = setup(&h.base, "confirm stale", json!(true)).await;
    let domain = e2e::verified_domain(&s.owner, &s.ws).await;
    let count = |v: Value| v["data"].as_array().unwrap().len();
    let stale = |r: &Resp, object: &str, what: &str| {
        refused(r, r.json["error"]["details"][0]["meta"]["capability"].as_str().unwrap_or("?"), "stale", what);
        assert_eq!(r.json["error"]["details"][0]["meta"]["stale"]["object"], object, "{what}: {}", r.json);
    };

    // A reply: the conversation's contact is bound by the path alone.
    let ct = e2e::created(&s.owner, "/contacts", json!({"email": "before@example.org"}), 201).await;
    let ct_id = ct["id"].as_str().unwrap();
    let conv = e2e::created(
        &s.owner,
        "/helpdesk/conversations",
        json!({"subject": "Help", "mailbox": format!("support@{domain}"), "contact": {"email": "before@example.org"},
            "message": {"type": "inbound", "body_text": "I need help"}}),
        201,
    )
    .await;
    let path = format!("/helpdesk/conversations/{}/messages", conv["id"].as_str().unwrap());
    let reply = serde_json::to_vec(&json!({"type": "reply", "body_text": "Here is your answer"})).unwrap();
    let minted = s
        .person
        .post(
            "/capability-confirmations",
            &json!({"capability": "emails.send", "method": "POST", "path": path, "idempotency_key": "stale-1", "body_sha256": sha(&reply),
                "preview_summary": "Reply", "approved_by": "Ada", "api_key_id": s.agent_key_id}),
        )
        .await;
    assert_eq!(minted.status, 201, "{}", minted.json);
    let bound = minted.json["data"]["bound"].as_array().unwrap().clone();
    assert!(bound.iter().any(|b| b["object"] == "contact" && b["id"] == ct_id && b["preview"] == "before@example.org"), "{bound:?}");
    let token = minted.json["data"]["confirmation_token"].as_str().unwrap().to_string();
    let emails = count(s.owner.get("/emails?limit=100").await.json);
    let r = s.owner.patch(&format!("/contacts/{ct_id}"), &json!({"email": "after@example.org"})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    stale(&send(&s.agent, "POST", &path, &reply, Some("stale-1"), Some(&token)).await, "contact", "a changed recipient");
    assert_eq!(count(s.owner.get("/emails?limit=100").await.json), emails, "no email");
    let (_, token) = mint(&s, "emails.send", "POST", &path, "stale-2", &reply).await;
    let r = send(&s.agent, "POST", &path, &reply, Some("stale-2"), Some(&token)).await;
    assert_eq!(r.status, 201, "approved as it is now: {}", r.json);
    let sent = s.owner.get("/emails?limit=100").await.json;
    assert_eq!(count(sent.clone()), emails + 1);
    assert!(sent["data"].as_array().unwrap().iter().any(|e| e["to"][0] == "after@example.org"), "{sent}");

    // A template send: with the body, the template is bound and its subject rendered.
    let t = json!({"slug": "welcome", "subject": "Welcome, {{name}}", "text": "Hi {{name}}"});
    e2e::created(&s.owner, "/emails/templates", t, 201).await;
    let send_body = serde_json::to_vec(&json!({"from": format!("a@{domain}"), "to": ["x@example.org"], "template_slug": "welcome",
        "variables": {"name": "Ada"}}))
    .unwrap();
    let body_text = String::from_utf8(send_body.clone()).unwrap();
    let (bound, token) = mint_with_body(&s, "/emails", "stale-3", &send_body, "emails.send").await;
    assert_eq!(bound[0]["object"], "email_template", "{bound}");
    assert_eq!(bound[0]["preview"], "Welcome, Ada", "the subject as this request renders it");
    let r = s.owner.patch("/emails/templates/welcome", &json!({"subject": "Your account is closed, {{name}}"})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    stale(&send(&s.agent, "POST", "/emails", &send_body, Some("stale-3"), Some(&token)).await, "email_template", "a changed template");
    let mut wrong = json!({"capability": "emails.send", "method": "POST", "path": "/emails", "idempotency_key": "stale-4",
        "body_sha256": sha(b"{}"), "body": body_text, "preview_summary": "x", "approved_by": "Ada", "api_key_id": s.agent_key_id});
    let r = s.person.post("/capability-confirmations", &wrong).await;
    assert_eq!(
        (r.status, r.json["error"]["details"][0]["field"].as_str()),
        (400, Some("body")),
        "a body that is not the hashed one: {}",
        r.json
    );
    wrong["body_sha256"] = json!(sha(&send_body));
    let minted = s.person.post("/capability-confirmations", &wrong).await;
    assert_eq!(minted.status, 201, "{}", minted.json);
    // A template deleted and created again under its slug is another template.
    let token = minted.json["data"]["confirmation_token"].as_str().unwrap().to_string();
    assert_eq!(s.owner.delete("/emails/templates/welcome").await.status, 200);
    e2e::created(&s.owner, "/emails/templates", json!({"slug": "welcome", "subject": "Hi {{name}}", "text": "x"}), 201).await;
    stale(&send(&s.agent, "POST", "/emails", &send_body, Some("stale-4"), Some(&token)).await, "email_template", "a recreated template");
    // One that did not exist when approved must not exist when used.
    let later = serde_json::to_vec(&json!({"from": format!("a@{domain}"), "to": ["x@example.org"], "template_slug": "later"})).unwrap();
    let (bound, token) = mint_with_body(&s, "/emails", "stale-6", &later, "emails.send").await;
    assert_eq!(bound[0]["version"].as_i64(), Some(0), "{bound}");
    e2e::created(&s.owner, "/emails/templates", json!({"slug": "later", "subject": "Surprise", "text": "x"}), 201).await;
    stale(&send(&s.agent, "POST", "/emails", &later, Some("stale-6"), Some(&token)).await, "email_template", "a template created after");
    // A batch binds its templates too; unchanged, it is sent (its write checks them again).
    let batch =
        serde_json::to_vec(&json!({"emails": [{"from": format!("a@{domain}"), "to": ["y@example.org"], "template_slug": "later"}]}))
            .unwrap();
    let (bound, token) = mint_with_body(&s, "/emails/batch", "stale-10", &batch, "emails.send").await;
    assert_eq!(bound[0]["object"], "email_template", "{bound}");
    let r = send(&s.agent, "POST", "/emails/batch", &batch, Some("stale-10"), Some(&token)).await;
    assert_eq!(r.status, 202, "{}", r.json);
    // A percent-escaped path would name the object differently from the route: refused.
    let r = s
        .person
        .post(
            "/capability-confirmations",
            &json!({"capability": "emails.send", "method": "POST", "path": path.replace("conv_", "conv%5F"), "idempotency_key": "stale-7",
                "body_sha256": sha(&reply), "preview_summary": "x", "approved_by": "Ada", "api_key_id": s.agent_key_id}),
        )
        .await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("path")), "{}", r.json);

    // Whom a portal link or an erasure reaches: the body's contact, bound with the body.
    let link = serde_json::to_vec(&json!({"contact_id": ct_id, "delivery": "return"})).unwrap();
    let (bound, token) = mint_with_body(&s, "/portal/sessions", "stale-8", &link, "portal.sessions.return").await;
    assert_eq!((bound[0]["object"].as_str(), bound[0]["preview"].as_str()), (Some("contact"), Some("after@example.org")), "{bound}");
    assert_eq!(s.owner.patch(&format!("/contacts/{ct_id}"), &json!({"email": "third@example.org"})).await.status, 200);
    stale(&send(&s.agent, "POST", "/portal/sessions", &link, Some("stale-8"), Some(&token)).await, "contact", "a portal link");
    let erase = serde_json::to_vec(&json!({"subject": {"contact_id": ct_id}, "reason": "asked"})).unwrap();
    let (bound, token) = mint_with_body(&s, "/gdpr/erasures", "stale-9", &erase, "gdpr.erasure").await;
    assert_eq!(bound[0]["preview"], "third@example.org", "{bound}");
    let r = send(&s.agent, "POST", "/gdpr/erasures", &erase, Some("stale-9"), Some(&token)).await;
    assert_eq!(r.status, 202, "unchanged since approved: {}", r.json);

    // A post: its content (and channels) are bound by the path.
    let ch = e2e::channel(&s.owner, "stale").await;
    let post = e2e::created(&s.owner, "/posts", json!({"content": "Approved words", "channel_ids": [ch]}), 201).await;
    let post_path = format!("/posts/{}/publish", post["id"].as_str().unwrap());
    let (_, token) = mint(&s, "posts.publish", "POST", &post_path, "stale-5", b"{}").await;
    let r = s.owner.patch(&format!("/posts/{}", post["id"].as_str().unwrap()), &json!({"content": "Other words"})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    stale(&send(&s.agent, "POST", &post_path, b"{}", Some("stale-5"), Some(&token)).await, "post", "a changed post");
    assert_eq!(s.owner.get(&format!("/posts/{}", post["id"].as_str().unwrap())).await.json["data"]["status"], "draft");
}

/// On a route that can reach several effects, a token approves the one it was minted for.
#[tokio::test]
async fn a_token_approves_one_effect_of_a_route_that_reaches_several() {
    let h = harness();
    let s = setup(&h.base, "confirm one effect", json!(true)).await;
    e2e::verified_domain(&s.owner, &s.ws).await;
    let ct = e2e::created(&s.owner, "/contacts", json!({"email": "one@example.org"}), 201).await;
    // Approved: an emailed sign-in link. Used for: the token handed to the caller.
    let body = serde_json::to_vec(&json!({"contact_id": ct["id"], "delivery": "return"})).unwrap();
    let (_, token) = mint(&s, "emails.send", "POST", "/portal/sessions", "one-1", &body).await;
    let r = send(&s.agent, "POST", "/portal/sessions", &body, Some("one-1"), Some(&token)).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["meta"]["mismatch"].as_str()), (428, Some("capability")), "{}", r.json);
    assert!(r.json.get("data").is_none());
    // The token ran its one execution.
    let r = send(&s.agent, "POST", "/portal/sessions", &body, Some("one-1"), Some(&token)).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["meta"]["reason"].as_str()), (428, Some("used")), "{}", r.json);
    let (_, token) = mint(&s, "portal.sessions.return", "POST", "/portal/sessions", "one-2", &body).await;
    let r = send(&s.agent, "POST", "/portal/sessions", &body, Some("one-2"), Some(&token)).await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert!(r.json["data"]["token"].is_string());
}

/// The routes that reached effects without a confirmation before effects carried their
/// authority: each now refuses a restricted key (428, nothing happens) and, with a person's
/// token for that exact request, runs once.
#[tokio::test]
async fn every_route_to_an_effect_needs_the_confirmation_not_only_the_obvious_one() {
    let h = harness();
    let s = setup(&h.base, "confirm side doors", json!(true)).await;
    let domain = e2e::verified_domain(&s.owner, &s.ws).await;
    let emails_now = |c: Value| c["data"].as_array().unwrap().len();
    let before = emails_now(s.owner.get("/emails?limit=100").await.json);
    let ch = e2e::channel(&s.owner, "side-door").await;
    let post = e2e::created(&s.owner, "/posts", json!({"content": "Hello", "channel_ids": [ch]}), 201).await;
    let post_id = post["id"].as_str().unwrap();
    let ct = e2e::created(&s.owner, "/contacts", json!({"email": "side@example.org"}), 201).await;
    let ct_id = ct["id"].as_str().unwrap();
    let dom = s.owner.get("/emails/domains").await.json["data"][0]["id"].as_str().unwrap().to_string();

    let conversation = serde_json::to_vec(&json!({"subject": "Hi", "mailbox": format!("support@{domain}"),
        "contact": {"email": "side@example.org"}, "message": {"type": "reply", "body_text": "Hello from us"}}))
    .unwrap();
    let doors: Vec<(&str, String, Vec<u8>, &str)> = vec![
        ("POST", "/helpdesk/conversations".into(), conversation.clone(), "emails.send"),
        (
            "POST",
            format!("/posts/{post_id}/schedule"),
            serde_json::to_vec(&json!({"scheduled_at": e2e::in_hours(1)})).unwrap(),
            "posts.publish",
        ),
        ("PATCH", format!("/channels/{ch}"), serde_json::to_vec(&json!({"name": "renamed"})).unwrap(), "channels.update"),
        ("PATCH", "/workspaces/current".into(), serde_json::to_vec(&json!({"name": "renamed"})).unwrap(), "workspaces.update"),
        ("DELETE", format!("/emails/domains/{dom}"), vec![], "emails.domains.delete"),
        (
            "POST",
            "/portal/sessions".into(),
            serde_json::to_vec(&json!({"contact_id": ct_id, "delivery": "return"})).unwrap(),
            "portal.sessions.return",
        ),
    ];
    for (method, path, body, capability) in &doors {
        let r = send(&s.agent, method, path, body, Some("door"), None).await;
        refused(&r, capability, "missing", &format!("{method} {path}"));
    }
    assert_eq!(emails_now(s.owner.get("/emails?limit=100").await.json), before, "no email was written");
    assert_eq!(s.owner.get(&format!("/posts/{post_id}")).await.json["data"]["status"], "draft");
    assert_eq!(s.owner.get(&format!("/channels/{ch}")).await.json["data"]["name"], "side-door");
    assert_eq!(s.owner.get(&format!("/emails/domains/{dom}")).await.status, 200);

    // With the person's token the helpdesk start runs, and sends exactly one email.
    let (_, token) = mint(&s, "emails.send", "POST", "/helpdesk/conversations", "door-ok", &conversation).await;
    let r = send(&s.agent, "POST", "/helpdesk/conversations", &conversation, Some("door-ok"), Some(&token)).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let again = send(&s.agent, "POST", "/helpdesk/conversations", &conversation, Some("door-ok"), Some(&token)).await;
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    let after = s.owner.get("/emails?limit=100").await.json;
    assert_eq!(emails_now(after.clone()), before + 1, "one email: {after}");
    // A PATCH of a draft reaches no effect: no token needed.
    let r = s.agent.patch(&format!("/posts/{post_id}"), &json!({"content": "Edited"})).await;
    assert_eq!(r.status, 200, "{}", r.json);
}

/// A credential mints keys with at most its scopes and at least its confirmation requirements.
#[tokio::test]
async fn a_restricted_key_only_mints_keys_as_restricted_as_itself() {
    let h = harness();
    let s = setup(&h.base, "confirm minting keys", json!(["emails.send", "webhooks.create"])).await;
    let all = json!(["read", "write", "admin"]);
    for (requires, ok) in [
        (json!(false), false),
        (json!([]), false),
        (json!(["emails.send"]), false),
        (json!(["webhooks.create", "posts.publish"]), false),
        (json!(["emails.send", "webhooks.create"]), true),
        (json!(["emails.batch", "webhooks.create"]), true),
        (json!(["emails.send", "webhooks.create", "gdpr.erasure"]), true),
        (json!(true), true),
    ] {
        let body = json!({"name": "child", "scopes": all, "requires_confirmation": requires});
        let r = s.agent.post("/workspaces/current/api-keys", &body).await;
        if ok {
            assert_eq!(r.status, 201, "{requires}: {}", r.json);
        } else {
            assert_eq!(
                (r.status, r.json["error"]["details"][0]["field"].as_str()),
                (400, Some("requires_confirmation")),
                "{requires}: {}",
                r.json
            );
        }
    }
    // Without a value the child inherits the restrictions; scopes never widen.
    let r = s.agent.post("/workspaces/current/api-keys", &json!({"name": "child", "scopes": ["read", "write"]})).await;
    assert_eq!((r.status, &r.json["data"]["requires_confirmation"]), (201, &json!(["emails.send", "webhooks.create"])), "{}", r.json);
    let (_, key) = h.workspace("confirm minting keys 2").await;
    let owner = Client::new(&h.base, &key);
    let r = owner.post("/workspaces/current/api-keys", &json!({"name": "w", "scopes": ["read", "write"]})).await;
    let writer = Client::new(&h.base, r.json["data"]["secret"].as_str().unwrap());
    let r = writer.post("/workspaces/current/api-keys", &json!({"name": "x", "scopes": ["read"]})).await;
    assert_eq!(r.status, 403, "creating keys needs admin: {}", r.json);
    let r = owner
        .post("/workspaces/current/api-keys", &json!({"name": "x", "scopes": ["read", "write", "admin"], "requires_confirmation": true}))
        .await;
    let restricted = Client::new(&h.base, r.json["data"]["secret"].as_str().unwrap());
    let r = restricted.post("/workspaces/current/api-keys", &json!({"name": "y", "requires_confirmation": true})).await;
    assert_eq!((r.status, r.code()), (428, "CONFIRMATION_REQUIRED"), "minting is itself an effect to confirm: {}", r.json);
}

/// One approval, one execution: a confirmed request that fails after its token was consumed
/// (here the platform secret is unreachable when the webhook's secret must be sealed) is not
/// run again by a retry, not even once the dependency is back: the retry with its key replays
/// the failure, and the token is spent for any other key.
#[tokio::test]
async fn a_confirmed_request_that_failed_is_replayed_not_run_again() {
    let h = harness();
    let s = setup(&h.base, "confirm once on failure", json!(true)).await;
    let mut cfg = h.config.clone();
    cfg.platform_secret_id = "no-such-secret".into();
    let agent_key = s.agent.auth.clone().unwrap();
    let broken_base = h.gateway_with(cfg).await;
    let broken = Client::new(&broken_base, &agent_key).during_outage();
    // The replay is the stored 503: this client may see it.
    let agent = Client::new(&h.base, &agent_key).during_outage();
    let body = br#"{"url":"http://127.0.0.1:9/hook"}"#;
    let before = s.owner.get("/webhooks").await.json["data"].as_array().unwrap().len();
    let (id, token) = mint(&s, "webhooks.create", "POST", "/webhooks", "fail-1", body).await;
    let failed = send(&broken, "POST", "/webhooks", body, Some("fail-1"), Some(&token)).await;
    assert_eq!(failed.status, 503, "the secret is unreachable: {}", failed.json);
    // The dependency is back (the healthy gateway): the same key replays the failure.
    let retry = send(&agent, "POST", "/webhooks", body, Some("fail-1"), Some(&token)).await;
    assert_eq!((retry.status, retry.header("idempotent-replayed")), (failed.status, Some("true")), "{}", retry.json);
    refused(&send(&s.agent, "POST", "/webhooks", body, Some("fail-2"), Some(&token)).await, "webhooks.create", "used", "another key");
    assert_eq!(s.owner.get("/webhooks").await.json["data"].as_array().unwrap().len(), before, "no endpoint was made");
    assert_eq!(s.person.get(&format!("/capability-confirmations/{id}")).await.json["data"]["status"], "used");
    // A request without a token keeps today's rule: its 5xx frees the key for a retry.
    let plain = {
        let r = s.owner.post("/workspaces/current/api-keys", &json!({"name": "plain", "scopes": ["read", "write", "admin"]})).await;
        r.json["data"]["secret"].as_str().unwrap().to_string()
    };
    let r = send(&Client::new(&broken_base, &plain).during_outage(), "POST", "/webhooks", body, Some("plain-1"), None).await;
    assert_eq!(r.status, 503, "{}", r.json);
    let r = send(&Client::new(&h.base, &plain), "POST", "/webhooks", body, Some("plain-1"), None).await;
    assert_eq!((r.status, r.header("idempotent-replayed")), (201, None), "{}", r.json);
}

// ---------- approval requests ----------

/// The agent's request without a token: refused 428, naming the approval request it recorded.
async fn ask(s: &Setup, method: &str, path: &str, body: &[u8], key: &str, capability: &str) -> String {
    let r = send(&s.agent, method, path, body, Some(key), None).await;
    refused(&r, capability, "missing", &format!("{method} {path}"));
    let meta = &r.json["error"]["details"][0]["meta"];
    assert_eq!(meta["approval_state"], "pending", "{}", r.json);
    meta["approval_request_id"].as_str().expect("the 428 names its approval request").to_string()
}

/// A member of the setup's workspace with a token asking for every scope (the role caps it).
async fn member(s: &Setup, role: &str) -> (Client, String) {
    let subject = format!("{role}-{}", shared::ids::new_id("u"));
    let ws = shared::auth::WorkspaceId::trusted(s.ws.clone());
    domain::workspaces::add_member(&harness().app().await, &ws, &subject, role).await.unwrap();
    let mut c = Client::new(&s.base, &tools::admin::mint_token(&subject, "read write admin confirm", 600).unwrap());
    c.workspace = Some(s.ws.clone());
    (c, subject)
}

#[tokio::test]
async fn only_someone_who_may_cause_the_effect_approves_it() {
    // A write a second for every effect, by two people: past the default limits.
    let base = harness().generous_gateway().await;
    let s = setup(&base, "approver rule", json!(true)).await;
    let (m, member_sub) = member(&s, "member").await;
    let caps = s.agent.get("/capabilities").await.json["data"].as_array().unwrap().clone();

    // Minting directly: a member approves what a member may do, never an admin's effect.
    for e in domain::effects::ALL.iter().filter(|e| !e.public) {
        let row = caps.iter().find(|c| c["capability"] == e.capability).expect("published");
        let (method, path) = (row["method"].as_str().unwrap(), concrete(row["path"].as_str().unwrap()));
        let body = body_for(method);
        let mut req = json!({"capability": e.capability, "method": method, "path": path, "idempotency_key": "rule",
            "body_sha256": sha(&body), "preview_summary": "x", "approved_by": "a member", "api_key_id": s.agent_key_id});
        if !body.is_empty() {
            req["body"] = String::from_utf8(body).unwrap().into();
        }
        let r = m.post("/capability-confirmations", &req).await;
        let expected = if e.needs == shared::auth::Scope::Admin { 403 } else { 201 };
        assert_eq!(r.status, expected, "{} by a member: {}", e.capability, r.json);
        assert_eq!(s.person.post("/capability-confirmations", &req).await.status, 201, "{} by an admin", e.capability);
    }
    let minted = s.person.get("/capability-confirmations?limit=100").await.json["data"].as_array().unwrap().clone();
    let by_member = minted.iter().filter(|c| c["confirmed_by"] == member_sub.as_str()).count();
    assert_eq!(by_member, domain::effects::ALL.iter().filter(|e| !e.public && e.needs != shared::auth::Scope::Admin).count());

    // The agent asks to make the member an admin: the member cannot approve it, an admin can, once.
    let path = format!("/workspaces/current/members/{member_sub}");
    let body = br#"{"role":"admin"}"#;
    let apr = ask(&s, "PUT", &path, body, "promote", "members.change").await;
    assert_eq!(ask(&s, "PUT", &path, body, "promote", "members.change").await, apr, "the same request asks once");
    let r = s.person.get(&format!("/approval-requests/{apr}")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let a = &r.json["data"];
    assert_eq!(
        (a["state"].as_str(), a["approver_needs"].as_str(), a["path"].as_str()),
        (Some("pending"), Some("admin"), Some(path.as_str()))
    );
    assert_eq!(a["effect_value"]["value"], json!({"subject": member_sub, "old_role": "member", "new_role": "admin"}), "{a}");
    for decide in ["approve", "deny"] {
        let r = m.post(&format!("/approval-requests/{apr}/{decide}"), &json!({"reason": "no"})).await;
        assert_eq!((r.status, r.code()), (403, "FORBIDDEN"), "a member {decide}s an admin effect: {}", r.json);
    }
    let still = s.person.get(&format!("/approval-requests/{apr}")).await.json["data"].clone();
    assert_eq!((still["state"].as_str(), still["confirmation_id"].as_str()), (Some("pending"), None), "nothing minted: {still}");
    let role = |c: &Client, sub: &str| {
        let (c, sub) = (c.clone(), sub.to_string());
        async move {
            let list = c.get("/workspaces/current/members?limit=100").await.json["data"].as_array().unwrap().clone();
            list.iter().find(|m| m["subject"] == sub.as_str()).map(|m| m["role"].clone()).unwrap_or_default()
        }
    };
    assert_eq!(role(&s.owner, &member_sub).await, "member");

    let r = s.person.post(&format!("/approval-requests/{apr}/approve"), &json!({})).await;
    assert_eq!((r.status, r.json["data"]["state"].as_str()), (200, Some("approved")), "{}", r.json);
    assert_eq!(s.person.post(&format!("/approval-requests/{apr}/approve"), &json!({})).await.status, 409, "approved once");
    // The agent's same request now runs, once; again it is the same answer.
    let first = send(&s.agent, "PUT", &path, body, Some("promote"), None).await;
    assert_eq!(first.status, 200, "{}", first.json);
    let replay = send(&s.agent, "PUT", &path, body, Some("promote"), None).await;
    assert_eq!((replay.status, replay.header("idempotent-replayed")), (200, Some("true")));
    // Another Idempotency-Key is another request: it asks anew (a change to the role the
    // member has now changes nothing and asks nothing).
    assert_eq!(send(&s.agent, "PUT", &path, body, Some("promote-same"), None).await.status, 200);
    let other = ask(&s, "PUT", &path, br#"{"role":"viewer"}"#, "promote-again", "members.change").await;
    assert_ne!(other, apr);
    let cc = r.json["data"]["confirmation_id"].as_str().unwrap();
    let c = s.person.get(&format!("/capability-confirmations/{cc}")).await.json["data"].clone();
    assert_eq!((c["status"].as_str(), c["used_by_request_id"].as_str()), (Some("used"), first.header("request-id")), "{c}");
    assert_eq!(role(&s.owner, &member_sub).await, "admin");
}

#[tokio::test]
async fn an_approval_binds_what_the_body_names_whether_or_not_anyone_sent_it() {
    let h = harness();
    let s = setup(&h.base, "approval binds the body", json!(true)).await;
    e2e::verified_domain(&s.owner, &s.ws).await;
    let ct = e2e::created(&s.owner, "/contacts", json!({"email": "cee@example.org", "first_name": "Cee"}), 201).await;
    let ct = ct["id"].as_str().unwrap().to_string();
    let erase = serde_json::to_vec(&json!({"subject": {"contact_id": ct}, "reason": "asked"})).unwrap();

    // Minting without the body on a route whose body names the contact: refused, nothing bound blind.
    let blind = json!({"capability": "gdpr.erasure", "method": "POST", "path": "/gdpr/erasures", "idempotency_key": "e",
        "body_sha256": sha(&erase), "preview_summary": "x", "approved_by": "Ada", "api_key_id": s.agent_key_id});
    let r = s.person.post("/capability-confirmations", &blind).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("body")), "{}", r.json);

    // Asked, then the contact is re-pointed before anyone approves: the approval is refused as stale.
    let apr = ask(&s, "POST", "/gdpr/erasures", &erase, "erase-1", "gdpr.erasure").await;
    let a = s.person.get(&format!("/approval-requests/{apr}")).await.json["data"].clone();
    let bound = a["bound"].as_array().unwrap();
    assert!(bound.iter().any(|b| b["object"] == "contact" && b["id"] == ct.as_str() && b["preview"] == "cee@example.org"), "{a}");
    assert!(a["preview"]["summary"].as_str().unwrap().contains("cee@example.org"), "{a}");
    assert_eq!(s.agent.patch(&format!("/contacts/{ct}"), &json!({"email": "dee@example.org"})).await.status, 200);
    let r = s.person.post(&format!("/approval-requests/{apr}/approve"), &json!({})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["meta"]["reason"].as_str()), (409, Some("stale")), "{}", r.json);
    let a = s.person.get(&format!("/approval-requests/{apr}")).await.json["data"].clone();
    assert_eq!((a["state"].as_str(), &a["changed"]), (Some("stale"), &json!([{"object": "contact", "id": ct}])), "{a}");
    let r = send(&s.agent, "POST", "/gdpr/erasures", &erase, Some("erase-1"), None).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["meta"]["approval_state"].as_str()), (428, Some("stale")), "{}", r.json);

    // Approved, then re-pointed: the agent's retry is stale, nothing erased.
    let apr = ask(&s, "POST", "/gdpr/erasures", &erase, "erase-2", "gdpr.erasure").await;
    assert_eq!(s.person.post(&format!("/approval-requests/{apr}/approve"), &json!({})).await.status, 200);
    assert_eq!(s.agent.patch(&format!("/contacts/{ct}"), &json!({"email": "eve@example.org"})).await.status, 200);
    refused(&send(&s.agent, "POST", "/gdpr/erasures", &erase, Some("erase-2"), None).await, "gdpr.erasure", "stale", "erasure");
    assert_eq!(s.owner.get(&format!("/contacts/{ct}")).await.status, 200, "nothing erased");
    assert_eq!(s.owner.get("/gdpr/erasures").await.json["data"].as_array().unwrap().len(), 0);

    // A portal link to the contact: approved for one address, the contact moved, no mail goes.
    let link = serde_json::to_vec(&json!({"contact_id": ct})).unwrap();
    let apr = ask(&s, "POST", "/portal/sessions", &link, "link-1", "emails.send").await;
    assert_eq!(s.person.post(&format!("/approval-requests/{apr}/approve"), &json!({})).await.status, 200);
    assert_eq!(s.agent.patch(&format!("/contacts/{ct}"), &json!({"email": "fay@example.org"})).await.status, 200);
    refused(&send(&s.agent, "POST", "/portal/sessions", &link, Some("link-1"), None).await, "emails.send", "stale", "link");
    let mails = s.owner.get("/emails?limit=100").await.json["data"].as_array().unwrap().len();
    assert_eq!(mails, 0, "no email was written");

    // Denied: the retry is refused naming the denial, and nothing happens.
    let apr = ask(&s, "POST", "/portal/sessions", &link, "link-2", "emails.send").await;
    let r = s.person.post(&format!("/approval-requests/{apr}/deny"), &json!({"reason": "not now"})).await;
    assert_eq!((r.status, r.json["data"]["state"].as_str(), r.json["data"]["reason"].as_str()), (200, Some("denied"), Some("not now")));
    let r = send(&s.agent, "POST", "/portal/sessions", &link, Some("link-2"), None).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["meta"]["approval_state"].as_str()), (428, Some("denied")), "{}", r.json);
    assert_eq!(s.person.post(&format!("/approval-requests/{apr}/approve"), &json!({})).await.status, 409, "a denial is final");
    let denied = s.person.get("/approval-requests?state=denied").await.json["data"].as_array().unwrap().clone();
    assert_eq!(denied.iter().map(|a| a["id"].as_str().unwrap()).collect::<Vec<_>>(), vec![apr.as_str()]);
}

#[tokio::test]
async fn the_preview_is_what_ses_receives() {
    let h = harness();
    let s = setup(&h.base, "approval preview", json!(["emails.send"])).await;
    let domain = e2e::verified_domain(&s.owner, &s.ws).await;
    let tpl = json!({"slug": "invoice", "subject": "Invoice {{ number }} for {{ name }}",
        "html": "<h1>Hello {{name}}</h1><p>You owe {{ amount }} &amp; thanks</p>", "text": "Hello {{name}}, you owe {{ amount }}."});
    e2e::created(&s.owner, "/emails/templates", tpl, 201).await;
    let templated = serde_json::to_vec(&json!({"from": format!("Billing <bill@{domain}>"), "to": ["ann@example.org"],
        "template_slug": "invoice", "variables": {"number": "A-1", "name": "Ann <&>", "amount": "12 €"}}))
    .unwrap();
    let batch = serde_json::to_vec(&json!({"emails": [
        {"from": format!("news@{domain}"), "to": ["bo@example.org"], "subject": "Plain news", "text": "Line one\nLine two"},
        {"from": format!("news@{domain}"), "to": ["cy@example.org"], "template_slug": "invoice",
         "variables": {"number": "B-2", "name": "Cy", "amount": "3"}},
    ]}))
    .unwrap();
    let one = ask(&s, "POST", "/emails", &templated, "tpl-1", "emails.send").await;
    let many = ask(&s, "POST", "/emails/batch", &batch, "batch-1", "emails.send").await;
    // A helpdesk reply to a customer's conversation.
    let ct = e2e::created(&s.owner, "/contacts", json!({"email": "dee@example.org"}), 201).await;
    let conv = e2e::created(
        &s.owner,
        "/helpdesk/conversations",
        json!({"subject": "Where is my order?", "mailbox": format!("support@{domain}"), "contact_id": ct["id"],
            "message": {"type": "inbound", "body_text": "Hello?"}}),
        201,
    )
    .await;
    let reply_path = format!("/helpdesk/conversations/{}/messages", conv["id"].as_str().unwrap());
    let reply = serde_json::to_vec(&json!({"type": "reply", "body_text": "It ships today.", "body_html": "<p>It ships <b>today</b>.</p>"}))
        .unwrap();
    let answer = ask(&s, "POST", &reply_path, &reply, "reply-1", "emails.send").await;
    let person = &s.person;
    let preview = |id: String| async move { person.get(&format!("/approval-requests/{id}")).await.json["data"].clone() };
    let (one, many, answer) = (preview(one).await, preview(many).await, preview(answer).await);
    let r = &answer["preview"]["emails"][0];
    assert_eq!((r["subject"].as_str(), r["to"][0].as_str()), (Some("Re: Where is my order?"), Some("dee@example.org")), "{answer}");
    let p = &one["preview"]["emails"][0];
    assert_eq!((p["subject"].as_str(), p["to"][0].as_str()), (Some("Invoice A-1 for Ann <&>"), Some("ann@example.org")), "{one}");
    assert_eq!(many["preview"]["emails"].as_array().unwrap().len(), 2, "{many}");
    assert!(one["preview"]["summary"].as_str().unwrap().contains("ann@example.org"), "{one}");
    for a in [&one, &many, &answer] {
        let r = s.person.post(&format!("/approval-requests/{}/approve", a["id"].as_str().unwrap()), &json!({})).await;
        assert_eq!(r.status, 200, "{}", r.json);
    }
    let sent_one = send(&s.agent, "POST", "/emails", &templated, Some("tpl-1"), None).await;
    assert_eq!(sent_one.status, 202, "{}", sent_one.json);
    let sent_many = send(&s.agent, "POST", "/emails/batch", &batch, Some("batch-1"), None).await;
    assert_eq!(sent_many.status, 202, "{}", sent_many.json);
    let sent_reply = send(&s.agent, "POST", &reply_path, &reply, Some("reply-1"), None).await;
    assert_eq!(sent_reply.status, 201, "{}", sent_reply.json);
    let ids = [
        (sent_one.json["data"]["id"].as_str().unwrap().to_string(), one["preview"]["emails"][0].clone()),
        (sent_many.json["data"]["emails"][0]["id"].as_str().unwrap_or_default().to_string(), many["preview"]["emails"][0].clone()),
        (sent_many.json["data"]["emails"][1]["id"].as_str().unwrap_or_default().to_string(), many["preview"]["emails"][1].clone()),
        (sent_reply.json["data"]["email_id"].as_str().unwrap_or_default().to_string(), answer["preview"]["emails"][0].clone()),
    ];
    for (id, shown) in ids.iter().filter(|(id, _)| !id.is_empty()) {
        let mut got = None;
        for _ in 0..150 {
            let e = s.owner.get(&format!("/emails/{id}")).await;
            if let Some(pm) = e.json["data"]["provider_message_id"].as_str()
                && let Some(m) = h.ses_sent().await.into_iter().find(|m| m["id"] == pm)
            {
                got = Some(m);
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        let m = got.unwrap_or_else(|| panic!("email {id} was not sent"));
        // moto records the subject and the HTML body (the text one when there is no HTML).
        assert_eq!(m["subject"], shown["subject"], "{m} / {shown}");
        let body = shown["html"].as_str().or(shown["text"].as_str()).unwrap();
        assert_eq!(m["body"].as_str(), Some(body), "the body SES got is the one the person saw");
    }
    assert_eq!(ids.iter().filter(|(id, _)| !id.is_empty()).count(), 4, "every email found: {} {}", sent_many.json, sent_reply.json);
}

#[tokio::test]
async fn two_approvers_at_once_mint_one_confirmation_and_an_expired_request_mints_none() {
    let h = harness();
    let s = setup(&h.base, "approval races", json!(true)).await;
    let (other, _) = member(&s, "owner").await;
    let body = br#"{"url":"http://127.0.0.1:9/hook"}"#;
    let apr = ask(&s, "POST", "/webhooks", body, "race-1", "webhooks.create").await;
    let url = format!("/approval-requests/{apr}/approve");
    let empty = json!({});
    let (a, b) = tokio::join!(s.person.post(&url, &empty), other.post(&url, &empty));
    let mut statuses = [a.status, b.status];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409], "{} / {}", a.json, b.json);
    let minted = s.person.get("/capability-confirmations?capability=webhooks.create").await.json["data"].as_array().unwrap().len();
    assert_eq!(minted, 1, "one confirmation");
    let hooks = || async { s.owner.get("/webhooks").await.json["data"].as_array().unwrap().len() };
    let (first, second) = tokio::join!(
        send(&s.agent, "POST", "/webhooks", body, Some("race-1"), None),
        send(&s.agent, "POST", "/webhooks", body, Some("race-1"), None)
    );
    assert!([first.status, second.status].contains(&201), "{} / {}", first.json, second.json);
    assert_eq!(hooks().await, 1, "one endpoint");
    let hook_id = s.owner.get("/webhooks").await.json["data"][0]["id"].as_str().unwrap().to_string();

    // Expired before anyone decided: the minute sweep announces it (approval.expired), approving
    // mints nothing, and the same request asks anew. Its time is moved into the past in the
    // table (no test waits a day): the request's and its due entry's.
    let apr = ask(&s, "POST", "/webhooks", body, "late-1", "webhooks.create").await;
    let app = h.app().await;
    let (ws, apr_id) = (shared::ids::WorkspaceId::trusted(&s.ws), domain::ids::ApprovalRequestId::trusted(&apr));
    let pk = shared::store::ws_pk(&ws);
    let item = app.db.get(&pk, &domain::keys::APPROVAL_REQUEST.sk(&apr_id)).await.unwrap().unwrap();
    let (due_pk, due_sk) = shared::approvals::due_key(&ws, &apr_id, shared::store::get_i64(&item, "expires_ms").unwrap());
    assert!(app.db.get(&due_pk, &due_sk).await.unwrap().is_some(), "a pending request has its due entry");
    let past = shared::ids::now_ms() - 1;
    app.db.delete(&due_pk, &due_sk).await.unwrap();
    app.db.put(shared::approvals::due_item(&ws, &apr_id, past)).apply().await.unwrap();
    app.db
        .update(pk.clone(), domain::keys::APPROVAL_REQUEST.sk(&apr_id), "SET expires_ms = :past")
        .value(":past", shared::store::n(past))
        .required()
        .await
        .unwrap();
    let r = s.person.post(&format!("/approval-requests/{apr}/approve"), &json!({})).await;
    assert_eq!(r.status, 409, "{}", r.json);
    // The stack's own minute sweep may get there first; either way it expires once.
    shared::approvals::expire_due(&app, shared::ids::now_ms(), 100).await.unwrap();
    let stored = app.db.get(&pk, &domain::keys::APPROVAL_REQUEST.sk(&apr_id)).await.unwrap().unwrap();
    assert_eq!(shared::store::get_str(&stored, "approval_state"), Some("expired"));
    assert!(app.db.get(&due_pk, &shared::approvals::due_key(&ws, &apr_id, past).1).await.unwrap().is_none(), "swept once");
    let mut announced = false;
    for _ in 0..100 {
        let d = s.owner.get(&format!("/webhooks/{}/deliveries", hook_id)).await.json["data"].clone();
        if d.as_array().unwrap().iter().any(|d| d["event_type"] == "approval.expired") {
            announced = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(announced, "approval.expired reached the workspace's webhook");
    let expired = s.person.get("/approval-requests?state=expired").await.json["data"].as_array().unwrap().clone();
    assert!(expired.iter().any(|a| a["id"] == apr.as_str()));
    let pending = s.person.get("/approval-requests?state=pending").await.json["data"].as_array().unwrap().clone();
    assert!(pending.iter().all(|a| a["id"] != apr.as_str()));
    assert_ne!(ask(&s, "POST", "/webhooks", body, "late-1", "webhooks.create").await, apr, "asked anew");
    assert_eq!(hooks().await, 1);
}

#[tokio::test]
async fn a_restricted_key_reads_an_exports_state_never_its_link() {
    let h = harness();
    let s = setup(&h.base, "restricted export reads", json!(["gdpr.export.subject", "gdpr.export.workspace"])).await;
    let ct = e2e::created(&s.owner, "/contacts", json!({"email": "gail@example.org"}), 201).await;
    let subject = e2e::created(&s.owner, "/gdpr/exports", json!({"subject": {"contact_id": ct["id"]}}), 202).await;
    let workspace = e2e::created(&s.owner, "/gdpr/exports", json!({"scope": "workspace"}), 202).await;
    for job in [subject, workspace] {
        let path = format!("/gdpr/exports/{}", job["id"].as_str().unwrap());
        let mut done = Value::Null;
        for _ in 0..150 {
            done = s.owner.get(&path).await.json["data"].clone();
            if done["status"] == "completed" {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        assert!(done["download_url"].is_string(), "the owner gets the link: {done}");
        let seen = s.agent.get(&path).await.json["data"].clone();
        assert_eq!(seen["status"], "completed", "{seen}");
        assert!(seen.get("download_url").is_none(), "a key that needs a confirmation to export sees no link: {seen}");
    }
}

/// The hosted approval page in a real browser (tests/browser/approvals.mjs), signing in through
/// the local OpenID provider (oidc-provider): a member approves an email, is offered nothing on
/// an admin's effect; an admin approves one webhook and denies another. Then the agent's same
/// requests: each approved one runs exactly once, the denied one never.
#[tokio::test]
async fn the_approval_pages_work_in_a_real_browser() {
    // A resource indicator is an absolute URI (RFC 8707).
    const AUDIENCE: &str = "urn:workspace-platform:api";
    let h = harness();
    let (ws, key) = h.workspace("Approvals in a browser").await;
    let owner = Client::new(&h.base, &key);
    let domain = e2e::verified_domain(&owner, &ws).await;
    let slug = owner.get("/workspaces/current").await.json["data"]["slug"].as_str().unwrap().to_string();
    let unique = shared::ids::new_id("u").to_ascii_lowercase();
    let (member_sub, admin_sub) = (format!("member-{unique}"), format!("admin-{unique}"));
    let app = h.app().await;
    let wsid = shared::auth::WorkspaceId::trusted(ws.clone());
    domain::workspaces::add_member(&app, &wsid, &member_sub, "member").await.unwrap();
    domain::workspaces::add_member(&app, &wsid, &admin_sub, "admin").await.unwrap();
    let accounts = [
        tools::oidc::Account { login: "member@demo.test".into(), password: "member-pass".into(), sub: member_sub.clone() },
        tools::oidc::Account { login: "admin@demo.test".into(), password: "admin-pass".into(), sub: admin_sub.clone() },
    ];
    // The pages' gateway trusts the provider, whose one redirect URI is on that gateway.
    let listener = tools::gateway::bind(0).await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let issuer = tools::oidc::DevIssuer::start(AUDIENCE, &[format!("{origin}/approvals/callback")], &accounts).await.expect("provider");
    let mut cfg = h.generous_config();
    cfg.oauth = Some(issuer.oauth(AUDIENCE));
    let origin = h.pages_gateway_on(listener, cfg).await;
    let api = format!("{origin}/api/v1");
    let r = Client::new(&api, &key)
        .post(
            "/workspaces/current/api-keys",
            &json!({"name": "agent", "scopes": ["read", "write", "admin"], "requires_confirmation": true}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    let agent = Client::new(&api, r.json["data"]["secret"].as_str().unwrap());

    let subject = format!("Invoice {unique}");
    let mail = serde_json::to_vec(&json!({"from": format!("bill@{domain}"), "to": ["ann@example.org"], "subject": subject,
        "html": "<h2>Your invoice</h2><p>12 &euro; due. <a href=\"https://evil.example/pay\">Pay at bank.example</a></p><img src=\"https://t.example/pixel.gif\"><script>alert(1)</script>",
        "text": "Your invoice: 12 EUR due."}))
    .unwrap();
    let hook = serde_json::to_vec(&json!({"url": "http://127.0.0.1:9/approved"})).unwrap();
    let other = serde_json::to_vec(&json!({"url": "http://127.0.0.1:9/denied"})).unwrap();
    let page_of = |r: &Resp| {
        assert_eq!(r.status, 428, "{}", r.json);
        r.json["error"]["details"][0]["meta"]["approval_url"].as_str().expect("the 428 links its page").to_string()
    };
    let email_page = page_of(&send(&agent, "POST", "/emails", &mail, Some("mail-1"), None).await);
    let hook_page = page_of(&send(&agent, "POST", "/webhooks", &hook, Some("hook-1"), None).await);
    let deny_page = page_of(&send(&agent, "POST", "/webhooks", &other, Some("hook-2"), None).await);
    assert!(email_page.starts_with(&format!("{origin}/approvals/{slug}/requests/apr_")), "{email_page}");
    // The email's value as the API shows it: the page must name every one of its fields.
    let apr = email_page.rsplit('/').next().unwrap();
    let shown = Client::new(&api, &key).get(&format!("/approval-requests/{apr}")).await.json["data"]["effect_value"].clone();
    assert!(shown["digest"].is_string(), "{shown}");

    let shots = match std::env::var("APPROVAL_SCREENSHOTS") {
        Ok(dir) if !dir.is_empty() => dir,
        _ => tools::localstack::repo_root().join("target/approval-screenshots").to_string_lossy().into_owned(),
    };
    let out = tokio::process::Command::new("node")
        .arg(tools::localstack::repo_root().join("tests/browser/approvals.mjs"))
        .env("EMAIL_PAGE", &email_page)
        .env("HOOK_PAGE", &hook_page)
        .env("DENY_PAGE", &deny_page)
        .env("HOME_PAGE", format!("{origin}/approvals/{slug}/"))
        .env("MEMBER_LOGIN", &accounts[0].login)
        .env("MEMBER_PASSWORD", &accounts[0].password)
        .env("ADMIN_LOGIN", &accounts[1].login)
        .env("ADMIN_PASSWORD", &accounts[1].password)
        .env("EMAIL_SUBJECT", &subject)
        .env("EMAIL_VALUE", shown.to_string())
        .env("SHOTS_DIR", &shots)
        .kill_on_drop(true)
        .output()
        .await
        .expect("node runs");
    let log = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the browser flows failed:\n{log}");
    println!("{log}");

    // The agent's same requests: approved ones run once, the denied one never.
    for _ in 0..2 {
        let r = send(&agent, "POST", "/emails", &mail, Some("mail-1"), None).await;
        assert_eq!(r.status, 202, "{}", r.json);
        let r = send(&agent, "POST", "/webhooks", &hook, Some("hook-1"), None).await;
        assert_eq!(r.status, 201, "{}", r.json);
    }
    let r = send(&agent, "POST", "/webhooks", &other, Some("hook-2"), None).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["meta"]["approval_state"].as_str()), (428, Some("denied")), "{}", r.json);
    let hooks = owner.get("/webhooks").await.json["data"].as_array().unwrap().clone();
    assert_eq!(hooks.iter().map(|w| w["url"].as_str().unwrap()).collect::<Vec<_>>(), vec!["http://127.0.0.1:9/approved"]);
    let emails = owner.get("/emails?limit=100").await.json["data"].as_array().unwrap().clone();
    assert_eq!(emails.iter().filter(|e| e["subject"] == subject.as_str()).count(), 1);
    // Who decided, in the audit: the people the provider signed in.
    let decided = owner.get("/approval-requests?limit=10").await.json["data"].as_array().unwrap().clone();
    let by: Vec<&str> = decided.iter().filter_map(|a| a["decided_by"].as_str()).collect();
    assert!(by.contains(&member_sub.as_str()) && by.contains(&admin_sub.as_str()), "{by:?}");
}

// ---------- effects as values: what a person approves is exactly what runs ----------

/// The approval request as the person reads it over the API.
async fn approval(s: &Setup, apr: &str) -> Value {
    let r = s.person.get(&format!("/approval-requests/{apr}")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    r.json["data"].clone()
}

/// An approved run refused because what it would do changed: 428 `stale`, naming the fields.
fn refused_as_changed(r: &Resp, capability: &str, what: &str) -> Vec<String> {
    refused(r, capability, "stale", what);
    let meta = &r.json["error"]["details"][0]["meta"];
    assert_eq!(meta["stale"]["object"], "effect", "{what}: {}", r.json);
    meta["fields"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: the fields that differ: {}", r.json))
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn an_approved_erasure_of_an_address_nobody_holds_erases_nobody_else() {
    let h = harness();
    let s = setup(&h.base, "value: erasure", json!(true)).await;
    let rx = e2e::receiver::Receiver::start().await;
    let hook =
        s.owner.post("/webhooks", &json!({"url": rx.url, "event_types": ["capability.used", "approval.approved", "approval.stale"]})).await;
    assert_eq!(hook.status, 201, "{}", hook.json);
    let d = e2e::created(&s.owner, "/contacts", json!({"email": "dora@example.org", "first_name": "Dora"}), 201).await;
    let d_id = d["id"].as_str().unwrap().to_string();
    let body = serde_json::to_vec(&json!({"subject": {"email": "ghost@example.org"}, "reason": "Art. 17"})).unwrap();

    // Asked: the value says whom it erases, nobody; the person approves that.
    let apr = ask(&s, "POST", "/gdpr/erasures", &body, "ghost-1", "gdpr.erasure").await;
    let a = approval(&s, &apr).await;
    let v = &a["effect_value"];
    assert_eq!(
        v["value"]["subject"],
        json!({"contact_id": null, "email": "ghost@example.org", "former_emails": [], "phones": [], "names": []}),
        "{a}"
    );
    assert_eq!(v["value"]["reason"], "Art. 17");
    let digest = v["digest"].as_str().unwrap().to_string();
    let r = s.person.post(&format!("/approval-requests/{apr}/approve"), &json!({})).await;
    assert_eq!(r.status, 200, "{}", r.json);

    // The agent moves Dora onto the address and back (plain writes, no approval): she is now the
    // address's last former holder, whom the erasure would resolve to.
    for email in ["ghost@example.org", "dora@example.org"] {
        let r = s.agent.patch(&format!("/contacts/{d_id}"), &json!({"email": email})).await;
        assert_eq!(r.status, 200, "{}", r.json);
    }
    let r = send(&s.agent, "POST", "/gdpr/erasures", &body, Some("ghost-1"), None).await;
    let fields = refused_as_changed(&r, "gdpr.erasure", "the redirected erasure");
    assert!(fields.contains(&"/subject/contact_id".to_string()), "{fields:?}");
    assert_eq!(s.owner.get(&format!("/contacts/{d_id}")).await.status, 200, "Dora is not erased");
    assert_eq!(s.owner.get("/gdpr/erasures").await.json["data"].as_array().map(|l| l.len()), Some(0), "no erasure began");
    let a = approval(&s, &apr).await;
    assert_eq!(a["state"], "stale", "{a}");
    assert!(a["changed_fields"].as_array().unwrap().contains(&json!("/subject/contact_id")), "{a}");
    // The same request again reads the request's state, not a spent confirmation.
    let again = send(&s.agent, "POST", "/gdpr/erasures", &body, Some("ghost-1"), None).await;
    refused(&again, "gdpr.erasure", "missing", "after stale");
    assert_eq!(again.json["error"]["details"][0]["meta"]["approval_state"], "stale", "{}", again.json);

    // Receipts: the confirmation's use and the approval carry the digest the person was shown.
    let got = rx
        .wait_until(30, |g| g.iter().any(|r| r.event_type() == "capability.used") && g.iter().any(|r| r.event_type() == "approval.stale"))
        .await;
    let used = got.iter().find(|r| r.event_type() == "capability.used").expect("capability.used delivered").json();
    assert_eq!(
        (used["data"]["effect_digest"].as_str(), used["data"]["approval_request_id"].as_str()),
        (Some(digest.as_str()), Some(apr.as_str())),
        "{used}"
    );
    let approved = got.iter().find(|r| r.event_type() == "approval.approved").expect("approval.approved delivered").json();
    assert_eq!(approved["data"]["effect_digest"].as_str(), Some(digest.as_str()), "{approved}");
    assert!(approved["data"]["decided_by"].is_string() && approved["data"]["decided_at"].is_string(), "{approved}");

    // Asked anew, the value names Dora; approved unchanged, it runs once.
    let apr = ask(&s, "POST", "/gdpr/erasures", &body, "ghost-2", "gdpr.erasure").await;
    let a = approval(&s, &apr).await;
    assert_eq!(a["effect_value"]["value"]["subject"]["contact_id"].as_str(), Some(d_id.as_str()), "{a}");
    assert_eq!(s.person.post(&format!("/approval-requests/{apr}/approve"), &json!({})).await.status, 200);
    let r = send(&s.agent, "POST", "/gdpr/erasures", &body, Some("ghost-2"), None).await;
    assert_eq!(r.status, 202, "what was approved runs: {}", r.json);
}

#[tokio::test]
async fn an_email_is_approved_with_its_files_and_time_and_refused_when_its_recipients_change() {
    use base64::Engine;
    let h = harness();
    let s = setup(&h.base, "value: email", json!(["emails.send"])).await;
    let domain = e2e::verified_domain(&s.owner, &s.ws).await;
    let ct = e2e::created(&s.owner, "/contacts", json!({"email": "fay@example.org"}), 201).await;
    let csv = b"name,email\nAda,ada@example.org\n";
    let at = (chrono::Utc::now() + chrono::Duration::hours(2)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let body = serde_json::to_vec(&json!({"from": format!("news@{domain}"), "to": ["fay@example.org"], "subject": "Customers",
        "html": "<p>See <a href=\"https://evil.example/login\">your account at bank.example</a></p><img src=\"https://t.example/p.gif\">",
        "scheduled_at": at,
        "attachments": [{"filename": "customers.csv", "content_type": "text/csv", "content": base64::engine::general_purpose::STANDARD.encode(csv)}]}))
    .unwrap();
    let apr = ask(&s, "POST", "/emails", &body, "files-1", "emails.send").await;
    let a = approval(&s, &apr).await;
    let m = &a["effect_value"]["value"]["messages"][0];
    assert_eq!(m["attachments"][0]["filename"], "customers.csv", "{a}");
    assert_eq!(m["attachments"][0]["size"], csv.len());
    assert_eq!(m["attachments"][0]["sha256"].as_str(), Some(sha(csv).as_str()));
    assert_eq!(m["send_at"].as_str().map(|t| t.trim_end_matches('Z').trim_end_matches(".000")), Some(at.trim_end_matches('Z')), "{m}");
    assert_eq!((m["status"].as_str(), m["to"][0].as_str()), (Some("scheduled"), Some("fay@example.org")));
    assert_eq!(a["preview"]["emails"][0]["subject"], "Customers", "the summary's view stays");
    assert_eq!(s.person.post(&format!("/approval-requests/{apr}/approve"), &json!({})).await.status, 200);

    // Between the approval and the run the recipient unsubscribes: the email would now be
    // suppressed, which is not what the person approved. Nothing is bound by version here; the
    // value's digest decides.
    let r = s.owner.patch(&format!("/contacts/{}", ct["id"].as_str().unwrap()), &json!({"email_status": "unsubscribed"})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let before = s.owner.get("/emails").await.json["data"].as_array().unwrap().len();
    let r = send(&s.agent, "POST", "/emails", &body, Some("files-1"), None).await;
    let fields = refused_as_changed(&r, "emails.send", "the email to a recipient who left");
    assert!(fields.iter().any(|f| f.starts_with("/messages/0/status") || f.starts_with("/messages/0/suppressed_recipients")), "{fields:?}");
    assert_eq!(s.owner.get("/emails").await.json["data"].as_array().unwrap().len(), before, "nothing was written");
}

#[tokio::test]
async fn an_invalid_request_is_refused_before_anyone_is_asked() {
    let h = harness();
    let s = setup(&h.base, "value: validate first", json!(true)).await;
    let domain = e2e::verified_domain(&s.owner, &s.ws).await;
    let entries: Vec<Value> = (0..400)
        .map(|i| json!({"from": format!("n@{domain}"), "to": [format!("r{i}@example.org")], "subject": "s", "text": "t"}))
        .collect();
    let batch = serde_json::to_vec(&json!({"emails": entries})).unwrap();
    for (c, key) in [(&s.owner, "big-owner"), (&s.agent, "big-agent")] {
        let r = send(c, "POST", "/emails/batch", &batch, Some(key), None).await;
        assert_eq!((r.status, r.code()), (400, "VALIDATION_ERROR"), "{}", r.json);
    }
    let erase = serde_json::to_vec(&json!({"subject": {"email": "not an address"}, "reason": "r"})).unwrap();
    let r = send(&s.agent, "POST", "/gdpr/erasures", &erase, Some("bad-1"), None).await;
    assert_eq!(r.status, 400, "{}", r.json);
    assert_eq!(s.person.get("/approval-requests").await.json["data"].as_array().map(|l| l.len()), Some(0), "nobody was asked");
}

#[tokio::test]
async fn a_channel_change_shows_where_posts_will_go_and_never_a_secret() {
    let h = harness();
    let s = setup(&h.base, "value: channel", json!(true)).await;
    let (now, next) = tokio::join!(e2e::receiver::Receiver::start(), e2e::receiver::Receiver::start());
    let ch = e2e::created(&s.owner, "/channels", json!({"type": "webhook", "name": "site", "credentials": {"url": now.url}}), 201).await;
    let secret = ch["secret"].as_str().unwrap().to_string();
    let path = format!("/channels/{}", ch["id"].as_str().unwrap());
    let body = serde_json::to_vec(&json!({"credentials": {"url": next.url}})).unwrap();
    let apr = ask(&s, "PATCH", &path, &body, "move-1", "channels.update").await;
    let a = approval(&s, &apr).await;
    let v = &a["effect_value"]["value"];
    assert_eq!(
        (v["destination"]["url"].as_str(), v["new_destination"]["url"].as_str()),
        (Some(now.url.as_str()), Some(next.url.as_str())),
        "{a}"
    );
    assert_eq!((v["destination"]["network"].as_str(), v["new_destination"]["secret"].as_str()), (Some("webhook"), Some("kept")), "{a}");
    assert!(!a.to_string().contains(&secret), "the signing secret is never shown: {a}");
    assert_eq!(s.person.post(&format!("/approval-requests/{apr}/approve"), &json!({})).await.status, 200);
    let r = send(&s.agent, "PATCH", &path, &body, Some("move-1"), None).await;
    assert_eq!(r.status, 200, "{}", r.json);

    // A new endpoint's value is what it will receive, where; one the agent asks for is refused
    // until approved, and runs as approved.
    let hook = serde_json::to_vec(&json!({"url": next.url, "event_types": ["contact.created"]})).unwrap();
    let apr = ask(&s, "POST", "/webhooks", &hook, "hook-1", "webhooks.create").await;
    let v = approval(&s, &apr).await["effect_value"]["value"].clone();
    assert_eq!(v, json!({"url": next.url, "event_types": ["contact.created"], "enabled": true, "description": null, "metadata": {}}));
}

#[tokio::test]
async fn only_a_fresh_sign_in_at_an_approver_client_approves() {
    let h = harness();
    let s = setup(&h.base, "approver client", json!(true)).await;
    let body = br#"{"url":"http://127.0.0.1:9/hook"}"#;
    let apr = ask(&s, "POST", "/webhooks", body, "client-1", "webhooks.create").await;
    let subject = {
        // The setup's approver: an admin of the workspace.
        let members = s.owner.get("/workspaces/current/members?limit=100").await.json["data"].as_array().unwrap().clone();
        members.iter().find(|m| m["role"] == "admin").unwrap()["subject"].as_str().unwrap().to_string()
    };
    let as_token = |client: Option<&str>, ago: i64| {
        let t =
            tools::admin::mint_token_signed_in(tools::admin::DEV_ISSUER, &subject, "read write admin confirm", 600, client, ago).unwrap();
        let mut c = Client::new(&s.base, &t);
        c.workspace = Some(s.ws.clone());
        c
    };
    for (client, ago, rule) in
        [(Some("agent-app"), 0, "approver client"), (None, 0, "approver client"), (Some(tools::oidc::CLIENT_ID), 3600, "fresh sign-in")]
    {
        for (url, body) in
            [(format!("/approval-requests/{apr}/approve"), json!({})), (format!("/approval-requests/{apr}/deny"), json!({"reason": "x"}))]
        {
            let r = as_token(client, ago).post(&url, &body).await;
            assert_eq!((r.status, r.code()), (403, "FORBIDDEN"), "{client:?} {ago}s ago: {}", r.json);
            assert!(r.json["error"]["message"].as_str().unwrap().contains(rule), "{}", r.json);
        }
        // Minting directly follows the same rule.
        let mint = json!({"capability": "webhooks.create", "method": "POST", "path": "/webhooks", "idempotency_key": "m",
            "body_sha256": sha(body), "preview_summary": "x", "approved_by": "x", "api_key_id": s.agent_key_id});
        assert_eq!(as_token(client, ago).post("/capability-confirmations", &mint).await.status, 403);
    }
    assert_eq!(approval(&s, &apr).await["state"], "pending", "nothing decided");
    let r = as_token(Some(tools::oidc::CLIENT_ID), 5).post(&format!("/approval-requests/{apr}/approve"), &json!({})).await;
    assert_eq!(r.status, 200, "{}", r.json);
}

#[tokio::test]
async fn a_confirmation_without_the_values_digest_runs_no_valued_effect() {
    let h = harness();
    let s = setup(&h.base, "value: digestless", json!(true)).await;
    let body = serde_json::to_vec(&json!({"name": "Renamed by the agent"})).unwrap();
    let path = "/workspaces/current";
    // Minted directly, naming no value: the settings' value is built at the run and nothing
    // a person saw matches it.
    let (_, token) = mint_with(&s, "workspaces.update", "PATCH", path, "rename-1", &body, json!({"effect_digest": null})).await;
    let r = send(&s.agent, "PATCH", path, &body, Some("rename-1"), Some(&token)).await;
    refused(&r, "workspaces.update", "mismatch", "a digestless token");
    assert_eq!(r.json["error"]["details"][0]["meta"]["mismatch"], "effect_digest", "{}", r.json);
    assert_ne!(s.owner.get(path).await.json["data"]["name"], "Renamed by the agent", "nothing ran");
    // The digest must be one.
    let bad = json!({"capability": "workspaces.update", "method": "PATCH", "path": path, "idempotency_key": "rename-2",
        "body_sha256": sha(&body), "preview_summary": "x", "approved_by": "Ada", "api_key_id": s.agent_key_id,
        "effect_digest": "not-a-digest"});
    let r = s.person.post("/capability-confirmations", &bad).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("effect_digest")), "{}", r.json);
    // With the digest the approval request shows, a direct mint runs it once, as shown.
    let apr = ask(&s, "PATCH", path, &body, "rename-3", "workspaces.update").await;
    let a = approval(&s, &apr).await;
    assert_eq!(a["effect_value"]["value"]["changes"]["name"]["after"], "Renamed by the agent", "{a}");
    let digest = a["effect_value"]["digest"].as_str().unwrap();
    let (_, token) = mint_with(&s, "workspaces.update", "PATCH", path, "rename-3", &body, json!({"effect_digest": digest})).await;
    let r = send(&s.agent, "PATCH", path, &body, Some("rename-3"), Some(&token)).await;
    assert_eq!((r.status, r.json["data"]["name"].as_str()), (200, Some("Renamed by the agent")), "{}", r.json);
}

#[tokio::test]
async fn keys_members_and_settings_are_approved_as_what_they_will_become() {
    let h = harness();
    let s = setup(&h.base, "value: admin effects", json!(true)).await;
    // A new key: its name, scopes and restrictions (never a secret: it is made after).
    let body = serde_json::to_vec(&json!({"name": "ci", "scopes": ["read"]})).unwrap();
    let apr = ask(&s, "POST", "/workspaces/current/api-keys", &body, "key-1", "api_keys.create").await;
    let v = approval(&s, &apr).await["effect_value"]["value"].clone();
    assert_eq!(v, json!({"name": "ci", "scopes": ["read"], "requires_confirmation": true}), "inherits the asker's restriction");
    // A member: who, the role they have, the one they get.
    let body = serde_json::to_vec(&json!({"role": "admin"})).unwrap();
    let apr = ask(&s, "PUT", "/workspaces/current/members/newcomer", &body, "member-1", "members.change").await;
    let v = approval(&s, &apr).await["effect_value"]["value"].clone();
    assert_eq!(v, json!({"subject": "newcomer", "old_role": null, "new_role": "admin"}));
    // Settings: only the fields that change, each before and after; one changed by someone
    // else between approval and run makes the run stale, naming it.
    let body = serde_json::to_vec(&json!({"timezone": "Europe/Oslo", "name": "Same"})).unwrap();
    assert_eq!(s.owner.patch("/workspaces/current", &json!({"name": "Same", "timezone": "UTC"})).await.status, 200);
    let apr = ask(&s, "PATCH", "/workspaces/current", &body, "tz-1", "workspaces.update").await;
    let v = approval(&s, &apr).await["effect_value"]["value"].clone();
    assert_eq!(v["changes"], json!({"timezone": {"before": "UTC", "after": "Europe/Oslo"}}), "{v}");
    assert_eq!(s.person.post(&format!("/approval-requests/{apr}/approve"), &json!({})).await.status, 200);
    assert_eq!(s.owner.patch("/workspaces/current", &json!({"timezone": "Europe/Berlin"})).await.status, 200);
    let r = send(&s.agent, "PATCH", "/workspaces/current", &body, Some("tz-1"), None).await;
    let fields = refused_as_changed(&r, "workspaces.update", "settings changed since");
    assert_eq!(fields, vec!["/changes/timezone/before".to_string()], "{}", r.json);
    assert_eq!(s.owner.get("/workspaces/current").await.json["data"]["timezone"], "Europe/Berlin", "nothing ran");
}

#[tokio::test]
async fn deletions_rotations_and_handed_sessions_are_approved_as_values() {
    let h = harness();
    let s = setup(&h.base, "value: deletions", json!(true)).await;
    let site = e2e::receiver::Receiver::start().await;
    // A channel's deletion: where it posted, and no secret.
    let ch = e2e::created(&s.owner, "/channels", json!({"type": "webhook", "name": "site", "credentials": {"url": site.url}}), 201).await;
    let path = format!("/channels/{}", ch["id"].as_str().unwrap());
    let apr = ask(&s, "DELETE", &path, b"", "drop-1", "channels.delete").await;
    let v = approval(&s, &apr).await["effect_value"]["value"].clone();
    assert_eq!((v["destination"]["url"].as_str(), v["destination"]["secret"].as_str()), (Some(site.url.as_str()), Some("current")), "{v}");
    assert_eq!(v["network"], "webhook", "{v}");
    // A post published now: what each channel gets, and no time (it is now whenever it runs).
    let post = e2e::created(&s.owner, "/posts", json!({"content": "Hello", "language": "en", "channel_ids": [ch["id"]]}), 201).await;
    let publish = format!("/posts/{}/publish", post["id"].as_str().unwrap());
    let apr = ask(&s, "POST", &publish, b"", "publish-1", "posts.publish").await;
    let v = approval(&s, &apr).await["effect_value"]["value"].clone();
    assert_eq!((v["at"].clone(), v["language"].clone()), (Value::Null, json!("en")), "{v}");
    assert_eq!((v["variants"][0]["channel_id"].clone(), v["variants"][0]["text"].clone()), (ch["id"].clone(), json!("Hello")), "{v}");
    assert!(!v.to_string().contains(ch["secret"].as_str().unwrap()), "{v}");
    // A rotation: the endpoint, its URL and the grace period (the new secret is made after).
    let hook = e2e::created(&s.owner, "/webhooks", json!({"url": site.url, "event_types": ["contact.created"]}), 201).await;
    let rotate = format!("/webhooks/{}/rotate-secret", hook["id"].as_str().unwrap());
    let apr = ask(&s, "POST", &rotate, br#"{"grace_period_seconds": 60}"#, "rotate-1", "webhooks.rotate_secret").await;
    let v = approval(&s, &apr).await["effect_value"]["value"].clone();
    assert_eq!(v, json!({"endpoint_id": hook["id"], "url": site.url, "grace_period_seconds": 60}));
    // A session handed to the caller: whose, at which address; the contact moving to another
    // address after the approval makes the run stale, and no session is opened.
    let ct = e2e::created(&s.owner, "/contacts", json!({"email": "hand@example.com"}), 201).await;
    let id = ct["id"].as_str().unwrap();
    let body = serde_json::to_vec(&json!({"contact_id": id, "delivery": "return"})).unwrap();
    let apr = ask(&s, "POST", "/portal/sessions", &body, "hand-1", "portal.sessions.return").await;
    let v = approval(&s, &apr).await["effect_value"]["value"].clone();
    assert_eq!(v, json!({"contact_id": id, "email": "hand@example.com", "return_url": null}));
    assert_eq!(s.person.post(&format!("/approval-requests/{apr}/approve"), &json!({})).await.status, 200);
    assert_eq!(s.owner.patch(&format!("/contacts/{id}"), &json!({"email": "other@example.com"})).await.status, 200);
    let r = send(&s.agent, "POST", "/portal/sessions", &body, Some("hand-1"), None).await;
    assert!(r.json.get("data").is_none(), "no session: {}", r.json);
    assert_eq!(r.status, 428, "{}", r.json);
}
