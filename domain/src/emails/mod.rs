//! The email object, its items and the messages that drive sending.
//!
//! Items (pk = WS#<ws> unless noted):
//! - `EMAIL#<id>`: the email without its bodies (lists stay small). GSI1
//!   `WS#<ws>#EMAIL#<status>` serves the status filter; GSI2 `WS#<ws>#EMAILS#<contact>` (keys
//!   only) serves `contact_id`. While the sender works on it, `claim_token`/`claim_until` say who.
//! - `EMAILBODY#<id>`: subject-independent content (html, text, a calendar invite), read by GET and the sender.
//! - `EMAILBATCH#<id>`: a batch and its email ids in order (the `batch_id` filter).
//! - `DUE#EMAIL#<shard>` / `<due ms>#<ws>#<id>` (own partitions): every email that still has
//!   to leave (scheduled or queued). The schedule tick reads these to enqueue emails whose time
//!   is near and to re-enqueue ones whose queue message was lost; they go when the email
//!   reaches a final state.
//! - `SESMSG#<provider message id>` (own partition): maps SES notifications back to the email.

pub mod attachments;
pub mod batch;
pub mod compose;
pub mod domains;
pub mod list;
pub mod recipients;
pub mod suppressions;
pub mod templates;
pub mod unsubscribe;

use crate::ids::ContactId;
use crate::keys;
use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::ids::Timestamp;
use shared::store::{self, Item, Record, n, s, ws_pk};
use shared::{ApiError, ApiResult, App};
use std::collections::BTreeMap;
use utoipa::ToSchema;

pub use crate::ids::{EmailBatchId, EmailId};

/// What this area holds about a person: emails to (or naming) the address with their bodies,
/// batches whose errors name it, and its suppression entry.
pub const PRIVACY: &[crate::privacy::Rule] = {
    use crate::privacy::{Erase, Find, Rule};
    &[
        Rule {
            kind: keys::EMAIL,
            area: "emails",
            find: Find::Mentions,
            export: true,
            erase: Erase::Custom(|a, w, i, s| Box::pin(erase_email(a, w, i, s))),
        },
        Rule {
            kind: keys::EMAIL_BODY,
            area: "emails",
            find: Find::WithParent(keys::EMAIL.name, |parent| store::get_str(parent, "id").map(body_sk).into_iter().collect()),
            export: true,
            erase: Erase::Delete,
        },
        Rule { kind: keys::EMAIL_BATCH, area: "emails", find: Find::Mentions, export: false, erase: Erase::Delete },
        Rule {
            kind: keys::EMAIL_SUPPRESSION,
            area: "emails",
            find: Find::Keys(|s| s.emails().map(|e| keys::EMAIL_SUPPRESSION.sk(&[e])).collect()),
            export: true,
            erase: Erase::Custom(|a, w, i, _| Box::pin(suppressions::hash_entry(a, w, i))),
        },
    ]
};

/// What an erased address becomes in an email's recipient lists.
pub const ERASED_ADDRESS: &str = "erased@erased.invalid";

/// What an erased email's subject line becomes.
pub const ERASED_SUBJECT: &str = "[erased]";

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

/// Replace every address `theirs` names in the email's lists with [`ERASED_ADDRESS`], and
/// drop what may name the person (subject line, headers, metadata, error text, diagnostic):
/// an erasure's redaction, also applied to feedback that arrives about an erased address.
pub fn redact(e: &mut Email, theirs: &dyn Fn(&str) -> bool) {
    let redact = |v: &mut Vec<String>| {
        for a in v.iter_mut() {
            if theirs(a) {
                *a = ERASED_ADDRESS.into();
            }
        }
    };
    for l in [&mut e.to, &mut e.cc, &mut e.bcc, &mut e.reply_to] {
        redact(l);
    }
    for r in &mut e.suppressed_recipients {
        if theirs(&r.email) {
            r.email = ERASED_ADDRESS.into();
            r.contact_id = None;
        }
    }
    if let Some(f) = &mut e.feedback {
        redact(&mut f.recipients);
        f.diagnostic = None;
    }
    e.subject = ERASED_SUBJECT.into();
    attachments::redact(&mut e.attachments);
    e.headers.clear();
    e.metadata.clear();
    if let Some(err) = &mut e.error {
        err.message = "[erased]".into();
    }
}

pub const DUE_SHARDS: u32 = 8;
/// Scheduled emails this close to their time get a delayed queue message (SQS delays up to 15 min).
pub const ENQUEUE_AHEAD_SECS: i64 = 900;
/// Send attempts (throttling, SES unavailable) before an email is failed.
pub const MAX_ATTEMPTS: u32 = 5;

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum EmailStatus {
    Scheduled,
    Queued,
    Sent,
    Delivered,
    Bounced,
    Complained,
    Failed,
    Cancelled,
    Suppressed,
}

impl EmailStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scheduled => "scheduled",
            Self::Queued => "queued",
            Self::Sent => "sent",
            Self::Delivered => "delivered",
            Self::Bounced => "bounced",
            Self::Complained => "complained",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Suppressed => "suppressed",
        }
    }
    /// Still waiting to leave (the only states a send or a cancel acts on).
    pub fn pending(self) -> bool {
        matches!(self, Self::Scheduled | Self::Queued)
    }
    /// The event a change to this status emits (`email.<status>`).
    pub fn event(self) -> shared::events::EventType {
        use shared::events::EventType as E;
        match self {
            Self::Scheduled => E::EmailScheduled,
            Self::Queued => E::EmailQueued,
            Self::Sent => E::EmailSent,
            Self::Delivered => E::EmailDelivered,
            Self::Bounced => E::EmailBounced,
            Self::Complained => E::EmailComplained,
            Self::Failed => E::EmailFailed,
            Self::Cancelled => E::EmailCancelled,
            Self::Suppressed => E::EmailSuppressed,
        }
    }
}

/// Why a recipient was left out.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct SuppressedRecipient {
    pub email: String,
    /// The contact's `email_status`: unsubscribed, bounced or complained.
    pub reason: String,
    /// The contact of the address, when it has one (the suppression list also holds
    /// addresses of no contact).
    pub contact_id: Option<ContactId>,
}

/// What SES reported after sending (bounce or complaint details).
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct Feedback {
    /// `bounce` or `complaint`.
    pub kind: String,
    /// SES's type, e.g. `Permanent`, `Transient`, `abuse`.
    pub r#type: Option<String>,
    pub sub_type: Option<String>,
    pub recipients: Vec<String>,
    /// The receiving server's diagnostic, when SES passes it on.
    pub diagnostic: Option<String>,
    pub at: Timestamp,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct SendError {
    /// e.g. `MessageRejected`, `attempts_exhausted`, `all_recipients_suppressed`.
    pub code: String,
    pub message: String,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct Email {
    /// `em_...`
    pub id: EmailId,
    /// Always `email`.
    pub object: String,
    pub status: EmailStatus,
    /// `addr@domain` or `Name <addr@domain>`; a sender configured for the workspace.
    pub from: String,
    pub to: Vec<String>,
    pub cc: Vec<String>,
    pub bcc: Vec<String>,
    pub reply_to: Vec<String>,
    pub subject: String,
    /// Present on `GET /emails/{id}` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub html: Option<String>,
    /// Present on `GET /emails/{id}` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// A calendar invite (RFC 5545; its `METHOD` in the text) sent as a `text/calendar`
    /// alternative, so mail clients offer to add it: booking emails. Present on
    /// `GET /emails/{id}` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calendar: Option<String>,
    /// Files sent with it (the bytes are kept only until it reaches a final state).
    #[serde(default)]
    pub attachments: Vec<attachments::Attachment>,
    /// The template it was rendered from, if any, and the locale used.
    pub template_slug: Option<String>,
    pub locale: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub tags: Vec<String>,
    pub contact_id: Option<ContactId>,
    pub batch_id: Option<EmailBatchId>,
    pub scheduled_at: Option<Timestamp>,
    /// Transactional emails still go to unsubscribed contacts (never to bounced or complained).
    pub transactional: bool,
    /// SES's message id once sent.
    pub provider_message_id: Option<String>,
    pub suppressed_recipients: Vec<SuppressedRecipient>,
    pub feedback: Option<Feedback>,
    pub error: Option<SendError>,
    /// Send attempts so far.
    pub attempts: u32,
    /// When each status was reached, by status name.
    pub timestamps: BTreeMap<String, String>,
    pub metadata: BTreeMap<String, String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// One-time credentials the bodies carry (a sign-in link, a code), sealed: the stored and
    /// readable bodies hold `[[secret:<name>]]` in their place, and only the sender, on its way
    /// to SES, puts them back ([`Email::carry_secrets`]). Never serialized.
    #[serde(skip)]
    pub sealed_secrets: Option<String>,
    /// The bytes of `attachments`, in order: on a new email until it is stored, and on the
    /// sender's copy on its way to SES. Never serialized.
    #[serde(skip)]
    pub files: Vec<attachments::Bytes>,
}

/// What a credential in an email is replaced by wherever the email can be read.
pub fn secret_placeholder(name: &str) -> String {
    format!("[[secret:{name}]]")
}

impl Email {
    /// Seal `secrets` (name, value) for this email, beside any it carries already: its bodies
    /// and headers must name them by [`secret_placeholder`]. A credential in a body would
    /// otherwise be readable by any key with the read scope (`GET /emails/{id}`), and sign a
    /// reader in as the customer; an unsubscribe link would let a reader change the recipient's
    /// consent.
    pub fn carry_secrets(&mut self, key: &shared::app::PlatformSecret, secrets: &[(&str, &str)]) -> ApiResult<()> {
        let aad = format!("email-secrets/{}", self.id);
        let mut map: BTreeMap<String, String> = match &self.sealed_secrets {
            Some(sealed) => serde_json::from_slice(&key.open(&aad, sealed)?).map_err(|e| ApiError::internal(e))?,
            None => BTreeMap::new(),
        };
        map.extend(secrets.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let json = serde_json::to_vec(&map).map_err(|e| ApiError::internal(e))?;
        self.sealed_secrets = Some(key.seal(&aad, &json));
        Ok(())
    }

    /// The bodies and headers with the sealed credentials put back: for SES alone.
    pub fn with_secrets(mut self, key: &shared::app::PlatformSecret) -> ApiResult<Self> {
        let Some(sealed) = self.sealed_secrets.take() else { return Ok(self) };
        let json = key.open(&format!("email-secrets/{}", self.id), &sealed)?;
        let map: BTreeMap<String, String> = serde_json::from_slice(&json).map_err(|e| ApiError::internal(e))?;
        for (name, value) in &map {
            let at = secret_placeholder(name);
            self.text = self.text.map(|t| t.replace(&at, value));
            self.html = self.html.map(|h| h.replace(&at, value));
            for v in self.headers.values_mut() {
                *v = v.replace(&at, value);
            }
        }
        Ok(self)
    }
    /// Move to `status`, stamping the time it was reached.
    pub fn set_status(&mut self, status: EmailStatus, now: shared::ids::Timestamp) {
        self.status = status;
        self.timestamps.insert(status.as_str().into(), now.to_string());
        self.updated_at = now;
    }

    /// Recipients still to send to (to, cc, bcc without the suppressed ones).
    pub fn deliverable(&self) -> (Vec<String>, Vec<String>, Vec<String>) {
        let keep = |l: &Vec<String>| -> Vec<String> {
            l.iter().filter(|a| !self.suppressed_recipients.iter().any(|s| s.email == **a)).cloned().collect()
        };
        (keep(&self.to), keep(&self.cc), keep(&self.bcc))
    }

    /// The time (epoch ms) this email is due to leave.
    pub fn due_ms(&self) -> i64 {
        self.scheduled_at.unwrap_or(self.created_at).timestamp_millis()
    }

    /// As stored and as events carry it: without bodies.
    pub fn without_bodies(&self) -> Email {
        Email { html: None, text: None, calendar: None, files: vec![], ..self.clone() }
    }

    /// For the contact's timeline: which email, and where it stands.
    pub fn summary(&self) -> serde_json::Value {
        serde_json::json!({"email_id": self.id, "subject": self.subject, "status": self.status, "to": self.to})
    }
}

pub fn body_sk(id: &str) -> String {
    keys::EMAIL_BODY.sk(&[id])
}
pub fn batch_sk(id: &str) -> String {
    keys::EMAIL_BATCH.sk(&[id])
}
pub fn provider_pk(message_id: &str) -> String {
    keys::SES_MESSAGE.pk(&[message_id])
}
pub const PROVIDER_SK: &str = keys::SES_MESSAGE.table.sk;

/// The look-up from SES's message id to the email, written when a send is known.
pub fn provider_lookup(ws: &WorkspaceId, message_id: &str, email_id: &str) -> store::Item {
    store::Item::from([
        ("pk".into(), store::s(provider_pk(message_id))),
        ("sk".into(), store::s(PROVIDER_SK)),
        ("workspace_id".into(), store::s(ws)),
        ("email_id".into(), store::s(email_id)),
    ])
}

impl Email {
    /// Failed because SES's answer never came: SES may or may not have it.
    pub fn outcome_unknown(&self) -> bool {
        self.status == EmailStatus::Failed && self.error.as_ref().is_some_and(|e| e.code == "outcome_unknown")
    }
}

/// The email item (without bodies) and its index keys.
pub fn record(ws: &WorkspaceId, e: &Email) -> ApiResult<Record> {
    let mut rec = Record::new(ws_pk(ws), keys::EMAIL.sk(&[&e.id]), &e.without_bodies())?
        .gsi1(keys::EMAIL.gsi1_pk(&[ws, e.status.as_str()]), keys::EMAIL.gsi1_sk(&[&e.id]));
    if let Some(c) = &e.contact_id {
        rec = rec.gsi2(keys::EMAIL.gsi2_pk(&[ws, c]), keys::EMAIL.gsi2_sk(&[&e.id]));
    }
    Ok(rec)
}

/// A deleted contact's emails lose their link to it (its id and the GSI2 entry), so that
/// nothing writes on the deleted contact's timeline again when their status changes (an SES
/// notice days later) and the portal lists none. Idempotent; a page of keys at a time.
pub async fn unlink_contact(app: &App, ws: &WorkspaceId, contact_id: &str) -> ApiResult<()> {
    loop {
        let out = app.db.query_page(keys::EMAILS_OF_CONTACT.query(&[ws, contact_id], &[], None, 100)).await?;
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

fn shard(id: &str) -> u32 {
    id.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32)) % DUE_SHARDS
}

pub fn due_shard_pk(shard: u32) -> String {
    keys::EMAIL_DUE.pk(&[&shard.to_string()])
}

/// The due entry's key: derived from the email alone, so any writer can delete it.
pub fn due_key(ws: &WorkspaceId, e: &Email) -> (String, String) {
    (due_shard_pk(shard(&e.id)), keys::EMAIL_DUE.sk(&[&format!("{:013}", e.due_ms().max(0)), ws, &e.id]))
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

/// The sender's queue message: emails of one workspace to send (at most 100).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SendJob {
    #[serde(deserialize_with = "WorkspaceId::from_record")]
    pub workspace_id: WorkspaceId,
    pub email_ids: Vec<EmailId>,
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
pub async fn load(app: &App, ws: &WorkspaceId, id: &str) -> ApiResult<Option<Stored>> {
    app.db.get(&ws_pk(ws), &keys::EMAIL.sk(&[id])).await?.map(Stored::from_item).transpose()
}

/// One email with its bodies (one BatchGetItem).
pub async fn load_with_body(app: &App, ws: &WorkspaceId, id: &EmailId) -> ApiResult<Email> {
    let items = app.db.batch_get(&[(ws_pk(ws), keys::EMAIL.sk(&[id])), (ws_pk(ws), body_sk(id))]).await?;
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

pub fn not_found() -> ApiError {
    ApiError::not_found("email")
}
