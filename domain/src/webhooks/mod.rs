//! Endpoints and deliveries as stored, shared by the API handlers and the dispatcher.
//!
//! Items (pk = WS#<workspace>):
//! - `WEBHOOK#<id>`: the endpoint, plus `secrets` (sealed, newest first, with expiry);
//! - `WEBHOOKCOUNT`: how many endpoints the workspace has (the per-workspace cap);
//! - `WHD#<endpoint>#<delivery>`: a delivery, plus the event `body` it sends and the `job`
//!   token of the queue message allowed to work on it; GSI1 `WS#<ws>#WHD#<endpoint>#<status>`
//!   serves the status filter in O(page);
//! - `WHEVENT#<event>`: the fan-out marker, so an event delivered twice to the dispatcher
//!   creates its deliveries once.

pub mod catalog;
pub mod dispatch;
pub mod ops;
pub mod replay;
mod store;

pub use crate::ids::{DeliveryId, EndpointId};
use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::events::EventId;
use shared::ids::Timestamp;
use std::collections::BTreeMap;
pub(crate) use store::listed_deliveries;
pub use store::{
    COUNT_SK, PRIVACY, StoredDelivery, StoredEndpoint, StoredSecret, create_endpoint, delete_endpoint, deliveries_gsi1, delivery_sk,
    endpoint_sk, enqueue, event_record, event_record_sk, load_delivery, load_delivery_for, load_endpoint, load_event_body, new_secret,
    queue_test, rotate_endpoint_secret, update_endpoint, withdraw_event, workspace_endpoints,
};
use utoipa::ToSchema;

pub const MAX_ENDPOINTS: i64 = 20;

/// Deliveries (and their bodies) are kept 30 days.
pub const DELIVERY_TTL_SECS: i64 = 30 * 86_400;

/// Attempts kept on a delivery (the count keeps going).
pub const MAX_ATTEMPTS_KEPT: usize = 20;

pub const MAX_GRACE_SECS: i64 = 7 * 86_400;

pub const DEFAULT_GRACE_SECS: i64 = 86_400;

/// What an endpoint receives and where: the value of `CreateWebhook`, and both sides of
/// `UpdateWebhook`'s.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Subscription {
    pub url: String,
    pub event_types: Vec<String>,
    pub enabled: bool,
    pub description: Option<String>,
    pub metadata: BTreeMap<String, String>,
}

impl crate::effects::Valued for crate::effects::CreateWebhook {
    type Value = Subscription;
}

impl Subscription {
    pub fn of(e: &Endpoint) -> Self {
        Self {
            url: e.url.clone(),
            event_types: e.event_types.clone(),
            enabled: e.enabled,
            description: e.description.clone(),
            metadata: e.metadata.clone(),
        }
    }
}

/// The value of `UpdateWebhook`: the endpoint as it is and as it will be.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Resubscribing {
    pub endpoint_id: EndpointId,
    pub before: Subscription,
    pub after: Subscription,
}

impl crate::effects::Valued for crate::effects::UpdateWebhook {
    type Value = Resubscribing;
}

/// The value of `DeleteWebhook`: the endpoint that stops receiving, as it is.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Unsubscribing {
    pub endpoint_id: EndpointId,
    pub subscription: Subscription,
}

impl crate::effects::Valued for crate::effects::DeleteWebhook {
    type Value = Unsubscribing;
}

/// The value of `RotateWebhookSecret`: which endpoint gets a new secret (made after the approval
/// and shown once, never part of what is approved) and how long its older secrets still sign.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Rotating {
    pub endpoint_id: EndpointId,
    pub url: String,
    pub grace_period_seconds: i64,
}

impl crate::effects::Valued for crate::effects::RotateWebhookSecret {
    type Value = Rotating;
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct Endpoint {
    /// `wh_...`
    pub id: EndpointId,
    /// Always `webhook_endpoint`.
    pub object: String,
    pub url: String,
    pub description: Option<String>,
    /// Subscribed types or `<noun>.*` patterns; empty = every event.
    pub event_types: Vec<String>,
    pub enabled: bool,
    /// Why the platform disabled it (`gone`: the receiver answered 410; `failing`: failed
    /// continuously for 5 days). Cleared when it is enabled again.
    pub disabled_reason: Option<String>,
    /// Start of the current run of failed attempts.
    pub failing_since: Option<Timestamp>,
    pub metadata: BTreeMap<String, String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

fn secret_aad(ws: &WorkspaceId, endpoint_id: &str) -> String {
    format!("{ws}/{endpoint_id}")
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// Waiting for its first attempt.
    Pending,
    /// The last attempt failed; `next_attempt_at` says when the next one is due.
    Failed,
    Succeeded,
    /// Given up: retries exhausted, or the endpoint was disabled or deleted.
    Dead,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Failed => "failed",
            Self::Succeeded => "succeeded",
            Self::Dead => "dead",
        }
    }
    pub fn parse(v: &str) -> Option<Self> {
        shared::validate::parse_enum(v)
    }
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct Attempt {
    /// 1 for the first attempt of the delivery.
    pub number: u32,
    /// When the request was sent.
    pub at: Timestamp,
    pub duration_ms: u64,
    /// The receiver's HTTP status, when it answered.
    pub status_code: Option<u16>,
    /// Why there is no usable answer: `timeout`, `connect` (including TLS), `dns`,
    /// `blocked_address`, `invalid_url`, `request`, `endpoint_disabled`, `endpoint_deleted`.
    pub error: Option<String>,
    /// The first 500 characters of the response body.
    pub response_excerpt: Option<String>,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct Delivery {
    /// `whd_...`
    pub id: DeliveryId,
    /// Always `webhook_delivery`.
    pub object: String,
    pub endpoint_id: EndpointId,
    pub event_id: EventId,
    pub event_type: String,
    pub status: DeliveryStatus,
    /// Attempts so far (the most recent 20 are listed in `attempts`).
    pub attempt_count: u32,
    pub attempts: Vec<Attempt>,
    pub next_attempt_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

pub fn new_job() -> String {
    shared::auth::random_base62(16)
}

/// The deliveries queue's message: "attempt this delivery when it is due".
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DeliveryJob {
    #[serde(deserialize_with = "WorkspaceId::from_record")]
    pub workspace_id: WorkspaceId,
    pub endpoint_id: EndpointId,
    pub delivery_id: DeliveryId,
    pub job: String,
    /// Lets the attempt read the delivery and its event's body in parallel (absent in
    /// messages queued before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<EventId>,
}
