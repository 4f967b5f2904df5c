//! Webhooks end to end: endpoints over HTTP, events through outbox -> SQS -> dispatcher, and
//! deliveries received by real HTTP receivers on 127.0.0.1 that verify signatures themselves.

use e2e::receiver::{Received, Receiver};
use e2e::{Client, harness};
use serde_json::{Value, json};

async fn new_client(name: &str) -> (Client, String) {
    let h = harness();
    let (ws, key) = h.workspace(name).await;
    (Client::new(&h.base, &key), ws)
}

/// Create an endpoint; returns (id, secret).
async fn endpoint(c: &Client, body: Value) -> (String, String) {
    let r = c.post("/webhooks", &body).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let d = &r.json["data"];
    assert!(d["secret"].as_str().unwrap().starts_with("whsec_"));
    (d["id"].as_str().unwrap().to_string(), d["secret"].as_str().unwrap().to_string())
}

async fn post(c: &Client, content: &str) -> String {
    let ch = e2e::channel(c, "a").await;
    let r = c.post("/posts", &json!({"content": content, "channel_ids": [ch]})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    r.json["data"]["id"].as_str().unwrap().to_string()
}

/// Poll a delivery list until `done` holds for its first (newest) item.
async fn wait_delivery(c: &Client, endpoint: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let r = c.get(&format!("/webhooks/{endpoint}/deliveries")).await;
        assert_eq!(r.status, 200, "{}", r.json);
        let first = r.json["data"][0].clone();
        if done(&first) || std::time::Instant::now() > deadline {
            return first;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

fn check_headers(r: &Received) {
    let body = r.json();
    assert_eq!(r.header("content-type"), "application/json");
    assert_eq!(r.header("x-service-event-id"), body["id"].as_str().unwrap());
    assert_eq!(r.header("x-service-event-type"), body["type"].as_str().unwrap());
    assert!(r.header("x-service-delivery-id").starts_with("whd_"));
    assert!(r.header("user-agent").starts_with("WorkspacePlatform-Webhooks/"));
}

#[tokio::test]
async fn events_reach_every_subscribed_endpoint_and_no_other() {
    let (a, ws_a) = new_client("fan-out A").await;
    let (b, _) = new_client("fan-out B").await;
    let (posts_rx, all_rx, ws_rx, off_rx, b_rx) =
        tokio::join!(Receiver::start(), Receiver::start(), Receiver::start(), Receiver::start(), Receiver::start());
    let (posts_ep, posts_secret) = endpoint(&a, json!({"url": posts_rx.url, "event_types": ["post.*"], "description": "posts"})).await;
    let (_, all_secret) = endpoint(&a, json!({"url": all_rx.url})).await;
    endpoint(&a, json!({"url": ws_rx.url, "event_types": ["workspace.updated"]})).await;
    endpoint(&a, json!({"url": off_rx.url, "enabled": false})).await;
    let (b_ep, _) = endpoint(&b, json!({"url": b_rx.url})).await;

    let post_id = post(&a, "hello subscribers").await;
    let r = a.patch("/workspaces/current", &json!({"name": "fan-out A, renamed"})).await;
    assert_eq!(r.status, 200, "{}", r.json);

    let got = posts_rx.wait_until(30, |g| g.iter().any(|r| r.event_type() == "post.created")).await;
    let created: Vec<&Received> = got.iter().filter(|r| r.event_type() == "post.created").collect();
    assert_eq!(created.len(), 1, "one delivery per endpoint");
    let body = created[0].json();
    assert_eq!((body["workspace_id"].as_str(), body["data"]["id"].as_str()), (Some(ws_a.as_str()), Some(post_id.as_str())));
    assert!(created[0].verifies(&posts_secret), "the receiver's own HMAC check passes");
    assert!(!created[0].verifies(&all_secret), "each endpoint has its own secret");
    check_headers(created[0]);

    // The catch-all endpoint sees both areas' events; the workspace one only its type.
    let all = all_rx.wait_until(30, |g| ["post.created", "workspace.updated"].iter().all(|t| g.iter().any(|r| r.event_type() == *t))).await;
    assert!(all.iter().all(|r| r.verifies(&all_secret) && r.json()["workspace_id"] == ws_a.as_str()));
    let ws_got = ws_rx.wait_until(30, |g| !g.is_empty()).await;
    assert!(
        ws_got.iter().all(|r| r.event_type() == "workspace.updated"),
        "{:?}",
        ws_got.iter().map(|r| r.event_type()).collect::<Vec<_>>()
    );
    assert_eq!(ws_got.len(), 1);
    assert!(posts_rx.received().iter().all(|r| r.event_type().starts_with("post.")));
    assert!(off_rx.received().is_empty(), "a disabled endpoint gets nothing");
    assert!(
        b_rx.received().iter().all(|r| r.json()["workspace_id"] != ws_a.as_str()),
        "another workspace's endpoint gets none of A's events"
    );

    // The delivery is recorded, and invisible from workspace B.
    let d = wait_delivery(&a, &posts_ep, |d| d["status"] == "succeeded").await;
    assert_eq!(d["status"], "succeeded", "{d}");
    assert_eq!(d["event_type"], "post.created");
    assert_eq!(d["attempts"][0]["status_code"], 200);
    assert_eq!(d["attempts"][0]["response_excerpt"], "receiver says 200");
    assert!(d.get("body").is_none() && d.get("job").is_none(), "internals stay internal");
    let did = d["id"].as_str().unwrap();
    for path in [format!("/webhooks/{posts_ep}"), format!("/webhooks/{posts_ep}/deliveries")] {
        assert_eq!(b.get(&path).await.status, 404, "{path}");
    }
    assert_eq!(b.post(&format!("/webhooks/{posts_ep}/deliveries/{did}/retry"), &json!({})).await.status, 404);
    assert_eq!(b.patch(&format!("/webhooks/{posts_ep}"), &json!({"enabled": false})).await.status, 404);
    assert_eq!(a.get(&format!("/webhooks/{b_ep}/deliveries")).await.status, 404);
    let listed = b.get("/webhooks").await;
    assert_eq!(listed.json["data"].as_array().unwrap().len(), 1);

    // Secrets never come back after creation.
    let r = a.get(&format!("/webhooks/{posts_ep}")).await;
    assert!(r.json["data"].get("secret").is_none());
    let listed = String::from_utf8_lossy(&a.get("/webhooks").await.bytes).to_string();
    assert!(!listed.contains("whsec_") && !listed.contains("sealed") && !listed.contains("secrets"), "{listed}");
}

#[tokio::test]
async fn a_failing_receiver_is_retried_until_it_recovers() {
    let (c, _) = new_client("retries").await;
    let rx = Receiver::start().await;
    rx.script(&[500, 503, 500]);
    let (ep, secret) = endpoint(&c, json!({"url": rx.url, "event_types": ["post.created"]})).await;
    post(&c, "try, try again").await;
    let got = rx.wait_until(40, |g| g.len() >= 4).await;
    assert_eq!(got.len(), 4, "three failures, then success");
    let ids: Vec<&str> = got.iter().map(|r| r.header("x-service-event-id")).collect();
    assert!(ids.iter().all(|i| *i == ids[0]), "the same event each time (the receiver's dedupe key)");
    assert!(got.iter().all(|r| r.header("x-service-delivery-id") == got[0].header("x-service-delivery-id")));
    assert!(got.iter().all(|r| r.verifies(&secret) && r.body == got[0].body), "same bytes, valid signature every time");
    // Each attempt is signed when it is sent: timestamps move on with the retries.
    let ts: Vec<i64> = got.iter().map(|r| r.header("x-service-timestamp").parse().unwrap()).collect();
    assert!(ts.windows(2).all(|w| w[1] > w[0]), "fresh timestamps: {ts:?}");
    for r in &got {
        assert!((r.at - r.header("x-service-timestamp").parse::<i64>().unwrap()).abs() <= 1);
    }

    let d = wait_delivery(&c, &ep, |d| d["status"] == "succeeded").await;
    assert_eq!(d["status"], "succeeded", "{d}");
    assert_eq!(d["attempt_count"], 4);
    let codes: Vec<u64> = d["attempts"].as_array().unwrap().iter().map(|a| a["status_code"].as_u64().unwrap()).collect();
    assert_eq!(codes, vec![500, 503, 500, 200]);
    assert_eq!(d["attempts"][1]["response_excerpt"], "receiver says 503");
    assert!(d["attempts"].as_array().unwrap().iter().all(|a| a["at"].is_string() && a["duration_ms"].is_u64()));
    assert!(d["next_attempt_at"].is_null());
    // A success ends the failing run.
    let e = c.get(&format!("/webhooks/{ep}")).await;
    assert!(e.json["data"]["failing_since"].is_null() && e.json["data"]["enabled"] == true);

    // Filters and paging over the history: newest first.
    for _ in 0..2 {
        assert_eq!(c.post(&format!("/webhooks/{ep}/test"), &json!({})).await.status, 202);
    }
    rx.wait_until(30, |g| g.len() >= 6).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let seen = loop {
        let mut seen = vec![];
        let mut path = format!("/webhooks/{ep}/deliveries?limit=2&status=succeeded");
        loop {
            let r = c.get(&path).await;
            assert_eq!(r.status, 200, "{}", r.json);
            seen.extend(r.json["data"].as_array().unwrap().iter().map(|d| d["id"].as_str().unwrap().to_string()));
            match r.json["next_cursor"].as_str() {
                Some(cur) => path = format!("/webhooks/{ep}/deliveries?limit=2&status=succeeded&cursor={cur}"),
                None => break,
            }
        }
        // The receiver can answer before the dispatcher has saved the outcome.
        if seen.len() == 3 || std::time::Instant::now() > deadline {
            break seen;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(seen.len(), 3);
    let mut sorted = seen.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(seen, sorted, "newest first");
    assert_eq!(c.get(&format!("/webhooks/{ep}/deliveries?status=dead")).await.json["data"], json!([]));
    assert_eq!(c.get(&format!("/webhooks/{ep}/deliveries?status=nope")).await.status, 400);
    let r = c.get(&format!("/webhooks/{ep}/deliveries?limit=2&cursor={}", "x".repeat(40))).await;
    assert_eq!(r.code(), "INVALID_CURSOR");
}

#[tokio::test]
async fn a_receiver_answering_410_disables_its_endpoint() {
    let (c, ws) = new_client("gone").await;
    let (gone_rx, watch_rx) = tokio::join!(Receiver::start(), Receiver::start());
    gone_rx.set_default(410);
    let (gone_ep, _) = endpoint(&c, json!({"url": gone_rx.url, "event_types": ["post.created"]})).await;
    let (_, watch_secret) = endpoint(&c, json!({"url": watch_rx.url, "event_types": ["webhook.endpoint.disabled", "post.created"]})).await;

    let r = c.post(&format!("/webhooks/{gone_ep}/test"), &json!({})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    assert_eq!(r.json["data"]["event_type"], "webhook.test");
    let d = wait_delivery(&c, &gone_ep, |d| d["status"] == "dead").await;
    assert_eq!(d["status"], "dead", "410 is final: {d}");
    assert_eq!(d["attempt_count"], 1);
    assert_eq!(gone_rx.received().len(), 1);

    let e = c.get(&format!("/webhooks/{gone_ep}")).await.json["data"].clone();
    assert_eq!((e["enabled"].as_bool(), e["disabled_reason"].as_str()), (Some(false), Some("gone")));
    let got = watch_rx.wait_until(30, |g| !g.is_empty()).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].event_type(), "webhook.endpoint.disabled");
    assert_eq!(got[0].json()["data"]["id"], gone_ep.as_str());
    assert_eq!(got[0].json()["workspace_id"], ws.as_str());
    assert!(got[0].verifies(&watch_secret));

    // Disabled: no fan-out, no test. Re-enabled and healthy: a manual retry goes through.
    let quiet = post(&c, "nobody listens").await;
    // The watcher getting this post's event means its fan-out is over.
    watch_rx.wait_until(30, |g| g.iter().any(|r| r.json()["data"]["id"] == quiet.as_str())).await;
    assert_eq!(watch_rx.of_type("post.created").len(), 1);
    let r = c.post(&format!("/webhooks/{gone_ep}/test"), &json!({})).await;
    assert_eq!((r.status, r.code()), (409, "CONFLICT"));
    gone_rx.set_default(200);
    let r = c.patch(&format!("/webhooks/{gone_ep}"), &json!({"enabled": true})).await;
    assert!(r.json["data"]["disabled_reason"].is_null() && r.json["data"]["enabled"] == true);
    let did = d["id"].as_str().unwrap();
    let r = c.post(&format!("/webhooks/{gone_ep}/deliveries/{did}/retry"), &json!({})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    assert_eq!(r.json["data"]["status"], "pending");
    let again = c.post(&format!("/webhooks/{gone_ep}/deliveries/{did}/retry"), &json!({})).await;
    assert!(again.status == 409 || again.status == 202, "while pending: 409; if already done: a new retry");
    let d2 = wait_delivery(&c, &gone_ep, |d| d["status"] == "succeeded").await;
    assert_eq!(d2["id"], did);
    assert_eq!(d2["status"], "succeeded", "{d2}");
    assert!(d2["attempt_count"].as_u64().unwrap() >= 2);
    assert_eq!(gone_rx.of_type("post.created").len(), 0, "nothing was fanned out while disabled");
}

#[tokio::test]
async fn rotation_signs_with_both_secrets_during_the_grace_period_only() {
    let (c, _) = new_client("rotation").await;
    let rx = Receiver::start().await;
    let (ep, old) = endpoint(&c, json!({"url": rx.url, "event_types": ["post.created"]})).await;

    let r = c.post(&format!("/webhooks/{ep}/rotate-secret"), &json!({"grace_period_seconds": 4})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let new = r.json["data"]["secret"].as_str().unwrap().to_string();
    assert!(new.starts_with("whsec_") && new != old);
    assert!(r.json["data"]["previous_secret_expires_at"].is_string());
    let rotated_at = std::time::Instant::now();

    assert_eq!(c.post(&format!("/webhooks/{ep}/test"), &json!({})).await.status, 202);
    let got = rx.wait_until(20, |g| !g.is_empty()).await;
    assert_eq!(got[0].signature_matches(&new), vec![true, false], "newest first");
    assert_eq!(got[0].signature_matches(&old), vec![false, true]);
    assert!(got[0].verifies(&old) && got[0].verifies(&new), "receivers on either secret accept it");
    // Standard Webhooks: the reference verifier and Svix's accept it with either secret.
    assert_eq!(got[0].header("webhook-id"), got[0].json()["id"].as_str().unwrap());
    assert_eq!(got[0].header("webhook-timestamp"), got[0].header("x-service-timestamp"));
    assert_eq!(got[0].verified_by_standard_libraries(&new), (true, true), "the new secret");
    assert_eq!(got[0].verified_by_standard_libraries(&old), (true, true), "the old secret, during the overlap");

    let wait = std::time::Duration::from_secs(5).saturating_sub(rotated_at.elapsed());
    tokio::time::sleep(wait).await;
    assert_eq!(c.post(&format!("/webhooks/{ep}/test"), &json!({})).await.status, 202);
    let got = rx.wait_until(20, |g| g.len() >= 2).await;
    assert_eq!(got[1].signature_matches(&new), vec![true], "after the grace period: the new secret only");
    assert!(!got[1].verifies(&old));
    assert_eq!(got[1].verified_by_standard_libraries(&new), (true, true));
    assert_eq!(got[1].verified_by_standard_libraries(&old), (false, false), "the old secret no longer signs");
    let forged = Received { body: [&got[1].body[..], b" "].concat(), ..got[1].clone() };
    assert_eq!(forged.verified_by_standard_libraries(&new), (false, false), "a changed body fails");

    // Validation, and the secret is not in an idempotent replay.
    let r = c.post(&format!("/webhooks/{ep}/rotate-secret"), &json!({"grace_period_seconds": 604_801})).await;
    assert_eq!(r.status, 400);
    let send = || c.request("POST", &format!("/webhooks/{ep}/rotate-secret")).header("idempotency-key", "rotate-1").json(&json!({}));
    let first = c.send(send()).await;
    let replay = c.send(send()).await;
    assert!(first.json["data"]["secret"].is_string());
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert!(replay.json["data"].get("secret").is_none(), "shown once: {}", replay.json);
}

#[tokio::test]
async fn unsafe_urls_are_refused_at_creation_and_at_delivery() {
    let h = harness();
    let (_, key) = h.workspace("url safety").await;
    let strict = Client::new(&h.base_strict, &key);
    let dev = Client::new(&h.base, &key);
    for url in [
        "https://10.0.0.1/hook",
        "https://169.254.169.254/latest/meta-data/",
        "https://127.0.0.1/hook",
        "https://[::1]/hook",
        "https://localhost/hook",
        "https://192.168.0.10/hook",
        "http://93.184.216.34/hook",
        "ftp://93.184.216.34/",
    ] {
        let r = strict.post("/webhooks", &json!({ "url": url })).await;
        assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("url")), "{url}: {}", r.json);
    }
    // The development switch allows loopback and http, never private or link-local ranges.
    for url in ["https://10.0.0.1/hook", "https://169.254.169.254/latest/meta-data/"] {
        assert_eq!(dev.post("/webhooks", &json!({ "url": url })).await.status, 400, "{url}");
    }
    let rx = Receiver::start().await;
    // https to a loopback literal: allowed by the development switch, refused in production.
    let (ep, _) = endpoint(&dev, json!({"url": rx.url.replace("http://", "https://"), "event_types": ["post.created"]})).await;
    for (body, field) in [
        (json!({"url": rx.url, "event_types": ["post.exploded"]}), "event_types[0]"),
        (json!({"url": rx.url, "event_types": ["*"]}), "event_types[0]"),
        (json!({"url": rx.url, "event_types": ["post.*", "post.*"]}), "event_types[1]"),
        (json!({"url": rx.url, "description": "x".repeat(501)}), "description"),
    ] {
        let r = dev.post("/webhooks", &body).await;
        assert_eq!(r.json["error"]["details"][0]["field"], field, "{}", r.json);
    }
    assert_eq!(strict.patch(&format!("/webhooks/{ep}"), &json!({"url": "https://10.0.0.1/x"})).await.status, 400);

    // At delivery time the address is checked again: a dispatcher with production rules
    // refuses the loopback URL that was saved under the development switch.
    let mut cfg = h.config.clone();
    cfg.webhooks.url_policy.allow_loopback = false;
    let d = h.dispatcher(cfg).await;
    let ws_id = dev.get("/workspaces/current").await.json["data"]["id"].as_str().unwrap().to_string();
    let ev = shared::events::Event::new(&ws_id, shared::events::EventType::PostCreated, &json!({"id": "post_x"}));
    let batch = shared::sqs::event(vec![shared::sqs::message("m1", "r1", &ev.body())]);
    assert!(d.handle_sqs(batch).await.batch_item_failures.is_empty());
    let r = dev.get(&format!("/webhooks/{ep}/deliveries")).await;
    let first = &r.json["data"][0];
    assert_eq!(first["event_id"], ev.id.as_str());
    assert_eq!(first["attempts"][0]["error"], "blocked_address", "{first}");
    assert!(first["attempts"][0]["status_code"].is_null());
}

#[tokio::test]
async fn events_written_while_the_queue_is_down_are_delivered_by_the_sweep() {
    let h = harness();
    let (ws, key) = h.workspace("queue outage").await;
    let c = Client::new(&h.base, &key);
    let down = Client::new(&h.base_noqueue, &key);
    let rx = Receiver::start().await;
    let (_, secret) = endpoint(&c, json!({"url": rx.url, "event_types": ["post.created"]})).await;

    // The write succeeds although SQS cannot be reached; its event waits in the outbox.
    let id = post(&down, "written during an SQS outage").await;
    let got = rx.wait_until(30, |g| g.iter().any(|r| r.json()["data"]["id"] == id.as_str())).await;
    let mine: Vec<&Received> = got.iter().filter(|r| r.json()["data"]["id"] == id.as_str()).collect();
    assert_eq!(mine.len(), 1, "delivered once");
    assert_eq!(mine[0].json()["workspace_id"], ws.as_str());
    assert!(mine[0].verifies(&secret));

    // Once delivered, the outbox item is acknowledged (the sweep stops re-sending it).
    let ev_id = mine[0].json()["id"].as_str().unwrap().to_string();
    let app = h.app().await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let item = app.db.get(&shared::events::Event::outbox_pk(&ev_id), &ev_id).await.unwrap();
        if item.is_none() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "outbox item never acknowledged");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn endpoint_crud_and_limits() {
    // All through the high-limit gateway: one workspace bucket must not see two limit settings.
    let h = harness();
    let (_, key) = h.workspace("crud").await;
    let c = Client::new(&h.base_bulk, &key);
    let rx = Receiver::start().await;
    let (ep, _) = endpoint(&c, json!({"url": rx.url, "metadata": {"team": "ops"}, "event_types": ["post.deleted"]})).await;
    let r = c.patch(&format!("/webhooks/{ep}"), &json!({"description": "ops hook", "event_types": ["post.*", "workspace.updated"]})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json["data"]["event_types"], json!(["post.*", "workspace.updated"]));
    assert_eq!(r.json["data"]["metadata"]["team"], "ops");
    assert_eq!(c.patch(&format!("/webhooks/{ep}"), &json!({"url": null})).await.status, 400);
    assert_eq!(c.patch(&format!("/webhooks/{ep}"), &json!({"secret": "whsec_x"})).await.status, 400, "unknown fields are refused");
    assert_eq!(c.get("/webhooks/wh_nope").await.status, 404);
    // Round trips (docs/architecture.md, DynamoDB round trips): create = bucket, one transaction; history = bucket, endpoint, Query.
    let r = c.post("/webhooks", &json!({"url": rx.url, "event_types": ["post.deleted"]})).await;
    assert_eq!((r.status, r.ddb_calls()), (201, 2));
    let extra = r.json["data"]["id"].as_str().unwrap().to_string();
    assert_eq!(c.get(&format!("/webhooks/{ep}/deliveries")).await.ddb_calls(), 3);
    assert_eq!(c.delete(&format!("/webhooks/{extra}")).await.status, 200);

    // At most 20 endpoints, even when creates race.
    let bulk = &c;
    // Narrow subscriptions: 20 catch-all endpoints would each receive the others' creation events.
    let body = json!({"url": rx.url, "event_types": ["post.deleted"]});
    let creates = (0..25).map(|_| bulk.post("/webhooks", &body));
    let results = futures_util::future::join_all(creates).await;
    let created = results.iter().filter(|r| r.status == 201).count();
    assert!((1..=19).contains(&created), "one existed; the cap is 20: {created}");
    // Losers get the cap's 409, or a 409 for a concurrent change of the counter.
    assert!(results.iter().filter(|r| r.status != 201).all(|r| r.code() == "CONFLICT"));
    let mut total = 1 + created;
    loop {
        let r = bulk.post("/webhooks", &body).await;
        if r.status != 201 {
            assert!(r.json["error"]["message"].as_str().unwrap().contains("at most 20"), "{}", r.json);
            break;
        }
        total += 1;
        assert!(total <= 20);
    }
    assert_eq!(total, 20);
    let listed = c.get("/webhooks?limit=100").await;
    assert_eq!(listed.json["data"].as_array().unwrap().len(), 20);

    let r = c.delete(&format!("/webhooks/{ep}")).await;
    assert_eq!(r.json["data"], json!({"id": ep, "object": "webhook_endpoint", "deleted": true}));
    assert_eq!(c.get(&format!("/webhooks/{ep}")).await.status, 404);
    assert_eq!(bulk.post("/webhooks", &body).await.status, 201, "deleting frees a place");
}

#[tokio::test]
async fn an_endpoint_failing_for_the_configured_period_is_disabled() {
    let h = harness();
    let (ws, key) = h.workspace("always failing").await;
    let c = Client::new(&h.base, &key);
    let rx = Receiver::start().await;
    rx.set_default(500);
    let (ep, _) = endpoint(&c, json!({"url": rx.url, "event_types": ["post.deleted"]})).await;
    // A dispatcher whose "continuously failing" period is 1 s instead of 5 days.
    let mut cfg = h.config.clone();
    cfg.webhooks.disable_after_secs = 1;
    let d = h.dispatcher(cfg).await;
    let invoke = |n: usize| {
        let ev = shared::events::Event::new(&ws, shared::events::EventType::PostDeleted, &json!({"id": format!("post_{n}")}));
        shared::sqs::event(vec![shared::sqs::message(&format!("m{n}"), "r", &ev.body())])
    };
    assert!(d.handle_sqs(invoke(1)).await.batch_item_failures.is_empty());
    let e = c.get(&format!("/webhooks/{ep}")).await.json["data"].clone();
    assert!(e["failing_since"].is_string(), "the failing run starts: {e}");
    assert_eq!(e["enabled"], true, "one failure is not enough");
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    d.handle_sqs(invoke(2)).await;
    let e = c.get(&format!("/webhooks/{ep}")).await.json["data"].clone();
    assert_eq!((e["enabled"].as_bool(), e["disabled_reason"].as_str()), (Some(false), Some("failing")), "{e}");
    // Deliveries still scheduled for it end as dead rather than being sent.
    let dead = wait_delivery(&c, &ep, |d| d["status"] == "dead").await;
    assert_eq!(dead["status"], "dead");
    assert_eq!(dead["attempts"].as_array().unwrap().last().unwrap()["error"], "endpoint_disabled");
}

/// Events nobody can acknowledge are re-sent every few minutes and filtered out in between;
/// DynamoDB applies `Limit` before that filter, so a run of them at the head of a shard once
/// hid every due event behind them. The sweep now reads past them.
#[tokio::test]
async fn the_sweep_reads_past_events_it_recently_re_sent() {
    use shared::events::Event;
    use shared::store::{get_str, n};
    let h = harness();
    let app = h.app().await;
    // Ids from 1970 sort before every real event; pick 131 that share a shard: more stuck
    // ones than one Query page of the sweep (100) reads.
    let ids: Vec<String> = (0..10_000u64)
        .map(|i| format!("evt_{}", ulid::Ulid::from_parts(1_000 + i, rand::random())))
        .filter(|id| Event::outbox_pk(id) == Event::outbox_pk(&format!("evt_{}", ulid::Ulid::from_parts(1_000, 0))))
        .take(131)
        .collect();
    assert_eq!(ids.len(), 131);
    let (stuck, due) = ids.split_at(130);
    let now = chrono::Utc::now().timestamp();
    let mut items = vec![];
    for id in ids.iter() {
        let ev = Event {
            id: shared::events::EventId::trusted(id.as_str()),
            kind: "post.created".into(),
            created_at: shared::ids::Timestamp::now(),
            workspace_id: "ws_01HF6Z3Q8M4W2T9K7R5N1B0C6D".into(),
            data: json!({}),
        };
        let mut item = ev.outbox_item();
        if stuck.contains(id) {
            item.insert("resent_at".into(), n(now));
        }
        items.push(item);
    }
    app.db.batch_put(items).await.unwrap();

    shared::outbox::sweep(&app, 60, 100).await.unwrap();
    let pk = Event::outbox_pk(&due[0]);
    let item = app.db.get(&pk, &due[0]).await.unwrap();
    // Re-sent (`resent_at`), or already consumed and acknowledged by the dispatcher.
    assert!(item.as_ref().is_none_or(|i| i.contains_key("resent_at")), "the due event was not re-sent: {item:?}");
    for id in stuck {
        let i = app.db.get(&pk, id).await.unwrap().expect("stuck events stay");
        assert_eq!(i.get("resent_at").and_then(|v| v.as_n().ok()).map(String::as_str), Some(now.to_string().as_str()), "{id}");
        assert!(get_str(&i, "body").is_some());
    }
}

/// One large event to the most endpoints a workspace may have: the deliveries share the
/// event's body (stored once), so the fan-out stays inside a transaction's 4 MB where a copy
/// per delivery (20 x ~300 KB) did not.
#[tokio::test]
async fn a_large_event_reaches_twenty_endpoints() {
    let h = harness();
    let (ws, key) = h.workspace("large fan-out").await;
    let c = Client::new(&h.base, &key);
    let receiver = Receiver::start().await;
    let mut secrets = vec![];
    for _ in 0..domain::webhooks::MAX_ENDPOINTS {
        secrets.push(endpoint(&c, json!({"url": receiver.url, "event_types": ["post.updated"]})).await.1);
    }
    // No route writes an event this large today; an area that does (a long post body, a
    // helpdesk message) goes the same way: outbox, queue, fan-out.
    let ev = shared::events::Event::new(&ws, shared::events::EventType::PostUpdated, &json!({"content": "x".repeat(300_000)}));
    shared::outbox::Tx::new().event(ev).commit(&h.app().await).await.map_err(|_| "commit").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let got = loop {
        let got: Vec<Received> = receiver.received();
        if got.len() >= secrets.len() || std::time::Instant::now() > deadline {
            break got;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(got.len(), secrets.len(), "one delivery per endpoint");
    for m in &got {
        assert!(m.body.len() > 300_000, "the whole event: {} bytes", m.body.len());
        assert!(secrets.iter().any(|s| m.verifies(s)), "signed by one of the endpoints' secrets");
    }
}

/// A slow receiver and a large batch: the invocation starts first attempts only while they fit
/// its time budget and hands the rest back as delivery jobs, so it ends in time (other
/// tenants' messages in the batch are not lost to a timeout) and every delivery still arrives.
#[tokio::test]
async fn a_slow_receiver_cannot_run_an_invocation_past_its_budget() {
    let h = harness();
    let (ws, key) = h.workspace("slow receiver").await;
    let c = Client::new(&h.base, &key);
    let receiver = Receiver::start().await;
    receiver.set_delay(std::time::Duration::from_millis(1500));
    endpoint(&c, json!({"url": receiver.url, "event_types": ["post.updated"]})).await;
    let mut cfg = h.config.clone();
    cfg.webhooks.timeout_secs = 2;
    let d = h.dispatcher(cfg).await;
    assert_eq!(d.attempt_time(), std::time::Duration::from_secs(4));

    // 80 events in one message: five groups of 16, 1.5 s each if all were attempted inline.
    let events: Vec<shared::events::Event> =
        (0..80).map(|i| shared::events::Event::new(&ws, shared::events::EventType::PostUpdated, &json!({"n": i}))).collect();
    let body = serde_json::to_string(&json!({ "events": events })).unwrap();
    let batch = shared::sqs::event(vec![shared::sqs::message("m1", "r1", &body)]);
    let budget = std::time::Duration::from_secs(5);
    let started = std::time::Instant::now();
    let resp = d.handle_sqs_within(batch, domain::webhooks::dispatch::Budget::new(budget)).await;
    let took = started.elapsed();
    assert!(resp.batch_item_failures.is_empty());
    assert!(took < budget, "the invocation took {took:?}");

    // The handed-back deliveries arrive through the deliveries queue.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while receiver.received().len() < 80 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let mut seen: Vec<i64> = receiver.received().iter().map(|m| m.json()["data"]["n"].as_i64().unwrap()).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen, (0..80).collect::<Vec<_>>(), "every event delivered");
}

#[tokio::test]
async fn a_replay_resends_what_a_disabled_endpoint_missed_in_order_except_the_erased() {
    let (c, _) = new_client("replay").await;
    let types = json!(["post.created", "contact.created"]);
    let rx = Receiver::start().await;
    let (ep, secret) = endpoint(&c, json!({"url": rx.url, "event_types": types})).await;
    // A witness endpoint that stays on: once it has an event, that event's record exists.
    let witness = Receiver::start().await;
    endpoint(&c, json!({"url": witness.url, "event_types": types})).await;
    post(&c, "delivered live").await;
    rx.wait_until(20, |g| !g.is_empty()).await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let since = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);

    assert_eq!(c.patch(&format!("/webhooks/{ep}"), &json!({"enabled": false})).await.status, 200);
    let mut missed = vec![];
    for i in 0..3 {
        missed.push(post(&c, &format!("missed {i}")).await);
    }
    let addr = format!("replay-erased-{}@example.com", ulid::Ulid::generate().to_string().to_lowercase());
    let contact = e2e::created(&c, "/contacts", json!({"email": addr}), 201).await;
    witness.wait_until(30, |g| g.len() >= 5).await;
    let r = c.post(&format!("/webhooks/{ep}/replay"), &json!({"since": since})).await;
    assert_eq!((r.status, r.code()), (409, "CONFLICT"), "a disabled endpoint is not replayed to: {}", r.json);
    let erasure = e2e::created(&c, "/gdpr/erasures", json!({"subject": {"email": addr}, "reason": "Art. 17 request"}), 202).await;
    let erased = e2e::finished(&c, &format!("/gdpr/erasures/{}", erasure["id"].as_str().unwrap())).await;
    assert_eq!(erased["status"], "completed", "{erased}");

    // Validation: a window in the future, past the kept 30 days, unknown types.
    for (body, field) in [
        (json!({"since": e2e::in_hours(1)}), "since"),
        (json!({"since": since, "until": "2020-01-01T00:00:00Z"}), "until"),
        (json!({"since": "2020-01-01T00:00:00Z"}), "since"),
        (json!({"since": since, "event_types": ["post.exploded"]}), "event_types[0]"),
    ] {
        let r = c.post(&format!("/webhooks/{ep}/replay"), &body).await;
        assert_eq!(r.status, 400, "{body}: {}", r.json);
        assert_eq!(r.json["error"]["details"][0]["field"], field, "{}", r.json);
    }

    assert_eq!(c.patch(&format!("/webhooks/{ep}"), &json!({"enabled": true})).await.status, 200);
    let r = c.post(&format!("/webhooks/{ep}/replay"), &json!({"since": since})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    assert_eq!(r.json["data"]["object"], "webhook_replay");
    let replay = r.json["data"]["id"].as_str().unwrap().to_string();
    let done = e2e::finished(&c, &format!("/webhooks/{ep}/replays/{replay}")).await;
    assert_eq!((done["status"].as_str(), done["resent"].as_u64()), (Some("completed"), Some(3)), "{done}");

    // The three posts, in the order they happened, signed as every delivery is; the erased
    // contact's event not at all.
    let got = rx.wait_until(30, |g| g.len() >= 4).await;
    let replayed: Vec<String> = got[1..].iter().map(|r| r.json()["data"]["id"].as_str().unwrap_or_default().to_string()).collect();
    assert_eq!(replayed, missed, "in event order");
    assert!(got[1..].iter().all(|r| r.verifies(&secret) && r.verified_by_standard_libraries(&secret) == (true, true)));
    assert!(
        !rx.received().iter().any(|r| String::from_utf8_lossy(&r.body).contains(&addr) || r.event_type() == "contact.created"),
        "the erased subject's event is not resent"
    );
    assert!(contact["id"].is_string());

    // The replay's deliveries are the endpoint's, and a second replay of the same window
    // resends again (a replay is asked for, never deduplicated).
    let list = c.get(&format!("/webhooks/{ep}/deliveries")).await;
    assert_eq!(list.json["data"].as_array().unwrap().len(), 4, "{}", list.json);
    let again = c.post(&format!("/webhooks/{ep}/replay"), &json!({"since": since, "event_types": ["post.*"]})).await;
    assert_eq!(again.status, 202, "{}", again.json);
    let done = e2e::finished(&c, &format!("/webhooks/{ep}/replays/{}", again.json["data"]["id"].as_str().unwrap())).await;
    assert_eq!(done["resent"], 3, "{done}");
    rx.wait_until(30, |g| g.len() >= 7).await;
    assert_eq!(c.get(&format!("/webhooks/{ep}/replays/whr_00000000000000000000000000")).await.status, 404);
}

/// The catalog cannot drift from what is sent: every event a workspace with data in every area
/// produced is checked against its type's schema from `GET /webhooks/event-types/{type}`, and
/// every type's example against its own schema.
#[tokio::test]
async fn every_delivered_event_matches_its_type_in_the_catalog() {
    let h = harness();
    let (ws, key) = h.workspace("event catalog").await;
    let c = Client::new(&h.base_bulk, &key);
    let rx = Receiver::start().await;
    endpoint(&c, json!({"url": rx.url})).await;
    e2e::seed_every_area(&c, &ws).await;
    // Until the deliveries stop coming.
    let mut seen = 0;
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        let now = rx.received().len();
        if now == seen && now > 0 {
            break;
        }
        seen = now;
    }

    let list = c.get("/webhooks/event-types").await;
    assert_eq!(list.status, 200, "{}", list.json);
    let listed: Vec<&str> = list.json["data"].as_array().unwrap().iter().filter_map(|t| t["type"].as_str()).collect();
    assert_eq!(listed, shared::events::EVENT_TYPES, "every type, in order");
    assert!(list.json["data"][0].get("schema").is_none(), "the list is brief");
    assert_eq!(c.get("/webhooks/event-types/post.exploded").await.status, 404);

    let mut schemas = std::collections::BTreeMap::new();
    let mut cases = vec![];
    for t in shared::events::EVENT_TYPES {
        let r = c.get(&format!("/webhooks/event-types/{t}")).await;
        assert_eq!(r.status, 200, "{t}: {}", r.json);
        let d = &r.json["data"];
        cases.push(json!({"name": format!("the example of {t}"), "schema": d["schema"], "instance": d["example"]}));
        schemas.insert(t.to_string(), d["schema"].clone());
    }
    let mut types = std::collections::BTreeSet::new();
    for (i, r) in rx.received().iter().enumerate() {
        let body = r.json();
        let t = body["type"].as_str().unwrap_or_default().to_string();
        let schema = schemas.get(&t).unwrap_or_else(|| panic!("{t} is delivered but not in the catalog"));
        cases.push(json!({"name": format!("delivery {i} ({t})"), "schema": schema, "instance": body}));
        types.insert(t);
    }
    // Which values do not match their schemas, by `jsonschema`.
    let failures = e2e::python("tests/validate_json_schema.py", &Value::from(cases));
    assert_eq!(failures, json!({}), "values that do not match their schemas");
    assert!(types.len() >= 15, "only {} types delivered: {types:?}", types.len());
}

/// At-least-once: a replay's step handed to two dispatchers at once resends each event once
/// (one delivery each, however the copies interleave) and counts each once; any second attempt
/// of a delivery carries the same `webhook-id`, which receivers drop. Replaying is an admin's,
/// and another workspace's endpoint or replay is not found.
#[tokio::test]
async fn a_replay_step_received_twice_at_once_resends_each_event_once() {
    let h = harness();
    let deliveries = h.own_queue("replay-race").await;
    let mut cfg = h.generous_config();
    cfg.deliveries_queue_url = deliveries.clone();
    let base = h.gateway_with(cfg.clone()).await;
    let (one, two) = (h.dispatcher(cfg.clone()).await, h.dispatcher(cfg).await);
    let (_, key) = h.workspace("replay race").await;
    let c = Client::new(&base, &key);
    let rx = Receiver::start().await;
    let (ep, _) = endpoint(&c, json!({"url": rx.url, "event_types": ["post.created"]})).await;
    let since = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    for i in 0..3 {
        post(&c, &format!("raced {i}")).await;
    }
    rx.wait_until(30, |g| g.len() >= 3).await;

    // Who may replay, and where.
    let writer = e2e::created(&c, "/workspaces/current/api-keys", json!({"name": "writer", "scopes": ["read", "write"]}), 201).await;
    let writer = Client::new(&base, writer["secret"].as_str().unwrap());
    assert_eq!(writer.post(&format!("/webhooks/{ep}/replay"), &json!({"since": since})).await.status, 403, "admin scope only");
    let (_, other_key) = h.workspace("replay race, elsewhere").await;
    let other = Client::new(&base, &other_key);
    assert_eq!(other.post(&format!("/webhooks/{ep}/replay"), &json!({"since": since})).await.status, 404);

    let r = c.post(&format!("/webhooks/{ep}/replay"), &json!({"since": since})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    let path = format!("/webhooks/{ep}/replays/{}", r.json["data"]["id"].as_str().unwrap());
    assert_eq!(other.get(&path).await.status, 404);
    let message = h.take_event(&deliveries).await.expect("the replay's first step");
    tokio::join!(one.handle_sqs(message.clone()), two.handle_sqs(message));

    let done = e2e::finished(&c, &path).await;
    assert_eq!((done["status"].as_str(), done["resent"].as_u64()), (Some("completed"), Some(3)), "{done}");
    let list = c.get(&format!("/webhooks/{ep}/deliveries")).await;
    assert_eq!(list.json["data"].as_array().unwrap().len(), 6, "three live, three replayed, none twice: {}", list.json);
    let got = rx.wait_until(30, |g| g.len() >= 6).await;
    let deliveries: std::collections::BTreeSet<&str> = got.iter().map(|r| r.header("x-service-delivery-id")).collect();
    let messages: std::collections::BTreeSet<&str> = got.iter().map(|r| r.header("webhook-id")).collect();
    assert_eq!((deliveries.len(), messages.len()), (6, 3), "each event twice (live, replayed) under its one webhook-id");
}
