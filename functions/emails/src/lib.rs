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
use domain::keys;

use compose::SendEmail;
use model::{Email, EmailStatus};
use serde::{Deserialize, Serialize};
use shared::error::ErrorDetail;
use shared::events::Event;
use shared::outbox::Tx;
use shared::store::{self, s, ws_pk};
use shared::validate::validation_error as validation;
use shared::{ApiError, ApiResult, App, Reply, Req};
use utoipa::ToSchema;

shared::area! {
    tag = "emails", description = "Templates, sends and batches through Amazon SES, with delivery status",
    operations = [
        send_email [class = Class::EmailSend, effects = &[fx::SendEmail::INFO]],
        send_batch [class = Class::EmailBatch, max_body = MAX_BATCH_BODY, effects = &[fx::SendEmail::INFO]],
        list_emails, get_email, cancel_email,
        list_templates, create_template, get_template, update_template, delete_template,
        list_suppressions, remove_suppression [needs = Scope::Admin],
        list_domains, get_domain, create_domain [needs = Scope::Admin, effects = &[fx::CreateSendingDomain::INFO]],
        delete_domain [needs = Scope::Admin, effects = &[fx::DeleteSendingDomain::INFO]],
    ],
    schemas = [Email, EmailStatus, SendEmail, SendBatch, EmailBatch, BatchEntry, BatchError, Validation,
        model::SuppressedRecipient, model::Feedback, model::SendError,
        Template, Content, templates::CreateTemplate, templates::UpdateTemplate,
        model::suppressions::Suppression, RemoveSuppression,
        model::domains::SendingDomain, model::domains::DomainStatus, model::domains::DnsRecord, CreateDomain],
}

pub const MAX_BATCH: usize = 100;
/// A batch of up to 100 emails, within what Lambda can take (see `MAX_LARGE_BODY_BYTES`).
pub const MAX_BATCH_BODY: usize = shared::request::MAX_LARGE_BODY_BYTES;

fn now() -> (chrono::DateTime<chrono::Utc>, i64) {
    let t = chrono::Utc::now();
    (t, t.timestamp())
}

/// Send one email (raw or from a template), now or at `scheduled_at`. Answers 202 with the
/// email: `queued`, `scheduled`, or `suppressed` when every `to` recipient is a contact who
/// unsubscribed (unless `transactional`), bounced or complained.
#[utoipa::path(post, path = "/emails", tag = "emails", request_body = SendEmail,
    responses((status = 202, body = shared::openapi::Data<Email>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn send_email(app: &App, req: Req) -> ApiResult<Reply> {
    let input: SendEmail = req.json()?;
    let (now, now_secs) = now();
    let draft = compose::check(input, now).map_err(validation)?;
    let ws = req.ws();
    let ctx = compose::load_context(app, ws, &[&draft]).await?;
    let email = compose::finish(draft, &ctx, None, now).map_err(validation)?;
    compose::send(&req.grant.authorize::<fx::SendEmail>()?, app, ws, &email, now_secs).await?;
    // Like lists, the answer leaves the bodies out (`GET /emails/{id}` has them): it stays
    // small enough to keep for idempotent replays.
    let shown = Email { html: None, text: None, ..email };
    Ok(Reply::accepted(&shown))
}

#[derive(Deserialize, Serialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Validation {
    /// One invalid email rejects the whole batch (400 with `emails[i].field` details).
    #[default]
    Strict,
    /// Valid emails are accepted; invalid ones come back in `errors` with their index.
    Permissive,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SendBatch {
    /// 1 to 100 emails, each like `POST /emails`.
    #[schema(value_type = Vec<SendEmail>)]
    pub emails: Vec<serde_json::Value>,
    #[serde(default)]
    pub validation: Validation,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct BatchEntry {
    pub index: usize,
    #[schema(pattern = "^em_[0-7][0-9A-HJKMNP-TV-Z]{25}$")]
    pub id: String,
    pub status: EmailStatus,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct BatchError {
    pub index: usize,
    pub errors: Vec<ErrorDetail>,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct EmailBatch {
    /// `eb_...`
    #[schema(pattern = "^eb_[0-7][0-9A-HJKMNP-TV-Z]{25}$")]
    pub id: String,
    /// Always `email_batch`.
    pub object: String,
    pub validation: Validation,
    /// The accepted emails, in request order.
    pub emails: Vec<BatchEntry>,
    /// The rejected ones (permissive only).
    pub errors: Vec<BatchError>,
    #[schema(format = DateTime)]
    pub created_at: String,
}

/// Send up to 100 emails in one request (rate class email_batch). Strict validation (the
/// default) accepts all or none; permissive accepts the valid ones and lists the others. An
/// entry that is not a send (an unknown field, a wrong type) refuses the request in either mode.
#[utoipa::path(post, path = "/emails/batch", tag = "emails", request_body = SendBatch,
    responses((status = 202, body = shared::openapi::Data<EmailBatch>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn send_batch(app: &App, req: Req) -> ApiResult<Reply> {
    let input: SendBatch = req.json()?;
    let batch = accept_batch(&req.grant.authorize::<fx::SendEmail>()?, app, req.ws(), input).await?;
    Ok(Reply::accepted(&batch))
}

/// Check, render and store a batch, then enqueue it (also used by `make bench`).
pub async fn accept_batch(auth: &fx::Authority<fx::SendEmail>, app: &App, ws: &str, input: SendBatch) -> ApiResult<EmailBatch> {
    if input.emails.is_empty() || input.emails.len() > MAX_BATCH {
        return Err(ApiError::validation("emails", format!("must hold 1 to {MAX_BATCH} emails")));
    }
    let (now, now_secs) = now();
    let batch_id = shared::ids::new_id("eb");
    let mut errors: Vec<BatchError> = vec![];
    let mut drafts = vec![];
    // An entry that is not a send at all (an unknown field, a wrong type) is the caller's bug,
    // not a send to list as rejected: the request is refused in either mode, naming
    // `emails[i].<field>`, with every other entry's field problems beside it.
    let mut malformed = vec![];
    for (index, raw) in input.emails.into_iter().enumerate() {
        match shared::validate::parse_json::<SendEmail>(raw.to_string().as_bytes()) {
            Ok(i) => match compose::check(i, now) {
                Ok(d) => drafts.push((index, d)),
                Err(errs) => errors.push(BatchError { index, errors: errs }),
            },
            Err(e) => malformed.push(BatchError {
                index,
                errors: e.details.into_iter().map(|d| ErrorDetail { field: d.field.filter(|f| f != "body"), ..d }).collect(),
            }),
        }
    }
    if !malformed.is_empty() {
        let strict = input.validation == Validation::Strict;
        errors.extend(malformed);
        errors.sort_by_key(|e| e.index);
        let mut e = batch_validation(errors);
        if !strict {
            e.message = e.message.replacen("(strict validation)", "(an entry is not a send, whatever the mode)", 1);
        }
        return Err(e);
    }
    // Strict: report every field problem found without reads before doing any.
    if input.validation == Validation::Strict && !errors.is_empty() {
        return Err(batch_validation(errors));
    }
    let refs: Vec<&compose::Draft> = drafts.iter().map(|(_, d)| d).collect();
    let ctx = compose::load_context(app, ws, &refs).await?;
    let mut accepted: Vec<(usize, Email)> = vec![];
    for (index, d) in drafts {
        match compose::finish(d, &ctx, Some(&batch_id), now) {
            Ok(e) => accepted.push((index, e)),
            Err(errs) => errors.push(BatchError { index, errors: errs }),
        }
    }
    errors.sort_by_key(|e| e.index);
    if input.validation == Validation::Strict && !errors.is_empty() {
        return Err(batch_validation(errors));
    }
    let batch = EmailBatch {
        id: batch_id,
        object: "email_batch".into(),
        validation: input.validation,
        emails: accepted.iter().map(|(index, e)| BatchEntry { index: *index, id: e.id.clone(), status: e.status }).collect(),
        errors,
        created_at: shared::ids::format_time(now),
    };
    let emails: Vec<Email> = accepted.into_iter().map(|(_, e)| e).collect();
    let record = store::Record::new(ws_pk(ws), model::batch_sk(&batch.id), &batch)?.item;
    compose::send_many(auth, app, ws, &emails, vec![record], now_secs).await?;
    Ok(batch)
}

fn batch_validation(errors: Vec<BatchError>) -> ApiError {
    let details: Vec<ErrorDetail> = errors
        .into_iter()
        .flat_map(|b| {
            b.errors.into_iter().map(move |mut d| {
                d.field = Some(format!("emails[{}].{}", b.index, d.field.as_deref().unwrap_or("body")));
                d
            })
        })
        .collect();
    let mut e = validation(details);
    e.message = format!("the batch was rejected (strict validation): {}", e.message);
    e
}

/// One email with its bodies (one BatchGetItem).
#[utoipa::path(get, path = "/emails/{id}", tag = "emails", params(("id" = String, Path, description = "em_...")),
    responses((status = 200, body = shared::openapi::Data<Email>), shared::openapi::CommonErrors))]
pub async fn get_email(app: &App, req: Req) -> ApiResult<Reply> {
    let id: model::EmailId = req.path_id("id")?;
    let ws = req.ws();
    let items = app.db.batch_get(&[(ws_pk(ws), domain::keys::EMAIL.sk(&[&id])), (ws_pk(ws), model::body_sk(&id))]).await?;
    let mut email: Option<Email> = None;
    let mut body = None;
    for item in items {
        if store::get_str(&item, "sk").is_some_and(|sk| sk == model::body_sk(&id)) {
            body = Some(item);
        } else {
            email = Some(store::from_item(item)?);
        }
    }
    let mut email = email.ok_or_else(model::not_found)?;
    if let Some(b) = body {
        model::attach_body(&mut email, &b);
    }
    Ok(Reply::ok(&email))
}

/// Emails, newest first; filters combine. Bodies are left out (see `GET /emails/{id}`).
#[utoipa::path(get, path = "/emails", tag = "emails",
    params(shared::openapi::PageParams,
        ("status" = Option<EmailStatus>, Query), ("contact_id" = Option<String>, Query, pattern = "^ct_[0-7][0-9A-HJKMNP-TV-Z]{25}$"), ("tag" = Option<String>, Query),
        ("batch_id" = Option<String>, Query, description = "eb_...: the batch's emails in request order")),
    responses((status = 200, body = shared::openapi::ListOf<Email>), shared::openapi::CommonErrors))]
pub async fn list_emails(app: &App, req: Req) -> ApiResult<Reply> {
    let q: ListEmails = req.query_as()?;
    let parsed = q.status;
    let (status, contact, tag, batch) = (parsed.map(EmailStatus::as_str), q.contact_id.as_deref(), q.tag.as_deref(), q.batch_id.as_deref());
    let page = req.page(app, "emails", &[("status", status), ("contact_id", contact), ("tag", tag), ("batch_id", batch)]).await?;
    let ws = req.ws();
    let keep = |e: &Email| {
        parsed.is_none_or(|p| e.status == p)
            && contact.is_none_or(|c| e.contact_id.as_deref() == Some(c))
            && tag.is_none_or(|t| e.tags.iter().any(|x| x == t))
    };
    if let Some(b) = batch {
        // The batch item lists its emails in order; a page is a slice of it.
        let item = app.db.get(&ws_pk(ws), &model::batch_sk(b)).await?.ok_or_else(|| ApiError::not_found("email batch"))?;
        let batch: EmailBatch = store::from_item(item)?;
        let ids: Vec<&String> = batch.emails.iter().map(|e| &e.id).collect();
        let start = page.after.as_ref().and_then(|a| ids.iter().position(|id| *id == a).map(|p| p + 1)).unwrap_or(0);
        let slice: Vec<&String> = ids.iter().skip(start).take(page.limit).copied().collect();
        let keys: Vec<(String, String)> = slice.iter().map(|id| (ws_pk(ws), domain::keys::EMAIL.sk(&[id]))).collect();
        let emails: Vec<Email> = app.db.batch_get(&keys).await?.into_iter().map(store::from_item).collect::<ApiResult<_>>()?;
        let next = (start + slice.len() < ids.len()).then(|| page.cursor_for(slice.last().expect("a full page")));
        return Ok(Reply::list(&emails.into_iter().filter(keep).collect::<Vec<_>>(), next));
    }
    if let Some(c) = contact {
        let spec = keys::EMAILS_OF_CONTACT.query(&[ws, c], &[], page.after.clone(), page.limit).descending();
        let (emails, next) = shared::request::keyed_page::<Email>(app, spec).await?;
        return Ok(Reply::list(&emails.into_iter().filter(keep).collect::<Vec<_>>(), next.map(|a| page.cursor_for(&a))));
    }
    let mut spec = match parsed {
        Some(st) => keys::EMAILS_BY_STATUS.query(&[ws, st.as_str()], &[], page.after.clone(), page.limit),
        None => keys::EMAILS.query(&[ws], &[], page.after.clone(), page.limit),
    }
    .descending();
    if let Some(t) = tag {
        spec = spec.filter("contains(tags, :tag)", vec![(":tag", s(t))]);
    }
    shared::request::list_page::<Email>(app, &page, spec).await
}

/// The filters of `GET /emails` (`limit` and `cursor` are the page's).
#[derive(Deserialize)]
struct ListEmails {
    status: Option<EmailStatus>,
    #[serde(default, deserialize_with = "shared::validate::prefixed_id")]
    contact_id: Option<domain::contacts::ContactId>,
    tag: Option<String>,
    #[serde(default, deserialize_with = "shared::validate::prefixed_id")]
    batch_id: Option<model::EmailBatchId>,
}

/// The workspace's suppression list: addresses that bounced permanently or complained,
/// contact or not. Sends to them are suppressed, transactional ones included.
#[utoipa::path(get, path = "/emails/suppressions", tag = "emails",
    params(shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<model::suppressions::Suppression>), shared::openapi::CommonErrors))]
pub async fn list_suppressions(app: &App, req: Req) -> ApiResult<Reply> {
    let page = req.page(app, "emails/suppressions", &[]).await?;
    let spec = keys::EMAIL_SUPPRESSIONS.query(&[req.ws()], &[], page.after.clone(), page.limit);
    shared::request::list_page::<model::suppressions::Suppression>(app, &page, spec).await
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoveSuppression {
    /// Why the address may receive email again (1 to 500 characters); kept in the
    /// `email.suppression.removed` event.
    #[schema(min_length = 1, max_length = 500, pattern = "\\S")]
    pub reason: String,
}

/// Take an address off the suppression list (owners and admins), with a recorded reason.
#[utoipa::path(delete, path = "/emails/suppressions/{address}", tag = "emails", request_body = RemoveSuppression,
    params(("address" = String, Path, description = "the suppressed address")),
    responses((status = 200, body = shared::openapi::Data<shared::openapi::Deleted>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn remove_suppression(app: &App, req: Req) -> ApiResult<Reply> {
    let input: RemoveSuppression = req.json()?;
    let mut errs = shared::validate::Errors::new();
    errs.text("reason", &input.reason, 1, 500);
    errs.finish()?;
    let ws = req.ws();
    let address = req.param("address").to_ascii_lowercase();
    let sk = domain::keys::EMAIL_SUPPRESSION.sk(&[&address]);
    let (s, _): (model::suppressions::Suppression, i64) =
        app.db.get_object(ws, &sk).await?.ok_or_else(|| ApiError::not_found("suppression"))?;
    let data =
        serde_json::json!({"address": s.address, "previous_reason": s.reason, "reason": input.reason, "removed_by": req.principal.subject});
    Tx::new()
        .delete_if(ws_pk(ws), sk, "attribute_exists(pk)", vec![])
        .event(Event::new(ws, "email.suppression.removed", &data))
        .commit(app)
        .await
        .map_err(|e| e.on_condition(|_| ApiError::not_found("suppression")))?;
    Ok(Reply::deleted(&s.address, "email_suppression"))
}

/// Cancel an email that has not left: scheduled, or queued and not being sent this moment.
#[utoipa::path(post, path = "/emails/{id}/cancel", tag = "emails", params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Email>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn cancel_email(app: &App, req: Req) -> ApiResult<Reply> {
    let ws = req.ws();
    let id: model::EmailId = req.path_id("id")?;
    let e = compose::cancel(app, ws, &id).await?;
    Ok(Reply::ok(&e))
}
