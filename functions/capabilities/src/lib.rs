//! Capability confirmations: a person approves one exact write before an agent's API key may
//! perform it. A key created with `requires_confirmation` must send, on a confirmable route,
//! `X-Capability-Confirmation` with a token minted here by a credential with the `confirm`
//! scope (a person's OAuth token), plus the confirmed `Idempotency-Key` and body; the shared
//! pipeline consumes the token (`shared::confirmation`).
//!
//! Items (pk = WS#<workspace>, sk = CAPCONF#<cc id>): the confirmation, its token's hash and
//! state; kept 90 days for the audit.

use domain::capabilities::{Capability, Confirmation, ConfirmationId, ConfirmationStatus, CreateConfirmation};
use serde::Deserialize;
use shared::{ApiResult, App, Reply, Req};

shared::area! {
    tag = "capabilities", description = "Capability confirmations: a person approves the exact write before an agent's key may perform it",
    operations = [
        list_capabilities,
        create_confirmation [needs = Scope::Confirm],
        list_confirmations, get_confirmation,
    ],
    schemas = [Capability, Confirmation, ConfirmationStatus, CreateConfirmation, domain::capabilities::Bound],
}

/// Every confirmable write: each capability with every method and path that can cause it.
#[utoipa::path(get, path = "/capabilities", tag = "capabilities",
    responses((status = 200, body = shared::openapi::ListOf<Capability>), shared::openapi::CommonErrors))]
pub async fn list_capabilities(_app: &App, _req: Req) -> ApiResult<Reply> {
    Ok(Reply::list(domain::capabilities::all(), None))
}

/// Confirm one exact write (capability, method, path, idempotency key, body) for one API key,
/// on the state it was approved on (`bound`). Needs the `confirm` scope (a person's OAuth
/// token). The token in the answer is shown once and runs one execution. Event
/// `capability.confirmed`.
#[utoipa::path(post, path = "/capability-confirmations", tag = "capabilities", request_body = CreateConfirmation,
    responses((status = 201, body = shared::openapi::Data<Confirmation>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_confirmation(app: &App, req: Req) -> ApiResult<Reply> {
    let (shown, stored) = domain::capabilities::create(app, req.ws()?, &req.principal.subject, req.json()?).await?;
    Ok(Reply::created(&shown).replay_as(&stored))
}

/// The filters of `GET /capability-confirmations` (`limit` and `cursor` are the page's).
#[derive(Deserialize)]
struct ListConfirmations {
    capability: Option<String>,
    api_key_id: Option<String>,
}

/// The audit trail, oldest first: who approved what, for which request, and its use.
#[utoipa::path(get, path = "/capability-confirmations", tag = "capabilities",
    params(shared::openapi::PageParams, ("capability" = Option<String>, Query), ("api_key_id" = Option<String>, Query)),
    responses((status = 200, body = shared::openapi::ListOf<Confirmation>), shared::openapi::CommonErrors))]
pub async fn list_confirmations(app: &App, req: Req) -> ApiResult<Reply> {
    let q: ListConfirmations = req.query_as()?;
    let page = req
        .page(app, "capability_confirmations", &[("capability", q.capability.as_deref()), ("api_key_id", q.api_key_id.as_deref())])
        .await?;
    let (items, next) =
        domain::capabilities::list(app, req.ws()?, q.capability.as_deref(), q.api_key_id.as_deref(), page.after.clone(), page.limit)
            .await?;
    Ok(Reply::list(&items, next.map(|a| page.cursor_for(&a))))
}

/// One capability confirmation and its audit trail (never the token).
#[utoipa::path(get, path = "/capability-confirmations/{id}", tag = "capabilities", params(("id" = String, Path, description = "cc_...")),
    responses((status = 200, body = shared::openapi::Data<Confirmation>), shared::openapi::CommonErrors))]
pub async fn get_confirmation(app: &App, req: Req) -> ApiResult<Reply> {
    let id: ConfirmationId = req.path_id("id")?;
    Ok(Reply::ok(&domain::capabilities::load(app, req.ws()?, &id).await?))
}
