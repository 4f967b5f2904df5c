//! Contacts: one per email address in a workspace (case-insensitive, enforced by a claim item
//! under races), filters and prefix search without scans, notes and an activity timeline, and
//! asynchronous imports (see [`import`]; the worker is `functions/contact-import`).

pub mod csv;
pub mod import;
pub mod model;

use model::{Contact, ContactStatus, EmailStatus, contact_sk};
use serde::Deserialize;
use shared::events::Event;
use shared::store::{self, Tx, TxError, n, s, ws_pk};
use shared::validate::{Errors, Patch, parse_enum};
use shared::{ApiError, ApiResult, App, Reply, Req, route};
use std::collections::BTreeMap;
use utoipa::ToSchema;

pub static ROUTES: &[shared::routing::Route] = &[
    route!(GET "/contacts", Read, list_contacts),
    route!(POST "/contacts", Write, create_contact),
    route!(POST "/contacts/imports", ContactImport, import::create_import, max_body = import::MAX_IMPORT_BODY),
    route!(GET "/contacts/imports/{id}", Read, import::get_import),
    route!(GET "/contacts/imports/{id}/errors", Read, import::list_import_errors),
    route!(GET "/contacts/{id}", Read, get_contact),
    route!(PATCH "/contacts/{id}", Write, update_contact),
    route!(DELETE "/contacts/{id}", Write, delete_contact),
    route!(POST "/contacts/{id}/notes", Write, add_note),
    route!(GET "/contacts/{id}/activities", Read, list_activities),
];

/// How often a create retries a transaction that collided with a concurrent one.
const CONFLICT_RETRIES: u32 = 5;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateContact {
    pub email: String,
    #[serde(default)]
    pub first_name: Option<String>,
    #[serde(default)]
    pub last_name: Option<String>,
    #[serde(default)]
    pub phone: Option<String>,
    #[serde(default)]
    pub company: Option<String>,
    #[serde(default)]
    pub job_title: Option<String>,
    #[serde(default)]
    pub status: Option<ContactStatus>,
    #[serde(default)]
    pub email_status: Option<EmailStatus>,
    #[serde(default)]
    pub labels: Vec<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub custom_fields: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

impl CreateContact {
    /// The contact this input describes, with field errors added to `errs`.
    pub fn build(self, errs: &mut Errors) -> Contact {
        let email = model::normalise_email(&self.email).unwrap_or_else(|| {
            errs.add("email", "must be a valid email address");
            self.email.clone()
        });
        let now = shared::ids::now_rfc3339();
        let trim = |v: Option<String>| v.map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let c = Contact {
            id: shared::ids::new_id("ct"),
            object: "contact".into(),
            email,
            first_name: trim(self.first_name),
            last_name: trim(self.last_name),
            phone: trim(self.phone),
            company: trim(self.company),
            job_title: trim(self.job_title),
            status: self.status.unwrap_or_default(),
            email_status: self.email_status.unwrap_or_default(),
            labels: self.labels.into_iter().map(|l| l.trim().to_string()).collect(),
            custom_fields: self.custom_fields,
            metadata: self.metadata,
            created_at: now.clone(),
            updated_at: now,
        };
        model::validate(errs, &c);
        c
    }
}

/// Commit a create, retrying transactions that collided with a concurrent one; a taken email
/// is 409 with the holder's id.
pub async fn commit_create(app: &App, ws: &str, c: &Contact) -> ApiResult<()> {
    for attempt in 0..=CONFLICT_RETRIES {
        match model::create_tx(app, ws, c, Tx::new())?.commit(app).await {
            Ok(()) => return Ok(()),
            Err(TxError::Condition(0)) => return Err(model::duplicate(&c.email, model::email_owner(app, ws, &c.email).await?)),
            Err(TxError::Condition(_)) => return Err(ApiError::conflict("the contact was created concurrently")),
            Err(TxError::Api(e)) if e.code == shared::error::ErrorCode::Conflict && attempt < CONFLICT_RETRIES => {
                // TransactionConflict: another create of the same address is in flight. Once it
                // commits, the retry sees its claim and answers with its id.
                tokio::time::sleep(std::time::Duration::from_millis(20 + rand::random_range(0..30u64 << attempt))).await;
            }
            Err(TxError::Api(e)) => return Err(e),
        }
    }
    Err(ApiError::conflict("the contact was changed concurrently; retry"))
}

/// Create a contact. The email is unique in the workspace (case-insensitive): a second create
/// of the same address answers 409 with `details[0].meta.contact_id`.
#[utoipa::path(post, path = "/contacts", tag = "contacts", request_body = CreateContact,
    responses((status = 201, body = shared::openapi::Data<Contact>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_contact(app: &App, req: Req) -> ApiResult<Reply> {
    let input: CreateContact = req.json()?;
    let mut errs = Errors::new();
    let c = input.build(&mut errs);
    errs.finish()?;
    commit_create(app, req.ws(), &c).await?;
    Ok(Reply::created(&c))
}

#[utoipa::path(get, path = "/contacts/{id}", tag = "contacts", params(("id" = String, Path, description = "ct_...")),
    responses((status = 200, body = shared::openapi::Data<Contact>), shared::openapi::CommonErrors))]
pub async fn get_contact(app: &App, req: Req) -> ApiResult<Reply> {
    Ok(Reply::ok(&model::load(app, req.ws(), req.param("id")).await?.0))
}

/// Contacts, oldest first. `q` is a case-insensitive prefix of the email, the full name or the
/// last name (an index, not a scan); `created_after` seeks by id time.
#[utoipa::path(get, path = "/contacts", tag = "contacts",
    params(("limit" = Option<u32>, Query, description = "1..100, default 50"), ("cursor" = Option<String>, Query),
        ("status" = Option<ContactStatus>, Query), ("email_status" = Option<EmailStatus>, Query), ("label" = Option<String>, Query),
        ("q" = Option<String>, Query, description = "prefix of email, full name or last name"),
        ("created_after" = Option<String>, Query, description = "RFC 3339")),
    responses((status = 200, body = shared::openapi::ListOf<Contact>), shared::openapi::CommonErrors))]
pub async fn list_contacts(app: &App, req: Req) -> ApiResult<Reply> {
    let (status, email_status, label, q, created_after) =
        (req.query("status"), req.query("email_status"), req.query("label"), req.query("q"), req.query("created_after"));
    let mut errs = Errors::new();
    if status.is_some_and(|v| parse_enum::<ContactStatus>(v).is_none()) {
        errs.add("status", "must be one of lead, prospect, customer, churned, archived");
    }
    if email_status.is_some_and(|v| parse_enum::<EmailStatus>(v).is_none()) {
        errs.add("email_status", "must be one of subscribed, unsubscribed, bounced, complained");
    }
    if q.is_some_and(|v| v.trim().is_empty() || v.len() > 100) {
        errs.add("q", "must be 1 to 100 characters");
    }
    let after_time = created_after.and_then(|v| errs.timestamp("created_after", v));
    errs.finish()?;
    let filters = [("status", status), ("email_status", email_status), ("label", label), ("q", q), ("created_after", created_after)];
    let page = req.page(app, "contacts", &filters).await?;
    let ws = req.ws();
    if let Some(q) = q {
        return search(app, &page, ws, &q.trim().to_lowercase(), status, email_status, label, created_after.and(after_time)).await;
    }
    // created_after: ids are time-ordered, so it is a seek to the first id of that millisecond.
    let mut after = page.after.clone();
    if let Some(t) = after_time {
        let bound = contact_sk(&format!("ct_{}", ulid::Ulid::from_parts(t.timestamp_millis().max(0) as u64, 0)));
        if after.as_ref().is_none_or(|a| *a < bound) {
            after = Some(bound);
        }
    }
    let mut spec = match status {
        Some(st) => store::QuerySpec::new(format!("{}#CONTACT#{st}", ws_pk(ws)), "CONTACT#", after, page.limit).on_gsi1(),
        None => store::QuerySpec::new(ws_pk(ws), "CONTACT#", after, page.limit),
    };
    let mut vals = vec![];
    let mut conds = vec![];
    if let Some(es) = email_status {
        conds.push("email_status = :es");
        vals.push((":es", s(es)));
    }
    if let Some(l) = label {
        conds.push("contains(labels, :label)");
        vals.push((":label", s(l)));
    }
    let expr = conds.join(" AND ");
    if !conds.is_empty() {
        spec = spec.filter(&expr, vals);
    }
    shared::http::list_page::<Contact>(app, &page, spec).await
}

/// `q`: one Query over the search entries, then the contacts by key. Other filters apply to
/// the page found; a contact matching on two terms is listed once (at its first term).
#[allow(clippy::too_many_arguments)]
async fn search(
    app: &App,
    page: &shared::cursor::PageRequest,
    ws: &str,
    q: &str,
    status: Option<&str>,
    email_status: Option<&str>,
    label: Option<&str>,
    created_after: Option<chrono::DateTime<chrono::Utc>>,
) -> ApiResult<Reply> {
    let prefix = format!("CSEARCH#{}", q.replace('#', ""));
    let out = store::query_page(app, store::QuerySpec::new(ws_pk(ws), prefix, page.after.clone(), page.limit)).await?;
    let entries: Vec<(String, String)> = out
        .items
        .iter()
        .filter_map(|i| Some((store::get_str(i, "sk")?.to_string(), store::get_str(i, "contact_id")?.to_string())))
        .collect();
    let keys: Vec<(String, String)> = entries.iter().map(|(_, id)| (ws_pk(ws), contact_sk(id))).collect();
    let found: Vec<Contact> = store::batch_get(app, &keys).await?.into_iter().map(store::from_item).collect::<ApiResult<_>>()?;
    let mut contacts = vec![];
    for (sk, id) in &entries {
        let Some(c) = found.iter().find(|c| &c.id == id) else { continue };
        let term = model::search_term_of(sk).unwrap_or_default();
        if model::matched_earlier(c, q, term)
            || status.is_some_and(|s| model::status_str(c.status) != s)
            || email_status.is_some_and(|s| parse_enum::<EmailStatus>(s) != Some(c.email_status))
            || label.is_some_and(|l| !c.labels.iter().any(|x| x == l))
            || created_after.is_some_and(|t| c.created_at.as_str() < shared::ids::format_time(t).as_str())
            || contacts.iter().any(|x: &Contact| x.id == c.id)
        {
            continue;
        }
        contacts.push(c.clone());
    }
    Ok(Reply::list(&contacts, out.next_after.map(|a| page.cursor_for(&a))))
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct UpdateContact {
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub email: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub first_name: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub last_name: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub phone: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub company: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub job_title: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<ContactStatus>)]
    pub status: Patch<ContactStatus>,
    #[serde(default)]
    #[schema(value_type = Option<EmailStatus>)]
    pub email_status: Patch<EmailStatus>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    pub labels: Patch<Vec<String>>,
    /// Merged: a key set to `null` is removed.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub custom_fields: Patch<BTreeMap<String, serde_json::Value>>,
    #[serde(default)]
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    pub metadata: Patch<BTreeMap<String, String>>,
}

impl UpdateContact {
    /// Apply to `c`; errors for fields that cannot be null.
    pub fn apply(self, c: &mut Contact, errs: &mut Errors) {
        if let Some(e) = self.email.required(errs, "email") {
            match model::normalise_email(&e) {
                Some(e) => c.email = e,
                None => errs.add("email", "must be a valid email address"),
            }
        }
        let text = |p: Patch<String>, target: &mut Option<String>| match p {
            Patch::Absent => {}
            Patch::Null => *target = None,
            Patch::Value(v) => *target = Some(v.trim().to_string()).filter(|v| !v.is_empty()),
        };
        text(self.first_name, &mut c.first_name);
        text(self.last_name, &mut c.last_name);
        text(self.phone, &mut c.phone);
        text(self.company, &mut c.company);
        text(self.job_title, &mut c.job_title);
        if let Some(v) = self.status.required(errs, "status") {
            c.status = v;
        }
        if let Some(v) = self.email_status.required(errs, "email_status") {
            c.email_status = v;
        }
        if let Some(l) = self.labels.or_empty() {
            c.labels = l.into_iter().map(|l| l.trim().to_string()).collect();
        }
        match self.custom_fields {
            Patch::Absent => {}
            Patch::Null => c.custom_fields.clear(),
            Patch::Value(m) => {
                for (k, v) in m {
                    if v.is_null() {
                        c.custom_fields.remove(&k);
                    } else {
                        c.custom_fields.insert(k, v);
                    }
                }
            }
        }
        errs.patch_metadata("metadata", self.metadata, &mut c.metadata);
    }
}

/// Commit an update; a taken new email is 409 with the holder's id.
pub async fn commit_update(app: &App, ws: &str, old: &Contact, new: &Contact, version: i64) -> ApiResult<()> {
    match model::update_tx(app, ws, old, new, version, Tx::new())?.commit(app).await {
        Ok(()) => Ok(()),
        // With a new email, write 0 is its claim.
        Err(TxError::Condition(0)) if old.email != new.email => {
            Err(model::duplicate(&new.email, model::email_owner(app, ws, &new.email).await?))
        }
        Err(e) => Err(e.stale()),
    }
}

#[utoipa::path(patch, path = "/contacts/{id}", tag = "contacts", request_body = UpdateContact, params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Contact>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn update_contact(app: &App, req: Req) -> ApiResult<Reply> {
    let input: UpdateContact = req.json()?;
    let ws = req.ws();
    let (old, version) = model::load(app, ws, req.param("id")).await?;
    let mut c = old.clone();
    let mut errs = Errors::new();
    input.apply(&mut c, &mut errs);
    model::validate(&mut errs, &c);
    errs.finish()?;
    if model::changed_fields(&old, &c).is_empty() {
        return Ok(Reply::ok(&old));
    }
    c.updated_at = shared::ids::now_rfc3339();
    commit_update(app, ws, &old, &c, version).await?;
    Ok(Reply::ok(&c))
}

/// Delete a contact: its deals stay, unlinked (`contact_id` null), each with a `deal.updated`
/// event.
#[utoipa::path(delete, path = "/contacts/{id}", tag = "contacts", params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<shared::openapi::Deleted>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn delete_contact(app: &App, req: Req) -> ApiResult<Reply> {
    let ws = req.ws();
    let (c, version) = model::load(app, ws, req.param("id")).await?;
    model::delete_tx(app, ws, &c, version).commit(app).await.map_err(TxError::stale)?;
    unlink_deals(app, ws, &c.id).await?;
    Ok(Reply::deleted(&c.id, "contact"))
}

/// Deals reference contacts through GSI2 (`WS#<ws>#DEALS#<contact>`). This area knows only
/// the deal fields it changes (`contact_id`, `updated_at`, `version`, the index keys); each
/// deal is unlinked in its own transaction with its event.
async fn unlink_deals(app: &App, ws: &str, contact_id: &str) -> ApiResult<()> {
    let mut after = None;
    loop {
        let spec = store::QuerySpec::new(format!("{}#DEALS#{contact_id}", ws_pk(ws)), "DEAL#", after, 100).on_gsi2();
        let out = store::query_keys_then_get(app, spec).await?;
        let work = out.items.into_iter().map(|item| async move {
            let mut deal: serde_json::Value = serde_dynamo::from_item(item.clone()).map_err(ApiError::internal)?;
            let now = shared::ids::now_rfc3339();
            deal["contact_id"] = serde_json::Value::Null;
            deal["updated_at"] = serde_json::Value::String(now.clone());
            let sk = store::get_str(&item, "sk").unwrap_or_default().to_string();
            let u = aws_sdk_dynamodb::types::Update::builder()
                .table_name(&app.cfg.table)
                .key("pk", s(ws_pk(ws)))
                .key("sk", s(&sk))
                .update_expression("SET contact_id = :null, updated_at = :now, version = version + :one REMOVE gsi2pk, gsi2sk")
                .condition_expression("contact_id = :cid")
                .expression_attribute_values(":null", aws_sdk_dynamodb::types::AttributeValue::Null(true))
                .expression_attribute_values(":now", s(&now))
                .expression_attribute_values(":one", n(1))
                .expression_attribute_values(":cid", s(contact_id))
                .build()
                .map_err(ApiError::internal)?;
            if let Some(o) = deal.as_object_mut() {
                o.retain(|k, _| !matches!(k.as_str(), "pk" | "sk" | "version" | "gsi1pk" | "gsi1sk" | "gsi2pk" | "gsi2sk"));
            }
            match Tx::new().update(u).event(app, Event::new(ws, "deal.updated", &deal)).commit(app).await {
                Ok(()) | Err(TxError::Condition(_)) => Ok(()),
                Err(TxError::Api(e)) => Err(e),
            }
        });
        futures_util::future::try_join_all(work).await?;
        match out.next_after {
            Some(a) => after = Some(a),
            None => return Ok(()),
        }
    }
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateNote {
    /// 1 to 10,000 characters.
    pub body: String,
}

/// Add a note to the contact's timeline.
#[utoipa::path(post, path = "/contacts/{id}/notes", tag = "contacts", request_body = CreateNote, params(("id" = String, Path)),
    responses((status = 201, body = shared::openapi::Data<model::Activity>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn add_note(app: &App, req: Req) -> ApiResult<Reply> {
    let input: CreateNote = req.json()?;
    let mut errs = Errors::new();
    errs.text("body", &input.body, 1, 10_000);
    if input.body.trim().is_empty() && !input.body.is_empty() {
        errs.add("body", "must not be blank");
    }
    errs.finish()?;
    let ws = req.ws();
    let id = req.param("id");
    if !shared::ids::is_valid("ct", id) {
        return Err(ApiError::not_found("contact"));
    }
    let note_id = shared::ids::new_id("note");
    let item = model::activity(ws, id, "note", "Note added", serde_json::json!({"note_id": note_id, "body": input.body}))?;
    let activity: model::Activity = store::from_item(item.clone())?;
    Tx::new()
        .check(app, ws_pk(ws), contact_sk(id), "attribute_exists(pk)")
        .put(app, item)
        .event(app, Event::new(ws, "contact.note.added", &activity))
        .commit(app)
        .await
        .map_err(|e| e.on_condition(|_| ApiError::not_found("contact")))?;
    Ok(Reply::created(&activity))
}

/// The contact's timeline, newest first: its own changes, notes, and other areas' changes
/// that reference it (deals).
#[utoipa::path(get, path = "/contacts/{id}/activities", tag = "contacts",
    params(("id" = String, Path), ("limit" = Option<u32>, Query, description = "1..100, default 50"), ("cursor" = Option<String>, Query)),
    responses((status = 200, body = shared::openapi::ListOf<model::Activity>), shared::openapi::CommonErrors))]
pub async fn list_activities(app: &App, req: Req) -> ApiResult<Reply> {
    let ws = req.ws();
    let (c, _) = model::load(app, ws, req.param("id")).await?;
    let page = req.page(app, &format!("contacts/{}/activities", c.id), &[]).await?;
    let spec = store::QuerySpec::new(ws_pk(ws), model::activity_prefix(&c.id), page.after.clone(), page.limit).descending();
    shared::http::list_page::<model::Activity>(app, &page, spec).await
}

#[derive(utoipa::OpenApi)]
#[openapi(
    paths(list_contacts, create_contact, get_contact, update_contact, delete_contact, add_note, list_activities,
        import::create_import, import::get_import, import::list_import_errors),
    components(schemas(Contact, ContactStatus, EmailStatus, CreateContact, UpdateContact, CreateNote, model::Activity,
        import::CreateImport, import::ImportJob, import::ImportStatus, import::OnConflict, import::RowError)),
    tags((name = "contacts", description = "Contacts, their timeline, and bulk imports"))
)]
pub struct ApiDoc;
