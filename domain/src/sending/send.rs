//! Sending one email exactly once per claim.
//!
//! A queue message can arrive twice, and two invocations can hold copies at the same moment.
//! Before calling SES an invocation claims the email: a versioned write that stamps a claim
//! token and an expiry longer than the function's timeout. Only one claim can win; a copy that
//! finds the email claimed waits for the claim to end, and one that finds it sent (or
//! cancelled, failed, ...) drops. SES is called once per claim (the client does not retry
//! SendEmail); a send whose outcome is unknown (a timeout after the request left) ends
//! `failed` with `outcome_unknown` rather than going out twice, and the write recording a
//! send is retried while the claim holds. Everything that can fail before SES is done before
//! the claim, so a claim is followed by the call at once: a claim that expires without a
//! recorded answer (the sender was killed, or a DynamoDB outage outlasted the claim) means
//! SES may have the email, and the next copy records it `failed` / `outcome_unknown` instead
//! of sending it again. At most once: a sender killed in the moment between its claim and
//! the call leaves an email that was not sent marked so too.

use super::Sender;
use crate::emails::compose;
use crate::emails::{self as model, Email, EmailStatus, SendError, SendJob, Stored};
use crate::ids::EmailId;
use aws_sdk_sesv2::error::SdkError;
use aws_sdk_sesv2::types::{Destination, EmailContent, MessageTag, RawMessage};
use shared::ApiResult;
use shared::auth::WorkspaceId;
use shared::events::Event;
use shared::events::EventType;
use shared::outbox::Tx;
use shared::store::{self, TxError, n, s, ws_pk};

/// Stop retrying the recording this long before the claim ends, so no other copy can claim
/// the email while a write of ours may still land.
const RECORD_MARGIN_SECS: i64 = 15;
/// Emails of one job sent at once.
const CONCURRENCY: usize = 10;

/// An email with files is held whole while it is built and sent (the bytes, the message's
/// base64 copy, SES's request: about four times the files): the emails of a container hold at
/// most this much at once (of the sender's 512 MB), so ten large ones of a job wait for each
/// other instead of running the sender out of memory and its batch, other workspaces' emails
/// included, back to the queue.
const FILE_MEMORY_UNITS: u32 = 160 * 16;
/// One unit of [`FILE_MEMORY`]: 64 KiB.
const FILE_MEMORY_UNIT: u64 = 64 * 1024;
static FILE_MEMORY: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(FILE_MEMORY_UNITS as usize);

pub use shared::worker::{Outcome, WorkError};

/// Every email of the job; the ones to look at again go back to the queue as a new job with
/// their delay, so the finished ones are not processed twice.
pub async fn run_job(sd: &Sender, job: &SendJob) -> Result<(), WorkError> {
    let ws = &job.workspace_id;
    let mut later: std::collections::BTreeMap<i64, Vec<EmailId>> = Default::default();
    let mut failed = None;
    for chunk in job.email_ids.chunks(CONCURRENCY) {
        let results = futures_util::future::join_all(chunk.iter().map(|id| send_one(sd, ws, id))).await;
        for (id, r) in chunk.iter().zip(results) {
            match r {
                Ok(Outcome::Done) => {}
                Ok(Outcome::Later(secs)) => later.entry(secs.clamp(1, 900) as i64).or_default().push(id.clone()),
                // Changed meanwhile (claimed by another copy, or cancelled): look again shortly.
                Err(WorkError::Stale) => later.entry(WorkError::Stale.retry_after_secs() as i64).or_default().push(id.clone()),
                Err(e) => {
                    tracing::warn!(email_id = %id, error = %e, "send failed; retrying later");
                    later.entry(e.retry_after_secs() as i64).or_default().push(id.clone());
                    failed = Some(e);
                }
            }
        }
    }
    for (delay, ids) in later {
        if !model::enqueue(&sd.app, ws, &ids, delay).await {
            // Keep the original message: it comes back whole and finished emails drop quickly.
            return Err(failed.unwrap_or_else(|| WorkError::Retry("the emails queue is unavailable".into())));
        }
    }
    Ok(())
}

fn now() -> (shared::ids::Timestamp, i64) {
    let t = shared::ids::Timestamp::now();
    (t, t.timestamp())
}

/// Why SES did not take the email, and whether another try can help.
enum SesFailure {
    /// Refused: trying again cannot help.
    Permanent(SendError),
    /// Not sent (throttled, unreachable before the request left): try again later.
    Transient(String),
    /// The request may have reached SES (a timeout after it was sent, an unreadable answer):
    /// sending again could deliver it twice, so the email ends `failed` / `outcome_unknown`.
    Ambiguous(String),
}

/// Send one email if it is due and nobody else holds it: check, claim, look at the
/// recipients again, call SES once, record the result under the claim.
pub async fn send_one(sd: &Sender, ws: &WorkspaceId, id: &EmailId) -> Result<Outcome, WorkError> {
    let app = &sd.app;
    let Some(stored) = model::load(app, ws, id).await? else { return Ok(Outcome::Done) };
    let (now_s, now_secs) = now();
    if let Some(outcome) = not_ready(&stored, now_secs) {
        return Ok(outcome);
    }
    if stored.claim_token.is_some() {
        // A sender claimed it and never recorded what SES said (it was killed, or its write
        // kept failing past the claim). It called SES right after claiming, so SES may have
        // the email: it is not sent again.
        let held = claim(sd, ws, &stored, now_s, now_secs).await?;
        let email = held.email.clone();
        let gone = SesFailure::Ambiguous("the sender holding the email stopped before recording SES's answer".into());
        let outcome = record(sd, ws, &held, email.clone(), Err(gone), now_s).await?;
        finished(sd, ws, &email, true).await;
        return Ok(outcome);
    }
    // Everything that can fail before SES is asked first, so a claim is followed by the
    // call at once: a claim left behind means SES may have been called.
    let (suppressed, body, domain_verified) = recheck(sd, ws, &stored.email).await?;
    // The bodies and headers as SES gets them, one-time credentials and unsubscribe links out
    // of their seal (they come out here and nowhere else), before the claim like every step
    // that can fail.
    let sealed = body.as_ref().is_some_and(|b| b.contains_key("sealed_secrets"));
    let bodies = {
        let mut b = stored.email.clone();
        if let Some(item) = &body {
            model::attach_body(&mut b, item);
        }
        if sealed {
            b = b.with_secrets(app.platform_secret().await?)?;
        }
        (b.html, b.text, b.calendar, b.headers)
    };
    // The files too (`None`: one is gone, expired unlinked or erased), within the container's
    // memory for them (held until SES has the message).
    let held_bytes: u64 = stored.email.attachments.iter().map(|a| a.size).sum();
    let _memory = if held_bytes == 0 {
        None
    } else {
        let units = (held_bytes * 4 / FILE_MEMORY_UNIT + 1).min(u64::from(FILE_MEMORY_UNITS)) as u32;
        Some(FILE_MEMORY.acquire_many(units).await.map_err(|e| WorkError::Retry(e.to_string()))?)
    };
    let files =
        if stored.email.attachments.is_empty() { Some(vec![]) } else { crate::emails::attachments::load(app, ws, &stored.email).await? };
    let held = claim(sd, ws, &stored, now_s, now_secs).await?;
    let mut email = held.email.clone();
    email.suppressed_recipients = suppressed;
    let refused = if !domain_verified {
        // The domain was deleted (or failed) since the email was accepted.
        Some(("sender_not_verified", format!("{} is no longer at a verified sending domain of this workspace", email.from)))
    } else {
        files.is_none().then(|| ("attachment_missing", "a file of this email is no longer stored; it was not sent without it".to_string()))
    };
    if let Some((code, message)) = refused {
        email.error = Some(SendError { code: code.into(), message });
        email.set_status(EmailStatus::Failed, now_s);
        finish(sd, ws, &held, email.clone(), None).await?;
        finished(sd, ws, &email, sealed).await;
        return Ok(Outcome::Done);
    }
    let (to, cc, bcc) = email.deliverable();
    if to.is_empty() {
        email.set_status(EmailStatus::Suppressed, now_s);
        finish(sd, ws, &held, email.clone(), None).await?;
        finished(sd, ws, &email, sealed).await;
        return Ok(Outcome::Done);
    }
    // The bodies and files go to SES only; the email item is stored without them.
    let mut outgoing = email.clone();
    (outgoing.html, outgoing.text, outgoing.calendar, outgoing.headers) = bodies;
    outgoing.files = files.unwrap_or_default();
    let result = ses_send(sd, ws, &outgoing, to, cc, bcc).await;
    let outcome = record(sd, ws, &held, email.clone(), result, now_s).await?;
    // Sent or failed for good: nothing will put the credentials back or read the files again.
    if matches!(outcome, Outcome::Done) {
        finished(sd, ws, &email, sealed).await;
    }
    Ok(outcome)
}

/// Drop what a finished email kept for its sending, since it has no reader left: its sealed
/// credentials and links, and its files (best effort: an erasure deletes the files too).
async fn finished(sd: &Sender, ws: &WorkspaceId, e: &Email, sealed: bool) {
    if sealed {
        let removed =
            sd.app.db.update(ws_pk(ws), model::body_sk(&e.id), "REMOVE sealed_secrets").when("attribute_exists(pk)").apply().await;
        if let Err(err) = removed {
            tracing::warn!(error = %err, "could not drop a finished email's sealed credentials");
        }
    }
    if let Err(err) = crate::emails::attachments::discard(&sd.app, ws, e).await {
        tracing::warn!(error = %err, "could not delete a finished email's files");
    }
}

/// Finished, not due yet, or held by another copy's claim: what to do instead of sending.
fn not_ready(stored: &Stored, now_secs: i64) -> Option<Outcome> {
    let e = &stored.email;
    if !e.status.pending() {
        return Some(Outcome::Done);
    }
    if e.status == EmailStatus::Scheduled && e.due_ms() > chrono::Utc::now().timestamp_millis() + 500 {
        return Some(Outcome::Later((e.due_ms() / 1000 - now_secs).max(1) as u64));
    }
    if stored.claimed(now_secs) {
        return Some(Outcome::Later((stored.claim_until - now_secs + 1).max(1) as u64));
    }
    None
}

/// Stamp a claim token on the email (a versioned write: one copy wins). A scheduled email
/// becomes queued with its event here. A lost race is `WorkError::Stale`.
async fn claim(sd: &Sender, ws: &WorkspaceId, stored: &Stored, now_s: shared::ids::Timestamp, now_secs: i64) -> Result<Stored, WorkError> {
    let token = shared::ids::new_id("claim");
    let claim_secs = sd.app.cfg.email.claim_secs;
    let mut claimed = stored.email.clone();
    claimed.attempts += 1;
    claimed.updated_at = now_s;
    let was_scheduled = stored.email.status == EmailStatus::Scheduled;
    if was_scheduled {
        claimed.set_status(EmailStatus::Queued, now_s);
    }
    let rec = model::record(ws, &claimed)?.attr("claim_token", s(&token)).attr("claim_until", n(now_secs + claim_secs));
    let mut tx = Tx::new().replace(rec, stored.version);
    if was_scheduled {
        tx = with_activity(ws, &claimed, tx.event(Event::new(ws, EventType::EmailQueued, &claimed)))?;
    }
    if let Err(e) = tx.commit(&sd.app).await {
        // The claim may have been written and its answer lost (the SDK's retry then fails the
        // version check): if the email carries our token, the claim is ours.
        match model::load(&sd.app, ws, &claimed.id).await {
            Ok(Some(now)) if now.claim_token.as_deref() == Some(token.as_str()) => return Ok(now),
            _ => return Err(e.into()),
        }
    }
    Ok(Stored { email: claimed, version: stored.version + 1, claim_token: Some(token), claim_until: now_secs + claim_secs })
}

/// What may have changed since the email was accepted: its recipients may have unsubscribed,
/// bounced or complained, and its sending domain may be gone. Answers its suppressed
/// recipients now, its stored bodies, and whether its domain is still verified.
async fn recheck(
    sd: &Sender,
    ws: &WorkspaceId,
    e: &Email,
) -> Result<(Vec<model::SuppressedRecipient>, Option<store::Item>, bool), WorkError> {
    let app = &sd.app;
    let all: Vec<String> = e.to.iter().chain(&e.cc).chain(&e.bcc).cloned().collect();
    let (body, recipients, domains) = futures_util::future::try_join3(
        app.db.get(&ws_pk(ws), &model::body_sk(&e.id)),
        crate::emails::recipients::recipients_of(app, ws, vec![], all.clone(), false),
        crate::emails::domains::verified_names(app, ws),
    )
    .await?;
    let mut suppressed = e.suppressed_recipients.clone();
    for sr in crate::emails::recipients::suppressed(all, e.transactional, &recipients) {
        if !suppressed.iter().any(|x| x.email == sr.email) {
            suppressed.push(sr);
        }
    }
    let from = shared::validate::parse_mailbox(&e.from).map(|(_, addr)| addr).unwrap_or_default();
    let verified = crate::emails::domains::covers(&domains, &from);
    Ok((suppressed, body, verified))
}

/// Record what SES said. Only a send SES certainly did not take is tried again.
async fn record(
    sd: &Sender,
    ws: &WorkspaceId,
    held: &Stored,
    mut email: Email,
    result: Result<String, SesFailure>,
    now_s: shared::ids::Timestamp,
) -> Result<Outcome, WorkError> {
    let fail = |email: &mut Email, code: &str, message: String| {
        email.error = Some(SendError { code: code.into(), message });
        email.set_status(EmailStatus::Failed, now_s);
    };
    let message_id = match result {
        Ok(message_id) => {
            email.provider_message_id = Some(message_id.clone());
            email.error = None;
            email.set_status(EmailStatus::Sent, now_s);
            Some(message_id)
        }
        Err(SesFailure::Permanent(err)) => {
            tracing::warn!(email_id = %email.id, code = %err.code, "SES refused the email");
            fail(&mut email, &err.code, err.message);
            None
        }
        Err(SesFailure::Ambiguous(msg)) => {
            tracing::error!(email_id = %email.id, error = %msg, "SES may or may not have taken the email; not sending it again");
            fail(&mut email, "outcome_unknown", msg);
            None
        }
        Err(SesFailure::Transient(msg)) if email.attempts >= model::MAX_ATTEMPTS => {
            fail(&mut email, "attempts_exhausted", msg);
            None
        }
        Err(SesFailure::Transient(msg)) => {
            // Give the claim back so the next try can take it.
            email.error = Some(SendError { code: "retrying".into(), message: msg });
            // Retried while the claim holds: a claim left behind would read as "SES may have
            // it" although SES said it did not.
            let tx = Tx::new().replace(model::record(ws, &email)?, held.version);
            let mut wait = std::time::Duration::from_millis(200);
            loop {
                match tx.clone().commit(&sd.app).await {
                    Ok(()) => return Ok(Outcome::Later(30 * u64::from(email.attempts))),
                    Err(TxError::Api(e)) if held.claim_until - chrono::Utc::now().timestamp() > RECORD_MARGIN_SECS => {
                        tracing::warn!(email_id = %email.id, error = %e, "giving the claim back failed; retrying under the claim");
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(std::time::Duration::from_secs(5));
                    }
                    Err(e) => return Err(TxError::stale(e).into()),
                }
            }
        }
    };
    finish(sd, ws, held, email, message_id).await?;
    Ok(Outcome::Done)
}

fn with_activity(ws: &WorkspaceId, e: &Email, tx: Tx) -> ApiResult<Tx> {
    Ok(match compose::activity(ws, e)? {
        Some(a) => tx.put(a),
        None => tx,
    })
}

/// Record a final state reached under our claim: the email, its due entry gone, the provider
/// id look-up (when sent), the event and the contact's timeline.
async fn finish(sd: &Sender, ws: &WorkspaceId, held: &Stored, email: Email, message_id: Option<String>) -> ApiResult<()> {
    let app = &sd.app;
    let (due_pk, due_sk) = model::due_key(ws, &held.email);
    let mut tx = Tx::new()
        .put_if(
            model::record(ws, &email)?.version(held.version + 1).item,
            "version = :v AND claim_token = :t",
            vec![(":v", n(held.version)), (":t", s(held.claim_token.clone().unwrap_or_default()))],
        )
        .delete_if(due_pk, due_sk, "", vec![]);
    if let Some(mid) = message_id {
        tx = tx.put(model::provider_lookup(ws, &mid, &email.id));
    }
    tx = with_activity(ws, &email, tx.event(Event::new(ws, email.status.event(), &email)))?;
    if let Some(ev) = crate::helpdesk::delivery_event(ws, &email) {
        tx = tx.event(ev);
    }
    // After SES took the email, losing this write would let the claim expire and the email go
    // out again: retry it here while the claim holds (the transaction is idempotent under it).
    let mut wait = std::time::Duration::from_millis(200);
    loop {
        match tx.clone().commit(app).await {
            Ok(()) => return Ok(()),
            Err(TxError::Api(e)) if held.claim_until - chrono::Utc::now().timestamp() > RECORD_MARGIN_SECS => {
                tracing::warn!(email_id = %email.id, error = %e, "recording the send result failed; retrying under the claim");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(std::time::Duration::from_secs(5));
            }
            Err(e) => {
                // The claim was taken over (it expired while we worked) or ran out: the email may
                // go out twice. This is the one window left (see the module's comment).
                tracing::error!(email_id = %email.id, "could not record the send result under the claim");
                return Err(TxError::stale(e));
            }
        }
    }
}

/// The sender as a mailbox (its display name quoted or encoded as RFC 5322 and 2047 need).
fn mailbox(raw: &str) -> Result<lettre::message::Mailbox, String> {
    let (name, addr) = shared::validate::parse_mailbox(raw).ok_or_else(|| format!("not a mailbox: {raw}"))?;
    Ok(lettre::message::Mailbox::new(name, addr.parse().map_err(|e| format!("{addr}: {e}"))?))
}

/// The message as SES sends it raw: From, To, Cc (Bcc only in the envelope), Reply-To,
/// Subject, the email's headers, and its bodies (`multipart/alternative` when it has both),
/// inside `multipart/related` with its inline files and `multipart/mixed` with the others,
/// made by lettre's builder rather than by hand: encoding names and subjects (RFC 2047),
/// folding long headers and choosing each part's transfer encoding are where hand-written
/// MIME goes wrong.
pub fn mime(e: &Email, to: &[String], cc: &[String], bcc: &[String]) -> Result<Vec<u8>, String> {
    use lettre::message::header::{HeaderName, HeaderValue};
    use lettre::message::{Mailbox, MultiPart, SinglePart};
    let plain = |a: &String| a.parse::<Mailbox>().map_err(|err| format!("{a}: {err}"));
    let mut b = lettre::Message::builder().from(mailbox(&e.from)?).subject(e.subject.clone());
    for a in to {
        b = b.to(plain(a)?);
    }
    for a in cc {
        b = b.cc(plain(a)?);
    }
    for a in bcc {
        b = b.bcc(plain(a)?);
    }
    for a in &e.reply_to {
        b = b.reply_to(mailbox(a)?);
    }
    for (k, v) in &e.headers {
        let name = HeaderName::new_from_ascii(k.clone()).map_err(|_| format!("header name {k}"))?;
        b = b.raw_header(HeaderValue::new(name, v.clone()));
    }
    enum Part {
        One(SinglePart),
        Many(MultiPart),
    }
    let into = |outer: MultiPart, part: Part| match part {
        Part::One(p) => outer.singlepart(p),
        Part::Many(p) => outer.multipart(p),
    };
    let mut content = match (&e.text, &e.html, &e.calendar) {
        (Some(t), Some(h), None) => Part::Many(MultiPart::alternative_plain_html(t.clone(), h.clone())),
        (None, Some(h), None) => Part::One(SinglePart::html(h.clone())),
        (Some(t), None, None) => Part::One(SinglePart::plain(t.clone())),
        (None, None, None) => Part::One(SinglePart::plain(String::new())),
        // An invite is the last alternative (`text/calendar; method=...`), as calendar
        // systems send it: clients that know it offer "add to calendar", others show the text.
        (t, h, Some(ics)) => {
            let method = ics.lines().find_map(|l| l.strip_prefix("METHOD:")).unwrap_or("PUBLISH").trim().to_string();
            let calendar = lettre::message::header::ContentType::parse(&format!("text/calendar; charset=utf-8; method={method}"))
                .map_err(|err| format!("invite content type: {err}"))?;
            let mut alt = MultiPart::alternative().build();
            if let Some(t) = t {
                alt = alt.singlepart(SinglePart::plain(t.clone()));
            }
            if let Some(h) = h {
                alt = alt.singlepart(SinglePart::html(h.clone()));
            }
            Part::Many(alt.singlepart(SinglePart::builder().header(calendar).body(ics.clone())))
        }
    };
    if e.files.len() != e.attachments.len() {
        return Err("the email's files were not loaded".into());
    }
    let file = |a: &crate::emails::attachments::Attachment, bytes: &[u8]| -> Result<SinglePart, String> {
        let ct = lettre::message::header::ContentType::parse(&a.content_type).map_err(|err| format!("{}: {err}", a.content_type))?;
        let part = match &a.content_id {
            Some(cid) => lettre::message::Attachment::new_inline_with_name(cid.clone(), a.filename.clone()),
            None => lettre::message::Attachment::new(a.filename.clone()),
        };
        Ok(part.body(bytes.to_vec(), ct))
    };
    let files: Vec<_> = e.attachments.iter().zip(&e.files).collect();
    if files.iter().any(|(a, _)| a.content_id.is_some()) {
        let mut related = into(MultiPart::related().build(), content);
        for (a, bytes) in files.iter().filter(|(a, _)| a.content_id.is_some()) {
            related = related.singlepart(file(a, bytes)?);
        }
        content = Part::Many(related);
    }
    if files.iter().any(|(a, _)| a.content_id.is_none()) {
        let mut mixed = into(MultiPart::mixed().build(), content);
        for (a, bytes) in files.iter().filter(|(a, _)| a.content_id.is_none()) {
            mixed = mixed.singlepart(file(a, bytes)?);
        }
        content = Part::Many(mixed);
    }
    let built = match content {
        Part::One(p) => b.singlepart(p),
        Part::Many(p) => b.multipart(p),
    };
    Ok(built.map_err(|err| err.to_string())?.formatted())
}

async fn ses_send(
    sd: &Sender,
    ws: &WorkspaceId,
    e: &Email,
    to: Vec<String>,
    cc: Vec<String>,
    bcc: Vec<String>,
) -> Result<String, SesFailure> {
    let build_err =
        |e: aws_sdk_sesv2::error::BuildError| SesFailure::Permanent(SendError { code: "invalid_message".into(), message: e.to_string() });
    let raw = mime(e, &to, &cc, &bcc).map_err(|message| SesFailure::Permanent(SendError { code: "invalid_message".into(), message }))?;
    let raw = RawMessage::builder().data(aws_sdk_sesv2::primitives::Blob::new(raw)).build().map_err(build_err)?;
    let mut req = sd
        .ses
        .send_email()
        // The bare address: the message's own From carries the name, encoded (SES refuses a
        // raw UTF-8 display name here).
        .from_email_address(shared::validate::parse_mailbox(&e.from).map(|(_, a)| a).unwrap_or_else(|| e.from.clone()))
        .destination(Destination::builder().set_to_addresses(Some(to)).set_cc_addresses(Some(cc)).set_bcc_addresses(Some(bcc)).build())
        .set_reply_to_addresses((!e.reply_to.is_empty()).then(|| e.reply_to.clone()))
        .content(EmailContent::builder().raw(raw).build())
        // Event publishing carries these tags back with each notification.
        .email_tags(MessageTag::builder().name("email_id").value(&e.id).build().map_err(build_err)?)
        .email_tags(MessageTag::builder().name("workspace_id").value(ws).build().map_err(build_err)?);
    if let Some(cs) = &sd.app.cfg.email.configuration_set {
        req = req.configuration_set_name(cs);
    }
    match req.send().await {
        // Accepted, but without an id to track it by: do not send it again.
        Ok(out) => out.message_id().map(String::from).ok_or_else(|| SesFailure::Ambiguous("SES answered without a message id".into())),
        Err(err @ (SdkError::TimeoutError(_) | SdkError::ResponseError(_))) => {
            Err(SesFailure::Ambiguous(aws_sdk_sesv2::error::DisplayErrorContext(&err).to_string()))
        }
        // A connection that broke after the request left (an answer cut off midway) is as
        // ambiguous as a timeout; only one that never connected is safe to send again.
        Err(err @ SdkError::DispatchFailure(_)) if !shared::sdk_http::never_sent(&err) => {
            Err(SesFailure::Ambiguous(aws_sdk_sesv2::error::DisplayErrorContext(&err).to_string()))
        }
        Err(err) => {
            use aws_sdk_sesv2::error::ProvideErrorMetadata;
            let code = err.code().unwrap_or_default().to_string();
            let message = err.message().map(String::from).unwrap_or_else(|| aws_sdk_sesv2::error::DisplayErrorContext(&err).to_string());
            const PERMANENT: &[&str] = &[
                "MessageRejected",
                "MailFromDomainNotVerifiedException",
                "BadRequestException",
                "NotFoundException",
                "AccountSuspendedException",
            ];
            if PERMANENT.contains(&code.as_str()) {
                Err(SesFailure::Permanent(SendError { code, message }))
            } else {
                Err(SesFailure::Transient(if code.is_empty() { message } else { format!("{code}: {message}") }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn email(from: &str) -> Email {
        serde_json::from_value(serde_json::json!({
            "id": "em_01J00000000000000000000000", "object": "email", "status": "queued", "from": from,
            "to": ["a@example.org"], "cc": [], "bcc": [], "reply_to": [], "subject": "Grüße, \"friends\"",
            "html": "<p>Hi</p>", "text": "Hi", "template_slug": null, "locale": null,
            "headers": {"List-Unsubscribe": "<https://x.example/p/acme/unsubscribe/t>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"},
            "tags": [], "contact_id": null, "batch_id": null, "scheduled_at": null, "transactional": false,
            "provider_message_id": null, "suppressed_recipients": [], "feedback": null, "error": null, "attempts": 0,
            "timestamps": {}, "metadata": {}, "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"
        }))
        .unwrap()
    }

    /// The 400 for a message beyond the limit comes from an estimate: it must never be below
    /// what is sent, for the worst bodies (short lines double as CRLF) and names (RFC 2231).
    #[test]
    fn the_size_estimate_never_undercounts_the_message() {
        use crate::emails::attachments::{Attachment, estimate};
        let mut e = email("Jürgen Ä <j@example.com>");
        e.text = Some("\n".repeat(20_000));
        e.html = Some("<p>ü</p>\n".repeat(3_000));
        let name: String = "ä€😀".repeat(60);
        let files: Vec<Vec<u8>> =
            [1usize, 57, 76, 10_000, 100_000].iter().map(|n| (0..*n).map(|i| (i * 7919 % 256) as u8).collect()).collect();
        for (i, f) in files.iter().enumerate() {
            e.attachments.push(Attachment {
                filename: name.clone(),
                content_type: "application/octet-stream".into(),
                size: f.len() as u64,
                content_id: (i % 2 == 0).then(|| format!("img{i}@example.com")),
                sha256: None,
            });
            e.files.push(f.as_slice().into());
        }
        let raw = mime(&e, &["a@example.org".into()], &[], &[]).unwrap();
        let (_, after) = estimate(&e);
        assert!(raw.len() <= *after.last().unwrap(), "sent {} bytes, estimated {}", raw.len(), after.last().unwrap());
    }

    /// What a mail client reads back: the names decoded, the headers kept, both bodies, no Bcc.
    #[test]
    fn the_message_parses_back_as_it_was_meant() {
        for (from, name) in [("Acme, Inc <a@example.com>", "Acme, Inc"), ("Jürgen <j@example.com>", "Jürgen")] {
            let raw = mime(&email(from), &["a@example.org".into()], &["c@example.org".into()], &["hidden@example.org".into()]).unwrap();
            let m = mailparse::parse_mail(&raw).unwrap();
            let h = |k: &str| m.headers.iter().find(|x| x.get_key().eq_ignore_ascii_case(k)).map(|x| x.get_value());
            let from_header = mailparse::addrparse_header(m.headers.iter().find(|x| x.get_key() == "From").unwrap()).unwrap();
            let mailparse::MailAddr::Single(single) = &from_header[0] else { panic!("one sender") };
            assert_eq!(single.display_name.as_deref(), Some(name));
            assert_eq!(h("Subject").as_deref(), Some("Grüße, \"friends\""));
            assert_eq!(h("List-Unsubscribe-Post").as_deref(), Some("List-Unsubscribe=One-Click"));
            assert_eq!(h("Cc").as_deref(), Some("c@example.org"));
            assert!(h("Bcc").is_none(), "Bcc is the envelope's only");
            assert_eq!(m.ctype.mimetype, "multipart/alternative");
            let bodies: Vec<String> = m.subparts.iter().map(|p| p.get_body().unwrap().trim_end().to_string()).collect();
            assert_eq!(bodies, ["Hi", "<p>Hi</p>"]);
        }
    }
}
