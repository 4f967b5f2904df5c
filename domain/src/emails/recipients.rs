//! What the workspace knows about the addresses an email goes to: their contacts, the
//! contacts owning them, their suppressions and tombstones; and which of them may not get it.
//! Read when an email is accepted, again before it is sent, and by an unsubscribe.

use super::SuppressedRecipient;
use crate::contacts::{Contact, EmailStatus as ContactEmailStatus, contact_sk, email_of_claim, email_sk};
use crate::ids::ContactId;
use shared::auth::WorkspaceId;
use shared::store::{self, ws_pk};
use shared::{ApiResult, App};
use std::collections::HashMap;

/// What the workspace knows about a set of addresses.
pub struct Recipients {
    pub contacts: HashMap<String, Contact>,
    /// Lower-cased address -> contact id (the contacts area's email claims).
    pub owners: HashMap<String, String>,
    /// Lower-cased address -> reason, from the suppression list.
    pub suppressed: HashMap<String, String>,
}

/// Contacts by id, the contacts owning these addresses and the addresses' suppressions (two
/// reads whatever the count: the claims and suppressions together, then the contacts).
/// With `erased`, the addresses' tombstones are read in the same batch (when an email is
/// accepted; the sender need not: an erasure cancels what was accepted before it, and what is
/// accepted after it never stores the address).
pub async fn recipients_of(app: &App, ws: &WorkspaceId, ids: Vec<String>, addrs: Vec<String>, erased: bool) -> ApiResult<Recipients> {
    Ok(recipients_and(app, ws, ids, addrs, erased, None).await?.0)
}

/// [`recipients_of`], with one more item read in its first batch (`also`), answered beside.
pub(super) async fn recipients_and(
    app: &App,
    ws: &WorkspaceId,
    ids: Vec<String>,
    addrs: Vec<String>,
    erased: bool,
    also: Option<(String, String)>,
) -> ApiResult<(Recipients, Option<store::Item>)> {
    let mut claim_keys: Vec<(String, String)> = addrs.iter().map(|a| (ws_pk(ws), email_sk(a))).collect();
    claim_keys.extend(super::suppressions::keys_of(ws, &addrs));
    // Erased addresses are suppressed by their tombstones, and an address that bounced or
    // complained before it was erased by its hashed suppression (it may have come back with
    // new consent since), both read in the same batch.
    let hashes = if addrs.is_empty() || !erased { Default::default() } else { crate::privacy::address_hashes(app, ws, &addrs).await? };
    let mut hashed: HashMap<String, (&String, &str)> = HashMap::new();
    for (h, addr) in &hashes {
        hashed.insert(crate::keys::TOMBSTONE.sk(h), (addr, "erased"));
        hashed.insert(super::suppressions::erased_sk(h), (addr, ""));
    }
    claim_keys.extend(hashed.keys().map(|sk| (ws_pk(ws), sk.clone())));
    claim_keys.extend(also.clone());
    let claims = app.db.batch_get(&claim_keys).await?;
    let extra = also.and_then(|(pk, sk)| {
        claims.iter().find(|i| store::get_str(i, "pk") == Some(pk.as_str()) && store::get_str(i, "sk") == Some(sk.as_str())).cloned()
    });
    let mut suppressed = super::suppressions::from_items(&claims);
    for c in &claims {
        if let Some((addr, why)) = store::get_str(c, "sk").and_then(|sk| hashed.get(sk)) {
            let why = if why.is_empty() { store::get_str(c, "reason").unwrap_or("bounced") } else { why };
            // The tombstone's "erased" wins: it says why the address may not be mailed at all.
            suppressed
                .entry((*addr).clone())
                .and_modify(|r| {
                    if *why == *"erased" {
                        *r = why.to_string()
                    }
                })
                .or_insert_with(|| why.to_string());
        }
    }
    let mut owners = HashMap::new();
    for c in &claims {
        if let (Some(sk), Some(id)) = (store::get_str(c, "sk"), store::get_str(c, "contact_id")) {
            owners.insert(email_of_claim(sk).unwrap_or_default().to_string(), id.to_string());
        }
    }
    let mut keys: Vec<(String, String)> =
        ids.iter().chain(owners.values()).map(|id| (ws_pk(ws), contact_sk(&ContactId::trusted(id)))).collect();
    keys.sort();
    keys.dedup();
    let contacts = app
        .db
        .batch_get(&keys)
        .await?
        .into_iter()
        .map(|i| store::from_item::<Contact>(i).map(|c| (c.id.to_string(), c)))
        .collect::<ApiResult<HashMap<_, _>>>()?;
    Ok((Recipients { contacts, owners, suppressed }, extra))
}

/// Which recipients must not get this email: the workspace's suppression list (bounces and
/// complaints, contact or not), then their contact's `email_status` (an unsubscribe holds
/// for marketing only).
pub fn suppressed(addrs: impl IntoIterator<Item = String>, transactional: bool, r: &Recipients) -> Vec<SuppressedRecipient> {
    addrs
        .into_iter()
        .filter_map(|addr| {
            let contact = r.owners.get(&addr).and_then(|id| r.contacts.get(id));
            let contact_id = contact.map(|c| c.id.clone());
            // An unsubscribe kept on the list (an address without a contact) is for marketing
            // only, as a contact's is; bounces, complaints and erasures hold for all mail.
            if let Some(reason) = r.suppressed.get(&addr).filter(|r| !(transactional && *r == "unsubscribed")) {
                return Some(SuppressedRecipient { email: addr, reason: reason.clone(), contact_id });
            }
            let reason = match contact?.email_status {
                ContactEmailStatus::Bounced => "bounced",
                ContactEmailStatus::Complained => "complained",
                ContactEmailStatus::Unsubscribed if !transactional => "unsubscribed",
                _ => return None,
            };
            Some(SuppressedRecipient { email: addr, reason: reason.into(), contact_id })
        })
        .collect()
}
