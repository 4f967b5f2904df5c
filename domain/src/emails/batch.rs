//! Batches: up to 100 sends in one request, accepted all or none (strict) or each on its
//! own (permissive), and the batch item that lists its emails in request order.

use super::compose::{self, SendEmail};
use super::{Email, EmailBatchId, EmailId, EmailStatus, batch_sk};
use crate::effects as fx;
use crate::keys;
use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::error::ErrorDetail;
use shared::ids::Timestamp;
use shared::store::{self, ws_pk};
use shared::validate::validation_error as validation;
use shared::{ApiError, ApiResult, App};
use utoipa::ToSchema;

pub const MAX_BATCH: usize = 100;

#[derive(Deserialize, Serialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Validation {
    /// One invalid email rejects the whole batch (400 with `emails[i].field` details).
    #[default]
    Strict,
    /// Valid emails are accepted; invalid ones come back in `errors` with their index.
    Permissive,
}

/// What `POST /emails/batch` takes.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SendBatch {
    /// 1 to 100 emails, each like `POST /emails`.
    #[schema(value_type = Vec<SendEmail>, min_items = 1, max_items = 100)]
    pub emails: Vec<serde_json::Value>,
    #[serde(default)]
    pub validation: Validation,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct BatchEntry {
    pub index: usize,
    pub id: EmailId,
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
    pub id: EmailBatchId,
    /// Always `email_batch`.
    pub object: String,
    pub validation: Validation,
    /// The accepted emails, in request order.
    pub emails: Vec<BatchEntry>,
    /// The rejected ones (permissive only).
    pub errors: Vec<BatchError>,
    pub created_at: Timestamp,
}

/// Check, render and store a batch, then enqueue it (also used by `make bench`).
/// `origin`: the request's pages origin, for the unsubscribe links of its marketing mail.
pub async fn accept(
    grant: &shared::authority::Grant,
    app: &App,
    ws: &WorkspaceId,
    input: SendBatch,
    origin: Option<&str>,
) -> ApiResult<EmailBatch> {
    if input.emails.is_empty() || input.emails.len() > MAX_BATCH {
        return Err(ApiError::validation("emails", format!("must hold 1 to {MAX_BATCH} emails")));
    }
    let now = chrono::Utc::now();
    let now_secs = now.timestamp();
    // Under an Idempotency-Key the ids are the key's: a retry of a batch that failed part-way
    // names the same batch and emails, and completes it (`compose::send_many`).
    let batch_id = shared::idempotency::derived_id("eb", "batch").unwrap_or_else(|| shared::ids::new_id("eb"));
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
    let ctx = compose::load_context(app, ws, &refs, origin).await?;
    let mut accepted: Vec<(usize, Email)> = vec![];
    for (index, d) in drafts {
        let id = shared::idempotency::derived_id("em", &format!("email:{index}")).map(crate::ids::EmailId::trusted);
        match compose::finish(ws, d, &ctx, Some(&batch_id), id, now) {
            Ok(e) => accepted.push((index, e)),
            Err(errs) => errors.push(BatchError { index, errors: errs }),
        }
    }
    errors.sort_by_key(|e| e.index);
    if input.validation == Validation::Strict && !errors.is_empty() {
        return Err(batch_validation(errors));
    }
    let batch = EmailBatch {
        id: crate::ids::EmailBatchId::trusted(batch_id),
        object: "email_batch".into(),
        validation: input.validation,
        emails: accepted.iter().map(|(index, e)| BatchEntry { index: *index, id: e.id.clone(), status: e.status }).collect(),
        errors,
        created_at: shared::ids::Timestamp::from(now),
    };
    let emails: Vec<Email> = accepted.into_iter().map(|(_, e)| e).collect();
    // Each email's files are written once for it: the request's files in all are bounded like
    // one message, so a batch naming one large upload in every entry is refused, not written
    // a hundred times.
    let files: u64 = emails.iter().filter(|e| e.status.pending()).flat_map(|e| &e.attachments).map(|a| a.size).sum();
    let limit = app.cfg.email.max_message_bytes as u64;
    if files > limit {
        return Err(ApiError::validation(
            "emails",
            format!(
                "the emails' files come to {files} bytes in all; one request may carry {limit} (send large files in fewer emails per batch)"
            ),
        ));
    }
    let record = store::Record::new(ws_pk(ws), batch_sk(&batch.id), &batch)?.item;
    // Checked and built in full first: a batch a key without restrictions could not send is
    // refused the same way for a restricted one, before anyone is asked.
    let auth = grant.authorize_value::<fx::SendEmail>(&super::Outgoing::of(&emails))?;
    compose::send_many(&auth, app, ws, &emails, vec![record], now_secs).await?;
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

/// A page of a batch's emails in request order, after the email id `after`; the page and the
/// last id when more follow (the batch item lists them, so a page is a slice of it).
pub async fn page(
    app: &App,
    ws: &WorkspaceId,
    batch_id: &EmailBatchId,
    after: Option<&str>,
    limit: usize,
) -> ApiResult<(Vec<Email>, Option<String>)> {
    let item = app.db.get(&ws_pk(ws), &batch_sk(batch_id)).await?.ok_or_else(|| ApiError::not_found("email batch"))?;
    let batch: EmailBatch = store::from_item(item)?;
    let ids: Vec<&str> = batch.emails.iter().map(|e| e.id.as_str()).collect();
    let start = after.and_then(|a| ids.iter().position(|id| *id == a).map(|p| p + 1)).unwrap_or(0);
    let slice: Vec<&str> = ids.iter().skip(start).take(limit).copied().collect();
    let keys: Vec<(String, String)> = slice.iter().map(|id| (ws_pk(ws), keys::EMAIL.sk(&crate::ids::EmailId::trusted(*id)))).collect();
    let emails: Vec<Email> = app.db.batch_get(&keys).await?.into_iter().map(store::from_item).collect::<ApiResult<_>>()?;
    let next = (start + slice.len() < ids.len()).then(|| slice.last().map(|id| id.to_string())).flatten();
    Ok((emails, next))
}
