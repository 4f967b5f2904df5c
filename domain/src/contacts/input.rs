//! What a create or update of a contact says, how it becomes a contact, and how the write is
//! committed (shared by the contacts routes and the import worker).

use super::{self as model, Contact, ContactStatus, EmailStatus};
use serde::Deserialize;
use shared::auth::WorkspaceId;
use shared::outbox::Tx;
use shared::store::TxError;
use shared::validate::{Errors, Patch};
use shared::{ApiError, ApiResult, App};
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// How often a create retries a transaction that collided with a concurrent one.
const CONFLICT_RETRIES: u32 = 5;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateContact {
    #[schema(format = Email, max_length = 254, example = "ada@example.com")]
    pub email: String,
    #[serde(default)]
    pub first_name: Option<String>,
    #[serde(default)]
    pub last_name: Option<String>,
    /// E.164, e.g. `+4930123456`.
    #[serde(default)]
    #[schema(pattern = "^(\\+[1-9][0-9]{1,14})?$")]
    pub phone: Option<String>,
    #[serde(default)]
    pub company: Option<String>,
    #[serde(default)]
    pub job_title: Option<String>,
    #[serde(default)]
    pub status: Option<ContactStatus>,
    #[serde(default)]
    pub email_status: Option<EmailStatus>,
    /// At most 20, each 1 to 50 characters, each once.
    #[serde(default)]
    #[schema(max_items = 20, min_length = 1, max_length = 50)]
    pub labels: Vec<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub custom_fields: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// Re-create an address that was erased (GDPR): needs `consent`, the new opt-in, which is
    /// recorded in the ledger (`marketing_email` granted) and lifts the tombstone.
    #[serde(default)]
    pub resubscribe: bool,
    #[serde(default)]
    pub consent: Option<crate::contacts::consents::ConsentEvidence>,
}

impl CreateContact {
    /// The contact this input describes, with field errors added to `errs`.
    pub fn build(self, errs: &mut Errors) -> Contact {
        let email = model::normalise_email(&self.email).unwrap_or_else(|| {
            errs.add("email", "must be a valid email address");
            self.email.clone()
        });
        let now = shared::ids::Timestamp::now();
        let trim = |v: Option<String>| v.map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let c = Contact {
            id: crate::ids::ContactId::generate(),
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
            created_at: now,
            updated_at: now,
            email_changed: None,
        };
        model::validate(errs, &c);
        c
    }
}

/// Commit a create, retrying transactions that collided with a concurrent one; a taken email
/// is 409 with the holder's id. An erased address is 409 unless `resubscribe` carries new
/// consent: then the transaction also records it and lifts the tombstone.
pub async fn commit_create(
    app: &App,
    ws: &WorkspaceId,
    c: &Contact,
    resubscribe: Option<&crate::contacts::consents::Consent>,
) -> ApiResult<()> {
    let tomb = crate::privacy::tombstone_sk(app, ws, &c.email).await?;
    for attempt in 0..=CONFLICT_RETRIES {
        let tx = match resubscribe {
            None => Tx::new().check(shared::store::ws_pk(ws), tomb.clone(), "attribute_not_exists(pk)"),
            Some(consent) => {
                let (item, ev) = crate::contacts::consents::writes(ws, consent)?;
                Tx::new().delete_if(shared::store::ws_pk(ws), tomb.clone(), "", vec![]).put(item).event(ev)
            }
        };
        let claim = tx.len();
        match model::create_tx(ws, c, tx)?.commit(app).await {
            Ok(()) => return Ok(()),
            Err(TxError::Condition(0)) if resubscribe.is_none() => {
                return Err(ApiError::conflict(crate::privacy::ERASED_MESSAGE).with_details(vec![shared::error::ErrorDetail::field(
                    "email",
                    "was erased; send \"resubscribe\": true with \"consent\" to create it again",
                )]));
            }
            Err(TxError::Condition(i)) if i == claim => {
                return Err(model::duplicate(&c.email, model::email_owner(app, ws, &c.email).await?));
            }
            Err(TxError::Condition(_)) => return Err(ApiError::conflict("the contact was created concurrently")),
            Err(e) if e.is_contention() && attempt < CONFLICT_RETRIES => {
                // TransactionConflict: another create of the same address is in flight. Once it
                // commits, the retry sees its claim and answers with its id.
                shared::store::after_contention(attempt).await;
            }
            Err(TxError::Api(e)) => return Err(e),
        }
    }
    Err(ApiError::conflict("the contact was changed concurrently; retry"))
}

/// Where a new contact's writes sit in a larger transaction (a booking's), so that a failed
/// condition can be told apart: the erasure tombstone's check and the email claim.
pub struct CreateIn {
    pub tombstone: usize,
    pub claim: usize,
}

/// Add a new contact to `tx`: its address must not be erased here (`tombstone`, the key
/// `privacy::tombstone_sk` gives) and not claimed; the claim, the contact, its side items and
/// `contact.created` are written with the rest of the transaction or not at all.
pub fn create_in(ws: &WorkspaceId, c: &Contact, tombstone: String, tx: Tx) -> ApiResult<(Tx, CreateIn)> {
    let at = tx.len();
    let tx = tx.check(shared::store::ws_pk(ws), tombstone, "attribute_not_exists(pk)");
    Ok((model::create_tx(ws, c, tx)?, CreateIn { tombstone: at, claim: at + 1 }))
}

/// Create a contact for an erased address whose owner wrote to the workspace again (inbound
/// mail): the tombstone is lifted in the same transaction, with no consent recorded, so the
/// caller creates it unsubscribed from marketing. Nothing links it to the erased contact.
pub async fn commit_return(app: &App, ws: &WorkspaceId, c: &Contact) -> ApiResult<()> {
    let tomb = crate::privacy::tombstone_sk(app, ws, &c.email).await?;
    let tx = Tx::new().delete_if(shared::store::ws_pk(ws), tomb, "", vec![]);
    let claim = tx.len();
    match model::create_tx(ws, c, tx)?.commit(app).await {
        Ok(()) => Ok(()),
        Err(TxError::Condition(i)) if i == claim => Err(model::duplicate(&c.email, model::email_owner(app, ws, &c.email).await?)),
        Err(e) => Err(e.stale()),
    }
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct UpdateContact {
    #[serde(default)]
    #[schema(value_type = String)]
    pub email: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub first_name: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub last_name: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>, pattern = "^(\\+[1-9][0-9]{1,14})?$")]
    pub phone: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub company: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub job_title: Patch<String>,
    #[serde(default)]
    #[schema(value_type = ContactStatus)]
    pub status: Patch<ContactStatus>,
    #[serde(default)]
    #[schema(value_type = EmailStatus)]
    pub email_status: Patch<EmailStatus>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>, max_items = 20, min_length = 1, max_length = 50)]
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
            // What SES reported is not the caller's to undo: the address stays suppressed
            // until an admin removes it from the suppression list.
            if matches!(c.email_status, EmailStatus::Bounced | EmailStatus::Complained) && v != c.email_status {
                errs.add("email_status", "cannot be changed from bounced or complained; see /emails/suppressions");
            } else {
                c.email_status = v;
            }
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

/// Commit an update; a taken new email is 409 with the holder's id, an erased one 409 too.
pub async fn commit_update(app: &App, ws: &WorkspaceId, old: &Contact, new: &Contact, version: i64) -> ApiResult<()> {
    let moved = old.email != new.email;
    // An erased address comes back only with new consent (a create with `resubscribe`), so a
    // contact cannot take it over by a change either; checked in the transaction, as a
    // create checks it.
    let tx = match moved {
        true => {
            Tx::new().check(shared::store::ws_pk(ws), crate::privacy::tombstone_sk(app, ws, &new.email).await?, "attribute_not_exists(pk)")
        }
        false => Tx::new(),
    };
    match model::update_tx(ws, old, new, version, tx)?.commit(app).await {
        Ok(()) => Ok(()),
        // With a new email, write 0 is the tombstone's check and write 1 the new claim.
        Err(TxError::Condition(0)) if moved => {
            Err(ApiError::conflict(crate::privacy::ERASED_MESSAGE).with_details(vec![shared::error::ErrorDetail::field(
                "email",
                "was erased; create a contact with \"resubscribe\": true and \"consent\" to bring it back",
            )]))
        }
        Err(TxError::Condition(1)) if moved => Err(model::duplicate(&new.email, model::email_owner(app, ws, &new.email).await?)),
        Err(e) => Err(e.stale()),
    }
}
