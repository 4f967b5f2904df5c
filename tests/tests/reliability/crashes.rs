//! Crashes: the email sender, the contact import worker and the GDPR worker each run as a real
//! process (this test binary, started again as `worker_process`, running the worker's domain
//! code as its `main.rs` does) and are killed with SIGKILL at random moments while they hold
//! work; then the work is handed over again, as SQS does after a lost invocation, until it is
//! done. Every accepted piece of work must end exactly once: each email sent once (or
//! `failed` / `outcome_unknown`), each imported row once, the export whole with every contact
//! once. The work goes to queues of this test's own, so no in-process worker of the harness
//! takes it. `make test` kills each worker once; `make chaos` (`CHAOS=full`) six times.

use e2e::{Client, harness};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

use e2e::faults::full;

/// One worker process's run of `event`: its batch answer, or `None` when `kill` came first
/// (a future that ends when the process is to die).
async fn run(
    worker: &str,
    env: &[(String, String)],
    event: &Value,
    kill: Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + '_>>>,
) -> Option<Value> {
    let exe = std::env::current_exe().expect("this test binary");
    let mut cmd = tokio::process::Command::new(exe);
    cmd.args(["--exact", "crashes::worker_process", "--ignored", "--nocapture", "--test-threads=1"])
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("CRASH_WORKER", worker)
        .env("CRASH_EVENT", event.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("a worker process");
    if let Some(kill) = kill {
        tokio::select! {
            _ = kill => {}
            _ = child.wait() => {}
        }
        // SIGKILL: no destructor, no flush, whatever it was awaiting.
        let _ = child.start_kill();
        child.wait().await.expect("reaped");
        return None;
    }
    let out =
        tokio::time::timeout(Duration::from_secs(120), child.wait_with_output()).await.expect("a worker run within 120 s").expect("output");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.split_once("CRASH_RESULT ").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("{worker} answered nothing: {text}"));
    Some(serde_json::from_str(line).expect("a batch answer"))
}

/// The event SQS would hand the worker, as the worker process takes it.
async fn event_from(queue: &str) -> Option<Value> {
    harness().take_event(queue).await.map(|ev| serde_json::to_value(ev).expect("event"))
}

/// The functions' environment with these variables replaced (the test's own queues, moto
/// through the fault proxy as `AWS_ENDPOINT_URL`).
fn worker_env(replaced: Vec<(&str, String)>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = harness().env.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    env.retain(|(k, _)| !replaced.iter().any(|(r, _)| r == k));
    env.extend(replaced.into_iter().map(|(k, v)| (k.to_string(), v)));
    env
}

/// A crash test's rows as a table: printed, and written into docs/reliability.md's `section`
/// under `make chaos` (`CHAOS_REPORT`).
fn print_report(section: &str, rows: &[String]) {
    let table = format!(
        "| worker | kills (SIGKILL) | kills that left the work half done | runs in all | outcome |\n|---|---|---|---|---|\n{}",
        rows.join("\n")
    );
    println!("{table}");
    if let Ok(doc) = std::env::var("CHAOS_REPORT") {
        e2e::load::splice(&doc, section, &table);
    }
}

/// What became of one worker's work.
struct Crashed {
    runs: usize,
    /// Kills after which the work was seen half done.
    mid_work: usize,
}

/// Kill a worker `kills` times on the queue's work, each as soon as its `progress` (units of
/// work done: rows, parts, SES calls) moved past where the run found it, then run it (again
/// on whatever it left for later, and on a batch it failed) until `settled` says the work
/// is done.
async fn crash_and_finish<F, Fut, G, Gut>(
    worker: &str,
    env: &[(String, String)],
    queue: &str,
    kills: usize,
    progress: G,
    settled: F,
) -> Crashed
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
    G: Fn() -> Gut,
    Gut: std::future::Future<Output = f64>,
{
    let first = event_from(queue).await.expect("the work's message");
    let (mut runs, mut mid_work) = (0, 0);
    for _ in 0..kills {
        let before = progress().await;
        let kill = Box::pin(async {
            let deadline = Instant::now() + Duration::from_secs(20);
            while progress().await <= before && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        run(worker, env, &first, Some(kill)).await;
        runs += 1;
        mid_work += usize::from(progress().await > before && !settled().await);
    }
    let mut pending = vec![first];
    let deadline = Instant::now() + Duration::from_secs(150);
    loop {
        for ev in std::mem::take(&mut pending) {
            let answer = run(worker, env, &ev, None).await.expect("ran to its end");
            runs += 1;
            // A batch it failed comes back, as SQS delivers it again.
            if answer["batchItemFailures"].as_array().is_some_and(|f| !f.is_empty()) {
                tokio::time::sleep(Duration::from_secs(2)).await;
                pending.push(ev);
            }
        }
        if let Some(ev) = event_from(queue).await {
            pending.push(ev);
        }
        if pending.is_empty() && settled().await {
            return Crashed { runs, mid_work };
        }
        assert!(Instant::now() < deadline, "{worker}: the work did not settle after {runs} runs");
    }
}

/// The queues of this test, and the functions' environment pointing at them.
struct Stack {
    env: Vec<(String, String)>,
    emails: String,
    imports: String,
    gdpr: String,
    base: String,
    moto: e2e::faults::FaultProxy,
}

async fn stack() -> Stack {
    let h = harness();
    let (emails, imports, gdpr) = (h.own_queue("crash-emails").await, h.own_queue("crash-imports").await, h.own_queue("crash-gdpr").await);
    let mut cfg = h.generous_config();
    cfg.emails_queue_url = emails.clone();
    cfg.contact_imports_queue_url = imports.clone();
    cfg.gdpr_queue_url = gdpr.clone();
    let base = h.gateway_with(cfg).await;
    // SES answers the workers 300 ms late, so a kill can land between two sends.
    let moto = e2e::faults::FaultProxy::start(&h.moto_endpoint).await;
    moto.set(e2e::faults::Fault::Latency(Duration::from_millis(300)), Some("ses"));
    let env = worker_env(vec![
        ("AWS_ENDPOINT_URL", moto.url.clone()),
        ("EMAILS_QUEUE_URL", emails.clone()),
        ("CONTACT_IMPORTS_QUEUE_URL", imports.clone()),
        ("GDPR_QUEUE_URL", gdpr.clone()),
        // A killed sender's claim ends after this (production: 90 s, past the Lambda timeout).
        ("EMAIL_CLAIM_SECS", "20".into()),
        // Many small parts, so a kill lands between uploads.
        ("EXPORT_PART_BYTES", "2048".into()),
    ]);
    Stack { env, emails, imports, gdpr, base, moto }
}

#[tokio::test]
async fn workers_killed_mid_work_finish_it_exactly_once() {
    let h = harness();
    let s = stack().await;
    let (ws, key) = h.workspace("crashes").await;
    let c = Client::new(&s.base, &key);
    let kills = if full() { 6 } else { 1 };
    let mut report = vec![];

    // The email sender first: moto's record of sent mail (what counts SES's copies) stops
    // answering once killed exports have left the parts of their uploads behind (moto keeps
    // every part it was sent; `make test` and `make chaos` run the fault matrix in a process of its own).
    // 8 emails, each sent once (or failed with its outcome unknown).
    let from = format!("crash@{}", e2e::verified_domain(&c, &ws).await);
    let mut subjects = vec![];
    for i in 0..8 {
        let subject = format!("crash {i} {}", ulid::Ulid::generate());
        let r =
            c.post("/emails", &json!({"from": from, "to": [format!("reader{i}@example.org")], "subject": subject, "text": "once"})).await;
        assert_eq!(r.status, 202, "{}", r.json);
        subjects.push((subject, r.json["data"]["id"].as_str().unwrap().to_string()));
    }
    let statuses = || async {
        let mut all = vec![];
        for (_, id) in &subjects {
            all.push(c.get(&format!("/emails/{id}")).await.json["data"]["status"].as_str().unwrap_or_default().to_string());
        }
        all
    };
    // SES calls made (they answer 300 ms late, so a kill finds them in flight).
    let progress = || async { s.moto.hits() as f64 };
    let done = || async { statuses().await.iter().all(|s| matches!(s.as_str(), "sent" | "delivered" | "failed")) };
    let crashed = crash_and_finish("email-sender", &s.env, &s.emails, kills, progress, done).await;
    let sent = h.ses_sent().await;
    let (mut once, mut unknown) = (0, 0);
    for (subject, id) in &subjects {
        let copies = sent.iter().filter(|m| m["subject"] == subject.as_str()).count();
        let status = c.get(&format!("/emails/{id}")).await.json["data"].clone();
        match (status["status"].as_str(), copies) {
            (Some("sent" | "delivered"), 1) => once += 1,
            (Some("failed"), 0 | 1) if status["error"]["code"] == "outcome_unknown" => unknown += 1,
            (st, n) => panic!("email {id}: {st:?} with {n} copies at SES: {status}"),
        }
    }
    report.push(format!(
        "| email sender | {kills} | {} | {} | 8 emails: {once} sent once, {unknown} failed with outcome unknown, none twice |",
        crashed.mid_work, crashed.runs
    ));

    // The contact import (500 rows a step), each contact exactly once.
    let total: usize = if full() { 3_000 } else { 600 };
    let rows: Vec<Value> = (0..total).map(|i| json!({"email": format!("crash{i}@example.org"), "first_name": format!("C{i}")})).collect();
    let imp = e2e::created(&c, "/contacts/imports", json!({"rows": rows}), 202).await;
    let path = format!("/contacts/imports/{}", imp["id"].as_str().unwrap());
    let progress = || async { c.get(&path).await.json["data"]["processed"].as_f64().unwrap_or(0.0) };
    let done = || async { matches!(c.get(&path).await.json["data"]["status"].as_str(), Some("completed" | "failed")) };
    let crashed = crash_and_finish("contact-import", &s.env, &s.imports, kills, progress, done).await;
    let job = c.get(&path).await.json["data"].clone();
    assert_eq!((job["status"].as_str(), job["created"].as_u64()), (Some("completed"), Some(total as u64)), "{job}");
    let contacts = e2e::load::all(&c, "/contacts").await;
    let mut emails: Vec<&str> = contacts.iter().filter_map(|c| c["email"].as_str()).filter(|e| e.starts_with("crash")).collect();
    emails.sort_unstable();
    let n = emails.len();
    emails.dedup();
    assert_eq!((n, emails.len()), (total, total), "every row once");
    report.push(format!("| contact import | {kills} | {} | {} | {total} rows, each contact once |", crashed.mid_work, crashed.runs));

    // The GDPR worker: a workspace export of those contacts, whole, each contact once.
    let r = c.post("/gdpr/exports", &json!({"scope": "workspace"})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    let path = format!("/gdpr/exports/{}", r.json["data"]["id"].as_str().unwrap());
    // Its parts uploaded so far, from its job's saved position.
    let app = h.app().await;
    let export_id = r.json["data"]["id"].as_str().unwrap().to_string();
    let progress = || async {
        let sk = domain::keys::EXPORT_JOB.sk(&domain::ids::ExportId::trusted(export_id.as_str()));
        let item =
            app.db.get(&shared::store::ws_pk(&shared::auth::WorkspaceId::trusted(ws.as_str())), &sk).await.unwrap().unwrap_or_default();
        let resume: Value = shared::store::get_str(&item, "resume").and_then(|j| serde_json::from_str(j).ok()).unwrap_or_default();
        resume["parts"].as_array().map_or(0.0, |p| p.len() as f64)
    };
    let done = || async { matches!(c.get(&path).await.json["data"]["status"].as_str(), Some("completed" | "failed")) };
    let crashed = crash_and_finish("gdpr-worker", &s.env, &s.gdpr, kills, progress, done).await;
    let job = c.get(&path).await.json["data"].clone();
    assert_eq!(job["status"], "completed", "{job}");
    let doc = e2e::export_document(job["download_url"].as_str().expect("a download link")).await;
    let mut exported: Vec<&str> =
        doc["sections"]["workspace"]["contact"].as_array().unwrap().iter().filter_map(|c| c["email"].as_str()).collect();
    exported.sort_unstable();
    let n = exported.len();
    exported.dedup();
    assert_eq!((n, exported.len()), (total, total), "every contact once in the document");
    report.push(format!(
        "| GDPR export | {kills} | {} | {} | the document whole, {total} contacts each once |",
        crashed.mid_work, crashed.runs
    ));

    print_report("crashes", &report);
}

/// The webhook dispatcher and the inbound-mail worker, killed the same way. The dispatcher
/// takes post events (its deliveries go back to the same queue, so the test hands both over)
/// and is killed as soon as the receiver got a delivery in that run: every event must reach
/// the receiver (at least once; copies past the first are counted, receivers dedupe by event
/// id). The inbound-mail worker is killed while its read of the message from S3 is in flight
/// (S3 answers 300 ms late): the message must become one conversation with one message.
#[tokio::test]
async fn the_dispatcher_and_the_inbound_mail_worker_killed_mid_work_lose_nothing() {
    let h = harness();
    let sqs = h.sqs().await;
    let (events, inbound) = (h.own_queue("crash-events").await, h.own_queue("crash-inbound").await);
    let mut cfg = h.generous_config();
    cfg.events_queue_url = events.clone();
    cfg.deliveries_queue_url = events.clone();
    let base = h.gateway_with(cfg).await;
    let moto = e2e::faults::FaultProxy::start(&h.moto_endpoint).await;
    moto.set(e2e::faults::Fault::Latency(Duration::from_millis(300)), Some("s3"));
    let env = worker_env(vec![
        ("AWS_ENDPOINT_URL", moto.url.clone()),
        ("EVENTS_QUEUE_URL", events.clone()),
        ("DELIVERIES_QUEUE_URL", events.clone()),
        ("INBOUND_MAIL_QUEUE_URL", inbound.clone()),
    ]);
    let (ws, key) = h.workspace("crashes dispatch").await;
    let c = Client::new(&base, &key);
    let kills = if full() { 6 } else { 1 };
    let mut report = vec![];

    // The dispatcher: ten posts' events to a receiver that answers 200 ms late.
    let receiver = e2e::receiver::Receiver::start().await;
    receiver.set_delay(Duration::from_millis(200));
    let r = c.post("/webhooks", &json!({"url": receiver.url, "event_types": ["post.created"]})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let channel = e2e::channel(&c, "crash").await;
    let mut posts = vec![];
    for i in 0..10 {
        let r = c.post("/posts", &json!({"content": format!("crash post {i}"), "channel_ids": [channel]})).await;
        assert_eq!(r.status, 201, "{}", r.json);
        posts.push(r.json["data"]["id"].as_str().unwrap().to_string());
    }
    let copies = |id: &str| receiver.of_type("post.created").iter().filter(|m| m.json()["data"]["id"] == id).count();
    let progress = || async { receiver.of_type("post.created").len() as f64 };
    let done = || async { posts.iter().all(|p| copies(p) > 0) };
    let crashed = crash_and_finish("dispatcher", &env, &events, kills, progress, done).await;
    let extra: usize = posts.iter().map(|p| copies(p).saturating_sub(1)).sum();
    report.push(format!(
        "| webhook dispatcher | {kills} | {} | {} | 10 events, each delivered; {extra} copies past the first |",
        crashed.mid_work, crashed.runs
    ));

    // The inbound-mail worker: one message, killed while it reads it from S3.
    let mailbox = format!("support@{}", e2e::verified_domain(&c, &ws).await);
    let subject = format!("crash mail {}", ulid::Ulid::generate());
    let raw = format!(
        "From: Kari <kari@example.org>\r\nTo: {mailbox}\r\nSubject: {subject}\r\nMessage-ID: <{}@example.org>\r\nDate: Fri, 27 Nov 2026 10:00:00 +0000\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nHello\r\n",
        ulid::Ulid::generate()
    );
    let app = h.app().await;
    let body =
        tools::admin::store_inbound(app.s3(), &h.resources.mail_bucket, raw.as_bytes(), std::slice::from_ref(&mailbox), "PASS", "PASS")
            .await
            .unwrap();
    sqs.send_message().queue_url(&inbound).message_body(body).send().await.unwrap();
    let conversations = || async {
        let list = e2e::load::all(&c, "/helpdesk/conversations").await;
        list.into_iter().filter(|v| v["subject"] == subject.as_str()).collect::<Vec<Value>>()
    };
    let progress = || async { moto.hits() as f64 };
    let done = || async { !conversations().await.is_empty() };
    let crashed = crash_and_finish("inbound-mail", &env, &inbound, kills, progress, done).await;
    let found = conversations().await;
    assert_eq!(found.len(), 1, "one conversation: {found:?}");
    assert_eq!(found[0]["message_count"], 1, "one message: {}", found[0]);
    report.push(format!("| inbound mail | {kills} | {} | {} | 1 message: one conversation, one message |", crashed.mid_work, crashed.runs));

    print_report("crashes-dispatch", &report);
}

/// The publisher and the scanner, killed the same way. The publisher is killed once its post
/// exists at the Bluesky PDS (the reference PDS; `createRecord`'s answer comes 2 s late), so
/// the remote effect happened and was never recorded: once its claim on the variant ends, the
/// next run must find that post by its derived record key and not post again. The scanner is
/// killed while it fetches the site (a page that answers 300 ms late): the scan must end once,
/// `completed` (or `failed` after its three attempts, as documented).
#[tokio::test]
async fn the_publisher_and_the_scanner_killed_mid_work_end_their_work_once() {
    let h = harness();
    let (publish, scans, cfg) = publish_and_scan_queues("crash").await;
    let base = h.gateway_with(cfg).await;
    let env = worker_env(vec![
        ("PUBLISH_QUEUE_URL", publish.clone()),
        ("SCANS_QUEUE_URL", scans.clone()),
        // A killed publisher's claim on the variant ends after this (production: 120 s).
        ("PUBLISH_LEASE_SECS", "10".into()),
        // And a killed scanner's claim on the scan (production: 90 s).
        ("SCAN_LEASE_SECS", "10".into()),
    ]);
    let (_, key) = h.workspace("crashes publish").await;
    let c = Client::new(&base, &key);
    let kills = if full() { 6 } else { 1 };
    let mut report = vec![];

    // The publisher: one post to Bluesky through a proxy that answers createRecord late.
    let pds = tools::pds::LocalPds::start().await.expect("the local PDS (make deps installs it)");
    let proxy = e2e::faults::FaultProxy::start(&pds.url).await;
    let account = pds.account("crashed").await.unwrap();
    let r = c
        .post(
            "/channels",
            &json!({"type": "bluesky", "credentials": {"handle": account.handle, "app_password": account.app_password, "service_url": proxy.url}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    let channel = r.json["data"]["id"].as_str().unwrap().to_string();
    proxy.set_on(e2e::faults::Fault::SlowAnswer(Duration::from_secs(2)), None, &["createRecord"]);
    let marker = format!("crash{}", ulid::Ulid::generate().to_string().to_lowercase());
    let post = e2e::created(&c, "/posts", json!({"content": format!("Killed mid-publish {marker}"), "channel_ids": [channel]}), 201).await;
    let path = format!("/posts/{}", post["id"].as_str().unwrap());
    let r = c.post(&format!("{path}/publish"), &json!({})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    let remote = || async {
        let posts = pds.posts(&account.did).await.unwrap_or_default();
        posts.iter().filter(|p| p["value"]["text"].as_str().is_some_and(|t| t.contains(&marker))).count()
    };
    let progress = || async { remote().await as f64 };
    let done = || async { matches!(c.get(&path).await.json["data"]["status"].as_str(), Some("published" | "failed" | "partially_failed")) };
    let crashed = crash_and_finish("publisher", &env, &publish, kills, progress, done).await;
    let post = c.get(&path).await.json["data"].clone();
    assert_eq!(post["status"], "published", "{post}");
    assert_eq!(remote().await, 1, "one post at the PDS");
    assert!(post["variants"][0]["remote_id"].as_str().is_some_and(|id| id.starts_with("at://")), "{post}");
    report.push(format!(
        "| publisher (Bluesky) | {kills} | {} | {} | 1 post: published, one record at the PDS |",
        crashed.mid_work, crashed.runs
    ));

    // The scanner: one scan of a page that answers 300 ms late. Past the scan's three attempts
    // it is failed by design, so at most two kills here.
    let site = e2e::receiver::Receiver::start().await;
    site.serve_file(
        "/",
        "text/html; charset=utf-8",
        b"<!doctype html><html lang=\"en\"><head><title>Crash</title></head><body><h1>Hi</h1></body></html>".to_vec(),
    );
    site.set_delay(Duration::from_millis(300));
    let scan_kills = kills.min(2);
    let scan = e2e::created(&c, "/scans", json!({"url": format!("{}/", site.origin()), "force": true}), 202).await;
    let path = format!("/scans/{}", scan["id"].as_str().unwrap());
    let progress = || async { site.hits("/") as f64 };
    let done = || async { matches!(c.get(&path).await.json["data"]["status"].as_str(), Some("completed" | "failed")) };
    let crashed = crash_and_finish("scanner", &env, &scans, scan_kills, progress, done).await;
    let scan = c.get(&path).await.json["data"].clone();
    assert_eq!(scan["status"], "completed", "{scan}");
    assert!(scan["score"].is_u64() && scan["completed_at"].is_string(), "{scan}");
    // Each kill that found it fetching had claimed it: one attempt each, and the last one.
    let attempts = scan["attempts"].as_u64().unwrap_or_default() as usize;
    assert!((crashed.mid_work + 1..=3).contains(&attempts), "{attempts} attempts after {} kills mid-scan: {scan}", crashed.mid_work);
    report.push(format!(
        "| scanner | {scan_kills} | {} | {} | 1 scan: completed once, {} attempts |",
        crashed.mid_work, crashed.runs, scan["attempts"]
    ));

    print_report("crashes-publish", &report);
}

/// Copies of one message handled at the same moment by two containers (SQS delivers at least
/// once; the outbox sweep may send a job whose hand-off answer was lost): the publisher posts
/// once (its claim on the variant); the scanner fetches and scores once (a copy that arrives
/// while another holds the scan's claim keeps its message, and its redelivery finds the scan
/// done).
#[tokio::test]
async fn copies_of_a_message_racing_end_their_work_once() {
    let h = harness();
    let (publish, scans, cfg) = publish_and_scan_queues("race").await;
    let c = Client::new(&h.gateway_with(cfg.clone()).await, &h.workspace("racing copies").await.1);
    // The queue's one message, as the event both copies get.
    let taken = |queue: String| async move {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(ev) = harness().take_event(&queue).await {
                return ev;
            }
            assert!(Instant::now() < deadline, "no message in {queue}");
        }
    };

    // The publisher: createRecord answers 1 s late, so both copies are inside the call at once.
    let pds = tools::pds::LocalPds::start().await.expect("the local PDS (make deps installs it)");
    let proxy = e2e::faults::FaultProxy::start(&pds.url).await;
    let account = pds.account("racing").await.unwrap();
    let creds = json!({"handle": account.handle, "app_password": account.app_password, "service_url": proxy.url});
    let channel = e2e::created(&c, "/channels", json!({"type": "bluesky", "credentials": creds}), 201).await;
    proxy.set_on(e2e::faults::Fault::SlowAnswer(Duration::from_secs(1)), None, &["createRecord"]);
    let marker = format!("race{}", ulid::Ulid::generate().to_string().to_lowercase());
    let post = e2e::created(&c, "/posts", json!({"content": format!("Raced {marker}"), "channel_ids": [channel["id"]]}), 201).await;
    let path = format!("/posts/{}", post["id"].as_str().unwrap());
    assert_eq!(c.post(&format!("{path}/publish"), &json!({})).await.status, 202);
    let event = taken(publish).await;
    let (a, b) = (
        domain::publishing::Publisher::new(h.app_with(cfg.clone()).await).unwrap(),
        domain::publishing::Publisher::new(h.app_with(cfg.clone()).await).unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        tokio::join!(a.handle_sqs(event.clone()), b.handle_sqs(event.clone()));
        if c.get(&path).await.json["data"]["status"] == "published" {
            break;
        }
        assert!(Instant::now() < deadline, "not published: {}", c.get(&path).await.json);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let posts = pds.posts(&account.did).await.unwrap_or_default();
    let remote = posts.iter().filter(|p| p["value"]["text"].as_str().is_some_and(|t| t.contains(&marker))).count();
    assert_eq!(remote, 1, "one record at the PDS");

    // The scanner: the page answers 2 s late, so the copy comes while the first fetches.
    let site = e2e::receiver::Receiver::start().await;
    site.serve_file("/", "text/html; charset=utf-8", b"<!doctype html><html lang=\"en\"><head><title>Race</title></head></html>".to_vec());
    site.set_delay(Duration::from_secs(2));
    let scan = e2e::created(&c, "/scans", json!({"url": format!("{}/", site.origin()), "force": true}), 202).await;
    let path = format!("/scans/{}", scan["id"].as_str().unwrap());
    let event = taken(scans).await;
    let app = std::sync::Arc::new(h.app_with(cfg).await);
    // The second copy arrives once the first has claimed the scan and is fetching.
    let first = tokio::spawn({
        let (app, event) = (app.clone(), event.clone());
        async move { domain::scans::scanner::handle_sqs(&app, event).await }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.get(&path).await.json["data"]["status"] != "running" {
        assert!(Instant::now() < deadline, "the first copy did not claim the scan: {}", c.get(&path).await.json);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let second = domain::scans::scanner::handle_sqs(&app, event.clone()).await;
    assert_eq!(second.batch_item_failures.len(), 1, "the copy keeps its message while the claim holds");
    assert!(first.await.unwrap().batch_item_failures.is_empty(), "the first copy scanned");
    // Its redelivery finds the scan done.
    assert!(domain::scans::scanner::handle_sqs(&app, event).await.batch_item_failures.is_empty());
    let scan = c.get(&path).await.json["data"].clone();
    assert_eq!((scan["status"].as_str(), scan["attempts"].as_u64()), (Some("completed"), Some(1)), "{scan}");
    assert_eq!(site.hits("/"), 1, "the page fetched once");
}

/// Publish and scan queues of a test's own (no worker of the harness takes them), and the
/// configuration that sends work to them.
async fn publish_and_scan_queues(tag: &str) -> (String, String, shared::config::Config) {
    let h = harness();
    let (publish, scans) = (h.own_queue(&format!("{tag}-publish")).await, h.own_queue(&format!("{tag}-scans")).await);
    let mut cfg = h.generous_config();
    cfg.publish_queue_url = publish.clone();
    cfg.scans_queue_url = scans.clone();
    (publish, scans, cfg)
}

/// The worker process: what a worker's `main.rs` does with one invocation (clients from the
/// functions' environment, the event to the worker's domain code), run by the test above.
#[tokio::test]
#[ignore = "a worker process of the crash test, started by it with CRASH_WORKER and CRASH_EVENT"]
async fn worker_process() {
    let worker = std::env::var("CRASH_WORKER").expect("CRASH_WORKER names the worker");
    let event: shared::sqs::SqsEvent = serde_json::from_str(&std::env::var("CRASH_EVENT").expect("CRASH_EVENT")).expect("an SQS event");
    let app = shared::App::from_env().await.expect("the functions' environment");
    let answer = match worker.as_str() {
        "email-sender" => domain::sending::Sender::new(app).handle_sqs(event).await,
        "contact-import" => domain::contacts::import::handle_sqs(&app, event).await,
        "gdpr-worker" => domain::gdpr::worker::handle_sqs(&app, event).await,
        "dispatcher" => domain::webhooks::dispatch::Dispatcher::new(app).expect("a dispatcher").handle_sqs(event).await,
        "inbound-mail" => domain::helpdesk::mail::handle_sqs(&app, event).await,
        "publisher" => domain::publishing::Publisher::new(app).expect("a publisher").handle_sqs(event).await,
        "scanner" => domain::scans::scanner::handle_sqs(&app, event).await,
        other => panic!("no worker {other}"),
    };
    println!("CRASH_RESULT {}", serde_json::to_string(&answer).expect("serializes"));
}
