//! Webhooks: endpoints that receive the workspace's events, their secrets (shown once,
//! sealed at rest, rotated with a grace period), and the delivery history with manual retry
//! and replay.
//! The operations are `domain::webhooks::ops`; the delivering is `domain::webhooks::dispatch`.

use domain::effects::{self as fx, Effect as _};
use domain::webhooks::catalog::EventTypeInfo;
use domain::webhooks::ops::{self, CreateEndpoint, EndpointWithSecret, RotateSecret, UpdateEndpoint};
use domain::webhooks::replay::{self, CreateReplay, ReplayId};
use domain::webhooks::{self as model, Delivery, DeliveryId, DeliveryStatus, Endpoint, EndpointId};
use serde::Deserialize;
use shared::{ApiError, ApiResult, App, Reply, Req, WsReq};

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
        replay_endpoint [needs = Scope::Admin], get_replay, list_event_types, get_event_type,
    ],
    schemas = [Endpoint, EndpointWithSecret, CreateEndpoint, UpdateEndpoint, RotateSecret, Delivery, DeliveryStatus, model::Attempt,
        replay::Replay, replay::ReplayStatus, replay::CreateReplay, EventTypeInfo],
}

// ---------- routes ----------

/// Register an endpoint. The response carries its signing secret, shown this once.
#[utoipa::path(post, path = "/webhooks", tag = "webhooks", request_body = CreateEndpoint,
    responses((status = 201, body = shared::openapi::Data<EndpointWithSecret>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_endpoint(app: &App, req: WsReq) -> ApiResult<Reply> {
    let shown = ops::create(&req.grant, app, &req.ws, req.json()?).await?;
    Ok(Reply::created(&shown).replay_as(&shown.endpoint))
}

/// The workspace's endpoints (at most 20), oldest first.
#[utoipa::path(get, path = "/webhooks", tag = "webhooks",
    params(shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<Endpoint>), shared::openapi::CommonErrors))]
pub async fn list_endpoints(app: &App, req: WsReq) -> ApiResult<Reply> {
    let page = req.page(app, "webhooks", &[]).await?;
    Ok(Reply::page(&page, ops::list(app, &req.ws, page.after.clone(), page.limit).await?))
}

/// One webhook endpoint (its secret is never shown again).
#[utoipa::path(get, path = "/webhooks/{id}", tag = "webhooks", params(("id" = String, Path, description = "wh_...")),
    responses((status = 200, body = shared::openapi::Data<Endpoint>), shared::openapi::CommonErrors))]
pub async fn get_endpoint(app: &App, req: WsReq) -> ApiResult<Reply> {
    Ok(Reply::ok(&ops::load(app, &req.ws, &req.path_id("id")?).await?.endpoint))
}

/// Change an endpoint (URL, event types, description, status, metadata).
#[utoipa::path(patch, path = "/webhooks/{id}", tag = "webhooks", request_body = UpdateEndpoint, params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Endpoint>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn update_endpoint(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: UpdateEndpoint = req.json()?;
    Ok(Reply::ok(&ops::update(&req.grant, app, &req.ws, &req.path_id("id")?, input).await?))
}

/// Delete an endpoint. Its pending deliveries end as `dead`.
#[utoipa::path(delete, path = "/webhooks/{id}", tag = "webhooks", params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<shared::openapi::Deleted>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn delete_endpoint(app: &App, req: WsReq) -> ApiResult<Reply> {
    let gone = ops::delete(&req.grant, app, &req.ws, &req.path_id("id")?).await?;
    Ok(Reply::deleted(&gone.id, "webhook_endpoint"))
}

/// Issue a new secret (shown once). During the grace period every delivery carries a
/// signature for each valid secret, newest first.
#[utoipa::path(post, path = "/webhooks/{id}/rotate-secret", tag = "webhooks", request_body(content = RotateSecret, description = "optional"),
    params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<EndpointWithSecret>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn rotate_secret(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: RotateSecret = if req.body.is_empty() { RotateSecret::default() } else { req.json()? };
    let shown = ops::rotate_secret(&req.grant, app, &req.ws, &req.path_id("id")?, input).await?;
    Ok(Reply::ok(&shown).replay_as(&shown.endpoint))
}

/// Queue a `webhook.test` event to this endpoint only (whatever its event_types). Answers the
/// delivery, to follow with `GET /webhooks/{id}/deliveries`.
#[utoipa::path(post, path = "/webhooks/{id}/test", tag = "webhooks", params(("id" = String, Path)),
    responses((status = 202, body = shared::openapi::Data<Delivery>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn test_endpoint(app: &App, req: WsReq) -> ApiResult<Reply> {
    Ok(Reply::accepted(&ops::send_test(app, &req.ws, &req.path_id("id")?).await?))
}

/// Deliveries to this endpoint, newest first, optionally by status.
#[utoipa::path(get, path = "/webhooks/{id}/deliveries", tag = "webhooks",
    params(("id" = String, Path), shared::openapi::PageParams,
        ("status" = Option<DeliveryStatus>, Query)),
    responses((status = 200, body = shared::openapi::ListOf<Delivery>), shared::openapi::CommonErrors))]
pub async fn list_deliveries(app: &App, req: WsReq) -> ApiResult<Reply> {
    #[derive(Deserialize)]
    struct Filters {
        status: Option<DeliveryStatus>,
    }
    let status = req.query_as::<Filters>()?.status;
    let id: EndpointId = req.path_id("id")?;
    let page = req.page(app, &format!("webhooks/{id}/deliveries"), &[("status", status.map(DeliveryStatus::as_str))]).await?;
    Ok(Reply::page(&page, ops::deliveries(app, &req.ws, &id, status, page.after.clone(), page.limit).await?))
}

/// Attempt a delivery again now (a failed, dead or succeeded one). The retry schedule starts
/// over from this attempt.
#[utoipa::path(post, path = "/webhooks/{id}/deliveries/{delivery_id}/retry", tag = "webhooks",
    params(("id" = String, Path), ("delivery_id" = String, Path, description = "whd_...")),
    responses((status = 202, body = shared::openapi::Data<Delivery>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn retry_delivery(app: &App, req: WsReq) -> ApiResult<Reply> {
    // Either id malformed: no such delivery.
    let (id, delivery_id): (EndpointId, DeliveryId) = match (req.path_id("id"), req.path_id("delivery_id")) {
        (Ok(e), Ok(d)) => (e, d),
        _ => return Err(ApiError::not_found("webhook delivery")),
    };
    Ok(Reply::accepted(&ops::retry(app, &req.ws, &id, &delivery_id).await?))
}

/// Resend what this endpoint was due between `since` and `until` (default now; at most 30
/// days back), in event order, as new deliveries: after it was down or disabled. Only the
/// types it subscribes to (and `event_types`, when given); an erased subject's events are not
/// resent. Answers 202 with the replay, to follow at `GET /webhooks/{id}/replays/{replay_id}`;
/// one replay runs per endpoint at a time (409), and the endpoint must be enabled (409).
/// Event `webhook.replay.completed` when it ends.
#[utoipa::path(post, path = "/webhooks/{id}/replay", tag = "webhooks", request_body = CreateReplay, params(("id" = String, Path)),
    responses((status = 202, body = shared::openapi::Data<replay::Replay>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn replay_endpoint(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: CreateReplay = req.json()?;
    Ok(Reply::accepted(&replay::start(app, &req.ws, &req.path_id("id")?, input).await?))
}

/// One replay: its window, status and how many events it has resent.
#[utoipa::path(get, path = "/webhooks/{id}/replays/{replay_id}", tag = "webhooks",
    params(("id" = String, Path), ("replay_id" = String, Path, description = "whr_...")),
    responses((status = 200, body = shared::openapi::Data<replay::Replay>), shared::openapi::CommonErrors))]
pub async fn get_replay(app: &App, req: WsReq) -> ApiResult<Reply> {
    let (id, replay_id): (EndpointId, ReplayId) = match (req.path_id("id"), req.path_id("replay_id")) {
        (Ok(e), Ok(r)) => (e, r),
        _ => return Err(ApiError::not_found("webhook replay")),
    };
    Ok(Reply::ok(&replay::get(app, &req.ws, &id, &replay_id).await?))
}

/// The catalog `make generate` writes from the contract's `webhooks` section.
fn catalog() -> &'static [EventTypeInfo] {
    static CATALOG: std::sync::OnceLock<Vec<EventTypeInfo>> = std::sync::OnceLock::new();
    CATALOG.get_or_init(|| serde_json::from_str(include_str!("event_types.json")).expect("event_types.json is the catalog"))
}

/// Every event type an endpoint can receive, in one list (no paging: the catalog is fixed),
/// with the component schema of its `data`. The contract's `webhooks` section has the same.
#[utoipa::path(get, path = "/webhooks/event-types", tag = "webhooks",
    responses((status = 200, body = shared::openapi::ListOf<EventTypeInfo>), shared::openapi::CommonErrors))]
pub async fn list_event_types(_app: &App, _req: Req) -> ApiResult<Reply> {
    // Without the schemas and examples (cloned here only to be dropped).
    let brief: Vec<EventTypeInfo> = catalog()
        .iter()
        .map(|t| EventTypeInfo {
            object: t.object.clone(),
            kind: t.kind.clone(),
            description: t.description.clone(),
            data_schema: t.data_schema.clone(),
            schema: None,
            example: None,
        })
        .collect();
    Ok(Reply::list(&brief, None))
}

/// One event type with the whole event's JSON Schema (draft 2020-12, standing alone with its
/// `$defs`) and an example made from it.
#[utoipa::path(get, path = "/webhooks/event-types/{type}", tag = "webhooks",
    params(("type" = String, Path, description = "An event type, e.g. `post.published`")),
    responses((status = 200, body = shared::openapi::Data<EventTypeInfo>), shared::openapi::CommonErrors))]
pub async fn get_event_type(_app: &App, req: Req) -> ApiResult<Reply> {
    let name = req.param("type");
    let found = catalog().iter().find(|t| t.kind == name).ok_or_else(|| ApiError::not_found("event type"))?;
    Ok(Reply::ok(found))
}
