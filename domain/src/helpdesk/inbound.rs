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

use super::*;

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
}

/// The object key of a message's file: derived, so nothing stores it.
pub fn attachment_key(ws: &str, conv: &str, message: &str, index: usize) -> String {
    format!("attachments/{ws}/{conv}/{message}/{index}")
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

fn ref_sk(message_id: &str) -> String {
    keys::MESSAGE_REF.sk(&[&ref_hash(message_id)])
}

/// The SES message id in a Message-ID SES gave our email (`<id>@<region>.amazonses.com`).
fn ses_id(message_id: &str) -> Option<&str> {
    let (local, domain) = message_id.rsplit_once('@')?;
    (domain == "amazonses.com" || domain.ends_with(".amazonses.com")).then_some(local)
}

pub async fn receive(app: &App, ws: &str, inc: Incoming) -> ApiResult<Outcome> {
    let own = ref_sk(&inc.message_id);
    let mut keys_: Vec<(String, String)> = vec![(ws_pk(ws), own.clone())];
    if let Some(t) = &inc.token {
        keys_.push((ws_pk(ws), keys::CONVERSATION_TOKEN.sk(&[t])));
    }
    for r in &inc.references {
        keys_.push((ws_pk(ws), ref_sk(r)));
        if let Some(id) = ses_id(r) {
            keys_.push((crate::emails::provider_pk(id), crate::emails::PROVIDER_SK.to_string()));
        }
    }
    keys_.dedup();
    let found = app.db.batch_get(&keys_).await?;
    let by_key = |pk: &str, sk: &str| found.iter().find(|i| store::get_str(i, "pk") == Some(pk) && store::get_str(i, "sk") == Some(sk));
    if by_key(&ws_pk(ws), &own).is_some() {
        return Ok(Outcome::Duplicate);
    }
    // The reply address first (it names one conversation), then references, newest first.
    let mut conv_id = inc
        .token
        .as_ref()
        .and_then(|t| by_key(&ws_pk(ws), &keys::CONVERSATION_TOKEN.sk(&[t])))
        .and_then(|i| store::get_str(i, "conversation_id"))
        .map(String::from);
    for r in &inc.references {
        if conv_id.is_some() {
            break;
        }
        if let Some(i) = by_key(&ws_pk(ws), &ref_sk(r)) {
            conv_id = store::get_str(i, "conversation_id").map(String::from);
        } else if let Some(id) = ses_id(r)
            && let Some(i) = by_key(&crate::emails::provider_pk(id), crate::emails::PROVIDER_SK)
            && store::get_str(i, "workspace_id") == Some(ws)
            && let Some(email_id) = store::get_str(i, "email_id")
            && let Some(email) = app.db.get_object::<crate::emails::Email>(ws, &crate::emails::sk(email_id)).await?
        {
            conv_id = email.0.metadata.get("conversation_id").cloned();
        }
    }
    let existing = match &conv_id {
        Some(id) => app.db.get_object::<Conversation>(ws, &conversation_sk(id)).await?,
        None => None,
    };
    if existing.is_none() && inc.automatic.is_some() {
        return Ok(Outcome::Dropped("an automatic message (auto-reply or bounce) that answers no conversation"));
    }
    let contact_id = match &existing {
        Some((c, _)) => c.contact_id.clone(),
        None => Box::pin(contact_for(app, ws, None, Some(&inc.from), inc.from_name.as_deref())).await?.id,
    };
    let now = shared::ids::now_rfc3339();
    let m = Message {
        id: shared::ids::new_id("hm"),
        object: "helpdesk_message".into(),
        conversation_id: existing.as_ref().map_or_else(|| shared::ids::new_id("conv"), |(c, _)| c.id.clone()),
        r#type: MessageType::Inbound,
        from: inc.from.clone(),
        to: inc.to.clone(),
        body_text: inc.text.chars().take(MAX_BODY_CHARS).collect(),
        body_html: inc.html.as_deref().map(sanitise_html).filter(|h| !h.trim().is_empty()),
        delivery_status: None,
        email_id: None,
        author: None,
        message_id: Some(inc.message_id.clone()),
        attachments: inc.attachments.iter().map(|(a, _)| a.clone()).collect(),
        automatic: inc.automatic,
        created_at: now.clone(),
    };
    for (i, (_, bytes)) in inc.attachments.iter().enumerate() {
        if let Some(b) = bytes {
            app.s3()
                .put_object(&app.cfg.mail_bucket, &attachment_key(ws, &m.conversation_id, &m.id, i), b.clone(), &[])
                .await
                .map_err(|e| ApiError::unavailable(format!("s3 put attachment: {e}")))?;
        }
    }
    let quiet = inc.spam || inc.automatic.is_some();
    let own_ref = Item::from([
        ("pk".into(), s(ws_pk(ws))),
        ("sk".into(), s(&own)),
        ("conversation_id".into(), s(&m.conversation_id)),
        ("message_id".into(), s(&m.id)),
    ]);
    let mut tx = Tx::new().put_if(own_ref, "attribute_not_exists(pk)", vec![]);
    let outcome = match existing {
        Some((old, version)) => {
            let mut c = old.clone();
            c.message_count += 1;
            c.updated_at = now.clone();
            if !quiet {
                c.last_message_at = now.clone();
                c.status = ConversationStatus::Open;
                c.snoozed_until = None;
            }
            tx = snooze::changes(tx, ws, &old, &c).replace(record(ws, &c)?, version).put(message_record(ws, &m)?.item);
            tx = tx.put(timeline(ws, &contact_id, &c, &m)?);
            if !quiet {
                tx = tx.event(Event::new(ws, "helpdesk.message.received", &m));
                if c.status != old.status {
                    tx = tx.event(conversation_event(ws, "helpdesk.conversation.updated", &c));
                    if matches!(old.status, ConversationStatus::Closed | ConversationStatus::Snoozed) {
                        tx = tx.event(conversation_event(ws, "helpdesk.conversation.reopened", &c));
                    }
                }
            }
            Outcome::Appended { conversation_id: c.id, message_id: m.id.clone() }
        }
        None => {
            let subject =
                if inc.subject.trim().is_empty() { "(no subject)".to_string() } else { inc.subject.trim().chars().take(300).collect() };
            let c = Conversation {
                id: m.conversation_id.clone(),
                object: "helpdesk_conversation".into(),
                subject,
                status: if inc.spam { ConversationStatus::Closed } else { ConversationStatus::Open },
                priority: Priority::Normal,
                assignee: None,
                tags: if inc.spam { vec!["spam".into()] } else { vec![] },
                contact_id: contact_id.clone(),
                channel: "email".into(),
                mailbox: inc.mailbox.clone(),
                snoozed_until: None,
                last_message_at: now.clone(),
                message_count: 1,
                created_at: now.clone(),
                updated_at: now,
            };
            tx = tx.create(record(ws, &c)?.version(1)).put(message_record(ws, &m)?.item).put(timeline(ws, &contact_id, &c, &m)?);
            if !quiet {
                tx = tx.event(conversation_event(ws, "helpdesk.conversation.created", &c)).event(Event::new(
                    ws,
                    "helpdesk.message.received",
                    &m,
                ));
            }
            Outcome::Created { conversation_id: c.id, message_id: m.id.clone() }
        }
    };
    match tx.commit(app).await {
        Ok(()) => Ok(outcome),
        Err(TxError::Condition(0)) => Ok(Outcome::Duplicate),
        // The conversation changed meanwhile: the queue brings the message back, and the next
        // try reads it afresh.
        Err(e) => Err(TxError::stale(e)),
    }
}

/// Presigned links (1 hour) for a message's stored files.
pub async fn with_links(app: &App, ws: &str, m: &mut Message) -> ApiResult<()> {
    for (i, a) in m.attachments.iter_mut().enumerate().filter(|(_, a)| a.stored) {
        let key = attachment_key(ws, &m.conversation_id, &m.id, i);
        let response = [("response-content-type", a.content_type.as_str())];
        let url = app
            .s3()
            .presigned_get(&app.cfg.mail_bucket, &key, &response, std::time::Duration::from_secs(3600))
            .await
            .map_err(|e| ApiError::unavailable(format!("s3 presign: {e}")))?;
        a.download_url = Some(url);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ses_ids_are_read_from_its_message_ids_only() {
        assert_eq!(ses_id("0100018c-abc-000000@email.amazonses.com"), Some("0100018c-abc-000000"));
        assert_eq!(ses_id("0100018c@eu-west-1.amazonses.com"), Some("0100018c"));
        assert_eq!(ses_id("x@notamazonses.com"), None);
        assert_eq!(ref_hash("<A@b>".trim_matches(['<', '>'])), ref_hash("a@B"));
    }
}
