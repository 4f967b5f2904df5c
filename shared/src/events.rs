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
    crate::keys::OUTBOX_EVENT.pk(&shard.to_string())
}

/// Declares [`EventType`] and [`EVENT_TYPES`] from one list.
macro_rules! event_types {
    ($($variant:ident = $name:literal,)*) => {
        /// Every event type the platform emits: an operation names one as a variant, so a
        /// typo does not compile. A new area adds its types here; webhook subscriptions are
        /// validated against this list (exact types, or `<noun>.*` wildcards), and the
        /// contract's event catalog is generated from it.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum EventType {
            $($variant,)*
        }

        impl EventType {
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(EventType::$variant => $name,)*
                }
            }
        }

        /// The types' names, in order.
        pub const EVENT_TYPES: &[&str] = &[$($name,)*];
    };
}

event_types! {
    ApiKeyCreated = "api_key.created",
    ApiKeyRevoked = "api_key.revoked",
    ApprovalApproved = "approval.approved",
    ApprovalDenied = "approval.denied",
    ApprovalExpired = "approval.expired",
    ApprovalRequested = "approval.requested",
    ApprovalStale = "approval.stale",
    BookingCancelled = "booking.cancelled",
    BookingCompleted = "booking.completed",
    BookingConfirmed = "booking.confirmed",
    BookingCreated = "booking.created",
    BookingNoShow = "booking.no_show",
    BookingRescheduled = "booking.rescheduled",
    BookingResourceCreated = "booking.resource.created",
    BookingResourceDeleted = "booking.resource.deleted",
    BookingResourceUpdated = "booking.resource.updated",
    BookingServiceCreated = "booking.service.created",
    BookingServiceDeleted = "booking.service.deleted",
    BookingServiceUpdated = "booking.service.updated",
    CapabilityConfirmed = "capability.confirmed",
    CapabilityUsed = "capability.used",
    ChannelConnected = "channel.connected",
    ChannelDeleted = "channel.deleted",
    ChannelDisconnected = "channel.disconnected",
    ChannelUpdated = "channel.updated",
    ContactCreated = "contact.created",
    ContactDeleted = "contact.deleted",
    ContactImportCompleted = "contact.import.completed",
    ContactNoteAdded = "contact.note.added",
    ContactUnsubscribed = "contact.unsubscribed",
    ContactUpdated = "contact.updated",
    DealCreated = "deal.created",
    DealDeleted = "deal.deleted",
    DealLost = "deal.lost",
    DealReopened = "deal.reopened",
    DealUpdated = "deal.updated",
    DealWon = "deal.won",
    EmailBounced = "email.bounced",
    EmailCancelled = "email.cancelled",
    EmailComplained = "email.complained",
    EmailDelivered = "email.delivered",
    EmailDomainCreated = "email.domain.created",
    EmailDomainDeleted = "email.domain.deleted",
    EmailDomainFailed = "email.domain.failed",
    EmailDomainVerified = "email.domain.verified",
    EmailFailed = "email.failed",
    EmailQueued = "email.queued",
    EmailScheduled = "email.scheduled",
    EmailSent = "email.sent",
    EmailSuppressed = "email.suppressed",
    EmailSuppressionRemoved = "email.suppression.removed",
    GdprConsentGranted = "gdpr.consent.granted",
    GdprConsentWithdrawn = "gdpr.consent.withdrawn",
    GdprErasureCompleted = "gdpr.erasure.completed",
    GdprErasureFailed = "gdpr.erasure.failed",
    GdprExportCompleted = "gdpr.export.completed",
    GdprExportFailed = "gdpr.export.failed",
    HelpdeskConversationAssigned = "helpdesk.conversation.assigned",
    HelpdeskConversationClosed = "helpdesk.conversation.closed",
    HelpdeskConversationCreated = "helpdesk.conversation.created",
    HelpdeskConversationReopened = "helpdesk.conversation.reopened",
    HelpdeskConversationUpdated = "helpdesk.conversation.updated",
    HelpdeskMessageDeliveryUpdated = "helpdesk.message.delivery_updated",
    HelpdeskMessageReceived = "helpdesk.message.received",
    HelpdeskMessageSent = "helpdesk.message.sent",
    HelpdeskNoteAdded = "helpdesk.note.added",
    PortalSessionCreated = "portal.session.created",
    PostCreated = "post.created",
    PostDeleted = "post.deleted",
    PostFailed = "post.failed",
    PostPartiallyFailed = "post.partially_failed",
    PostPublished = "post.published",
    PostPublishing = "post.publishing",
    PostScheduled = "post.scheduled",
    PostUnscheduled = "post.unscheduled",
    PostUpdated = "post.updated",
    PostVariantFailed = "post.variant.failed",
    PostVariantPublished = "post.variant.published",
    ScanCompleted = "scan.completed",
    ScanFailed = "scan.failed",
    WebhookEndpointCreated = "webhook.endpoint.created",
    WebhookEndpointDeleted = "webhook.endpoint.deleted",
    WebhookEndpointDisabled = "webhook.endpoint.disabled",
    WebhookEndpointSecretRotated = "webhook.endpoint.secret_rotated",
    WebhookEndpointUpdated = "webhook.endpoint.updated",
    WebhookReplayCompleted = "webhook.replay.completed",
    WebhookTest = "webhook.test",
    WorkspaceCreated = "workspace.created",
    WorkspaceMemberAdded = "workspace.member.added",
    WorkspaceMemberUpdated = "workspace.member.updated",
    WorkspaceUpdated = "workspace.updated",
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

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

pub use crate::ids::EventId;

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
    pub fn new(workspace_id: &str, kind: EventType, data: &impl Serialize) -> Self {
        Self {
            id: EventId::generate(),
            kind: kind.as_str().into(),
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
    fn event_types_are_named_once_in_order_as_noun_dot_verb() {
        assert!(EVENT_TYPES.windows(2).all(|w| w[0] < w[1]), "sorted, each once");
        for t in EVENT_TYPES {
            let (noun, rest) = t.split_once('.').unwrap_or_else(|| panic!("{t}: <noun>.<what happened>"));
            assert!(!noun.is_empty() && !rest.is_empty() && t.chars().all(|c| c.is_ascii_lowercase() || c == '.' || c == '_'), "{t}");
        }
        assert_eq!(EventType::BookingNoShow.as_str(), "booking.no_show");
        assert_eq!(EventType::HelpdeskMessageDeliveryUpdated.to_string(), "helpdesk.message.delivery_updated");
    }

    #[test]
    fn event_body_has_the_contract_fields() {
        let ev = Event::new("ws_1", crate::events::EventType::PostCreated, &serde_json::json!({"id": "post_1"}));
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
