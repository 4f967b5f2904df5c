//! The workspace's suppression list: addresses that bounced permanently or complained,
//! whether or not they belong to a contact, and addresses without a contact that unsubscribed
//! from marketing mail through an email's link (`unsubscribe`). Written by the feedback path, consulted when an
//! email is accepted and again before it is sent; removed only by an owner or admin, with a
//! reason that is recorded (the `email.suppression.removed` event).

use crate::ids::EmailId;
use crate::keys;
use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::events::EventType;
use shared::ids::Timestamp;
use shared::outbox::Tx;
use shared::store::{self, Item, Record, ws_pk};
use shared::{ApiResult, App};
use std::collections::HashMap;
use utoipa::ToSchema;

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct Suppression {
    /// Lower-cased.
    pub address: String,
    /// Always `email_suppression`.
    pub object: String,
    /// `bounced` or `complained` (all mail), or `unsubscribed` (an address without a contact
    /// that used a marketing email's unsubscribe link: marketing mail only).
    pub reason: String,
    /// The email whose feedback put it here.
    pub email_id: Option<EmailId>,
    pub created_at: Timestamp,
}

/// The address a suppression's sort key names.
pub fn address_of(sk: &str) -> Option<&str> {
    sk.strip_prefix(keys::EMAIL_SUPPRESSION.sk_prefix())
}

pub fn item(ws: &WorkspaceId, s: &Suppression) -> ApiResult<Item> {
    Ok(Record::new(ws_pk(ws), keys::EMAIL_SUPPRESSION.sk(&s.address), s)?.item)
}

/// A suppression's write may not replace a complaint with a bounce (a complaint always wins).
const KEEPS_COMPLAINT: &str = "attribute_not_exists(sk) OR #r <> :complained";
const COMPLAINED: &str = "complained";

/// Put `item` unless that would downgrade a complaint, in `tx`.
fn put_keeping_complaint(tx: Tx, item: Item, reason: &str) -> Tx {
    if reason == COMPLAINED {
        return tx.put(item);
    }
    tx.put_if_named(item, KEEPS_COMPLAINT, &[("#r", "reason")], vec![(":complained", store::s(COMPLAINED))])
}

/// Suppress these addresses, one transaction each. A complaint is never downgraded: a later
/// bounce leaves `complained` as it is. And an address erased since the caller looked (its
/// tombstone written by an erasure that began meanwhile) is never written plain: the
/// transaction checks the tombstone is absent, and if it is there the address is suppressed by
/// its hash only, as after the erasure. An erasure writes the tombstone before it turns plain
/// entries into hashed ones, so every plain entry is either refused or found by it.
pub async fn add(app: &App, ws: &WorkspaceId, addresses: &[String], reason: &str, email_id: Option<&str>) -> ApiResult<()> {
    let now = shared::ids::Timestamp::now();
    let addresses: Vec<String> = addresses.iter().map(|a| a.to_lowercase()).collect();
    let tombstones = crate::privacy::tombstone_keys(app, ws, &addresses).await?;
    let writes = tombstones.into_iter().map(|(tomb_sk, address)| async move {
        let s = Suppression {
            address: address.clone(),
            object: "email_suppression".into(),
            reason: reason.into(),
            email_id: email_id.map(EmailId::trusted),
            created_at: now,
        };
        let tx = put_keeping_complaint(Tx::new(), item(ws, &s)?, reason).check(ws_pk(ws), tomb_sk, "attribute_not_exists(sk)");
        match tx.commit(app).await {
            // Condition 0: a complaint is there already.
            Ok(()) | Err(store::TxError::Condition(0)) => Ok(()),
            Err(store::TxError::Condition(_)) => add_erased(app, ws, std::slice::from_ref(&address), reason).await,
            Err(store::TxError::Api(e)) => Err(e),
        }
    });
    futures_util::future::try_join_all(writes).await.map(|_| ())
}

/// The suppression keys of these addresses, to read with other look-ups in one BatchGetItem.
pub fn keys_of<'a>(ws: &WorkspaceId, addresses: impl IntoIterator<Item = &'a String>) -> Vec<(String, String)> {
    addresses.into_iter().map(|a| (ws_pk(ws), keys::EMAIL_SUPPRESSION.sk(a))).collect()
}

/// Address -> reason, from items a BatchGetItem returned (other kinds are ignored).
pub fn from_items(items: &[Item]) -> HashMap<String, String> {
    items
        .iter()
        .filter_map(|i| {
            let addr = address_of(store::get_str(i, "sk")?)?;
            Some((addr.to_string(), store::get_str(i, "reason").unwrap_or("bounced").to_string()))
        })
        .collect()
}

/// An erased address's suppression: kept as the tombstone's hash of the address, so the address
/// stays suppressed if it ever comes back (new consent lifts the tombstone, not this).
pub async fn hash_entry(app: &App, ws: &WorkspaceId, item: Item) -> ApiResult<()> {
    let Some(sk) = store::get_str(&item, "sk").map(String::from) else { return Ok(()) };
    let Some(address) = address_of(&sk) else { return Ok(()) };
    let hash = crate::privacy::tombstone_hash(&app.platform_secret().await?.tombstone_key, ws, address);
    let reason = store::get_str(&item, "reason").unwrap_or("bounced");
    // An unsubscribe is a choice, not a fact about the mailbox: it goes with the person (the
    // tombstone stops all mail meanwhile), so an address that comes back with new consent is
    // not blocked from marketing by it.
    if reason == "unsubscribed" {
        return Tx::new().delete_if(ws_pk(ws), sk, "", vec![]).commit(app).await.map_err(store::TxError::stale);
    }
    let hashed = erased_item(ws, &hash, reason, store::get_str(&item, "created_at"))?;
    let res = put_keeping_complaint(Tx::new(), hashed, reason).delete_if(ws_pk(ws), sk.clone(), "", vec![]).commit(app).await;
    match res {
        // A complaint hashed already (feedback after the tombstone): the plain entry just goes.
        Err(store::TxError::Condition(0)) => {
            Tx::new().delete_if(ws_pk(ws), sk, "", vec![]).commit(app).await.map_err(store::TxError::stale)
        }
        other => other.map_err(store::TxError::stale),
    }
}

fn erased_item(ws: &WorkspaceId, hash: &str, reason: &str, created_at: Option<&str>) -> ApiResult<Item> {
    let entry = serde_json::json!({"object": "erased_suppression", "reason": reason, "created_at": created_at});
    Ok(Record::new(ws_pk(ws), keys::ERASED_SUPPRESSION.sk(hash), &entry)?.item)
}

/// Suppress erased addresses by their hash only (feedback that came after the erasure),
/// never downgrading a complaint.
pub async fn add_erased(app: &App, ws: &WorkspaceId, addresses: &[String], reason: &str) -> ApiResult<()> {
    if addresses.is_empty() {
        return Ok(());
    }
    let hashes = crate::privacy::address_hashes(app, ws, addresses).await?;
    let now = shared::ids::Timestamp::now().to_string();
    let writes = hashes.keys().map(|h| {
        let now = &now;
        async move {
            match put_keeping_complaint(Tx::new(), erased_item(ws, h, reason, Some(now))?, reason).commit(app).await {
                // A complaint is there already.
                Ok(()) | Err(store::TxError::Condition(0)) => Ok(()),
                Err(e) => Err(store::TxError::stale(e)),
            }
        }
    });
    futures_util::future::try_join_all(writes).await.map(|_| ())
}

/// The hashed suppression's key of an address whose tombstone hash is `hash`.
pub fn erased_sk(hash: &str) -> String {
    keys::ERASED_SUPPRESSION.sk(hash)
}

/// Why an address comes off the list.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoveSuppression {
    /// Why the address may receive email again (1 to 500 characters); kept in the
    /// `email.suppression.removed` event.
    #[schema(min_length = 1, max_length = 500, pattern = "\\S")]
    pub reason: String,
}

/// Take an address off the suppression list, with the reason kept in
/// `email.suppression.removed`; the entry removed.
pub async fn remove(app: &App, ws: &WorkspaceId, address: &str, reason: &str, removed_by: &str) -> ApiResult<Suppression> {
    let mut errs = shared::validate::Errors::new();
    errs.text("reason", reason, 1, 500);
    errs.finish()?;
    // Feedback stores what `normalise_email` makes of SES's address, or (one it refuses) the
    // address lower-cased.
    let address = shared::validate::normalise_email(address).unwrap_or_else(|| address.trim().to_lowercase());
    let sk = keys::EMAIL_SUPPRESSION.sk(&address);
    let (s, _): (Suppression, i64) = app.db.get_object(ws, &sk).await?.ok_or_else(|| shared::ApiError::not_found("suppression"))?;
    let data = serde_json::json!({"address": s.address, "previous_reason": s.reason, "reason": reason, "removed_by": removed_by});
    Tx::new()
        .delete_if(ws_pk(ws), sk, "attribute_exists(pk)", vec![])
        .event(shared::events::Event::new(ws, EventType::EmailSuppressionRemoved, &data))
        .commit(app)
        .await
        .map_err(|e| e.on_condition(|_| shared::ApiError::not_found("suppression")))?;
    Ok(s)
}

/// One page of the suppressed addresses.
pub async fn list(app: &App, ws: &WorkspaceId, after: Option<String>, limit: usize) -> ApiResult<(Vec<Suppression>, Option<String>)> {
    shared::request::page(app, keys::EMAIL_SUPPRESSIONS.query(ws, after, limit)).await
}
