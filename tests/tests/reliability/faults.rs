//! The fault matrix: each dependency of the API (DynamoDB, and moto's SQS, SES and Secrets
//! Manager) fails one way at a time behind a fault proxy, under a steady mixed load (reads,
//! post, contact and booking writes, imports that the import worker runs, publications the
//! publisher posts to a local network, email sends that the sender worker carries to SES, mail
//! arriving for an inbound-mail worker behind the proxies, and the webhook deliveries of the
//! writes' events). Each row
//! records what clients got (statuses, the envelope, `Retry-After`, the slowest answer), what
//! became of the writes (each retried with its `Idempotency-Key` until accepted, then counted:
//! none lost, none twice; each import's rows once), of the emails (sent once) and of the
//! events (each delivered), and how long after the fault ended the API answered again.
//!
//! `make test` runs one fault per dependency; `make chaos` (`CHAOS=full`) runs every fault of
//! every dependency and writes the table to `docs/reliability.md`. This binary has its own
//! stack; the rows run one after another (one proxy pair, one fault at a time).

use e2e::faults::{Fault, FaultProxy};
use e2e::load::{Answer, Op, Setup, all, call, load, marker};
use e2e::{Client, harness};
use serde_json::Value;
use shared::outbox::WorkQueue;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The production budgets (`Timeouts::default`): 5 s per dependency call, 10 s per request.
const ANSWER_WITHIN: Duration = Duration::from_secs(11);
/// A dependency's fault is refused (429 or 503 with Retry-After) within this.
const REFUSE_WITHIN: Duration = Duration::from_secs(6);
/// Load runs this long under each fault (and the writes it made are then retried).
fn fault_secs() -> u64 {
    if full() { 6 } else { 3 }
}
fn full() -> bool {
    std::env::var("CHAOS").is_ok_and(|v| v == "full")
}

/// A gateway whose DynamoDB and other AWS calls go through the proxies, with the production
/// budgets and generous rate limits; started now (cold: it reads the platform secret on its first request).
async fn gateway(ddb: &FaultProxy, moto: &FaultProxy, emails_queue: Option<&str>) -> String {
    let h = harness();
    // The load is the dependency's to refuse, not the workspace's rate limits.
    let mut cfg = h.generous_config();
    cfg.timeouts = shared::config::Timeouts::default();
    if let Some(q) = emails_queue {
        cfg.emails_queue_url = q.to_string();
    }
    let sdk = tools::admin::local_sdk_config(&moto.url).await;
    let app = shared::App::with_dynamodb_endpoint(cfg, &sdk, Some(&ddb.url)).expect("app");
    let (addr, _task) = tools::gateway::start(Arc::new(app), 0).await.expect("gateway");
    format!("http://{addr}{}", tools::gateway::BASE_PATH)
}

/// The sender worker, its DynamoDB and SES calls through the proxies (the queue is polled
/// directly, as Lambda's event source mapping does). The queue is the row's own: on the
/// harness's, the stack's sender (not behind the proxies) took some rows' every email, and the
/// fault met no request.
async fn sender(ddb: &FaultProxy, moto: &FaultProxy, emails_queue: &str) -> tokio::task::JoinHandle<()> {
    let h = harness();
    let mut cfg = h.config.clone();
    cfg.timeouts = shared::config::Timeouts::default();
    cfg.emails_queue_url = emails_queue.to_string();
    let sdk = tools::admin::local_sdk_config(&moto.url).await;
    let sender = Arc::new(domain::sending::Sender::new(shared::App::with_dynamodb_endpoint(cfg, &sdk, Some(&ddb.url)).expect("app")));
    let handler: tools::worker::Handler = Arc::new(move |ev| {
        let sender = sender.clone();
        Box::pin(async move { sender.handle_sqs(ev).await })
    });
    tools::worker::poll(h.sqs().await, emails_queue.to_string(), handler)
}

/// The inbound-mail worker on a queue of its own, its S3 and DynamoDB calls through the
/// proxies (the queue polled directly, its messages back after 2 s when the worker fails them).
async fn inbound_worker(ddb: &FaultProxy, moto: &FaultProxy) -> (tokio::task::JoinHandle<()>, String) {
    let h = harness();
    let sqs = h.sqs().await;
    let queue = sqs
        .create_queue()
        .queue_name(format!("chaos-inbound-{}", ulid::Ulid::generate()))
        .attributes(aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout, "2")
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let mut cfg = h.config.clone();
    cfg.timeouts = shared::config::Timeouts::default();
    let sdk = tools::admin::local_sdk_config(&moto.url).await;
    let app = Arc::new(shared::App::with_dynamodb_endpoint(cfg, &sdk, Some(&ddb.url)).expect("app"));
    let handler: tools::worker::Handler = Arc::new(move |ev| {
        let app = app.clone();
        Box::pin(async move { domain::helpdesk::mail::handle_sqs(&app, ev).await })
    });
    (tools::worker::poll(sqs, queue.clone(), handler), queue)
}

/// One row of the matrix.
struct Row {
    dependency: &'static str,
    fault: Fault,
    answers: Vec<Answer>,
    writes: usize,
    lost: usize,
    doubled: usize,
    /// Writes whose retry was told to read the result (they answered 5xx after writing), and
    /// those of them whose object was not there (the write stopped before it).
    read_back: usize,
    not_applied: usize,
    /// Events of the accepted posts, contacts and bookings, and how many reached the receiver.
    events: usize,
    events_delivered: usize,
    /// Publications, and those published once (one post at the network).
    publications: usize,
    published: usize,
    /// Inbound messages, and those that became one conversation with one message.
    mail: usize,
    mail_once: usize,
    emails: usize,
    emails_sent_once: usize,
    emails_failed: usize,
    recovery: Duration,
    hit: u64,
}

impl Row {
    fn statuses(&self) -> String {
        let mut by: BTreeMap<String, usize> = BTreeMap::new();
        for a in &self.answers {
            let k = if a.code.is_empty() { a.status.to_string() } else { format!("{} {} ({:?})", a.status, a.code, a.op) };
            *by.entry(k).or_default() += 1;
        }
        by.iter().map(|(k, n)| format!("{k} ×{n}")).collect::<Vec<_>>().join(", ")
    }
    fn slowest(&self) -> Duration {
        self.answers.iter().map(|a| a.took).max().unwrap_or_default()
    }
    fn slowest_refusal(&self) -> Option<Duration> {
        self.answers.iter().filter(|a| a.status == 503 || a.status == 429).map(|a| a.took).max()
    }
    fn markdown(&self) -> String {
        let yes = |b: bool| if b { "yes" } else { "**no**" };
        let refused: Vec<&Answer> = self.answers.iter().filter(|a| a.status == 429 || a.status == 503).collect();
        format!(
            "| {} | {} | {} | {} | {} | {} | {:.1} s | {} | {} / {} lost / {} twice{} | {} of {} once, {} failed | {} of {} | {} of {} | {} of {} | {:.1} s |",
            self.dependency,
            self.fault.name(),
            self.hit,
            self.statuses(),
            yes(self.answers.iter().all(|a| a.in_envelope)),
            if refused.is_empty() { "–" } else { yes(refused.iter().all(|a| a.retry_after)) },
            self.slowest().as_secs_f64(),
            self.slowest_refusal().map_or("–".into(), |d| format!("{:.1} s", d.as_secs_f64())),
            self.writes,
            self.lost,
            self.doubled,
            if self.read_back > 0 {
                format!(" ({} read back after 409, {} of them not applied)", self.read_back, self.not_applied)
            } else {
                String::new()
            },
            self.emails_sent_once,
            self.emails,
            self.emails_failed,
            self.events_delivered,
            self.events,
            self.published,
            self.publications,
            self.mail_once,
            self.mail,
            self.recovery.as_secs_f64(),
        )
    }
}

/// The markers of the posts, contacts and bookings the load wrote (whose events a webhook
/// subscribed to their `*.created` types receives).
fn evented(answers: &[Answer]) -> Vec<String> {
    answers.iter().filter(|a| (200..300).contains(&a.status)).filter_map(|a| e2e::load::event_for(a.op, a.marker.as_deref()?)).collect()
}

/// How many of the events `expected` (`load::event_for`'s names) were delivered.
fn delivered(got: &[e2e::receiver::Received], expected: &[String]) -> usize {
    let have: std::collections::HashSet<String> = got.iter().map(e2e::load::event_key).collect();
    expected.iter().filter(|e| have.contains(*e)).count()
}

async fn run_row(ddb: &FaultProxy, moto: &FaultProxy, dependency: &'static str, service: &'static str, fault: Fault) -> Row {
    let h = harness();
    let (ws, key) = h.workspace(&format!("chaos {dependency} {}", fault.name())).await;
    // Set up and count through a generous gateway: the buckets are the workspace's, so the
    // harness's strict limits would leave the load's gateway a bucket already spent.
    let admin = Client::new(&h.generous_gateway().await, &key);
    let network = e2e::receiver::Receiver::start().await;
    let setup = Arc::new(e2e::load::mixed_setup(&admin, &ws, &network.url).await);
    // Webhook deliveries under the load: every accepted write's event must reach the receiver.
    let receiver = e2e::receiver::Receiver::start().await;
    let types = ["post.created", "contact.created", "booking.created"];
    e2e::created(&admin, "/webhooks", serde_json::json!({"url": receiver.url, "event_types": types}), 201).await;
    let proxy = if service == "dynamodb" { ddb } else { moto };
    let tag = service.chars().take(3).collect::<String>();
    // Warm a gateway first (the platform secret cached), unless the row is about that secret.
    let warm = service != "secretsmanager";
    let emails_queue = h.own_queue("chaos-emails").await;
    let mut base = if warm { Some(gateway(ddb, moto, Some(&emails_queue)).await) } else { None };
    if let Some(b) = &base {
        let http = reqwest::Client::new();
        let a = call(&http, b, &key, Op::ListPosts, None, &setup).await;
        assert_eq!(a.status, 200, "warm");
    }
    proxy.set(fault, Some(service));
    if base.is_none() {
        base = Some(gateway(ddb, moto, Some(&emails_queue)).await);
    }
    let base = base.expect("a gateway");
    let worker = sender(ddb, moto, &emails_queue).await;
    let until = Instant::now() + Duration::from_secs(fault_secs());
    let (mail_worker, mail_queue) = inbound_worker(ddb, moto).await;
    let mailbox = format!("support@{}", setup.from.split_once('@').expect("an address").1);
    let mail = tokio::spawn(e2e::load::inbound_feed(mail_queue, mailbox, until, Duration::from_millis(500), tag.clone()));
    let mut answers = load(&base, &key, setup.clone(), &Op::WIDE, Op::WIDE.len(), until, &tag).await;
    let mail = mail.await.expect("the inbound feed");
    let hit = proxy.clear();
    let cleared = Instant::now();
    // Recovered: a read and a write answer again.
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let recovery = loop {
        let marker = marker(&tag);
        let (r, w) = (
            call(&http, &base, &key, Op::ListPosts, None, &setup).await,
            call(&http, &base, &key, Op::CreatePost, Some(&marker), &setup).await,
        );
        // The probe's write is checked like the load's.
        let wrote = w.status == 201;
        answers.push(w);
        if r.status == 200 && wrote {
            break cleared.elapsed();
        }
        assert!(cleared.elapsed() < Duration::from_secs(60), "{dependency} {}: not recovered in 60 s", fault.name());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // Every write retried with its key until accepted (as a client following Retry-After does).
    let mut pending: Vec<(Op, String, String)> = answers
        .iter()
        .filter(|a| a.op.write() && !(200..300).contains(&a.status))
        .filter_map(|a| Some((a.op, a.marker.clone()?, String::new())))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut read_back: Vec<String> = vec![];
    let mut not_applied = 0;
    while !pending.is_empty() {
        assert!(Instant::now() < deadline, "{dependency} {}: writes still refused after the fault: {pending:?}", fault.name());
        let mut left = vec![];
        for (op, m, _) in pending {
            let a = call(&http, &base, &key, op, Some(&m), &setup).await;
            // A request that answered 5xx after it wrote keeps its key done: the retry is told
            // to read the result (at most once), and the lists below count what it wrote.
            if a.status == 409 && a.message.contains("stopped after writing") {
                read_back.push(m);
                continue;
            }
            if !(200..300).contains(&a.status) {
                left.push((op, m, format!("{} {} {}", a.status, a.code, a.message)));
            }
        }
        pending = left;
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    // Count the effects: each write's marker exactly once.
    let markers = |op: Op| -> Vec<String> { answers.iter().filter(|a| a.op == op).filter_map(|a| a.marker.clone()).collect() };
    let posts = all(&admin, "/posts").await;
    let contacts = all(&admin, "/contacts").await;
    let count = |list: &[Value], field: &str, m: &str| list.iter().filter(|v| v[field].as_str().is_some_and(|x| x.starts_with(m))).count();
    let mut writes = 0;
    let (mut lost, mut doubled) = (0, 0);
    let bookings = all(&admin, "/bookings").await;
    for (op, list, field) in
        [(Op::CreatePost, &posts, "content"), (Op::CreateContact, &contacts, "email"), (Op::CreateBooking, &bookings, "notes")]
    {
        for m in markers(op) {
            writes += 1;
            match count(list, field, &m) {
                // Told it stopped after a partial write: not acknowledged, so not lost.
                0 if read_back.contains(&m) => not_applied += 1,
                0 => lost += 1,
                1 => {}
                _ => doubled += 1,
            }
        }
    }
    // Imports run in the worker (the job reached it through the outbox, whatever SQS did):
    // each row once.
    let imports = markers(Op::StartImport);
    writes += imports.len();
    let imported = e2e::load::imports(&admin, &imports, 60).await;
    // Publications: each draft once, published, and posted to the network once.
    let publications = markers(Op::PublishPost);
    writes += publications.len();
    let published = e2e::load::publications(&admin, || e2e::load::posted(&network.received()), &publications, 90).await;
    // Inbound mail, read and recorded by a worker whose calls go through the proxies: each
    // message one conversation with one message.
    let received = e2e::load::conversations(&admin, &mail, 90).await;
    for t in [imported, published, received] {
        (lost, doubled) = (lost + t.lost, doubled + t.twice);
    }
    mail_worker.abort();
    // Every accepted post, contact and booking has its event delivered (at least once). All
    // were accepted by now (retried until they were).
    let expected: Vec<String> = [Op::CreatePost, Op::CreateContact, Op::CreateBooking]
        .into_iter()
        .flat_map(|op| markers(op).into_iter().filter_map(move |m| e2e::load::event_for(op, &m)))
        .collect();
    let got = receiver.wait_until(60, |got| delivered(got, &expected) == expected.len()).await;
    let (events, events_delivered) = (expected.len(), delivered(&got, &expected));
    // Emails: each accepted once; each sent once or, where SES's outcome was unknown, failed.
    let subjects = markers(Op::SendEmail);
    writes += subjects.len();
    let emails = all(&admin, "/emails").await;
    for s in &subjects {
        match count(&emails, "subject", s) {
            0 => lost += 1,
            1 => {}
            _ => doubled += 1,
        }
    }
    let (mut sent_once, mut failed) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(if full() { 120 } else { 60 });
    loop {
        let emails = all(&admin, "/emails").await;
        let mine: Vec<&Value> = emails.iter().filter(|e| subjects.iter().any(|s| e["subject"] == s.as_str())).collect();
        let settled = mine.iter().all(|e| matches!(e["status"].as_str(), Some("sent" | "delivered" | "failed" | "bounced")));
        if settled || Instant::now() > deadline {
            let ses = h.ses_sent().await;
            for e in &mine {
                let copies = ses.iter().filter(|m| m["subject"] == e["subject"]).count();
                match (e["status"].as_str(), copies) {
                    (Some("sent" | "delivered"), 1) => sent_once += 1,
                    (Some("failed"), 0 | 1) => failed += 1,
                    (_, n) if n > 1 => doubled += 1,
                    (status, n) => panic!("{dependency} {}: email {} is {status:?} with {n} SES copies", fault.name(), e["id"]),
                }
            }
            assert!(settled, "{dependency} {}: emails not settled in time: {mine:?}", fault.name());
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    worker.abort();
    Row {
        dependency,
        fault,
        answers,
        writes,
        lost,
        doubled,
        read_back: read_back.len(),
        not_applied,
        events,
        events_delivered,
        publications: publications.len(),
        published: published.once,
        mail: mail.len(),
        mail_once: received.once,
        emails: subjects.len(),
        emails_sent_once: sent_once,
        emails_failed: failed,
        recovery,
        hit,
    }
}

/// The goals every row must meet.
fn check(row: &Row) {
    let name = format!("{} {}", row.dependency, row.fault.name());
    for a in &row.answers {
        assert!(a.in_envelope, "{name}: an answer outside the envelope: {a:?}");
        assert!(a.status < 500 || (a.status == 503 && a.code == "UNAVAILABLE"), "{name}: {a:?}");
        if a.status == 503 || a.status == 429 {
            assert!(a.retry_after, "{name}: {} without Retry-After: {a:?}", a.status);
        }
        assert!(a.took < ANSWER_WITHIN, "{name}: answered after {:?}: {a:?}", a.took);
    }
    // A failing dependency is refused within REFUSE_WITHIN; a slow one (every call answering
    // 1.5 s late) within the request's budget, which a request of many calls runs out of.
    if let Some(d) = row.slowest_refusal().filter(|_| !matches!(row.fault, Fault::Latency(_))) {
        assert!(d < REFUSE_WITHIN, "{name}: a 429/503 after {d:?}");
    }
    // A slow dependency answers every call, so the API always knows what it wrote: a write told
    // "stopped after writing" must then be found (a request that wrote part of its work, as a
    // booking creating its contact first once did, is not).
    if matches!(row.fault, Fault::Latency(_)) {
        assert_eq!(row.not_applied, 0, "{name}: a request wrote part of its work");
    }
    assert!(row.hit > 0, "{name}: the fault met no request");
    assert_eq!((row.lost, row.doubled), (0, 0), "{name}: writes lost or done twice");
    assert_eq!(row.events_delivered, row.events, "{name}: events not delivered");
    // Every kind of write met the fault, unless the fault holds each request for seconds (a
    // hang, the latency): then a client makes one or two requests in the fault's time.
    if !matches!(row.fault, Fault::Hang | Fault::Latency(_)) {
        for op in Op::WIDE.into_iter().filter(|op| op.write()) {
            assert!(row.answers.iter().any(|a| a.op == op), "{name}: no {op:?} under the fault");
        }
        assert!(row.mail > 0, "{name}: no mail arrived under the fault");
    }
}

#[tokio::test]
async fn every_dependency_failing_keeps_answers_in_the_envelope_and_writes_once() {
    let h = harness();
    let ddb = FaultProxy::start(&h.dynamodb_endpoint).await;
    let moto = FaultProxy::start(&h.moto_endpoint).await;
    let every = [Fault::Reset, Fault::Hang, Fault::Latency(Duration::from_millis(1500)), Fault::Cut, Fault::ServerError, Fault::Throttle];
    let rows: Vec<(&str, &str, Fault)> = if full() {
        let mut r = vec![];
        for (dep, svc) in [("DynamoDB", "dynamodb"), ("SQS", "sqs"), ("SES", "ses"), ("Secrets Manager", "secretsmanager")] {
            for f in every {
                r.push((dep, svc, f));
            }
        }
        r
    } else {
        // One per dependency, each a row the full matrix once found broken.
        vec![
            ("DynamoDB", "dynamodb", Fault::Throttle),
            ("SQS", "sqs", Fault::Hang),
            ("SES", "ses", Fault::Cut),
            ("Secrets Manager", "secretsmanager", Fault::Throttle),
        ]
    };
    // `CHAOS_ROW="DynamoDB latency"` runs the rows whose name holds it (and writes no report).
    let only = std::env::var("CHAOS_ROW").ok();
    let rows: Vec<_> =
        rows.into_iter().filter(|(dep, _, f)| only.as_ref().is_none_or(|o| format!("{dep} {}", f.name()).contains(o))).collect();
    let mut table = vec![];
    let mut failures = vec![];
    for (dep, svc, fault) in rows {
        let row = run_row(&ddb, &moto, dep, svc, fault).await;
        println!("{}", row.markdown());
        table.push(row.markdown());
        if let Err(e) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&row))) {
            failures.push(e.downcast_ref::<String>().cloned().unwrap_or_default());
        }
    }
    if let Ok(doc) = std::env::var("CHAOS_REPORT").map_err(drop).and_then(|d| if only.is_none() { Ok(d) } else { Err(()) }) {
        let header = "| dependency | fault | requests it met | what clients got | in the envelope | Retry-After on 429/503 | slowest answer | slowest 429/503 | writes | emails sent | events delivered | published once | inbound mail, one conversation each | API whole again after |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
        e2e::load::splice(&doc, "matrix", &format!("{header}{}", table.join("\n")));
    }
    assert!(failures.is_empty(), "rows missing their goals:\n{}", failures.join("\n"));
}

/// A webhook receiver failing each way behind the proxy while posts are created, under the
/// mixed load of the matrix (whose posts, contacts and bookings it subscribes to): every event
/// reaches it once the fault ends (retried on the dispatcher's schedule, here 1 s apart), in
/// the time it records; copies past the first are counted (deliveries are at least once:
/// an answer cut after the receiver took the event is sent again, and receivers dedupe by
/// the event's id).
#[tokio::test]
async fn a_failing_webhook_receiver_gets_every_event_once_it_recovers() {
    let h = harness();
    let receiver = e2e::receiver::Receiver::start().await;
    let origin = receiver.url.trim_end_matches("/hook").to_string();
    let proxy = FaultProxy::start(&origin).await;
    let (ws, key) = h.workspace("chaos webhooks").await;
    let base = h.generous_gateway().await;
    let c = Client::new(&base, &key);
    let channel = e2e::channel(&c, "chaos").await;
    let network = e2e::receiver::Receiver::start().await;
    let setup = Arc::new(e2e::load::mixed_setup(&c, &ws, &network.url).await);
    let types = ["post.created", "contact.created", "booking.created"];
    let r = c.post("/webhooks", &serde_json::json!({"url": format!("{}/hook", proxy.url), "event_types": types})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let faults = if full() {
        vec![Fault::Reset, Fault::Hang, Fault::Latency(Duration::from_millis(1500)), Fault::Cut, Fault::ServerError, Fault::Throttle]
    } else {
        vec![Fault::Cut]
    };
    let mut rows = vec![];
    for fault in faults {
        proxy.set(fault, None);
        let until = Instant::now() + Duration::from_secs(3);
        let mixed = tokio::spawn({
            let (base, key, setup) = (base.clone(), key.clone(), setup.clone());
            async move { load(&base, &key, setup, &Op::WIDE, 2, until, "whl").await }
        });
        let mut posts = vec![];
        while Instant::now() < until {
            let r = c.post("/posts", &serde_json::json!({"content": marker("wh"), "channel_ids": [channel]})).await;
            assert_eq!(r.status, 201, "{}", r.json);
            posts.push(r.json["data"]["id"].as_str().unwrap().to_string());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let answers = mixed.await.expect("the mixed load");
        let hit = proxy.clear();
        let cleared = Instant::now();
        for a in &answers {
            assert!(a.in_envelope && a.status < 500, "{}: the API answered {a:?}", fault.name());
        }
        let load_events = evented(&answers);
        let copies = |received: &[e2e::receiver::Received], id: &str| {
            received.iter().filter(|m| m.event_type() == "post.created" && m.json()["data"]["id"] == id).count()
        };
        let received = receiver
            .wait_until(120, |got| posts.iter().all(|p| copies(got, p) > 0) && delivered(got, &load_events) == load_events.len())
            .await;
        let whole_after = cleared.elapsed();
        let missing = posts.iter().filter(|p| copies(&received, p) == 0).count();
        let extra: usize = posts.iter().map(|p| copies(&received, p).saturating_sub(1)).sum();
        let load_delivered = delivered(&received, &load_events);
        let row = format!(
            "| {} | {hit} | {} | {} | {extra} | {} of {} | {:.1} s |",
            fault.name(),
            posts.len(),
            posts.len() - missing,
            load_delivered,
            load_events.len(),
            whole_after.as_secs_f64()
        );
        println!("{row}");
        rows.push(row);
        assert_eq!(missing, 0, "{}: events never delivered", fault.name());
        assert_eq!(load_delivered, load_events.len(), "{}: the mixed load's events never delivered", fault.name());
        assert!(hit > 0, "{}: the fault met no delivery", fault.name());
    }
    if let Ok(doc) = std::env::var("CHAOS_REPORT") {
        let header = "| receiver fault (3 s) | deliveries it met | post events | delivered | copies past the first | the mixed load's events delivered | all delivered after the fault ended |\n|---|---|---|---|---|---|---|\n";
        e2e::load::splice(&doc, "webhooks", &format!("{header}{}", rows.join("\n")));
    }
}

/// A transaction DynamoDB applied whose answer never came back (cut after the request left,
/// on every one of the SDK's attempts). The request's `Idempotency-Key` reservation is its
/// commit witness: read back, it shows the write happened, and the request answers as if the
/// answer had come. When the read-back fails too, the request answers 503 and its key is not
/// freed: the client's retry is told the write was done, and it is not done twice.
#[tokio::test]
async fn a_write_whose_commit_answer_was_lost_happens_once() {
    let h = harness();
    let ddb = FaultProxy::start(&h.dynamodb_endpoint).await;
    let moto = FaultProxy::start(&h.moto_endpoint).await;
    let base = gateway(&ddb, &moto, None).await;
    let (ws, key) = h.workspace("lost commit answers").await;
    let admin = Client::new(&h.generous_gateway().await, &key);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let setup = Setup::default();
    // Warm: the platform secret and the credential are read before any fault.
    assert_eq!(call(&http, &base, &key, Op::ListContacts, None, &setup).await.status, 200);

    ddb.set_on(Fault::Cut, Some("dynamodb"), &["TransactWriteItems"]);
    let read_back = marker("lost");
    let a = call(&http, &base, &key, Op::CreateContact, Some(&read_back), &setup).await;
    assert!(ddb.clear() > 0, "the fault met no transaction");
    assert_eq!((a.status, a.in_envelope), (201, true), "the witness shows the write: {a:?}");
    let again = call(&http, &base, &key, Op::CreateContact, Some(&read_back), &setup).await;
    assert_eq!(again.status, 201, "replayed: {again:?}");

    ddb.set_on(Fault::Cut, Some("dynamodb"), &["TransactWriteItems", "GetItem"]);
    let unknown = marker("lost");
    let a = call(&http, &base, &key, Op::CreateContact, Some(&unknown), &setup).await;
    ddb.clear();
    assert_eq!((a.status, a.code.as_str(), a.retry_after), (503, "UNAVAILABLE", true), "{a:?}");
    let retry = call(&http, &base, &key, Op::CreateContact, Some(&unknown), &setup).await;
    assert_eq!((retry.status, retry.code.as_str(), retry.retry_after), (409, "CONFLICT", false), "{retry:?}");
    let told = http
        .post(format!("{base}/contacts"))
        .bearer_auth(&key)
        .header("idempotency-key", &unknown)
        .json(&e2e::load::body(Op::CreateContact, &unknown, &setup))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert!(told["error"]["message"].as_str().is_some_and(|m| m.contains("was completed")), "the retry is told the write was done: {told}");

    let contacts = all(&admin, "/contacts").await;
    for m in [&read_back, &unknown] {
        let n = contacts.iter().filter(|c| c["email"].as_str().is_some_and(|e| e.starts_with(m.as_str()))).count();
        assert_eq!(n, 1, "{m}: written {n} times");
    }

    // A batch of emails is written in parts (transactions of whole emails, then its record):
    // with every answer cut, the parts land and the request fails; its key's retry resumes
    // it, finds every part written, and answers the same batch without writing it again.
    let from = format!("batch@{}", e2e::verified_domain(&admin, &ws).await);
    let subject = marker("lost batch");
    let emails: Vec<Value> = (0..2)
        .map(|i| serde_json::json!({"from": from, "to": [format!("batch{i}@example.org")], "subject": subject, "text": "once"}))
        .collect();
    let batch = serde_json::json!({ "emails": emails });
    let send = || http.post(format!("{base}/emails/batch")).bearer_auth(&key).header("idempotency-key", &subject).json(&batch).send();
    ddb.set_on(Fault::Cut, Some("dynamodb"), &["TransactWriteItems"]);
    let first = send().await.unwrap().status().as_u16();
    assert!(ddb.clear() > 0, "the fault met no batch write");
    assert_eq!(first, 503, "the batch's writes failed as far as the request knows");
    let retry = send().await.unwrap();
    assert_eq!(retry.status().as_u16(), 202, "the retry completes the batch: {:?}", retry.text().await);
    let emails = all(&admin, "/emails").await;
    let n = emails.iter().filter(|e| e["subject"] == subject.as_str()).count();
    assert_eq!(n, 2, "the batch's two emails, written once");

    // The export job and its queue message are one write (the outbox): a queue that refuses
    // the message costs the job a delay, not the request. The answer is 202, the key's retry
    // replays it, and the sweep hands the job to its queue once SQS is back.
    let key_ = marker("export");
    let export = || {
        http.post(format!("{base}/gdpr/exports"))
            .bearer_auth(&key)
            .header("idempotency-key", &key_)
            .json(&serde_json::json!({"scope": "workspace"}))
            .send()
    };
    moto.set(Fault::ServerError, Some("sqs"));
    let first = export().await.unwrap();
    assert!(moto.clear() > 0, "the fault met no queue");
    assert_eq!(first.status().as_u16(), 202, "accepted: the job waits in the outbox");
    let first: Value = first.json().await.unwrap();
    let retry = export().await.unwrap();
    assert_eq!(retry.status().as_u16(), 202, "replayed");
    let retry: Value = retry.json().await.unwrap();
    assert_eq!(retry["data"]["id"], first["data"]["id"], "the same job, not a second one");
    let job = format!("/gdpr/exports/{}", first["data"]["id"].as_str().unwrap());
    let deadline = Instant::now() + Duration::from_secs(60);
    while admin.get(&job).await.json["data"]["status"] != "completed" {
        assert!(Instant::now() < deadline, "the sweep did not hand the export to its queue");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// An export, an erasure, a scan and an import accepted while the API cannot reach SQS at all
/// (a gateway whose queue endpoint is a closed port): each answers 202, waits in the outbox,
/// and the sweep hands it to its worker, which runs it to the end, once.
#[tokio::test]
async fn jobs_accepted_while_their_queue_is_down_run_once_it_is_back() {
    let h = harness();
    let sites = tools::sites::Sites::start().await.expect("fixture sites");
    let (ws, key) = h.workspace("jobs without a queue").await;
    let generous = h.generous_gateway().await;
    let c = Client::new(&generous, &key);
    let down = Client::new(&h.base_noqueue, &key);
    // The export in a workspace of its own: the erasure withdraws any export of its workspace
    // still running when it completes, and the sweep hands the two over in either order.
    let (ws_export, key_export) = h.workspace("jobs without a queue: the export").await;
    let (c_export, down_export) = (Client::new(&generous, &key_export), Client::new(&h.base_noqueue, &key_export));
    let subject = format!("{}@example.org", marker("erased"));
    e2e::created(&c, "/contacts", serde_json::json!({"email": subject}), 201).await;
    let rows: Vec<Value> = (0..20).map(|i| serde_json::json!({"email": format!("queued-{i}@example.org")})).collect();
    let jobs = [
        (&down_export, &c_export, "/gdpr/exports", serde_json::json!({"scope": "workspace"})),
        (&down, &c, "/gdpr/erasures", serde_json::json!({"subject": {"email": subject}, "reason": "Art. 17"})),
        (&down, &c, "/scans", serde_json::json!({"url": sites.url("well-configured"), "force": true})),
        (&down, &c, "/contacts/imports", serde_json::json!({"rows": rows})),
    ];
    let mut paths = vec![];
    for (sender, reader, path, body) in jobs {
        let job = e2e::created(sender, path, body, 202).await;
        paths.push((reader, format!("{path}/{}", job["id"].as_str().unwrap())));
    }
    let deadline = Instant::now() + Duration::from_secs(90);
    for (reader, path) in &paths {
        loop {
            let job = reader.get(path).await.json["data"].clone();
            if job["status"] == "completed" {
                break;
            }
            assert!(!matches!(job["status"].as_str(), Some("failed")), "{path}: {job}");
            assert!(Instant::now() < deadline, "{path} did not run: {job}");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    let paths: Vec<String> = paths.into_iter().map(|(_, p)| p).collect();
    let imported = all(&c, "/contacts").await.iter().filter(|ct| ct["email"].as_str().is_some_and(|e| e.starts_with("queued-"))).count();
    assert_eq!(imported, 20, "every row once");
    // Once: the sweep sent each job one time and deleted what it sent.
    let store = h.app().await;
    let wid = shared::auth::WorkspaceId::trusted(ws.clone());
    let id = |i: usize| paths[i].rsplit('/').next().unwrap().to_string();
    let export_ws = shared::auth::WorkspaceId::trusted(ws_export.clone());
    let export = store
        .db
        .get(&shared::store::ws_pk(&export_ws), &domain::keys::EXPORT_JOB.sk(&domain::ids::ExportId::trusted(id(0))))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(shared::store::get_i64(&export, "runs"), Some(1), "the export ran once");
    assert_eq!(c.get(&paths[2]).await.json["data"]["attempts"], 1, "the scan ran once");
    let queues = [WorkQueue::Gdpr, WorkQueue::Gdpr, WorkQueue::Scans, WorkQueue::ContactImports];
    for (i, queue) in queues.into_iter().enumerate() {
        assert!(outbox_job(&store, queue, &id(i)).await.is_none(), "{}: left in the outbox", paths[i]);
    }

    // A scan the scanner must queue again (its host was busy) while SQS refuses: parked in the
    // outbox, sent by the sweep, run. (Its first message went to a queue no worker polls.)
    let mut cfg = h.config.clone();
    cfg.scans_queue_url = h.own_queue("parked-scans").await;
    let quiet = h.app_with(cfg).await;
    let url = url::Url::parse(sites.url("neglected")).unwrap();
    let domain::scans::Requested::Created(scan) = domain::scans::request(&quiet, &wid, &url, true).await.unwrap() else {
        panic!("a forced scan is new")
    };
    assert!(outbox_job(&store, WorkQueue::Scans, &scan.id).await.is_none(), "handed off: not in the outbox");
    let refusing = h.app().await.with_sqs_endpoint(&format!("http://127.0.0.1:{}", e2e::closed_port()));
    domain::scans::enqueue_after(&refusing, &wid, &scan.id, 5).await.unwrap();
    assert!(outbox_job(&store, WorkQueue::Scans, &scan.id).await.is_some(), "parked");
    let path = format!("/scans/{}", scan.id);
    while c.get(&path).await.json["data"]["status"] != "completed" {
        assert!(Instant::now() < deadline + Duration::from_secs(60), "the parked scan did not run");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn outbox_job(store: &shared::App, queue: WorkQueue, id: &str) -> Option<shared::store::Item> {
    let sk = format!("{}#{id}", queue.name());
    for shard in 0..shared::events::OUTBOX_SHARDS {
        if let Some(item) = store.db.get(&shared::keys::OUTBOX_JOB.pk(&shard.to_string()), &sk).await.unwrap() {
            return Some(item);
        }
    }
    None
}

/// S3 failing each way while the GDPR worker writes an export and the inbound-mail worker
/// reads a received message (both through the proxy; the API and DynamoDB are not faulted).
/// The workers fail their batches, SQS hands the work over again (here: the test does, every
/// 300 ms), and once S3 is back the work ends whole: the export document holds every contact
/// once, the message is one conversation with one message. `make test` runs the cut row;
/// `make chaos` all six, written to docs/reliability.md.
#[tokio::test]
async fn s3_failing_delays_exports_and_inbound_mail_and_loses_nothing() {
    let h = harness();
    let moto = FaultProxy::start(&h.moto_endpoint).await;
    let sqs = h.sqs().await;
    // The export's queue is this test's own: only the faulty worker takes it.
    let queue = sqs.create_queue().queue_name(format!("chaos-gdpr-{}", ulid::Ulid::generate())).send().await.unwrap().queue_url.unwrap();
    let mut cfg = h.generous_config();
    cfg.gdpr_queue_url = queue.clone();
    let (ws, key) = h.workspace("chaos s3").await;
    let c = Client::new(&h.gateway_with(cfg.clone()).await, &key);
    let mailbox = format!("support@{}", e2e::verified_domain(&c, &ws).await);
    let total = 300;
    let rows: Vec<Value> = (0..total).map(|i| serde_json::json!({"email": format!("s3-{i}@example.org")})).collect();
    let imp = e2e::created(&c, "/contacts/imports", serde_json::json!({"rows": rows}), 202).await;
    let imp_path = format!("/contacts/imports/{}", imp["id"].as_str().unwrap());
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.get(&imp_path).await.json["data"]["status"] != "completed" {
        assert!(Instant::now() < deadline, "the import did not complete");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    cfg.timeouts = shared::config::Timeouts::default();
    let sdk = tools::admin::local_sdk_config(&moto.url).await;
    let worker = shared::App::with_dynamodb_endpoint(cfg, &sdk, Some(&h.dynamodb_endpoint)).expect("app");
    let store = h.app().await;
    let faults = if full() {
        vec![Fault::Reset, Fault::Hang, Fault::Latency(Duration::from_millis(1500)), Fault::Cut, Fault::ServerError, Fault::Throttle]
    } else {
        vec![Fault::Cut]
    };
    let mut rows = vec![];
    for fault in faults {
        let r = c.post("/gdpr/exports", &serde_json::json!({"scope": "workspace"})).await;
        assert_eq!(r.status, 202, "{}", r.json);
        let export = format!("/gdpr/exports/{}", r.json["data"]["id"].as_str().unwrap());
        let subject = marker("s3 mail ");
        let raw = format!(
            "From: Kari <kari@example.org>\r\nTo: {mailbox}\r\nSubject: {subject}\r\nMessage-ID: <{}@example.org>\r\nDate: Fri, 27 Nov 2026 10:00:00 +0000\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nHello\r\n",
            ulid::Ulid::generate()
        );
        let body = tools::admin::store_inbound(
            store.s3(),
            &h.resources.mail_bucket,
            raw.as_bytes(),
            std::slice::from_ref(&mailbox),
            "PASS",
            "PASS",
        )
        .await
        .unwrap();
        let receipt = domain::helpdesk::mail::receipt(&body).expect("a receipt");
        moto.set(fault, Some("s3"));
        let fault_ends = Instant::now() + Duration::from_secs(3);
        let (mut cleared, mut hit) = (None, 0);
        let (mut export_runs, mut mail_runs) = (0, 0);
        let (mut export_done, mut mail_done) = (false, false);
        let mut pending: Vec<shared::sqs::SqsEvent> = vec![];
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            if cleared.is_none() && Instant::now() >= fault_ends {
                hit = moto.clear();
                cleared = Some(Instant::now());
            }
            if !mail_done {
                mail_runs += 1;
                let run = tokio::time::timeout(Duration::from_secs(20), domain::helpdesk::mail::handle(&worker, &receipt)).await;
                mail_done = matches!(run, Ok(Ok(())));
            }
            let got = sqs.receive_message().queue_url(&queue).max_number_of_messages(10).send().await.unwrap();
            for m in got.messages.unwrap_or_default() {
                sqs.delete_message().queue_url(&queue).receipt_handle(m.receipt_handle().unwrap_or_default()).send().await.unwrap();
                pending.push(shared::sqs::event(vec![shared::sqs::message(
                    m.message_id().unwrap_or_default(),
                    "r",
                    m.body().unwrap_or_default(),
                )]));
            }
            for ev in std::mem::take(&mut pending) {
                export_runs += 1;
                let answer = domain::gdpr::worker::handle_sqs(&worker, ev.clone()).await;
                if !answer.batch_item_failures.is_empty() {
                    pending.push(ev);
                }
            }
            export_done = export_done || c.get(&export).await.json["data"]["status"] == "completed";
            if export_done && mail_done && cleared.is_some() {
                break;
            }
            assert!(Instant::now() < deadline, "S3 {}: the work did not end (export {export_done}, mail {mail_done})", fault.name());
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        let whole_after = cleared.map(|c| c.elapsed()).unwrap_or_default();
        let job = c.get(&export).await.json["data"].clone();
        let doc = e2e::export_document(job["download_url"].as_str().expect("a download link")).await;
        let mut exported: Vec<&str> = doc["sections"]["workspace"]["contact"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["email"].as_str())
            .filter(|e| e.starts_with("s3-"))
            .collect();
        exported.sort_unstable();
        let n = exported.len();
        exported.dedup();
        assert_eq!((n, exported.len()), (total, total), "S3 {}: every contact once in the document", fault.name());
        let list = all(&c, "/helpdesk/conversations").await;
        let convs: Vec<&Value> = list.iter().filter(|v| v["subject"] == subject.as_str()).collect();
        assert_eq!(convs.len(), 1, "S3 {}: one conversation for the message", fault.name());
        assert_eq!(convs[0]["message_count"], 1, "S3 {}: one message: {}", fault.name(), convs[0]);
        let row = format!(
            "| {} | {hit} | {export_runs} runs, whole ({total} contacts, each once) | {mail_runs} runs, one conversation, one message | {:.1} s |",
            fault.name(),
            whole_after.as_secs_f64()
        );
        println!("{row}");
        rows.push(row);
    }
    if let Ok(doc) = std::env::var("CHAOS_REPORT") {
        let header = "| S3 fault (3 s) | S3 requests it met | GDPR export | inbound mail | all work done after the fault ended |\n|---|---|---|---|---|\n";
        e2e::load::splice(&doc, "s3", &format!("{header}{}", rows.join("\n")));
    }
}
