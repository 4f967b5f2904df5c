//! What an event is: its type (from the registered list), its body, and the outbox item that
//! carries it. How events leave (the transaction that writes them, the queue, the sweep) is
//! `crate::outbox`.

use crate::store::{Item, n, s};
use serde::{Deserialize, Serialize};

pub const OUTBOX_SHARDS: u32 = 8;

/// The outbox shard of an event or job id: spreads the outbox's writes over its partitions.
pub(crate) fn outbox_shard(id: &str) -> u32 {
    id.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32)) % OUTBOX_SHARDS
}

pub(crate) fn outbox_shard_pk(shard: u32) -> String {
    crate::keys::OUTBOX_EVENT.pk(&[&shard.to_string()])
}

/// Every event type the platform emits. A new area adds its types here; webhook subscriptions
/// are validated against this list (exact types, or `<noun>.*` wildcards).
pub const EVENT_TYPES: &[&str] = &[
    "api_key.created",
    "api_key.revoked",
    "approval.approved",
    "approval.denied",
    "approval.expired",
    "approval.requested",
    "booking.cancelled",
    "booking.completed",
    "booking.confirmed",
    "booking.created",
    "booking.no_show",
    "booking.rescheduled",
    "booking.resource.created",
    "booking.resource.deleted",
    "booking.resource.updated",
    "booking.service.created",
    "booking.service.deleted",
    "booking.service.updated",
    "capability.confirmed",
    "capability.used",
    "channel.connected",
    "channel.deleted",
    "channel.disconnected",
    "channel.updated",
    "contact.created",
    "contact.deleted",
    "contact.import.completed",
    "contact.note.added",
    "contact.unsubscribed",
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
    "email.domain.created",
    "email.domain.deleted",
    "email.domain.failed",
    "email.domain.verified",
    "email.failed",
    "email.queued",
    "email.scheduled",
    "email.sent",
    "email.suppressed",
    "email.suppression.removed",
    "gdpr.consent.granted",
    "gdpr.consent.withdrawn",
    "gdpr.erasure.completed",
    "gdpr.erasure.failed",
    "gdpr.export.completed",
    "gdpr.export.failed",
    "helpdesk.conversation.assigned",
    "helpdesk.conversation.closed",
    "helpdesk.conversation.created",
    "helpdesk.conversation.reopened",
    "helpdesk.conversation.updated",
    "helpdesk.message.delivery_updated",
    "helpdesk.message.received",
    "helpdesk.message.sent",
    "helpdesk.note.added",
    "portal.session.created",
    "post.created",
    "post.deleted",
    "post.failed",
    "post.partially_failed",
    "post.published",
    "post.publishing",
    "post.scheduled",
    "post.unscheduled",
    "post.updated",
    "post.variant.failed",
    "post.variant.published",
    "scan.completed",
    "scan.failed",
    "webhook.endpoint.created",
    "webhook.endpoint.deleted",
    "webhook.endpoint.disabled",
    "webhook.endpoint.secret_rotated",
    "webhook.endpoint.updated",
    "webhook.replay.completed",
    "webhook.test",
    "workspace.created",
    "workspace.member.added",
    "workspace.member.updated",
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
pub(crate) const OUTBOX_TTL_SECS: i64 = 7 * 86_400;

crate::prefixed_id!(EventId, "evt", "event");

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    pub id: EventId,
    #[serde(rename = "type")]
    pub kind: String,
    pub created_at: crate::ids::Timestamp,
    pub workspace_id: String,
    pub data: serde_json::Value,
}

impl Event {
    pub fn new(workspace_id: &str, kind: &str, data: &impl Serialize) -> Self {
        debug_assert!(EVENT_TYPES.contains(&kind), "event type {kind} is not registered in shared::events::EVENT_TYPES");
        Self {
            id: EventId::generate(),
            kind: kind.into(),
            created_at: crate::ids::Timestamp::now(),
            workspace_id: workspace_id.into(),
            data: serde_json::to_value(data).unwrap_or(serde_json::Value::Null),
        }
    }

    /// The exact bytes that are queued, signed and delivered.
    pub fn body(&self) -> String {
        serde_json::to_string(self).expect("events serialize")
    }

    pub fn outbox_pk(event_id: &str) -> String {
        outbox_shard_pk(outbox_shard(event_id))
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
