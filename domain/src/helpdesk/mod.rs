//! Helpdesk: conversations with a contact in a mailbox (an address at one of the workspace's
//! verified sending domains), and their messages: inbound (from the customer), replies (sent
//! through the emails area, so suppression, sending and SES feedback are the emails area's)
//! and internal notes (never sent).
//!
//! Items (pk = WS#<workspace>):
//! - `CONV#<conv id>`: the conversation; versioned. GSI1 `WS#<ws>#CONVS` / `CLAST#<last
//!   message at>#<conv id>` lists by last message, newest first (filters on the page); GSI2
//!   `WS#<ws>#CONVSTATUS#<status>` (keys only) serves `?status=` in the same order.
//! - `HMSG#<conv id>#<hm id>`: its messages, oldest first.
//! - `CONVTOKEN#<token>`: the conversation of a reply address `mailbox+<token>@domain` (the
//!   token is an HMAC, so no one can address a conversation they were not written from).
//! - `MSGREF#<sha256 of a Message-ID>`: the conversation a Message-ID belongs to (threading of
//!   inbound mail by In-Reply-To / References, and deduplication of inbound messages).

pub mod inbound;
pub mod mail;
pub mod ops;
pub mod snooze;
mod store;

use crate::contacts::{self, Contact, ContactId};
use crate::ids::EmailId;
pub use crate::ids::{ConversationId, HelpdeskMessageId};
use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::events::Event;
use shared::events::EventType;
use shared::ids::Timestamp;
use shared::validate::Errors;
use shared::{ApiError, ApiResult};
pub use store::{
    OutgoingReply, PRIVACY, check_mailbox, commit_with_reply, compose_reply, contact_for, conversation_sk, load, message_record,
    message_sk, record, reply_address, timeline, token_item,
};
use utoipa::ToSchema;

pub const MAX_TAGS: usize = 20;

pub const MAX_BODY_CHARS: usize = 100_000;

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum ConversationStatus {
    #[default]
    Open,
    /// Waiting on the customer.
    Pending,
    /// Until `snoozed_until`, or until the customer writes.
    Snoozed,
    Closed,
}

impl ConversationStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Pending => "pending",
            Self::Snoozed => "snoozed",
            Self::Closed => "closed",
        }
    }
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    Low,
    #[default]
    Normal,
    High,
    Urgent,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct Conversation {
    /// `conv_...`
    pub id: ConversationId,
    /// Always `helpdesk_conversation`.
    pub object: String,
    pub subject: String,
    pub status: ConversationStatus,
    pub priority: Priority,
    /// A member's subject (`sub` of their access token), or null.
    pub assignee: Option<String>,
    pub tags: Vec<String>,
    /// Null when the conversation was started by a message whose sender failed
    /// authentication (`unverified`): its From address is not attributed to anyone.
    pub contact_id: Option<ContactId>,
    /// Started by a message that failed DMARC (or SPF and DKIM both): the From address may be
    /// forged, so the conversation is linked to no contact and cannot be replied to until a
    /// person checks it.
    #[serde(default)]
    pub unverified: bool,
    /// `email` (the only channel so far).
    pub channel: String,
    /// The address the customer writes to, at a verified sending domain of the workspace.
    pub mailbox: String,
    pub snoozed_until: Option<Timestamp>,
    pub last_message_at: Timestamp,
    pub message_count: u32,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum MessageType {
    /// From the customer.
    Inbound,
    /// From staff, sent to the customer.
    Reply,
    /// Internal, never sent.
    Note,
}

/// Named `HelpdeskDeliveryStatus` in the contract: webhooks have their own `DeliveryStatus`.
#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[schema(as = HelpdeskDeliveryStatus)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    Pending,
    Sent,
    Delivered,
    Bounced,
    Failed,
}

impl DeliveryStatus {
    /// A reply's delivery, as its email stands.
    pub fn of(e: crate::emails::EmailStatus) -> Self {
        use crate::emails::EmailStatus as E;
        match e {
            E::Scheduled | E::Queued => Self::Pending,
            E::Sent => Self::Sent,
            E::Delivered => Self::Delivered,
            E::Bounced | E::Complained => Self::Bounced,
            E::Failed | E::Cancelled | E::Suppressed => Self::Failed,
        }
    }
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct Message {
    /// `hm_...`
    pub id: HelpdeskMessageId,
    /// Always `helpdesk_message`.
    pub object: String,
    pub conversation_id: ConversationId,
    pub r#type: MessageType,
    /// The sender's address (inbound, reply) or the member who wrote a note.
    pub from: String,
    pub to: Vec<String>,
    pub body_text: String,
    /// Sanitised HTML, when there is any.
    pub body_html: Option<String>,
    /// Replies only: where the email stands.
    pub delivery_status: Option<DeliveryStatus>,
    /// Replies only: the email that carries it (`GET /emails/{id}`).
    pub email_id: Option<EmailId>,
    /// Who wrote it (staff) for replies and notes.
    pub author: Option<String>,
    /// The RFC 5322 Message-ID of an inbound email (threading and deduplication).
    #[serde(default)]
    pub message_id: Option<String>,
    /// Files that came with an inbound email.
    #[serde(default)]
    pub attachments: Vec<inbound::Attachment>,
    /// Set when a machine sent it (it reopened nothing and notified no one).
    #[serde(default)]
    pub automatic: Option<inbound::Automatic>,
    /// Inbound only: SES's verdicts on the sender.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<inbound::Authentication>,
    /// Inbound only: what was cut to keep the message within the limits (null: nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<inbound::Truncation>,
    pub created_at: Timestamp,
}

/// A new contact for an address and a display name ("Kari Nordmann": first and last name,
/// each cut to what a contact takes, so a stranger's long name never fails the message).
pub fn new_contact(addr: &str, name: Option<&str>) -> ApiResult<Contact> {
    let short = |v: &str| inbound::printable(v).trim().chars().take(200).collect::<String>();
    let (first, last) = match name.map(str::trim).filter(|n| !n.is_empty()) {
        Some(n) => match n.rsplit_once(' ') {
            Some((f, l)) => (Some(short(f)), Some(short(l))),
            None => (Some(short(n)), None),
        },
        None => (None, None),
    };
    let input: contacts::CreateContact = serde_json::from_value(serde_json::json!({"email": addr, "first_name": first, "last_name": last}))
        .map_err(|e| ApiError::validation("contact", e.to_string()))?;
    let mut errs = Errors::new();
    let c = input.build(&mut errs);
    errs.finish().map_err(|e| e.prefixed("contact"))?;
    Ok(c)
}

/// A message's bodies, its event and the reply's email each hold both bodies: bounded together
/// so every item and event stays below DynamoDB's 400 KB (JSON escaping can double the text).
pub const MAX_MESSAGE_JSON_BYTES: usize = 300_000;

/// 400 naming the body when the message would not fit its items.
pub fn check_size(m: &Message) -> ApiResult<()> {
    let json = |s: &str| serde_json::to_string(s).map_or(usize::MAX, |j| j.len());
    let size = json(&m.body_text) + m.body_html.as_deref().map_or(0, json);
    if size > MAX_MESSAGE_JSON_BYTES {
        let field = if m.body_html.is_some() { "body_html" } else { "body_text" };
        return Err(ApiError::validation(
            field,
            format!("the message's bodies take {size} bytes as JSON; at most {MAX_MESSAGE_JSON_BYTES} together"),
        ));
    }
    Ok(())
}

/// The payload of `helpdesk.message.delivery_updated`: where a reply's email stands.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[schema(as = HelpdeskDeliveryUpdate)]
pub struct DeliveryUpdate {
    /// Always `helpdesk_delivery`.
    pub object: String,
    pub conversation_id: ConversationId,
    pub message_id: HelpdeskMessageId,
    pub email_id: EmailId,
    pub delivery_status: DeliveryStatus,
}

/// The helpdesk's event for a change of a reply's email (sent, delivered, bounced, failed),
/// for whoever moves the email: `None` for emails that carry no helpdesk reply.
pub fn delivery_event(ws: &WorkspaceId, e: &crate::emails::Email) -> Option<Event> {
    if !e.tags.iter().any(|t| t == "helpdesk") {
        return None;
    }
    let update = DeliveryUpdate {
        object: "helpdesk_delivery".into(),
        // Metadata a caller may have set on any email: only well-formed ids make the event.
        conversation_id: shared::ids::PrefixedId::parse(e.metadata.get("conversation_id")?)?,
        message_id: shared::ids::PrefixedId::parse(e.metadata.get("message_id")?)?,
        email_id: e.id.clone(),
        delivery_status: DeliveryStatus::of(e.status),
    };
    Some(Event::new(ws, EventType::HelpdeskMessageDeliveryUpdated, &update))
}

/// The event of a change to a conversation.
pub fn conversation_event(ws: &WorkspaceId, kind: EventType, c: &Conversation) -> Event {
    Event::new(ws, kind, c)
}

/// HTML as the helpdesk stores and returns it (`shared::html::sanitise`): no scripts, styles,
/// forms or frames, no event handlers, and no remote content (images load only from the
/// message itself, `cid:`); links keep `https`/`http`/`mailto` and open without a referrer.
pub fn sanitise_html(html: &str) -> String {
    shared::html::sanitise(html)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_keeps_text_and_links_and_loses_scripts_handlers_and_remote_content() {
        let dirty = r#"<p onclick="steal()">Hi <b>there</b><script>alert(1)</script></p><img src="https://t.example/pixel.gif"><img src="cid:logo"><a href="javascript:alert(1)">x</a><a href="https://example.com">ok</a><iframe src="https://evil"></iframe><style>p{}</style>"#;
        let clean = sanitise_html(dirty);
        for gone in ["onclick", "<script", "alert(1)", "t.example", "javascript:", "<iframe", "<style"] {
            assert!(!clean.contains(gone), "{gone} in {clean}");
        }
        for kept in ["<b>there</b>", "cid:logo", "https://example.com", "noopener"] {
            assert!(clean.contains(kept), "{kept} missing from {clean}");
        }
    }
}
