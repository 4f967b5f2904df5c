//! SES notifications: delivery, bounce and complaint, as SES publishes them to SNS and SNS
//! delivers them to SQS (an SNS envelope whose `Message` is the SES JSON; raw delivery without
//! the envelope is accepted too). Both shapes SES uses are read: identity notifications
//! (`notificationType`) and configuration-set event publishing (`eventType`).
//!
//! The email moves forward only (sent < delivered < bounced < complained), so late or repeated
//! notifications change nothing. A permanent bounce marks the recipient's contact `bounced`, a
//! complaint `complained`; later sends to them are suppressed.

use super::Sender;
use crate::contacts::{Contact, EmailStatus as ContactEmailStatus};
use crate::emails::compose;
use crate::emails::{self as model, EmailStatus, Feedback};
use crate::ids::EmailId;
use serde_json::Value;
use shared::auth::WorkspaceId;
use shared::events::Event;
use shared::outbox::Tx;
use shared::store::{self, TxError};

pub struct Notification {
    /// `Delivery`, `Bounce`, `Complaint` (others are ignored).
    pub kind: String,
    pub message_id: String,
    /// Ours when SES echoes the `email_id` tag we send with (event publishing only).
    pub tagged_email_id: Option<String>,
    /// The `workspace_id` tag sent beside it.
    pub tagged_workspace_id: Option<String>,
    pub body: Value,
}

/// The SES notification in an SQS message body, if it is one.
pub fn parse(raw: &str) -> Option<Notification> {
    let v = shared::sqs::sns_message(raw)?;
    let kind = v.get("notificationType").or_else(|| v.get("eventType"))?.as_str()?.to_string();
    let message_id = v.pointer("/mail/messageId")?.as_str()?.to_string();
    let tag = |name: &str| v.pointer(&format!("/mail/tags/{name}/0")).and_then(Value::as_str).map(String::from);
    let (tagged_email_id, tagged_workspace_id) = (tag("email_id"), tag("workspace_id"));
    Some(Notification { kind, message_id, tagged_email_id, tagged_workspace_id, body: v })
}

fn strings(v: Option<&Value>, field: &str) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|r| r.get(field).and_then(Value::as_str)).filter_map(shared::validate::normalise_email).collect())
        .unwrap_or_default()
}

fn text(v: &Value, pointer: &str) -> Option<String> {
    v.pointer(pointer).and_then(Value::as_str).map(String::from)
}

/// A time SES reports (RFC 3339, with milliseconds).
fn time(v: &Value, pointer: &str) -> Option<shared::ids::Timestamp> {
    v.pointer(pointer).and_then(Value::as_str).and_then(shared::ids::Timestamp::parse)
}

fn rank(s: EmailStatus) -> u8 {
    match s {
        EmailStatus::Sent => 1,
        EmailStatus::Delivered => 2,
        EmailStatus::Bounced => 3,
        EmailStatus::Complained => 4,
        _ => 0,
    }
}

fn contact_rank(s: ContactEmailStatus) -> u8 {
    match s {
        ContactEmailStatus::Subscribed => 0,
        ContactEmailStatus::Unsubscribed => 1,
        ContactEmailStatus::Bounced => 2,
        ContactEmailStatus::Complained => 3,
    }
}

/// Apply one notification. `Err` keeps the message for another try.
pub async fn apply(sd: &Sender, n: &Notification) -> Result<(), String> {
    let app = &sd.app;
    let now = shared::ids::Timestamp::now();
    let Some(mut reading) = read(n, now) else { return Ok(()) };
    let Some(found) = find_email(sd, n).await? else { return Ok(()) };
    let ws = found.ws;
    // A notification about an erased address names no one (the erasure's promise), even
    // while the erasure is still on its way to this email: the address comes back neither in
    // the email, its events, a timeline, the suppression list (kept hashed) nor a contact.
    let mut named: Vec<String> = reading.feedback.as_ref().map(|f| f.recipients.clone()).unwrap_or_default();
    if let Some(s) = &found.stored {
        let e = &s.email;
        let entries = e.to.iter().chain(&e.cc).chain(&e.bcc).chain(&e.reply_to);
        named.extend(entries.filter_map(|a| shared::validate::parse_mailbox(a).map(|(_, addr)| addr)));
    }
    named.sort_unstable();
    named.dedup();
    let refs: Vec<&str> = named.iter().map(String::as_str).collect();
    let erased = crate::privacy::erased(app, &ws, &refs).await.map_err(|e| e.to_string())?;
    let theirs = |entry: &str| shared::validate::parse_mailbox(entry).is_some_and(|(_, a)| erased.contains(&a));
    // The erased among the addresses the feedback is about (suppressed by their hash only).
    let gone: Vec<String> = reading
        .feedback
        .as_ref()
        .map(|f| f.recipients.iter().filter(|r| erased.contains(r.as_str())).cloned().collect())
        .unwrap_or_default();
    if let Some(fb) = reading.feedback.as_mut().filter(|_| !erased.is_empty()) {
        fb.diagnostic = None;
        for r in &mut fb.recipients {
            if erased.contains(r.as_str()) {
                *r = model::ERASED_ADDRESS.into();
            }
        }
    }
    let email_id = found.stored.as_ref().map(|s| s.email.id.to_string());
    if let Some(stored) = found.stored {
        // An email whose send went unrecorded (`outcome_unknown`): SES's notification says
        // it had it after all, so it counts as sent (by SES's clock), with SES's id and its
        // look-up, and `email.sent` follows the earlier `email.failed`.
        let recovered = stored.email.outcome_unknown();
        let mut base = stored.email.clone();
        if recovered {
            tracing::warn!(email_id = %base.id, "SES had an email recorded outcome_unknown; recording it sent");
            base.error = None;
            base.provider_message_id = Some(n.message_id.clone());
            base.set_status(EmailStatus::Sent, time(&n.body, "/mail/timestamp").unwrap_or(now));
            base.updated_at = now;
        }
        let (mut e, moved) = advance(&base, &reading, now);
        if !erased.is_empty() {
            model::redact(&mut base, &theirs);
            model::redact(&mut e, &theirs);
        }
        if e != stored.email {
            let mut tx = Tx::new().replace(model::record(&ws, &e).map_err(|e| e.to_string())?, stored.version);
            if recovered {
                tx = tx.put(model::provider_lookup(&ws, &n.message_id, &e.id)).event(Event::new(&ws, EmailStatus::Sent.event(), &base));
            }
            if moved {
                tx = tx.event(Event::new(&ws, e.status.event(), &e));
                if let Some(ev) = crate::helpdesk::delivery_event(&ws, &e) {
                    tx = tx.event(ev);
                }
                // A timeline entry names the recipients; none for an erased one's email.
                if let Some(a) = compose::activity(&ws, &e).map_err(|e| e.to_string())?.filter(|_| erased.is_empty()) {
                    tx = tx.put(a);
                }
            }
            tx.commit(app).await.map_err(|e| TxError::stale(e).to_string())?;
        }
    }
    if let (Some(cs), Some(fb)) = (reading.contact_status, &reading.feedback) {
        // Every bounced or complaining address, contact or not, is suppressed from now on;
        // an erased one by its hash only.
        let reason = if cs == ContactEmailStatus::Complained { "complained" } else { "bounced" };
        let plain: Vec<String> = fb.recipients.iter().filter(|r| r.as_str() != model::ERASED_ADDRESS).cloned().collect();
        let res = model::suppressions::add(app, &ws, &plain, reason, email_id.as_deref()).await;
        res.and(model::suppressions::add_erased(app, &ws, &gone, reason).await).map_err(|e| e.to_string())?;
        mark_contacts(sd, &ws, &plain, cs).await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The workspace a notification is about, and its email unless only the recipients are left
/// to suppress.
struct Found {
    ws: WorkspaceId,
    stored: Option<model::Stored>,
}

/// What one notification says: where the email moves, the feedback to keep, and what it
/// means for the recipients' contacts.
struct Reading {
    target: Option<EmailStatus>,
    feedback: Option<Feedback>,
    contact_status: Option<ContactEmailStatus>,
    /// When it happened, by SES's clock.
    at: shared::ids::Timestamp,
}

/// Read a delivery, bounce or complaint; other kinds say nothing (`None`).
fn read(n: &Notification, now: shared::ids::Timestamp) -> Option<Reading> {
    let b = &n.body;
    let (target, feedback, contact_status) = match n.kind.as_str() {
        "Delivery" => (Some(EmailStatus::Delivered), None, None),
        "Bounce" => {
            let kind = text(b, "/bounce/bounceType");
            let permanent = kind.as_deref() == Some("Permanent");
            let fb = Feedback {
                kind: "bounce".into(),
                r#type: kind,
                sub_type: text(b, "/bounce/bounceSubType"),
                recipients: strings(b.pointer("/bounce/bouncedRecipients"), "emailAddress"),
                diagnostic: text(b, "/bounce/bouncedRecipients/0/diagnosticCode"),
                at: time(b, "/bounce/timestamp").unwrap_or(now),
            };
            // Transient bounces are recorded; SES keeps trying those itself.
            (permanent.then_some(EmailStatus::Bounced), Some(fb), permanent.then_some(ContactEmailStatus::Bounced))
        }
        "Complaint" => {
            let fb = Feedback {
                kind: "complaint".into(),
                r#type: text(b, "/complaint/complaintFeedbackType"),
                sub_type: text(b, "/complaint/complaintSubType"),
                recipients: strings(b.pointer("/complaint/complainedRecipients"), "emailAddress"),
                diagnostic: None,
                at: time(b, "/complaint/timestamp").unwrap_or(now),
            };
            (Some(EmailStatus::Complained), Some(fb), Some(ContactEmailStatus::Complained))
        }
        _ => return None,
    };
    let at = feedback.as_ref().map(|f| f.at).or_else(|| time(b, "/delivery/timestamp")).unwrap_or(now);
    Some(Reading { target, feedback, contact_status, at })
}

/// The email a notification is about, through the provider-id look-up written with the send,
/// or, without one, through the tags every send carries: an email recorded `outcome_unknown`
/// (SES had it after all); one still being sent (its send not recorded yet: try again); one
/// in another final state (only its recipients are suppressed).
async fn find_email(sd: &Sender, n: &Notification) -> Result<Option<Found>, String> {
    let app = &sd.app;
    let lookup = app.db.get(&model::provider_pk(&n.message_id), model::PROVIDER_SK).await.map_err(|e| e.to_string())?;
    let Some(lookup) = lookup else {
        let (Some(id), Some(ws)) = (&n.tagged_email_id, &n.tagged_workspace_id) else { return Ok(None) };
        if !id.starts_with("em_") || !ws.starts_with("ws_") {
            return Ok(None);
        }
        let ws = WorkspaceId::trusted(ws.clone());
        let Some(stored) = model::load(app, &ws, &EmailId::trusted(id)).await.map_err(|e| e.to_string())? else {
            tracing::warn!(email_id = %id, "a notification for an email that is gone");
            return Ok(None);
        };
        if stored.email.outcome_unknown() {
            return Ok(Some(Found { ws, stored: Some(stored) }));
        }
        if stored.email.status.pending() {
            return Err(format!("email {id} has no recorded send yet"));
        }
        tracing::warn!(email_id = %id, status = %stored.email.status.as_str(), "a notification for an email not recorded as sent");
        return Ok(Some(Found { ws, stored: None }));
    };
    let ws = WorkspaceId::trusted(store::get_str(&lookup, "workspace_id").unwrap_or_default());
    let id = EmailId::trusted(store::get_str(&lookup, "email_id").unwrap_or_default());
    let stored = model::load(app, &ws, &id).await.map_err(|e| e.to_string())?.ok_or("the email of a notification is gone")?;
    Ok(Some(Found { ws, stored: Some(stored) }))
}

/// The email after the reading: it moves forward only (late or repeated notifications change
/// nothing), and keeps the first feedback unless a later one moves it. Also says if it moved.
fn advance(email: &model::Email, r: &Reading, now: shared::ids::Timestamp) -> (model::Email, bool) {
    let mut e = email.clone();
    let moved = r.target.is_some_and(|t| rank(t) > rank(e.status) && rank(e.status) > 0);
    if let Some(t) = r.target.filter(|_| moved) {
        e.set_status(t, r.at);
        e.updated_at = now;
    }
    if r.feedback.is_some() && (moved || e.feedback.is_none()) {
        e.feedback = r.feedback.clone();
        e.updated_at = now;
    }
    (e, moved)
}

/// Raise the contacts of these addresses to `status` (never lowering: a complaint stays).
async fn mark_contacts(sd: &Sender, ws: &WorkspaceId, addrs: &[String], status: ContactEmailStatus) -> shared::ApiResult<()> {
    let app = &sd.app;
    for addr in addrs {
        let Some(id) = crate::contacts::email_owner(app, ws, addr).await? else { continue };
        // Read with its version, so a concurrent edit is not overwritten.
        let (old, version): (Contact, i64) = crate::contacts::load(app, ws, &crate::contacts::ContactId::trusted(id)).await?;
        if contact_rank(old.email_status) >= contact_rank(status) {
            continue;
        }
        let mut new = old.clone();
        new.email_status = status;
        new.updated_at = shared::ids::Timestamp::now();
        crate::contacts::update_tx(ws, &old, &new, version, Tx::new())?.commit(app).await.map_err(TxError::stale)?;
    }
    Ok(())
}
