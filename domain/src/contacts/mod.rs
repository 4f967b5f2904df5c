//! Contacts as stored, and the writes that keep their side items true.
//!
//! Items (pk = WS#<workspace>):
//! - `CONTACT#<id>`: the contact; GSI1 `WS#<ws>#CONTACT#<status>` / `CONTACT#<id>` serves the
//!   status filter;
//! - `CLAIM#EMAIL#<normalised email>`: the uniqueness claim (`contact_id`), written in the same
//!   transaction as the contact with `attribute_not_exists`, so one address is one contact
//!   however many creates race;
//! - `CSEARCH#<term>#<id>`: search entries (email, "first last", last name; lower case), so `q`
//!   is a prefix Query, never a scan;
//! - `ACT#<contact id>#<activity id>`: the contact's timeline (this area's changes, notes, and
//!   other areas' changes that reference the contact, via [`activity`]).

pub mod consents;
pub mod csv;
pub mod import;
mod input;
pub mod list;
pub mod ops;

pub use input::*;

use crate::ids::ActivityId;
use crate::keys;
use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::events::Event;
use shared::events::EventType;
use shared::ids::Timestamp;
use shared::outbox::Tx;
use shared::store::{self, Item, Record, s, ws_pk};
use shared::validate::Errors;
use shared::{ApiError, ApiResult, App};
use std::collections::{BTreeMap, HashMap};
use utoipa::ToSchema;

pub use crate::ids::ContactId;

/// What this area holds about a person (see `gdpr`): the contact, its claim, search entries
/// and timeline (notes included), and the rows and errors of imports that named the address.
pub const PRIVACY: &[crate::privacy::Rule] = {
    use crate::privacy::{Erase, Find, Rule};
    &[
        Rule {
            kind: keys::CONTACT,
            area: "contacts",
            find: Find::Key(|s| s.contact_id.as_deref().map(contact_sk)),
            export: true,
            erase: Erase::Delete,
        },
        Rule {
            kind: keys::CONTACT_EMAIL_CLAIM,
            area: "contacts",
            find: Find::Keys(|s| s.emails().map(email_sk).collect()),
            export: false,
            // Only the subject's own claims: a former address may belong to someone else now.
            erase: Erase::Custom(|a, w, i, s| {
                Box::pin(async move {
                    match (store::get_str(&i, "contact_id"), &s.contact_id) {
                        (Some(owner), Some(me)) if owner == me => {
                            a.db.delete(&ws_pk(w), store::get_str(&i, "sk").unwrap_or_default()).await
                        }
                        _ => Ok(()),
                    }
                })
            }),
        },
        Rule {
            kind: keys::CONTACT_SEARCH,
            area: "contacts",
            find: Find::Keys(|s| match &s.contact_id {
                Some(id) => s.terms.iter().map(|t| search_sk(t, id)).collect(),
                None => vec![],
            }),
            export: false,
            erase: Erase::Delete,
        },
        Rule {
            kind: keys::CONTACT_FORMER,
            area: "contacts",
            find: Find::Prefixes(|s| s.contact_id.iter().map(|c| keys::CONTACT_FORMER.sk_prefix(&[c])).collect()),
            export: true,
            erase: Erase::Delete,
        },
        Rule {
            kind: keys::ACTIVITY,
            area: "contacts",
            find: Find::Prefixes(|s| s.contact_id.iter().map(|c| activity_prefix(c)).collect()),
            export: true,
            erase: Erase::Delete,
        },
        Rule {
            kind: keys::IMPORT_ROWS,
            area: "contacts",
            find: Find::Mentions,
            export: false,
            erase: Erase::Custom(|a, w, i, s| Box::pin(import::erase_rows(a, w, i, s))),
        },
        Rule { kind: keys::IMPORT_ERROR, area: "contacts", find: Find::Mentions, export: false, erase: Erase::Delete },
    ]
};

pub const MAX_LABELS: usize = 20;
pub const MAX_LABEL_CHARS: usize = 50;
pub const MAX_CUSTOM_FIELDS: usize = 50;
pub const MAX_CUSTOM_FIELDS_BYTES: usize = 8 * 1024;
const MAX_TERM_CHARS: usize = 100;

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum ContactStatus {
    #[default]
    Lead,
    Prospect,
    Customer,
    Churned,
    Archived,
}

/// Named `ContactEmailStatus` in the contract: the email object has its own `EmailStatus`.
#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[schema(as = ContactEmailStatus)]
#[serde(rename_all = "snake_case")]
pub enum EmailStatus {
    #[default]
    Subscribed,
    Unsubscribed,
    Bounced,
    Complained,
}

fn enum_str<T: Serialize>(v: T) -> String {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct Contact {
    /// `ct_...`
    pub id: ContactId,
    /// Always `contact`.
    pub object: String,
    /// Lower-cased; unique in the workspace.
    pub email: String,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    /// E.164, e.g. `+4930123456`.
    pub phone: Option<String>,
    pub company: Option<String>,
    pub job_title: Option<String>,
    pub status: ContactStatus,
    pub email_status: EmailStatus,
    pub labels: Vec<String>,
    /// Up to 50 keys with string, number, boolean or null values; 8 KiB in all.
    #[schema(value_type = Object)]
    pub custom_fields: BTreeMap<String, serde_json::Value>,
    pub metadata: BTreeMap<String, String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// The last change of `email` after the contact was created; null when it never changed.
    /// The portal's self-service erasure needs an address nobody without the right to erase
    /// has rewritten (docs/authority.md).
    #[serde(default)]
    pub email_changed: Option<EmailChange>,
}

/// Who changed a contact's address, and when.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[schema(as = ContactEmailChange)]
pub struct EmailChange {
    pub at: Timestamp,
    /// The credential's subject (`key:<id>`, a person's `sub`, `portal:<contact>`).
    pub by: String,
    /// The credential could erase and export people itself (the admin scope, with no
    /// confirmation required for `gdpr.erasure` or `gdpr.export.subject`).
    pub by_admin: bool,
}

impl EmailChange {
    pub fn by(principal: &shared::auth::Principal) -> Self {
        Self {
            at: shared::ids::Timestamp::now(),
            by: principal.subject.clone(),
            // A restricted admin key cannot erase or export on its own either.
            by_admin: principal.scopes.contains(&shared::auth::Scope::Admin)
                && !principal.requires_confirmation.covers("gdpr.erasure")
                && !principal.requires_confirmation.covers("gdpr.export.subject"),
        }
    }

    /// Did someone who could not erase the person rewrite the address? Then proof of the
    /// address is not proof of being the person the contact's data is about.
    pub fn unvouched(c: &Contact) -> bool {
        c.email_changed.as_ref().is_some_and(|e| !e.by_admin)
    }

    /// The customer's self-service that cannot be undone or that takes their data out (portal
    /// erasure, portal export) needs an address nobody without the right to erase has
    /// rewritten: else a `write` key could point a contact at its own inbox and act as them.
    pub fn vouched(c: &Contact) -> ApiResult<()> {
        if Self::unvouched(c) {
            return Err(ApiError::forbidden(
                "this address was changed by the workspace after the contact was created, so it cannot confirm an erasure or an export here; ask the workspace",
            ));
        }
        Ok(())
    }
}

pub fn contact_sk(id: &str) -> String {
    keys::CONTACT.sk(&[id])
}
/// The sort key of the claim that makes `email` this workspace's one contact with it.
pub fn email_sk(email: &str) -> String {
    keys::CONTACT_EMAIL_CLAIM.sk(&[email])
}
/// The address a claim's sort key names.
pub fn email_of_claim(sk: &str) -> Option<&str> {
    sk.strip_prefix(keys::CONTACT_EMAIL_CLAIM.sk_prefix(&[]).as_str())
}
fn search_sk(term: &str, id: &str) -> String {
    keys::CONTACT_SEARCH.sk(&[term, id])
}

pub use shared::validate::normalise_email;

/// E.164: `+`, then 2 to 15 digits, the first not 0.
pub fn is_e164(p: &str) -> bool {
    let Some(d) = p.strip_prefix('+') else { return false };
    (2..=15).contains(&d.len()) && d.chars().all(|c| c.is_ascii_digit()) && !d.starts_with('0')
}

/// The lower-cased strings `q` prefix-matches: email, full name, last name.
pub fn search_terms(c: &Contact) -> Vec<String> {
    let clean = |v: &str| v.trim().to_lowercase().chars().filter(|ch| *ch != '#').take(MAX_TERM_CHARS).collect::<String>();
    let full = [c.first_name.as_deref(), c.last_name.as_deref()]
        .into_iter()
        .flatten()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let mut terms = vec![clean(&c.email), clean(&full)];
    if let Some(l) = &c.last_name {
        terms.push(clean(l));
    }
    terms.retain(|t| !t.is_empty());
    terms.sort();
    terms.dedup();
    terms
}

/// Does `q` (already lower-cased) prefix-match one of the contact's terms before `term`? Then
/// the entry for `term` is a repeat of an earlier one in the same result list.
pub fn matched_earlier(c: &Contact, q: &str, term: &str) -> bool {
    search_terms(c).iter().any(|t| t.starts_with(q) && t.as_str() < term)
}

pub fn search_term_of(sk: &str) -> Option<&str> {
    sk.strip_prefix(keys::CONTACT_SEARCH.sk_prefix(&[]).as_str())?.rsplit_once('#').map(|(t, _)| t)
}

/// Field checks shared by create, update and import (`prefix` names the row in imports).
pub fn validate(errs: &mut Errors, c: &Contact) {
    for (field, v) in [("first_name", &c.first_name), ("last_name", &c.last_name), ("company", &c.company), ("job_title", &c.job_title)] {
        if let Some(v) = v {
            errs.text(field, v, 1, 200);
        }
    }
    if let Some(p) = &c.phone
        && !is_e164(p)
    {
        errs.add("phone", "must be an E.164 number like +4930123456");
    }
    if c.labels.len() > MAX_LABELS {
        errs.add("labels", format!("at most {MAX_LABELS} labels"));
    }
    for (i, l) in c.labels.iter().enumerate() {
        if l.trim().is_empty() || l.chars().count() > MAX_LABEL_CHARS {
            errs.add(format!("labels[{i}]"), format!("must be 1 to {MAX_LABEL_CHARS} characters"));
        } else if c.labels[..i].contains(l) {
            errs.add(format!("labels[{i}]"), "is listed twice");
        }
    }
    if c.custom_fields.len() > MAX_CUSTOM_FIELDS {
        errs.add("custom_fields", format!("at most {MAX_CUSTOM_FIELDS} fields"));
    }
    for (k, v) in &c.custom_fields {
        if k.is_empty() || k.len() > 40 {
            errs.add(format!("custom_fields.{k}"), "keys are 1 to 40 characters");
        }
        if v.is_object() || v.is_array() {
            errs.add(format!("custom_fields.{k}"), "values are strings, numbers, booleans or null");
        }
        errs.storable(&format!("custom_fields.{k}"), v);
    }
    if serde_json::to_vec(&c.custom_fields).map_or(0, |v| v.len()) > MAX_CUSTOM_FIELDS_BYTES {
        errs.add("custom_fields", "at most 8 KiB in all");
    }
    errs.metadata("metadata", &c.metadata);
}

pub fn record(ws: &WorkspaceId, c: &Contact) -> ApiResult<Record> {
    Ok(Record::new(ws_pk(ws), contact_sk(&c.id), c)?
        .gsi1(keys::CONTACT.gsi1_pk(&[ws, &enum_str(c.status)]), keys::CONTACT.gsi1_sk(&[&c.id])))
}

fn claim_item(ws: &WorkspaceId, email: &str, id: &str) -> Item {
    Item::from([("pk".into(), s(ws_pk(ws))), ("sk".into(), s(email_sk(email))), ("contact_id".into(), s(id))])
}

fn search_item(ws: &WorkspaceId, term: &str, id: &str) -> Item {
    Item::from([("pk".into(), s(ws_pk(ws))), ("sk".into(), s(search_sk(term, id))), ("contact_id".into(), s(id))])
}

// ---------- activities ----------

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct Activity {
    /// `act_...`
    pub id: ActivityId,
    /// Always `activity`.
    pub object: String,
    pub contact_id: ContactId,
    /// What happened: an event type (`contact.created`, `deal.won`, ...) or `note`.
    #[serde(rename = "type")]
    pub kind: String,
    pub summary: String,
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    pub created_at: Timestamp,
}

pub fn activity_prefix(contact_id: &str) -> String {
    keys::ACTIVITY.sk_prefix(&[contact_id])
}

/// A timeline entry for a contact, to add to the transaction of the change it records. Other
/// areas (deals, later emails and bookings) call this too.
pub fn activity(ws: &WorkspaceId, contact_id: &str, kind: &str, summary: impl Into<String>, data: serde_json::Value) -> ApiResult<Item> {
    let a = Activity {
        id: ActivityId::generate(),
        object: "activity".into(),
        contact_id: ContactId::trusted(contact_id),
        kind: kind.into(),
        summary: summary.into(),
        data,
        created_at: shared::ids::Timestamp::now(),
    };
    let sk = keys::ACTIVITY.sk(&[contact_id, &a.id]);
    Ok(Record::new(ws_pk(ws), sk, &a)?.item)
}

fn summary_of(c: &Contact) -> serde_json::Value {
    serde_json::json!({"email": c.email, "first_name": c.first_name, "last_name": c.last_name})
}

// ---------- writes ----------

/// What a new contact writes besides its claim and itself: search entries and the first
/// timeline entry.
fn side_items(ws: &WorkspaceId, c: &Contact) -> ApiResult<Vec<Item>> {
    let mut items: Vec<Item> = search_terms(c).iter().map(|t| search_item(ws, t, &c.id)).collect();
    items.push(activity(ws, &c.id, "contact.created", "Contact created", summary_of(c))?);
    Ok(items)
}

/// A create: claim, contact, search entries, timeline entry, event. Condition index 0 is the
/// email claim.
pub fn create_tx(ws: &WorkspaceId, c: &Contact, tx: Tx) -> ApiResult<Tx> {
    let mut tx = tx.put_if(claim_item(ws, &c.email, &c.id), "attribute_not_exists(pk)", vec![]).create(record(ws, c)?.version(1));
    for item in side_items(ws, c)? {
        tx = tx.put(item);
    }
    Ok(tx.event(Event::new(ws, EventType::ContactCreated, c)))
}

/// Bulk create (imports), added to a transaction shared with other rows: the claim may
/// already name this contact (an interrupted run wrote it), so the contact and its side items
/// are plain puts that a second run repeats harmlessly. The claim is the first write added.
pub fn bulk_create_tx(ws: &WorkspaceId, c: &Contact, tx: Tx) -> ApiResult<Tx> {
    let mut tx = tx.put_if(claim_item(ws, &c.email, &c.id), "attribute_not_exists(pk) OR contact_id = :me", vec![(":me", s(&c.id))]);
    tx = tx.put(record(ws, c)?.version(1).item);
    for item in side_items(ws, c)? {
        tx = tx.put(item);
    }
    Ok(tx.event(Event::new(ws, EventType::ContactCreated, c)))
}

/// The owners of these addresses' claims, in one consistent batch read.
pub async fn email_owners(app: &App, ws: &WorkspaceId, emails: &[&str]) -> ApiResult<HashMap<String, String>> {
    let keys: Vec<(String, String)> = emails.iter().map(|e| (ws_pk(ws), email_sk(e))).collect();
    let mut owners = HashMap::new();
    for item in app.db.batch_get(&keys).await? {
        if let (Some(sk), Some(id)) = (store::get_str(&item, "sk"), store::get_str(&item, "contact_id")) {
            owners.insert(sk.to_string(), id.to_string());
        }
    }
    Ok(emails.iter().filter_map(|e| owners.get(&email_sk(e)).map(|id| (e.to_string(), id.clone()))).collect())
}

/// An update from `old` (read at `version`) to `new`: moves the claim when the email changes
/// (the new claim's condition is the first write after those of `tx`), swaps search entries,
/// records the change.
pub fn update_tx(ws: &WorkspaceId, old: &Contact, new: &Contact, version: i64, tx: Tx) -> ApiResult<Tx> {
    let mut tx = tx;
    if old.email != new.email {
        tx = tx.put_if(claim_item(ws, &new.email, &new.id), "attribute_not_exists(pk)", vec![]).delete_if(
            ws_pk(ws),
            email_sk(&old.email),
            "contact_id = :me",
            vec![(":me", s(&old.id))],
        );
    }
    tx = tx.replace(record(ws, new)?, version);
    for item in former_items(ws, old, new) {
        tx = tx.put(item);
    }
    let (before, after) = (search_terms(old), search_terms(new));
    for t in before.iter().filter(|t| !after.contains(t)) {
        tx = tx.delete_if(ws_pk(ws), search_sk(t, &old.id), "", vec![]);
    }
    for t in after.iter().filter(|t| !before.contains(t)) {
        tx = tx.put(search_item(ws, t, &new.id));
    }
    let changed = changed_fields(old, new);
    let summary = format!("Updated {}", changed.join(", "));
    Ok(tx.put(activity(ws, &new.id, "contact.updated", summary, serde_json::json!({ "changed": changed }))?).event(Event::new(
        ws,
        EventType::ContactUpdated,
        new,
    )))
}

/// A contact's former identity: a value of `email`, `phone` or `name` it had before a change.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Former {
    pub contact_id: ContactId,
    /// `email`, `phone` or `name`.
    pub field: String,
    pub value: String,
    pub changed_at: String,
}

fn full_name(c: &Contact) -> Option<String> {
    let n = [c.first_name.as_deref(), c.last_name.as_deref()].into_iter().flatten().collect::<Vec<_>>().join(" ");
    (!n.trim().is_empty()).then_some(n)
}

/// What `old` was and `new` no longer is (address, phone, full name), as items under the
/// contact's own keys: an erasure finds the person by every identity they had. Keyed by the
/// value, so a change back and forth writes one item.
fn former_items(ws: &WorkspaceId, old: &Contact, new: &Contact) -> Vec<Item> {
    let now = shared::ids::Timestamp::now();
    let changed = [
        ("email", Some(old.email.clone()), Some(new.email.clone())),
        ("phone", old.phone.clone(), new.phone.clone()),
        ("name", full_name(old), full_name(new)),
    ];
    changed
        .into_iter()
        .filter_map(|(field, was, is)| {
            let was = was?;
            (Some(&was) != is.as_ref()).then(|| {
                let key = shared::crypto::sha256_hex(was.to_lowercase().as_bytes());
                let f = Former { contact_id: old.id.clone(), field: field.into(), value: was, changed_at: now.to_string() };
                let r = Record::new(ws_pk(ws), keys::CONTACT_FORMER.sk(&[&old.id, field, &key]), &f)?;
                // A former address is found by its value too (an erasure by that address).
                Ok::<_, ApiError>(if field == "email" {
                    r.gsi1(keys::CONTACT_FORMER.gsi1_pk(&[ws, &key]), keys::CONTACT_FORMER.gsi1_sk(&[&f.changed_at, &old.id])).item
                } else {
                    r.item
                })
            })
        })
        .filter_map(Result::ok)
        .collect()
}

/// The contact that most recently had `email` as a former address (one Query of GSI1), if it
/// still exists under that id.
pub async fn former_holder(app: &App, ws: &WorkspaceId, email: &str) -> ApiResult<Option<ContactId>> {
    let key = shared::crypto::sha256_hex(email.to_lowercase().as_bytes());
    let out = app.db.query_page(keys::CONTACTS_BY_FORMER_ADDRESS.query(&[ws, &key], &[], None, 10).descending()).await?;
    Ok(out.items.into_iter().filter_map(|i| store::from_item::<Former>(i).ok()).map(|f| f.contact_id).next())
}

/// Every former identity of a contact (one Query; a contact has few).
pub async fn formers(app: &App, ws: &WorkspaceId, id: &str) -> ApiResult<Vec<Former>> {
    let mut out = vec![];
    let mut after = None;
    loop {
        let page = app.db.query_page(keys::CONTACT_FORMERS.query(&[ws], &[id], after, 100)).await?;
        for i in page.items {
            out.push(store::from_item(i)?);
        }
        after = page.next_after;
        if after.is_none() {
            return Ok(out);
        }
    }
}

pub fn changed_fields(old: &Contact, new: &Contact) -> Vec<String> {
    let (a, b) = (serde_json::to_value(old).unwrap_or_default(), serde_json::to_value(new).unwrap_or_default());
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else { return vec![] };
    a.iter().filter(|(k, v)| *k != "updated_at" && b.get(*k) != Some(v)).map(|(k, _)| k.clone()).collect()
}

/// A delete: the contact, its claim and search entries (its timeline stays for audits until
/// an erasure removes it).
pub fn delete_tx(ws: &WorkspaceId, c: &Contact, version: i64) -> Tx {
    let mut tx = Tx::new().delete_versioned(ws_pk(ws), contact_sk(&c.id), version).delete_if(
        ws_pk(ws),
        email_sk(&c.email),
        "contact_id = :me",
        vec![(":me", s(&c.id))],
    );
    for t in search_terms(c) {
        tx = tx.delete_if(ws_pk(ws), search_sk(&t, &c.id), "", vec![]);
    }
    tx.event(Event::new(ws, EventType::ContactDeleted, c))
}

/// Remove a deleted contact's timeline and former identities (idempotent: each run deletes
/// what is left, a page at a time). A contact that exists again under the id keeps them.
pub async fn purge_history(app: &App, ws: &WorkspaceId, id: &ContactId) -> ApiResult<()> {
    if app.db.get(&ws_pk(ws), &contact_sk(id)).await?.is_some() {
        return Ok(());
    }
    for list in [keys::ACTIVITIES, keys::CONTACT_FORMERS] {
        loop {
            let out = app.db.query_page(list.query(&[ws], &[id], None, 100)).await?;
            let keys_: Vec<(String, String)> = out
                .items
                .iter()
                .filter_map(|i| Some((store::get_str(i, "pk")?.to_string(), store::get_str(i, "sk")?.to_string())))
                .collect();
            if keys_.is_empty() {
                break;
            }
            app.db.batch_delete(&keys_).await?;
            if out.next_after.is_none() {
                break;
            }
        }
    }
    Ok(())
}

/// Who holds this email now (consistent read of the claim).
pub async fn email_owner(app: &App, ws: &WorkspaceId, email: &str) -> ApiResult<Option<String>> {
    Ok(app.db.get(&ws_pk(ws), &email_sk(email)).await?.and_then(|i| store::get_str(&i, "contact_id").map(String::from)))
}

pub fn duplicate(email: &str, existing: Option<String>) -> ApiError {
    let mut d = shared::error::ErrorDetail::field("email", format!("{email} belongs to another contact"));
    d.meta = existing.map(|id| serde_json::json!({ "contact_id": id }));
    ApiError::conflict("a contact with this email exists").with_details(vec![d])
}

pub async fn load(app: &App, ws: &WorkspaceId, id: &ContactId) -> ApiResult<(Contact, i64)> {
    app.db.get_object(ws, &contact_sk(id)).await?.ok_or_else(|| ApiError::not_found("contact"))
}

pub fn status_str(s: ContactStatus) -> String {
    enum_str(s)
}

pub fn email_status_str(s: EmailStatus) -> String {
    enum_str(s)
}

// A contact as the subject of a GDPR request (`privacy::Subject` is below this area; what makes
// one from a contact is the contacts area's).
impl crate::privacy::Subject {
    /// A contact as a subject: their address, id, search terms, phone and name (no history:
    /// see `gdpr::subject_of`).
    pub fn of(c: &Contact) -> Self {
        let name = [c.first_name.as_deref(), c.last_name.as_deref()].into_iter().flatten().collect::<Vec<_>>().join(" ");
        crate::privacy::Subject {
            terms: search_terms(c),
            email: c.email.clone(),
            contact_id: Some(c.id.clone()),
            phones: c.phone.iter().cloned().collect(),
            names: (!name.trim().is_empty()).then_some(name).into_iter().collect(),
            former_emails: vec![],
        }
    }

    /// Leave out the former addresses another contact holds now (one BatchGetItem of their
    /// claims): they are that contact's.
    pub async fn drop_others_addresses(&mut self, app: &App, ws: &WorkspaceId) -> ApiResult<()> {
        if self.former_emails.is_empty() {
            return Ok(());
        }
        let refs: Vec<&str> = self.former_emails.iter().map(String::as_str).collect();
        let owners = email_owners(app, ws, &refs).await?;
        let me = self.contact_id.clone();
        self.former_emails.retain(|e| owners.get(e).is_none_or(|o| me.as_ref().is_some_and(|m| m == o)));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(email: &str, first: Option<&str>, last: Option<&str>) -> Contact {
        Contact {
            id: ContactId::trusted("ct_1"),
            object: "contact".into(),
            email: email.into(),
            first_name: first.map(String::from),
            last_name: last.map(String::from),
            phone: None,
            company: None,
            job_title: None,
            status: ContactStatus::Lead,
            email_status: EmailStatus::Subscribed,
            labels: vec![],
            custom_fields: BTreeMap::new(),
            metadata: BTreeMap::new(),
            created_at: shared::ids::Timestamp::now(),
            updated_at: shared::ids::Timestamp::now(),
            email_changed: None,
        }
    }

    #[test]
    fn emails_and_phones() {
        assert_eq!(normalise_email("  Ada.Lovelace@Example.COM "), Some("ada.lovelace@example.com".into()));
        for bad in ["ada", "ada@", "@x.com", "ada@localhost", "a b@x.com", "ada@x..com", "ada@x.com.", "a@b@c.com", "<a@b.com>"] {
            assert_eq!(normalise_email(bad), None, "{bad}");
        }
        assert!(is_e164("+4930123456") && is_e164("+12"));
        assert!(!is_e164("030123456") && !is_e164("+0301") && !is_e164("+49 30") && !is_e164(&format!("+{}", "1".repeat(16))));
    }

    #[test]
    fn search_terms_and_repeats() {
        let x = c("ada@example.com", Some("Ada"), Some("Lovelace"));
        assert_eq!(search_terms(&x), vec!["ada lovelace", "ada@example.com", "lovelace"]);
        assert!(!matched_earlier(&x, "ada", "ada lovelace"), "first match is reported");
        assert!(matched_earlier(&x, "ada", "ada@example.com"), "second match is a repeat");
        assert_eq!(search_term_of("CSEARCH#ada lovelace#ct_1"), Some("ada lovelace"));
        assert_eq!(search_terms(&c("x#y@example.com", None, None)), vec!["xy@example.com"]);
    }
}
