//! Contacts in the table: the record, the email claim that keeps addresses unique, search
//! terms, the timeline, the transactions of create, update and delete with what they move, the
//! former holders of an address, the look-ups and the privacy rule.

use super::{Activity, Contact, Former, changed_fields, enum_str, full_name, import, search_terms, summary_of};
use crate::ids::{ActivityId, ContactId};
use crate::keys;
use shared::auth::WorkspaceId;
use shared::events::Event;
use shared::events::EventType;
use shared::outbox::Tx;
use shared::store::{self, Item, Record, s, ws_pk};
use shared::{ApiError, ApiResult, App};
use std::collections::HashMap;

/// What this area holds about a person (see `gdpr`): the contact, its claim, search entries
/// and timeline (notes included), and the rows and errors of imports that named the address.
pub const PRIVACY: &[crate::privacy::Rule] = {
    use crate::privacy::{Erase, Find, Rule};
    &[
        Rule {
            kind: keys::CONTACT.kind,
            area: "contacts",
            find: Find::Key(|s| s.contact_id.as_ref().map(contact_sk)),
            export: true,
            erase: Erase::Delete,
        },
        Rule {
            kind: keys::CONTACT_EMAIL_CLAIM.kind,
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
            kind: keys::CONTACT_SEARCH.kind,
            area: "contacts",
            find: Find::Keys(|s| match &s.contact_id {
                Some(id) => s.terms.iter().map(|t| search_sk(t, id)).collect(),
                None => vec![],
            }),
            export: false,
            erase: Erase::Delete,
        },
        Rule {
            kind: keys::CONTACT_FORMER.kind,
            area: "contacts",
            find: Find::Prefixes(|s| s.contact_id.iter().map(|c| keys::CONTACT_FORMER.sk_prefix_of(c)).collect()),
            export: true,
            erase: Erase::Delete,
        },
        Rule {
            kind: keys::ACTIVITY.kind,
            area: "contacts",
            find: Find::Prefixes(|s| s.contact_id.iter().map(activity_prefix).collect()),
            export: true,
            erase: Erase::Delete,
        },
        Rule {
            kind: keys::IMPORT_ROWS.kind,
            area: "contacts",
            find: Find::Mentions,
            export: false,
            erase: Erase::Custom(|a, w, i, s| Box::pin(import::erase_rows(a, w, i, s))),
        },
        Rule { kind: keys::IMPORT_ERROR.kind, area: "contacts", find: Find::Mentions, export: false, erase: Erase::Delete },
    ]
};

pub fn contact_sk(id: &ContactId) -> String {
    keys::CONTACT.sk(id)
}

/// The sort key of the claim that makes `email` this workspace's one contact with it.
pub fn email_sk(email: &str) -> String {
    keys::CONTACT_EMAIL_CLAIM.sk(email)
}

/// The address a claim's sort key names.
pub fn email_of_claim(sk: &str) -> Option<&str> {
    sk.strip_prefix(keys::CONTACT_EMAIL_CLAIM.sk_prefix())
}

fn search_sk(term: &str, id: &ContactId) -> String {
    keys::CONTACT_SEARCH.sk((term, id))
}

pub fn search_term_of(sk: &str) -> Option<&str> {
    sk.strip_prefix(keys::CONTACT_SEARCH.sk_prefix())?.rsplit_once('#').map(|(t, _)| t)
}

pub fn record(ws: &WorkspaceId, c: &Contact) -> ApiResult<Record> {
    Ok(Record::new(ws_pk(ws), contact_sk(&c.id), c)?.gsi1(keys::CONTACT.gsi1_pk((ws, &enum_str(c.status))), keys::CONTACT.gsi1_sk(&c.id)))
}

fn claim_item(ws: &WorkspaceId, email: &str, id: &str) -> Item {
    Item::from([("pk".into(), s(ws_pk(ws))), ("sk".into(), s(email_sk(email))), ("contact_id".into(), s(id))])
}

fn search_item(ws: &WorkspaceId, term: &str, id: &ContactId) -> Item {
    Item::from([("pk".into(), s(ws_pk(ws))), ("sk".into(), s(search_sk(term, id))), ("contact_id".into(), s(id))])
}

pub fn activity_prefix(contact_id: &ContactId) -> String {
    keys::ACTIVITY.sk_prefix_of(contact_id)
}

/// A timeline entry for a contact, to add to the transaction of the change it records. Other
/// areas (deals, later emails and bookings) call this too.
pub fn activity(
    ws: &WorkspaceId,
    contact_id: &ContactId,
    kind: &str,
    summary: impl Into<String>,
    data: serde_json::Value,
) -> ApiResult<Item> {
    let a = Activity {
        id: ActivityId::generate(),
        object: "activity".into(),
        contact_id: ContactId::trusted(contact_id),
        kind: kind.into(),
        summary: summary.into(),
        data,
        created_at: shared::ids::Timestamp::now(),
    };
    let sk = keys::ACTIVITY.sk((contact_id, &a.id));
    Ok(Record::new(ws_pk(ws), sk, &a)?.item)
}

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
                let r = Record::new(ws_pk(ws), keys::CONTACT_FORMER.sk((&old.id, field, &key)), &f)?;
                // A former address is found by its value too (an erasure by that address).
                Ok::<_, ApiError>(if field == "email" {
                    r.gsi1(keys::CONTACT_FORMER.gsi1_pk((ws, &key)), keys::CONTACT_FORMER.gsi1_sk((&f.changed_at, &old.id))).item
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
    let out = app.db.query_page(keys::CONTACTS_BY_FORMER_ADDRESS.query((ws, &key), None, 10).descending()).await?;
    Ok(out.items.into_iter().filter_map(|i| store::from_item::<Former>(i).ok()).map(|f| f.contact_id).next())
}

/// Every former identity of a contact (one Query; a contact has few).
pub async fn formers(app: &App, ws: &WorkspaceId, id: &ContactId) -> ApiResult<Vec<Former>> {
    let mut out = vec![];
    let mut after = None;
    loop {
        let page = app.db.query_page(keys::CONTACT_FORMERS.query_within(ws, id, after, 100)).await?;
        for i in page.items {
            out.push(store::from_item(i)?);
        }
        after = page.next_after;
        if after.is_none() {
            return Ok(out);
        }
    }
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
    // Each page deletes what it read, so every page is the first.
    for first_page in [keys::ACTIVITIES.query_within(ws, id, None, 100), keys::CONTACT_FORMERS.query_within(ws, id, None, 100)] {
        loop {
            let out = app.db.query_page(first_page.clone()).await?;
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

pub async fn load(app: &App, ws: &WorkspaceId, id: &ContactId) -> ApiResult<(Contact, i64)> {
    app.db.get_object(ws, &contact_sk(id)).await?.ok_or_else(|| ApiError::not_found("contact"))
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
