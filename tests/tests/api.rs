//! End-to-end tests over real HTTP against DynamoDB Local + moto. One binary, one stack.

use e2e::{CHANNEL_A, Client, harness, in_hours};
use futures_util::future::join_all;
use serde_json::json;
use std::collections::HashSet;

async fn new_client(name: &str) -> (Client, String) {
    let h = harness();
    let (ws, key) = h.workspace(name).await;
    (Client::new(&h.base, &key), ws)
}

async fn create_post(c: &Client, content: &str) -> String {
    let ch = e2e::channel(c, "a").await;
    let r = c.post("/posts", &json!({"content": content, "channel_ids": [ch]})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    r.json["data"]["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn missing_invalid_and_revoked_keys() {
    let h = harness();
    let anon = Client::anonymous(&h.base);
    let r = anon.get("/posts").await;
    assert_eq!((r.status, r.code()), (401, "UNAUTHORIZED"));
    assert!(r.json["error"]["message"].as_str().unwrap().contains("missing"));

    for bad in ["wsp_0000000000000000000000000000000000000000000", "garbage", "wsp_short", "a.b.c"] {
        let r = Client::new(&h.base, bad).get("/posts").await;
        assert_eq!((r.status, r.code()), (401, "UNAUTHORIZED"), "{bad}");
        assert!(r.json["error"]["message"].as_str().unwrap().contains("invalid"), "{}", r.json);
    }
    let r = anon.send(anon.request("GET", "/posts").header("authorization", "Basic dXNlcjpwYXNz")).await;
    assert_eq!(r.status, 401);

    // A second key, revoked with the first: 403 from then on, and the secret is shown only once.
    let (c, _) = new_client("revocation").await;
    let r = c.post("/workspaces/current/api-keys", &json!({"name": "ci"})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let secret = r.json["data"]["secret"].as_str().unwrap().to_string();
    let key_id = r.json["data"]["id"].as_str().unwrap().to_string();
    assert!(secret.starts_with("wsp_") && secret.len() >= 44);
    let second = Client::new(&h.base, &secret);
    assert_eq!(second.get("/posts").await.status, 200);
    let list = c.get("/workspaces/current/api-keys").await;
    assert_eq!(list.status, 200);
    assert!(!String::from_utf8_lossy(&list.bytes).contains(&secret), "listing never shows a secret");
    assert_eq!(list.json["data"].as_array().unwrap().len(), 2);
    let r = c.delete(&format!("/workspaces/current/api-keys/{key_id}")).await;
    assert_eq!(r.status, 200);
    assert!(r.json["data"]["revoked_at"].is_string());
    let r = second.get("/posts").await;
    assert_eq!((r.status, r.code()), (403, "FORBIDDEN"));
    assert_eq!(c.get("/posts").await.status, 200, "the other key still works");
}

/// A container trusts a key look-up for API_KEY_CACHE_SECS: the one that revokes a key refuses
/// it at once, another within that bound (here 1 s, on two gateways of their own).
#[tokio::test]
async fn a_revoked_key_is_refused_everywhere_within_the_cache_bound() {
    let h = harness();
    let mut cfg = h.config.clone();
    cfg.api_key_cache_secs = 1;
    let (one, two) = (h.gateway_with(cfg.clone()).await, h.gateway_with(cfg).await);
    let (_, admin_key) = h.workspace("revocation bound").await;
    let admin = Client::new(&one, &admin_key);
    let r = admin.post("/workspaces/current/api-keys", &json!({"name": "short-lived"})).await;
    let (secret, key_id) = (r.json["data"]["secret"].as_str().unwrap().to_string(), r.json["data"]["id"].as_str().unwrap().to_string());
    let (on_one, on_two) = (Client::new(&one, &secret), Client::new(&two, &secret));
    assert_eq!(on_one.get("/posts").await.status, 200);
    assert_eq!(on_two.get("/posts").await.status, 200);
    let second = on_two.get("/posts").await;
    assert_eq!((second.status, second.ddb_calls()), (200, 2), "the look-up is kept: bucket + query only");
    assert_eq!(admin.delete(&format!("/workspaces/current/api-keys/{key_id}")).await.status, 200);
    assert_eq!(on_one.get("/posts").await.status, 403, "the revoking container forgets the key at once");
    let revoked_at = std::time::Instant::now();
    loop {
        let r = on_two.get("/posts").await;
        if r.status == 403 {
            break;
        }
        assert_eq!(r.status, 200);
        assert!(revoked_at.elapsed() < std::time::Duration::from_millis(1500), "still accepted after the 1 s bound");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn workspaces_are_isolated() {
    let (a, _) = new_client("tenant a").await;
    let (b, _) = new_client("tenant b").await;
    let post_b = create_post(&b, "b's secret plan").await;
    for r in [
        a.get(&format!("/posts/{post_b}")).await,
        a.patch(&format!("/posts/{post_b}"), &json!({"content": "hijacked"})).await,
        a.delete(&format!("/posts/{post_b}")).await,
        a.post(&format!("/posts/{post_b}/schedule"), &json!({"scheduled_at": in_hours(1)})).await,
    ] {
        assert_eq!((r.status, r.code()), (404, "NOT_FOUND"), "{}", r.json);
    }
    let list = a.get("/posts").await;
    assert_eq!(list.json["data"].as_array().unwrap().len(), 0);
    // B's object is untouched.
    let r = b.get(&format!("/posts/{post_b}")).await;
    assert_eq!(r.json["data"]["content"], "b's secret plan");
    // A's key cannot revoke B's keys either.
    let keys_b = b.get("/workspaces/current/api-keys").await;
    let key_b = keys_b.json["data"][0]["id"].as_str().unwrap();
    assert_eq!(a.delete(&format!("/workspaces/current/api-keys/{key_b}")).await.status, 404);
    // A cursor minted for A is refused for B.
    for i in 0..3 {
        create_post(&a, &format!("a{i}")).await;
    }
    let page = a.get("/posts?limit=1").await;
    let cursor = page.json["next_cursor"].as_str().unwrap();
    let r = b.get(&format!("/posts?limit=1&cursor={cursor}")).await;
    assert_eq!((r.status, r.code()), (400, "INVALID_CURSOR"));
}

#[tokio::test]
async fn oauth_tokens_need_membership_and_a_workspace_header() {
    let h = harness();
    let (ws, key) = h.workspace("oauth").await;
    let (other_ws, _) = h.workspace("oauth other").await;
    let app = h.app().await;
    let subject = format!("user-{}", shared::ids::new_id("u"));
    domain::workspaces::add_member(&app, &shared::auth::WorkspaceId::trusted(ws.clone()), &subject, "member").await.unwrap();
    let token = tools::admin::mint_token(&subject, "read write", 600).unwrap();

    let mut c = Client::new(&h.base, &token);
    let r = c.get("/posts").await;
    assert_eq!((r.status, r.code()), (400, "VALIDATION_ERROR"), "no x-workspace-id");
    assert_eq!(r.json["error"]["details"][0]["field"], "x-workspace-id");
    // The subject's workspaces need no header.
    let r = c.get("/workspaces").await;
    assert_eq!(r.status, 200, "{}", r.json);
    let ids: Vec<&str> = r.json["data"].as_array().unwrap().iter().map(|w| w["id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec![ws.as_str()]);

    // A subject in two workspaces pages through them; its cursor is bound to it.
    let both = format!("both-{}", shared::ids::new_id("u"));
    domain::workspaces::add_member(&app, &shared::auth::WorkspaceId::trusted(ws.clone()), &both, "viewer").await.unwrap();
    domain::workspaces::add_member(&app, &shared::auth::WorkspaceId::trusted(other_ws.clone()), &both, "viewer").await.unwrap();
    let b = Client::new(&h.base, &tools::admin::mint_token(&both, "read", 600).unwrap());
    let first = b.get("/workspaces?limit=1").await;
    assert_eq!(first.json["data"].as_array().unwrap().len(), 1);
    let cursor = first.json["next_cursor"].as_str().expect("a second page").to_string();
    let second = b.get(&format!("/workspaces?limit=1&cursor={cursor}")).await;
    assert_eq!(second.status, 200);
    assert_ne!(second.json["data"][0]["id"], first.json["data"][0]["id"]);
    let r = c.get(&format!("/workspaces?limit=1&cursor={cursor}")).await;
    assert_eq!((r.status, r.code()), (400, "INVALID_CURSOR"), "another subject's cursor");

    c.workspace = Some(ws.clone());
    assert_eq!(c.get("/workspaces/current").await.json["data"]["id"], ws.as_str());
    let p = c.post("/posts", &json!({"content": "from oauth"})).await;
    assert_eq!(p.status, 201);
    // Visible to the workspace's API key: same workspace.
    let by_key = Client::new(&h.base, &key).get(&format!("/posts/{}", p.json["data"]["id"].as_str().unwrap())).await;
    assert_eq!(by_key.status, 200);

    c.workspace = Some(other_ws);
    let r = c.get("/posts").await;
    assert_eq!((r.status, r.code()), (403, "FORBIDDEN"), "not a member");
    c.workspace = Some("ws_nonsense".into());
    assert_eq!(c.get("/posts").await.status, 403);

    // A viewer reads but cannot write; a read-only token cannot write either.
    let viewer = format!("viewer-{}", shared::ids::new_id("u"));
    domain::workspaces::add_member(&app, &shared::auth::WorkspaceId::trusted(ws.clone()), &viewer, "viewer").await.unwrap();
    let mut v = Client::new(&h.base, &tools::admin::mint_token(&viewer, "read write", 600).unwrap());
    v.workspace = Some(ws.clone());
    assert_eq!(v.get("/posts").await.status, 200);
    assert_eq!(v.post("/posts", &json!({"content": "x"})).await.status, 403);
    let mut ro = Client::new(&h.base, &tools::admin::mint_token(&subject, "read", 600).unwrap());
    ro.workspace = Some(ws.clone());
    assert_eq!(ro.post("/posts", &json!({"content": "x"})).await.status, 403);
    // Expired tokens are invalid credentials.
    let mut old = Client::new(&h.base, &tools::admin::mint_token(&subject, "read", -300).unwrap());
    old.workspace = Some(ws.clone());
    let r = old.get("/posts").await;
    assert_eq!(r.status, 401);
    assert!(r.json["error"]["message"].as_str().unwrap().contains("expired"));
}

#[tokio::test]
async fn oauth_keys_come_from_the_issuer_and_refresh_once_when_a_kid_is_unknown() {
    use shared::config::{JwksSource, OAuthConfig};
    let h = harness();
    // A stand-in identity provider: discovery document and key set over loopback HTTP.
    let idp = e2e::receiver::Receiver::start().await;
    idp.set_default(404);
    let issuer = idp.origin();
    idp.serve("/.well-known/openid-configuration", &json!({"issuer": issuer, "jwks_uri": format!("{issuer}/keys")}));
    idp.serve("/keys", &tools::admin::dev_jwks_with_kid("k1"));
    let mut cfg = h.config.clone();
    cfg.oauth = Some(OAuthConfig {
        issuer: issuer.clone(),
        audience: "api".into(),
        jwks: JwksSource::Discover,
        min_refresh_secs: 2,
        pages_client_id: None,
        approver_clients: vec![],
        approver_max_auth_age_secs: 600,
    });
    let base = h.gateway_with(cfg.clone()).await;
    let (ws, _) = h.workspace("oauth keys").await;
    let subject = format!("idp-{}", shared::ids::new_id("u"));
    domain::workspaces::add_member(&h.app().await, &shared::auth::WorkspaceId::trusted(ws.clone()), &subject, "member").await.unwrap();
    let now = chrono::Utc::now().timestamp();
    let token = |kid: &str, nbf: i64| {
        let claims = json!({"iss": issuer, "aud": "api", "sub": subject, "exp": now + 600, "nbf": nbf, "scope": "read"});
        tools::admin::mint_token_with(kid, claims).unwrap()
    };
    let client = |t: String| {
        let mut c = Client::new(&base, &t);
        c.workspace = Some(ws.clone());
        c
    };
    assert_eq!(idp.hits("/keys"), 0, "nothing is fetched before a token arrives");

    // First tokens: one discovery and one key fetch, however many arrive at once.
    let k1 = client(token("k1", now - 5));
    let answers = join_all((0..6).map(|_| k1.get("/posts"))).await;
    assert!(answers.iter().all(|r| r.status == 200), "{:?}", answers.iter().map(|r| r.status).collect::<Vec<_>>());
    assert_eq!((idp.hits("/.well-known/openid-configuration"), idp.hits("/keys")), (1, 1));

    // The provider rotates to k2. Within the refresh interval the new kid is unknown and
    // nothing is fetched; after it, the first k2 token refreshes once and is accepted.
    idp.serve("/keys", &tools::admin::dev_jwks_with_kid("k2"));
    let k2 = client(token("k2", now - 5));
    let r = k2.get("/posts").await;
    assert_eq!((r.status, r.code()), (401, "UNAUTHORIZED"), "{}", r.json);
    assert_eq!(idp.hits("/keys"), 1);
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    assert_eq!(k2.get("/posts").await.status, 200);
    assert_eq!(idp.hits("/keys"), 2);

    // Made-up kids cannot make the platform hammer the provider: ten at once, one fetch.
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let forged: Vec<Client> = (0..10).map(|i| client(token(&format!("made-up-{i}"), now - 5))).collect();
    let answers = join_all(forged.iter().map(|c| c.get("/posts"))).await;
    assert!(answers.iter().all(|r| r.status == 401));
    assert_eq!(idp.hits("/keys"), 3, "one refresh for the whole burst");
    assert_eq!(idp.hits("/.well-known/openid-configuration"), 3, "discovery runs with each refresh");

    // nbf: a token not valid yet is refused (beyond the 30 s leeway).
    let r = client(token("k2", now + 300)).get("/posts").await;
    assert_eq!(r.status, 401);
    assert!(r.json["error"]["message"].as_str().unwrap().contains("nbf"), "{}", r.json);

    // A container that cannot get any keys answers 503 in the envelope, not 401.
    cfg.oauth = Some(OAuthConfig { jwks: JwksSource::Uri(format!("{issuer}/gone")), ..cfg.oauth.clone().unwrap() });
    let down = h.gateway_with(cfg).await;
    let mut c = Client::new(&down, &token("k2", now - 5)).during_outage();
    c.workspace = Some(ws.clone());
    let r = c.get("/posts").await;
    assert_eq!((r.status, r.code()), (503, "UNAVAILABLE"), "{}", r.json);
}

#[tokio::test]
async fn paging_visits_every_post_exactly_once() {
    let h = harness();
    let (ws, key) = h.workspace("paging").await;
    let _ = ws;
    let bulk = Client::new(&h.base_bulk, &key);
    let mut created = HashSet::new();
    for chunk in 0..25 {
        let futs = (0..10).map(|i| bulk.send(bulk.request("POST", "/posts").json(&json!({"content": format!("post {chunk}-{i}")}))));
        for r in join_all(futs).await {
            assert_eq!(r.status, 201, "{}", r.json);
            created.insert(r.json["data"]["id"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(created.len(), 250);

    let c = Client::new(&h.base, &key);
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(cur) => format!("/posts?limit=50&cursor={cur}"),
            None => "/posts?limit=50".to_string(),
        };
        let r = c.get(&path).await;
        assert_eq!(r.status, 200, "{}", r.json);
        pages += 1;
        let data = r.json["data"].as_array().unwrap();
        assert!(data.len() <= 50);
        seen.extend(data.iter().map(|p| p["id"].as_str().unwrap().to_string()));
        // A page costs the same DynamoDB round trips whatever the collection size.
        assert!(r.ddb_calls() <= 3, "page made {} DynamoDB calls", r.ddb_calls());
        match r.json["next_cursor"].as_str() {
            Some(n) => {
                assert_eq!(r.json["has_more"], true);
                cursor = Some(n.to_string());
            }
            None => {
                assert_eq!(r.json["has_more"], false);
                assert!(r.json["next_cursor"].is_null());
                break;
            }
        }
    }
    assert_eq!(pages, 5);
    assert_eq!(seen.len(), 250, "no duplicates, none missing");
    assert_eq!(seen.iter().cloned().collect::<HashSet<_>>(), created);
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(seen, sorted, "creation order");

    // Tampering with any byte of a cursor is detected; so is a cursor reused with other filters.
    let first = c.get("/posts?limit=50").await;
    let cur = first.json["next_cursor"].as_str().unwrap().to_string();
    let mut bytes = cur.clone().into_bytes();
    bytes[5] = if bytes[5] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(bytes).unwrap();
    for bad in [tampered.as_str(), "not-a-cursor", "e30.AAAA"] {
        let r = c.get(&format!("/posts?limit=50&cursor={bad}")).await;
        assert_eq!((r.status, r.code()), (400, "INVALID_CURSOR"), "{bad}");
    }
    let r = c.get(&format!("/posts?limit=50&status=draft&cursor={cur}")).await;
    assert_eq!((r.status, r.code()), (400, "INVALID_CURSOR"));
    for bad in ["0", "101", "x"] {
        assert_eq!(c.get(&format!("/posts?limit={bad}")).await.code(), "VALIDATION_ERROR");
    }
}

#[tokio::test]
async fn malformed_requests_get_the_envelope() {
    let (c, _) = new_client("malformed").await;
    let r = c.send(c.request("POST", "/posts").header("content-type", "application/json").body("{\"content\": ")).await;
    assert_eq!((r.status, r.code()), (400, "VALIDATION_ERROR"));
    assert!(r.json["error"]["message"].as_str().unwrap().contains("malformed JSON"));
    let r = c.send(c.request("POST", "/posts").header("content-type", "text/plain").body("content=hi")).await;
    assert_eq!((r.status, r.code()), (415, "UNSUPPORTED_MEDIA_TYPE"));
    let r = c.send(c.request("POST", "/posts").header("content-type", "application/json").body(vec![b' '; 2 * 1024 * 1024])).await;
    assert_eq!((r.status, r.code()), (413, "PAYLOAD_TOO_LARGE"));
    // The largest bodies (imports, batches) stop where Lambda's 6 MB payload still holds them.
    let over = shared::request::MAX_LARGE_BODY_BYTES + 1;
    let r = c.send(c.request("POST", "/contacts/imports").header("content-type", "application/json").body(vec![b' '; over])).await;
    assert_eq!((r.status, r.code()), (413, "PAYLOAD_TOO_LARGE"));
    let r = c.get("/nothing-here").await;
    assert_eq!((r.status, r.code()), (404, "NOT_FOUND"));
    let r = c.send(c.request("PUT", "/posts")).await;
    assert_eq!((r.status, r.code()), (405, "METHOD_NOT_ALLOWED"));
    assert_eq!(r.header("allow"), Some("GET, POST"));
    let r = c.get("/posts/not-an-id").await;
    assert_eq!((r.status, r.code()), (404, "NOT_FOUND"));
    let r = c.post("/posts", &json!({"content": 5})).await;
    assert_eq!((r.status, r.code()), (400, "VALIDATION_ERROR"));
    assert_eq!(r.json["error"]["details"][0]["field"], "content");
    let r = c.post("/posts", &json!({"content": "x", "bogus": true})).await;
    assert_eq!(r.status, 400);
    assert!(r.json["error"]["message"].as_str().unwrap().contains("unknown field `bogus`"), "{}", r.json);
    let r = c
        .post(
            "/posts",
            &json!({"content": "", "channel_ids": ["nope", CHANNEL_A, CHANNEL_A], "media": [{"url": "ftp://x.test/a.png", "alt": "a"}]}),
        )
        .await;
    assert_eq!(r.status, 400);
    let fields: Vec<&str> = r.json["error"]["details"].as_array().unwrap().iter().map(|d| d["field"].as_str().unwrap()).collect();
    assert_eq!(fields, vec!["content", "channel_ids[0]", "channel_ids[2]", "media[0].url"], "every problem at once");
    let r = c.send(c.request("POST", "/posts").header("content-type", "application/json").body(vec![0xff, 0xfe, 0x00])).await;
    assert_eq!(r.status, 400);
    let r = c.send(c.request("POST", "/posts").header("content-type", "application/json").body("[1,2]")).await;
    assert_eq!(r.status, 400);
    let r = c.get("/posts?status=sideways").await;
    assert_eq!(r.json["error"]["details"][0]["field"], "status");
}

/// Requests admitted from a bucket just past its theoretical arrival time (a key near its
/// refill rate) take the busy branch, whose update commutes: one call each, where racing on
/// the idle branch lost a conditional write. Past one interval of idleness the bucket starts
/// afresh.
#[tokio::test]
async fn a_bucket_near_its_refill_rate_costs_one_call_per_admission() {
    use shared::ratelimit::{Class, Limit, RateLimiter};
    let h = harness();
    let app = h.app().await;
    let limiter = RateLimiter::new(std::collections::HashMap::from([(Class::Write, Limit::parse("10/s:5").unwrap())]));
    let scope = format!("ws_slack{}", shared::ids::now_ms());
    let t0 = shared::ids::now_ms();
    let (first, calls) = shared::metrics::count_ddb_calls(limiter.acquire_at(&app.db, &scope, Class::Write, t0)).await;
    assert!(first.unwrap().allowed && calls == 1);
    // tat is t0 + 100 (one interval); at t0 + 150 the bucket has been idle for half of one.
    let at = t0 + 150;
    let both = async {
        futures_util::join!(limiter.acquire_at(&app.db, &scope, Class::Write, at), limiter.acquire_at(&app.db, &scope, Class::Write, at))
    };
    let ((x, y), calls) = shared::metrics::count_ddb_calls(both).await;
    assert!(x.unwrap().allowed && y.unwrap().allowed);
    assert_eq!(calls, 2, "one call per admission, no lost race");
    // Idle for longer than an interval: a fresh start (tat = now + T).
    let (d, calls) = shared::metrics::count_ddb_calls(limiter.acquire_at(&app.db, &scope, Class::Write, at + 1_000)).await;
    let d = d.unwrap();
    assert!(d.allowed && d.wait_ms == 100 && calls == 1, "{d:?} in {calls} calls");
}

#[tokio::test]
async fn racing_writes_never_exceed_the_write_burst() {
    let h = harness();
    let (_, key) = h.workspace("burst").await;
    // Two gateways = two containers with separate caches, racing on one bucket.
    let c1 = Client::new(&h.base, &key);
    let c2 = Client::new(&h.base2, &key);
    let started = std::time::Instant::now();
    let futs = (0..40).map(|i| {
        let c = if i % 2 == 0 { &c1 } else { &c2 };
        c.send(c.request("POST", "/posts").json(&json!({"content": format!("race {i}")})))
    });
    let results = join_all(futs).await;
    let elapsed = started.elapsed().as_secs_f64();
    let admitted = results.iter().filter(|r| r.status == 201).count();
    let limited: Vec<_> = results.iter().filter(|r| r.status == 429).collect();
    eprintln!("burst race: {admitted} of 40 admitted, {} limited, in {elapsed:.2} s", limited.len());
    assert_eq!(admitted + limited.len(), 40, "only 201 or 429");
    // Burst 30, refill 1 per second while the race ran.
    let ceiling = 30 + elapsed.ceil() as usize;
    assert!(admitted <= ceiling, "admitted {admitted} > {ceiling}");
    assert!(admitted >= 25, "the burst admits (nearly) 30 at once, got {admitted}");
    for r in &limited {
        assert_eq!(r.code(), "RATE_LIMITED");
        let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
        assert!((1..=60).contains(&retry));
        assert!(r.header("ratelimit").unwrap().starts_with("\"write\";r=0"));
    }
    // Reads are a different class and still pass.
    let r = c1.get("/posts?limit=1").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("ratelimit-policy"), Some("\"read\";q=100;w=20"));
    let list = Client::new(&h.base_bulk, &key).get("/posts?limit=100").await;
    assert_eq!(list.json["data"].as_array().unwrap().len(), admitted, "every 201 was written, no 429 was");
}

#[tokio::test]
async fn idempotent_replay_reuse_and_in_flight() {
    let (c, _) = new_client("idempotency").await;
    let body = json!({"content": "once"});
    let send = |key: &str, body: &serde_json::Value| c.send(c.request("POST", "/posts").header("idempotency-key", key).json(body));
    let first = send("k-1", &body).await;
    assert_eq!(first.status, 201);
    assert!(first.header("idempotent-replayed").is_none());
    let again = send("k-1", &body).await;
    assert_eq!(again.status, 201);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.bytes, first.bytes, "byte-identical replay");
    let reused = send("k-1", &json!({"content": "different"})).await;
    assert_eq!((reused.status, reused.code()), (422, "IDEMPOTENCY_KEY_REUSED"));
    // Another key of the workspace with the same key and request: refused, never given the
    // first caller's answer (keys are visible in approval requests).
    let r = c.post("/workspaces/current/api-keys", &json!({"name": "other"})).await;
    let other = Client::new(&harness().base, r.json["data"]["secret"].as_str().unwrap());
    let theirs = other.send(other.request("POST", "/posts").header("idempotency-key", "k-1").json(&body)).await;
    assert_eq!((theirs.status, theirs.code()), (422, "IDEMPOTENCY_KEY_REUSED"), "{}", theirs.json);
    let other_path = c
        .send(
            c.request("PATCH", &format!("/posts/{}", first.json["data"]["id"].as_str().unwrap()))
                .header("idempotency-key", "k-1")
                .json(&body),
        )
        .await;
    assert_eq!(other_path.status, 422);

    // Ten identical requests at once: exactly one post is created; the rest replay or see 409.
    let racing = join_all((0..10).map(|_| send("k-race", &json!({"content": "raced"})))).await;
    for r in &racing {
        assert!(r.status == 201 || (r.status == 409 && r.code() == "CONFLICT"), "{} {}", r.status, r.json);
        if r.status == 409 {
            assert_eq!(r.header("retry-after"), Some("1"), "an in-flight duplicate is told when to look again");
        }
    }
    let ids: HashSet<&str> = racing.iter().filter(|r| r.status == 201).map(|r| r.json["data"]["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 1, "one object, however many 201s");
    let list = c.get("/posts?limit=100").await;
    let contents: Vec<&str> = list.json["data"].as_array().unwrap().iter().map(|p| p["content"].as_str().unwrap()).collect();
    assert_eq!(contents.iter().filter(|c| **c == "raced").count(), 1);
    assert_eq!(contents.iter().filter(|c| **c == "once").count(), 1);

    // A key's secret is not stored for replay.
    let k1 = c.send(c.request("POST", "/workspaces/current/api-keys").header("idempotency-key", "key-1").json(&json!({"name": "x"}))).await;
    assert!(k1.json["data"]["secret"].is_string());
    let k2 = c.send(c.request("POST", "/workspaces/current/api-keys").header("idempotency-key", "key-1").json(&json!({"name": "x"}))).await;
    assert_eq!(k2.header("idempotent-replayed"), Some("true"));
    assert_eq!(k2.json["data"]["id"], k1.json["data"]["id"]);
    assert!(k2.json["data"].get("secret").is_none());
    let bad = c.send(c.request("POST", "/posts").header("idempotency-key", "").json(&body)).await;
    assert_eq!(bad.status, 400);
}

#[tokio::test]
async fn post_lifecycle_filters_and_events() {
    let (c, ws) = new_client("lifecycle").await;
    let receiver = e2e::receiver::Receiver::start().await;
    let r = c.post("/webhooks", &json!({"url": receiver.url, "event_types": ["post.*"]})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let id = create_post(&c, "launch day").await;
    let (ch_a, ch_b) = (e2e::channel(&c, "a").await, e2e::channel(&c, "b").await);
    let other = c.post("/posts", &json!({"content": "other channel", "channel_ids": [ch_b]})).await;
    let other_id = other.json["data"]["id"].as_str().unwrap().to_string();

    let r = c.post(&format!("/posts/{id}/schedule"), &json!({})).await;
    assert_eq!(r.json["error"]["details"][0]["field"], "scheduled_at", "needs a time");
    let r = c.post(&format!("/posts/{id}/schedule"), &json!({"scheduled_at": "2020-01-01T00:00:00Z"})).await;
    assert_eq!(r.status, 400);
    let nochan = c.post("/posts", &json!({"content": "nowhere"})).await.json["data"]["id"].as_str().unwrap().to_string();
    let r = c.post(&format!("/posts/{nochan}/schedule"), &json!({"scheduled_at": in_hours(2)})).await;
    assert_eq!(r.json["error"]["details"][0]["field"], "channel_ids");

    let at = in_hours(3);
    let r = c.post(&format!("/posts/{id}/schedule"), &json!({"scheduled_at": at})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json["data"]["status"], "scheduled");
    assert_eq!(r.json["data"]["scheduled_at"], at.as_str());
    let r = c.post(&format!("/posts/{id}/schedule"), &json!({"scheduled_at": at})).await;
    assert_eq!((r.status, r.code()), (409, "CONFLICT"), "already scheduled");
    let r = c.patch(&format!("/posts/{id}"), &json!({"scheduled_at": null})).await;
    assert_eq!(r.status, 400, "a scheduled post keeps a time");

    let scheduled = c.get("/posts?status=scheduled").await;
    let ids: Vec<&str> = scheduled.json["data"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec![id.as_str()]);
    let by_channel = c.get(&format!("/posts?channel_id={ch_b}")).await;
    let ids: Vec<&str> = by_channel.json["data"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec![other_id.as_str()]);

    let r = c.post(&format!("/posts/{id}/cancel"), &json!({})).await;
    assert_eq!(r.json["data"]["status"], "draft");
    assert_eq!(c.post(&format!("/posts/{id}/cancel"), &json!({})).await.status, 409);
    assert_eq!(c.get("/posts?status=scheduled").await.json["data"].as_array().unwrap().len(), 0);

    let r = c
        .patch(&format!("/posts/{id}"), &json!({"content": "launch day!", "channel_ids": [ch_a, ch_b], "metadata": {"campaign": "q4"}}))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json["data"]["variants"].as_array().unwrap().len(), 2);
    assert_eq!(r.json["data"]["metadata"]["campaign"], "q4");
    let r = c.delete(&format!("/posts/{id}")).await;
    assert_eq!(r.json["data"], json!({"id": id, "object": "post", "deleted": true}));
    assert_eq!(c.get(&format!("/posts/{id}")).await.status, 404);

    // Every state change reaches a subscribed webhook endpoint (through outbox, queue and dispatcher).
    let wanted = ["post.created", "post.scheduled", "post.unscheduled", "post.updated", "post.deleted"];
    let got = receiver
        .wait_until(30, |got| {
            let mine: HashSet<String> = got.iter().filter(|r| r.json()["data"]["id"] == id.as_str()).map(|r| r.event_type()).collect();
            wanted.iter().all(|w| mine.contains(*w))
        })
        .await;
    let mut found: Vec<String> = got.iter().filter(|r| r.json()["data"]["id"] == id.as_str()).map(|r| r.event_type()).collect();
    for r in &got {
        assert_eq!(r.json()["workspace_id"], ws.as_str());
        assert!(r.json()["id"].as_str().unwrap().starts_with("evt_"));
    }
    found.sort_by_key(|t| wanted.iter().position(|w| w == t));
    found.dedup();
    assert_eq!(found, wanted);
}

#[tokio::test]
async fn workspace_settings_and_round_trips() {
    let h = harness();
    let (a, _) = new_client("settings a").await;
    let (b, _) = new_client("settings b").await;
    // The same name twice: the second workspace gets a suffixed slug.
    let (twin, _) = new_client("settings a").await;
    let (s1, s2) = (
        a.get("/workspaces/current").await.json["data"]["slug"].clone(),
        twin.get("/workspaces/current").await.json["data"]["slug"].clone(),
    );
    assert_eq!(s1, "settings-a");
    assert!(s2.as_str().unwrap().starts_with("settings-a-") && s2 != s1, "{s2}");
    let r = a
        .patch("/workspaces/current", &json!({"timezone": "Mars/Olympus", "locale": "english", "default_currency": "XXX", "name": ""}))
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json["error"]["details"].as_array().unwrap().len(), 4);
    let slug = format!("acme-{}", &shared::ids::new_id("x")[20..28].to_lowercase());
    let r = a.patch("/workspaces/current", &json!({"slug": slug, "timezone": "Europe/Berlin", "default_currency": "USD"})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json["data"]["timezone"], "Europe/Berlin");
    let r = b.patch("/workspaces/current", &json!({"slug": slug})).await;
    assert_eq!((r.status, r.code()), (409, "CONFLICT"), "slugs are unique");
    // A slug given up stays its workspace's (its pages redirect): nobody else takes it.
    a.patch("/workspaces/current", &json!({"slug": format!("{slug}-new")})).await;
    assert_eq!(b.patch("/workspaces/current", &json!({"slug": slug})).await.status, 409);

    // Measured DynamoDB round trips (warm container, the key read recently): bucket + the work.
    let id = create_post(&a, "measure").await;
    let get = a.get(&format!("/posts/{id}")).await;
    assert_eq!(get.ddb_calls(), 2, "GET: bucket, item");
    let post = a.post("/posts", &json!({"content": "measure 2"})).await;
    assert_eq!(post.ddb_calls(), 2, "POST: bucket, transaction");
    // A container that has not seen the key reads it once, and its limiter learns the bucket's
    // state by one failed guess (its last_used_at write is per process, made here already),
    // unless the bucket refilled since the last request (0.4 s here), when "idle" is right.
    let cold = Client::new(&h.base2, a.auth.as_deref().unwrap()).get(&format!("/posts/{id}")).await;
    assert!(matches!(cold.ddb_calls(), 3 | 4), "GET in another container: key, bucket (twice if busy), item: {}", cold.ddb_calls());
    let _ = h;
}

/// docs/api.md's roles, per route class: `read` (GET), content writes (`write`), and what changes
/// who can do what or where data goes (`admin`: API keys, workspace settings, webhooks).
#[tokio::test]
async fn roles_and_scopes_limit_each_route_class() {
    let h = harness();
    let (ws, key) = h.workspace("roles").await;
    let app = h.app().await;
    let hook = json!({"url": "http://127.0.0.1:9/hook"});

    // Each role with a token that asks for every scope: the role decides.
    for (role, content, admin) in [("owner", true, true), ("admin", true, true), ("member", true, false), ("viewer", false, false)] {
        let subject = format!("{role}-{}", shared::ids::new_id("u"));
        domain::workspaces::add_member(&app, &shared::auth::WorkspaceId::trusted(ws.clone()), &subject, role).await.unwrap();
        let mut c = Client::new(&h.base, &tools::admin::mint_token(&subject, "read write admin", 600).unwrap());
        c.workspace = Some(ws.clone());
        let expect = |allowed: bool, ok: u16| if allowed { ok } else { 403 };
        assert_eq!(c.get("/posts").await.status, 200, "{role} reads");
        assert_eq!(c.get("/workspaces/current/members").await.status, 200, "{role} reads members");
        assert_eq!(c.post("/posts", &json!({"content": role})).await.status, expect(content, 201), "{role} writes content");
        let r = c.post("/workspaces/current/api-keys", &json!({"name": role})).await;
        assert_eq!(r.status, expect(admin, 201), "{role} creates keys: {}", r.json);
        if admin {
            assert_eq!(r.json["data"]["created_by"], subject.as_str(), "a key records its creator");
        } else {
            assert!(r.json["error"]["message"].as_str().unwrap().contains("admin scope"), "{}", r.json);
        }
        assert_eq!(c.get("/workspaces/current/api-keys").await.status, expect(admin, 200), "{role} lists keys");
        assert_eq!(c.patch("/workspaces/current", &json!({"name": "Roles"})).await.status, expect(admin, 200), "{role} edits settings");
        assert_eq!(c.post("/webhooks", &hook).await.status, expect(admin, 201), "{role} adds a webhook");
        let channel = json!({"type": "webhook", "name": role, "credentials": hook});
        assert_eq!(c.post("/channels", &channel).await.status, expect(admin, 201), "{role} connects a channel");
        assert_eq!(c.get("/channels").await.status, 200, "{role} reads channels");
    }

    // Keys: a content key writes content but cannot manage; a read key only reads.
    let owner = Client::new(&h.base, &key);
    let mut keys = vec![];
    for scopes in [json!(["read", "write"]), json!(["read"])] {
        let r = owner.post("/workspaces/current/api-keys", &json!({"name": "scoped", "scopes": scopes})).await;
        assert_eq!(r.status, 201, "{}", r.json);
        assert!(r.json["data"]["created_by"].as_str().unwrap().starts_with("key:"), "{}", r.json);
        keys.push(Client::new(&h.base, r.json["data"]["secret"].as_str().unwrap()));
    }
    let (content, read) = (&keys[0], &keys[1]);
    assert_eq!(content.post("/posts", &json!({"content": "k"})).await.status, 201);
    assert_eq!(content.post("/webhooks", &hook).await.status, 403);
    assert_eq!(content.post("/channels", &json!({"type": "webhook", "credentials": hook})).await.status, 403);
    assert_eq!(content.post("/workspaces/current/api-keys", &json!({"name": "escalate", "scopes": ["admin"]})).await.status, 403);
    assert_eq!(read.get("/posts").await.status, 200);
    assert_eq!(read.post("/posts", &json!({"content": "k"})).await.status, 403);

    // No credential mints one with more rights than its own.
    let owner_sub = format!("owner-{}", shared::ids::new_id("u"));
    domain::workspaces::add_member(&app, &shared::auth::WorkspaceId::trusted(ws.clone()), &owner_sub, "owner").await.unwrap();
    let mut narrow = Client::new(&h.base, &tools::admin::mint_token(&owner_sub, "read admin", 600).unwrap());
    narrow.workspace = Some(ws.clone());
    let r = narrow.post("/workspaces/current/api-keys", &json!({"name": "wider", "scopes": ["read", "write"]})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("scopes")), "{}", r.json);

    // Missing or unknown scopes grant nothing.
    for scope in ["", "superuser everything"] {
        let mut c = Client::new(&h.base, &tools::admin::mint_token(&owner_sub, scope, 600).unwrap());
        c.workspace = Some(ws.clone());
        let r = c.get("/posts").await;
        assert_eq!((r.status, r.code()), (403, "FORBIDDEN"), "scope {scope:?}");
    }
}

async fn put(c: &Client, subject: &str, role: &str) -> e2e::Resp {
    c.send(c.request("PUT", &format!("/workspaces/current/members/{subject}")).json(&json!({"role": role}))).await
}

/// `PUT /workspaces/current/members/{subject}` (members.change): admins manage roles, only an
/// owner touches owners and never their own role, and two owners demoting each other at once
/// cannot leave the workspace without one.
#[tokio::test]
async fn members_are_set_by_put_and_a_workspace_always_keeps_an_owner() {
    let h = harness();
    let (ws, key) = h.workspace("members").await;
    let app = h.app().await;
    let (first, second, admin) = (
        format!("o1-{}", shared::ids::new_id("u")),
        format!("o2-{}", shared::ids::new_id("u")),
        format!("ad-{}", shared::ids::new_id("u")),
    );
    domain::workspaces::add_member(&app, &shared::auth::WorkspaceId::trusted(ws.clone()), &first, "owner").await.unwrap();
    domain::workspaces::add_member(&app, &shared::auth::WorkspaceId::trusted(ws.clone()), &second, "owner").await.unwrap();
    domain::workspaces::add_member(&app, &shared::auth::WorkspaceId::trusted(ws.clone()), &admin, "admin").await.unwrap();
    let person = |sub: &str| {
        let mut c = Client::new(&h.base, &tools::admin::mint_token(sub, "read write admin", 600).unwrap());
        c.workspace = Some(ws.clone());
        c
    };
    let (o1, o2, a) = (person(&first), person(&second), person(&admin));
    let k = Client::new(&h.base, &key);
    // A key with the admin scope adds a member; the subject is percent-decoded.
    let r = put(&k, "auth0%7Cnew", "member").await;
    assert_eq!(
        (r.status, r.json["data"]["subject"].as_str(), r.json["data"]["role"].as_str()),
        (200, Some("auth0|new"), Some("member")),
        "{}",
        r.json
    );
    let r = put(&a, "auth0%7Cnew", "viewer").await;
    assert_eq!((r.status, r.json["data"]["role"].as_str()), (200, Some("viewer")), "{}", r.json);
    assert_eq!((put(&a, "auth0%7Cnew", "boss").await.json["error"]["details"][0]["field"]).as_str(), Some("role"));
    // Owners are an owner's business: not an admin's, not a key's, not their own.
    assert_eq!(put(&a, "auth0%7Cnew", "owner").await.status, 403);
    assert_eq!(put(&k, &first, "admin").await.status, 403);
    assert_eq!(put(&o1, &first, "admin").await.status, 403);
    let r = put(&o1, &admin, "owner").await;
    assert_eq!(r.status, 200, "{}", r.json);
    let r = put(&a, &admin, "owner").await;
    assert_eq!(r.json["data"]["role"], "owner", "setting the same role again changes nothing");

    // Two owners demote each other at once: at most one wins, an owner is left.
    let (x, y) = tokio::join!(put(&o1, &second, "admin"), put(&o2, &first, "admin"));
    assert!(!(x.status == 200 && y.status == 200), "both demotions ran: {} {}", x.json, y.json);
    let members = k.get("/workspaces/current/members?limit=100").await;
    let owners: Vec<&str> =
        members.json["data"].as_array().unwrap().iter().filter(|m| m["role"] == "owner").map(|m| m["subject"].as_str().unwrap()).collect();
    assert!(!owners.is_empty() && owners.contains(&admin.as_str()), "{owners:?}");
}

/// An empty filter is refused naming it (the contract says `minLength: 1`, so generated
/// clients leave unset filters out), and a required parameter left out is named as required.
#[tokio::test]
async fn empty_filters_are_refused_by_name_and_the_contract_says_so() {
    let (c, _) = new_client("empty filters").await;
    for (path, field) in
        [("/emails?tag=", "tag"), ("/emails?batch_id=", "batch_id"), ("/posts?status=", "status"), ("/contacts?cursor=", "cursor")]
    {
        let r = c.get(path).await;
        assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some(field)), "{path}: {}", r.json);
    }
    let contract: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tools::localstack::repo_root().join("openapi/openapi.json")).unwrap()).unwrap();
    let params = contract["paths"]["/emails"]["get"]["parameters"].as_array().unwrap();
    for name in ["tag", "batch_id"] {
        let p = params.iter().find(|p| p["name"] == name).unwrap();
        assert_eq!(p["schema"]["minLength"], 1, "{p}");
    }
    let r = c.get("/bookings/availability?service_id=svc_01J00000000000000000000000&to=2027-01-01").await;
    assert_eq!(
        (r.status, r.json["error"]["details"][0]["field"].as_str(), r.json["error"]["details"][0]["message"].as_str()),
        (400, Some("from"), Some("is required")),
        "{}",
        r.json
    );
}
