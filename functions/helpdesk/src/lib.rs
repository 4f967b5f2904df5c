//! Helpdesk: a shared inbox. Conversations with a contact in a mailbox, listed by their last
//! message (an index, O(page)); messages in order: inbound from the customer, replies sent
//! through the emails area (threaded, from the mailbox, answering to the conversation's reply
//! address), internal notes (never sent). Every message lands on the contact's timeline.

use domain::effects::{self as fx, Effect as _};
use domain::helpdesk::ops::{self, AddMessage, CreateConversation, FirstMessage, ListConversations, NewContact, UpdateConversation};
use domain::helpdesk::{Conversation, ConversationId, ConversationStatus, DeliveryStatus, DeliveryUpdate, Message, MessageType, Priority};
use shared::{ApiResult, App, Reply, WsReq};

shared::area! {
    tag = "helpdesk", description = "A shared inbox: conversations, inbound messages, replies through SES, internal notes",
    operations = [
        list_conversations, create_conversation [effects = &[fx::SendEmail::INFO]], get_conversation, update_conversation,
        list_messages, add_message [effects = &[fx::SendEmail::INFO]],
    ],
    schemas = [Conversation, ConversationStatus, Priority, Message, MessageType, DeliveryStatus, CreateConversation, FirstMessage,
        NewContact, UpdateConversation, AddMessage, domain::helpdesk::inbound::Attachment, domain::helpdesk::inbound::Automatic, DeliveryUpdate,
        domain::helpdesk::inbound::Authentication, domain::helpdesk::inbound::Truncation],
}

/// Start a conversation: a customer's message recorded from an integration (`inbound`), or
/// staff writing first (`reply`, sent by email). Events `helpdesk.conversation.created` and
/// `helpdesk.message.received` / `helpdesk.message.sent`.
#[utoipa::path(post, path = "/helpdesk/conversations", tag = "helpdesk", request_body = CreateConversation,
    responses((status = 201, body = shared::openapi::Data<Conversation>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_conversation(app: &App, req: WsReq) -> ApiResult<Reply> {
    let c = ops::create_conversation(app, &req.ws, &req.grant, &req.principal.subject, req.json()?).await?;
    Ok(Reply::created(&c))
}

/// Conversations by their last message, newest first; filters combine.
#[utoipa::path(get, path = "/helpdesk/conversations", tag = "helpdesk",
    params(shared::openapi::PageParams, ("status" = Option<ConversationStatus>, Query), ("assignee" = Option<String>, Query),
        ("contact_id" = Option<domain::ids::ContactId>, Query), ("tag" = Option<String>, Query),
        ("mailbox" = Option<String>, Query)),
    responses((status = 200, body = shared::openapi::ListOf<Conversation>), shared::openapi::CommonErrors))]
pub async fn list_conversations(app: &App, req: WsReq) -> ApiResult<Reply> {
    let q: ListConversations = req.query_as()?;
    let bound = q.bound();
    let filters: Vec<(&str, Option<&str>)> = bound.iter().map(|(k, v)| (*k, v.as_deref())).collect();
    let page = req.page(app, "helpdesk_conversations", &filters).await?;
    Ok(Reply::page(&page, ops::list_conversations(app, &req.ws, &q, page.after.clone(), page.limit).await?))
}

/// One helpdesk conversation.
#[utoipa::path(get, path = "/helpdesk/conversations/{id}", tag = "helpdesk", params(("id" = String, Path, description = "conv_...")),
    responses((status = 200, body = shared::openapi::Data<Conversation>), shared::openapi::CommonErrors))]
pub async fn get_conversation(app: &App, req: WsReq) -> ApiResult<Reply> {
    let id: ConversationId = req.path_id("id")?;
    Ok(Reply::ok(&domain::helpdesk::load(app, &req.ws, &id).await?.0))
}

/// Change status (`open`, `pending`, `snoozed` with `snoozed_until`, `closed`), priority,
/// assignee, tags or subject. Events `helpdesk.conversation.updated`, plus `assigned`,
/// `closed` and `reopened` when those happen.
#[utoipa::path(patch, path = "/helpdesk/conversations/{id}", tag = "helpdesk", request_body = UpdateConversation,
    params(("id" = String, Path, description = "conv_...")),
    responses((status = 200, body = shared::openapi::Data<Conversation>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn update_conversation(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: UpdateConversation = req.json()?;
    let id: ConversationId = req.path_id("id")?;
    Ok(Reply::ok(&ops::update_conversation(app, &req.ws, &id, input).await?))
}

/// Messages of a conversation, oldest first; a reply shows where its email stands.
#[utoipa::path(get, path = "/helpdesk/conversations/{id}/messages", tag = "helpdesk",
    params(("id" = String, Path, description = "conv_..."), shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<Message>), shared::openapi::CommonErrors))]
pub async fn list_messages(app: &App, req: WsReq) -> ApiResult<Reply> {
    let id: ConversationId = req.path_id("id")?;
    let page = req.page(app, &format!("helpdesk_messages/{}", &*id), &[]).await?;
    Ok(Reply::page(&page, ops::list_messages(app, &req.ws, &id, page.after.clone(), page.limit).await?))
}

/// Add a reply (sent through SES from the mailbox, threaded; 409 when the contact's address
/// is suppressed) or an internal note.
#[utoipa::path(post, path = "/helpdesk/conversations/{id}/messages", tag = "helpdesk", request_body = AddMessage,
    params(("id" = String, Path, description = "conv_...")),
    responses((status = 201, body = shared::openapi::Data<Message>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn add_message(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: AddMessage = req.json()?;
    let id: ConversationId = req.path_id("id")?;
    Ok(Reply::created(&ops::add_message(app, &req.ws, &req.grant, &req.principal.subject, &id, input).await?))
}
