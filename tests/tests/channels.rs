//! Channels and publishing end to end over HTTP: a Mastodon-compatible server written from the
//! API documentation (`tests/mastodon/server.py`) and webhook receivers on 127.0.0.1, with the
//! publisher running in the local stack's worker (queue + tick every second).

use domain::ids::PostId;
use e2e::receiver::Receiver;
use e2e::{Client, harness};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::io::AsyncBufReadExt;
use tools::pds::{Account, LocalPds};

struct Mastodon {
    url: String,
    http: reqwest::Client,
    _child: tokio::process::Child,
}

impl Mastodon {
    async fn start() -> Self {
        let root = tools::localstack::repo_root();
        let mut child = tokio::process::Command::new("python3")
            .arg(root.join("tests/mastodon/server.py"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("python3 tests/mastodon/server.py");
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(Duration::from_secs(10), lines.next_line()).await.expect("server starts").unwrap().unwrap();
        let url = serde_json::from_str::<Value>(&first).unwrap()["url"].as_str().unwrap().to_string();
        Self { url, http: reqwest::Client::new(), _child: child }
    }
    async fn call(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let mut req = self.http.request(method.clone(), format!("{}{path}", self.url));
        if method != reqwest::Method::GET {
            req = req.json(&body);
        }
        let r = req.send().await.unwrap();
        r.json().await.unwrap_or_default()
    }
    /// A new account's access token.
    async fn account(&self, name: &str) -> String {
        self.call(reqwest::Method::POST, "/_test/accounts", json!({"username": name})).await["access_token"].as_str().unwrap().to_string()
    }
    async fn statuses(&self) -> Vec<Value> {
        self.call(reqwest::Method::GET, "/_test/statuses", json!({})).await.as_array().cloned().unwrap_or_default()
    }
}

async fn client(name: &str) -> (Client, String) {
    let h = harness();
    let (ws, key) = h.workspace(name).await;
    (Client::new(&h.base, &key), ws)
}

async fn connect(c: &Client, body: Value) -> Value {
    let r = c.post("/channels", &body).await;
    assert_eq!(r.status, 201, "{}", r.json);
    r.json["data"].clone()
}

async fn mastodon_channel(c: &Client, m: &Mastodon, user: &str) -> (String, String) {
    let token = m.account(user).await;
    let ch = connect(c, json!({"type": "mastodon", "credentials": {"instance_url": m.url, "access_token": token}})).await;
    (ch["id"].as_str().unwrap().to_string(), token)
}

/// A 1x1 PNG.
const PNG: &str = "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082";

fn png() -> Vec<u8> {
    (0..PNG.len()).step_by(2).map(|i| u8::from_str_radix(&PNG[i..i + 2], 16).unwrap()).collect()
}

async fn publish(c: &Client, content: &str, channels: &[&str]) -> String {
    publish_with(c, json!({"content": content, "channel_ids": channels})).await
}

async fn publish_with(c: &Client, body: Value) -> String {
    let r = c.post("/posts", &body).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let id = r.json["data"]["id"].as_str().unwrap().to_string();
    let r = c.post(&format!("/posts/{id}/publish"), &json!({})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    id
}

/// Poll the post until its status is one of `statuses`.
async fn wait_post(c: &Client, id: &str, statuses: &[&str]) -> Value {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let r = c.get(&format!("/posts/{id}")).await;
        assert_eq!(r.status, 200, "{}", r.json);
        if statuses.contains(&r.json["data"]["status"].as_str().unwrap()) || Instant::now() > deadline {
            return r.json["data"].clone();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn connecting_checks_credentials_which_never_come_back() {
    let m = Mastodon::start().await;
    let (c, _) = client("channels connect").await;
    // Every channel event goes to this endpoint: none may carry a credential.
    let events = Receiver::start().await;
    let r = c.post("/webhooks", &json!({"url": events.url, "event_types": ["channel.*"]})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let r = c.post("/channels", &json!({"type": "mastodon", "credentials": {"instance_url": m.url, "access_token": "wrong"}})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("credentials")), "{}", r.json);
    assert!(
        r.json["error"]["details"][0]["message"].as_str().unwrap().contains("The access token is invalid"),
        "the network's reason: {}",
        r.json
    );
    let r = c.post("/channels", &json!({"type": "mastodon", "credentials": {"instance_url": m.url}})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("credentials")), "{}", r.json);

    let token = m.account("ada").await;
    let r = c
        .post("/channels", &json!({"type": "mastodon", "name": "ada", "credentials": {"instance_url": m.url, "access_token": token}}))
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    let ch = r.json["data"].clone();
    assert_eq!((ch["state"].as_str(), ch["masked_identity"].as_str()), (Some("active"), Some("@ada@127.0.0.1")));
    assert_eq!(ch["limits"]["max_characters"], 500, "read from the instance");
    let id = ch["id"].as_str().unwrap();

    let receiver = Receiver::start().await;
    let hook = connect(&c, json!({"type": "webhook", "credentials": {"url": receiver.url}})).await;
    assert!(hook["secret"].as_str().unwrap().starts_with("whsec_"), "shown once: {hook}");
    let secret = hook["secret"].as_str().unwrap().to_string();
    // Neither the token nor the secret appears in any later answer.
    for path in ["/channels".to_string(), format!("/channels/{id}"), format!("/channels/{}", hook["id"].as_str().unwrap())] {
        let r = c.get(&path).await;
        assert_eq!(r.status, 200);
        let text = r.json.to_string();
        assert!(!text.contains(&token) && !text.contains(&secret) && !text.contains("whsec_"), "{text}");
    }
    let r = c.post(&format!("/channels/{id}/verify"), &json!({})).await;
    assert_eq!((r.status, r.json["data"]["state"].as_str()), (200, Some("active")), "{}", r.json);
    assert!(!r.json.to_string().contains(&token));

    // The text is checked against the channel's limit when the post is written.
    let r = c.post("/posts", &json!({"content": "x".repeat(501), "channel_ids": [id]})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("variants[0].content")), "{}", r.json);
    let r = c
        .post("/posts", &json!({"content": "short", "channel_ids": [id], "variants": [{"channel_id": id, "content": "y".repeat(600)}]}))
        .await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("variants[0].content")), "{}", r.json);

    // Another workspace neither sees nor uses the channel.
    let (other, _) = client("channels other").await;
    assert_eq!(other.get(&format!("/channels/{id}")).await.status, 404);
    assert_eq!(other.post(&format!("/channels/{id}/verify"), &json!({})).await.status, 404);
    let r = other.post("/posts", &json!({"content": "hi", "channel_ids": [id]})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("channel_ids[0]")), "{}", r.json);

    let got = events.wait_until(30, |got| got.iter().filter(|r| r.event_type() == "channel.connected").count() >= 2).await;
    let types: Vec<String> = got.iter().map(|r| r.event_type()).collect();
    assert!(types.iter().filter(|t| *t == "channel.connected").count() >= 2, "{types:?}");
    for r in &got {
        let body = String::from_utf8_lossy(&r.body);
        assert!(!body.contains(&token) && !body.contains(&secret) && !body.contains("whsec_"), "{body}");
    }

    // Deleting a channel takes it off drafts.
    let draft = c.post("/posts", &json!({"content": "later", "channel_ids": [id, hook["id"]]})).await.json["data"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(c.delete(&format!("/channels/{id}")).await.status, 200);
    let p = c.get(&format!("/posts/{draft}")).await.json["data"].clone();
    assert_eq!(p["channel_ids"], json!([hook["id"]]), "{p}");
    assert_eq!(p["variants"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_post_to_three_channels_publishes_once_to_each_even_when_runs_repeat() {
    let h = harness();
    let m = Mastodon::start().await;
    let (c, ws) = client("channels publish").await;
    let (a, _) = mastodon_channel(&c, &m, "ann").await;
    let (b, _) = mastodon_channel(&c, &m, "ben").await;
    let receiver = Receiver::start().await;
    receiver.serve("/site", &json!({"remote_id": "site-1", "permalink": "https://site.example/posts/1"}));
    let hook = connect(&c, json!({"type": "webhook", "credentials": {"url": format!("{}/site", receiver.origin())}})).await;
    let secret = hook["secret"].as_str().unwrap().to_string();
    let w = hook["id"].as_str().unwrap().to_string();

    // The first status attempt is rate limited: the variant waits and is posted once.
    m.call(reqwest::Method::POST, "/_test/fail", json!({"count": 1, "status": 429})).await;
    receiver.serve_file("/dot.png", "image/png", png());
    let image = json!({"url": format!("{}/dot.png", receiver.origin()), "alt": "a red dot"});
    let id = publish_with(
        &c,
        json!({"content": "Hello from the platform https://example.com/launch #launch", "channel_ids": [a, b, w], "media": [image],
            "language": "en", "variants": [{"channel_id": a, "visibility": "unlisted", "spoiler_text": "launch news", "sensitive": true}]}),
    )
    .await;
    let post = wait_post(&c, &id, &["published", "partially_failed", "failed"]).await;
    assert_eq!(post["status"], "published", "{post}");
    for v in post["variants"].as_array().unwrap() {
        assert_eq!(v["status"], "published", "{v}");
        assert!(v["published_at"].is_string() && v["remote_id"].is_string(), "{v}");
    }
    let site = post["variants"].as_array().unwrap().iter().find(|v| v["channel_id"] == w.as_str()).unwrap();
    assert_eq!((site["remote_id"].as_str(), site["permalink"].as_str()), (Some("site-1"), Some("https://site.example/posts/1")));
    // Mastodon permalinks resolve on the server.
    for v in post["variants"].as_array().unwrap().iter().filter(|v| v["channel_id"] != w.as_str()) {
        let link = v["permalink"].as_str().unwrap();
        assert!(link.starts_with(&m.url), "{link}");
        assert_eq!(reqwest::get(link).await.unwrap().status(), 200, "{link}");
    }
    let hits: Vec<_> = receiver.received().into_iter().filter(|r| r.path == "/site").collect();
    assert_eq!(hits.len(), 1);
    assert!(hits[0].verifies(&secret), "signed like webhook deliveries");
    assert_eq!(hits[0].json()["media"][0]["alt"], "a red dot");
    for s in m.statuses().await {
        assert_eq!(s["media_ids"].as_array().map(Vec::len), Some(1), "the image was uploaded: {s}");
        assert_eq!(s["language"], "en");
    }
    let ann = m.statuses().await.into_iter().find(|s| s["account"] == "ann").unwrap();
    assert_eq!(
        (ann["visibility"].as_str(), ann["spoiler_text"].as_str(), ann["sensitive"].as_bool()),
        (Some("unlisted"), Some("launch news"), Some(true)),
        "{ann}"
    );
    assert_eq!(hits[0].header("x-service-idempotency-key"), format!("{id}/{w}"));

    // Copies of the message and extra runs afterwards change nothing.
    let publisher = domain::publishing::Publisher::new(h.app().await).unwrap();
    for _ in 0..3 {
        domain::publishing::enqueue(&publisher.app, &shared::auth::WorkspaceId::trusted(ws.clone()), &id, 0).await;
    }
    let wid = shared::auth::WorkspaceId::trusted(ws.clone());
    let post = PostId::trusted(id.as_str());
    let (r1, r2) = tokio::join!(publisher.run(&wid, &post), publisher.run(&wid, &post));
    assert!(r1.is_ok() && r2.is_ok());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let statuses = m.statuses().await;
    assert_eq!(statuses.len(), 2, "one status per Mastodon variant: {statuses:?}");
    assert_eq!(receiver.hits("/site"), 1);
}

#[tokio::test]
async fn a_publisher_that_died_after_the_remote_call_does_not_post_twice() {
    let h = harness();
    let m = Mastodon::start().await;
    let (c, ws) = client("channels crash").await;
    let (a, token) = mastodon_channel(&c, &m, "cy").await;
    let r = c.post("/posts", &json!({"content": "exactly once", "channel_ids": [a]})).await;
    let id = r.json["data"]["id"].as_str().unwrap().to_string();
    // What a run that died would have left: the remote status posted with the variant's key,
    // and a claim on the variant that has expired, nothing recorded.
    let key = format!("{id}/{a}");
    let sent = m
        .http
        .post(format!("{}/api/v1/statuses", m.url))
        .bearer_auth(&token)
        .header("idempotency-key", &key)
        .json(&json!({"status": "exactly once"}))
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 200);
    let first: Value = sent.json().await.unwrap();
    let app = h.app().await;
    let claim = shared::store::Item::from([
        ("pk".to_string(), aws_sdk_dynamodb::types::AttributeValue::S(format!("WS#{ws}"))),
        (
            "sk".to_string(),
            aws_sdk_dynamodb::types::AttributeValue::S(domain::publishing::variant_sk(
                &PostId::trusted(id.as_str()),
                &domain::ids::ChannelId::trusted(a.as_str()),
            )),
        ),
        ("state".to_string(), aws_sdk_dynamodb::types::AttributeValue::S("publishing".into())),
        ("claim_until".to_string(), aws_sdk_dynamodb::types::AttributeValue::N((chrono::Utc::now().timestamp() - 1).to_string())),
        ("attempts".to_string(), aws_sdk_dynamodb::types::AttributeValue::N("1".into())),
    ]);
    app.db.put(claim).required().await.unwrap();
    assert_eq!(c.post(&format!("/posts/{id}/publish"), &json!({})).await.status, 202);
    let post = wait_post(&c, &id, &["published", "failed"]).await;
    assert_eq!(post["status"], "published", "{post}");
    assert_eq!(post["variants"][0]["remote_id"], first["id"], "the first status, found by its key");
    assert_eq!(m.statuses().await.len(), 1, "one remote post");
}

#[tokio::test]
async fn one_failing_channel_gives_partially_failed_and_a_revoked_token_disconnects() {
    let m = Mastodon::start().await;
    let (c, _) = client("channels failures").await;
    let (ok, _) = mastodon_channel(&c, &m, "dee").await;
    let (revoked, token) = mastodon_channel(&c, &m, "eve").await;
    let refusing = Receiver::start().await;
    refusing.set_default(422);
    let hook = connect(&c, json!({"type": "webhook", "credentials": {"url": refusing.url}})).await;
    let w = hook["id"].as_str().unwrap().to_string();
    m.call(reqwest::Method::POST, "/_test/revoke", json!({"access_token": token})).await;

    let id = publish(&c, "some get it", &[&ok, &revoked, &w]).await;
    let post = wait_post(&c, &id, &["published", "partially_failed", "failed"]).await;
    assert_eq!(post["status"], "partially_failed", "{post}");
    let variant = |ch: &str| post["variants"].as_array().unwrap().iter().find(|v| v["channel_id"] == ch).unwrap().clone();
    assert_eq!(variant(&ok)["status"], "published");
    assert_eq!(
        (variant(&revoked)["status"].as_str(), variant(&revoked)["error"]["category"].as_str()),
        (Some("failed"), Some("auth_expired"))
    );
    assert_eq!(
        (variant(&w)["error"]["category"].as_str(), variant(&w)["error"]["retryable"].as_bool()),
        (Some("user_content"), Some(false))
    );
    let ch = c.get(&format!("/channels/{revoked}")).await.json["data"].clone();
    assert_eq!(ch["state"], "disconnected", "{ch}");
    assert_eq!(refusing.received().len(), 1, "a refusal is not retried");

    // The receiver is fixed: retrying its variant publishes it; the post stays partially failed.
    refusing.set_default(200);
    let r = c.post(&format!("/posts/{id}/variants/{w}/retry"), &json!({})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    let post = wait_post(&c, &id, &["partially_failed", "published", "failed"]).await;
    assert_eq!(variant_status(&post, &w), "published", "{post}");
    assert_eq!(post["status"], "partially_failed");
    assert_eq!(c.post(&format!("/posts/{id}/variants/{ok}/retry"), &json!({})).await.status, 409, "only failed variants");
}

fn variant_status(post: &Value, ch: &str) -> String {
    post["variants"].as_array().unwrap().iter().find(|v| v["channel_id"] == ch).unwrap()["status"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_scheduled_post_is_published_at_its_time_and_not_before() {
    let m = Mastodon::start().await;
    let (c, _) = client("channels schedule").await;
    let (a, _) = mastodon_channel(&c, &m, "fay").await;
    let at = chrono::Utc::now() + chrono::Duration::seconds(4);
    let r = c.post("/posts", &json!({"content": "on time", "channel_ids": [a]})).await;
    let id = r.json["data"]["id"].as_str().unwrap().to_string();
    let r = c.post(&format!("/posts/{id}/schedule"), &json!({"scheduled_at": shared::ids::format_time(at)})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(c.get(&format!("/posts/{id}")).await.json["data"]["status"], "scheduled");
    assert!(m.statuses().await.is_empty(), "not before its time");
    let post = wait_post(&c, &id, &["published", "failed"]).await;
    assert_eq!(post["status"], "published", "{post}");
    // Times are whole seconds: compare with the stored schedule, and report the delay.
    let published = chrono::DateTime::parse_from_rfc3339(post["published_at"].as_str().unwrap()).unwrap();
    let due = chrono::DateTime::parse_from_rfc3339(post["scheduled_at"].as_str().unwrap()).unwrap();
    assert!(published >= due, "{published} >= {due}");
    println!("due -> published: {} s (tick every second here, every minute on AWS)", (published - due).num_seconds());
    assert_eq!(m.statuses().await.len(), 1);
}

async fn bluesky_channel(c: &Client, pds: &LocalPds, a: &Account) -> String {
    let ch =
        connect(c, json!({"type": "bluesky", "credentials": {"handle": a.handle, "app_password": a.app_password, "service_url": pds.url}}))
            .await;
    assert_eq!(ch["masked_identity"], format!("@{}", a.handle));
    ch["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn bluesky_posts_reach_a_real_pds_once_with_facets_and_images() {
    let pds = LocalPds::start().await.expect("the local PDS (make deps installs it)");
    let (c, ws) = client("channels bluesky").await;
    let ada = pds.account("ada").await.unwrap();
    let r = c
        .post("/channels", &json!({"type": "bluesky", "credentials": {"handle": ada.handle, "app_password": "wrong-wrong-wrong-wrong", "service_url": pds.url}}))
        .await;
    assert_eq!(r.status, 400, "{}", r.json);
    assert!(r.json.to_string().contains("Invalid identifier or password"), "the PDS's reason: {}", r.json);
    let ch = bluesky_channel(&c, &pds, &ada).await;
    let listed = c.get("/channels").await.json.to_string();
    assert!(!listed.contains(&ada.app_password) && !listed.contains("accessJwt"), "{listed}");

    // 300 graphemes at most: an emoji family is one.
    let r = c.post("/posts", &json!({"content": "👩‍👩‍👧".repeat(300), "channel_ids": [ch]})).await;
    assert_eq!(r.status, 201, "300 graphemes fit: {}", r.json);
    let r = c.post("/posts", &json!({"content": "x".repeat(301), "channel_ids": [ch]})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("variants[0].content")), "{}", r.json);

    let receiver = Receiver::start().await;
    receiver.serve_file("/dot.png", "image/png", png());
    let text = "Blåbær launch 🚀 https://example.com/a #launch";
    let body = json!({"content": text, "channel_ids": [ch], "media": [{"url": format!("{}/dot.png", receiver.origin()), "alt": "a dot"}]});
    let id = publish_with(&c, body).await;
    let post = wait_post(&c, &id, &["published", "failed"]).await;
    assert_eq!(post["status"], "published", "{post}");
    let v = &post["variants"][0];
    assert!(v["remote_id"].as_str().unwrap().starts_with(&format!("at://{}/app.bsky.feed.post/", ada.did)), "{v}");
    assert!(v["permalink"].as_str().unwrap().starts_with(&format!("https://bsky.app/profile/{}/post/", ada.handle)), "{v}");

    let records = pds.posts(&ada.did).await.unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    let rec = &records[0]["value"];
    assert_eq!(rec["text"], text);
    let link = rec["facets"].as_array().unwrap().iter().find(|f| f["features"][0]["$type"] == "app.bsky.richtext.facet#link").unwrap();
    let (start, end) = (link["index"]["byteStart"].as_u64().unwrap() as usize, link["index"]["byteEnd"].as_u64().unwrap() as usize);
    assert_eq!(&text.as_bytes()[start..end], b"https://example.com/a", "UTF-8 byte offsets");
    assert!(rec["facets"].to_string().contains("\"tag\":\"launch\""), "{rec}");
    assert_eq!(rec["embed"]["images"][0]["alt"], "a dot", "{rec}");

    // Runs repeated after the fact find the record instead of creating another.
    let publisher = domain::publishing::Publisher::new(harness().app().await).unwrap();
    let _ = publisher.run(&shared::auth::WorkspaceId::trusted(ws.clone()), &PostId::trusted(id.as_str())).await;
    assert_eq!(pds.posts(&ada.did).await.unwrap().len(), 1);

    // A run that died after createRecord: the record with the variant's key exists, nothing
    // was recorded. The next run finds it (getRecord) and does not post again.
    let r = c.post("/posts", &json!({"content": "once", "channel_ids": [ch]})).await;
    let (pid, created) = (r.json["data"]["id"].as_str().unwrap().to_string(), r.json["data"]["created_at"].as_str().unwrap().to_string());
    let rkey = domain::channels::bluesky::tid_for(&format!("{pid}/{ch}"), &created);
    let (s, made) = pds
        .xrpc(
            "com.atproto.repo.createRecord",
            Some(&ada.jwt),
            json!({"repo": ada.did, "collection": "app.bsky.feed.post", "rkey": rkey, "record": {"$type": "app.bsky.feed.post", "text": "once", "createdAt": created}}),
        )
        .await
        .unwrap();
    assert_eq!(s, 200, "{made}");
    assert_eq!(c.post(&format!("/posts/{pid}/publish"), &json!({})).await.status, 202);
    let post = wait_post(&c, &pid, &["published", "failed"]).await;
    assert_eq!(post["status"], "published", "{post}");
    assert_eq!(post["variants"][0]["remote_id"], made["uri"]);
    assert_eq!(pds.posts(&ada.did).await.unwrap().len(), 2, "one record per post");
}

/// The publisher's networks failing each way behind the fault proxy (`e2e::faults`) while a
/// post is published to Mastodon and to Bluesky: the variant waits (retried on its schedule,
/// 10 s after a first failure) and is posted once the network is back. A cut answer and a
/// hang are the ambiguous ones (the server may have posted): the variant's key (Mastodon's
/// `Idempotency-Key`, Bluesky's record key) keeps it to one remote post. `make test` runs the
/// cut row for both networks; `make chaos` (`CHAOS=full`) every fault, written to
/// docs/reliability.md.
#[tokio::test]
async fn a_failing_network_delays_a_post_and_it_is_posted_once() {
    use e2e::faults::{Fault, FaultProxy};
    let full = std::env::var("CHAOS").is_ok_and(|v| v == "full");
    harness();
    let m = Mastodon::start().await;
    let pds = LocalPds::start().await.expect("the local PDS (make deps installs it)");
    let (mproxy, pproxy) = (FaultProxy::start(&m.url).await, FaultProxy::start(&pds.url).await);
    let (c, _) = client("channels faults").await;
    let token = m.account("faulty").await;
    let mastodon = connect(&c, json!({"type": "mastodon", "credentials": {"instance_url": mproxy.url, "access_token": token}})).await;
    let ada = pds.account("faulty").await.unwrap();
    let bluesky = connect(
        &c,
        json!({"type": "bluesky", "credentials": {"handle": ada.handle, "app_password": ada.app_password, "service_url": pproxy.url}}),
    )
    .await;
    let faults = if full {
        vec![Fault::Reset, Fault::Hang, Fault::Latency(Duration::from_millis(1500)), Fault::Cut, Fault::ServerError, Fault::Throttle]
    } else {
        vec![Fault::Cut]
    };
    let mut rows = vec![];
    for fault in faults {
        for (network, proxy, ch) in [("Mastodon", &mproxy, &mastodon), ("Bluesky", &pproxy, &bluesky)] {
            let marker = format!("fault{}", ulid::Ulid::generate().to_string().to_lowercase());
            proxy.set(fault, None);
            let id = publish(&c, &format!("Through a failing network {marker}"), &[ch["id"].as_str().unwrap()]).await;
            tokio::time::sleep(Duration::from_secs(3)).await;
            let hit = proxy.clear();
            let cleared = Instant::now();
            let deadline = cleared + Duration::from_secs(150);
            let post = loop {
                let p = c.get(&format!("/posts/{id}")).await.json["data"].clone();
                if matches!(p["status"].as_str(), Some("published" | "failed" | "partially_failed")) || Instant::now() > deadline {
                    break p;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            };
            let after = cleared.elapsed();
            let remote = if network == "Mastodon" {
                m.statuses().await.iter().filter(|s| s["content"].as_str().is_some_and(|t| t.contains(&marker))).count()
            } else {
                pds.posts(&ada.did)
                    .await
                    .unwrap()
                    .iter()
                    .filter(|r| r["value"]["text"].as_str().is_some_and(|t| t.contains(&marker)))
                    .count()
            };
            let row = format!(
                "| {network} | {} | {hit} | {} | {remote} | {:.1} s |",
                fault.name(),
                post["status"].as_str().unwrap_or("?"),
                after.as_secs_f64()
            );
            println!("{row}");
            rows.push(row);
            assert_eq!(post["status"], "published", "{network} {}: {post}", fault.name());
            assert_eq!(remote, 1, "{network} {}: one remote post", fault.name());
            assert!(hit > 0, "{network} {}: the fault met no request", fault.name());
        }
    }
    if let Ok(doc) = std::env::var("CHAOS_REPORT") {
        let header = "| network | fault (3 s) | requests it met | post | remote posts | published after the fault ended |\n|---|---|---|---|---|---|\n";
        e2e::load::splice(&doc, "networks", &format!("{header}{}", rows.join("\n")));
    }
}
