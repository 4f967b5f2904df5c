//! End-to-end harness: one local stack per test binary (DynamoDB Local + moto + dev gateways on
//! free 127.0.0.1 ports), started on first use in its own thread and runtime. The emulators
//! die with the test process (see tools::localstack). Tests isolate themselves by creating
//! fresh workspaces, so they never depend on each other or on order.

pub mod faults;
pub mod load;
pub mod receiver;
pub mod ses_proxy;

use serde_json::Value;
use shared::App;
use shared::config::Config;
use std::sync::OnceLock;
use tools::admin::Resources;

pub struct Harness {
    /// The stack's runtime: gateways a test adds run here, on its roomy threads.
    pub runtime: tokio::runtime::Handle,
    /// Gateway "container" 1 and 2: same stack, separate in-memory caches.
    pub base: String,
    pub base2: String,
    /// A gateway whose write limit is high, for seeding data quickly.
    pub base_bulk: String,
    /// A gateway with production URL rules (https only, no loopback).
    pub base_strict: String,
    /// A gateway whose SQS endpoint is unreachable: events stay in the outbox for the sweep.
    pub base_noqueue: String,
    pub moto_endpoint: String,
    pub dynamodb_endpoint: String,
    /// The emulators' guard processes, for [`Harness::freeze`].
    pub dynamodb_guard: u32,
    pub moto_guard: u32,
    pub resources: Resources,
    pub config: Config,
    /// What `.local/dev.env` holds for `base`'s stack, less the demo workspace
    /// (`tools::DevStack::env`).
    pub env: Vec<(&'static str, String)>,
}

static HARNESS: OnceLock<Harness> = OnceLock::new();

/// How often the scheduled functions run (the outbox sweep, the email, publish and snooze
/// ticks): every second, so a test sees a sweep's recovery at once; `E2E_SCHEDULE_SECS` sets
/// it, and the soak runs them at production's cadence (`make soak`: 60, as template.yaml's
/// `rate(1 minute)`), since at one a second they are some forty extra queries a second.
fn schedule_every() -> std::time::Duration {
    let secs = std::env::var("E2E_SCHEDULE_SECS").ok().and_then(|v| v.parse().ok()).filter(|s| *s > 0).unwrap_or(1);
    std::time::Duration::from_secs(secs)
}

pub fn harness() -> &'static Harness {
    HARNESS.get_or_init(|| {
        // E2E_LOG=1 prints the functions' JSON logs (gateways and dispatcher) while tests run.
        if std::env::var_os("E2E_LOG").is_some() {
            shared::telemetry::init();
        }
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // Debug builds' request futures are deep (hundreds of KB of stack per request, in
            // frames release builds do not have): the gateways' threads get room for them.
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_stack_size(GATEWAY_STACK)
                .enable_all()
                .build()
                .expect("runtime");
            let handle = rt.handle().clone();
            rt.block_on(async move {
                // One log directory per test binary: binaries run in parallel (`testrun`).
                let exe = std::env::current_exe().ok().and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()));
                let mut binary = exe.as_deref().map_or("e2e", |s| s.rsplit_once('-').map_or(s, |(name, _hash)| name)).to_string();
                // A binary testrun runs in parts (its processes at once) logs per part.
                if let Ok(part) = std::env::var("E2E_LOG_PART") {
                    binary = format!("{binary}-{part}");
                }
                let logs = tools::localstack::repo_root().join("target/e2e-logs").join(binary);
                // Keys are trusted for an hour here, so the round-trip counts tests assert are
                // exact; the 5 s revocation bound has its own test on its own gateways.
                let mut stack = match tools::DevStack::start_with(&logs, 0, |cfg| {
                    cfg.api_key_cache_secs = 3600;
                    cfg.timeouts = EMULATOR_TIMEOUTS;
                })
                .await
                {
                    Ok(s) => s,
                    Err(e) => {
                        tx.send(Err(e)).ok();
                        return;
                    }
                };
                let base2 = stack.extra_gateway(stack.config()).await.expect("second gateway");
                let mut bulk = stack.config();
                bulk.limits.insert(shared::ratelimit::Class::Write, shared::ratelimit::Limit::parse("1000/s:1000").unwrap());
                bulk.limits.insert(shared::ratelimit::Class::Read, shared::ratelimit::Limit::parse("1000/s:1000").unwrap());
                let base_bulk = stack.extra_gateway(bulk).await.expect("bulk gateway");
                let mut strict = stack.config();
                strict.webhooks.url_policy.allow_loopback = false;
                let base_strict = stack.extra_gateway(strict).await.expect("strict gateway");
                let noqueue = stack
                    .new_app(test_config(stack.config()))
                    .expect("app")
                    .with_sqs_endpoint(&format!("http://127.0.0.1:{}", closed_port()));
                let base_noqueue = stack.gateway_for(noqueue).await.expect("noqueue gateway");
                stack.start_worker(test_config(stack.config()), schedule_every()).expect("dispatcher worker");
                tx.send(Ok(Harness {
                    runtime: handle,
                    base: stack.base_url.clone(),
                    base2,
                    base_bulk,
                    base_strict,
                    base_noqueue,
                    moto_endpoint: stack.emulators.moto_endpoint.clone(),
                    dynamodb_endpoint: stack.emulators.dynamodb_endpoint.clone(),
                    dynamodb_guard: stack.emulators.guard_pid(tools::localstack::Emulator::DynamoDb),
                    moto_guard: stack.emulators.guard_pid(tools::localstack::Emulator::Moto),
                    resources: stack.resources.clone(),
                    config: test_config(stack.config()),
                    env: stack.env(),
                }))
                .ok();
                // Serve until the test process exits.
                std::future::pending::<()>().await;
            });
        });
        rx.recv().expect("harness thread").unwrap_or_else(|e| panic!("local stack failed to start: {e}"))
    })
}

/// Everything an item holds, keys included, bytes as text, lower-cased: for plain substring
/// searches of what an erasure must have removed.
pub fn item_text(i: &shared::store::Item) -> String {
    format!("{} {}", shared::store::item_json(i.clone()), domain::privacy::exported(i.clone())).to_lowercase()
}

/// Stack of the threads that serve requests in debug builds.
pub const GATEWAY_STACK: usize = 8 << 20;

/// The budgets of this harness's functions. DynamoDB Local answers a burst of racing
/// transactions one at a time, and on a busy machine (two test binaries at a time on two
/// cores did it) a call in a race waited longer than production's 5 s for its turn: the test
/// saw a 503 for the emulator's queue. The production budgets (`Timeouts::default`) are what
/// `hung_dependencies` measures, on a gateway of its own.
pub const EMULATOR_TIMEOUTS: shared::config::Timeouts = shared::config::Timeouts { request_ms: 25_000, dependency_ms: 20_000 };

/// Retries after 1 s instead of minutes, and a sweep that re-sends after 2 s: the same code
/// paths as production, on a shorter clock.
fn test_config(mut cfg: Config) -> Config {
    cfg.webhooks.retry_schedule = vec![1, 1, 1, 1, 1];
    cfg.webhooks.outbox_sweep_age_secs = 2;
    cfg.email.requeue_after_secs = 2;
    cfg
}

pub struct Frozen(u32);

impl Drop for Frozen {
    fn drop(&mut self) {
        signal_children(self.0, "-CONT");
    }
}

fn signal_children(parent: u32, signal: &str) {
    let ok = std::process::Command::new("pkill").args([signal, "-P", &parent.to_string()]).status().expect("pkill").success();
    assert!(ok, "no emulator process under guard {parent}");
}

/// A 127.0.0.1 port with nothing listening.
pub fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Harness {
    /// A dispatcher of this stack with the given configuration, for tests that invoke it
    /// directly (as Lambda would) rather than through the worker.
    pub async fn dispatcher(&self, cfg: Config) -> domain::webhooks::dispatch::Dispatcher {
        let sdk = tools::admin::local_sdk_config(&self.moto_endpoint).await;
        domain::webhooks::dispatch::Dispatcher::new(App::with_dynamodb_endpoint(cfg, &sdk, Some(&self.dynamodb_endpoint)).expect("app"))
            .expect("dispatcher")
    }

    /// An App for this test's runtime (SDK clients must live in the runtime that uses them).
    pub async fn app(&self) -> App {
        self.app_with(self.config.clone()).await
    }

    pub async fn app_with(&self, cfg: Config) -> App {
        let sdk = tools::admin::local_sdk_config(&self.moto_endpoint).await;
        App::with_dynamodb_endpoint(cfg, &sdk, Some(&self.dynamodb_endpoint)).expect("app")
    }

    /// A gateway whose AWS calls other than DynamoDB go to `endpoint` (a proxy in front of moto).
    pub async fn gateway_via(&self, endpoint: &str) -> String {
        let sdk = tools::admin::local_sdk_config(endpoint).await;
        let app = App::with_dynamodb_endpoint(self.config.clone(), &sdk, Some(&self.dynamodb_endpoint)).expect("app");
        let (addr, _task) = tools::gateway::start(std::sync::Arc::new(app), 0).await.expect("gateway");
        format!("http://{addr}{}", tools::gateway::BASE_PATH)
    }

    /// A gateway with its own configuration in the caller's runtime (it stops with it).
    pub async fn gateway_with(&self, cfg: Config) -> String {
        let (addr, _task) = tools::gateway::start(std::sync::Arc::new(self.app_with(cfg).await), 0).await.expect("gateway");
        format!("http://{addr}{}", tools::gateway::BASE_PATH)
    }

    /// A gateway for the portal's pages, on the stack's runtime (it serves until the process
    /// ends): its emailed links point at itself. Answers its origin (`http://127.0.0.1:<port>`; the pages are under `/p/`).
    pub async fn pages_gateway(&self, cfg: Config) -> String {
        self.pages_gateway_on(tools::gateway::bind(0).await.expect("bind"), cfg).await
    }

    /// [`Harness::pages_gateway`] on a socket bound before the configuration was made (which
    /// may name its origin: an OpenID provider's redirect URI).
    pub async fn pages_gateway_on(&self, listener: tokio::net::TcpListener, mut cfg: Config) -> String {
        let origin = format!("http://{}", listener.local_addr().expect("addr"));
        cfg.portal_pages_url = Some(origin.clone());
        let app = std::sync::Arc::new(self.app_with(cfg).await);
        // On the stack's runtime: a test thread's 2 MiB is too little for a debug page.
        let listener = listener.into_std().expect("std listener");
        let _in_runtime = self.runtime.enter();
        let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
        tools::gateway::serve(listener, app).expect("gateway");
        origin
    }

    /// A queue of the calling test's own, so no worker of the stack takes its messages.
    pub async fn own_queue(&self, name: &str) -> String {
        let sqs = self.sqs().await;
        let out = sqs.create_queue().queue_name(format!("{name}-{}", ulid::Ulid::generate())).send().await.expect("a queue");
        out.queue_url.expect("its url")
    }

    /// The event SQS would hand a worker: the queue's waiting messages (up to 10), taken off
    /// the queue, as the event source mapping hands them over.
    pub async fn take_event(&self, queue: &str) -> Option<shared::sqs::SqsEvent> {
        let sqs = self.sqs().await;
        let out = sqs
            .receive_message()
            .queue_url(queue)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .visibility_timeout(30)
            .send()
            .await
            .ok()?;
        let msgs = out.messages.unwrap_or_default();
        if msgs.is_empty() {
            return None;
        }
        for m in &msgs {
            sqs.delete_message().queue_url(queue).receipt_handle(m.receipt_handle().unwrap_or_default()).send().await.expect("delete");
        }
        let records =
            msgs.iter().map(|m| shared::sqs::message(m.message_id().unwrap_or_default(), "r", m.body().unwrap_or_default())).collect();
        Some(shared::sqs::event(records))
    }

    /// A gateway whose every rate class is generous (1000/s): for tests that send many
    /// requests to routes whose class allows few (`gdpr_export`), such as the fuzzer's.
    pub async fn generous_gateway(&self) -> String {
        self.gateway_with(self.generous_config()).await
    }

    /// This stack's configuration with every rate class generous (1000/s): load and faults
    /// are the dependencies' to refuse, not the workspace's limits.
    pub fn generous_config(&self) -> Config {
        let mut cfg = self.config.clone();
        for class in shared::ratelimit::Class::ALL {
            cfg.limits.insert(class, shared::ratelimit::Limit::parse("1000/s:1000").expect("a limit"));
        }
        cfg
    }

    /// An email sender of this stack, for tests that invoke it directly (as Lambda would).
    pub async fn sender(&self) -> domain::sending::Sender {
        let sdk = tools::admin::local_sdk_config(&self.moto_endpoint).await;
        domain::sending::Sender::new(App::with_dynamodb_endpoint(self.config.clone(), &sdk, Some(&self.dynamodb_endpoint)).expect("app"))
    }

    /// Every message moto's SES recorded as sent, from moto's model inspection endpoint. The
    /// sender sends raw MIME, which moto keeps as it came: each is read back here with
    /// mailparse into `id`, `source`, `subject`, `body` (the HTML part, else the text),
    /// `text`, `destinations` (`ToAddresses`, `CcAddresses`, `BccAddresses`), `headers` (name
    /// as sent -> decoded value) and `raw`.
    pub async fn ses_sent(&self) -> Vec<Value> {
        let raw = self.ses_recorded().await;
        raw.iter().map(read_raw_message).collect()
    }

    async fn ses_recorded(&self) -> Vec<Value> {
        let url = format!("{}/moto-api/data.json", self.moto_endpoint);
        // moto checks each attribute serialises, then serialises them all: an S3 write in between
        // (a test's worker storing files) can make that answer a 500, so ask again.
        for _ in 0..30 {
            let r = reqwest::get(&url).await.expect("moto data");
            if let Ok(v) = r.json::<Value>().await {
                return v["ses"]["RawMessage"].as_array().cloned().unwrap_or_default();
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        panic!("moto's data.json did not answer JSON in 30 tries")
    }

    /// The text of an email as SES received it (one-time credentials in it are sealed in the
    /// stored copy and appear only here): waits for the sender to send it.
    pub async fn delivered_text(&self, c: &Client, email_id: &str) -> String {
        for _ in 0..150 {
            let r = c.get(&format!("/emails/{email_id}")).await;
            if let Some(id) = r.json["data"]["provider_message_id"].as_str()
                && let Some(m) = self.ses_sent().await.into_iter().find(|m| m["id"] == id)
            {
                return m["body"].as_str().unwrap_or_default().to_string();
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        panic!("email {email_id} was not sent")
    }

    /// An object's tags as moto answers them (XML), without a signature.
    pub async fn object_tags(&self, bucket: &str, key: &str) -> String {
        let auth = "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0";
        let url = format!("{}/{bucket}/{key}?tagging", self.moto_endpoint);
        let r = reqwest::Client::new().get(url).header("authorization", auth).send().await.expect("moto tagging");
        assert_eq!(r.status(), 200);
        r.text().await.expect("tagging body")
    }

    /// Every object under `prefix` in a bucket of the stack, with its bytes (moto's S3 lists
    /// without a signature).
    pub async fn bucket_objects(&self, bucket: &str, prefix: &str) -> Vec<(String, Vec<u8>)> {
        let url = format!("{}/{bucket}?list-type=2&max-keys=1000&prefix={prefix}", self.moto_endpoint);
        let xml = reqwest::get(url).await.expect("moto list").text().await.expect("list body");
        let app = self.app().await;
        let mut out = vec![];
        for part in xml.split("<Key>").skip(1) {
            let key = part.split("</Key>").next().unwrap_or_default().replace("&amp;", "&");
            let body = shared::aws::get_object(app.s3(), bucket, &key).await.expect("get object").unwrap_or_default();
            out.push((key, body));
        }
        out
    }

    /// Every table item and object of both buckets in which one of the needles occurs (case
    /// insensitive, as a plain substring: stricter than the erasure's own whole-address
    /// matching, so it checks that too), named by key: what an erasure must leave none of.
    pub async fn traces(&self, needles: &[String]) -> Vec<String> {
        let app = self.app().await;
        let lower: Vec<String> = needles.iter().map(|n| n.to_lowercase()).collect();
        let mut hits = vec![];
        for i in app.db.scan_all().await.unwrap() {
            let text = item_text(&i);
            if lower.iter().any(|n| text.contains(n.as_str())) {
                hits.push(domain::privacy::exported(i).to_string());
            }
        }
        for bucket in [&self.resources.mail_bucket, &self.resources.exports_bucket] {
            for (key, body) in self.bucket_objects(bucket, "").await {
                let text = String::from_utf8_lossy(&body).to_lowercase();
                if lower.iter().any(|n| text.contains(n.as_str())) {
                    hits.push(format!("s3://{bucket}/{key}"));
                }
            }
        }
        hits
    }

    pub async fn sqs(&self) -> aws_sdk_sqs::Client {
        aws_sdk_sqs::Client::new(&tools::admin::local_sdk_config(&self.moto_endpoint).await)
    }

    /// Freeze (SIGSTOP) an emulator: it keeps its connections and answers nothing, as a hung
    /// dependency does. The guard drops the freeze on drop (SIGCONT), also when the test fails.
    pub fn freeze(&self, guard: u32) -> Frozen {
        signal_children(guard, "-STOP");
        Frozen(guard)
    }

    /// A fresh workspace and its API key.
    pub async fn workspace(&self, name: &str) -> (String, String) {
        let (ws, key) = domain::workspaces::create_workspace(&self.app().await, name).await.expect("create workspace");
        (ws.id.to_string(), key)
    }
}

/// A response, with the checks every response must pass already done.
pub struct Resp {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub bytes: Vec<u8>,
    pub json: Value,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    pub fn code(&self) -> &str {
        self.json["error"]["code"].as_str().unwrap_or("")
    }
    pub fn ddb_calls(&self) -> u32 {
        self.header("x-dev-ddb-calls").and_then(|v| v.parse().ok()).unwrap_or(u32::MAX)
    }
}

#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    pub base: String,
    pub auth: Option<String>,
    pub workspace: Option<String>,
    /// Tests of outages accept `503 UNAVAILABLE` (still in the envelope); nothing else may 5xx.
    pub outage: bool,
    /// Sent with every request (`X-Portal-Session`).
    pub headers: Vec<(String, String)>,
}

impl Client {
    pub fn new(base: &str, key: &str) -> Self {
        Self { http: reqwest::Client::new(), base: base.into(), auth: Some(key.into()), workspace: None, outage: false, headers: vec![] }
    }
    pub fn anonymous(base: &str) -> Self {
        Self { http: reqwest::Client::new(), base: base.into(), auth: None, workspace: None, outage: false, headers: vec![] }
    }
    /// A customer's client: no API credential, their portal session.
    pub fn portal(base: &str, session: &str) -> Self {
        Self::anonymous(base).with_header("x-portal-session", session)
    }
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
    /// This client may see `503 UNAVAILABLE` (a test that makes a dependency fail).
    pub fn during_outage(mut self) -> Self {
        self.outage = true;
        self
    }

    pub fn request(&self, method: &str, path: &str) -> reqwest::RequestBuilder {
        let url = format!("{}{path}", self.base);
        let mut r = self.http.request(method.parse().expect("method"), url);
        if let Some(a) = &self.auth {
            r = r.header("authorization", format!("Bearer {a}"));
        }
        if let Some(w) = &self.workspace {
            r = r.header("x-workspace-id", w);
        }
        for (k, v) in &self.headers {
            r = r.header(k, v);
        }
        r
    }

    /// Send and apply the invariants of every response: a Request-Id header, and for errors
    /// the envelope with the same request id and a 4xx (never a 5xx).
    pub async fn send(&self, r: reqwest::RequestBuilder) -> Resp {
        let resp = r.send().await.expect("request");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.expect("body").to_vec();
        let json: Value = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap_or(Value::Null) };
        let rid = headers.get("request-id").and_then(|v| v.to_str().ok()).unwrap_or("");
        assert!(!rid.is_empty(), "every response carries Request-Id (status {status})");
        let outage_answer = self.outage && status == 503 && json["error"]["code"] == "UNAVAILABLE";
        assert!(status < 500 || outage_answer, "no 5xx: {status} {json}");
        if status >= 400 {
            assert!(json["error"]["code"].is_string() && json["error"]["message"].is_string(), "error envelope: {json}");
            assert_eq!(json["error"]["request_id"], rid, "request id in the body matches the header");
            assert!(json["error"]["details"].is_array());
        }
        Resp { status, headers, bytes, json }
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send(self.request("GET", path)).await
    }
    pub async fn delete(&self, path: &str) -> Resp {
        self.send(self.request("DELETE", path)).await
    }
    pub async fn post(&self, path: &str, body: &Value) -> Resp {
        self.send(self.request("POST", path).json(body)).await
    }
    pub async fn patch(&self, path: &str, body: &Value) -> Resp {
        self.send(self.request("PATCH", path).json(body)).await
    }
}

/// A well-formed channel id that no workspace has.
pub const CHANNEL_A: &str = "ch_01HF6Z3Q8M4W2T9K7R5N1B0C6D";

/// The workspace's webhook channel called `name`, connected on first use (to a closed
/// loopback port: nothing is sent unless a post is published to it).
pub async fn channel(c: &Client, name: &str) -> String {
    let r = c.get("/channels?limit=100").await;
    assert_eq!(r.status, 200, "{}", r.json);
    if let Some(ch) = r.json["data"].as_array().unwrap().iter().find(|ch| ch["name"] == name) {
        return ch["id"].as_str().unwrap().to_string();
    }
    let url = format!("http://127.0.0.1:{}/{name}", closed_port());
    let r = c.post("/channels", &serde_json::json!({"type": "webhook", "name": name, "credentials": {"url": url}})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    r.json["data"]["id"].as_str().unwrap().to_string()
}

pub fn in_hours(h: i64) -> String {
    shared::ids::format_time(chrono::Utc::now() + chrono::Duration::hours(h))
}

/// Add a sending domain unique to this workspace over HTTP and read it until it is verified
/// (moto verifies an identity at once); answers the domain name.
pub async fn verified_domain(c: &Client, ws: &str) -> String {
    let name = format!("{}.example.test", ws.trim_start_matches("ws_").to_ascii_lowercase());
    let r = c.post("/emails/domains", &serde_json::json!({"name": name})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let id = r.json["data"]["id"].as_str().expect("domain id").to_string();
    let r = c.get(&format!("/emails/domains/{id}")).await;
    assert_eq!((r.status, r.json["data"]["status"].as_str()), (200, Some("verified")), "{}", r.json);
    name
}

pub async fn created(c: &Client, path: &str, body: Value, status: u16) -> Value {
    let r = c.post(path, &body).await;
    assert_eq!(r.status, status, "POST {path}: {}", r.json);
    r.json["data"].clone()
}

/// Data in every area of a workspace (the client must be allowed to write it quickly: use a
/// bulk gateway). Answers an id for each path with a parameter, keyed by the path pattern.
/// The key of `seed_every_area`'s answer that holds a portal session of its contact.
pub const PORTAL_SESSION: &str = "!portal_session";

/// A portal session for a contact: a login link handed to `c` (an admin credential,
/// `delivery: return`), exchanged.
pub async fn portal_session(c: &Client, contact_id: &str) -> String {
    let link = c.post("/portal/sessions", &serde_json::json!({"contact_id": contact_id, "delivery": "return"})).await;
    assert_eq!(link.status, 201, "{}", link.json);
    let r = Client::anonymous(&c.base).post("/portal/sessions/exchange", &serde_json::json!({"token": link.json["data"]["token"]})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    r.json["data"]["session_token"].as_str().unwrap().to_string()
}

pub async fn seed_every_area(c: &Client, ws: &str) -> std::collections::BTreeMap<&'static str, String> {
    use serde_json::json;
    let sending = verified_domain(c, ws).await;
    let from = format!("a@{sending}");
    let domain_id = c.get("/emails/domains").await.json["data"][0]["id"].as_str().unwrap().to_string();
    let ch = channel(c, "seed").await;
    let post = created(c, "/posts", json!({"content": "hello", "channel_ids": [ch], "scheduled_at": in_hours(2)}), 201).await;
    let r = c.post(&format!("/posts/{}/schedule", post["id"].as_str().unwrap()), &json!({})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let contact = created(c, "/contacts", json!({"email": "zoe@example.org", "first_name": "Zoe"}), 201).await;
    let ct = contact["id"].as_str().unwrap();
    created(c, &format!("/contacts/{ct}/notes"), json!({"body": "met"}), 201).await;
    let deal = created(c, "/deals", json!({"title": "Plan", "value": 100, "currency": "EUR", "contact_id": ct}), 201).await;
    let template = created(c, "/emails/templates", json!({"slug": "hello", "subject": "Hi {{name}}", "text": "Hi"}), 201).await;
    let email =
        created(c, "/emails", json!({"from": from, "to": ["zoe@example.org"], "subject": "Hi", "text": "x", "contact_id": ct}), 202).await;
    created(
        c,
        "/emails",
        json!({"from": from, "to": ["zoe@example.org"], "subject": "Later", "text": "x", "scheduled_at": in_hours(3)}),
        202,
    )
    .await;
    let webhook = created(c, "/webhooks", json!({"url": "http://127.0.0.1:9/hook"}), 201).await;
    let since = (chrono::Utc::now() - chrono::Duration::hours(1)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let replay = created(c, &format!("/webhooks/{}/replay", webhook["id"].as_str().unwrap()), json!({"since": since}), 202).await;
    let import = created(c, "/contacts/imports", json!({"rows": [{"email": "bob@example.org"}, {"email": "bad"}]}), 202).await;
    let key_id = created(c, "/workspaces/current/api-keys", json!({"name": "ci", "scopes": ["read"]}), 201).await["id"].clone();
    let day = json!([{"start": "08:00", "end": "18:00"}]);
    let hours = json!({"mon": day, "tue": day, "wed": day, "thu": day, "fri": day, "sat": day, "sun": day});
    let resource =
        created(c, "/bookings/resources", json!({"name": "Chair", "timezone": "Europe/Oslo", "opening_hours": hours}), 201).await;
    let service =
        created(c, "/bookings/services", json!({"name": "Cut", "duration_minutes": 30, "resource_ids": [resource["id"]]}), 201).await;
    let svc = service["id"].as_str().unwrap().to_string();
    let day_after = (chrono::Utc::now() + chrono::Duration::days(2)).format("%Y-%m-%d").to_string();
    let booking =
        created(c, "/bookings", json!({"service_id": svc, "start": format!("{day_after}T09:00:00Z"), "contact_id": ct}), 201).await;
    created(
        c,
        "/gdpr/consents",
        json!({"email": "zoe@example.org", "purpose": "analytics", "granted": true, "source": "form",
        "text_shown": "May we count your visits?", "text_version": "v1"}),
        201,
    )
    .await;
    let export = created(c, "/gdpr/exports", json!({"subject": {"contact_id": ct}}), 202).await;
    let erasure = created(c, "/gdpr/erasures", json!({"subject": {"email": "nobody@example.org"}, "reason": "seed"}), 202).await;
    let session = portal_session(c, ct).await;
    let portal = Client::portal(&c.base, &session);
    let own_export = created(&portal, "/portal/me/export", json!({}), 202).await;
    let conversation = created(
        c,
        "/helpdesk/conversations",
        json!({"subject": "Help", "mailbox": format!("support@{sending}"),
        "contact_id": ct, "message": {"type": "inbound", "body_text": "Hello"}}),
        201,
    )
    .await;
    // A person's approval of a write of the read-only key (the audit trail holds one).
    let person = format!("seed-{}", shared::ids::new_id("u"));
    domain::workspaces::add_member(&harness().app().await, &shared::auth::WorkspaceId::trusted(ws), &person, "member")
        .await
        .expect("member");
    let mut approver = Client::new(&c.base, &tools::admin::mint_token(&person, "read write confirm", 600).expect("token"));
    approver.workspace = Some(ws.to_string());
    let approved = json!({"from": format!("hi@{sending}"), "to": ["zoe@example.org"], "subject": "Hi", "text": "Hi"}).to_string();
    let confirmation = created(
        &approver,
        "/capability-confirmations",
        json!({"capability": "emails.send", "method": "POST", "path": "/emails", "idempotency_key": "seed",
        "body_sha256": shared::crypto::sha256_hex(approved.as_bytes()), "body": approved,
        "preview_summary": "Send Hi to zoe@example.org", "approved_by": "Zoe's manager", "api_key_id": key_id}),
        201,
    )
    .await;
    // An agent's email waiting for a person: an approval request (its 428 names it).
    let agent = created(c, "/workspaces/current/api-keys", json!({"name": "agent", "requires_confirmation": ["emails.send"]}), 201).await;
    let agent = Client::new(&c.base, agent["secret"].as_str().unwrap());
    let asked = agent
        .send(
            agent
                .request("POST", "/emails")
                .header("idempotency-key", "seed-ask")
                .json(&json!({"from": from, "to": ["zoe@example.org"], "subject": "Asked", "text": "Hi"})),
        )
        .await;
    assert_eq!(asked.status, 428, "{}", asked.json);
    let approval = asked.json["error"]["details"][0]["meta"]["approval_request_id"].as_str().expect("an approval request").to_string();
    // A scan of a closed port: it fails fast (unreachable), and lists hold it.
    let scan = c.post("/scans", &json!({"url": format!("http://127.0.0.1:{}/", closed_port())})).await;
    assert_eq!(scan.status, 202, "{}", scan.json);
    std::collections::BTreeMap::from([
        ("/scans/{id}", scan.json["data"]["id"].as_str().unwrap().to_string()),
        ("/capability-confirmations/{id}", confirmation["id"].as_str().unwrap().to_string()),
        ("/approval-requests/{id}", approval),
        ("/gdpr/exports/{id}", export["id"].as_str().unwrap().to_string()),
        ("/helpdesk/conversations/{id}", conversation["id"].as_str().unwrap().to_string()),
        ("/gdpr/erasures/{id}", erasure["id"].as_str().unwrap().to_string()),
        ("?/gdpr/consents", "email=zoe@example.org".to_string()),
        ("/portal/me/exports/{id}", own_export["id"].as_str().unwrap().to_string()),
        ("/portal/me/bookings/{id}", booking["id"].as_str().unwrap().to_string()),
        // Not a path: the contact's portal session, for the `/portal/me...` routes.
        (PORTAL_SESSION, session),
        ("/posts/{id}", post["id"].as_str().unwrap().to_string()),
        ("/channels/{id}", ch),
        ("/bookings/{id}", booking["id"].as_str().unwrap().to_string()),
        ("/bookings/resources/{id}", resource["id"].as_str().unwrap().to_string()),
        ("/bookings/services/{id}", svc.clone()),
        // A query, not an id: what `GET /bookings/availability` needs.
        ("?/bookings/availability", format!("service_id={svc}&from={day_after}T00:00:00Z&to={day_after}T23:00:00Z")),
        ("?/portal/me/bookings/{id}/slots", format!("from={day_after}T00:00:00Z&to={day_after}T23:00:00Z")),
        ("/contacts/{id}", ct.to_string()),
        ("/contacts/imports/{id}", import["id"].as_str().unwrap().to_string()),
        ("/deals/{id}", deal["id"].as_str().unwrap().to_string()),
        ("/emails/{id}", email["id"].as_str().unwrap().to_string()),
        ("/emails/domains/{id}", domain_id),
        ("/emails/templates/{slug}", template["slug"].as_str().unwrap().to_string()),
        ("/webhooks/{id}", webhook["id"].as_str().unwrap().to_string()),
        ("/webhooks/{id}/replays/{replay_id}", replay["id"].as_str().unwrap().to_string()),
        // Not an id: an event type of the catalog.
        ("/webhooks/event-types/{type}", "post.published".to_string()),
        ("/workspaces/current/api-keys/{id}", key_id.as_str().unwrap().to_string()),
    ])
}

/// Download and decode a GDPR export document (gzip, JSON).
pub async fn export_document(url: &str) -> Value {
    use std::io::Read;
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let bytes = http.get(url).send().await.unwrap().error_for_status().unwrap().bytes().await.unwrap();
    let mut text = String::new();
    flate2::read::MultiGzDecoder::new(&bytes[..]).read_to_string(&mut text).expect("gzip");
    serde_json::from_str(&text).expect("the document is JSON")
}

/// Run a Python script of `tests/` with the venv's interpreter (`make deps`): `input` as JSON on
/// its stdin, its stdout read back as JSON. For checks made by libraries nobody here wrote.
pub fn python(script: &str, input: &Value) -> Value {
    use std::io::Write;
    let root = tools::localstack::repo_root();
    let mut child = std::process::Command::new(root.join(".venv/bin/python"))
        .arg(root.join(script))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python from .venv (make deps)");
    child.stdin.take().expect("stdin").write_all(input.to_string().as_bytes()).expect("write");
    let out = child.wait_with_output().expect("the script runs");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{script} said: {}", String::from_utf8_lossy(&out.stdout)))
}

/// Poll a job at `path` (an import, export, erasure or webhook replay) until its `status` is
/// final, `completed` or `failed`, for up to a minute.
/// Erase the person with this address (`POST /gdpr/erasures`) and wait for the erasure to
/// complete.
pub async fn erase(c: &Client, address: &str) {
    let r = c.post("/gdpr/erasures", &serde_json::json!({"subject": {"email": address}, "reason": "Art. 17"})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    let path = format!("/gdpr/erasures/{}", r.json["data"]["id"].as_str().expect("an erasure id"));
    let mut status = Value::Null;
    for _ in 0..240 {
        status = c.get(&path).await.json["data"]["status"].clone();
        if status == "completed" {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    panic!("the erasure of {address} is {status}, not completed");
}

pub async fn finished(c: &Client, path: &str) -> Value {
    for _ in 0..300 {
        let r = c.get(path).await;
        assert_eq!(r.status, 200, "GET {path}: {}", r.json);
        if matches!(r.json["data"]["status"].as_str(), Some("completed" | "failed")) {
            return r.json["data"].clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("{path} did not finish");
}

/// One of moto's raw messages as the tests read it (see [`Harness::ses_sent`]).
fn read_raw_message(m: &Value) -> Value {
    let raw = m["raw_data"].as_str().unwrap_or_default();
    let parsed = mailparse::parse_mail(raw.as_bytes()).expect("the sender's MIME parses");
    let header = |k: &str| parsed.headers.iter().find(|h| h.get_key().eq_ignore_ascii_case(k));
    let addresses = |k: &str| -> Vec<String> {
        header(k)
            .and_then(|h| mailparse::addrparse_header(h).ok())
            .map(|list| {
                list.iter()
                    .flat_map(|a| match a {
                        mailparse::MailAddr::Single(s) => vec![s.addr.clone()],
                        mailparse::MailAddr::Group(g) => g.addrs.iter().map(|s| s.addr.clone()).collect(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let (to, cc) = (addresses("To"), addresses("Cc"));
    let all: Vec<String> = m["destinations"].as_array().into_iter().flatten().filter_map(|d| d.as_str().map(String::from)).collect();
    let bcc: Vec<String> = all.into_iter().filter(|a| !to.contains(a) && !cc.contains(a)).collect();
    let mut parts = vec![];
    fn leaves<'a>(p: &'a mailparse::ParsedMail<'a>, out: &mut Vec<&'a mailparse::ParsedMail<'a>>) {
        if p.subparts.is_empty() {
            out.push(p);
        }
        for s in &p.subparts {
            leaves(s, out);
        }
    }
    leaves(&parsed, &mut parts);
    // Text travels with CRLF line breaks (MIME's canonical form), read back as `\n`; and a
    // single-part message's body ends with the break that ends its last line (in a multipart
    // one that break belongs to the boundary): the content is what comes before it.
    let single = parsed.subparts.is_empty();
    let body_of = |mime: &str| {
        let b = parts.iter().find(|p| p.ctype.mimetype == mime).and_then(|p| p.get_body().ok())?.replace("\r\n", "\n");
        Some(if single { b.strip_suffix('\n').map(String::from).unwrap_or(b) } else { b })
    };
    let text = body_of("text/plain");
    let headers: serde_json::Map<String, Value> = parsed.headers.iter().map(|h| (h.get_key(), Value::String(h.get_value()))).collect();
    serde_json::json!({
        "id": m["id"], "source": m["source"],
        "subject": header("Subject").map(|h| h.get_value()),
        "body": body_of("text/html").or_else(|| text.clone()),
        "text": text,
        "destinations": {"ToAddresses": to, "CcAddresses": cc, "BccAddresses": bcc},
        "headers": headers,
        "raw": raw,
    })
}
