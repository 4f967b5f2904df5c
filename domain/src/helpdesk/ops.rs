//! The helpdesk routes' operations: validation, the conversation and message writes with
//! their events and timeline entries, and replies sent through the emails area (the grant is
//! asked for the send only when a message is a reply).

use super::{
    Conversation, ConversationId, ConversationStatus, DeliveryStatus, MAX_BODY_CHARS, MAX_TAGS, Message, MessageType, Priority,
    check_mailbox, check_size, commit_with_reply, compose_reply, contact_for, conversation_event, load, message_record, record,
    sanitise_html, timeline,
};
use crate::contacts::{self, ContactId};
use crate::effects::SendEmail;
use crate::keys;
use serde::Deserialize;
use shared::auth::WorkspaceId;
use shared::authority::Grant;
use shared::events::EventType;
use shared::outbox::Tx;
use shared::store::{self, TxError, s, ws_pk};
use shared::validate::{Errors, Patch};
use shared::{ApiError, ApiResult, App};
use utoipa::ToSchema;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewContact {
    #[schema(format = Email, max_length = 254)]
    pub email: String,
    #[schema(max_length = 200)]
    pub name: Option<String>,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FirstMessage {
    /// `inbound`: the customer's message, recorded from an integration; `reply`: staff start
    /// an outbound conversation (sent by email).
    pub r#type: MessageType,
    #[schema(min_length = 1, max_length = 100000)]
    pub body_text: String,
    /// Sanitised before it is stored.
    #[schema(max_length = 500000)]
    pub body_html: Option<String>,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateConversation {
    #[schema(min_length = 1, max_length = 300, pattern = "\\S")]
    pub subject: String,
    /// An address at a verified sending domain of the workspace, e.g. `support@acme.com`.
    #[schema(format = Email, max_length = 254)]
    pub mailbox: String,
    #[schema(pattern = "^ct_[0-7][0-9A-HJKMNP-TV-Z]{25}$", extensions(("x-exactly-one" = json!(["contact_id", "contact"]))))]
    pub contact_id: Option<String>,
    /// Found by email, or created.
    pub contact: Option<NewContact>,
    pub message: FirstMessage,
    pub priority: Option<Priority>,
    /// At most 20, each 1 to 50 characters.
    #[serde(default)]
    #[schema(max_items = 20, min_length = 1, max_length = 50)]
    pub tags: Vec<String>,
    #[schema(min_length = 1, max_length = 200)]
    pub assignee: Option<String>,
}

fn check_tags(errs: &mut Errors, tags: &[String]) {
    if tags.len() > MAX_TAGS {
        errs.add("tags", format!("at most {MAX_TAGS}"));
    }
    for (i, t) in tags.iter().enumerate() {
        if t.is_empty() || t.chars().count() > 50 {
            errs.add(format!("tags[{i}]"), "1 to 50 characters");
        } else if t.chars().any(char::is_control) {
            errs.add(format!("tags[{i}]"), "must not contain control characters");
        }
    }
}

fn check_body(errs: &mut Errors, text: &str, html: Option<&str>) {
    errs.text("body_text", text, 1, MAX_BODY_CHARS);
    if text.trim().is_empty() && !text.is_empty() {
        errs.add("body_text", "must not be blank");
    }
    if let Some(h) = html
        && h.len() > 500_000
    {
        errs.add("body_html", "at most 500,000 bytes");
    }
}

fn sanitised(html: Option<String>) -> Option<String> {
    html.map(|h| sanitise_html(&h)).filter(|h| !h.trim().is_empty())
}

/// Start a conversation: a customer's message recorded from an integration (`inbound`), or
/// staff writing first (`reply`, sent by email). Events `helpdesk.conversation.created` and
/// `helpdesk.message.received` / `helpdesk.message.sent`.
pub async fn create_conversation(
    app: &App,
    ws: &WorkspaceId,
    grant: &Grant,
    by: &str,
    input: CreateConversation,
) -> ApiResult<Conversation> {
    let mut errs = Errors::new();
    errs.text("subject", input.subject.trim(), 1, 300);
    check_tags(&mut errs, &input.tags);
    check_body(&mut errs, &input.message.body_text, input.message.body_html.as_deref());
    if input.message.r#type == MessageType::Note {
        errs.add("message.type", "a conversation starts with an inbound message or a reply");
    }
    if input.contact_id.is_some() == input.contact.is_some() {
        errs.add("contact_id", "give exactly one of contact_id and contact");
    }
    errs.finish()?;
    // A reply is the effect: asked for before anything is written (a new contact included).
    let auth = (input.message.r#type == MessageType::Reply).then(|| grant.authorize_notice::<SendEmail>()).transpose()?;
    let mailbox = check_mailbox(app, ws, &input.mailbox).await?;
    let contact = contact_for(
        app,
        ws,
        input.contact_id.as_deref(),
        input.contact.as_ref().map(|c| c.email.as_str()),
        input.contact.as_ref().and_then(|c| c.name.as_deref()),
    )
    .await?;
    let now = shared::ids::Timestamp::now();
    let inbound = input.message.r#type == MessageType::Inbound;
    let mut c = Conversation {
        id: crate::ids::ConversationId::generate(),
        object: "helpdesk_conversation".into(),
        subject: input.subject.trim().to_string(),
        status: if inbound { ConversationStatus::Open } else { ConversationStatus::Pending },
        priority: input.priority.unwrap_or_default(),
        assignee: input.assignee,
        tags: input.tags,
        contact_id: Some(contact.id.clone()),
        unverified: false,
        channel: "email".into(),
        mailbox: mailbox.clone(),
        snoozed_until: None,
        last_message_at: now,
        message_count: 1,
        created_at: now,
        updated_at: now,
    };
    let mut m = Message {
        id: crate::ids::HelpdeskMessageId::generate(),
        object: "helpdesk_message".into(),
        conversation_id: c.id.clone(),
        r#type: input.message.r#type,
        from: if inbound { contact.email.clone() } else { mailbox.clone() },
        to: if inbound { vec![mailbox] } else { vec![contact.email.clone()] },
        body_text: input.message.body_text,
        body_html: sanitised(input.message.body_html),
        delivery_status: None,
        email_id: None,
        author: (!inbound).then(|| by.to_string()),
        message_id: None,
        attachments: vec![],
        automatic: None,
        authentication: None,
        truncated: None,
        created_at: now,
    };
    check_size(&m)?;
    // A staff reply's email is written with the conversation and queued only after: no
    // failure of the conversation's write can leave an email on its way.
    let reply = if let Some(auth) = auth {
        let out = compose_reply(app, ws, &c, &contact, &m, None).await?;
        m.email_id = Some(out.email.id.clone());
        m.delivery_status = Some(DeliveryStatus::of(out.email.status));
        Some((auth, out))
    } else {
        None
    };
    c.updated_at = m.created_at;
    let msg_event = if inbound { EventType::HelpdeskMessageReceived } else { EventType::HelpdeskMessageSent };
    let tx = Tx::new()
        .create(record(ws, &c)?.version(1))
        .put(message_record(ws, &m)?.item)
        .put(timeline(ws, &contact.id, &c, &m)?)
        .event(conversation_event(ws, EventType::HelpdeskConversationCreated, &c))
        .event(shared::events::Event::new(ws, msg_event, &m));
    commit_with_reply(app, ws, tx, (&c.id, 1), reply).await?;
    Ok(c)
}

/// The filters of a conversation list; they combine.
#[derive(Deserialize)]
pub struct ListConversations {
    pub status: Option<ConversationStatus>,
    pub assignee: Option<String>,
    #[serde(default)]
    pub contact_id: Option<ContactId>,
    pub tag: Option<String>,
    pub mailbox: Option<String>,
}

impl ListConversations {
    /// The filters as a page's cursor binds them (the mailbox as compared: trimmed, lower case).
    pub fn bound(&self) -> [(&'static str, Option<String>); 5] {
        [
            ("status", self.status.map(|s| s.as_str().to_string())),
            ("assignee", self.assignee.clone()),
            ("contact_id", self.contact_id.as_ref().map(|c| c.to_string())),
            ("tag", self.tag.clone()),
            ("mailbox", self.mailbox.as_deref().map(|m| m.trim().to_lowercase())),
        ]
    }
}

/// Conversations by their last message, newest first, after `after`; the page and the key to
/// go on from.
pub async fn list_conversations(
    app: &App,
    ws: &WorkspaceId,
    q: &ListConversations,
    after: Option<String>,
    limit: usize,
) -> ApiResult<(Vec<Conversation>, Option<String>)> {
    let status = q.status.map(ConversationStatus::as_str);
    let mailbox = q.mailbox.as_deref().map(|m| m.trim().to_lowercase());
    let mut conds = vec![];
    let mut vals = vec![];
    if let Some(a) = &q.assignee {
        conds.push("assignee = :assignee");
        vals.push((":assignee", s(a)));
    }
    if let Some(c) = &q.contact_id {
        conds.push("contact_id = :contact");
        vals.push((":contact", s(c.to_string())));
    }
    if let Some(t) = &q.tag {
        conds.push("contains(tags, :tag)");
        vals.push((":tag", s(t)));
    }
    if let Some(m) = &mailbox {
        conds.push("mailbox = :mailbox");
        vals.push((":mailbox", s(m)));
    }
    let expr = conds.join(" AND ");
    let out = match status {
        // Keys only on GSI2, then the conversations; the other filters apply to the page.
        Some(st) => {
            let spec = keys::CONVERSATIONS_BY_STATUS.query((ws, st), after, limit).descending();
            let (mut list, next) = shared::request::keyed_page::<Conversation>(app, spec).await?;
            list.sort_by(|a, b| (&b.last_message_at, &b.id).cmp(&(&a.last_message_at, &a.id)));
            list.retain(|c| {
                q.assignee.as_ref().is_none_or(|a| c.assignee.as_ref() == Some(a))
                    && q.contact_id.as_ref().is_none_or(|x| c.contact_id.as_deref() == Some(&**x))
                    && q.tag.as_ref().is_none_or(|t| c.tags.contains(t))
                    && mailbox.as_ref().is_none_or(|m| &c.mailbox == m)
            });
            return Ok((list, next));
        }
        None => {
            let mut spec = keys::CONVERSATIONS.query(ws, after, limit).descending();
            if !conds.is_empty() {
                spec = spec.filter(&expr, vals);
            }
            app.db.query_page(spec).await?
        }
    };
    let list: Vec<Conversation> = out.items.into_iter().map(store::from_item).collect::<ApiResult<_>>()?;
    Ok((list, out.next_after))
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct UpdateConversation {
    #[serde(default)]
    #[schema(value_type = String, min_length = 1, max_length = 300, pattern = "\\S")]
    pub subject: Patch<String>,
    #[serde(default)]
    #[schema(value_type = ConversationStatus)]
    pub status: Patch<ConversationStatus>,
    /// Required with `status: snoozed`: when it reopens by itself (RFC 3339, in the future).
    #[serde(default)]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub snoozed_until: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Priority)]
    pub priority: Patch<Priority>,
    /// A member's subject; null unassigns.
    #[serde(default)]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 200)]
    pub assignee: Patch<String>,
    /// Replaces the list: at most 20, each 1 to 50 characters.
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>, max_items = 20, min_length = 1, max_length = 50)]
    pub tags: Patch<Vec<String>>,
}

/// Change status (`open`, `pending`, `snoozed` with `snoozed_until`, `closed`), priority,
/// assignee, tags or subject. Events `helpdesk.conversation.updated`, plus `assigned`,
/// `closed` and `reopened` when those happen.
pub async fn update_conversation(app: &App, ws: &WorkspaceId, id: &ConversationId, input: UpdateConversation) -> ApiResult<Conversation> {
    let (old, version) = load(app, ws, id).await?;
    let mut c = old.clone();
    let mut errs = Errors::new();
    if let Some(v) = input.subject.required(&mut errs, "subject") {
        errs.text("subject", v.trim(), 1, 300);
        c.subject = v.trim().to_string();
    }
    if let Some(v) = input.status.required(&mut errs, "status") {
        c.status = v;
    }
    if let Some(v) = input.priority.required(&mut errs, "priority") {
        c.priority = v;
    }
    match input.assignee {
        Patch::Absent => {}
        Patch::Null => c.assignee = None,
        Patch::Value(a) => {
            errs.text("assignee", &a, 1, 200);
            c.assignee = Some(a);
        }
    }
    match input.tags {
        Patch::Absent => {}
        Patch::Null => c.tags.clear(),
        Patch::Value(t) => {
            check_tags(&mut errs, &t);
            c.tags = t;
        }
    }
    match input.snoozed_until {
        Patch::Absent => {}
        Patch::Null => c.snoozed_until = None,
        Patch::Value(t) => {
            if let Some(at) = errs.timestamp("snoozed_until", &t) {
                if at <= chrono::Utc::now() {
                    errs.add("snoozed_until", "must be in the future");
                }
                c.snoozed_until = Some(shared::ids::Timestamp::from(at));
            }
        }
    }
    if c.status == ConversationStatus::Snoozed && c.snoozed_until.is_none() {
        errs.add("snoozed_until", "required with status snoozed");
    }
    if c.status != ConversationStatus::Snoozed {
        c.snoozed_until = None;
    }
    errs.finish()?;
    if c == old {
        return Ok(old);
    }
    c.updated_at = shared::ids::Timestamp::now();
    let mut tx = super::snooze::changes(Tx::new(), ws, &old, &c).replace(record(ws, &c)?, version).event(conversation_event(
        ws,
        EventType::HelpdeskConversationUpdated,
        &c,
    ));
    if c.assignee != old.assignee && c.assignee.is_some() {
        tx = tx.event(conversation_event(ws, EventType::HelpdeskConversationAssigned, &c));
    }
    if c.status == ConversationStatus::Closed && old.status != ConversationStatus::Closed {
        tx = tx.event(conversation_event(ws, EventType::HelpdeskConversationClosed, &c));
    }
    if old.status == ConversationStatus::Closed && c.status != ConversationStatus::Closed {
        tx = tx.event(conversation_event(ws, EventType::HelpdeskConversationReopened, &c));
    }
    tx.commit(app).await.map_err(TxError::stale)?;
    Ok(c)
}

/// Messages of a conversation, oldest first; a reply shows where its email stands.
pub async fn list_messages(
    app: &App,
    ws: &WorkspaceId,
    id: &ConversationId,
    after: Option<String>,
    limit: usize,
) -> ApiResult<(Vec<Message>, Option<String>)> {
    // The conversation (404 if it is not this workspace's) and the page, side by side.
    let (_, out) =
        futures_util::future::try_join(load(app, ws, id), app.db.query_page(keys::HELPDESK_MESSAGES.query_within(ws, id, after, limit)))
            .await?;
    let mut list: Vec<Message> = out.items.into_iter().map(store::from_item).collect::<ApiResult<_>>()?;
    for m in &mut list {
        super::inbound::with_links(app, ws, m).await?;
    }
    // The replies' emails, in one read.
    let keys: Vec<(String, String)> = list.iter().filter_map(|m| m.email_id.as_ref()).map(|e| (ws_pk(ws), keys::EMAIL.sk(e))).collect();
    if !keys.is_empty() {
        let emails: Vec<crate::emails::Email> =
            app.db.batch_get(&keys).await?.into_iter().filter_map(|i| store::from_item(i).ok()).collect();
        for m in &mut list {
            if let Some(e) = emails.iter().find(|e| m.email_id.as_deref() == Some(e.id.as_str())) {
                m.delivery_status = Some(DeliveryStatus::of(e.status));
            }
        }
    }
    Ok((list, out.next_after))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddMessage {
    /// `reply` (sent to the contact by email) or `note` (internal, never sent).
    pub r#type: MessageType,
    #[schema(min_length = 1, max_length = 100000)]
    pub body_text: String,
    #[schema(max_length = 500000)]
    pub body_html: Option<String>,
    /// The conversation's status after a reply (default `pending`: waiting on the customer).
    pub status: Option<ConversationStatus>,
}

/// A message checked and built as `add_message` would write it, with its conversation (read at
/// `version`) and contact; nothing written.
struct Drafted {
    old: Conversation,
    version: i64,
    contact: Option<crate::contacts::Contact>,
    message: Message,
}

async fn draft_message(app: &App, ws: &WorkspaceId, by: &str, id: &ConversationId, input: AddMessage) -> ApiResult<Drafted> {
    let mut errs = Errors::new();
    check_body(&mut errs, &input.body_text, input.body_html.as_deref());
    if input.r#type == MessageType::Inbound {
        errs.add("type", "reply or note (inbound messages arrive by email, or start a conversation)");
    }
    if input.status == Some(ConversationStatus::Snoozed) {
        errs.add("status", "snooze with PATCH, which takes snoozed_until");
    }
    errs.finish()?;
    let (old, version) = load(app, ws, id).await?;
    let reply = input.r#type == MessageType::Reply;
    // A conversation started by a sender who failed authentication has no contact: notes are
    // fine, a reply would go to whoever really owns the forged address.
    let contact = match old.contact_id.as_deref() {
        Some(id) => {
            let cid = ContactId::parse(id).ok_or_else(|| ApiError::conflict("the conversation's contact was erased"))?;
            Some(contacts::load(app, ws, &cid).await.map_err(|_| ApiError::conflict("the conversation's contact no longer exists"))?.0)
        }
        None if reply => {
            return Err(ApiError::conflict(
                "the conversation's sender failed authentication (unverified), so it has no contact to reply to; start a conversation with the contact instead",
            ));
        }
        None => None,
    };
    let now = shared::ids::Timestamp::now();
    let m = Message {
        id: crate::ids::HelpdeskMessageId::generate(),
        object: "helpdesk_message".into(),
        conversation_id: old.id.clone(),
        r#type: input.r#type,
        from: if reply { old.mailbox.clone() } else { by.to_string() },
        to: match (&contact, reply) {
            (Some(ct), true) => vec![ct.email.clone()],
            _ => vec![],
        },
        body_text: input.body_text,
        body_html: sanitised(input.body_html),
        delivery_status: None,
        email_id: None,
        author: Some(by.to_string()),
        message_id: None,
        attachments: vec![],
        automatic: None,
        authentication: None,
        truncated: None,
        created_at: now,
    };
    Ok(Drafted { old, version, contact, message: m })
}

/// The email a reply would send, built as `add_message` builds it (for an approval request's
/// preview); its reply-to address is the conversation's, made when it is sent.
pub async fn preview_reply(app: &App, ws: &WorkspaceId, id: &ConversationId, input: AddMessage) -> ApiResult<crate::emails::Email> {
    let d = draft_message(app, ws, "preview", id, input).await?;
    check_size(&d.message)?;
    let contact = d.contact.as_ref().ok_or_else(|| ApiError::conflict("the conversation has no contact to reply to"))?;
    let last_inbound = last_inbound_message_id(app, ws, &d.old.id).await?;
    let mut email = compose_reply(app, ws, &d.old, contact, &d.message, last_inbound.as_deref()).await?.email;
    email.reply_to = vec![];
    Ok(email)
}

/// Add a reply (sent through SES from the mailbox, threaded; 409 when the contact's address
/// is suppressed) or an internal note.
pub async fn add_message(
    app: &App,
    ws: &WorkspaceId,
    grant: &Grant,
    by: &str,
    id: &ConversationId,
    input: AddMessage,
) -> ApiResult<Message> {
    let status = input.status;
    let Drafted { old, version, contact, message: mut m } = draft_message(app, ws, by, id, input).await?;
    let reply = m.r#type == MessageType::Reply;
    let now = m.created_at;
    check_size(&m)?;
    let mut c = old.clone();
    c.updated_at = now;
    let mut outgoing = None;
    if reply {
        let auth = grant.authorize_notice::<SendEmail>()?;
        let last_inbound = last_inbound_message_id(app, ws, &old.id).await?;
        let contact = contact.as_ref().ok_or_else(|| ApiError::internal("a reply without a contact"))?;
        let out = compose_reply(app, ws, &old, contact, &m, last_inbound.as_deref()).await?;
        m.email_id = Some(out.email.id.clone());
        m.delivery_status = Some(DeliveryStatus::of(out.email.status));
        outgoing = Some((auth, out));
        c.status = status.unwrap_or(ConversationStatus::Pending);
        c.snoozed_until = None;
        c.last_message_at = now;
        c.message_count += 1;
    } else {
        c.message_count += 1;
    }
    let kind = if reply { EventType::HelpdeskMessageSent } else { EventType::HelpdeskNoteAdded };
    let mut tx = super::snooze::changes(Tx::new(), ws, &old, &c)
        .replace(record(ws, &c)?, version)
        .put(message_record(ws, &m)?.item)
        .event(shared::events::Event::new(ws, kind, &m));
    if let Some(ct) = &contact {
        tx = tx.put(timeline(ws, &ct.id, &c, &m)?);
    }
    if c.status != old.status {
        tx = tx.event(conversation_event(ws, EventType::HelpdeskConversationUpdated, &c));
    }
    commit_with_reply(app, ws, tx, (&c.id, version), outgoing).await?;
    Ok(m)
}

/// The Message-ID of the customer's latest message, for In-Reply-To.
async fn last_inbound_message_id(app: &App, ws: &WorkspaceId, conv: &ConversationId) -> ApiResult<Option<String>> {
    let out = app.db.query_page(keys::HELPDESK_MESSAGES.query_within(ws, conv, None, 20).descending()).await?;
    Ok(out.items.iter().find_map(|i| store::get_str(i, "message_id").map(String::from)))
}
