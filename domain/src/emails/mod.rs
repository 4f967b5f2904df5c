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
mod store;
pub mod suppressions;
pub mod templates;
pub mod unsubscribe;

use crate::ids::ContactId;
pub use crate::ids::{EmailBatchId, EmailId};
use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::ids::Timestamp;
use shared::{ApiError, ApiResult};
use std::collections::BTreeMap;
pub use store::{
    PRIVACY, PROVIDER_SK, Stored, attach_body, batch_sk, body_item, body_sk, due_item, due_key, due_shard_pk, enqueue, load,
    load_with_body, provider_lookup, provider_pk, record, unlink_contact,
};
use utoipa::ToSchema;

/// What an erased address becomes in an email's recipient lists.
pub const ERASED_ADDRESS: &str = "erased@erased.invalid";

/// What an erased email's subject line becomes.
pub const ERASED_SUBJECT: &str = "[erased]";

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

/// The value of `SendEmail` on `POST /emails` and `POST /emails/batch`: every message as SES
/// will get it, built by the code that then sends it (`compose::finish`). What a person approves
/// and what the run must build again, field for field.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Outgoing {
    pub messages: Vec<Message>,
}

impl crate::effects::Valued for crate::effects::SendEmail {
    type Value = Outgoing;
}

/// One message of an [`Outgoing`].
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Message {
    pub from: String,
    pub to: Vec<String>,
    pub cc: Vec<String>,
    pub bcc: Vec<String>,
    pub reply_to: Vec<String>,
    pub subject: String,
    pub html: Option<String>,
    pub text: Option<String>,
    /// A calendar invite sent as a `text/calendar` alternative.
    pub calendar: Option<String>,
    /// Every header the caller or the platform sets (an unsubscribe link stands as its
    /// placeholder: it is sealed, and made for the one recipient).
    pub headers: BTreeMap<String, String>,
    /// Each file: name, type, size and SHA-256.
    pub attachments: Vec<attachments::Attachment>,
    /// When it goes: null for now.
    pub send_at: Option<Timestamp>,
    /// `queued`, `scheduled`, or `suppressed` when no recipient may receive it.
    pub status: EmailStatus,
    /// Recipients left out, and why.
    pub suppressed_recipients: Vec<SuppressedRecipient>,
    /// The contact it is recorded under.
    pub contact_id: Option<ContactId>,
    pub template_slug: Option<String>,
    pub locale: Option<String>,
    pub transactional: bool,
    pub tags: Vec<String>,
    pub metadata: BTreeMap<String, String>,
}

impl Outgoing {
    pub fn of<'a>(emails: impl IntoIterator<Item = &'a Email>) -> Self {
        let messages = emails
            .into_iter()
            .map(|e| Message {
                from: e.from.clone(),
                to: e.to.clone(),
                cc: e.cc.clone(),
                bcc: e.bcc.clone(),
                reply_to: e.reply_to.clone(),
                subject: e.subject.clone(),
                html: e.html.clone(),
                text: e.text.clone(),
                calendar: e.calendar.clone(),
                headers: e.headers.clone(),
                attachments: e.attachments.clone(),
                send_at: e.scheduled_at,
                status: e.status,
                suppressed_recipients: e.suppressed_recipients.clone(),
                contact_id: e.contact_id.clone(),
                template_slug: e.template_slug.clone(),
                locale: e.locale.clone(),
                transactional: e.transactional,
                tags: e.tags.clone(),
                metadata: e.metadata.clone(),
            })
            .collect();
        Self { messages }
    }
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

impl Email {
    /// Failed because SES's answer never came: SES may or may not have it.
    pub fn outcome_unknown(&self) -> bool {
        self.status == EmailStatus::Failed && self.error.as_ref().is_some_and(|e| e.code == "outcome_unknown")
    }
}

fn shard(id: &str) -> u32 {
    id.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32)) % DUE_SHARDS
}

/// The sender's queue message: emails of one workspace to send (at most 100).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SendJob {
    #[serde(deserialize_with = "WorkspaceId::from_record")]
    pub workspace_id: WorkspaceId,
    pub email_ids: Vec<EmailId>,
}

pub fn not_found() -> ApiError {
    ApiError::not_found("email")
}
