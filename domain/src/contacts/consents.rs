//! The consent ledger: one item per consent event (`CONSENT#<email>#<cons id>`), never updated
//! or deleted except by an erasure. The current state of a purpose is its newest event.
//! Withdrawing `marketing_email` unsubscribes the address's contact in the same transaction (and
//! granting it subscribes an unsubscribed one again); bounced and complained stay as they are.

use crate::contacts::{self, Contact, ContactId, EmailStatus};
use crate::ids::ConsentId;
use crate::keys;
use crate::privacy::{Erase, Find, Rule, Subject};
use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::events::Event;
use shared::events::EventType;
use shared::ids::Timestamp;
use shared::outbox::Tx;
use shared::store::{self, Record, ws_pk};
use shared::validate::Errors;
use shared::{ApiError, ApiResult, App};
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// Every address's ledger is found; an erasure turns each event into a hashed one
/// (`ERASED_CONSENT`): what was granted or withdrawn, when, with what text, stays provable for
/// whoever knows the address, and the table names no one.
pub const PRIVACY: &[Rule] = &[Rule {
    kind: keys::CONSENT.kind,
    area: "consents",
    find: Find::Prefixes(|s| s.emails().map(|e| keys::CONSENT.sk_prefix_of(e)).collect()),
    export: true,
    erase: Erase::Custom(|a, w, i, _| Box::pin(hash_entry(a, w, i))),
}];

/// An erased address's consent event: kept without the address, contact, IP or user agent,
/// under the tombstone's hash of the address.
async fn hash_entry(app: &App, ws: &WorkspaceId, item: store::Item) -> ApiResult<()> {
    let Some(sk) = store::get_str(&item, "sk").map(String::from) else { return Ok(()) };
    let mut c: Consent = store::from_item(item)?;
    let hash = crate::privacy::tombstone_hash(&app.platform_secret().await?.tombstone_key, ws, &c.email);
    c.email = String::new();
    c.contact_id = None;
    c.ip_address = None;
    c.user_agent = None;
    c.proof = None;
    c.email_id = None;
    c.erased = true;
    let hashed = Record::new(ws_pk(ws), keys::ERASED_CONSENT.sk((&hash, &c.id)), &c)?.item;
    // One transaction: a rerun after a crash finds the original still there and writes the
    // same hashed item again.
    Tx::new().put(hashed).delete_if(ws_pk(ws), sk, "", vec![]).commit(app).await.map_err(store::TxError::stale)
}

/// At most this many events are read for one subject's history.
pub const MAX_HISTORY: usize = 1000;

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ConsentSource {
    Api,
    Portal,
    Import,
    Form,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct Consent {
    /// `cons_...`
    pub id: ConsentId,
    /// Always `consent`.
    pub object: String,
    pub email: String,
    pub contact_id: Option<ContactId>,
    /// `marketing_email`, `analytics`, `third_party_sharing` or a custom slug.
    pub purpose: String,
    pub granted: bool,
    pub source: ConsentSource,
    /// The wording the person saw.
    pub text_shown: String,
    pub text_version: String,
    pub ip_address: Option<String>,
    pub user_agent: Option<String>,
    pub created_at: Timestamp,
    /// How the person was known when the platform recorded it (source `portal`): which portal
    /// session, how it was opened (`email`: a link sent to the contact's address; `return`: a
    /// token a workspace admin's server embedded) and by which credential. Null for consents a
    /// workspace recorded through the API, whose own records are the evidence.
    #[serde(default)]
    pub proof: Option<PortalProof>,
    /// The email whose unsubscribe link recorded it (source `portal`, the link's page; no
    /// session): the link was made for that email's one recipient, so using it proves the
    /// mailbox. Only the platform sets it.
    #[serde(default)]
    pub email_id: Option<crate::ids::EmailId>,
    /// True for an event of an address that was erased since: the ledger keeps it hashed,
    /// without the contact, IP or user agent, and shows it to whoever asks by the address.
    #[serde(default)]
    pub erased: bool,
}

/// The portal session behind a consent the customer gave in the portal.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[schema(as = ConsentPortalProof)]
pub struct PortalProof {
    pub session_id: String,
    /// `email` or `return`.
    pub delivery: String,
    /// The credential that opened the session (`key:<id>`, a person's `sub`).
    pub opened_by: String,
    /// False when a credential that cannot erase people last rewrote the contact's address:
    /// then an emailed session proves the inbox, not the person.
    pub address_vouched: bool,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordConsent {
    #[schema(format = Email, max_length = 254, extensions(("x-exactly-one" = json!(["email", "contact_id"]))))]
    pub email: Option<String>,
    #[schema(value_type = Option<crate::ids::ContactId>)]
    pub contact_id: Option<String>,
    /// `marketing_email`, `analytics`, `third_party_sharing`, or a custom slug (`[a-z][a-z0-9_]{0,49}`).
    #[schema(pattern = "^[a-z][a-z0-9_]{0,49}$")]
    pub purpose: String,
    pub granted: bool,
    pub source: ConsentSource,
    #[schema(min_length = 1, max_length = 10000)]
    pub text_shown: String,
    #[schema(min_length = 1, max_length = 100)]
    pub text_version: String,
    pub ip_address: Option<String>,
    #[schema(max_length = 512)]
    pub user_agent: Option<String>,
}

/// One purpose's current state.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct PurposeState {
    pub granted: bool,
    pub consent_id: ConsentId,
    pub source: ConsentSource,
    pub text_version: String,
    pub at: Timestamp,
}

#[derive(Serialize, ToSchema)]
pub struct ConsentState {
    /// Always `consent_state`.
    pub object: String,
    pub email: String,
    pub contact_id: Option<ContactId>,
    pub purposes: BTreeMap<String, PurposeState>,
    /// Every event, oldest first.
    pub history: Vec<Consent>,
}

pub fn valid_purpose(p: &str) -> bool {
    let mut c = p.chars();
    c.next().is_some_and(|f| f.is_ascii_lowercase())
        && p.len() <= 50
        && p.chars().all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_')
}

/// Validate a consent event for `subject` (already resolved).
pub fn build(input: RecordConsent, subject: &Subject) -> ApiResult<Consent> {
    let mut errs = Errors::new();
    if !valid_purpose(&input.purpose) {
        errs.add("purpose", "a slug: a lower-case letter, then up to 49 lower-case letters, digits or _");
    }
    errs.text("text_shown", &input.text_shown, 1, 10_000);
    errs.text("text_version", &input.text_version, 1, 100);
    if let Some(ip) = &input.ip_address
        && ip.parse::<std::net::IpAddr>().is_err()
    {
        errs.add("ip_address", "must be an IPv4 or IPv6 address");
    }
    if let Some(ua) = &input.user_agent {
        errs.text("user_agent", ua, 0, 512);
    }
    errs.finish()?;
    Ok(Consent {
        id: ConsentId::generate(),
        object: "consent".into(),
        email: subject.email.clone(),
        contact_id: subject.contact_id.clone(),
        purpose: input.purpose,
        granted: input.granted,
        source: input.source,
        text_shown: input.text_shown,
        text_version: input.text_version,
        ip_address: input.ip_address,
        user_agent: input.user_agent,
        created_at: shared::ids::Timestamp::now(),
        proof: None,
        email_id: None,
        erased: false,
    })
}

/// The contact's `email_status` after this consent, when it changes.
fn email_status_after(c: &Contact, consent: &Consent) -> Option<EmailStatus> {
    if consent.purpose != "marketing_email" {
        return None;
    }
    match (c.email_status, consent.granted) {
        (EmailStatus::Subscribed, false) => Some(EmailStatus::Unsubscribed),
        (EmailStatus::Unsubscribed, true) => Some(EmailStatus::Subscribed),
        _ => None,
    }
}

/// Evidence of consent given with another request (a contact re-created after an erasure).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsentEvidence {
    #[schema(min_length = 1, max_length = 10000)]
    pub text_shown: String,
    #[schema(min_length = 1, max_length = 100)]
    pub text_version: String,
    /// Default `api`.
    pub source: Option<ConsentSource>,
    pub ip_address: Option<String>,
    #[schema(max_length = 512)]
    pub user_agent: Option<String>,
}

impl ConsentEvidence {
    /// The consent event this evidence records for `purpose`.
    pub fn consent(self, subject: &Subject, purpose: &str, granted: bool) -> ApiResult<Consent> {
        build(
            RecordConsent {
                email: None,
                contact_id: None,
                purpose: purpose.into(),
                granted,
                source: self.source.unwrap_or(ConsentSource::Api),
                text_shown: self.text_shown,
                text_version: self.text_version,
                ip_address: self.ip_address,
                user_agent: self.user_agent,
            },
            subject,
        )
        .map_err(|e| e.prefixed("consent"))
    }
}

/// The ledger item and event of a consent, for a caller's transaction.
pub fn writes(ws: &WorkspaceId, consent: &Consent) -> ApiResult<(store::Item, Event)> {
    let item = Record::new(ws_pk(ws), keys::CONSENT.sk((&consent.email, &consent.id)), consent)?.item;
    let kind = if consent.granted { EventType::GdprConsentGranted } else { EventType::GdprConsentWithdrawn };
    Ok((item, Event::new(ws, kind, consent)))
}

/// Record one consent event; a `marketing_email` change updates the contact in the same
/// transaction (optimistically: a concurrent contact edit is retried once).
///
/// An erased address is refused (409), checked in the same transaction against its tombstone:
/// the erasure writes the tombstone before it looks for the address's entries, so an entry is
/// either found and hashed by it or never written. An erased address comes back only through
/// a contact created with new consent (`POST /contacts` with `consent`).
pub async fn record(app: &App, ws: &WorkspaceId, consent: &Consent) -> ApiResult<()> {
    let (item, ev) = writes(ws, consent)?;
    let tomb = crate::privacy::tombstone_sk(app, ws, &consent.email).await?;
    for attempt in 0..2 {
        let mut tx = Tx::new()
            .check(ws_pk(ws), tomb.clone(), "attribute_not_exists(pk)")
            .put_if(item.clone(), "attribute_not_exists(pk)", vec![])
            .event(ev.clone());
        if let Some(id) = consent.contact_id.as_deref().and_then(ContactId::parse) {
            let (old, version) = contacts::load(app, ws, &id).await?;
            if let Some(status) = email_status_after(&old, consent) {
                let mut new = old.clone();
                new.email_status = status;
                new.updated_at = consent.created_at;
                tx = contacts::update_tx(ws, &old, &new, version, tx)?;
            }
        }
        match tx.commit(app).await {
            Ok(()) => return Ok(()),
            Err(store::TxError::Condition(0)) => {
                return Err(ApiError::conflict(crate::privacy::ERASED_MESSAGE).with_details(vec![shared::error::ErrorDetail::field(
                    "email",
                    "was erased; record consent with a new contact (POST /contacts with consent)",
                )]));
            }
            Err(store::TxError::Condition(i)) if i > 1 && attempt == 0 => continue,
            Err(e) => return Err(e.stale()),
        }
    }
    Err(ApiError::conflict("the contact changed while the consent was recorded; retry"))
}

/// The subject's history (oldest first, at most [`MAX_HISTORY`]) and current state per purpose.
pub async fn state(app: &App, ws: &WorkspaceId, subject: &Subject) -> ApiResult<ConsentState> {
    let mut history: Vec<Consent> = vec![];
    // The address's own ledger, then what is left of it from before an erasure (hashed).
    let hash = crate::privacy::tombstone_hash(&app.platform_secret().await?.tombstone_key, ws, &subject.email);
    for (list, part) in [(keys::CONSENTS, subject.email.as_str()), (keys::ERASED_CONSENTS, hash.as_str())] {
        let mut after = None;
        loop {
            let out = app.db.query_page(list.query_within(ws, part, after, 100)).await?;
            for item in out.items {
                let mut c: Consent = store::from_item(item)?;
                if c.erased {
                    c.email = subject.email.clone();
                }
                history.push(c);
            }
            after = out.next_after;
            if after.is_none() || history.len() >= MAX_HISTORY {
                break;
            }
        }
    }
    history.sort_by_key(|a| a.created_at);
    let mut purposes = BTreeMap::new();
    // What an erased address had granted is evidence, not today's state: whoever holds the
    // address now starts from their own events.
    for c in history.iter().filter(|c| !c.erased) {
        purposes.insert(
            c.purpose.clone(),
            PurposeState {
                granted: c.granted,
                consent_id: c.id.clone(),
                source: c.source,
                text_version: c.text_version.clone(),
                at: c.created_at,
            },
        );
    }
    Ok(ConsentState {
        object: "consent_state".into(),
        email: subject.email.clone(),
        contact_id: subject.contact_id.clone(),
        purposes,
        history,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purposes_are_slugs() {
        for ok in ["marketing_email", "analytics", "third_party_sharing", "newsletter2"] {
            assert!(valid_purpose(ok), "{ok}");
        }
        for bad in ["", "Marketing", "2fa", "a-b", &"x".repeat(51)] {
            assert!(!valid_purpose(bad), "{bad}");
        }
    }
}
