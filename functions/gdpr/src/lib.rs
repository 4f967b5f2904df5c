//! GDPR: the consent ledger (append-only), exports (Art. 15 and 20: one JSON document per job
//! in S3, downloaded through a presigned link) and erasures (Art. 17: every area's data about a
//! subject removed or anonymised, a hashed tombstone, an audit record). The jobs run in the
//! GDPR worker; what each area exports and erases is declared in its domain module
//! (`domain::gdpr::rules`).

use domain::contacts::consents::{self, Consent, ConsentSource, ConsentState, PurposeState, RecordConsent};
use domain::effects::{self as fx, Effect as _};
use domain::gdpr::erasure::{self, Erasure};
use domain::gdpr::export::{self, ExportJob, ExportScope};
use domain::gdpr::jobs::{JobError, JobStatus};
use domain::gdpr::{ErasureId, ExportId, SubjectRef};
use serde::Deserialize;
use shared::{ApiError, ApiResult, App, Reply, WsReq};
use utoipa::ToSchema;

shared::area! {
    tag = "gdpr", description = "Consents, exports and erasures of personal data (GDPR)",
    operations = [
        record_consent, get_consents,
        create_export [class = Class::GdprExport, effects = &[fx::ExportSubject::INFO, fx::ExportWorkspace::INFO]],
        list_exports, get_export,
        create_erasure [needs = Scope::Admin, effects = &[fx::EraseSubject::INFO]], list_erasures, get_erasure,
    ],
    schemas = [Consent, domain::contacts::consents::PortalProof, ConsentSource, ConsentState, PurposeState, RecordConsent, SubjectRef, ExportJob, ExportScope, JobStatus, JobError,
        CreateExport, Erasure, erasure::CreateErasure],
}

/// Record one consent event (never updated or deleted, except by an erasure). Withdrawing
/// `marketing_email` unsubscribes the address's contact in the same transaction; granting it
/// subscribes an unsubscribed one (bounced and complained stay). Events
/// `gdpr.consent.granted` / `gdpr.consent.withdrawn`.
#[utoipa::path(post, path = "/gdpr/consents", tag = "gdpr", request_body = RecordConsent,
    responses((status = 201, body = shared::openapi::Data<Consent>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn record_consent(app: &App, req: WsReq) -> ApiResult<Reply> {
    let mut input: RecordConsent = req.json()?;
    let r = SubjectRef { email: input.email.take(), contact_id: input.contact_id.take() };
    let subject = domain::gdpr::resolve(app, &req.ws, &r, "subject").await.map_err(unprefix)?;
    let consent = consents::build(input, &subject)?;
    consents::record(app, &req.ws, &consent).await?;
    Ok(Reply::created(&consent))
}

/// The consent routes name the subject at the top level (`email`, `contact_id`).
fn unprefix(mut e: ApiError) -> ApiError {
    for d in &mut e.details {
        d.field = d.field.take().map(|f| f.trim_start_matches("subject.").to_string());
    }
    if e.details.iter().any(|d| d.field.as_deref() == Some("subject")) {
        e = ApiError::validation("email", "give exactly one of email or contact_id");
    }
    e
}

#[derive(Deserialize)]
struct ConsentQuery {
    email: Option<String>,
    contact_id: Option<String>,
}

/// The current state per purpose and the full history (oldest first, up to 1,000 events) of
/// one subject, by `email` or `contact_id`.
#[utoipa::path(get, path = "/gdpr/consents", tag = "gdpr",
    params(("email" = Option<String>, Query, format = Email), ("contact_id" = Option<domain::ids::ContactId>, Query)),
    responses((status = 200, body = shared::openapi::Data<ConsentState>), shared::openapi::CommonErrors))]
pub async fn get_consents(app: &App, req: WsReq) -> ApiResult<Reply> {
    let q: ConsentQuery = req.query_as()?;
    let subject =
        domain::gdpr::resolve(app, &req.ws, &SubjectRef { email: q.email, contact_id: q.contact_id }, "subject").await.map_err(unprefix)?;
    Ok(Reply::ok(&consents::state(app, &req.ws, &subject).await?))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateExport {
    /// Everything about one person.
    pub subject: Option<SubjectRef>,
    /// `workspace`: everything the workspace holds (owner and admin only).
    pub scope: Option<ExportScope>,
}

/// Start an export: `{"subject": {"email" | "contact_id"}}` or `{"scope": "workspace"}`. Answers
/// 202 with the job; `GET /gdpr/exports/{id}` follows it and, once completed, carries a
/// download link valid 1 hour (a fresh one on every read, for 7 days). Events
/// `gdpr.export.completed` / `gdpr.export.failed`.
#[utoipa::path(post, path = "/gdpr/exports", tag = "gdpr", request_body = CreateExport,
    responses((status = 202, body = shared::openapi::Data<ExportJob>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_export(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: CreateExport = req.json()?;
    let ws = &req.ws;
    let job = match (input.subject, input.scope) {
        (Some(r), None | Some(ExportScope::Subject)) => {
            let subject = domain::gdpr::resolve(app, ws, &r, "subject").await?;
            export::start_subject(&req.grant, app, ws, &subject).await?
        }
        (None, Some(ExportScope::Workspace)) => export::start_workspace(&req.grant, app, ws).await?,
        _ => return Err(ApiError::validation("subject", "give a subject, or scope: workspace (not both)")),
    };
    Ok(Reply::accepted(&job))
}

/// Export jobs, newest first (without download links; read one job for its link).
#[utoipa::path(get, path = "/gdpr/exports", tag = "gdpr", params(shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<ExportJob>), shared::openapi::CommonErrors))]
pub async fn list_exports(app: &App, req: WsReq) -> ApiResult<Reply> {
    let page = req.page(app, "gdpr_exports", &[]).await?;
    Ok(Reply::page(&page, export::list(app, &req.ws, page.after.clone(), page.limit).await?))
}

/// One export job; when completed, a presigned download link.
#[utoipa::path(get, path = "/gdpr/exports/{id}", tag = "gdpr", params(("id" = String, Path, description = "gx_...")),
    responses((status = 200, body = shared::openapi::Data<ExportJob>), shared::openapi::CommonErrors))]
pub async fn get_export(app: &App, req: WsReq) -> ApiResult<Reply> {
    let id: ExportId = req.path_id("id")?;
    let mut job = export::load(app, &req.ws, &id).await?.ok_or_else(|| ApiError::not_found("export"))?;
    // The link only to whoever could have made the export on their own: the scope, and no
    // person's confirmation needed for it (a restricted key sees the job, never the link).
    let may_create = match job.scope {
        ExportScope::Workspace => fx::ExportWorkspace::INFO.held_by(&req.principal),
        ExportScope::Subject => fx::ExportSubject::INFO.held_by(&req.principal),
    };
    if !may_create {
        job.download_url = None;
    }
    Ok(Reply::ok(&job))
}

/// Erase a subject everywhere (owner or admin): contact, timeline, claims and search entries,
/// email recipients and bodies (queued emails are cancelled), bookings' and deals' links,
/// consents, portal sessions, import rows, stored responses, events and webhook deliveries that
/// name them. The address gets a hashed tombstone (it cannot be re-created without new
/// consent); the audit record names no one. Answers 202; event `gdpr.erasure.completed`.
#[utoipa::path(post, path = "/gdpr/erasures", tag = "gdpr", request_body = erasure::CreateErasure,
    responses((status = 202, body = shared::openapi::Data<Erasure>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_erasure(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: erasure::CreateErasure = req.json()?;
    Ok(Reply::accepted(&erasure::request(&req.grant, app, &req.ws, input).await?))
}

/// Erasure audit records, newest first.
#[utoipa::path(get, path = "/gdpr/erasures", tag = "gdpr", params(shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<Erasure>), shared::openapi::CommonErrors))]
pub async fn list_erasures(app: &App, req: WsReq) -> ApiResult<Reply> {
    let page = req.page(app, "gdpr_erasures", &[]).await?;
    Ok(Reply::page(&page, erasure::list(app, &req.ws, page.after.clone(), page.limit).await?))
}

/// One erasure and its audit record.
#[utoipa::path(get, path = "/gdpr/erasures/{id}", tag = "gdpr", params(("id" = String, Path, description = "ge_...")),
    responses((status = 200, body = shared::openapi::Data<Erasure>), shared::openapi::CommonErrors))]
pub async fn get_erasure(app: &App, req: WsReq) -> ApiResult<Reply> {
    let id: ErasureId = req.path_id("id")?;
    Ok(Reply::ok(&erasure::load(app, &req.ws, &id).await?.ok_or_else(|| ApiError::not_found("erasure"))?))
}
