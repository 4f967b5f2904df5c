//! The webhook routes' operations: register, change, rotate the secret of, delete and test an
//! endpoint, and retry a delivery. Each validates its input, then causes its effect (`super`).

use super::{
    DEFAULT_GRACE_SECS, Delivery, DeliveryId, DeliveryStatus, Endpoint, EndpointId, MAX_GRACE_SECS, StoredEndpoint, load_delivery,
    load_endpoint,
};
use crate::effects::{CreateWebhook, DeleteWebhook, RotateWebhookSecret, UpdateWebhook};
use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::validate::{Errors, Patch};
use shared::{ApiError, ApiResult, App};
use std::collections::BTreeMap;
use utoipa::ToSchema;

pub const MAX_DESCRIPTION_CHARS: usize = 500;
pub const MAX_EVENT_TYPES: usize = 50;

/// An endpoint together with its secret: only in the responses of create and rotate-secret.
#[derive(Serialize, ToSchema)]
pub struct EndpointWithSecret {
    #[serde(flatten)]
    pub endpoint: Endpoint,
    /// `whsec_...`: shown once; store it to verify signatures.
    pub secret: String,
    /// Until when the previous secret keeps signing alongside (rotate-secret only).
    pub previous_secret_expires_at: Option<shared::ids::Timestamp>,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateEndpoint {
    /// https URL that receives POSTed events; must resolve to public addresses.
    #[schema(format = "uri", max_length = 2048, example = "https://hooks.example.com/in")]
    pub url: String,
    #[serde(default)]
    #[schema(max_length = 500)]
    pub description: Option<String>,
    /// Types or `<noun>.*` patterns; empty or absent = every event.
    #[serde(default)]
    pub event_types: Vec<String>,
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct UpdateEndpoint {
    /// https URL that receives POSTed events; must resolve to public addresses.
    #[serde(default)]
    #[schema(value_type = String, format = "uri", max_length = 2048)]
    pub url: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>, max_length = 500)]
    pub description: Patch<String>,
    /// `null` or `[]`: every event.
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    pub event_types: Patch<Vec<String>>,
    /// Enabling clears `disabled_reason` and `failing_since`.
    #[serde(default)]
    #[schema(value_type = bool)]
    pub enabled: Patch<bool>,
    #[serde(default)]
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    pub metadata: Patch<BTreeMap<String, String>>,
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RotateSecret {
    /// How long the previous secret keeps signing alongside the new one: 0..604800 seconds,
    /// default 86400 (24 h).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 604800)]
    pub grace_period_seconds: Option<i64>,
}

async fn check_url(errs: &mut Errors, app: &App, url: &str) {
    if let Err(m) = shared::outbound::check_url_resolved(url, app.cfg.webhooks.url_policy).await {
        errs.add("url", m);
    }
}

pub(super) fn check_event_types(errs: &mut Errors, types: &[String]) {
    if types.len() > MAX_EVENT_TYPES {
        errs.add("event_types", format!("at most {MAX_EVENT_TYPES} entries"));
    }
    for (i, t) in types.iter().enumerate() {
        if !shared::events::is_known_pattern(t) {
            errs.add(format!("event_types[{i}]"), format!("unknown event type {t:?}; use a known type or <noun>.*"));
        } else if types[..i].contains(t) {
            errs.add(format!("event_types[{i}]"), "is listed twice");
        }
    }
}

fn check_description(errs: &mut Errors, d: &str) {
    errs.text("description", d, 0, MAX_DESCRIPTION_CHARS);
}

/// The endpoint, or 404.
pub async fn load(app: &App, ws: &WorkspaceId, id: &EndpointId) -> ApiResult<StoredEndpoint> {
    load_endpoint(app, ws, id).await?.ok_or_else(|| ApiError::not_found("webhook endpoint"))
}

/// Register an endpoint: the endpoint with its new secret (shown once), and the endpoint alone
/// (what an idempotent replay answers).
pub async fn create(grant: &shared::authority::Grant, app: &App, ws: &WorkspaceId, input: CreateEndpoint) -> ApiResult<EndpointWithSecret> {
    let mut errs = Errors::new();
    check_url(&mut errs, app, &input.url).await;
    if let Some(d) = &input.description {
        check_description(&mut errs, d);
    }
    check_event_types(&mut errs, &input.event_types);
    errs.metadata("metadata", &input.metadata);
    errs.finish()?;
    let now = shared::ids::Timestamp::now();
    let endpoint = Endpoint {
        id: EndpointId::generate(),
        object: "webhook_endpoint".into(),
        url: input.url,
        description: input.description,
        event_types: input.event_types,
        enabled: input.enabled,
        disabled_reason: None,
        failing_since: None,
        metadata: input.metadata,
        created_at: now,
        updated_at: now,
    };
    let auth = grant.authorize_value::<CreateWebhook>(&super::Subscription::of(&endpoint))?;
    let (secret, stored) = super::new_secret(app, ws, &endpoint.id).await?;
    let rec = StoredEndpoint { endpoint, secrets: vec![stored], version: 1 };
    super::create_endpoint(&auth, app, ws, &rec).await?;
    Ok(EndpointWithSecret { endpoint: rec.endpoint, secret, previous_secret_expires_at: None })
}

/// Change an endpoint (URL, event types, description, status, metadata).
pub async fn update(
    grant: &shared::authority::Grant,
    app: &App,
    ws: &WorkspaceId,
    id: &EndpointId,
    input: UpdateEndpoint,
) -> ApiResult<Endpoint> {
    let mut rec = load(app, ws, id).await?;
    let before = super::Subscription::of(&rec.endpoint);
    let ep = &mut rec.endpoint;
    let mut errs = Errors::new();
    if let Some(u) = input.url.required(&mut errs, "url") {
        check_url(&mut errs, app, &u).await;
        ep.url = u;
    }
    match input.description {
        Patch::Absent => {}
        Patch::Null => ep.description = None,
        Patch::Value(d) => {
            check_description(&mut errs, &d);
            ep.description = Some(d);
        }
    }
    if let Some(t) = input.event_types.or_empty() {
        check_event_types(&mut errs, &t);
        ep.event_types = t;
    }
    match input.enabled.required(&mut errs, "enabled") {
        None => {}
        Some(true) => {
            ep.enabled = true;
            ep.disabled_reason = None;
            ep.failing_since = None;
        }
        Some(false) => ep.enabled = false,
    }
    errs.patch_metadata("metadata", input.metadata, &mut ep.metadata);
    errs.finish()?;
    ep.updated_at = shared::ids::Timestamp::now();
    let value = super::Resubscribing { endpoint_id: rec.endpoint.id.clone(), before, after: super::Subscription::of(&rec.endpoint) };
    let auth = grant.authorize_value::<UpdateWebhook>(&value)?;
    super::update_endpoint(&auth, app, ws, &rec).await?;
    Ok(rec.endpoint)
}

/// Delete an endpoint; its pending deliveries end as `dead`.
pub async fn delete(grant: &shared::authority::Grant, app: &App, ws: &WorkspaceId, id: &EndpointId) -> ApiResult<Endpoint> {
    let rec = load(app, ws, id).await?;
    let value = super::Unsubscribing { endpoint_id: rec.endpoint.id.clone(), subscription: super::Subscription::of(&rec.endpoint) };
    super::delete_endpoint(&grant.authorize_value::<DeleteWebhook>(&value)?, app, ws, &rec).await?;
    Ok(rec.endpoint)
}

/// Issue a new secret (shown once). Older secrets keep signing until the grace period ends;
/// at most three are kept.
pub async fn rotate_secret(
    grant: &shared::authority::Grant,
    app: &App,
    ws: &WorkspaceId,
    id: &EndpointId,
    input: RotateSecret,
) -> ApiResult<EndpointWithSecret> {
    let grace = input.grace_period_seconds.unwrap_or(DEFAULT_GRACE_SECS);
    if !(0..=MAX_GRACE_SECS).contains(&grace) {
        return Err(ApiError::validation("grace_period_seconds", format!("must be between 0 and {MAX_GRACE_SECS}")));
    }
    let mut rec = load(app, ws, id).await?;
    let value = super::Rotating { endpoint_id: rec.endpoint.id.clone(), url: rec.endpoint.url.clone(), grace_period_seconds: grace };
    let auth = grant.authorize_value::<RotateWebhookSecret>(&value)?;
    let now = chrono::Utc::now().timestamp();
    let until = now + grace;
    // Old secrets stop at the end of this grace period at the latest; expired ones go.
    let mut secrets: Vec<_> = std::mem::take(&mut rec.secrets)
        .into_iter()
        .map(|mut sec| {
            sec.expires_at = Some(sec.expires_at.map_or(until, |t| t.min(until)));
            sec
        })
        .filter(|sec| sec.expires_at.is_some_and(|t| t > now))
        .collect();
    let (secret, stored) = super::new_secret(app, ws, &rec.endpoint.id).await?;
    secrets.insert(0, stored);
    secrets.truncate(3);
    rec.secrets = secrets;
    rec.endpoint.updated_at = shared::ids::Timestamp::now();
    super::rotate_endpoint_secret(&auth, app, ws, &rec).await?;
    let previous = rec.secrets.get(1).and_then(|s| s.expires_at).and_then(shared::ids::Timestamp::from_unix);
    Ok(EndpointWithSecret { endpoint: rec.endpoint, secret, previous_secret_expires_at: previous })
}

/// Queue a `webhook.test` event to this endpoint only.
pub async fn send_test(app: &App, ws: &WorkspaceId, id: &EndpointId) -> ApiResult<Delivery> {
    let rec = load(app, ws, id).await?;
    if !rec.endpoint.enabled {
        return Err(ApiError::conflict("the endpoint is disabled; enable it first"));
    }
    Ok(super::queue_test(app, ws, &rec.endpoint.id).await?.delivery)
}

/// Attempt a delivery again now; the retry schedule starts over from this attempt.
pub async fn retry(app: &App, ws: &WorkspaceId, id: &EndpointId, delivery_id: &DeliveryId) -> ApiResult<Delivery> {
    let (ep, d) = tokio::join!(load_endpoint(app, ws, id), load_delivery(app, ws, id, delivery_id));
    let ep = ep?.ok_or_else(|| ApiError::not_found("webhook endpoint"))?;
    let mut d = d?.ok_or_else(|| ApiError::not_found("webhook delivery"))?;
    if !ep.endpoint.enabled {
        return Err(ApiError::conflict("the endpoint is disabled; enable it first"));
    }
    if d.delivery.status == DeliveryStatus::Pending {
        return Err(ApiError::conflict("the delivery is already waiting for its attempt"));
    }
    d.delivery.status = DeliveryStatus::Pending;
    d.delivery.next_attempt_at = Some(shared::ids::Timestamp::now());
    d.delivery.updated_at = shared::ids::Timestamp::now();
    d.retries = 0;
    // A new token: a message still scheduled for the old run is dropped when it arrives.
    d.job = super::new_job();
    if !d.save(app, ws).await? {
        return Err(ApiError::conflict("the delivery was changed concurrently; retry"));
    }
    super::enqueue(app, &d.job(ws), 0).await?;
    Ok(d.delivery)
}

/// The page of an endpoint's deliveries, newest first, optionally by status; 404 when the
/// endpoint is not the workspace's (deliveries of a deleted endpoint are gone with it).
pub async fn deliveries(
    app: &App,
    ws: &WorkspaceId,
    id: &EndpointId,
    status: Option<DeliveryStatus>,
    after: Option<String>,
    limit: usize,
) -> ApiResult<(Vec<Delivery>, Option<String>)> {
    load(app, ws, id).await?;
    let spec = match status {
        Some(st) => crate::keys::WEBHOOK_DELIVERIES_BY_STATUS.query_within((ws, id, st.as_str()), id, after, limit),
        None => crate::keys::WEBHOOK_DELIVERIES.query_within(ws, id, after, limit),
    };
    shared::request::page(app, spec.descending()).await
}

/// One page of the workspace's endpoints, oldest first.
pub async fn list(app: &App, ws: &WorkspaceId, after: Option<String>, limit: usize) -> ApiResult<(Vec<Endpoint>, Option<String>)> {
    shared::request::page(app, crate::keys::WEBHOOK_ENDPOINTS.query(ws, after, limit)).await
}
