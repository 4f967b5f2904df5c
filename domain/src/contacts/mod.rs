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
mod store;

use crate::ids::ActivityId;
pub use crate::ids::ContactId;
pub use input::*;
use serde::{Deserialize, Serialize};
use shared::ids::Timestamp;
use shared::validate::Errors;
pub use shared::validate::normalise_email;
use shared::{ApiError, ApiResult};
use std::collections::BTreeMap;
pub use store::{
    PRIVACY, activity, activity_prefix, bulk_create_tx, contact_sk, create_tx, delete_tx, email_of_claim, email_owner, email_owners,
    email_sk, former_holder, formers, load, purge_history, record, search_term_of, update_tx,
};
use utoipa::ToSchema;

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
    pub fn by(principal: &shared::auth::Principal, at: shared::ids::Timestamp) -> Self {
        Self {
            at,
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

fn summary_of(c: &Contact) -> serde_json::Value {
    serde_json::json!({"email": c.email, "first_name": c.first_name, "last_name": c.last_name})
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

pub fn changed_fields(old: &Contact, new: &Contact) -> Vec<String> {
    let (a, b) = (serde_json::to_value(old).unwrap_or_default(), serde_json::to_value(new).unwrap_or_default());
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else { return vec![] };
    a.iter().filter(|(k, v)| *k != "updated_at" && b.get(*k) != Some(v)).map(|(k, _)| k.clone()).collect()
}

pub fn duplicate(email: &str, existing: Option<String>) -> ApiError {
    let mut d = shared::error::ErrorDetail::field("email", format!("{email} belongs to another contact"));
    d.meta = existing.map(|id| serde_json::json!({ "contact_id": id }));
    ApiError::conflict("a contact with this email exists").with_details(vec![d])
}

pub fn status_str(s: ContactStatus) -> String {
    enum_str(s)
}

pub fn email_status_str(s: EmailStatus) -> String {
    enum_str(s)
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
