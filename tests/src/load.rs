//! A steady mixed load on the API, as the fault matrix and the soak send it (`Op::WIDE`), each
//! write with a unique marker as its `Idempotency-Key` (and its content, address, notes or
//! subject), so its effects can be counted afterwards (`Tally`: once, missing, twice). Every
//! answer is recorded, never asserted here.

use crate::Client;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Op {
    ListPosts,
    CreatePost,
    ListContacts,
    CreateContact,
    SendEmail,
    /// A booking of its own 30-minute slot (the marker's), on a resource open around the clock.
    CreateBooking,
    /// An import of two rows (`<marker>-0@…`, `<marker>-1@…`): a job through the outbox.
    StartImport,
    /// A draft (key `<marker>-draft`) then its publication (key `<marker>`) to the publish
    /// channel: the publisher posts it to the channel's network.
    PublishPost,
}

impl Op {
    /// The mix of the fault matrix and the soak: reads, posts, contacts, emails, bookings,
    /// imports and publications. As many clients as ops start one at each (`load`), so every
    /// kind is sent at once.
    pub const WIDE: [Op; 8] = [
        Op::PublishPost,
        Op::ListPosts,
        Op::StartImport,
        Op::CreatePost,
        Op::CreateBooking,
        Op::ListContacts,
        Op::SendEmail,
        Op::CreateContact,
    ];
    pub fn write(self) -> bool {
        matches!(self, Op::CreatePost | Op::CreateContact | Op::SendEmail | Op::CreateBooking | Op::StartImport | Op::PublishPost)
    }
}

/// One answer the load got.
#[derive(Clone, Debug)]
pub struct Answer {
    pub op: Op,
    pub status: u16,
    pub code: String,
    /// The error's message, if any.
    pub message: String,
    pub in_envelope: bool,
    pub retry_after: bool,
    pub took: Duration,
    /// A write's unique marker (its idempotency key, content, email or subject).
    pub marker: Option<String>,
}

#[derive(Default)]
pub struct Setup {
    pub channel: String,
    pub from: String,
    /// A booking service (for `CreateBooking`).
    pub service: String,
    /// A channel whose network takes the publications (for `PublishPost`).
    pub publish_channel: String,
    /// Each booking marker's slot, so a retry asks for the same one.
    slots: std::sync::Mutex<std::collections::HashMap<String, i64>>,
    day0: i64,
}

impl Setup {
    pub fn new(channel: String, from: String) -> Self {
        Self { channel, from, ..Default::default() }
    }

    /// With a bookable service: the first slot starts two days from now, at midnight UTC.
    pub fn with_service(self, service: String) -> Self {
        let day0 = (chrono::Utc::now().timestamp() / 86_400 + 2) * 86_400;
        Self { service, day0, ..self }
    }

    /// With a channel that publications go to (`PublishPost`).
    pub fn with_publish_channel(self, publish_channel: String) -> Self {
        Self { publish_channel, ..self }
    }

    fn slot(&self, marker: &str) -> String {
        let mut slots = self.slots.lock().expect("slots");
        let next = slots.len() as i64;
        let i = *slots.entry(marker.to_string()).or_insert(next);
        shared::ids::format_time(chrono::DateTime::from_timestamp(self.day0 + i * 1800, 0).expect("a time"))
    }
}

pub fn body(op: Op, marker: &str, s: &Setup) -> Value {
    match op {
        Op::CreatePost => json!({"content": marker, "channel_ids": [s.channel]}),
        Op::CreateContact => json!({"email": format!("{marker}@example.org")}),
        Op::SendEmail => json!({"from": s.from, "to": ["chaos@example.org"], "subject": marker, "text": "once"}),
        Op::CreateBooking => {
            json!({"service_id": s.service, "start": s.slot(marker), "notes": marker, "contact": {"email": format!("{marker}@bookings.example.org")}})
        }
        Op::StartImport => json!({"rows": [{"email": format!("{marker}-0@example.org")}, {"email": format!("{marker}-1@example.org")}]}),
        Op::PublishPost => json!({"content": marker, "channel_ids": [s.publish_channel]}),
        _ => Value::Null,
    }
}

pub fn path(op: Op) -> &'static str {
    match op {
        Op::ListPosts => "/posts?limit=5",
        Op::CreatePost => "/posts",
        Op::ListContacts => "/contacts?limit=5",
        Op::CreateContact => "/contacts",
        Op::SendEmail => "/emails",
        Op::CreateBooking => "/bookings",
        Op::StartImport => "/contacts/imports",
        Op::PublishPost => "/posts",
    }
}

pub async fn call(http: &reqwest::Client, base: &str, key: &str, op: Op, marker: Option<&str>, s: &Setup) -> Answer {
    let started = Instant::now();
    let url = format!("{base}{}", path(op));
    let body = op.write().then(|| body(op, marker.expect("a write's marker"), s));
    if op == Op::PublishPost {
        let m = marker.expect("a write's marker");
        let (draft, json) = request(http, &url, key, body.as_ref(), Some(&format!("{m}-draft")), op, marker, started).await;
        let Some(id) = json["data"]["id"].as_str().filter(|_| draft.status == 201) else { return draft };
        let url = format!("{base}/posts/{id}/publish");
        // Each request is timed on its own; the answer keeps the slower.
        let publish = request(http, &url, key, Some(&json!({})), marker, op, marker, Instant::now()).await.0;
        return Answer { took: publish.took.max(draft.took), ..publish };
    }
    request(http, &url, key, body.as_ref(), marker, op, marker, started).await.0
}

/// One request (a POST with `body`, else a GET) and its answer, timed from `started`.
#[allow(clippy::too_many_arguments)]
async fn request(
    http: &reqwest::Client,
    url: &str,
    key: &str,
    body: Option<&Value>,
    idempotency_key: Option<&str>,
    op: Op,
    marker: Option<&str>,
    started: Instant,
) -> (Answer, Value) {
    let mut r = match body {
        Some(b) => http.post(url).json(b),
        None => http.get(url),
    };
    r = r.header("authorization", format!("Bearer {key}"));
    if let Some(k) = idempotency_key {
        r = r.header("idempotency-key", k);
    }
    let resp = tokio::time::timeout(Duration::from_secs(60), r.send()).await.expect("an answer within 60 s").expect("an HTTP answer");
    let status = resp.status().as_u16();
    let rid = resp.headers().get("request-id").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let retry_after = resp.headers().get("retry-after").is_some();
    let json: Value = resp.json().await.unwrap_or(Value::Null);
    let in_envelope = !rid.is_empty()
        && (status < 400
            || (json["error"]["code"].is_string() && json["error"]["message"].is_string() && json["error"]["request_id"] == rid.as_str()));
    let code = json["error"]["code"].as_str().unwrap_or_default().to_string();
    let message = json["error"].get("details").map_or(String::new(), |d| format!("{} {d}", json["error"]["message"]));
    let answer = Answer { op, status, code, message, in_envelope, retry_after, took: started.elapsed(), marker: marker.map(String::from) };
    (answer, json)
}

/// A write's unique marker, short enough for an email's local part.
pub fn marker(tag: &str) -> String {
    format!("{tag}{}", ulid::Ulid::generate().to_string().to_lowercase())
}

/// Mixed load from `workers` tasks until `stop`.
pub async fn load(base: &str, key: &str, s: Arc<Setup>, mix: &'static [Op], workers: usize, until: Instant, tag: &str) -> Vec<Answer> {
    let http = reqwest::Client::builder().no_proxy().pool_max_idle_per_host(0).build().unwrap();
    let tasks = (0..workers).map(|w| {
        let (http, base, key, s, tag) = (http.clone(), base.to_string(), key.to_string(), s.clone(), tag.to_string());
        tokio::spawn(async move {
            let mut out = vec![];
            let mut i = w * (mix.len() / workers).max(1);
            while Instant::now() < until {
                let op = mix[i % mix.len()];
                let marker = op.write().then(|| marker(&tag));
                out.push(call(&http, &base, &key, op, marker.as_deref(), &s).await);
                i += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            out
        })
    });
    futures_util::future::join_all(tasks).await.into_iter().flat_map(|r| r.expect("load task")).collect()
}

/// Every item of a list (newest pages first), through `c`.
pub async fn all(c: &Client, path: &str) -> Vec<Value> {
    let mut out = vec![];
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            Some(cur) => format!("{path}?limit=100&cursor={cur}"),
            None => format!("{path}?limit=100"),
        };
        let r = c.get(&url).await;
        assert_eq!(r.status, 200, "{}", r.json);
        out.extend(r.json["data"].as_array().cloned().unwrap_or_default());
        match r.json["next_cursor"].as_str() {
            Some(n) => cursor = Some(n.to_string()),
            None => return out,
        }
    }
}

/// Replace what stands between the document's `<!-- {section} -->` and `<!-- /{section} -->`
/// lines with `text`, after a line saying when and at which commit it was measured.
pub fn splice(doc: &str, section: &str, text: &str) {
    let old = std::fs::read_to_string(doc).expect("the document");
    let (open, close) = (format!("<!-- {section} -->\n"), format!("<!-- /{section} -->"));
    let (head, rest) = old.split_once(&open).unwrap_or_else(|| panic!("{doc} has no {open}"));
    let (_, tail) = rest.split_once(&close).unwrap_or_else(|| panic!("{doc} has no {close}"));
    let when = format!("Measured {} at `{}`.\n\n", chrono::Utc::now().format("%Y-%m-%d"), git_head());
    std::fs::write(doc, format!("{head}{open}{when}{text}\n{close}{tail}")).expect("write the document");
}

fn git_head() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// What the wide mix needs in a workspace: a channel, a sending domain, a bookable service
/// open around the clock, and a channel whose network is `network` (a receiver of the posts
/// published to it).
pub async fn mixed_setup(admin: &Client, ws: &str, network: &str) -> Setup {
    let day = json!([{"start": "00:00", "end": "24:00"}]);
    let hours = json!({"mon": day, "tue": day, "wed": day, "thu": day, "fri": day, "sat": day, "sun": day});
    let res = crate::created(admin, "/bookings/resources", json!({"name": "Room", "timezone": "UTC", "opening_hours": hours}), 201).await;
    let svc =
        crate::created(admin, "/bookings/services", json!({"name": "Talk", "duration_minutes": 30, "resource_ids": [res["id"]]}), 201)
            .await;
    let published =
        crate::created(admin, "/channels", json!({"type": "webhook", "name": "load network", "credentials": {"url": network}}), 201).await;
    Setup::new(crate::channel(admin, "load").await, format!("load@{}", crate::verified_domain(admin, ws).await))
        .with_service(svc["id"].as_str().unwrap().to_string())
        .with_publish_channel(published["id"].as_str().unwrap().to_string())
}

/// Mail arriving for `mailbox` until `until`, one message every `every`, as SES delivers it
/// (the message stored in S3, its notification queued on `queue`): the subjects sent.
pub async fn inbound_feed(queue: String, mailbox: String, until: Instant, every: Duration, tag: String) -> Vec<String> {
    let h = crate::harness();
    let app = h.app().await;
    let mut subjects = vec![];
    while Instant::now() < until {
        let subject = marker(&format!("{tag}mail"));
        let raw = format!(
            "From: Reader <reader@example.org>\r\nTo: {mailbox}\r\nSubject: {subject}\r\nMessage-ID: <{subject}@example.org>\r\n\r\nHello\r\n"
        );
        let body =
            tools::admin::store_inbound(app.s3(), &h.resources.mail_bucket, raw.as_bytes(), std::slice::from_ref(&mailbox), "PASS", "PASS")
                .await
                .expect("stored");
        app.sqs().send_message().queue_url(&queue).message_body(body).send().await.expect("queued");
        subjects.push(subject);
        tokio::time::sleep(every).await;
    }
    subjects
}

/// How the effects of some writes ended: once, not (yet) at all, or more than once.
#[derive(Default, Debug, Clone, Copy, PartialEq)]
pub struct Tally {
    pub once: usize,
    pub lost: usize,
    pub twice: usize,
}

/// Read with `read` every 500 ms until `judge` finds every item's effect done (`Some(twice)`),
/// and read once more 2 s later (a late copy shows), or until `secs` pass; then count each
/// item: once, twice, or lost (not done).
pub async fn settle<T, F: std::future::Future<Output = T>>(
    items: &[String],
    secs: u64,
    mut read: impl FnMut() -> F,
    judge: impl Fn(&T, &str) -> Option<bool>,
) -> Tally {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut quiet = false;
    loop {
        let state = read().await;
        let done = items.iter().all(|i| judge(&state, i).is_some());
        if (done && quiet) || Instant::now() > deadline {
            let mut t = Tally::default();
            for i in items {
                match judge(&state, i) {
                    Some(false) => t.once += 1,
                    Some(true) => t.twice += 1,
                    None => t.lost += 1,
                }
            }
            return t;
        }
        quiet = done;
        tokio::time::sleep(Duration::from_millis(if done { 2000 } else { 500 })).await;
    }
}

/// How many items of `list` have `field` equal to each value.
fn counts(list: &[Value], field: &str) -> std::collections::HashMap<String, usize> {
    let mut by = std::collections::HashMap::new();
    for v in list {
        *by.entry(v[field].as_str().unwrap_or_default().to_string()).or_insert(0) += 1;
    }
    by
}

/// Imports (`Op::StartImport`): each marker's two rows one contact each.
pub async fn imports(admin: &Client, markers: &[String], secs: u64) -> Tally {
    settle(
        markers,
        secs,
        || async { counts(&all(admin, "/contacts").await, "email") },
        |by, m| {
            let rows: Vec<usize> = (0..2).map(|i| by.get(&format!("{m}-{i}@example.org")).copied().unwrap_or(0)).collect();
            if rows.iter().any(|r| *r > 1) { Some(true) } else { (rows == [1, 1]).then_some(false) }
        },
    )
    .await
}

/// How many times a webhook channel's network received each text (the body's `text`).
pub fn posted(got: &[crate::receiver::Received]) -> std::collections::HashMap<String, usize> {
    let mut by = std::collections::HashMap::new();
    for r in got {
        *by.entry(r.json()["text"].as_str().unwrap_or_default().to_string()).or_insert(0) += 1;
    }
    by
}

/// Publications (`Op::PublishPost`): each marker's post once, `published`, and posted to the
/// network once (`remote`: what the network received so far, by text, as [`posted`] counts).
pub async fn publications(
    admin: &Client,
    remote: impl Fn() -> std::collections::HashMap<String, usize>,
    markers: &[String],
    secs: u64,
) -> Tally {
    let read = || async {
        let posts = all(admin, "/posts").await;
        let published: std::collections::HashMap<String, bool> =
            posts.iter().map(|p| (p["content"].as_str().unwrap_or_default().to_string(), p["status"] == "published")).collect();
        (counts(&posts, "content"), published, remote())
    };
    settle(markers, secs, read, |(drafts, published, remote), m| {
        let (d, r) = (drafts.get(m).copied().unwrap_or(0), remote.get(m).copied().unwrap_or(0));
        if d > 1 || r > 1 { Some(true) } else { (d == 1 && published.get(m) == Some(&true) && r == 1).then_some(false) }
    })
    .await
}

/// Inbound mail: each subject one conversation with one message.
pub async fn conversations(admin: &Client, subjects: &[String], secs: u64) -> Tally {
    settle(
        subjects,
        secs,
        || all(admin, "/helpdesk/conversations"),
        |convs, s| {
            let mine: Vec<&Value> = convs.iter().filter(|c| c["subject"] == s).collect();
            let messages: u64 = mine.iter().map(|c| c["message_count"].as_u64().unwrap_or(0)).sum();
            match (mine.len(), messages) {
                (1, 1) => Some(false),
                (c, m) if c > 1 || m > 1 => Some(true),
                _ => None,
            }
        },
    )
    .await
}

/// Each marker's item in `list` (by `field`): once, missing, or more than once.
pub fn once_each(list: &[Value], field: &str, markers: &[String]) -> Tally {
    let by = counts(list, field);
    let mut t = Tally::default();
    for m in markers {
        match by.get(m).copied().unwrap_or(0) {
            0 => t.lost += 1,
            1 => t.once += 1,
            _ => t.twice += 1,
        }
    }
    t
}

/// The event a write of the mix causes, named as [`event_key`] names a delivery:
/// `"<type> <marker>"`.
pub fn event_for(op: Op, marker: &str) -> Option<String> {
    let ty = match op {
        Op::CreatePost => "post.created",
        Op::CreateContact => "contact.created",
        Op::CreateBooking => "booking.created",
        _ => return None,
    };
    Some(format!("{ty} {marker}"))
}

/// A delivered event as `"<type> <marker>"`: the marker a post carries as its content, a
/// contact before the `@` of its address, a booking as its notes. A booking's new contact
/// (`<marker>@bookings…`) is `contact.created <booking's marker>`, which no `CreateContact`
/// expects.
pub fn event_key(r: &crate::receiver::Received) -> String {
    let (ty, json) = (r.event_type(), r.json());
    let data = &json["data"];
    let m = match ty.as_str() {
        "post.created" => data["content"].as_str(),
        "contact.created" => data["email"].as_str().and_then(|e| e.split_once('@')).map(|(m, _)| m),
        "booking.created" => data["notes"].as_str(),
        _ => None,
    };
    format!("{ty} {}", m.unwrap_or_default())
}
