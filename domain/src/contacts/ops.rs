//! The contacts routes' operations: each validates, writes with its side items and events,
//! and answers the contact (or activity) as it now is.

use super::{self as model, Activity, Contact, ContactId, CreateContact, UpdateContact, commit_create, commit_update, contact_sk};
use serde::Deserialize;
use shared::auth::WorkspaceId;
use shared::events::Event;
use shared::events::EventType;
use shared::outbox::Tx;
use shared::store::{self, TxError, ws_pk};
use shared::validate::Errors;
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
        c.email_changed = Some(model::EmailChange::by(by, shared::ids::Timestamp::now()));
    }
    c.updated_at = shared::ids::Timestamp::now();
    commit_update(app, ws, &old, &c, version).await?;
    Ok(c)
}

/// Delete a contact with its claim and search entries (`contact.deleted`), and `with` the
/// caller's writes in the same transaction: the GDPR worker's job that removes its history
/// (`gdpr::jobs::purge_contact`; kept under its id, an erasure by address could no longer
/// find it). Its deals are the deals area's to unlink (`deals::unlink_contact`).
pub async fn delete(app: &App, ws: &WorkspaceId, c: &Contact, version: i64, with: impl FnOnce(Tx) -> Tx) -> ApiResult<()> {
    with(model::delete_tx(ws, c, version)).commit(app).await.map_err(TxError::stale)
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
        .event(Event::new(ws, EventType::ContactNoteAdded, &activity))
        .commit(app)
        .await
        .map_err(|e| e.on_condition(|_| ApiError::not_found("contact")))?;
    Ok(activity)
}
