//! An inbound email joins the helpdesk: its conversation is found by the reply address it was
//! sent to (`mailbox+<token>@domain`), else by a Message-ID in its In-Reply-To / References
//! (ours, recorded per message, or SES's id of a reply we sent), else it starts a conversation
//! in the mailbox it was sent to, with the sender as contact (found or created).
//!
//! At least once in, once recorded: the message's own Message-ID is written with a condition
//! in the same transaction as the message, so a second delivery of the same email (SES
//! retries, a sender resending) adds nothing. Machines (auto-replies, bounces) are recorded
//! on their conversation without reopening it or notifying anyone, and start none; spam
//! (SES's verdict) is recorded closed, tagged `spam`, without events.
//!
//! DynamoDB calls per message: one BatchGetItem (the reply token, every reference and the
//! message's own id at once), one GetItem for the conversation (or two to find or create the
//! contact of a new one), the transaction; one more GetItem only when the thread is found by
//! SES's id of our reply.

use super::{
    Conversation, ConversationStatus, Message, MessageType, Priority, contact_for, conversation_event, conversation_sk, message_record,
    new_contact, record, sanitise_html, snooze, timeline,
};
use crate::contacts::{self, Contact, ContactId};
use crate::ids::ConversationId;
use crate::keys;
use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::events::Event;
use shared::events::EventType;
use shared::ids::Timestamp;
use shared::outbox::Tx;
use shared::store::{self, Item, TxError, s, ws_pk};
use shared::{ApiError, ApiResult, App};
use utoipa::ToSchema;

/// How a machine's message is recognised.
#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Automatic {
    /// `Auto-Submitted`, `Precedence: bulk|junk|list|auto_reply`, `X-Autoreply` and kin.
    AutoReply,
    /// A delivery report (`multipart/report`, `MAILER-DAEMON`, `postmaster`).
    Bounce,
}

/// A file that came with an inbound message. Stored in S3 when within the limits; listed
/// either way.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[schema(as = HelpdeskAttachment)]
pub struct Attachment {
    pub filename: String,
    pub content_type: String,
    /// Bytes, decoded.
    pub size: u64,
    /// For `cid:` references from the HTML body.
    pub content_id: Option<String>,
    pub inline: bool,
    /// False when it was over the size or count limit: listed, not kept.
    pub stored: bool,
    /// A link valid 1 hour, minted on each read of the messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub download_url: Option<String>,
    /// SHA-256 of the stored file (hex); null when it was not stored (or was stored before
    /// files were named by their content).
    #[serde(default)]
    pub sha256: Option<String>,
}

/// The object key of an inbound message's file: derived from the message's own Message-ID and
/// the file's content, so every attempt at recording one email writes the same objects (a
/// retry or a second delivery overwrites with the same bytes, never adds), a different message
/// claiming the same Message-ID cannot overwrite them, and nothing stores the key.
pub fn attachment_key(ws: &WorkspaceId, message_id: &str, sha256: &str) -> String {
    format!("attachments/{ws}/{}/{sha256}", ref_hash(message_id))
}

/// Where a message's file is: under its content's key, or (files stored before keys were
/// derived from the content, with no `sha256`) under the message's ids.
pub fn attachment_location(ws: &WorkspaceId, m: &Message, index: usize) -> Option<String> {
    let a = m.attachments.get(index)?;
    match (&a.sha256, &m.message_id) {
        (Some(sum), Some(id)) => Some(attachment_key(ws, id, sum)),
        _ => a.stored.then(|| format!("attachments/{ws}/{}/{}/{index}", m.conversation_id, m.id)),
    }
}

/// What a file's link downloads as: a type from this list, or `application/octet-stream`, and
/// always as an attachment, so nothing a stranger sent renders (HTML, SVG, XML run script in a
/// browser that opens them inline from our bucket's origin).
pub const INERT_TYPES: &[&str] = &[
    "application/pdf",
    "application/zip",
    "application/msword",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "application/vnd.ms-excel",
    "application/vnd.oasis.opendocument.text",
    "application/vnd.oasis.opendocument.spreadsheet",
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "image/heic",
    "text/plain",
    "text/csv",
    "text/calendar",
    "audio/mpeg",
    "video/mp4",
];

/// The type a file downloads as.
pub fn download_type(content_type: &str) -> &'static str {
    let t = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    INERT_TYPES.iter().find(|i| **i == t).copied().unwrap_or("application/octet-stream")
}

/// `attachment; filename="..."` with the name reduced to safe characters (quotes, controls and
/// path separators go) and RFC 6266's `filename*` for the rest.
pub fn content_disposition(filename: &str) -> String {
    use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
    let ascii: String =
        filename.chars().map(|c| if c.is_ascii_alphanumeric() || " ._-()".contains(c) { c } else { '_' }).take(150).collect();
    let ascii = if ascii.trim().is_empty() { "attachment".to_string() } else { ascii };
    format!("attachment; filename=\"{ascii}\"; filename*=UTF-8''{}", utf8_percent_encode(filename, NON_ALPHANUMERIC))
}

/// SES's verdicts on an inbound message's sender (`receipt.spfVerdict` and kin), the domains
/// they were for, and whether they prove the From address.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq, Default)]
#[schema(as = HelpdeskSenderAuthentication)]
pub struct Authentication {
    /// `PASS`, `FAIL`, `GRAY` or `PROCESSING_FAILED`; null when SES gave none.
    pub spf: Option<String>,
    pub dkim: Option<String>,
    pub dmarc: Option<String>,
    /// The envelope sender's domain, which SPF checked (SES's `mail.source`); null for an empty
    /// envelope sender (a bounce).
    #[serde(default)]
    pub spf_domain: Option<String>,
    /// The signing domains (`d=`) of the message's DKIM signatures.
    #[serde(default)]
    pub dkim_domains: Vec<String>,
    /// True only on positive evidence for the From address: DMARC `PASS`, or SPF `PASS` for an
    /// envelope sender aligned with the From domain, or DKIM `PASS` of a message whose one
    /// signature is by an aligned domain; never with DMARC `FAIL` or a From of several
    /// mailboxes. Anything else (`GRAY`, no verdict, a pass for an unaligned domain) attributes
    /// the message to no one.
    pub verified: bool,
    /// Why it is verified or not, in words.
    #[serde(default)]
    pub reason: String,
}

/// The verdicts SES gave a message, before they are judged against its From address.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Verdicts {
    pub spf: Option<String>,
    pub dkim: Option<String>,
    pub dmarc: Option<String>,
    /// SES's `mail.source`, the envelope sender (MAIL FROM).
    pub envelope_from: Option<String>,
}

/// What the message itself says about who signed and who it is from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Signed {
    /// The From address (the first mailbox).
    pub from: String,
    /// One From header with one mailbox: otherwise no verdict names the address credited.
    pub single_from: bool,
    /// The `d=` domain of each `DKIM-Signature` header (validated domain names).
    pub dkim_signers: Vec<String>,
}

fn is(v: &Option<String>, verdict: &str) -> bool {
    v.as_deref().is_some_and(|v| v.eq_ignore_ascii_case(verdict))
}

/// DMARC's relaxed alignment between an authenticated domain and the From domain: the same
/// domain, or one inside the other. Without the public suffix list this is stricter than
/// DMARC's organisational domains for sibling subdomains (`a.example` and `b.example` do not
/// align here) and looser only where a public suffix itself signs, which no suffix's registry does.
pub fn aligned(authenticated: &str, from_domain: &str) -> bool {
    let (a, f) = (authenticated.trim_end_matches('.').to_ascii_lowercase(), from_domain.trim_end_matches('.').to_ascii_lowercase());
    if a.is_empty() || f.is_empty() || !a.contains('.') {
        return false;
    }
    a == f || f.ends_with(&format!(".{a}")) || a.ends_with(&format!(".{f}"))
}

/// The `d=` tag of a `DKIM-Signature` header value (RFC 6376 tag list), if it is a domain name.
pub fn dkim_signer(value: &str) -> Option<String> {
    value.split(';').find_map(|tag| {
        let (k, v) = tag.split_once('=')?;
        (k.trim() == "d").then(|| shared::validate::domain_name(&v.split_whitespace().collect::<String>()))?
    })
}

impl Authentication {
    /// Judge SES's verdicts for a message. DKIM's verdict is one for the whole message, so it
    /// proves a signing domain only when the message has one signature; SES's
    /// `Authentication-Results` header is not read (it repeats text the sender chose, the
    /// envelope sender and HELO, which could pose as results).
    pub fn judge(v: &Verdicts, m: &Signed) -> Self {
        let from_domain = m.from.rsplit_once('@').map(|(_, d)| d.to_ascii_lowercase()).unwrap_or_default();
        let spf_domain = v
            .envelope_from
            .as_deref()
            .and_then(|s| s.trim_matches(['<', '>']).rsplit_once('@'))
            .and_then(|(_, d)| shared::validate::domain_name(d));
        let shown = |x: &Option<String>| x.clone().unwrap_or_else(|| "none".into());
        let one_signer = (m.dkim_signers.len() == 1).then(|| m.dkim_signers[0].clone());
        let (verified, reason) = if !m.single_from {
            (false, "the From header names several mailboxes (or there are several From headers)".to_string())
        } else if is(&v.dmarc, "FAIL") {
            (false, format!("DMARC FAIL for {from_domain}"))
        } else if is(&v.dmarc, "PASS") {
            (true, format!("DMARC PASS for {from_domain}"))
        } else if let Some(d) = spf_domain.as_deref().filter(|d| is(&v.spf, "PASS") && aligned(d, &from_domain)) {
            (true, format!("SPF PASS for {d}, aligned with {from_domain}"))
        } else if let Some(d) = one_signer.as_deref().filter(|d| is(&v.dkim, "PASS") && aligned(d, &from_domain)) {
            (true, format!("DKIM PASS for the one signature, by {d}, aligned with {from_domain}"))
        } else {
            let spf = match (&spf_domain, is(&v.spf, "PASS")) {
                (Some(d), true) => format!("SPF PASS for {d}, not aligned with {from_domain}"),
                _ => format!("SPF {}", shown(&v.spf)),
            };
            let dkim = match (is(&v.dkim, "PASS"), m.dkim_signers.len()) {
                (true, 1) => format!("DKIM PASS for {}, not aligned with {from_domain}", m.dkim_signers[0]),
                (true, n) if n > 1 => format!("DKIM PASS for one of {n} signatures ({}), which one unknown", m.dkim_signers.join(", ")),
                _ => format!("DKIM {}", shown(&v.dkim)),
            };
            (false, format!("no positive evidence for {from_domain}: DMARC {}, {spf}, {dkim}", shown(&v.dmarc)))
        };
        Self {
            spf: v.spf.clone(),
            dkim: v.dkim.clone(),
            dmarc: v.dmarc.clone(),
            spf_domain,
            dkim_domains: m.dkim_signers.clone(),
            verified,
            reason,
        }
    }
}

/// What was cut from an inbound message to keep it within an item's limits. The message is
/// recorded either way; the raw original is kept only when the message was too large to store
/// its files (`message_bytes`).
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq, Default)]
#[schema(as = HelpdeskTruncation)]
pub struct Truncation {
    /// The HTML body's size in bytes before it was cut (over [`MAX_HTML_BYTES`]).
    pub html_bytes: Option<u64>,
    /// The text body's size in bytes before it was cut (over [`MAX_TEXT_BYTES`]).
    pub text_bytes: Option<u64>,
    /// Files beyond [`MAX_LISTED_FILES`], neither stored nor listed.
    pub files_omitted: u32,
    /// Recipients beyond [`MAX_RECIPIENTS`], not listed.
    pub recipients_omitted: u32,
    /// The whole message's size when it was too large to store its files one by one: they are
    /// listed, not stored, and the original is the first file (`original.eml`).
    #[serde(default)]
    pub message_bytes: Option<u64>,
}

/// The limits of what one inbound message records, chosen so the message item stays well
/// inside DynamoDB's 400 KB with every field at its limit.
/// The budget: the message item (bodies, 50 files of at most 600 bytes of metadata, 50
/// recipients) is under 160 KB, and its `helpdesk.message.received` event (the same message as
/// JSON, where escaping can at most double it once control characters are gone) under 320 KB.
pub const MAX_HTML_BYTES: usize = 64 * 1024;
pub const MAX_TEXT_BYTES: usize = 32 * 1024;
pub const MAX_LISTED_FILES: usize = 50;
pub const MAX_RECIPIENTS: usize = 50;
/// A file's name, type and Content-ID are cut to this many bytes each.
pub const MAX_FILE_FIELD_BYTES: usize = 200;

/// Text without control characters other than newline and tab (they would fail validation or
/// grow sixfold as JSON escapes).
pub fn printable(s: &str) -> String {
    s.chars().filter(|c| !c.is_control() || *c == '\n' || *c == '\t').collect()
}

/// `s` cut to at most `max` bytes at a character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// An inbound email, parsed, for one workspace.
pub struct Incoming {
    /// The address it was sent to, without the `+token`.
    pub mailbox: String,
    pub token: Option<String>,
    pub from: String,
    pub from_name: Option<String>,
    pub to: Vec<String>,
    pub subject: String,
    /// Its Message-ID (or SES's id when it has none), without angle brackets.
    pub message_id: String,
    /// In-Reply-To, then References newest first.
    pub references: Vec<String>,
    pub text: String,
    /// Sanitised here before it is stored.
    pub html: Option<String>,
    pub attachments: Vec<(Attachment, Option<Vec<u8>>)>,
    pub automatic: Option<Automatic>,
    pub spam: bool,
    pub authentication: Authentication,
    /// The raw size of a message too large to store file by file (its original is kept).
    pub oversized: Option<u64>,
}

#[derive(Debug, PartialEq)]
pub enum Outcome {
    Created {
        conversation_id: String,
        message_id: String,
    },
    Appended {
        conversation_id: String,
        message_id: String,
    },
    Duplicate,
    /// Not recorded, and why.
    Dropped(&'static str),
}

pub fn ref_hash(message_id: &str) -> String {
    shared::crypto::sha256_hex(message_id.trim().to_ascii_lowercase().as_bytes())
}

pub fn ref_sk(message_id: &str) -> String {
    keys::MESSAGE_REF.sk(&ref_hash(message_id))
}

/// The SES message id in a Message-ID SES gave our email (`<id>@<region>.amazonses.com`).
fn ses_id(message_id: &str) -> Option<&str> {
    let (local, domain) = message_id.rsplit_once('@')?;
    (domain == "amazonses.com" || domain.ends_with(".amazonses.com")).then_some(local)
}

impl Incoming {
    /// Keeps at most [`MAX_LISTED_FILES`] files, their names and types printable and short, each
    /// with the hash of its bytes; what it dropped is the truncation's start.
    fn limit_files(&mut self) -> Truncation {
        let mut truncated = Truncation { message_bytes: self.oversized, ..Truncation::default() };
        if self.attachments.len() > MAX_LISTED_FILES {
            truncated.files_omitted = (self.attachments.len() - MAX_LISTED_FILES) as u32;
            self.attachments.truncate(MAX_LISTED_FILES);
        }
        for (a, bytes) in &mut self.attachments {
            let field = |v: &str| cut(&printable(v), MAX_FILE_FIELD_BYTES).to_string();
            a.filename = field(&a.filename);
            a.content_type = field(&a.content_type);
            a.content_id = a.content_id.as_deref().map(field);
            a.sha256 = bytes.as_deref().map(shared::crypto::sha256_hex);
        }
        truncated
    }

    /// Spam and machines are recorded without reopening anything or telling anyone.
    fn quiet(&self) -> bool {
        self.spam || self.automatic.is_some()
    }

    /// The message as recorded in `conversation_id`: printable text and sanitised HTML within
    /// their limits, at most [`MAX_RECIPIENTS`] recipients, and what was cut.
    fn message(&self, conversation_id: ConversationId, mut truncated: Truncation, now: Timestamp) -> Message {
        let clean_text = printable(&self.text);
        let text = cut(&clean_text, MAX_TEXT_BYTES);
        if text.len() < clean_text.len() {
            truncated.text_bytes = Some(self.text.len() as u64);
        }
        // Cut, then sanitised (which closes what the cut leaves open and may grow the text by
        // escaping it): cut shorter until it fits.
        let body_html = self.html.as_deref().map(|h| {
            let mut limit = MAX_HTML_BYTES;
            let mut clean = sanitise_html(cut(h, limit));
            while clean.len() > MAX_HTML_BYTES && limit > 1024 {
                limit /= 2;
                clean = sanitise_html(cut(h, limit));
            }
            if h.len() > MAX_HTML_BYTES {
                truncated.html_bytes = Some(h.len() as u64);
            }
            clean
        });
        let mut to = self.to.clone();
        if to.len() > MAX_RECIPIENTS {
            truncated.recipients_omitted = (to.len() - MAX_RECIPIENTS) as u32;
            to.truncate(MAX_RECIPIENTS);
        }
        Message {
            id: crate::ids::HelpdeskMessageId::generate(),
            object: "helpdesk_message".into(),
            conversation_id,
            r#type: MessageType::Inbound,
            from: self.from.clone(),
            to,
            body_text: text.to_string(),
            body_html: body_html.filter(|h| !h.trim().is_empty()),
            delivery_status: None,
            email_id: None,
            author: None,
            message_id: Some(self.message_id.clone()),
            attachments: self.attachments.iter().map(|(a, _)| a.clone()).collect(),
            automatic: self.automatic,
            authentication: Some(self.authentication.clone()),
            truncated: (truncated != Truncation::default()).then_some(truncated),
            created_at: now,
        }
    }

    /// The conversation this message starts: spam closed and tagged `spam`, a sender who failed
    /// authentication tagged `unverified`.
    fn conversation(&self, id: ConversationId, contact_id: Option<ContactId>, now: Timestamp) -> Conversation {
        let verified = self.authentication.verified;
        let subject =
            if self.subject.trim().is_empty() { "(no subject)".to_string() } else { self.subject.trim().chars().take(300).collect() };
        let mut tags: Vec<String> = vec![];
        if self.spam {
            tags.push("spam".into());
        }
        if !verified {
            tags.push("unverified".into());
        }
        Conversation {
            id,
            object: "helpdesk_conversation".into(),
            subject,
            status: if self.spam { ConversationStatus::Closed } else { ConversationStatus::Open },
            priority: Priority::Normal,
            assignee: None,
            tags,
            contact_id,
            unverified: !verified,
            channel: "email".into(),
            mailbox: self.mailbox.clone(),
            snoozed_until: None,
            last_message_at: now,
            message_count: 1,
            created_at: now,
            updated_at: now,
        }
    }
}

/// `old` with one more message: a person's message reopens it (closed or snoozed) and moves its
/// last-message time; a quiet one only counts.
fn received(old: &Conversation, quiet: bool, now: Timestamp) -> Conversation {
    let mut c = old.clone();
    c.message_count += 1;
    c.updated_at = now;
    if !quiet {
        c.last_message_at = now;
        c.status = ConversationStatus::Open;
        c.snoozed_until = None;
    }
    c
}

/// The events a received message announces, in order: on a new conversation its creation and
/// the message; on an existing one the message, and when its status changed the update and,
/// from closed or snoozed, the reopening. A quiet message announces nothing.
fn announced(old: Option<&Conversation>, c: &Conversation, quiet: bool) -> Vec<EventType> {
    use EventType as E;
    match (quiet, old) {
        (true, _) => vec![],
        (false, None) => vec![E::HelpdeskConversationCreated, E::HelpdeskMessageReceived],
        (false, Some(old)) => {
            let mut out = vec![E::HelpdeskMessageReceived];
            if c.status != old.status {
                out.push(E::HelpdeskConversationUpdated);
                if matches!(old.status, ConversationStatus::Closed | ConversationStatus::Snoozed) {
                    out.push(E::HelpdeskConversationReopened);
                }
            }
            out
        }
    }
}

/// An announced event with its payload: the message, or the conversation.
fn announce(ws: &WorkspaceId, e: EventType, c: &Conversation, m: &Message) -> Event {
    match e {
        EventType::HelpdeskMessageReceived => Event::new(ws, e, m),
        _ => conversation_event(ws, e, c),
    }
}

pub async fn receive(app: &App, ws: &WorkspaceId, mut inc: Incoming) -> ApiResult<Outcome> {
    // Files first: a duplicate delivery below links the same ones (names and hashes).
    let truncated = inc.limit_files();
    let verified = inc.authentication.verified;
    let own = ref_sk(&inc.message_id);
    let mut keys_: Vec<(String, String)> = vec![(ws_pk(ws), own.clone())];
    if let Some(t) = &inc.token {
        keys_.push((ws_pk(ws), keys::CONVERSATION_TOKEN.sk(t)));
    }
    // A sender that failed authentication threads only by the reply address (a secret of the
    // conversation), never by Message-IDs, which others may know.
    let references: Vec<String> = if verified { inc.references.clone() } else { vec![] };
    for r in &references {
        keys_.push((ws_pk(ws), ref_sk(r)));
        if let Some(id) = ses_id(r) {
            keys_.push((crate::emails::provider_pk(id), crate::emails::PROVIDER_SK.to_string()));
        }
    }
    keys_.dedup();
    let found = app.db.batch_get(&keys_).await?;
    let by_key = |pk: &str, sk: &str| found.iter().find(|i| store::get_str(i, "pk") == Some(pk) && store::get_str(i, "sk") == Some(sk));
    if by_key(&ws_pk(ws), &own).is_some() {
        // Recorded by an earlier attempt that may have died before it untagged the files.
        link_files(app, ws, &inc).await?;
        return Ok(Outcome::Duplicate);
    }
    // The reply address first (it names one conversation), then references, newest first.
    let mut conv_id = inc
        .token
        .as_ref()
        .and_then(|t| by_key(&ws_pk(ws), &keys::CONVERSATION_TOKEN.sk(t)))
        .and_then(|i| store::get_str(i, "conversation_id"))
        .map(String::from);
    for r in &references {
        if conv_id.is_some() {
            break;
        }
        if let Some(i) = by_key(&ws_pk(ws), &ref_sk(r)) {
            conv_id = store::get_str(i, "conversation_id").map(String::from);
        } else if let Some(id) = ses_id(r)
            && let Some(i) = by_key(&crate::emails::provider_pk(id), crate::emails::PROVIDER_SK)
            && store::get_str(i, "workspace_id") == Some(ws)
            && let Some(email_id) = store::get_str(i, "email_id")
            && let Some(email) =
                app.db.get_object::<crate::emails::Email>(ws, &crate::keys::EMAIL.sk(&crate::ids::EmailId::trusted(email_id))).await?
        {
            conv_id = email.0.metadata.get("conversation_id").cloned();
        }
    }
    let existing = match &conv_id {
        Some(id) => app.db.get_object::<Conversation>(ws, &conversation_sk(&ConversationId::trusted(id))).await?,
        None => None,
    };
    if existing.is_none() && inc.automatic.is_some() {
        return Ok(Outcome::Dropped("an automatic message (auto-reply or bounce) that answers no conversation"));
    }
    let contact_id = match &existing {
        Some((c, _)) => c.contact_id.clone(),
        // A forged From must not put words in a contact's mouth: no contact by that address.
        None if !verified => None,
        None => Box::pin(contact_for_sender(app, ws, &inc.from, inc.from_name.as_deref(), !inc.spam)).await?.map(|c| c.id),
    };
    // Only a sender who passed authentication writes on a contact's timeline.
    let timeline_contact = contact_id.clone().filter(|_| verified);
    let now = Timestamp::now();
    let m = inc.message(existing.as_ref().map_or_else(ConversationId::generate, |(c, _)| c.id.clone()), truncated, now);
    for (a, bytes) in &inc.attachments {
        if let (Some(b), Some(sum)) = (bytes, &a.sha256) {
            let key = attachment_key(ws, &inc.message_id, sum);
            shared::aws::put_unlinked(app.s3(), &app.cfg.mail_bucket, &key, b.clone(), "application/octet-stream")
                .await
                .map_err(|e| ApiError::unavailable(format!("s3 put attachment: {e}")))?;
        }
    }
    let quiet = inc.quiet();
    let own_ref = Item::from([
        ("pk".into(), s(ws_pk(ws))),
        ("sk".into(), s(&own)),
        ("conversation_id".into(), s(&m.conversation_id)),
        ("message_id".into(), s(&m.id)),
    ]);
    let mut tx = Tx::new().put_if(own_ref, "attribute_not_exists(pk)", vec![]);
    let outcome = match existing {
        Some((old, version)) => {
            let c = received(&old, quiet, now);
            tx = snooze::changes(tx, ws, &old, &c).replace(record(ws, &c)?, version).put(message_record(ws, &m)?.item);
            if let Some(ct) = &timeline_contact {
                tx = tx.put(timeline(ws, ct, &c, &m)?);
            }
            for e in announced(Some(&old), &c, quiet) {
                tx = tx.event(announce(ws, e, &c, &m));
            }
            Outcome::Appended { conversation_id: String::from(c.id), message_id: m.id.to_string() }
        }
        None => {
            let c = inc.conversation(m.conversation_id.clone(), contact_id.clone(), now);
            tx = tx.create(record(ws, &c)?.version(1)).put(message_record(ws, &m)?.item);
            if let Some(ct) = &timeline_contact {
                tx = tx.put(timeline(ws, ct, &c, &m)?);
            }
            for e in announced(None, &c, quiet) {
                tx = tx.event(announce(ws, e, &c, &m));
            }
            Outcome::Created { conversation_id: String::from(c.id), message_id: m.id.to_string() }
        }
    };
    let outcome = match tx.commit(app).await {
        Ok(()) => outcome,
        // Another delivery recorded it meanwhile: the files it names are the ones just written
        // (same keys, same bytes), so they are linked all the same.
        Err(TxError::Condition(0)) => Outcome::Duplicate,
        // The conversation changed meanwhile: the queue brings the message back, and the next
        // try reads it afresh (and writes the same files again).
        Err(e) => return Err(TxError::stale(e)),
    };
    link_files(app, ws, &inc).await?;
    Ok(outcome)
}

/// Untag a recorded message's files (idempotent): the lifecycle rule leaves them alone.
async fn link_files(app: &App, ws: &WorkspaceId, inc: &Incoming) -> ApiResult<()> {
    // A file has a hash exactly when it is stored; one never written (the attempt that
    // recorded the message had other limits or files) is no error.
    for (a, _) in &inc.attachments {
        if let Some(sum) = &a.sha256 {
            shared::aws::link_object(app.s3(), &app.cfg.mail_bucket, &attachment_key(ws, &inc.message_id, sum))
                .await
                .map_err(|e| ApiError::unavailable(format!("s3 link attachment: {e}")))?;
        }
    }
    Ok(())
}

/// The contact of a new conversation's sender: found by address, or created. An address that
/// was erased comes back as a new contact, unrelated to the erased one: the person wrote to
/// the workspace again. Its tombstone is lifted for that (replies must reach them) only for
/// mail that is not spam (`may_return`; the caller passes only authenticated senders); the new
/// contact starts unsubscribed from marketing, and a suppression kept from before the erasure
/// (hashed) still holds. Otherwise the conversation has no contact.
async fn contact_for_sender(app: &App, ws: &WorkspaceId, from: &str, name: Option<&str>, may_return: bool) -> ApiResult<Option<Contact>> {
    match contact_for(app, ws, None, Some(from), name).await {
        Err(e) if e.message == crate::privacy::ERASED_MESSAGE && !may_return => Ok(None),
        Err(e) if e.message == crate::privacy::ERASED_MESSAGE => {
            let c = new_contact(from, name)?;
            let c = Contact { email_status: contacts::EmailStatus::Unsubscribed, ..c };
            match contacts::commit_return(app, ws, &c).await {
                Ok(()) => Ok(Some(c)),
                Err(e) => match contacts::email_owner(app, ws, &c.email).await?.as_deref().and_then(ContactId::parse) {
                    Some(id) => Ok(Some(contacts::load(app, ws, &id).await?.0)),
                    None => Err(e),
                },
            }
        }
        other => other.map(Some),
    }
}

/// Presigned links (1 hour) for a message's stored files.
pub async fn with_links(app: &App, ws: &WorkspaceId, m: &mut Message) -> ApiResult<()> {
    let m_ = m.clone();
    for (i, a) in m.attachments.iter_mut().enumerate().filter(|(_, a)| a.stored) {
        let Some(key) = attachment_location(ws, &m_, i) else { continue };
        let disposition = content_disposition(&a.filename);
        let hour = std::time::Duration::from_secs(3600);
        let url = shared::aws::presigned_get(
            app.s3(),
            &app.cfg.mail_bucket,
            &key,
            download_type(&a.content_type),
            None,
            Some(&disposition),
            hour,
        )
        .await
        .map_err(|e| ApiError::unavailable(format!("s3 presign: {e}")))?;
        a.download_url = Some(url);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdicts(spf: &str, dkim: &str, dmarc: &str, envelope: &str) -> Verdicts {
        let v = |x: &str| (x != "none").then(|| x.to_string());
        Verdicts { spf: v(spf), dkim: v(dkim), dmarc: v(dmarc), envelope_from: Some(envelope.into()) }
    }

    fn signed(signers: &[&str]) -> Signed {
        Signed { from: "ada@smallco.example".into(), single_from: true, dkim_signers: signers.iter().map(|s| s.to_string()).collect() }
    }

    #[test]
    fn a_sender_is_verified_only_on_positive_aligned_evidence() {
        // The review's forgery: SPF FAIL, DKIM PASS for the forger's own domain, DMARC GRAY.
        let a = Authentication::judge(&verdicts("FAIL", "PASS", "GRAY", "x@mailer.example"), &signed(&["mailer.example"]));
        assert!(!a.verified, "{}", a.reason);
        assert!(a.reason.contains("DKIM PASS for mailer.example, not aligned"), "{}", a.reason);
        for dmarc in ["GRAY", "none", "PROCESSING_FAILED", "FAIL"] {
            assert!(!Authentication::judge(&verdicts("none", "none", dmarc, ""), &signed(&[])).verified, "{dmarc}");
        }
        assert!(Authentication::judge(&verdicts("FAIL", "FAIL", "PASS", ""), &signed(&[])).verified);
        // Aligned SPF (the envelope sender in a subdomain) and aligned DKIM.
        assert!(Authentication::judge(&verdicts("PASS", "none", "GRAY", "bounce@mail.smallco.example"), &signed(&[])).verified);
        assert!(!Authentication::judge(&verdicts("PASS", "none", "GRAY", "bounce@smallco.example.evil"), &signed(&[])).verified);
        assert!(Authentication::judge(&verdicts("FAIL", "PASS", "GRAY", "x@mailer.example"), &signed(&["smallco.example"])).verified);
        // DKIM's verdict is the message's: with two signatures it proves neither domain.
        let two =
            Authentication::judge(&verdicts("FAIL", "PASS", "GRAY", "x@mailer.example"), &signed(&["smallco.example", "mailer.example"]));
        assert!(!two.verified, "{}", two.reason);
        assert!(!Authentication::judge(&verdicts("FAIL", "FAIL", "GRAY", "x@mailer.example"), &signed(&["smallco.example"])).verified);
        // DMARC FAIL wins over an aligned pass; a From of several mailboxes is never verified.
        assert!(!Authentication::judge(&verdicts("PASS", "PASS", "FAIL", "b@smallco.example"), &signed(&["smallco.example"])).verified);
        let many = Signed { single_from: false, ..signed(&[]) };
        assert!(!Authentication::judge(&verdicts("PASS", "PASS", "PASS", "b@smallco.example"), &many).verified);
        assert!(!aligned("example", "example"));
        assert!(!aligned("b.example", "a.example"));
        assert_eq!(dkim_signer("v=1; a=rsa-sha256; d=SmallCo.example; s=k1; bh=x; b=y"), Some("smallco.example".into()));
        assert_eq!(dkim_signer("v=1; d=\"smallco.example; x\"; s=k"), None);
    }

    #[test]
    fn ses_ids_are_read_from_its_message_ids_only() {
        assert_eq!(ses_id("0100018c-abc-000000@email.amazonses.com"), Some("0100018c-abc-000000"));
        assert_eq!(ses_id("0100018c@eu-west-1.amazonses.com"), Some("0100018c"));
        assert_eq!(ses_id("x@notamazonses.com"), None);
        assert_eq!(ref_hash("<A@b>".trim_matches(['<', '>'])), ref_hash("a@B"));
    }

    /// A customer's message to the support mailbox, its sender verified or not.
    fn incoming(verified: bool) -> Incoming {
        let authentication = Authentication { verified, ..Authentication::default() };
        Incoming {
            mailbox: "support@smallco.example".into(),
            token: None,
            from: "ada@customer.example".into(),
            from_name: None,
            to: vec!["support@smallco.example".into()],
            subject: "  Where is my order?  ".into(),
            message_id: "m1@customer.example".into(),
            references: vec![],
            text: "hello".into(),
            html: None,
            attachments: vec![],
            automatic: None,
            spam: false,
            authentication,
            oversized: None,
        }
    }

    fn at(s: &str) -> Timestamp {
        Timestamp::parse(s).unwrap()
    }

    #[test]
    fn a_new_conversation_is_open_closed_for_spam_and_tagged_when_unverified() {
        let now = at("2027-03-01T10:00:00Z");
        let ct = ContactId::generate();
        let c = incoming(true).conversation(ConversationId::generate(), Some(ct.clone()), now);
        assert_eq!(c.contact_id, Some(ct));
        assert_eq!((c.status, c.subject.as_str(), c.tags.len(), c.unverified), (ConversationStatus::Open, "Where is my order?", 0, false));
        assert_eq!((c.message_count, c.last_message_at, c.created_at), (1, now, now));
        let spam = Incoming { spam: true, ..incoming(false) }.conversation(ConversationId::generate(), None, now);
        assert_eq!(spam.status, ConversationStatus::Closed);
        assert_eq!(spam.tags, ["spam", "unverified"]);
        assert!(spam.unverified);
        let untitled = Incoming { subject: " \t".into(), ..incoming(true) }.conversation(ConversationId::generate(), None, now);
        assert_eq!(untitled.subject, "(no subject)");
        let long = Incoming { subject: "é".repeat(400), ..incoming(true) }.conversation(ConversationId::generate(), None, now);
        assert_eq!(long.subject.chars().count(), 300);
    }

    #[test]
    fn a_persons_message_reopens_and_a_quiet_one_only_counts() {
        let (then, now) = (at("2027-03-01T10:00:00Z"), at("2027-03-02T10:00:00Z"));
        let mut old = incoming(true).conversation(ConversationId::generate(), None, then);
        old.status = ConversationStatus::Snoozed;
        old.snoozed_until = Some(at("2027-03-05T10:00:00Z"));
        let c = received(&old, false, now);
        assert_eq!(
            (c.status, c.snoozed_until, c.last_message_at, c.updated_at, c.message_count),
            (ConversationStatus::Open, None, now, now, 2)
        );
        assert_eq!(
            announced(Some(&old), &c, false),
            [EventType::HelpdeskMessageReceived, EventType::HelpdeskConversationUpdated, EventType::HelpdeskConversationReopened]
        );
        let quiet = received(&old, true, now);
        assert_eq!((quiet.status, quiet.snoozed_until, quiet.last_message_at), (ConversationStatus::Snoozed, old.snoozed_until, then));
        assert_eq!((quiet.updated_at, quiet.message_count), (now, 2));
        assert!(announced(Some(&old), &quiet, true).is_empty(), "a machine's or spam's message tells no one");
        // An open conversation stays open: the message only.
        let open = incoming(true).conversation(ConversationId::generate(), None, then);
        assert_eq!(announced(Some(&open), &received(&open, false, now), false), [EventType::HelpdeskMessageReceived]);
        assert_eq!(announced(None, &open, false), [EventType::HelpdeskConversationCreated, EventType::HelpdeskMessageReceived]);
        assert!(announced(None, &open, true).is_empty());
        // From closed: reopened too; from pending: updated, not reopened.
        for (from, reopened) in [(ConversationStatus::Closed, true), (ConversationStatus::Pending, false)] {
            let old = Conversation { status: from, ..open.clone() };
            let c = received(&old, false, now);
            assert_eq!(c.status, ConversationStatus::Open);
            assert_eq!(announced(Some(&old), &c, false).contains(&EventType::HelpdeskConversationReopened), reopened, "{from:?}");
            assert!(announced(Some(&old), &c, false).contains(&EventType::HelpdeskConversationUpdated), "{from:?}");
        }
        // The message announces the message, the others the conversation.
        let ws = WorkspaceId::trusted("ws_1");
        let m = incoming(true).message(open.id.clone(), Truncation::default(), now);
        assert_eq!(announce(&ws, EventType::HelpdeskMessageReceived, &open, &m).data["id"], m.id.to_string());
        for e in [EventType::HelpdeskConversationCreated, EventType::HelpdeskConversationUpdated, EventType::HelpdeskConversationReopened] {
            assert_eq!(announce(&ws, e, &open, &m).data["id"], open.id.to_string(), "{e:?}");
        }
        let machine = Incoming { automatic: Some(Automatic::Bounce), ..incoming(true) };
        assert!(machine.quiet() && Incoming { spam: true, ..incoming(true) }.quiet() && !incoming(false).quiet());
    }

    #[test]
    fn a_message_keeps_what_fits_and_says_what_it_cut() {
        let file = |name: &str| {
            let a = Attachment {
                filename: name.into(),
                content_type: "text/plain".into(),
                size: 1,
                content_id: None,
                inline: false,
                stored: true,
                download_url: None,
                sha256: None,
            };
            (a, Some(b"x".to_vec()))
        };
        let mut inc = Incoming {
            attachments: (0..MAX_LISTED_FILES + 3).map(|_| file(&format!("a\u{7}{}", "n".repeat(300)))).collect(),
            text: "t".repeat(MAX_TEXT_BYTES + 10),
            html: Some(format!("<p>{}</p>", "h".repeat(MAX_HTML_BYTES))),
            to: (0..MAX_RECIPIENTS + 2).map(|i| format!("r{i}@smallco.example")).collect(),
            oversized: Some(9),
            ..incoming(true)
        };
        let truncated = inc.limit_files();
        assert_eq!((inc.attachments.len(), truncated.files_omitted, truncated.message_bytes), (MAX_LISTED_FILES, 3, Some(9)));
        let (a, _) = &inc.attachments[0];
        assert!(a.filename.len() <= MAX_FILE_FIELD_BYTES && !a.filename.contains('\u{7}'), "{}", a.filename);
        assert_eq!(a.sha256.as_deref(), Some(shared::crypto::sha256_hex(b"x").as_str()));
        let m = inc.message(ConversationId::generate(), truncated, at("2027-03-01T10:00:00Z"));
        let t = m.truncated.expect("what was cut");
        assert_eq!((m.body_text.len(), t.text_bytes), (MAX_TEXT_BYTES, Some(MAX_TEXT_BYTES as u64 + 10)));
        assert!(m.body_html.as_ref().is_some_and(|h| h.len() <= MAX_HTML_BYTES) && t.html_bytes.is_some());
        assert_eq!((m.to.len(), t.recipients_omitted), (MAX_RECIPIENTS, 2));
        assert_eq!((m.r#type, m.message_id.as_deref()), (MessageType::Inbound, Some("m1@customer.example")));
        let machine = Incoming { automatic: Some(Automatic::AutoReply), ..incoming(false) };
        let m = machine.message(ConversationId::generate(), Truncation::default(), at("2027-03-01T10:00:00Z"));
        assert_eq!((m.automatic, m.authentication.map(|a| a.verified)), (Some(Automatic::AutoReply), Some(false)));
        // Nothing cut, nothing said; an HTML body that sanitises to nothing is none.
        let small = Incoming { html: Some("<script>x</script>".into()), ..incoming(true) };
        let m = small.message(ConversationId::generate(), Truncation::default(), at("2027-03-01T10:00:00Z"));
        assert_eq!((m.truncated, m.body_html), (None, None));
    }
}
