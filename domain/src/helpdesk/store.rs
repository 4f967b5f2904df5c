//! The helpdesk in the table: conversations and messages, the mailbox and reply-address
//! look-ups, the reply written with its email in one transaction, the timeline and the
//! privacy rule.

use super::{Conversation, Message, MessageType, inbound, new_contact};
use crate::contacts::{self, Contact, ContactId};
use crate::effects::{self, Authority};
use crate::emails::compose::{self, SendEmail};
use crate::ids::{ConversationId, HelpdeskMessageId};
use crate::keys;
use crate::privacy::{Erase, Find, Rule};
use shared::auth::WorkspaceId;
use shared::outbox::Tx;
use shared::store::{self, Item, Record, TxError, s, ws_pk};
use shared::{ApiError, ApiResult, App};
use std::collections::BTreeMap;

/// What this area holds about a person: their conversations (contact link) and the messages
/// in them. An erasure deletes the subject's conversations with their messages and look-ups.
pub const PRIVACY: &[Rule] = &[
    Rule {
        kind: keys::CONVERSATION.kind,
        area: "helpdesk",
        find: Find::Mentions,
        export: true,
        erase: Erase::Custom(|a, w, i, s| Box::pin(erase_conversation(a, w, i, s))),
    },
    Rule {
        kind: keys::HELPDESK_MESSAGE.kind,
        area: "helpdesk",
        find: Find::Mentions,
        export: true,
        erase: Erase::Custom(|a, w, i, _| Box::pin(delete_message(a, w, i))),
    },
    Rule {
        kind: keys::CONVERSATION_TOKEN.kind,
        area: "helpdesk",
        find: Find::ErasedByParent(keys::CONVERSATION.kind.name),
        export: false,
        erase: Erase::Delete,
    },
    Rule {
        kind: keys::MESSAGE_REF.kind,
        area: "helpdesk",
        find: Find::WithParent(keys::HELPDESK_MESSAGE.kind.name, |m| {
            store::get_str(m, "message_id").map(inbound::ref_sk).into_iter().collect()
        }),
        export: false,
        erase: Erase::Delete,
    },
];

pub fn conversation_sk(id: &ConversationId) -> String {
    keys::CONVERSATION.sk(id)
}

pub fn message_sk(conv: &ConversationId, id: &HelpdeskMessageId) -> String {
    keys::HELPDESK_MESSAGE.sk((conv, id))
}

/// The conversation item with its index keys.
pub fn record(ws: &WorkspaceId, c: &Conversation) -> ApiResult<Record> {
    let last = keys::CONVERSATION.gsi1_sk((&c.last_message_at.to_string(), &c.id));
    Ok(Record::new(ws_pk(ws), conversation_sk(&c.id), c)?
        .gsi1(keys::CONVERSATION.gsi1_pk(ws), last.clone())
        .gsi2(keys::CONVERSATION.gsi2_pk((ws, c.status.as_str())), last))
}

pub fn message_record(ws: &WorkspaceId, m: &Message) -> ApiResult<Record> {
    Record::new(ws_pk(ws), message_sk(&m.conversation_id, &m.id), m)
}

pub async fn load(app: &App, ws: &WorkspaceId, id: &ConversationId) -> ApiResult<(Conversation, i64)> {
    app.db.get_object(ws, &conversation_sk(id)).await?.ok_or_else(|| ApiError::not_found("conversation"))
}

/// The mailbox must be an address at a verified sending domain of the workspace.
pub async fn check_mailbox(app: &App, ws: &WorkspaceId, mailbox: &str) -> ApiResult<String> {
    let addr = shared::validate::normalise_email(mailbox).ok_or_else(|| ApiError::validation("mailbox", "not an email address"))?;
    let domains = crate::emails::domains::verified_names(app, ws).await?;
    if !crate::emails::domains::covers(&domains, &addr) {
        return Err(ApiError::validation(
            "mailbox",
            format!("{addr} is not at a verified sending domain of this workspace (see /emails/domains)"),
        ));
    }
    Ok(addr)
}

/// The reply address of a conversation: `local+<token>@domain`, the token an HMAC of the
/// workspace and conversation (stored as a look-up so inbound mail finds the conversation).
pub async fn reply_address(app: &App, ws: &WorkspaceId, c: &Conversation) -> ApiResult<(String, String)> {
    let key = &app.platform_secret().await?.reply_token_key;
    let token = shared::crypto::hex(&shared::crypto::hmac_sha256(key, format!("helpdesk-reply/{ws}/{}", c.id).as_bytes())[..10]);
    let (local, domain) = c.mailbox.split_once('@').unwrap_or((&c.mailbox, ""));
    Ok((format!("{local}+{token}@{domain}"), token))
}

pub fn token_item(ws: &WorkspaceId, token: &str, conv: &str) -> Item {
    Item::from([("pk".into(), s(ws_pk(ws))), ("sk".into(), s(keys::CONVERSATION_TOKEN.sk(token))), ("conversation_id".into(), s(conv))])
}

/// The contact a conversation is with: by id, or found or created by email.
pub async fn contact_for(app: &App, ws: &WorkspaceId, id: Option<&str>, email: Option<&str>, name: Option<&str>) -> ApiResult<Contact> {
    if let Some(id) = id {
        let id = ContactId::parse(id).ok_or_else(|| ApiError::validation("contact_id", "not a contact id (ct_...)"))?;
        return Ok(contacts::load(app, ws, &id)
            .await
            .map_err(|_| ApiError::validation("contact_id", "no such contact in this workspace"))?
            .0);
    }
    let email = email.ok_or_else(|| ApiError::validation("contact", "give contact_id or contact"))?;
    let addr = shared::validate::normalise_email(email).ok_or_else(|| ApiError::validation("contact.email", "not an email address"))?;
    if let Some(id) = contacts::email_owner(app, ws, &addr).await?
        && let Some(id) = ContactId::parse(&id)
    {
        return Ok(contacts::load(app, ws, &id).await?.0);
    }
    let c = new_contact(&addr, name)?;
    match contacts::commit_create(app, ws, &c, None).await {
        Ok(()) => Ok(c),
        Err(e) => match contacts::email_owner(app, ws, &c.email).await?.as_deref().and_then(ContactId::parse) {
            Some(id) => Ok(contacts::load(app, ws, &id).await?.0),
            None => Err(e),
        },
    }
}

/// A staff reply made into an email, not yet written: from the mailbox, to the contact,
/// answering to the conversation's reply address, threaded on the last inbound message.
pub struct OutgoingReply {
    pub email: crate::emails::Email,
    token: Item,
}

/// Build the reply's email (reads only). A suppressed address is 409.
pub async fn compose_reply(
    app: &App,
    ws: &WorkspaceId,
    c: &Conversation,
    contact: &Contact,
    m: &Message,
    in_reply_to: Option<&str>,
) -> ApiResult<OutgoingReply> {
    let (reply_to, token) = reply_address(app, ws, c).await?;
    let mut headers = BTreeMap::new();
    if let Some(r) = in_reply_to {
        // Stored bare; on the wire a Message-ID is an angle-bracketed token.
        let id = format!("<{}>", r.trim_matches(['<', '>']));
        headers.insert("In-Reply-To".to_string(), id.clone());
        headers.insert("References".to_string(), id);
    }
    let subject = if c.subject.to_lowercase().starts_with("re:") { c.subject.clone() } else { format!("Re: {}", c.subject) };
    let input = SendEmail {
        from: c.mailbox.clone(),
        to: vec![contact.email.clone()],
        cc: vec![],
        bcc: vec![],
        reply_to: vec![reply_to],
        subject: Some(subject),
        html: m.body_html.clone(),
        text: Some(m.body_text.clone()),
        template_slug: None,
        variables: Default::default(),
        locale: None,
        headers,
        tags: vec!["helpdesk".into()],
        scheduled_at: None,
        contact_id: Some(contact.id.to_string()),
        transactional: true,
        attachments: vec![],
        metadata: BTreeMap::from([("conversation_id".to_string(), c.id.to_string()), ("message_id".to_string(), m.id.to_string())]),
    };
    let email = Box::pin(compose::build_one(app, ws, input, chrono::Utc::now())).await?;
    if email.status == crate::emails::EmailStatus::Suppressed {
        let reason = email.suppressed_recipients.first().map(|s| s.reason.clone()).unwrap_or_default();
        return Err(ApiError::conflict(format!("the contact's address is suppressed ({reason}); the reply was not sent")));
    }
    Ok(OutgoingReply { email, token: token_item(ws, &token, &c.id) })
}

/// Commit the message's transaction; with a reply, the effect `SendEmail`: the email and its
/// reply-address token join the transaction that records the message, so the email exists only
/// if the message does, and is queued for SES only once both are written.
pub async fn commit_with_reply(
    app: &App,
    ws: &WorkspaceId,
    tx: Tx,
    conversation: (&ConversationId, i64),
    reply: Option<(Authority<effects::SendEmail>, OutgoingReply)>,
) -> ApiResult<()> {
    let Some((auth, r)) = reply else {
        return tx.commit(app).await.map_err(TxError::stale);
    };
    let now = chrono::Utc::now().timestamp();
    let (tx, queued) =
        compose::send_in(&auth, app, ws, &r.email, now, tx.put(r.token), &[(&conversation_sk(conversation.0), conversation.1)])?;
    tx.commit(app).await.map_err(TxError::stale)?;
    queued.after_commit(app).await;
    Ok(())
}

/// An erased subject's conversation goes with its messages (they are found by their own rule
/// when they name the subject; this removes the rest of the thread, which is about them).
async fn erase_conversation(app: &App, ws: &WorkspaceId, item: Item, _subject: &crate::privacy::Subject) -> ApiResult<()> {
    let Some(id) = store::get_str(&item, "id").map(ConversationId::trusted) else { return Ok(()) };
    // The reply-address look-up leads here: it goes first (its key is derived, never stored).
    if let Ok(c) = store::from_item::<Conversation>(item.clone()) {
        let (_, token) = reply_address(app, ws, &c).await?;
        app.db.delete(&ws_pk(ws), &keys::CONVERSATION_TOKEN.sk(&token)).await?;
    }
    let mut after = None;
    loop {
        let out = app.db.query_page(keys::HELPDESK_MESSAGES.query_within(ws, &id, after, 100)).await?;
        for m in out.items {
            delete_message(app, ws, m).await?;
        }
        after = out.next_after;
        if after.is_none() {
            break;
        }
    }
    app.db.delete(&ws_pk(ws), &conversation_sk(&id)).await
}

/// A message goes with every file it came with (stored or not: a file listed as not stored
/// may still have an object from an earlier attempt) and its Message-ID look-up.
async fn delete_message(app: &App, ws: &WorkspaceId, item: Item) -> ApiResult<()> {
    let Some(sk) = store::get_str(&item, "sk").map(String::from) else { return Ok(()) };
    if let Ok(m) = store::from_item::<Message>(item) {
        for i in 0..m.attachments.len() {
            if let Some(key) = inbound::attachment_location(ws, &m, i) {
                shared::aws::delete_object(app.s3(), &app.cfg.mail_bucket, &key)
                    .await
                    .map_err(|e| ApiError::unavailable(format!("s3 delete attachment: {e}")))?;
            }
        }
        if let Some(mid) = &m.message_id {
            app.db.delete(&ws_pk(ws), &inbound::ref_sk(mid)).await?;
        }
    }
    app.db.delete(&ws_pk(ws), &sk).await
}

/// The contact's timeline entry for a message.
pub fn timeline(ws: &WorkspaceId, contact_id: &ContactId, c: &Conversation, m: &Message) -> ApiResult<Item> {
    // (A conversation without a contact has no timeline: callers skip it.)
    let what = match m.r#type {
        MessageType::Inbound => "Message received",
        MessageType::Reply => "Reply sent",
        MessageType::Note => "Note added",
    };
    let kind = match m.r#type {
        MessageType::Inbound => "helpdesk.message.received",
        MessageType::Reply => "helpdesk.message.sent",
        MessageType::Note => "helpdesk.note.added",
    };
    contacts::activity(
        ws,
        contact_id,
        kind,
        format!("{what}: {}", c.subject),
        serde_json::json!({"conversation_id": c.id, "message_id": m.id, "type": m.r#type}),
    )
}
