//! Events and the transactional outbox.
//!
//! A state change and its event are written in one DynamoDB transaction: the event lands as an
//! outbox item (`pk = OUTBOX#<shard>`, `sk = <event id>`). After the commit the event is sent
//! to the events queue. The consumer (the webhook dispatcher) deletes the outbox item once it
//! has the event, and a scheduled sweep re-sends outbox items older than a few minutes, so an
//! event survives SQS being unreachable during the write. Keeping the acknowledgement off the
//! request path saves one DynamoDB round trip per write.

use crate::app::App;
use crate::store::{Item, n, s};
use serde::{Deserialize, Serialize};

pub const OUTBOX_SHARDS: u32 = 8;

fn outbox_shard_pk(shard: u32) -> String {
    crate::keys::OUTBOX_EVENT.pk(&[&shard.to_string()])
}

/// Every event type the platform emits. A new area adds its types here; webhook subscriptions
/// are validated against this list (exact types, or `<noun>.*` wildcards).
pub const EVENT_TYPES: &[&str] = &[
    "api_key.created",
    "api_key.revoked",
    "contact.created",
    "contact.deleted",
    "contact.import.completed",
    "contact.note.added",
    "contact.updated",
    "deal.created",
    "deal.deleted",
    "deal.lost",
    "deal.reopened",
    "deal.updated",
    "deal.won",
    "email.bounced",
    "email.cancelled",
    "email.complained",
    "email.delivered",
    "email.failed",
    "email.queued",
    "email.scheduled",
    "email.sent",
    "email.suppressed",
    "post.created",
    "post.deleted",
    "post.scheduled",
    "post.unscheduled",
    "post.updated",
    "webhook.endpoint.created",
    "webhook.endpoint.deleted",
    "webhook.endpoint.disabled",
    "webhook.endpoint.secret_rotated",
    "webhook.endpoint.updated",
    "webhook.test",
    "workspace.created",
    "workspace.member.added",
    "workspace.updated",
];

/// A subscription pattern: a known type, or `prefix.*` covering at least one known type.
pub fn is_known_pattern(p: &str) -> bool {
    match p.strip_suffix(".*") {
        Some(prefix) => !prefix.is_empty() && EVENT_TYPES.iter().any(|t| t.starts_with(prefix) && t[prefix.len()..].starts_with('.')),
        None => EVENT_TYPES.contains(&p),
    }
}

/// Does a subscription (empty = every type) cover this event type?
pub fn subscribed(patterns: &[String], kind: &str) -> bool {
    patterns.is_empty()
        || patterns.iter().any(|p| match p.strip_suffix(".*") {
            Some(prefix) => kind.starts_with(prefix) && kind[prefix.len()..].starts_with('.'),
            None => p == kind,
        })
}
/// Outbox items expire after 7 days even if never acknowledged (they are also in the DLQ then).
const OUTBOX_TTL_SECS: i64 = 7 * 86_400;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub created_at: String,
    pub workspace_id: String,
    pub data: serde_json::Value,
}

impl Event {
    pub fn new(workspace_id: &str, kind: &str, data: &impl Serialize) -> Self {
        debug_assert!(EVENT_TYPES.contains(&kind), "event type {kind} is not registered in shared::events::EVENT_TYPES");
        Self {
            id: crate::ids::new_id("evt"),
            kind: kind.into(),
            created_at: crate::ids::now_rfc3339(),
            workspace_id: workspace_id.into(),
            data: serde_json::to_value(data).unwrap_or(serde_json::Value::Null),
        }
    }

    /// The exact bytes that are queued, signed and delivered.
    pub fn body(&self) -> String {
        serde_json::to_string(self).expect("events serialize")
    }

    pub fn outbox_pk(event_id: &str) -> String {
        outbox_shard_pk(event_id.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32)) % OUTBOX_SHARDS)
    }

    pub fn outbox_item(&self) -> Item {
        Item::from([
            ("pk".into(), s(Self::outbox_pk(&self.id))),
            ("sk".into(), s(&self.id)),
            ("event_type".into(), s(&self.kind)),
            ("workspace_id".into(), s(&self.workspace_id)),
            ("body".into(), s(self.body())),
            ("expires_at".into(), n(chrono::Utc::now().timestamp() + OUTBOX_TTL_SECS)),
        ])
    }
}

/// Several events in one queue message (bulk writers such as imports): one SQS message per
/// ~200 KB instead of one per event. The dispatcher fans each one out as if it came alone.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventBatch {
    pub events: Vec<Event>,
}

/// SQS allows 256 KiB per message; leave room for attributes and escaping.
const BATCH_MESSAGE_BYTES: usize = 200 * 1024;

/// Send committed events to the queue: one message for one event, packed batches for many. A
/// failure is logged, not returned: the write has happened and the outbox sweep will deliver
/// the event later.
pub async fn publish(app: &App, events: &[Event]) {
    let mut bodies: Vec<(String, usize)> = vec![];
    if let [ev] = events {
        bodies.push((ev.body(), 1));
    } else {
        let mut current: Vec<&Event> = vec![];
        let mut size = 0;
        for ev in events {
            let len = ev.body().len() + 1;
            if !current.is_empty() && size + len > BATCH_MESSAGE_BYTES {
                bodies.push((batch_body(&current), current.len()));
                current.clear();
                size = 0;
            }
            size += len;
            current.push(ev);
        }
        if !current.is_empty() {
            bodies.push((batch_body(&current), current.len()));
        }
    }
    for (body, count) in bodies {
        match app.sqs.send_message().queue_url(&app.cfg.events_queue_url).message_body(body).send().await {
            Ok(_) => tracing::info!(count, first_event = %events.first().map(|e| e.id.as_str()).unwrap_or_default(), "events queued"),
            Err(e) => {
                tracing::warn!(count, error = %aws_sdk_sqs::error::DisplayErrorContext(e), "events not queued; left in outbox for the sweep")
            }
        }
    }
}

fn batch_body(events: &[&Event]) -> String {
    #[derive(Serialize)]
    struct Batch<'a> {
        events: &'a [&'a Event],
    }
    serde_json::to_string(&Batch { events }).expect("events serialize")
}

/// The sweep re-sends one event at most this often, however long its consumer is down, so an
/// outage does not pile up copies in the queue.
const RESEND_EVERY_SECS: i64 = 300;

/// Re-send outbox items older than `min_age_secs` (their SendMessage failed, or their consumer
/// has not acknowledged them yet). Event ids are ULIDs, so "older than" is a key range: each
/// shard costs one Query of at most `per_shard` items, plus one small write per re-sent item
/// (`resent_at`). The consumer dedupes by event id.
pub async fn sweep(app: &App, min_age_secs: i64, per_shard: i32) -> Result<usize, crate::error::ApiError> {
    let now = chrono::Utc::now().timestamp();
    let cutoff = (chrono::Utc::now().timestamp_millis() - min_age_secs * 1000).max(0) as u64;
    let bound = format!("evt_{}", ulid::Ulid::from_parts(cutoff, 0));
    let queries = (0..OUTBOX_SHARDS).map(|shard| {
        app.ddb
            .query()
            .table_name(&app.cfg.table)
            .key_condition_expression("pk = :pk AND sk < :bound")
            .filter_expression("attribute_not_exists(resent_at) OR resent_at < :again")
            .expression_attribute_values(":pk", s(outbox_shard_pk(shard)))
            .expression_attribute_values(":bound", s(&bound))
            .expression_attribute_values(":again", n(now - RESEND_EVERY_SECS))
            .limit(per_shard)
            .send()
    });
    let mut due: Vec<(String, String)> = vec![];
    for out in futures_util::future::join_all(queries).await {
        let out = out.map_err(crate::store::ddb_error)?;
        due.extend(
            out.items()
                .iter()
                .filter_map(|i| Some((crate::store::get_str(i, "sk")?.to_string(), crate::store::get_str(i, "body")?.to_string()))),
        );
    }
    let mut sent = 0;
    for chunk in due.chunks(10) {
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(i, (_, b))| {
                aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(b)
                    .build()
                    .expect("id and body set")
            })
            .collect();
        let out =
            app.sqs.send_message_batch().queue_url(&app.cfg.events_queue_url).set_entries(Some(entries)).send().await.map_err(|e| {
                crate::error::ApiError::unavailable(format!("events queue: {}", aws_sdk_sqs::error::DisplayErrorContext(e)))
            })?;
        sent += out.successful().len();
        // Note the re-send; an item the consumer deleted meanwhile stays deleted.
        let marks = out.successful().iter().filter_map(|ok| chunk.get(ok.id().parse::<usize>().ok()?)).map(|(id, _)| {
            app.ddb
                .update_item()
                .table_name(&app.cfg.table)
                .key("pk", s(Event::outbox_pk(id)))
                .key("sk", s(id))
                .update_expression("SET resent_at = :now")
                .condition_expression("attribute_exists(pk)")
                .expression_attribute_values(":now", n(now))
                .send()
        });
        futures_util::future::join_all(marks).await;
    }
    if sent > 0 {
        tracing::info!(resent = sent, "outbox sweep re-sent events");
    }
    Ok(sent)
}

/// Acknowledge many events at once (BatchWriteItem deletes, 25 per call).
pub async fn ack_many(app: &App, event_ids: &[&str]) -> Result<(), crate::error::ApiError> {
    use aws_sdk_dynamodb::types::{DeleteRequest, WriteRequest};
    for chunk in event_ids.chunks(25) {
        let reqs: Vec<WriteRequest> = chunk
            .iter()
            .map(|id| {
                let d = DeleteRequest::builder().key("pk", s(Event::outbox_pk(id))).key("sk", s(*id)).build().expect("key set");
                WriteRequest::builder().delete_request(d).build()
            })
            .collect();
        let out = app.ddb.batch_write_item().request_items(&app.cfg.table, reqs).send().await.map_err(crate::store::ddb_error)?;
        // Unprocessed deletes are harmless: the sweep re-sends those events and they are acked then.
        if out.unprocessed_items().is_some_and(|u| !u.is_empty()) {
            tracing::debug!("some outbox acks were not processed");
        }
    }
    Ok(())
}

/// The consumer's acknowledgement: the event reached the queue and was taken from it.
pub async fn ack(app: &App, event_id: &str) -> Result<(), crate::error::ApiError> {
    app.ddb
        .delete_item()
        .table_name(&app.cfg.table)
        .key("pk", s(Event::outbox_pk(event_id)))
        .key("sk", s(event_id))
        .send()
        .await
        .map_err(crate::store::ddb_error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_body_has_the_contract_fields() {
        let ev = Event::new("ws_1", "post.created", &serde_json::json!({"id": "post_1"}));
        let v: serde_json::Value = serde_json::from_str(&ev.body()).unwrap();
        assert_eq!(v["type"], "post.created");
        assert_eq!(v["workspace_id"], "ws_1");
        assert!(v["id"].as_str().unwrap().starts_with("evt_"));
        assert_eq!(v["data"]["id"], "post_1");
        let item = ev.outbox_item();
        assert!(crate::store::get_str(&item, "pk").unwrap().starts_with("OUTBOX#"));
        assert_eq!(Event::outbox_pk(&ev.id), Event::outbox_pk(&ev.id));
    }

    #[test]
    fn subscription_patterns() {
        assert!(is_known_pattern("post.created") && is_known_pattern("post.*") && is_known_pattern("webhook.endpoint.*"));
        assert!(!is_known_pattern("post.exploded") && !is_known_pattern("*") && !is_known_pattern(".*") && !is_known_pattern("pos.*"));
        assert!(subscribed(&[], "post.created"));
        let p = vec!["post.*".to_string(), "workspace.updated".to_string()];
        assert!(subscribed(&p, "post.deleted") && subscribed(&p, "workspace.updated"));
        assert!(!subscribed(&p, "workspace.created") && !subscribed(&["webhook.*".into()], "webhooks.x"));
        let mut sorted = EVENT_TYPES.to_vec();
        sorted.sort();
        assert_eq!(sorted, EVENT_TYPES, "kept sorted for readers");
    }
}
