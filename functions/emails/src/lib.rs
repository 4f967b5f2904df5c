//! Emails: sending domains, templates, single and batch sends (rendered and checked on accept), scheduling,
//! cancelling, suppression of unsubscribed/bounced/complained contacts, and the status history
//! the sender (`functions/email-sender`) and SES notifications fill in.
//!
//! Status: scheduled -> queued -> sent -> delivered | bounced | complained, or failed;
//! cancelled (while scheduled or queued) and suppressed (no deliverable `to` recipient).

mod domains;
mod templates;

use domain::emails::templates::{Content, Template};
// `area!` names handlers by identifier (and utoipa's `__path_` types with them).
use domains::*;
use templates::*;

use domain::effects::{self as fx, Effect as _};
use domain::emails::{self as model, compose};

use compose::SendEmail;
use model::batch::{self, BatchEntry, BatchError, EmailBatch, SendBatch, Validation};
use model::suppressions::{self, RemoveSuppression};
use model::{Email, EmailStatus};
use shared::validate::validation_error as validation;
use shared::{ApiResult, App, Reply, WsReq};

shared::area! {
    tag = "emails", description = "Templates, sends and batches through Amazon SES, with delivery status",
    operations = [
        send_email [class = Class::EmailSend, max_body = MAX_BATCH_BODY, effects = &[fx::SendEmail::INFO]],
        send_batch [class = Class::EmailBatch, max_body = MAX_BATCH_BODY, effects = &[fx::SendEmail::INFO]],
        create_upload [class = Class::EmailBatch],
        list_emails, get_email, cancel_email,
        list_templates, create_template, get_template, update_template, delete_template,
        list_suppressions, remove_suppression [needs = Scope::Admin],
        list_domains, get_domain, create_domain [needs = Scope::Admin, effects = &[fx::CreateSendingDomain::INFO]],
        delete_domain [needs = Scope::Admin, effects = &[fx::DeleteSendingDomain::INFO]],
    ],
    schemas = [Email, EmailStatus, SendEmail, SendBatch, EmailBatch, BatchEntry, BatchError, Validation,
        model::SuppressedRecipient, model::attachments::Attachment, model::attachments::NewAttachment, model::attachments::CreateUpload, model::attachments::EmailUpload, model::Feedback, model::SendError,
        Template, Content, model::templates::CreateTemplate, model::templates::UpdateTemplate,
        model::suppressions::Suppression, suppressions::RemoveSuppression,
        model::domains::SendingDomain, model::domains::DomainStatus, model::domains::DnsRecord, CreateDomain],
}

/// A batch of up to 100 emails, or one email with its files, within what Lambda can take
/// (see `MAX_LARGE_BODY_BYTES`).
pub const MAX_BATCH_BODY: usize = shared::request::MAX_LARGE_BODY_BYTES;

/// Send one email (raw or from a template), now or at `scheduled_at`. Answers 202 with the
/// email: `queued`, `scheduled`, or `suppressed` when every `to` recipient is a contact who
/// unsubscribed (unless `transactional`), bounced or complained.
#[utoipa::path(post, path = "/emails", tag = "emails", request_body = SendEmail,
    responses((status = 202, body = shared::openapi::Data<Email>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn send_email(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: SendEmail = req.json()?;
    let now = chrono::Utc::now();
    let now_secs = now.timestamp();
    let draft = compose::check(input, now).map_err(validation)?;
    let ws = &req.ws;
    let ctx = compose::load_context(app, ws, &[&draft], req.pages_origin.as_deref()).await?;
    let email = compose::finish(ws, draft, &ctx, None, None, now).map_err(validation)?;
    // The value a person approves is this very email, as it will be sent.
    let auth = req.grant.authorize_value::<fx::SendEmail>(&model::Outgoing::of([&email]))?;
    compose::send(&auth, app, ws, &email, now_secs).await?;
    // Like lists, the answer leaves the bodies out (`GET /emails/{id}` has them): it stays
    // small enough to keep for idempotent replays.
    Ok(Reply::accepted(&email.without_bodies()))
}

/// Send up to 100 emails in one request (rate class email_batch). Strict validation (the
/// default) accepts all or none; permissive accepts the valid ones and lists the others. An
/// entry that is not a send (an unknown field, a wrong type) refuses the request in either mode.
#[utoipa::path(post, path = "/emails/batch", tag = "emails", request_body = SendBatch,
    responses((status = 202, body = shared::openapi::Data<EmailBatch>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn send_batch(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: SendBatch = req.json()?;
    let batch = batch::accept(&req.grant, app, &req.ws, input, req.pages_origin.as_deref()).await?;
    Ok(Reply::accepted(&batch))
}

/// A link to upload one file too large for a request body (`PUT` it, with the answer's
/// `headers`, within the hour); sends name it by `upload_id` for a day. Counts against the
/// `email_batch` class (each upload may be a message's worth of storage).
#[utoipa::path(post, path = "/emails/attachments", tag = "emails", request_body = model::attachments::CreateUpload,
    responses((status = 201, body = shared::openapi::Data<model::attachments::EmailUpload>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_upload(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: model::attachments::CreateUpload = req.json()?;
    Ok(Reply::created(&model::attachments::create_upload(app, &req.ws, &input).await?))
}

/// One email with its bodies (one BatchGetItem).
#[utoipa::path(get, path = "/emails/{id}", tag = "emails", params(("id" = String, Path, description = "em_...")),
    responses((status = 200, body = shared::openapi::Data<Email>), shared::openapi::CommonErrors))]
pub async fn get_email(app: &App, req: WsReq) -> ApiResult<Reply> {
    Ok(Reply::ok(&model::load_with_body(app, &req.ws, &req.path_id("id")?).await?))
}

/// Emails, newest first; filters combine. Bodies are left out (see `GET /emails/{id}`).
#[utoipa::path(get, path = "/emails", tag = "emails",
    params(shared::openapi::PageParams,
        ("status" = Option<EmailStatus>, Query), ("contact_id" = Option<domain::ids::ContactId>, Query), ("tag" = Option<String>, Query),
        ("batch_id" = Option<domain::ids::EmailBatchId>, Query, description = "eb_...: the batch's emails in request order")),
    responses((status = 200, body = shared::openapi::ListOf<Email>), shared::openapi::CommonErrors))]
pub async fn list_emails(app: &App, req: WsReq) -> ApiResult<Reply> {
    let q: model::list::ListEmails = req.query_as()?;
    let page = req.page(app, "emails", &q.bound()).await?;
    Ok(Reply::page(&page, model::list::list(app, &req.ws, &q, page.after.clone(), page.limit).await?))
}

/// The workspace's suppression list: addresses that bounced permanently or complained,
/// contact or not. Sends to them are suppressed, transactional ones included.
#[utoipa::path(get, path = "/emails/suppressions", tag = "emails",
    params(shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<model::suppressions::Suppression>), shared::openapi::CommonErrors))]
pub async fn list_suppressions(app: &App, req: WsReq) -> ApiResult<Reply> {
    let page = req.page(app, "emails/suppressions", &[]).await?;
    Ok(Reply::page(&page, model::suppressions::list(app, &req.ws, page.after.clone(), page.limit).await?))
}

/// Take an address off the suppression list (owners and admins), with a recorded reason.
#[utoipa::path(delete, path = "/emails/suppressions/{address}", tag = "emails", request_body = RemoveSuppression,
    params(("address" = String, Path, description = "the suppressed address")),
    responses((status = 200, body = shared::openapi::Data<shared::openapi::Deleted>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn remove_suppression(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: RemoveSuppression = req.json()?;
    let removed = suppressions::remove(app, &req.ws, req.param("address"), &input.reason, &req.principal.subject).await?;
    Ok(Reply::deleted(&removed.address, "email_suppression"))
}

/// Cancel an email that has not left: scheduled, or queued and not being sent this moment.
#[utoipa::path(post, path = "/emails/{id}/cancel", tag = "emails", params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Email>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn cancel_email(app: &App, req: WsReq) -> ApiResult<Reply> {
    let ws = &req.ws;
    let id: model::EmailId = req.path_id("id")?;
    let e = compose::cancel(app, ws, &id).await?;
    Ok(Reply::ok(&e))
}
