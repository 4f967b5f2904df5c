//! Contacts: one per email address in a workspace (case-insensitive, enforced by a claim item
//! under races), filters and prefix search without scans, notes and an activity timeline, and
//! asynchronous imports (see [`import`]; the worker is `functions/contact-import`).

mod imports;

use domain::contacts::ops::{self, CreateNote};
use domain::contacts::{self as model, Contact, ContactStatus, CreateContact, EmailStatus, UpdateContact};
use domain::contacts::{import, list};
// `area!` names handlers by identifier (and utoipa's `__path_` types with them).
use imports::*;
use shared::{ApiResult, App, Reply, WsReq};

shared::area! {
    tag = "contacts", description = "Contacts, their timeline, and bulk imports",
    operations = [
        list_contacts, create_contact, get_contact, update_contact, delete_contact, add_note, list_activities,
        create_import [class = Class::ContactImport, max_body = import::MAX_IMPORT_BODY],
        get_import, list_import_errors,
    ],
    schemas = [Contact, model::EmailChange, ContactStatus, EmailStatus, CreateContact, UpdateContact, CreateNote, model::Activity,
        import::CreateImport, import::ImportJob, import::ImportStatus, import::OnConflict, import::RowError],
}

/// Create a contact. The email is unique in the workspace (case-insensitive): a second create
/// of the same address answers 409 with `details[0].meta.contact_id`. An address erased under
/// GDPR answers 409 unless the request says `"resubscribe": true` with `consent`.
#[utoipa::path(post, path = "/contacts", tag = "contacts", request_body = CreateContact,
    responses((status = 201, body = shared::openapi::Data<Contact>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_contact(app: &App, req: WsReq) -> ApiResult<Reply> {
    Ok(Reply::created(&ops::create(app, &req.ws, req.json()?).await?))
}

/// One contact.
#[utoipa::path(get, path = "/contacts/{id}", tag = "contacts", params(("id" = String, Path, description = "ct_...")),
    responses((status = 200, body = shared::openapi::Data<Contact>), shared::openapi::CommonErrors))]
pub async fn get_contact(app: &App, req: WsReq) -> ApiResult<Reply> {
    Ok(Reply::ok(&model::load(app, &req.ws, &req.path_id("id")?).await?.0))
}

/// Contacts, oldest first. `q` is a case-insensitive prefix of the email, the full name or the
/// last name (an index, not a scan); `created_after` seeks by id time.
#[utoipa::path(get, path = "/contacts", tag = "contacts",
    params(shared::openapi::PageParams,
        ("status" = Option<ContactStatus>, Query), ("email_status" = Option<EmailStatus>, Query), ("label" = Option<String>, Query),
        ("q" = Option<String>, Query, min_length = 1, max_length = 100, pattern = "\\S", description = "prefix of email, full name or last name"),
        ("created_after" = Option<String>, Query, format = DateTime, description = "RFC 3339")),
    responses((status = 200, body = shared::openapi::ListOf<Contact>), shared::openapi::CommonErrors))]
pub async fn list_contacts(app: &App, req: WsReq) -> ApiResult<Reply> {
    let f = req.query_as::<list::ListContacts>()?.check()?;
    let bound = f.bound();
    let filters: Vec<(&str, Option<&str>)> = bound.iter().map(|(k, v)| (*k, v.as_deref())).collect();
    let page = req.page(app, "contacts", &filters).await?;
    Ok(Reply::page(&page, list::list(app, &req.ws, &f, page.after.clone(), page.limit).await?))
}

/// Change a contact's fields; email_status is never lowered from bounced or complained.
#[utoipa::path(patch, path = "/contacts/{id}", tag = "contacts", request_body = UpdateContact, params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Contact>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn update_contact(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: UpdateContact = req.json()?;
    let ws = &req.ws;
    let (old, version) = model::load(app, ws, &req.path_id("id")?).await?;
    Ok(Reply::ok(&ops::update(app, ws, &req.principal, old, version, input).await?))
}

/// Delete a contact: its deals stay, unlinked (`contact_id` null), each with a `deal.updated`
/// event; its emails are unlinked and its timeline and former identities removed soon after.
#[utoipa::path(delete, path = "/contacts/{id}", tag = "contacts", params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<shared::openapi::Deleted>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn delete_contact(app: &App, req: WsReq) -> ApiResult<Reply> {
    let ws = &req.ws;
    let (c, version) = model::load(app, ws, &req.path_id("id")?).await?;
    ops::delete(app, ws, &c, version, |tx| domain::gdpr::jobs::purge_contact(tx, ws, &c.id)).await?;
    domain::deals::unlink_contact(app, ws, &c.id).await?;
    Ok(Reply::deleted(&c.id, "contact"))
}

/// Add a note to the contact's timeline.
#[utoipa::path(post, path = "/contacts/{id}/notes", tag = "contacts", request_body = CreateNote, params(("id" = String, Path)),
    responses((status = 201, body = shared::openapi::Data<model::Activity>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn add_note(app: &App, req: WsReq) -> ApiResult<Reply> {
    let id: model::ContactId = req.path_id("id")?;
    Ok(Reply::created(&ops::add_note(app, &req.ws, &id, req.json()?).await?))
}

/// The contact's timeline, newest first: its own changes, notes, and other areas' changes
/// that reference it (deals).
#[utoipa::path(get, path = "/contacts/{id}/activities", tag = "contacts",
    params(("id" = String, Path), shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<model::Activity>), shared::openapi::CommonErrors))]
pub async fn list_activities(app: &App, req: WsReq) -> ApiResult<Reply> {
    let ws = &req.ws;
    let (c, _) = model::load(app, ws, &req.path_id("id")?).await?;
    let page = req.page(app, &format!("contacts/{}/activities", c.id), &[]).await?;
    Ok(Reply::page(&page, list::activities(app, ws, &c.id, page.after.clone(), page.limit).await?))
}
