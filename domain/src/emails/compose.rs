//! From a send request to an accepted email: field checks without I/O, then one round of reads
//! shared by every email of a request (the workspace's verified domains, templates, contacts and the
//! contacts behind each recipient), rendering, suppression, and the writes.

use super::templates::{self, Template};
use super::{self as model, Email, EmailStatus, SuppressedRecipient};
use crate::effects::{self, Authority};
use crate::ids::{ContactId, EmailBatchId, EmailId};
use serde::Deserialize;
use serde_json::{Map, Value};
use shared::auth::WorkspaceId;
use shared::error::ErrorDetail;
use shared::events::Event;
use shared::events::EventType;
use shared::outbox::Tx;
use shared::store::{self, Item, ws_pk};
use shared::validate::{Errors, normalise_email, parse_mailbox};
use shared::{ApiError, ApiResult, App};
use std::collections::BTreeMap;
use utoipa::ToSchema;

pub const MAX_RECIPIENTS: usize = 50;
pub const MAX_REPLY_TO: usize = 5;
pub const MAX_HEADERS: usize = 20;
pub const MAX_TAGS: usize = 10;
pub const MAX_SCHEDULE_DAYS: i64 = 30;
const MAX_VARIABLES_BYTES: usize = 64 * 1024;
/// Headers a caller may set besides `X-...` ones; everything else is built by us or SES.
const ALLOWED_HEADERS: &[&str] = &["list-unsubscribe", "list-unsubscribe-post", "in-reply-to", "references"];

#[derive(Deserialize, ToSchema, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct SendEmail {
    /// `addr@domain` or `Name <addr@domain>`; the domain must be a verified sending domain of
    /// the workspace (`/emails/domains`) or a subdomain of one.
    pub from: String,
    /// 1 or more addresses; to + cc + bcc at most 50.
    pub to: Vec<String>,
    #[serde(default)]
    pub cc: Vec<String>,
    #[serde(default)]
    pub bcc: Vec<String>,
    /// At most 5.
    #[serde(default)]
    pub reply_to: Vec<String>,
    /// Raw content: `subject` and `html` and/or `text` (not with `template_slug`).
    #[serde(default)]
    pub subject: Option<String>,
    #[serde(default)]
    pub html: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    /// Templated content instead of raw: rendered on accept with `variables` and `locale`.
    #[serde(default)]
    #[schema(pattern = "^[a-z0-9][a-z0-9_-]{0,63}$")]
    pub template_slug: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub variables: Map<String, Value>,
    #[serde(default)]
    pub locale: Option<String>,
    /// `X-...` headers plus List-Unsubscribe, List-Unsubscribe-Post, In-Reply-To, References.
    /// Marketing mail (not `transactional`) to one recipient gets the platform's one-click
    /// `List-Unsubscribe` and `List-Unsubscribe-Post` unless this sets `List-Unsubscribe`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Up to 10 labels for filtering (`GET /emails?tag=`).
    #[serde(default)]
    #[schema(max_items = 10, pattern = "^[A-Za-z0-9_.:-]{1,64}$")]
    pub tags: Vec<String>,
    /// Send later: in the future, at most 30 days ahead.
    #[serde(default)]
    #[schema(format = DateTime)]
    pub scheduled_at: Option<String>,
    /// Links the email to a contact's timeline (the contact must exist).
    // Text until `check` reads it, so a batch's permissive mode reports a malformed one with
    // the entry's other problems instead of refusing the batch.
    #[serde(default)]
    #[schema(value_type = Option<ContactId>)]
    pub contact_id: Option<String>,
    /// Transactional mail (receipts, password resets) also goes to unsubscribed addresses and
    /// carries no unsubscribe link; marketing mail (the default) does not, and does. Bounced,
    /// complained and erased addresses are suppressed regardless.
    #[serde(default)]
    pub transactional: bool,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// Up to 20 files, base64; with `content_id`, shown inline by the HTML (`cid:`). Typed by
    /// their bytes; programs and scripts are refused. The whole message, files encoded, must
    /// stay within SES's 40 MB (a 400 names the file that crosses it); the request body itself
    /// is at most 2.5 MiB.
    #[serde(default)]
    #[schema(max_items = 20)]
    pub attachments: Vec<super::attachments::NewAttachment>,
}

/// A request that passed the checks that need no reads.
pub struct Draft {
    input: SendEmail,
    from_addr: String,
    to: Vec<String>,
    cc: Vec<String>,
    bcc: Vec<String>,
    reply_to: Vec<String>,
    scheduled_at: Option<chrono::DateTime<chrono::Utc>>,
    files: Vec<super::attachments::Source>,
}

impl Draft {
    fn recipients(&self) -> impl Iterator<Item = &String> {
        self.to.iter().chain(&self.cc).chain(&self.bcc)
    }
}

fn addresses(errs: &mut Errors, field: &str, list: &[String]) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for (i, a) in list.iter().enumerate() {
        match normalise_email(a) {
            Some(a) if !out.contains(&a) => out.push(a),
            Some(_) => {}
            None => errs.add(format!("{field}[{i}]"), "must be an email address"),
        }
    }
    out
}

fn header_allowed(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    if ALLOWED_HEADERS.contains(&lower.as_str()) {
        return true;
    }
    lower.starts_with("x-")
        && !lower.starts_with("x-ses-")
        && !lower.starts_with("x-amz")
        && (3..=76).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn valid_tag(t: &str) -> bool {
    (1..=64).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

/// Checks that need no reads.
pub fn check(input: SendEmail, now: chrono::DateTime<chrono::Utc>) -> Result<Draft, Vec<ErrorDetail>> {
    let mut errs = Errors::new();
    let from_addr = match parse_mailbox(&input.from) {
        Some((_, a)) => a,
        None => {
            errs.add("from", "must be `addr@domain` or `Name <addr@domain>`");
            String::new()
        }
    };
    if input.to.is_empty() {
        errs.add("to", "at least one recipient is required");
    }
    let to = addresses(&mut errs, "to", &input.to);
    let cc = addresses(&mut errs, "cc", &input.cc);
    let bcc = addresses(&mut errs, "bcc", &input.bcc);
    if to.len() + cc.len() + bcc.len() > MAX_RECIPIENTS {
        errs.add("to", format!("to, cc and bcc have at most {MAX_RECIPIENTS} recipients together"));
    }
    let reply_to = addresses(&mut errs, "reply_to", &input.reply_to);
    if reply_to.len() > MAX_REPLY_TO {
        errs.add("reply_to", format!("at most {MAX_REPLY_TO} addresses"));
    }
    match &input.template_slug {
        Some(slug) => {
            if !templates::valid_slug(slug) {
                errs.add("template_slug", "must be a template slug");
            }
            for (field, set) in [("subject", input.subject.is_some()), ("html", input.html.is_some()), ("text", input.text.is_some())] {
                if set {
                    errs.add(field, "comes from the template; leave it out when template_slug is set");
                }
            }
            if let Some(l) = &input.locale
                && !shared::validate::is_locale(l)
            {
                errs.add("locale", "must be a language tag such as en or de-AT");
            }
            if serde_json::to_vec(&input.variables).map(|b| b.len()).unwrap_or(0) > MAX_VARIABLES_BYTES {
                errs.add("variables", format!("must be at most {MAX_VARIABLES_BYTES} bytes of JSON"));
            }
        }
        None => {
            match &input.subject {
                None => errs.add("subject", "is required (or use template_slug)"),
                Some(s) => templates::check_subject(&mut errs, "subject", s),
            }
            if input.html.is_none() && input.text.is_none() {
                errs.add("html", "html or text (or both) is required (or use template_slug)");
            }
            templates::check_bodies(&mut errs, "body", input.html.as_deref(), input.text.as_deref());
            if !input.variables.is_empty() {
                errs.add("variables", "apply to templates only");
            }
            if input.locale.is_some() {
                errs.add("locale", "applies to templates only");
            }
        }
    }
    if input.headers.len() > MAX_HEADERS {
        errs.add("headers", format!("at most {MAX_HEADERS}"));
    }
    for (k, v) in &input.headers {
        if !header_allowed(k) {
            errs.add(
                format!("headers.{k}"),
                "only X-... headers, List-Unsubscribe, List-Unsubscribe-Post, In-Reply-To and References may be set",
            );
        } else if v.is_empty() || v.chars().count() > 998 || v.chars().any(char::is_control) {
            errs.add(format!("headers.{k}"), "the value must be 1 to 998 characters on one line");
        }
    }
    if input.tags.len() > MAX_TAGS {
        errs.add("tags", format!("at most {MAX_TAGS}"));
    }
    for (i, t) in input.tags.iter().enumerate() {
        if !valid_tag(t) {
            errs.add(format!("tags[{i}]"), "1 to 64 letters, digits, `_ - . :`");
        }
    }
    let scheduled_at = input.scheduled_at.as_deref().and_then(|raw| {
        let t = errs.timestamp("scheduled_at", raw)?;
        if t <= now {
            errs.add("scheduled_at", "must be in the future");
        } else if t > now + chrono::Duration::days(MAX_SCHEDULE_DAYS) {
            errs.add("scheduled_at", format!("must be at most {MAX_SCHEDULE_DAYS} days ahead"));
        }
        Some(t)
    });
    if input.contact_id.as_deref().is_some_and(|c| ContactId::parse(c).is_none()) {
        errs.add("contact_id", ContactId::malformed());
    }
    errs.metadata("metadata", &input.metadata);
    let files = super::attachments::check(&mut errs, &input.attachments);
    match errs.finish() {
        Ok(()) => Ok(Draft { input, from_addr, to, cc, bcc, reply_to, scheduled_at, files }),
        Err(e) => Err(e.details),
    }
}

/// What the drafts of one request need to know, read once.
pub struct Context {
    /// The workspace's verified sending domains.
    domains: Vec<String>,
    templates: BTreeMap<String, Template>,
    recipients: super::recipients::Recipients,
    /// Where marketing mail's unsubscribe links point (none without a pages origin).
    links: Option<super::unsubscribe::Links>,
    /// The largest message an email may make (`EMAIL_MAX_MESSAGE_BYTES`).
    max_message_bytes: usize,
    /// The files the drafts name by `upload_id`, read once: their bytes, or why not.
    uploads: BTreeMap<crate::ids::EmailUploadId, Result<super::attachments::Bytes, String>>,
}

/// `origin`: the request's pages origin ([`shared::Req::pages_origin`]), for unsubscribe links.
pub async fn load_context(app: &App, ws: &WorkspaceId, drafts: &[&Draft], origin: Option<&str>) -> ApiResult<Context> {
    let slugs: Vec<&str> = drafts.iter().filter_map(|d| d.input.template_slug.as_deref()).collect();
    let ids: Vec<String> = drafts.iter().filter_map(|d| d.input.contact_id.clone()).collect();
    // Reply-to addresses too: their tombstones are read with the recipients'.
    let mut addrs: Vec<String> = drafts.iter().flat_map(|d| d.recipients().chain(&d.reply_to).cloned()).collect();
    addrs.sort();
    addrs.dedup();
    // Only marketing mail to one recipient carries a link (see `unsubscribe`).
    let linked = drafts.iter().any(|d| !d.input.transactional && d.recipients().count() == 1);
    // The workspace (for its slug) is read in the recipients' batch: no round trip of its own.
    let workspace = linked.then(|| (ws_pk(ws), crate::keys::WORKSPACE.sk(())));
    let (domains, templates, (recipients, workspace)) = futures_util::future::try_join3(
        super::domains::verified_names(app, ws),
        async { if slugs.is_empty() { Ok(BTreeMap::new()) } else { templates::load_many(app, ws, &slugs).await } },
        super::recipients::recipients_and(app, ws, ids, addrs, true, workspace),
    )
    .await?;
    let links = match workspace {
        Some(w) => super::unsubscribe::links(app, &w, origin).await?,
        None => None,
    };
    let named = drafts.iter().flat_map(|d| super::attachments::uploads_named(&d.files));
    let uploads = super::attachments::read_uploads(app, ws, named).await?;
    Ok(Context { domains, templates, recipients, links, max_message_bytes: app.cfg.email.max_message_bytes, uploads })
}

/// The parts of an email a template (or the request itself) supplies.
struct Content {
    subject: String,
    html: Option<String>,
    text: Option<String>,
    locale: Option<String>,
}

/// The sender and the contact must belong to the workspace (from the context's look-ups).
fn check_references(d: &Draft, ctx: &Context, errs: &mut Errors) {
    if !super::domains::covers(&ctx.domains, &d.from_addr) {
        errs.add("from", format!("{} is not at a verified sending domain of this workspace (see /emails/domains)", d.from_addr));
    }
    if let Some(c) = &d.input.contact_id
        && !ctx.recipients.contacts.contains_key(c)
    {
        errs.add("contact_id", "no such contact in this workspace");
    }
    // An erased address is not stored again: a recipient is suppressed (and redacted, see
    // `finish`), a reply-to is refused, as it would be kept on the email and go out with it.
    if d.reply_to.iter().any(|a| ctx.recipients.suppressed.get(a).is_some_and(|r| r == "erased")) {
        errs.add("reply_to", crate::privacy::ERASED_MESSAGE);
    }
}

/// The template rendered in the requested locale, or the request's own subject and bodies.
fn content(input: &SendEmail, ctx: &Context, errs: &mut Errors) -> Content {
    let empty = || Content { subject: String::new(), html: None, text: None, locale: None };
    let Some(slug) = &input.template_slug else {
        return Content {
            subject: input.subject.clone().unwrap_or_default(),
            html: input.html.clone(),
            text: input.text.clone(),
            locale: None,
        };
    };
    let Some(t) = ctx.templates.get(slug) else {
        errs.add("template_slug", format!("no template `{slug}` in this workspace"));
        return empty();
    };
    match templates::render_template(t, &input.variables, input.locale.as_deref(), errs) {
        Some(r) => Content { subject: r.subject, html: r.html, text: r.text, locale: Some(r.locale) },
        None => empty(),
    }
}

/// Suppressed when no `to` recipient may receive it; otherwise scheduled or queued.
fn initial_status(d: &Draft, suppressed_recipients: &[SuppressedRecipient]) -> EmailStatus {
    if d.to.iter().all(|a| suppressed_recipients.iter().any(|s| s.email == *a)) {
        EmailStatus::Suppressed
    } else if d.scheduled_at.is_some() {
        EmailStatus::Scheduled
    } else {
        EmailStatus::Queued
    }
}

/// One email built from its input, as a handler's single send does it: checked, its context
/// loaded, finished. Not written; the caller decides (and may refuse a suppressed one).
pub async fn build_one(app: &App, ws: &WorkspaceId, input: SendEmail, now: chrono::DateTime<chrono::Utc>) -> ApiResult<Email> {
    let to_error = |d: Vec<ErrorDetail>| shared::validate::validation_error(d);
    let draft = check(input, now).map_err(to_error)?;
    // Boxed: the context future is large, and callers sit deep in handler futures (the debug
    // build's stack overflowed without it).
    let ctx = Box::pin(load_context(app, ws, &[&draft], None)).await?;
    finish(ws, draft, &ctx, None, None, now).map_err(to_error)
}

/// The accepted email, or what is wrong with it: a checked draft becomes the email to store,
/// given what the workspace holds (`ctx`): its references checked, its content rendered, its
/// recipients' suppression applied.
pub fn finish(
    ws: &WorkspaceId,
    d: Draft,
    ctx: &Context,
    batch_id: Option<&str>,
    id: Option<crate::ids::EmailId>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Email, Vec<ErrorDetail>> {
    let mut errs = Errors::new();
    check_references(&d, ctx, &mut errs);
    let Content { subject, html, text, locale } = content(&d.input, ctx, &mut errs);
    let mut d = d;
    let files = super::attachments::ready(&mut errs, std::mem::take(&mut d.files), &ctx.uploads);
    if let Err(e) = errs.finish() {
        return Err(e.details);
    }
    let all: Vec<String> = d.to.iter().chain(&d.cc).chain(&d.bcc).cloned().collect();
    let suppressed_recipients = super::recipients::suppressed(all, d.input.transactional, &ctx.recipients);
    let status = initial_status(&d, &suppressed_recipients);
    // An erased address is not stored again, not even as a suppressed recipient.
    let (mut d, mut suppressed_recipients) = (d, suppressed_recipients);
    let erased: Vec<String> = suppressed_recipients.iter().filter(|s| s.reason == "erased").map(|s| s.email.clone()).collect();
    if !erased.is_empty() {
        for s in suppressed_recipients.iter_mut().filter(|s| s.reason == "erased") {
            (s.email, s.contact_id) = (model::ERASED_ADDRESS.into(), None);
        }
        for list in [&mut d.to, &mut d.cc, &mut d.bcc] {
            for a in list.iter_mut().filter(|a| erased.contains(a)) {
                *a = model::ERASED_ADDRESS.into();
            }
        }
    }
    let now_s = shared::ids::Timestamp::from(now);
    let (attachments, files) = files.into_iter().unzip();
    let input = d.input;
    let mut tags = input.tags.clone();
    tags.dedup();
    let mut e = Email {
        id: id.unwrap_or_else(crate::ids::EmailId::generate),
        object: "email".into(),
        status,
        from: input.from.trim().to_string(),
        to: d.to,
        cc: d.cc,
        bcc: d.bcc,
        reply_to: d.reply_to,
        subject,
        html,
        text,
        calendar: None,
        attachments,
        template_slug: input.template_slug,
        locale,
        headers: input.headers,
        tags,
        contact_id: input.contact_id.as_deref().and_then(ContactId::parse),
        batch_id: batch_id.map(EmailBatchId::trusted),
        scheduled_at: d.scheduled_at.map(shared::ids::Timestamp::from),
        transactional: input.transactional,
        provider_message_id: None,
        suppressed_recipients,
        feedback: None,
        error: None,
        attempts: 0,
        timestamps: BTreeMap::from([(status.as_str().to_string(), now_s.to_string())]),
        metadata: input.metadata,
        created_at: now_s,
        updated_at: now_s,
        sealed_secrets: None,
        files,
    };
    let mut errs = Errors::new();
    super::attachments::check_size(&mut errs, &e, ctx.max_message_bytes);
    if let Err(err) = errs.finish() {
        return Err(err.details);
    }
    if let Some(links) = &ctx.links {
        // Sealing a new email's first secret cannot fail in practice (no seal to open yet).
        super::unsubscribe::add_headers(&mut e, links, ws)
            .map_err(|err| vec![ErrorDetail { field: None, message: err.message, meta: None }])?;
    }
    Ok(e)
}

/// When the queue message goes out and when the tick should next look (epoch s), or `None`
/// when the email needs no message now (scheduled further ahead than SQS can delay).
pub fn plan(app: &App, e: &Email, now_secs: i64) -> (Option<i64>, i64) {
    let requeue = app.cfg.email.requeue_after_secs;
    match e.status {
        EmailStatus::Queued => (Some(0), now_secs + requeue),
        EmailStatus::Scheduled => {
            let due = e.due_ms() / 1000;
            if due - now_secs <= model::ENQUEUE_AHEAD_SECS { (Some((due - now_secs).max(0)), due + requeue) } else { (None, 0) }
        }
        _ => (None, 0),
    }
}

/// The timeline entry on the linked contact for a status change.
pub fn activity(ws: &WorkspaceId, e: &Email) -> ApiResult<Option<Item>> {
    let Some(c) = &e.contact_id else { return Ok(None) };
    let summary = format!("Email {}: {}", e.status.as_str(), e.subject);
    crate::contacts::activity(ws, c, e.status.event().as_str(), summary, e.summary()).map(Some)
}

/// Everything an accepted email writes besides its event: the email (first), its bodies, its
/// due entry and the timeline entry.
fn items(app: &App, ws: &WorkspaceId, e: &Email, now_secs: i64) -> ApiResult<(Vec<Item>, Event)> {
    let ev = Event::new(ws, e.status.event(), &e.without_bodies());
    let mut items = vec![model::record(ws, e)?.version(1).item, model::body_item(ws, e)];
    if e.status.pending() {
        items.push(model::due_item(ws, e, plan(app, e, now_secs).1));
    }
    items.extend(activity(ws, e)?);
    Ok((items, ev))
}

/// A portal customer's authority reaches only mail to themselves (a booking's notice, a
/// sign-in code): one recipient, the customer's own contact.
fn for_whom<E: effects::Mails>(auth: &Authority<E>, e: &Email) -> ApiResult<()> {
    match auth.customer() {
        Some(c) if e.contact_id.as_deref() != Some(c) || e.to.len() != 1 || !e.cc.is_empty() || !e.bcc.is_empty() => {
            Err(ApiError::forbidden("a portal customer's request can only send mail to the customer"))
        }
        _ => Ok(()),
    }
}

/// The effect `SendEmail`: the email is recorded (all writes in one transaction, the
/// suppression and template decisions already made) and then queued for SES; nothing reaches
/// SES that was not recorded first, so no later failure can send it twice.
pub async fn send<E: effects::Mails>(auth: &Authority<E>, app: &App, ws: &WorkspaceId, e: &Email, now_secs: i64) -> ApiResult<()> {
    // The approved objects' checks come first (`send_in` with no writes of its own): one that
    // failed is a change since the person approved it (428 `stale`), as a batch's is.
    let (tx, queued) = send_in_with_files(auth, app, ws, e, now_secs, Tx::new(), &[])?;
    super::attachments::store(app, ws, &[e]).await?;
    tx.commit(app).await.map_err(|e| e.on_condition(|i| auth.stale_at(i).unwrap_or_else(|| ApiError::conflict("the email exists"))))?;
    super::attachments::link(app, ws, &[e]).await;
    queued.after_commit(app).await;
    Ok(())
}

/// The effect `SendEmail` inside the caller's transaction (a helpdesk reply and its message
/// are one write): the email's writes join `tx`; call [`Queued::after_commit`] once it committed.
/// `writes`: the objects `tx` itself writes, with the versions they were read at. Every object
/// the person approved is checked in the same transaction (`Authority::guard`).
pub fn send_in<E: effects::Mails>(
    auth: &Authority<E>,
    app: &App,
    ws: &WorkspaceId,
    e: &Email,
    now_secs: i64,
    tx: Tx,
    writes: &[(&str, i64)],
) -> ApiResult<(Tx, Queued)> {
    // Files are written before the transaction that records their email (`send` does it);
    // the callers of this one (helpdesk replies) take none.
    if !e.attachments.is_empty() {
        return Err(ApiError::validation("attachments", "this kind of send takes no files"));
    }
    send_in_with_files(auth, app, ws, e, now_secs, tx, writes)
}

fn send_in_with_files<E: effects::Mails>(
    auth: &Authority<E>,
    app: &App,
    ws: &WorkspaceId,
    e: &Email,
    now_secs: i64,
    tx: Tx,
    writes: &[(&str, i64)],
) -> ApiResult<(Tx, Queued)> {
    for_whom(auth, e)?;
    let mut tx = auth.guarded(tx, writes)?;
    let (items, ev) = items(app, ws, e, now_secs)?;
    for (i, item) in items.into_iter().enumerate() {
        tx = if i == 0 { tx.put_if(item, "attribute_not_exists(pk)", vec![]) } else { tx.put(item) };
    }
    let delay = plan(app, e, now_secs).0;
    Ok((tx.event(ev), Queued { ws: ws.clone(), ids: vec![e.id.clone()], delay }))
}

/// The effect `SendEmail` for a batch: its emails in transactions of whole emails (each
/// email's record, bodies, due entry, timeline entry and event together, the record
/// conditional on being new; as many as fit in one TransactWriteItems), then `extra` (the
/// batch record) in a last transaction of its own: the batch is complete when its record
/// exists.
///
/// Resumable: with an `Idempotency-Key` and no approval to consume, the ids are derived from
/// the key (the caller's), the emails' transactions are repeatable (not witnessed), and a run
/// that fails part-way leaves its key paused: the client's retry runs the same request again,
/// writes only the emails not yet written (each written email is whole, and may be on its way)
/// and then the record, so it completes exactly the same batch. With an approval, the approved
/// objects are checked (`Authority::guarded`) in the transaction that consumes it, which marks
/// the key written, so a retry is told to read the result instead.
pub async fn send_many(
    auth: &Authority<effects::SendEmail>,
    app: &App,
    ws: &WorkspaceId,
    emails: &[Email],
    extra: Vec<Item>,
    now_secs: i64,
) -> ApiResult<()> {
    for e in emails {
        for_whom(auth, e)?;
    }
    let guard = auth.tx(&[])?;
    let resumable = guard.is_empty() && shared::idempotency::keyed();
    if resumable {
        shared::idempotency::before_resumable_writes(&app.db).await?;
    } else if !guard.is_empty() {
        guard.commit(app).await.map_err(|e| {
            e.on_condition(|i| auth.stale_at(i).unwrap_or_else(|| ApiError::conflict("what was approved changed; confirm again")))
        })?;
    }
    let record_key = |e: &Email| (ws_pk(ws), crate::keys::EMAIL.sk(&e.id));
    let mut pending: Vec<&Email> = emails.iter().collect();
    for _attempt in 0..3 {
        if resumable {
            // What an earlier run of this request (or a lost answer of this one) wrote.
            let mut keys_: Vec<(String, String)> = pending.iter().map(|e| record_key(e)).collect();
            let batch_key = extra.first().and_then(|i| Some((store::get_str(i, "pk")?.to_string(), store::get_str(i, "sk")?.to_string())));
            keys_.extend(batch_key.clone());
            let found = app.db.batch_get(&keys_).await?;
            let exists =
                |k: &(String, String)| found.iter().any(|i| store::get_str(i, "pk") == Some(&k.0) && store::get_str(i, "sk") == Some(&k.1));
            if batch_key.as_ref().is_some_and(&exists) {
                return Ok(());
            }
            pending.retain(|e| !exists(&record_key(e)));
        }
        // The files of the emails about to be recorded (not of those an earlier run of the
        // request recorded: they may be sent, and their files deleted, by now).
        super::attachments::store(app, ws, &pending).await?;
        match write_whole(app, ws, &pending, now_secs, resumable).await {
            Ok(()) => {
                pending.clear();
                break;
            }
            // An email's record exists (a lost answer's transaction landed): read again.
            Err(store::TxError::Condition(_)) if resumable => continue,
            Err(e) => return Err(e.stale()),
        }
    }
    if !pending.is_empty() {
        return Err(ApiError::unavailable("the batch's emails kept colliding with another write; retry with the same Idempotency-Key"));
    }
    let mut last = Tx::new();
    for item in extra {
        last = last.put_if(item, "attribute_not_exists(pk)", vec![]);
    }
    match last.commit(app).await {
        Ok(()) => {}
        // The record exists: an earlier run completed it.
        Err(store::TxError::Condition(_)) if resumable => return Ok(()),
        Err(e) => return Err(e.stale()),
    }
    let mut by_delay: BTreeMap<i64, Vec<EmailId>> = Default::default();
    for e in emails {
        if let (Some(delay), _) = plan(app, e, now_secs) {
            by_delay.entry(delay).or_default().push(e.id.clone());
        }
    }
    for (delay, ids) in by_delay {
        // After one failed hand-off the tick enqueues the rest.
        if !model::enqueue(app, ws, &ids, delay).await {
            break;
        }
    }
    Ok(())
}

/// DynamoDB's limits on one TransactWriteItems: 100 writes, 4 MB; kept well inside both.
const TX_WRITES: usize = 90;
const TX_BYTES: usize = 3 * 1024 * 1024;

/// Write emails whole, as many per transaction as fit; each record only if new.
async fn write_whole(app: &App, ws: &WorkspaceId, emails: &[&Email], now_secs: i64, repeatable: bool) -> Result<(), store::TxError> {
    let mut tx = Tx::new();
    let (mut writes, mut bytes) = (0usize, 0usize);
    // The emails of the transaction being built: their files are untagged as soon as it
    // commits, so a later failure of the request does not leave recorded emails' files to expire.
    let mut chunk: Vec<&Email> = vec![];
    for e in emails {
        let (mut its, ev) = self::items(app, ws, e, now_secs)?;
        let size: usize = its.iter().map(store::approx_size).sum::<usize>() + 2 * 1024;
        if writes > 0 && (writes + its.len() + 1 > TX_WRITES || bytes + size > TX_BYTES) {
            let full = std::mem::take(&mut tx);
            (if repeatable { full.repeatable() } else { full }).commit(app).await?;
            super::attachments::link(app, ws, &std::mem::take(&mut chunk)).await;
            (writes, bytes) = (0, 0);
        }
        writes += its.len() + 1;
        bytes += size;
        let record = its.remove(0);
        tx = tx.put_if(record, "attribute_not_exists(pk)", vec![]);
        for item in its {
            tx = tx.put(item);
        }
        tx = tx.event(ev);
        chunk.push(e);
    }
    if writes > 0 {
        (if repeatable { tx.repeatable() } else { tx }).commit(app).await?;
        super::attachments::link(app, ws, &chunk).await;
    }
    Ok(())
}

/// An email recorded in a transaction, waiting for its queue message.
#[must_use = "queue the email once its transaction committed"]
pub struct Queued {
    ws: WorkspaceId,
    ids: Vec<EmailId>,
    delay: Option<i64>,
}

impl Queued {
    /// The queue message (a lost one is found by the due sweep, as for every email).
    pub async fn after_commit(self, app: &App) {
        if let Some(delay) = self.delay {
            model::enqueue(app, &self.ws, &self.ids, delay).await;
        }
    }
}

/// Cancel a scheduled or queued email that is not being sent right now (`email.cancelled`):
/// the email, its due entry and its timeline entry in one transaction.
pub async fn cancel(app: &App, ws: &WorkspaceId, id: &EmailId) -> ApiResult<Email> {
    use shared::outbox::Tx;
    let stored = super::load(app, ws, id).await?.ok_or_else(super::not_found)?;
    let now = chrono::Utc::now();
    let mut e = stored.email.clone();
    if !e.status.pending() {
        return Err(ApiError::conflict(format!("only scheduled or queued emails can be cancelled; this one is {}", e.status.as_str())));
    }
    // A claim, live or left behind by a sender that stopped: SES may have the email.
    if stored.claim_token.is_some() {
        return Err(ApiError::conflict("the email is being sent right now, or its sending was interrupted; see its status shortly"));
    }
    e.set_status(super::EmailStatus::Cancelled, shared::ids::Timestamp::from(now));
    let (due_pk, due_sk) = super::due_key(ws, &stored.email);
    let mut tx = Tx::new().replace(super::record(ws, &e)?, stored.version).delete_if(due_pk, due_sk, "", vec![]).event(Event::new(
        ws,
        EventType::EmailCancelled,
        &e,
    ));
    if let Some(a) = activity(ws, &e)? {
        tx = tx.put(a);
    }
    tx.commit(app).await.map_err(shared::store::TxError::stale)?;
    // Nothing reads them again (best effort: an erasure deletes them too).
    if let Err(err) = super::attachments::discard(app, ws, &e).await {
        tracing::warn!(error = %err, "a cancelled email's files stay");
    }
    Ok(e)
}
