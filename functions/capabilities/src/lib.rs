//! Capability confirmations: a person approves one exact write before an agent's API key may
//! perform it. A key created with `requires_confirmation` must send, on a confirmable route,
//! `X-Capability-Confirmation` with a token minted here by a credential with the `confirm`
//! scope (a person's OAuth token), plus the confirmed `Idempotency-Key` and body; the shared
//! pipeline consumes the token (`shared::confirmation`).
//!
//! A restricted key's request without a token is recorded as an approval request (the 428 names
//! it, `domain::approvals`): a person reads its preview here and approves or denies it, and the
//! same request sent again runs once.
//!
//! Items (pk = WS#<workspace>): `CAPCONF#<cc id>` (the confirmation, its token's hash and state)
//! and `APPROVAL#<apr id>` (the approval request); kept 90 days for the audit.

pub mod pages;

use domain::approvals::{ApprovalRequest, ApprovalRequestId, ApprovalState, DenyApproval};
use domain::capabilities::{Capability, Confirmation, ConfirmationId, ConfirmationStatus, CreateConfirmation};
use serde::Deserialize;
use shared::{ApiResult, App, Reply, Req, WsReq};

shared::area! {
    tag = "capabilities", description = "Capability confirmations: a person approves the exact write before an agent's key may perform it",
    operations = [
        list_capabilities,
        create_confirmation [needs = Scope::Confirm],
        list_confirmations, get_confirmation,
        list_approval_requests, get_approval_request,
        // Who may decide is the effect's rule (domain::capabilities::may_approve), on top of this.
        approve_request [needs = Scope::Confirm], deny_request [needs = Scope::Confirm],
    ],
    schemas = [Capability, Confirmation, ConfirmationStatus, CreateConfirmation, domain::capabilities::Bound,
        ApprovalRequest, ApprovalState, DenyApproval, domain::approvals::Preview, domain::approvals::EmailPreview, domain::approvals::Changed],
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
pub async fn create_confirmation(app: &App, req: WsReq) -> ApiResult<Reply> {
    let (shown, stored) = domain::capabilities::create(app, &req.ws, &req.principal, req.json()?).await?;
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
pub async fn list_confirmations(app: &App, req: WsReq) -> ApiResult<Reply> {
    let q: ListConfirmations = req.query_as()?;
    let page = req
        .page(app, "capability_confirmations", &[("capability", q.capability.as_deref()), ("api_key_id", q.api_key_id.as_deref())])
        .await?;
    let found = domain::capabilities::list(app, &req.ws, q.capability.as_deref(), q.api_key_id.as_deref(), page.after.clone(), page.limit);
    Ok(Reply::page(&page, found.await?))
}

/// One capability confirmation and its audit trail (never the token).
#[utoipa::path(get, path = "/capability-confirmations/{id}", tag = "capabilities", params(("id" = String, Path, description = "cc_...")),
    responses((status = 200, body = shared::openapi::Data<Confirmation>), shared::openapi::CommonErrors))]
pub async fn get_confirmation(app: &App, req: WsReq) -> ApiResult<Reply> {
    let id: ConfirmationId = req.path_id("id")?;
    Ok(Reply::ok(&domain::capabilities::load(app, &req.ws, &id).await?))
}

/// The filter of `GET /approval-requests`.
#[derive(Deserialize)]
struct ListApprovals {
    state: Option<ApprovalState>,
}

/// Restricted keys' writes waiting for a person (or decided), newest first; `state` filters.
#[utoipa::path(get, path = "/approval-requests", tag = "capabilities",
    params(shared::openapi::PageParams, ("state" = Option<ApprovalState>, Query)),
    responses((status = 200, body = shared::openapi::ListOf<ApprovalRequest>), shared::openapi::CommonErrors))]
pub async fn list_approval_requests(app: &App, req: WsReq) -> ApiResult<Reply> {
    let q: ListApprovals = req.query_as()?;
    let state = q.state.map(|s| s.as_str());
    let page = req.page(app, "approval_requests", &[("state", state)]).await?;
    Ok(Reply::page(&page, domain::approvals::list(app, &req.ws, q.state, page.after.clone(), page.limit).await?))
}

/// One approval request: what the agent asked, the preview of everything it will do, the
/// objects it depends on, and the decision.
#[utoipa::path(get, path = "/approval-requests/{id}", tag = "capabilities", params(("id" = String, Path, description = "apr_...")),
    responses((status = 200, body = shared::openapi::Data<ApprovalRequest>), shared::openapi::CommonErrors))]
pub async fn get_approval_request(app: &App, req: WsReq) -> ApiResult<Reply> {
    let id: ApprovalRequestId = req.path_id("id")?;
    Ok(Reply::ok(&domain::approvals::load(app, &req.ws, &id).await?))
}

/// Approve: a person who may cause the effect themselves (its least scope through their role;
/// never a key) mints the confirmation bound to the versions recorded when it was asked. The
/// agent's same request (same Idempotency-Key and body) then runs once, without a token. 409
/// when it was decided or expired, or (`stale`, naming what changed) when something it depends
/// on changed since. Events `approval.approved`, `capability.confirmed`.
#[utoipa::path(post, path = "/approval-requests/{id}/approve", tag = "capabilities", params(("id" = String, Path, description = "apr_...")),
    responses((status = 200, body = shared::openapi::Data<ApprovalRequest>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn approve_request(app: &App, req: WsReq) -> ApiResult<Reply> {
    let id: ApprovalRequestId = req.path_id("id")?;
    Ok(Reply::ok(&domain::approvals::approve(app, &req.ws, &req.principal, &id).await?))
}

/// Deny, with a reason: the request never runs (the approver rule of approving applies). Event
/// `approval.denied`.
#[utoipa::path(post, path = "/approval-requests/{id}/deny", tag = "capabilities", params(("id" = String, Path, description = "apr_...")),
    request_body = DenyApproval,
    responses((status = 200, body = shared::openapi::Data<ApprovalRequest>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn deny_request(app: &App, req: WsReq) -> ApiResult<Reply> {
    let id: ApprovalRequestId = req.path_id("id")?;
    Ok(Reply::ok(&domain::approvals::deny(app, &req.ws, &req.principal, &id, req.json()?).await?))
}
