//! The helpdesk's worker. Inbound mail: SES receives a message for a workspace mailbox, stores
//! the raw MIME in the mail bucket and notifies SNS, which delivers to this function's queue;
//! each notification is read here, its message fetched from S3, parsed (`parse`) and recorded
//! (`domain::helpdesk::inbound`). The minute tick wakes snoozed conversations
//! (`domain::helpdesk::snooze`).
//!
//! Dropped, and counted (`InboundDropped` by reason, an embedded CloudWatch metric): mail to an
//! address at no workspace's verified domain, SES's virus verdict FAIL, messages that cannot
//! be parsed or are too large, machines' messages that answer no conversation. The raw
//! message is deleted once handled (the bucket's lifecycle rule removes what a failure leaves).

pub mod fixtures;
pub mod parse;

use crate::helpdesk::inbound::{self, Incoming, Outcome};
use serde_json::Value;
use shared::App;
use shared::auth::WorkspaceId;
use shared::sqs::{BatchResponse, SqsEvent};

/// The SES receipt notification in an SQS message body (SNS envelope or raw delivery).
#[derive(Debug)]
pub struct Receipt {
    pub ses_message_id: String,
    pub bucket: String,
    pub key: String,
    pub recipients: Vec<String>,
    pub spam: bool,
    pub virus: bool,
    /// SES's SPF, DKIM and DMARC verdicts on the sender, judged against the From address
    /// once the message is read.
    pub verdicts: inbound::Verdicts,
}

pub fn receipt(body: &str) -> Option<Receipt> {
    let v = shared::sqs::sns_message(body)?;
    if v.get("notificationType").and_then(Value::as_str) != Some("Received") {
        return None;
    }
    let status = |name: &str| v.pointer(&format!("/receipt/{name}/status")).and_then(Value::as_str).map(String::from);
    let verdict = |name: &str| status(name).as_deref() == Some("FAIL");
    Some(Receipt {
        ses_message_id: v.pointer("/mail/messageId")?.as_str()?.to_string(),
        bucket: v.pointer("/receipt/action/bucketName")?.as_str()?.to_string(),
        key: v.pointer("/receipt/action/objectKey")?.as_str()?.to_string(),
        recipients: v.pointer("/receipt/recipients")?.as_array()?.iter().filter_map(Value::as_str).map(String::from).collect(),
        spam: verdict("spamVerdict"),
        virus: verdict("virusVerdict"),
        verdicts: inbound::Verdicts {
            spf: status("spfVerdict"),
            dkim: status("dkimVerdict"),
            dmarc: status("dmarcVerdict"),
            envelope_from: v.pointer("/mail/source").and_then(Value::as_str).map(String::from),
        },
    })
}

/// One SQS batch: a message that failed for a reason that may pass (a DynamoDB or S3 error)
/// stays in the queue for another try; anything else is handled or dropped.
pub async fn handle_sqs(app: &App, ev: SqsEvent) -> BatchResponse {
    let mut kept = vec![];
    for m in &ev.records {
        let Some(r) = receipt(shared::sqs::body(m)) else {
            tracing::error!(message_id = %shared::sqs::id(m), "not an SES receipt notification; dropped");
            dropped("not_a_receipt");
            continue;
        };
        if let Err(e) = handle(app, &r).await {
            tracing::warn!(ses_message_id = %r.ses_message_id, error = %e, "inbound mail kept for another try");
            kept.push(shared::sqs::id(m));
        }
    }
    shared::sqs::keep(kept)
}

/// Either a scheduled tick (EventBridge) or an SQS batch.
pub async fn handle_event(app: &App, ev: Value) -> Result<Value, String> {
    if ev.get("Records").is_some() {
        let batch: SqsEvent = serde_json::from_value(ev).map_err(|e| e.to_string())?;
        return serde_json::to_value(handle_sqs(app, batch).await).map_err(|e| e.to_string());
    }
    let woke = crate::helpdesk::snooze::tick(app).await.map_err(|e| e.to_string())?;
    Ok(serde_json::json!({ "woke": woke }))
}

pub async fn handle(app: &App, r: &Receipt) -> Result<(), String> {
    if r.bucket != app.cfg.mail_bucket {
        // Only the deployment's own bucket is read; another name is a misconfiguration.
        tracing::error!(bucket = %r.bucket, "receipt names a bucket that is not MAIL_BUCKET; dropped");
        dropped("foreign_bucket");
        return Ok(());
    }
    if r.virus {
        tracing::warn!(ses_message_id = %r.ses_message_id, "SES found a virus; message dropped");
        dropped("virus");
        return delete_raw(app, r).await;
    }
    let mut targets = vec![];
    for rcpt in &r.recipients {
        match crate::emails::domains::mailbox_owner(app, rcpt).await.map_err(|e| e.to_string())? {
            Some(t) if !targets.iter().any(|(ws, _, _): &(String, String, Option<String>)| *ws == t.0) => targets.push(t),
            Some(_) => {}
            None => dropped("unknown_recipient"),
        }
    }
    if targets.is_empty() {
        return delete_raw(app, r).await;
    }
    let raw = read_raw(app, r).await?;
    let Some(raw) = raw else {
        // Already handled and deleted by an earlier delivery of this notification.
        return Ok(());
    };
    let mut parsed = match parse::parse(&raw) {
        Ok(p) => p,
        Err(why) => {
            tracing::warn!(ses_message_id = %r.ses_message_id, reason = %why, "inbound message refused");
            dropped(match why {
                parse::Refused::TooLarge(_) => "too_large",
                _ => "unparseable",
            });
            return delete_raw(app, r).await;
        }
    };
    if let Some(size) = parsed.oversized {
        // Too large to store file by file: the original is kept whole, first among the files.
        let original = inbound::Attachment {
            filename: "original.eml".into(),
            content_type: "message/rfc822".into(),
            size,
            content_id: None,
            inline: false,
            stored: true,
            download_url: None,
            sha256: None,
        };
        parsed.attachments.insert(0, (original, Some(raw)));
    } else {
        drop(raw);
    }
    // A customer's reply or forward may quote a booking email: its manage link is a credential
    // and the message is read by the workspace (and its events go out), so its token goes.
    parsed.subject = shared::links::redact(&parsed.subject).into_owned();
    parsed.text = shared::links::redact(&parsed.text).into_owned();
    parsed.html = parsed.html.map(|h| shared::links::redact(&h).into_owned());
    // A forwarded message (`message/rfc822`) or a text file too; a link that its encoding
    // breaks across lines (quoted-printable) is not found.
    for (a, bytes) in parsed.attachments.iter_mut() {
        let texty = a.content_type.starts_with("text/") || a.content_type.starts_with("message/rfc822");
        if let (true, Some(b)) = (texty, bytes.as_mut())
            && let Ok(s) = std::str::from_utf8(b)
            && let std::borrow::Cow::Owned(r) = shared::links::redact(s)
        {
            a.size = r.len() as u64;
            *b = r.into_bytes();
        }
    }
    let last = targets.len() - 1;
    for (i, (ws, mailbox, token)) in targets.into_iter().enumerate() {
        let ws = WorkspaceId::trusted(ws);
        // Mail to a marketing email's mailto unsubscribe address: an unsubscribe, not a
        // conversation (a forged token changes nothing and is dropped).
        if let Some(tag) = token.as_deref().filter(|t| crate::emails::unsubscribe::is_mail_token(t)) {
            let done = crate::emails::unsubscribe::by_mail(app, &ws, tag).await.map_err(|e| e.to_string())?;
            tracing::info!(workspace_id = %ws, done, "inbound unsubscribe");
            if !done {
                dropped("unknown_unsubscribe");
            }
            continue;
        }
        // The files move into the last workspace's message instead of being copied.
        let attachments = if i == last { std::mem::take(&mut parsed.attachments) } else { parsed.attachments.clone() };
        let inc = Incoming {
            mailbox,
            token,
            from: parsed.from.clone(),
            from_name: parsed.from_name.clone(),
            to: parsed.to.clone(),
            subject: parsed.subject.clone(),
            message_id: parsed.message_id.clone().unwrap_or_else(|| format!("{}@ses", r.ses_message_id)),
            references: parsed.references.clone(),
            text: parsed.text.clone(),
            html: parsed.html.clone(),
            attachments,
            automatic: parsed.automatic,
            spam: r.spam,
            authentication: inbound::Authentication::judge(
                &r.verdicts,
                &inbound::Signed { from: parsed.from.clone(), single_from: parsed.single_from, dkim_signers: parsed.dkim_signers.clone() },
            ),
            oversized: parsed.oversized,
        };
        // Boxed: the recording future is large (contact creation, the transaction).
        match Box::pin(inbound::receive(app, &ws, inc)).await.map_err(|e| e.to_string())? {
            Outcome::Dropped(why) => {
                tracing::info!(workspace_id = %ws, reason = why, "inbound message not recorded");
                dropped("unthreaded_automatic");
            }
            outcome => tracing::info!(workspace_id = %ws, ?outcome, "inbound message"),
        }
    }
    delete_raw(app, r).await
}

async fn read_raw(app: &App, r: &Receipt) -> Result<Option<Vec<u8>>, String> {
    shared::aws::get_object(app.s3(), &r.bucket, &r.key).await.map_err(|e| format!("s3 get {}: {e}", r.key))
}

async fn delete_raw(app: &App, r: &Receipt) -> Result<(), String> {
    match app.s3().delete_object().bucket(&r.bucket).key(&r.key).send().await {
        Ok(_) => Ok(()),
        Err(e) => Err(format!("s3 delete {}: {}", r.key, shared::aws::AwsError::from(e))),
    }
}

fn dropped(reason: &'static str) {
    shared::metrics::count("InboundDropped", "Reason", reason);
}

/// The SES receipt notification for a message stored at `bucket`/`key`, in the SNS envelope
/// SQS receives, as SES documents it (the fields this function and operators read).
pub fn notification(ses_message_id: &str, bucket: &str, key: &str, recipients: &[String], spam: &str, virus: &str) -> String {
    let now = shared::ids::Timestamp::now();
    let ses = serde_json::json!({
        "notificationType": "Received",
        "mail": {"timestamp": now, "source": "", "messageId": ses_message_id, "destination": recipients, "headersTruncated": false},
        "receipt": {
            "timestamp": now, "processingTimeMillis": 1, "recipients": recipients,
            "spamVerdict": {"status": spam}, "virusVerdict": {"status": virus},
            "spfVerdict": {"status": "PASS"}, "dkimVerdict": {"status": "PASS"}, "dmarcVerdict": {"status": "PASS"},
            "action": {"type": "S3", "topicArn": "arn:aws:sns:us-east-1:000000000000:platform-inbound-mail", "bucketName": bucket, "objectKeyPrefix": "inbound/", "objectKey": key}
        }
    });
    serde_json::json!({
        "Type": "Notification", "MessageId": ses_message_id, "TopicArn": "arn:aws:sns:us-east-1:000000000000:platform-inbound-mail",
        "Subject": "Amazon SES Email Receipt Notification", "Message": ses.to_string(), "Timestamp": now,
    })
    .to_string()
}
