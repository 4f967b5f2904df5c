//! Webhooks: endpoints that receive the workspace's events, their secrets (shown once,
//! sealed at rest, rotated with a grace period), and the delivery history with manual retry.
//! The delivering itself is `functions/dispatcher`; the stored model is in [`model`].

use domain::effects::{self as fx, Effect as _};
use domain::keys;
use domain::webhooks::{self as model, DEFAULT_GRACE_SECS, Delivery, DeliveryStatus, Endpoint, MAX_GRACE_SECS, StoredEndpoint};
use serde::{Deserialize, Serialize};
use shared::validate::{Errors, Patch};
use shared::{ApiError, ApiResult, App, Reply, Req};
use std::collections::BTreeMap;
use utoipa::ToSchema;

shared::area! {
    tag = "webhooks", description = "Endpoints that receive signed events, and their delivery history",
    operations = [
        list_endpoints, get_endpoint, list_deliveries,
        // Where the workspace's data goes: owners and admins.
        create_endpoint [needs = Scope::Admin, effects = &[fx::CreateWebhook::INFO]],
        update_endpoint [needs = Scope::Admin, effects = &[fx::UpdateWebhook::INFO]],
        delete_endpoint [needs = Scope::Admin, effects = &[fx::DeleteWebhook::INFO]],
        rotate_secret [needs = Scope::Admin, effects = &[fx::RotateWebhookSecret::INFO]],
        test_endpoint [needs = Scope::Admin], retry_delivery [needs = Scope::Admin],
    ],
    schemas = [Endpoint, EndpointWithSecret, CreateEndpoint, UpdateEndpoint, RotateSecret, Delivery, DeliveryStatus, model::Attempt],
}

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
    #[schema(format = DateTime)]
    pub previous_secret_expires_at: Option<String>,
}

async fn load(app: &App, req: &Req) -> ApiResult<StoredEndpoint> {
    let id: model::EndpointId = req.path_id("id")?;
    model::load_endpoint(app, req.ws()?, &id).await?.ok_or_else(|| ApiError::not_found("webhook endpoint"))
}

async fn check_url(errs: &mut Errors, app: &App, url: &str) {
    if let Err(m) = shared::outbound::check_url_resolved(url, app.cfg.webhooks.url_policy).await {
        errs.add("url", m);
    }
}

fn check_event_types(errs: &mut Errors, types: &[String]) {
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

// ---------- routes ----------

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateEndpoint {
    /// https URL that receives POSTed events; must resolve to public addresses.
    #[schema(format = "uri", max_length = 2048, example = "https://hooks.example.com/in")]
    pub url: String,
    #[serde(default)]
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

/// Register an endpoint. The response carries its signing secret, shown this once.
#[utoipa::path(post, path = "/webhooks", tag = "webhooks", request_body = CreateEndpoint,
    responses((status = 201, body = shared::openapi::Data<EndpointWithSecret>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_endpoint(app: &App, req: Req) -> ApiResult<Reply> {
    let authority = req.grant.authorize::<fx::CreateWebhook>()?;
    let input: CreateEndpoint = req.json()?;
    let mut errs = Errors::new();
    check_url(&mut errs, app, &input.url).await;
    if let Some(d) = &input.description {
        check_description(&mut errs, d);
    }
    check_event_types(&mut errs, &input.event_types);
    errs.metadata("metadata", &input.metadata);
    errs.finish()?;
    let ws = req.ws()?;
    let now = shared::ids::now_rfc3339();
    let endpoint = Endpoint {
        id: shared::ids::new_id("wh").into(),
        object: "webhook_endpoint".into(),
        url: input.url,
        description: input.description,
        event_types: input.event_types,
        enabled: input.enabled,
        disabled_reason: None,
        failing_since: None,
        metadata: input.metadata,
        created_at: now.clone(),
        updated_at: now,
    };
    let (secret, stored) = model::new_secret(app, ws, &endpoint.id).await?;
    let rec = StoredEndpoint { endpoint, secrets: vec![stored], version: 1 };
    model::create_endpoint(&authority, app, ws, &rec).await?;
    let shown = EndpointWithSecret { endpoint: rec.endpoint.clone(), secret, previous_secret_expires_at: None };
    Ok(Reply::created(&shown).replay_as(&rec.endpoint))
}

/// The workspace's endpoints (at most 20), oldest first.
#[utoipa::path(get, path = "/webhooks", tag = "webhooks",
    params(shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<Endpoint>), shared::openapi::CommonErrors))]
pub async fn list_endpoints(app: &App, req: Req) -> ApiResult<Reply> {
    let page = req.page(app, "webhooks", &[]).await?;
    shared::request::list_page::<Endpoint>(app, &page, keys::WEBHOOK_ENDPOINTS.query(&[req.ws()?], &[], page.after.clone(), page.limit))
        .await
}

/// One webhook endpoint (its secret is never shown again).
#[utoipa::path(get, path = "/webhooks/{id}", tag = "webhooks", params(("id" = String, Path, description = "wh_...")),
    responses((status = 200, body = shared::openapi::Data<Endpoint>), shared::openapi::CommonErrors))]
pub async fn get_endpoint(app: &App, req: Req) -> ApiResult<Reply> {
    Ok(Reply::ok(&load(app, &req).await?.endpoint))
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct UpdateEndpoint {
    #[serde(default)]
    #[schema(value_type = String)]
    pub url: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
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

/// Change an endpoint (URL, event types, description, status, metadata).
#[utoipa::path(patch, path = "/webhooks/{id}", tag = "webhooks", request_body = UpdateEndpoint, params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Endpoint>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn update_endpoint(app: &App, req: Req) -> ApiResult<Reply> {
    let authority = req.grant.authorize::<fx::UpdateWebhook>()?;
    let input: UpdateEndpoint = req.json()?;
    let mut rec = load(app, &req).await?;
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
    ep.updated_at = shared::ids::now_rfc3339();
    model::update_endpoint(&authority, app, req.ws()?, &rec).await?;
    Ok(Reply::ok(&rec.endpoint))
}

/// Delete an endpoint. Its pending deliveries end as `dead`.
#[utoipa::path(delete, path = "/webhooks/{id}", tag = "webhooks", params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<shared::openapi::Deleted>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn delete_endpoint(app: &App, req: Req) -> ApiResult<Reply> {
    let authority = req.grant.authorize::<fx::DeleteWebhook>()?;
    let rec = load(app, &req).await?;
    model::delete_endpoint(&authority, app, req.ws()?, &rec).await?;
    Ok(Reply::deleted(&rec.endpoint.id, "webhook_endpoint"))
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

/// Issue a new secret (shown once). During the grace period every delivery carries a
/// signature for each valid secret, newest first.
#[utoipa::path(post, path = "/webhooks/{id}/rotate-secret", tag = "webhooks", request_body(content = RotateSecret, description = "optional"),
    params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<EndpointWithSecret>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn rotate_secret(app: &App, req: Req) -> ApiResult<Reply> {
    let authority = req.grant.authorize::<fx::RotateWebhookSecret>()?;
    let input: RotateSecret = if req.body.is_empty() { RotateSecret::default() } else { req.json()? };
    let grace = input.grace_period_seconds.unwrap_or(DEFAULT_GRACE_SECS);
    if !(0..=MAX_GRACE_SECS).contains(&grace) {
        return Err(ApiError::validation("grace_period_seconds", format!("must be between 0 and {MAX_GRACE_SECS}")));
    }
    let mut rec = load(app, &req).await?;
    let ws = req.ws()?;
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
    let (secret, stored) = model::new_secret(app, ws, &rec.endpoint.id).await?;
    secrets.insert(0, stored);
    secrets.truncate(3);
    rec.secrets = secrets;
    rec.endpoint.updated_at = shared::ids::now_rfc3339();
    model::rotate_endpoint_secret(&authority, app, ws, &rec).await?;
    let previous =
        rec.secrets.get(1).and_then(|s| s.expires_at).and_then(|t| chrono::DateTime::from_timestamp(t, 0)).map(shared::ids::format_time);
    let shown = EndpointWithSecret { endpoint: rec.endpoint.clone(), secret, previous_secret_expires_at: previous };
    Ok(Reply::ok(&shown).replay_as(&rec.endpoint))
}

/// Queue a `webhook.test` event to this endpoint only (whatever its event_types). Answers the
/// delivery, to follow with `GET /webhooks/{id}/deliveries`.
#[utoipa::path(post, path = "/webhooks/{id}/test", tag = "webhooks", params(("id" = String, Path)),
    responses((status = 202, body = shared::openapi::Data<Delivery>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn test_endpoint(app: &App, req: Req) -> ApiResult<Reply> {
    let rec = load(app, &req).await?;
    if !rec.endpoint.enabled {
        return Err(ApiError::conflict("the endpoint is disabled; enable it first"));
    }
    let d = model::queue_test(app, req.ws()?, &rec.endpoint.id).await?;
    Ok(Reply::accepted(&d.delivery))
}

/// Deliveries to this endpoint, newest first, optionally by status.
#[utoipa::path(get, path = "/webhooks/{id}/deliveries", tag = "webhooks",
    params(("id" = String, Path), shared::openapi::PageParams,
        ("status" = Option<DeliveryStatus>, Query)),
    responses((status = 200, body = shared::openapi::ListOf<Delivery>), shared::openapi::CommonErrors))]
pub async fn list_deliveries(app: &App, req: Req) -> ApiResult<Reply> {
    #[derive(Deserialize)]
    struct Filters {
        status: Option<DeliveryStatus>,
    }
    let parsed = req.query_as::<Filters>()?.status;
    let status = parsed.map(DeliveryStatus::as_str);
    let id: model::EndpointId = req.path_id("id")?;
    let id = id.as_ref();
    // The endpoint must exist in this workspace (deliveries of a deleted endpoint are gone with it).
    if model::load_endpoint(app, req.ws()?, id).await?.is_none() {
        return Err(ApiError::not_found("webhook endpoint"));
    }
    let list = format!("webhooks/{id}/deliveries");
    let page = req.page(app, &list, &[("status", status)]).await?;
    let spec = match parsed {
        Some(st) => keys::WEBHOOK_DELIVERIES_BY_STATUS.query(&[req.ws()?, id, st.as_str()], &[id], page.after.clone(), page.limit),
        None => keys::WEBHOOK_DELIVERIES.query(&[req.ws()?], &[id], page.after.clone(), page.limit),
    };
    shared::request::list_page::<Delivery>(app, &page, spec.descending()).await
}

/// Attempt a delivery again now (a failed, dead or succeeded one). The retry schedule starts
/// over from this attempt.
#[utoipa::path(post, path = "/webhooks/{id}/deliveries/{delivery_id}/retry", tag = "webhooks",
    params(("id" = String, Path), ("delivery_id" = String, Path, description = "whd_...")),
    responses((status = 202, body = shared::openapi::Data<Delivery>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn retry_delivery(app: &App, req: Req) -> ApiResult<Reply> {
    let ws = req.ws()?;
    // Either id malformed: no such delivery.
    let (id, delivery_id): (model::EndpointId, model::DeliveryId) = match (req.path_id("id"), req.path_id("delivery_id")) {
        (Ok(e), Ok(d)) => (e, d),
        _ => return Err(ApiError::not_found("webhook delivery")),
    };
    let (id, delivery_id) = (id.as_ref(), delivery_id.as_ref());
    let (ep, d) = tokio::join!(model::load_endpoint(app, ws, id), model::load_delivery(app, ws, id, delivery_id));
    let ep = ep?.ok_or_else(|| ApiError::not_found("webhook endpoint"))?;
    let mut d = d?.ok_or_else(|| ApiError::not_found("webhook delivery"))?;
    if !ep.endpoint.enabled {
        return Err(ApiError::conflict("the endpoint is disabled; enable it first"));
    }
    if d.delivery.status == DeliveryStatus::Pending {
        return Err(ApiError::conflict("the delivery is already waiting for its attempt"));
    }
    d.delivery.status = DeliveryStatus::Pending;
    d.delivery.next_attempt_at = Some(shared::ids::now_rfc3339());
    d.delivery.updated_at = shared::ids::now_rfc3339();
    d.retries = 0;
    // A new token: a message still scheduled for the old run is dropped when it arrives.
    d.job = model::new_job();
    if !d.save(app, ws).await? {
        return Err(ApiError::conflict("the delivery was changed concurrently; retry"));
    }
    model::enqueue(app, &d.job(ws), 0).await?;
    Ok(Reply::accepted(&d.delivery))
}
