//! The soak: the fault matrix's mixed load (reads, posts, contacts, emails, bookings, imports,
//! publications, and inbound mail arriving meanwhile) for `SOAK_SECS` (900 by default), with
//! the local stack's workers taking their queues (the sender, the import worker, the publisher,
//! the inbound-mail worker, and the webhook dispatcher, which delivers every post's, contact's
//! and booking's event to a receiver). Reported per minute: requests per second, p50 and p99,
//! errors, the resident memory of the process that hosts the gateway and the workers, and its
//! AWS calls (which of them grew, in number, time or items read, is the first question when
//! latency grows). At the end every effect must have happened once (each email sent, each
//! booking, import row, publication and inbound message once, each event delivered) and the
//! dead-letter queues be empty. `make soak` runs it and writes the table into
//! `docs/reliability.md`; `make test` skips it (`#[ignore]`).

use e2e::load::{Op, Tally, call, marker};
use e2e::{Client, harness};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Requests per second the load offers: a rate the local stack holds on a 2-core machine
/// (docs/reliability.md, The soak). `SOAK_RATE` sets another.
const RATE: u64 = 5;
const WORKERS: u64 = 4;

#[derive(Default, Clone)]
struct Minute {
    latencies_ms: Vec<u64>,
    /// By kind (`kind`): reads, writes, sends.
    by_kind: [Vec<u64>; 3],
    /// By op (`Op::WIDE`'s order), for the summary's first-to-last comparison.
    by_op: [Vec<u64>; 8],
    server_errors: usize,
    client_errors: usize,
    rss_kib: u64,
    /// CPU seconds used by the end of the minute: this process, DynamoDB Local, moto.
    cpu: [f64; 3],
    /// DynamoDB Local on its own: a GetItem on a table of one item that nothing else touches,
    /// twice a second. If it slows as the API does, the emulator slows, not the API.
    probe_ms: Vec<f64>,
    /// Every AWS call the process made in the minute, by function and operation: count, total
    /// time and items read (`shared::metrics::take_call_tally`).
    calls: shared::metrics::CallTally,
    /// The deepest the product's queues were (visible and in flight, summed) at a sample.
    queue_depth: u64,
}

/// Reads (list posts, list contacts), writes (every other op but sends), sends.
fn kind(op: Op) -> usize {
    match op {
        Op::ListPosts | Op::ListContacts => 0,
        Op::CreatePost | Op::CreateContact | Op::CreateBooking | Op::StartImport | Op::PublishPost => 1,
        Op::SendEmail => 2,
    }
}

/// CPU seconds a process has used (`/proc/<pid>/stat`: utime and stime, in 1/100 s).
fn cpu_secs(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("").split_whitespace().collect();
    let tick = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0
}

/// CPU seconds an emulator has used: the children of its guard shell.
fn emulator_cpu_secs(guard: u32) -> f64 {
    let children = std::fs::read_to_string(format!("/proc/{guard}/task/{guard}/children")).unwrap_or_default();
    children.split_whitespace().map(cpu_secs).sum()
}

/// A table of one item in DynamoDB Local, apart from the API's, for the probe.
async fn probe_table(endpoint: &str) -> (aws_sdk_dynamodb::Client, String) {
    use aws_sdk_dynamodb::types::{AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType};
    let ddb = aws_sdk_dynamodb::Client::new(&tools::admin::local_sdk_config(endpoint).await);
    let table = format!("soak-probe-{}", ulid::Ulid::generate());
    ddb.create_table()
        .table_name(&table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(AttributeDefinition::builder().attribute_name("pk").attribute_type(ScalarAttributeType::S).build().unwrap())
        .key_schema(KeySchemaElement::builder().attribute_name("pk").key_type(KeyType::Hash).build().unwrap())
        .send()
        .await
        .expect("the probe's table");
    ddb.put_item().table_name(&table).item("pk", AttributeValue::S("probe".into())).send().await.expect("the probe's item");
    (ddb, table)
}

/// Messages in these queues, visible and in flight (moto's SendMessage slows with a queue's
/// depth; a dead-letter queue must end empty).
async fn queue_depth(sqs: &aws_sdk_sqs::Client, queues: &[&String]) -> Result<u64, String> {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let mut total = 0;
    for url in queues {
        let out = sqs
            .get_queue_attributes()
            .queue_url(*url)
            .attribute_names(A::ApproximateNumberOfMessages)
            .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .map_err(|e| format!("queue attributes of {url}: {e}"))?;
        let attrs = out.attributes().cloned().unwrap_or_default();
        total += [A::ApproximateNumberOfMessages, A::ApproximateNumberOfMessagesNotVisible]
            .iter()
            .filter_map(|a| attrs.get(a).and_then(|v| v.parse::<u64>().ok()))
            .sum::<u64>();
    }
    Ok(total)
}

/// Which AWS calls changed between two minutes: the ten whose total time per minute grew most,
/// as `function service operation: calls, mean ms → calls, mean ms`.
fn calls_that_grew(early: &shared::metrics::CallTally, late: &shared::metrics::CallTally) -> String {
    let mut keys: Vec<_> = early.keys().chain(late.keys()).collect();
    keys.sort();
    keys.dedup();
    let total = |t: &shared::metrics::CallTally, k| t.get(k).map_or(0, |c| c.micros);
    keys.sort_by_key(|k| std::cmp::Reverse(total(late, *k) as i64 - total(early, *k) as i64));
    let show = |t: &shared::metrics::CallTally, k| {
        let c = t.get(k).copied().unwrap_or_default();
        let scanned = if c.scanned > 0 { format!(", {} items read", c.scanned) } else { String::new() };
        format!("{}, {:.1} ms{scanned}", c.calls, c.micros as f64 / 1000.0 / c.calls.max(1) as f64)
    };
    keys.iter().take(10).map(|k| format!("{} {} {}: {} → {}", k.0, k.1, k.2, show(early, k), show(late, k))).collect::<Vec<_>>().join("; ")
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::test]
#[ignore = "15 minutes: make soak"]
async fn a_quarter_hour_of_steady_load_stays_flat_and_loses_nothing() {
    let secs: u64 = std::env::var("SOAK_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(900);
    let h = harness();
    let base = h.generous_gateway().await;
    let (ws, key) = h.workspace("soak").await;
    let admin = Client::new(&base, &key);
    let network = e2e::receiver::Receiver::start().await;
    let setup = Arc::new(e2e::load::mixed_setup(&admin, &ws, &network.url).await);
    // The stack's dispatcher delivers every post's, contact's and booking's event to a webhook,
    // as in production (a queue nobody takes grows, and moto's SendMessage slows with its depth).
    let receiver = e2e::receiver::Receiver::start().await;
    let types = ["post.created", "contact.created", "booking.created"];
    let r = admin.post("/webhooks", &serde_json::json!({"url": receiver.url, "event_types": types})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let minutes = secs.div_ceil(60) as usize;
    let log = Arc::new(std::sync::Mutex::new(vec![Minute::default(); minutes]));
    let probe_table = probe_table(&h.dynamodb_endpoint).await;
    let started = Instant::now();
    let probe = {
        let (log, (ddb, table)) = (log.clone(), probe_table);
        tokio::spawn(async move {
            let key = aws_sdk_dynamodb::types::AttributeValue::S("probe".into());
            loop {
                let t0 = Instant::now();
                let ok = ddb.get_item().table_name(&table).key("pk", key.clone()).send().await.is_ok();
                let took = t0.elapsed().as_secs_f64() * 1000.0;
                let minute = (started.elapsed().as_secs() / 60) as usize;
                if let Some(slot) = log.lock().unwrap().get_mut(minute.min(minutes - 1)).filter(|_| ok) {
                    slot.probe_ms.push(took);
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };
    let rate: u64 = std::env::var("SOAK_RATE").ok().and_then(|v| v.parse().ok()).filter(|r| *r > 0).unwrap_or(RATE);
    let every = Duration::from_millis(1000 * WORKERS / rate);
    let tasks = (0..WORKERS).map(|w| {
        let (base, key, setup, log) = (base.clone(), key.clone(), setup.clone(), log.clone());
        tokio::spawn(async move {
            let http = reqwest::Client::builder().no_proxy().build().unwrap();
            let (mut accepted, mut refused): (Vec<(Op, String)>, Vec<String>) = (vec![], vec![]);
            let mut next = Instant::now() + every * w as u32 / WORKERS as u32;
            let mut i = w as usize;
            while started.elapsed() < Duration::from_secs(secs) {
                tokio::time::sleep_until(next.into()).await;
                next += every;
                let op = Op::WIDE[i % Op::WIDE.len()];
                i += 1;
                let m = op.write().then(|| marker("soak"));
                let a = call(&http, &base, &key, op, m.as_deref(), &setup).await;
                if (200..300).contains(&a.status) {
                    accepted.extend(m.map(|m| (op, m)));
                } else {
                    refused.push(format!("{:?} {} {} {}", a.op, a.status, a.code, a.message));
                }
                let minute = (started.elapsed().as_secs() / 60) as usize;
                let mut log = log.lock().unwrap();
                if let Some(slot) = log.get_mut(minute.min(minutes - 1)) {
                    slot.latencies_ms.push(a.took.as_millis() as u64);
                    slot.by_kind[kind(op)].push(a.took.as_millis() as u64);
                    slot.by_op[Op::WIDE.iter().position(|o| *o == op).unwrap_or(0)].push(a.took.as_millis() as u64);
                    slot.server_errors += usize::from(a.status >= 500);
                    slot.client_errors += usize::from((400..500).contains(&a.status));
                }
            }
            (accepted, refused)
        })
    });
    // Mail arrives every 2 s meanwhile, for the stack's inbound-mail worker.
    let mailbox = format!("support@{}", setup.from.split_once('@').expect("an address").1);
    let until = Instant::now() + Duration::from_secs(secs);
    let mail = tokio::spawn(e2e::load::inbound_feed(
        h.resources.inbound_mail_queue_url.clone(),
        mailbox,
        until,
        Duration::from_secs(2),
        "soak".into(),
    ));
    // Deliveries are counted by the write's marker as they come, and forgotten (the receiver
    // lives in the process whose memory is measured): a post's content, a contact's address
    // before the `@`, a booking's notes.
    let delivered = Arc::new(std::sync::Mutex::new(std::collections::HashMap::<String, usize>::new()));
    let count = {
        let (receiver, delivered) = (receiver.clone(), delivered.clone());
        move || {
            let got = receiver.take();
            let mut d = delivered.lock().unwrap();
            for g in got {
                *d.entry(e2e::load::event_key(&g)).or_default() += 1;
            }
        }
    };
    // What the network received, counted as it comes and forgotten, as the events are.
    let posted = Arc::new(std::sync::Mutex::new(std::collections::HashMap::<String, usize>::new()));
    let remote = {
        let (network, posted) = (network.clone(), posted.clone());
        move || {
            let mut p = posted.lock().unwrap();
            for (text, n) in e2e::load::posted(&network.take()) {
                *p.entry(text).or_default() += n;
            }
            p.clone()
        }
    };
    let q = &h.resources;
    let queues: Vec<String> = [
        &q.events_queue_url,
        &q.deliveries_queue_url,
        &q.emails_queue_url,
        &q.email_feedback_queue_url,
        &q.publish_queue_url,
        &q.contact_imports_queue_url,
        &q.inbound_mail_queue_url,
    ]
    .into_iter()
    .cloned()
    .collect();
    let sqs = h.sqs().await;
    shared::metrics::tally_calls();
    let sampler = {
        let (log, count, remote, sqs) = (log.clone(), count.clone(), remote.clone(), sqs.clone());
        tokio::spawn(async move {
            loop {
                count();
                remote();
                let minute = (started.elapsed().as_secs() / 60) as usize;
                let rss = tools::runtime_api::proc_status_kib("self", "VmRSS");
                let cpu = [cpu_secs("self"), emulator_cpu_secs(h.dynamodb_guard), emulator_cpu_secs(h.moto_guard)];
                // A sample that fails is left out; the dead-letter queues' count at the end is not.
                let depth = queue_depth(&sqs, &queues.iter().collect::<Vec<_>>()).await.unwrap_or(0);
                let calls = shared::metrics::take_call_tally();
                if let Some(slot) = log.lock().unwrap().get_mut(minute.min(minutes - 1)) {
                    slot.rss_kib = slot.rss_kib.max(rss);
                    slot.cpu = cpu;
                    slot.queue_depth = slot.queue_depth.max(depth);
                    for (k, c) in calls {
                        let e = slot.calls.entry(k).or_default();
                        e.calls += c.calls;
                        e.micros += c.micros;
                        e.scanned += c.scanned;
                    }
                }
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        })
    };
    let (mut accepted, mut refused) = (vec![], vec![]);
    for r in futures_util::future::join_all(tasks).await {
        let (a, r) = r.expect("load");
        accepted.extend(a);
        refused.extend(r);
    }
    let mail = mail.await.expect("the inbound feed");
    sampler.abort();
    probe.abort();
    let of = |op: Op| accepted.iter().filter(|(o, _)| *o == op).map(|(_, m)| m.clone()).collect::<Vec<String>>();
    let (subjects, posts) = (of(Op::SendEmail), of(Op::CreatePost));
    // Every post's, contact's and booking's event reached the webhook (at least once:
    // receivers dedupe by event id).
    let evented: Vec<String> = [Op::CreatePost, Op::CreateContact, Op::CreateBooking]
        .into_iter()
        .flat_map(|op| of(op).into_iter().filter_map(move |m| e2e::load::event_for(op, &m)))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    let delivered = loop {
        count();
        let d = delivered.lock().unwrap().clone();
        if evented.iter().all(|p| d.contains_key(p)) || Instant::now() > deadline {
            break d;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let undelivered = evented.iter().filter(|p| !delivered.contains_key(*p)).count();
    let copies: usize = evented.iter().map(|p| delivered.get(p).copied().unwrap_or(0).saturating_sub(1)).sum();
    // Each post, contact, booking, import row, publication and inbound message once.
    let posts_once = e2e::load::once_each(&e2e::load::all(&admin, "/posts").await, "content", &posts);
    let contacts_once = e2e::load::once_each(
        &e2e::load::all(&admin, "/contacts").await,
        "email",
        &of(Op::CreateContact).iter().map(|m| format!("{m}@example.org")).collect::<Vec<_>>(),
    );
    let bookings = e2e::load::once_each(&e2e::load::all(&admin, "/bookings").await, "notes", &of(Op::CreateBooking));
    let imports = e2e::load::imports(&admin, &of(Op::StartImport), 120).await;
    let publications = e2e::load::publications(&admin, &remote, &of(Op::PublishPost), 120).await;
    let inbound = e2e::load::conversations(&admin, &mail, 120).await;
    // Drained: every email sent, once.
    let deadline = Instant::now() + Duration::from_secs(120);
    let unsent = loop {
        let sent = h.ses_sent().await;
        let unsent: Vec<&String> = subjects.iter().filter(|s| !sent.iter().any(|m| m["subject"] == s.as_str())).collect();
        let twice = subjects.iter().filter(|s| sent.iter().filter(|m| m["subject"] == s.as_str()).count() > 1).count();
        assert_eq!(twice, 0, "emails sent twice");
        if unsent.is_empty() || Instant::now() > deadline {
            break unsent.len();
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let mut dlq = vec![];
    for (name, url) in [
        ("events", &q.events_dlq_url),
        ("deliveries", &q.deliveries_dlq_url),
        ("emails", &q.emails_dlq_url),
        ("email feedback", &q.email_feedback_dlq_url),
        ("publish", &q.publish_dlq_url),
        ("contact imports", &q.contact_imports_dlq_url),
        ("inbound mail", &q.inbound_mail_dlq_url),
        ("gdpr", &q.gdpr_dlq_url),
        ("scans", &q.scans_dlq_url),
    ] {
        dlq.push((name, queue_depth(&sqs, &[url]).await.expect("a dead-letter queue's depth")));
    }
    let log = log.lock().unwrap().clone();
    let mut rows = vec![];
    let mut p99s = vec![];
    let mut cpu_before = [0.0; 3];
    for (i, m) in log.iter().enumerate() {
        let mut l = m.latencies_ms.clone();
        l.sort_unstable();
        p99s.push(percentile(&l, 0.99));
        let p50 = |k: usize| {
            let mut v = m.by_kind[k].clone();
            v.sort_unstable();
            percentile(&v, 0.5)
        };
        let mut probe = m.probe_ms.clone();
        probe.sort_by(f64::total_cmp);
        let at = |p: f64| probe.get(((probe.len().max(1) - 1) as f64 * p).round() as usize).copied().unwrap_or(0.0);
        // CPU share of one core over the minute, per process.
        let share = |k: usize| ((m.cpu[k] - cpu_before[k]) / 60.0 * 100.0).max(0.0);
        rows.push(format!(
            "| {} | {:.1} | {} ms | {} ms | {} / {} / {} ms | {} | {} | {} MiB | {:.0} % / {:.0} % / {:.0} % | {:.1} / {:.1} ms | {} | {} |",
            i + 1,
            l.len() as f64 / 60.0,
            percentile(&l, 0.5),
            percentile(&l, 0.99),
            p50(0),
            p50(1),
            p50(2),
            m.server_errors,
            m.client_errors,
            m.rss_kib / 1024,
            share(0),
            share(1),
            share(2),
            at(0.5),
            at(0.99),
            m.calls.values().map(|c| c.calls).sum::<u64>(),
            m.queue_depth,
        ));
        if m.cpu[0] > 0.0 {
            cpu_before = m.cpu;
        }
    }
    let header = "| minute | requests/s | p50 | p99 | p50 reads / writes / sends | 5xx | 4xx | RSS (gateway, workers and harness, one process) | CPU: that process / DynamoDB Local / moto | DynamoDB Local alone: GetItem p50 / p99 | AWS calls | queued |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    let dlq_text = dlq.iter().map(|(n, d)| format!("{n} {d}")).collect::<Vec<_>>().join(", ");
    // Which ops slowed: p50 of each in the second minute and in the last.
    let p50_of = |m: &Minute, i: usize| {
        let mut v = m.by_op[i].clone();
        v.sort_unstable();
        percentile(&v, 0.5)
    };
    let (early, late) = (&log[1.min(log.len() - 1)], &log[log.len() - 1]);
    let by_op = Op::WIDE
        .iter()
        .enumerate()
        .map(|(i, op)| format!("{op:?} {} → {} ms", p50_of(early, i), p50_of(late, i)))
        .collect::<Vec<_>>()
        .join(", ");
    let once = |t: &Tally| format!("{} once, {} missing, {} twice", t.once, t.lost, t.twice);
    let summary = format!(
        "\n\n{} emails accepted, {} left unsent after the drain; {} posts, {} contacts and {} bookings, their webhook events {} undelivered, {} copies past the first; posts {}; contacts {}; bookings {}; imports (two rows each) {}; publications {}; inbound messages {}; dead-letter queues: {dlq_text}.",
        subjects.len(),
        unsent,
        posts.len(),
        of(Op::CreateContact).len(),
        of(Op::CreateBooking).len(),
        undelivered,
        copies,
        once(&posts_once),
        once(&contacts_once),
        once(&bookings),
        once(&imports),
        once(&publications),
        once(&inbound),
    );
    // What was refused, by kind (the load sends nothing a client should be refused).
    let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
    for r in &refused {
        *kinds.entry(r.clone()).or_default() += 1;
    }
    let refused_text = if kinds.is_empty() {
        "none".to_string()
    } else {
        kinds.iter().map(|(k, n)| format!("`{k}` ×{n}")).collect::<Vec<_>>().join(", ")
    };
    let grew = calls_that_grew(&early.calls, &late.calls);
    let table = format!(
        "{header}{}{summary} Refused: {refused_text}. p50 by op, minute 2 → last: {by_op}. AWS calls whose time grew most, minute 2 → last (calls, mean): {grew}.",
        rows.join("\n")
    );
    println!("{table}");
    if let Ok(doc) = std::env::var("SOAK_REPORT") {
        e2e::load::splice(&doc, "soak", &table);
    }
    let five = log.iter().map(|m| m.server_errors).sum::<usize>();
    assert_eq!(five, 0, "no 5xx under steady load");
    assert!(refused.is_empty(), "the load sends nothing a client should be refused: {refused_text}");
    assert_eq!(unsent, 0, "every email sent");
    assert_eq!(undelivered, 0, "every post's, contact's and booking's webhook event delivered");
    for (what, t) in [
        ("posts", posts_once),
        ("contacts", contacts_once),
        ("bookings", bookings),
        ("imports", imports),
        ("publications", publications),
        ("inbound mail", inbound),
    ] {
        assert_eq!((t.lost, t.twice), (0, 0), "{what}: each once");
        assert!(t.once > 0, "{what}: the load made some");
    }
    assert!(dlq.iter().all(|(_, d)| *d == 0), "dead-letter queues empty: {dlq_text}");
    if log.len() >= 3 {
        // The first minute warms caches and pools: the last is compared with the best of the
        // early steady minutes (2 to 5), so a slow start cannot hide a slow end.
        let first = p99s[1..log.len().min(5)].iter().copied().min().unwrap_or(1).max(1);
        let last = p99s[log.len() - 1];
        assert!(last as f64 <= first as f64 * 1.2 + 20.0, "p99 grew from {first} ms to {last} ms");
        let (rss_early, rss_late) = (log[1].rss_kib.max(1), log[log.len() - 1].rss_kib);
        assert!(rss_late as f64 <= rss_early as f64 * 1.2, "RSS grew from {rss_early} KiB to {rss_late} KiB");
    }
}
