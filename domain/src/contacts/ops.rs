//! The contacts routes' operations: each validates, writes with its side items and events,
//! and answers the contact (or activity) as it now is.

use super::{
    self as model, Activity, Contact, ContactId, CreateContact, EmailStatus, UpdateContact, commit_create, commit_update, contact_sk,
};
use crate::keys;
use serde::Deserialize;
use shared::auth::WorkspaceId;
use shared::events::Event;
use shared::outbox::Tx;
use shared::store::{self, TxError, ws_pk};
use shared::validate::{Errors, parse_enum};
use shared::{ApiError, ApiResult, App};
use utoipa::ToSchema;

/// Create a contact; with `resubscribe`, an erased address comes back with its new consent.
pub async fn create(app: &App, ws: &WorkspaceId, mut input: CreateContact) -> ApiResult<Contact> {
    let (resubscribe, evidence) = (input.resubscribe, input.consent.take());
    let mut errs = Errors::new();
    let c = input.build(&mut errs);
    if resubscribe && evidence.is_none() {
        errs.add("consent", "required with resubscribe: the new consent (text_shown, text_version)");
    }
    if !resubscribe && evidence.is_some() {
        errs.add("consent", "only with resubscribe: true (record other consent at POST /gdpr/consents)");
    }
    errs.finish()?;
    let subject = crate::privacy::Subject::of(&c);
    let consent = evidence.map(|e| e.consent(&subject, "marketing_email", true)).transpose()?;
    commit_create(app, ws, &c, consent.as_ref()).await?;
    Ok(c)
}

/// The filters a search applies to the contacts its terms found.
pub struct SearchFilters<'a> {
    pub status: Option<&'a str>,
    pub email_status: Option<&'a str>,
    pub label: Option<&'a str>,
    pub created_after: Option<chrono::DateTime<chrono::Utc>>,
}

/// `q` (lower case): one Query over the search entries, then the contacts by key. The filters
/// apply to the page found; a contact matching on two terms is listed once (at its first
/// term). The page and the key to go on from.
pub async fn search(
    app: &App,
    ws: &WorkspaceId,
    q: &str,
    f: &SearchFilters<'_>,
    after: Option<String>,
    limit: usize,
) -> ApiResult<(Vec<Contact>, Option<String>)> {
    let term = q.replace('#', "");
    let out = app.db.query_page(keys::CONTACT_SEARCHES.query_partial(&[ws], &[], &term, after, limit)).await?;
    let entries: Vec<(String, String)> = out
        .items
        .iter()
        .filter_map(|i| Some((store::get_str(i, "sk")?.to_string(), store::get_str(i, "contact_id")?.to_string())))
        .collect();
    let keys: Vec<(String, String)> = entries.iter().map(|(_, id)| (ws_pk(ws), contact_sk(id))).collect();
    let found: Vec<Contact> = app.db.batch_get(&keys).await?.into_iter().map(store::from_item).collect::<ApiResult<_>>()?;
    let mut contacts = vec![];
    for (sk, id) in &entries {
        let Some(c) = found.iter().find(|c| &c.id == id) else { continue };
        let term = model::search_term_of(sk).unwrap_or_default();
        if model::matched_earlier(c, q, term)
            || f.status.is_some_and(|s| model::status_str(c.status) != s)
            || f.email_status.is_some_and(|s| parse_enum::<EmailStatus>(s) != Some(c.email_status))
            || f.label.is_some_and(|l| !c.labels.iter().any(|x| x == l))
            || f.created_after.is_some_and(|t| c.created_at < shared::ids::Timestamp::from(t))
            || contacts.iter().any(|x: &Contact| x.id == c.id)
        {
            continue;
        }
        contacts.push(c.clone());
    }
    Ok((contacts, out.next_after))
}

/// Apply a patch to a loaded contact (`email_status` is never lowered from bounced or
/// complained); a changed address records who changed it.
pub async fn update(
    app: &App,
    ws: &WorkspaceId,
    by: &shared::auth::Principal,
    old: Contact,
    version: i64,
    input: UpdateContact,
) -> ApiResult<Contact> {
    let mut c = old.clone();
    let mut errs = Errors::new();
    input.apply(&mut c, &mut errs);
    model::validate(&mut errs, &c);
    errs.finish()?;
    if model::changed_fields(&old, &c).is_empty() {
        return Ok(old);
    }
    if c.email != old.email {
        c.email_changed = Some(model::EmailChange::by(by));
    }
    c.updated_at = shared::ids::Timestamp::now();
    commit_update(app, ws, &old, &c, version).await?;
    Ok(c)
}

/// Delete a contact with its claim and search entries (`contact.deleted`). Its deals are the
/// deals area's to unlink (`deals::unlink_contact`).
pub async fn delete(app: &App, ws: &WorkspaceId, c: &Contact, version: i64) -> ApiResult<()> {
    model::delete_tx(ws, c, version).commit(app).await.map_err(TxError::stale)
}

/// A note on a contact's timeline.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateNote {
    /// 1 to 10,000 characters.
    #[schema(min_length = 1, max_length = 10000, pattern = "\\S")]
    pub body: String,
}

/// Add a note to an existing contact's timeline (`contact.note.added`).
pub async fn add_note(app: &App, ws: &WorkspaceId, id: &ContactId, input: CreateNote) -> ApiResult<Activity> {
    let mut errs = Errors::new();
    errs.text("body", &input.body, 1, 10_000);
    if input.body.trim().is_empty() && !input.body.is_empty() {
        errs.add("body", "must not be blank");
    }
    errs.finish()?;
    let note_id = shared::ids::new_id("note");
    let item = model::activity(ws, id, "note", "Note added", serde_json::json!({"note_id": note_id, "body": input.body}))?;
    let activity: Activity = store::from_item(item.clone())?;
    Tx::new()
        .check(ws_pk(ws), contact_sk(id), "attribute_exists(pk)")
        .put(item)
        .event(Event::new(ws, "contact.note.added", &activity))
        .commit(app)
        .await
        .map_err(|e| e.on_condition(|_| ApiError::not_found("contact")))?;
    Ok(activity)
}
