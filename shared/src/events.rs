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
use serde::Serialize;

pub const OUTBOX_SHARDS: u32 = 8;
/// Outbox items expire after 7 days even if never acknowledged (they are also in the DLQ then).
const OUTBOX_TTL_SECS: i64 = 7 * 86_400;

#[derive(Debug, Clone, Serialize)]
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
        let shard = event_id.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32)) % OUTBOX_SHARDS;
        format!("OUTBOX#{shard}")
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

/// Send committed events to the queue. A failure is logged, not returned: the write has
/// happened and the outbox sweep will deliver the event later.
pub async fn publish(app: &App, events: &[Event]) {
    for ev in events {
        let res = app
            .sqs
            .send_message()
            .queue_url(&app.cfg.events_queue_url)
            .message_body(ev.body())
            .message_attributes(
                "event_type",
                aws_sdk_sqs::types::MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value(&ev.kind)
                    .build()
                    .expect("data type is set"),
            )
            .send()
            .await;
        match res {
            Ok(_) => tracing::info!(event_id = %ev.id, event_type = %ev.kind, "event queued"),
            Err(e) => {
                tracing::warn!(event_id = %ev.id, error = %aws_sdk_sqs::error::DisplayErrorContext(e), "event not queued; left in outbox for the sweep")
            }
        }
    }
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
}
