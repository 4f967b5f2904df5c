//! Emails in the table: the record, its body kept apart, the provider's message-id look-up,
//! the due-time shards the sender sweeps, the queue, the look-ups and the privacy rule.

use super::{Email, EmailStatus, SendError, SendJob, attachments, not_found, redact, shard, suppressions};
use crate::ids::{ContactId, EmailBatchId, EmailId};
use crate::keys;
use shared::auth::WorkspaceId;
use shared::store::{self, Item, Record, n, s, ws_pk};
use shared::{ApiError, ApiResult, App};

/// What this area holds about a person: emails to (or naming) the address with their bodies,
/// batches whose errors name it, and its suppression entry.
pub const PRIVACY: &[crate::privacy::Rule] = {
    use crate::privacy::{Erase, Find, Rule};
    &[
        Rule {
            kind: keys::EMAIL.kind,
            area: "emails",
            find: Find::Mentions,
            export: true,
            erase: Erase::Custom(|a, w, i, s| Box::pin(erase_email(a, w, i, s))),
        },
        Rule {
            kind: keys::EMAIL_BODY.kind,
            area: "emails",
            find: Find::WithParent(keys::EMAIL.kind.name, |parent| {
                store::get_str(parent, "id").map(|id| body_sk(&EmailId::trusted(id))).into_iter().collect()
            }),
            export: true,
            erase: Erase::Delete,
        },
        Rule { kind: keys::EMAIL_BATCH.kind, area: "emails", find: Find::Mentions, export: false, erase: Erase::Delete },
        Rule {
            kind: keys::EMAIL_SUPPRESSION.kind,
            area: "emails",
            find: Find::Keys(|s| s.emails().map(|e| keys::EMAIL_SUPPRESSION.sk(e)).collect()),
            export: true,
            erase: Erase::Custom(|a, w, i, _| Box::pin(suppressions::hash_entry(a, w, i))),
        },
    ]
};

/// Erasure of one email: cancelled if it has not left (its due entry goes); every address of
/// the subject replaced in every list; the subject line, headers, metadata, error text and
/// diagnostic gone (they may name the person: "Welcome, Ada"); the contact link removed. What
/// stays is what names no one: status, timestamps, attempts, tags, the template used. The
/// bodies go with their own rule. An email being sent right now is retried by the job's next run;
/// one a stopped sender left claimed (SES may have it) ends `failed` / `outcome_unknown`, as
/// the sender would record it, not `cancelled`.
async fn erase_email(app: &App, ws: &WorkspaceId, item: Item, subject: &crate::privacy::Subject) -> ApiResult<()> {
    use shared::outbox::Tx;
    let version = store::get_i64(&item, "version").unwrap_or(0);
    let claimed = store::get_i64(&item, "claim_until").is_some_and(|t| t > chrono::Utc::now().timestamp());
    let left_claimed = !claimed && item.contains_key("claim_token");
    let mut e: Email = store::from_item(item)?;
    let mut tx = Tx::new();
    let now = shared::ids::Timestamp::now();
    let cancelled = e.status.pending();
    if cancelled {
        if claimed {
            return Err(ApiError::unavailable("an email to the subject is being sent; the erasure retries"));
        }
        let (pk, sk) = due_key(ws, &e);
        tx = tx.delete_if(pk, sk, "", vec![]);
        if left_claimed {
            e.error = Some(SendError { code: "outcome_unknown".into(), message: "[erased]".into() });
            e.set_status(EmailStatus::Failed, now);
        } else {
            e.set_status(EmailStatus::Cancelled, now);
        }
    }
    redact(&mut e, &|a: &str| subject.addressed(a));
    // The files go (a scheduled email's, and a sent one's that a failed delete left behind).
    attachments::discard(app, ws, &e).await?;
    if e.contact_id.is_some() && e.contact_id == subject.contact_id {
        e.contact_id = None;
    }
    e.updated_at = now;
    tx = tx.replace(record(ws, &e)?, version);
    if cancelled {
        tx = tx.event(shared::events::Event::new(ws, e.status.event(), &e));
    }
    tx.commit(app).await.map_err(store::TxError::stale)
}

pub fn body_sk(id: &EmailId) -> String {
    keys::EMAIL_BODY.sk(id)
}

pub fn batch_sk(id: &EmailBatchId) -> String {
    keys::EMAIL_BATCH.sk(id)
}

pub fn provider_pk(message_id: &str) -> String {
    keys::SES_MESSAGE.pk(message_id)
}

pub const PROVIDER_SK: &str = keys::SES_MESSAGE.kind.table.sk;

/// The look-up from SES's message id to the email, written when a send is known.
pub fn provider_lookup(ws: &WorkspaceId, message_id: &str, email_id: &str) -> store::Item {
    store::Item::from([
        ("pk".into(), store::s(provider_pk(message_id))),
        ("sk".into(), store::s(PROVIDER_SK)),
        ("workspace_id".into(), store::s(ws)),
        ("email_id".into(), store::s(email_id)),
    ])
}

/// The email item (without bodies) and its index keys.
pub fn record(ws: &WorkspaceId, e: &Email) -> ApiResult<Record> {
    let mut rec = Record::new(ws_pk(ws), keys::EMAIL.sk(&e.id), &e.without_bodies())?
        .gsi1(keys::EMAIL.gsi1_pk((ws, e.status.as_str())), keys::EMAIL.gsi1_sk(&e.id));
    if let Some(c) = &e.contact_id {
        rec = rec.gsi2(keys::EMAIL.gsi2_pk((ws, c)), keys::EMAIL.gsi2_sk(&e.id));
    }
    Ok(rec)
}

/// A deleted contact's emails lose their link to it (its id and the GSI2 entry), so that
/// nothing writes on the deleted contact's timeline again when their status changes (an SES
/// notice days later) and the portal lists none. Idempotent; a page of keys at a time.
pub async fn unlink_contact(app: &App, ws: &WorkspaceId, contact_id: &ContactId) -> ApiResult<()> {
    loop {
        let out = app.db.query_page(keys::EMAILS_OF_CONTACT.query((ws, contact_id), None, 100)).await?;
        if out.items.is_empty() {
            return Ok(());
        }
        for item in &out.items {
            let Some(sk) = store::get_str(item, "sk") else { continue };
            app.db
                .update(ws_pk(ws), sk, "SET contact_id = :null REMOVE gsi2pk, gsi2sk")
                .when("contact_id = :cid")
                .value(":null", shared::store::Value::Null(true))
                .value(":cid", s(contact_id))
                .apply()
                .await?;
        }
        if out.next_after.is_none() {
            return Ok(());
        }
    }
}

pub fn body_item(ws: &WorkspaceId, e: &Email) -> Item {
    let mut item = Item::from([("pk".into(), s(ws_pk(ws))), ("sk".into(), s(body_sk(&e.id)))]);
    if let Some(h) = &e.html {
        item.insert("html".into(), s(h));
    }
    if let Some(t) = &e.text {
        item.insert("text".into(), s(t));
    }
    if let Some(c) = &e.calendar {
        item.insert("calendar".into(), s(c));
    }
    if let Some(sealed) = &e.sealed_secrets {
        item.insert("sealed_secrets".into(), s(sealed));
    }
    item
}

/// Put the bodies of a body item back on the email.
pub fn attach_body(e: &mut Email, body: &Item) {
    e.html = store::get_str(body, "html").map(String::from);
    e.text = store::get_str(body, "text").map(String::from);
    e.calendar = store::get_str(body, "calendar").map(String::from);
    e.sealed_secrets = store::get_str(body, "sealed_secrets").map(String::from);
}

pub fn due_shard_pk(shard: u32) -> String {
    keys::EMAIL_DUE.pk(&shard.to_string())
}

/// The due entry's key: derived from the email alone, so any writer can delete it.
pub fn due_key(ws: &WorkspaceId, e: &Email) -> (String, String) {
    (due_shard_pk(shard(&e.id)), keys::EMAIL_DUE.sk((&format!("{:013}", e.due_ms().max(0)), ws, &e.id)))
}

/// `next_check` (epoch s): when the tick should look at this email again.
pub fn due_item(ws: &WorkspaceId, e: &Email, next_check: i64) -> Item {
    let (pk, sk) = due_key(ws, e);
    Item::from([
        ("pk".into(), s(pk)),
        ("sk".into(), s(sk)),
        ("workspace_id".into(), s(ws)),
        ("email_id".into(), s(&e.id)),
        ("next_check".into(), n(next_check)),
    ])
}

/// Enqueue send jobs, `delay` seconds from now (0..=900). Errors are logged, not returned: the
/// due entries make the schedule tick enqueue them again.
pub async fn enqueue(app: &App, ws: &WorkspaceId, ids: &[EmailId], delay: i64) -> bool {
    let mut ok = true;
    for chunk in ids.chunks(100) {
        let job = SendJob { workspace_id: ws.clone(), email_ids: chunk.to_vec() };
        let body = serde_json::to_string(&job).expect("job serializes");
        if let Err(e) = app.hand_off(&app.cfg.emails_queue_url, &body, delay).await {
            // The rest too: one slow queue must not cost a request a hand-off per chunk.
            tracing::warn!(error = %e, "email jobs not enqueued; the schedule tick will retry");
            ok = false;
            break;
        }
    }
    ok
}

/// An email as stored, with the sender's claim and the item version.
pub struct Stored {
    pub email: Email,
    pub version: i64,
    pub claim_token: Option<String>,
    pub claim_until: i64,
}

impl Stored {
    pub fn from_item(item: Item) -> ApiResult<Self> {
        Ok(Self {
            version: store::get_i64(&item, "version").unwrap_or(0),
            claim_token: store::get_str(&item, "claim_token").map(String::from),
            claim_until: store::get_i64(&item, "claim_until").unwrap_or(0),
            email: store::from_item(item)?,
        })
    }

    /// Someone is sending it right now.
    pub fn claimed(&self, now_secs: i64) -> bool {
        self.claim_token.is_some() && self.claim_until > now_secs
    }
}

/// `id` comes from a path ([`EmailId`]) or from the email's own queue message.
pub async fn load(app: &App, ws: &WorkspaceId, id: &EmailId) -> ApiResult<Option<Stored>> {
    app.db.get(&ws_pk(ws), &keys::EMAIL.sk(id)).await?.map(Stored::from_item).transpose()
}

/// One email with its bodies (one BatchGetItem).
pub async fn load_with_body(app: &App, ws: &WorkspaceId, id: &EmailId) -> ApiResult<Email> {
    let items = app.db.batch_get(&[(ws_pk(ws), keys::EMAIL.sk(id)), (ws_pk(ws), body_sk(id))]).await?;
    let mut email: Option<Email> = None;
    let mut body = None;
    for item in items {
        if store::get_str(&item, "sk").is_some_and(|sk| sk == body_sk(id)) {
            body = Some(item);
        } else {
            email = Some(store::from_item(item)?);
        }
    }
    let mut email = email.ok_or_else(not_found)?;
    if let Some(b) = body {
        attach_body(&mut email, &b);
    }
    Ok(email)
}
