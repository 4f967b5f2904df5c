//! `GET /contacts`: its filters, checked once and bound to the page's cursor, and the two ways
//! to answer them: a prefix search over the search entries (`q`), or the contacts (or their
//! status index) in id order, which is creation order.

use super::{self as model, Contact, ContactStatus, EmailStatus, contact_sk};
use crate::ids::ContactId;
use crate::keys;
use serde::Deserialize;
use shared::auth::WorkspaceId;
use shared::store::{self, s, ws_pk};
use shared::validate::Errors;
use shared::{ApiResult, App};

/// The filters of a contact list, as the query string gives them; they combine.
#[derive(Deserialize)]
pub struct ListContacts {
    pub status: Option<ContactStatus>,
    pub email_status: Option<EmailStatus>,
    pub label: Option<String>,
    /// A case-insensitive prefix of the email, the full name or the last name.
    pub q: Option<String>,
    /// RFC 3339.
    pub created_after: Option<String>,
}

/// The filters, checked.
pub struct Filters {
    query: ListContacts,
    created_after: Option<chrono::DateTime<chrono::Utc>>,
}

impl ListContacts {
    /// Every bad parameter in one 400.
    pub fn check(self) -> ApiResult<Filters> {
        let mut errs = Errors::new();
        if self.q.as_deref().is_some_and(|v| v.trim().is_empty() || v.chars().count() > 100) {
            errs.add("q", "must be 1 to 100 characters");
        }
        let created_after = self.created_after.as_deref().and_then(|v| errs.timestamp("created_after", v));
        errs.finish()?;
        Ok(Filters { query: self, created_after })
    }
}

impl Filters {
    /// The filters as a page's cursor binds them.
    pub fn bound(&self) -> [(&'static str, Option<String>); 5] {
        let q = &self.query;
        [
            ("status", q.status.map(model::status_str)),
            ("email_status", q.email_status.map(model::email_status_str)),
            ("label", q.label.clone()),
            ("q", q.q.clone()),
            ("created_after", q.created_after.clone()),
        ]
    }

    fn keeps(&self, c: &Contact) -> bool {
        let q = &self.query;
        q.status.is_none_or(|s| c.status == s)
            && q.email_status.is_none_or(|s| c.email_status == s)
            && q.label.as_ref().is_none_or(|l| c.labels.contains(l))
            && self.created_after.is_none_or(|t| c.created_at >= shared::ids::Timestamp::from(t))
    }
}

/// One page of contacts after `after`, and the key to go on from.
pub async fn list(
    app: &App,
    ws: &WorkspaceId,
    f: &Filters,
    after: Option<String>,
    limit: usize,
) -> ApiResult<(Vec<Contact>, Option<String>)> {
    if let Some(q) = &f.query.q {
        return search(app, ws, &q.trim().to_lowercase(), f, after, limit).await;
    }
    // created_after: ids are time-ordered, so it is a seek to the first id of that millisecond.
    let mut after = after;
    if let Some(t) = f.created_after {
        let bound = contact_sk(&ContactId::trusted(format!("ct_{}", ulid::Ulid::from_parts(t.timestamp_millis().max(0) as u64, 0))));
        if after.as_ref().is_none_or(|a| *a < bound) {
            after = Some(bound);
        }
    }
    let status = f.query.status.map(model::status_str);
    let mut spec = match &status {
        Some(st) => keys::CONTACTS_BY_STATUS.query((ws, st), after, limit),
        None => keys::CONTACTS.query(ws, after, limit),
    };
    let mut vals = vec![];
    let mut conds = vec![];
    if let Some(es) = f.query.email_status {
        conds.push("email_status = :es");
        vals.push((":es", s(model::email_status_str(es))));
    }
    if let Some(l) = &f.query.label {
        conds.push("contains(labels, :label)");
        vals.push((":label", s(l)));
    }
    let expr = conds.join(" AND ");
    if !conds.is_empty() {
        spec = spec.filter(&expr, vals);
    }
    shared::request::page::<Contact>(app, spec).await
}

/// `q` (lower case): one Query over the search entries, then the contacts by key. The filters
/// apply to the page found; a contact matching on two terms is listed once (at its first
/// term).
async fn search(
    app: &App,
    ws: &WorkspaceId,
    q: &str,
    f: &Filters,
    after: Option<String>,
    limit: usize,
) -> ApiResult<(Vec<Contact>, Option<String>)> {
    let term = q.replace('#', "");
    let out = app.db.query_page(keys::CONTACT_SEARCHES.query_partial(ws, &term, after, limit)).await?;
    let entries: Vec<(String, String)> = out
        .items
        .iter()
        .filter_map(|i| Some((store::get_str(i, "sk")?.to_string(), store::get_str(i, "contact_id")?.to_string())))
        .collect();
    let keys: Vec<(String, String)> = entries.iter().map(|(_, id)| (ws_pk(ws), contact_sk(&ContactId::trusted(id)))).collect();
    let found: Vec<Contact> = app.db.batch_get(&keys).await?.into_iter().map(store::from_item).collect::<ApiResult<_>>()?;
    let mut contacts: Vec<Contact> = vec![];
    for (sk, id) in &entries {
        let Some(c) = found.iter().find(|c| &c.id == id) else { continue };
        let term = model::search_term_of(sk).unwrap_or_default();
        if model::matched_earlier(c, q, term) || !f.keeps(c) || contacts.iter().any(|x| x.id == c.id) {
            continue;
        }
        contacts.push(c.clone());
    }
    Ok((contacts, out.next_after))
}

/// One page of a contact's timeline, newest first.
pub async fn activities(
    app: &App,
    ws: &WorkspaceId,
    id: &model::ContactId,
    after: Option<String>,
    limit: usize,
) -> ApiResult<(Vec<model::Activity>, Option<String>)> {
    shared::request::page(app, keys::ACTIVITIES.query_within(ws, id, after, limit).descending()).await
}
