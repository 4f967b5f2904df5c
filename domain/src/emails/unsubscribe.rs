//! One-click unsubscribe (RFC 8058, as Gmail's and Yahoo's bulk-sender rules require it).
//!
//! Marketing mail (not `transactional`) to a single recipient carries `List-Unsubscribe:
//! <https://…/p/<slug>/unsubscribe?token=<token>>` and `List-Unsubscribe-Post:
//! List-Unsubscribe=One-Click`. The token is `<workspace id>.<email id>.<tag>`, the tag an
//! HMAC-SHA256 (128 bits) of both and of the recipient's address under a key derived from the
//! platform's oldest root, so it names no one, cannot be made for another address or email,
//! and still works after a rotation. Opening it reads the email for its recipient: a token
//! whose email was erased since no longer opens, and an erased address is suppressed anyway.
//!
//! The unsubscribe is a consent event: `marketing_email` withdrawn, source `portal` (the link's
//! page), with the email it came from as its evidence (`email_id`, which only the platform sets). A contact's `email_status` becomes
//! `unsubscribed` in the same transaction; an address without a contact gets a suppression
//! with reason `unsubscribed`, which, like a contact's unsubscribe, holds for marketing mail
//! only. Each write is conditional on the state it changes, so a replayed or raced POST
//! changes nothing twice and records one event. Subscribing again (the page's undo) is the
//! same with `granted: true`; it never lifts a bounce, a complaint or an erasure.

use super::Email;
use crate::contacts::consents::{self, Consent, ConsentSource};
use crate::contacts::{self, EmailStatus};
use crate::ids::{ConsentId, EmailId};
use crate::keys;
use serde::Serialize;
use shared::auth::WorkspaceId;
use shared::events::Event;
use shared::events::EventType;
use shared::ids::Timestamp;
use shared::outbox::Tx;
use shared::store::{self, ws_pk};
use shared::{ApiError, ApiResult, App};

pub const LIST_UNSUBSCRIBE: &str = "List-Unsubscribe";
pub const LIST_UNSUBSCRIBE_POST: &str = "List-Unsubscribe-Post";
/// The one value RFC 8058 gives the POST's body and header.
pub const ONE_CLICK: &str = "List-Unsubscribe=One-Click";

/// Where the links of one request's emails point: the pages' origin and the workspace's slug,
/// with the key the tokens are made under.
pub struct Links {
    origin: String,
    slug: String,
    secret: shared::app::PlatformSecret,
    /// The domains whose mail this deployment receives (`INBOUND_MAIL_DOMAINS`), for mailto.
    inbound: shared::config::EmailSettings,
}

/// The links for emails accepted now, given the workspace's record (read by the caller with
/// its other reads; the workspaces area is above this one, so its slug is read as stored).
/// `origin` is the request's pages origin, else the configured one; without either there is
/// nowhere to point, and marketing mail goes without the header.
pub async fn links(app: &App, workspace: &store::Item, origin: Option<&str>) -> ApiResult<Option<Links>> {
    let Some(origin) = origin.or(app.cfg.portal_pages_url.as_deref()) else { return Ok(None) };
    let Some(slug) = store::get_str(workspace, "slug").map(String::from) else { return Ok(None) };
    Ok(Some(Links {
        origin: origin.trim_end_matches('/').to_string(),
        slug,
        secret: app.platform_secret().await?.clone(),
        inbound: app.cfg.email.clone(),
    }))
}

/// Which address a tag is for: the link's or the mailto's. Their tags differ, so whoever sees
/// the mail sent to the mailto address (a relay, a shared mailbox) cannot make the link from it.
#[derive(Clone, Copy)]
enum Channel {
    Link,
    Mail,
}

/// What a token's tag is the MAC of: each part and a line break.
fn tagged(channel: Channel, ws: &str, email_id: &str, address: &str) -> Vec<u8> {
    let v = match channel {
        Channel::Link => "unsubscribe/v1",
        Channel::Mail => "unsubscribe-mail/v1",
    };
    format!("{v}\n{ws}\n{email_id}\n{address}\n").into_bytes()
}

/// The token's tag: the MAC's first 128 bits.
fn tag(channel: Channel, key: &[u8], ws: &str, email_id: &str, address: &str) -> Vec<u8> {
    shared::crypto::hmac_sha256(key, &tagged(channel, ws, email_id, address))[..16].to_vec()
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The one address marketing mail may carry a link for: the email's only recipient.
fn sole_recipient(e: &Email) -> Option<&str> {
    let mut all = e.to.iter().chain(&e.cc).chain(&e.bcc);
    match (all.next(), all.next()) {
        (Some(a), None) if a != super::ERASED_ADDRESS => Some(a),
        _ => None,
    }
}

/// The placeholder the stored header holds: the link is sealed with the email (as a sign-in
/// link is) and put back by the sender only, so no reader of the email (a read-only key, a
/// webhook receiver, an export) can use it to change the recipient's consent.
pub const SEALED_AS: &str = "list_unsubscribe";

/// The mailto address's placeholder, sealed as the link is.
pub const SEALED_MAILTO_AS: &str = "list_unsubscribe_mailto";

/// What marks a mailto token in an address's `+tag`.
const MAIL_TOKEN_MARK: char = 'u';
/// A mailto token: the mark, the email's ULID and the tag, both in Crockford base32.
const MAIL_TOKEN_LEN: usize = 1 + 26 + 26;

/// The 128-bit tag in Crockford's base32 (26 characters, the alphabet of ids): mail systems may
/// change the case of an address's local part, and base32 reads the same either way.
fn base32(tag: &[u8]) -> Option<String> {
    let bytes: [u8; 16] = tag.try_into().ok()?;
    Some(ulid::Ulid(u128::from_be_bytes(bytes)).to_string())
}

/// `mailto:<sender>+u<email><tag>@<sender's domain>?subject=unsubscribe` (RFC 2369), for a
/// sender at a domain whose mail this deployment receives (`INBOUND_MAIL_DOMAINS`): mail to it
/// comes back through the inbound worker, [`by_mail`]. None when the address would not fit
/// (a local part is at most 64 characters) or the sender's own address has a `+tag`.
fn mailto(links: &Links, e: &Email, tag: &[u8]) -> Option<String> {
    let (_, from) = shared::validate::parse_mailbox(&e.from)?;
    let (local, domain) = from.rsplit_once('@')?;
    if !links.inbound.receives(domain) || local.contains('+') {
        return None;
    }
    let ulid = e.id.as_str().strip_prefix("em_")?;
    let local = format!("{local}+{MAIL_TOKEN_MARK}{ulid}{}", base32(tag)?).to_ascii_lowercase();
    (local.len() <= 64).then(|| format!("mailto:{local}@{domain}?subject=unsubscribe"))
}

/// Add the two headers to a marketing email with one recipient, unless the caller set its own
/// `List-Unsubscribe` (theirs is kept, and its POST is theirs to answer). The header names the
/// link and, where the sender's domain receives mail here, a mailto address.
pub fn add_headers(e: &mut Email, links: &Links, ws: &WorkspaceId) -> ApiResult<()> {
    if e.transactional || e.headers.keys().any(|k| k.eq_ignore_ascii_case(LIST_UNSUBSCRIBE)) {
        return Ok(());
    }
    let Some(addr) = sole_recipient(e) else { return Ok(()) };
    let key = &links.secret.unsubscribe_key;
    let token = format!("{ws}.{}.{}", e.id, b64(&tag(Channel::Link, key, ws, &e.id, addr)));
    // In the query, not the path: access logs record paths.
    let url = format!("{}/p/{}/unsubscribe?token={token}", links.origin, links.slug);
    let mut header = format!("<{}>", super::secret_placeholder(SEALED_AS));
    match mailto(links, e, &tag(Channel::Mail, key, ws, &e.id, addr)) {
        Some(mailto) => {
            e.carry_secrets(&links.secret, &[(SEALED_AS, &url), (SEALED_MAILTO_AS, &mailto)])?;
            header.push_str(&format!(", <{}>", super::secret_placeholder(SEALED_MAILTO_AS)));
        }
        None => e.carry_secrets(&links.secret, &[(SEALED_AS, &url)])?,
    }
    e.headers.retain(|k, _| !k.eq_ignore_ascii_case(LIST_UNSUBSCRIBE_POST));
    e.headers.insert(LIST_UNSUBSCRIBE.into(), header);
    e.headers.insert(LIST_UNSUBSCRIBE_POST.into(), ONE_CLICK.into());
    Ok(())
}

/// Whom a token unsubscribes: the address, the email it came in, and its contact if any.
pub struct Target {
    pub address: String,
    pub email_id: EmailId,
}

/// Open a token for this workspace: 404 for anything that is not one of its links (malformed,
/// altered, another workspace's, an email since erased or gone).
pub async fn open(app: &App, ws: &WorkspaceId, token: &str) -> ApiResult<Target> {
    let unknown = || ApiError::not_found("unsubscribe link");
    let mut parts = token.splitn(3, '.');
    let (Some(w), Some(id), Some(sent)) = (parts.next(), parts.next(), parts.next()) else { return Err(unknown()) };
    let id = EmailId::parse(id).ok_or_else(unknown)?;
    use base64::Engine;
    let sent = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(sent).map_err(|_| unknown())?;
    if w != &**ws || sent.len() != 16 {
        return Err(unknown());
    }
    opened(app, ws, Channel::Link, id, &sent).await
}

/// Whether an address's `+tag` is shaped as a mailto token (it may still be forged).
pub fn is_mail_token(tag: &str) -> bool {
    tag.len() == MAIL_TOKEN_LEN && tag.starts_with(MAIL_TOKEN_MARK) && tag.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Mail to a mailto address of [`add_headers`] arrived (its `+tag`, any case): unsubscribe its
/// email's recipient, as the link's one-click POST does. The token is the proof, as the link's
/// is: the tag over the workspace, the email and its one recipient. Answers false for a token
/// that does not open (altered, another workspace's, an email erased or never sent).
pub async fn by_mail(app: &App, ws: &WorkspaceId, tag: &str) -> ApiResult<bool> {
    if !is_mail_token(tag) {
        return Ok(false);
    }
    let upper = tag[1..].to_ascii_uppercase();
    let (ulid, sent) = upper.split_at(26);
    let (Some(id), Ok(sent)) = (EmailId::parse(&format!("em_{ulid}")), ulid::Ulid::from_string(sent)) else { return Ok(false) };
    let target = match opened(app, ws, Channel::Mail, id, &sent.0.to_be_bytes()).await {
        Ok(t) => t,
        Err(e) if e.status().as_u16() == 404 => return Ok(false),
        Err(e) => return Err(e),
    };
    set(app, ws, &target, false, &Request { via: Via::Mail, ip_address: None, user_agent: None }).await?;
    Ok(true)
}

/// The target of email `id`'s link whose tag is `sent`, or 404.
async fn opened(app: &App, ws: &WorkspaceId, channel: Channel, id: EmailId, sent: &[u8]) -> ApiResult<Target> {
    let unknown = || ApiError::not_found("unsubscribe link");
    let stored = super::load(app, ws, &id).await?.ok_or_else(unknown)?;
    // Only a message that reached SES (or may have: a send whose outcome is unknown) put the
    // link in anyone's hands.
    let left = stored.email.provider_message_id.is_some() || stored.email.error.as_ref().is_some_and(|e| e.code == "outcome_unknown");
    if !left {
        return Err(unknown());
    }
    let addr = sole_recipient(&stored.email).ok_or_else(unknown)?;
    if !shared::crypto::hmac_sha256_verify_prefix(&app.platform_secret().await?.unsubscribe_key, &tagged(channel, ws, &id, addr), sent) {
        return Err(unknown());
    }
    Ok(Target { address: addr.to_string(), email_id: id })
}

/// Where an address stands for the workspace's marketing mail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subscription {
    Subscribed,
    Unsubscribed,
    /// Bounced, complained or erased: no mail goes out, and the page offers nothing to undo.
    Blocked,
}

/// How the request came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// The mail client's RFC 8058 POST.
    OneClick,
    /// The page's button.
    Page,
    /// Mail to the header's mailto address.
    Mail,
}

impl Via {
    fn as_str(self) -> &'static str {
        match self {
            Via::OneClick => "one_click",
            Via::Page => "page",
            Via::Mail => "mail",
        }
    }
}

/// `contact.unsubscribed`'s data (its contract schema: `ContactUnsubscribedData`).
#[derive(Serialize)]
pub struct Unsubscribed {
    /// Always `unsubscribe`.
    pub object: String,
    pub email: String,
    pub contact_id: Option<String>,
    /// The email whose link was used.
    pub email_id: EmailId,
    /// `one_click` (the mail client's POST), `page` (the unsubscribe page's button) or `mail`
    /// (mail to the header's mailto address).
    pub via: String,
    /// The consent event recorded.
    pub consent_id: ConsentId,
}

/// What the request looked like, for the consent's evidence.
pub struct Request<'a> {
    pub via: Via,
    pub ip_address: Option<&'a str>,
    pub user_agent: Option<&'a str>,
}

/// The address's state: its contact's `email_status`, else its suppression.
pub async fn state(app: &App, ws: &WorkspaceId, address: &str) -> ApiResult<Subscription> {
    let r = super::recipients::recipients_of(app, ws, vec![], vec![address.to_string()], true).await?;
    Ok(state_of(&r, address))
}

fn state_of(r: &super::recipients::Recipients, address: &str) -> Subscription {
    match r.suppressed.get(address).map(String::as_str) {
        Some("unsubscribed") => return Subscription::Unsubscribed,
        Some(_) => return Subscription::Blocked,
        None => {}
    }
    match r.owners.get(address).and_then(|id| r.contacts.get(id)).map(|c| c.email_status) {
        Some(EmailStatus::Subscribed) | None => Subscription::Subscribed,
        Some(EmailStatus::Unsubscribed) => Subscription::Unsubscribed,
        Some(_) => Subscription::Blocked,
    }
}

/// How long a link's own unsubscribe can be undone from its page.
pub const UNDO_SECS: i64 = 7 * 86_400;

/// Whether `subscribe` may undo: only this link's own unsubscribe, once, within
/// [`UNDO_SECS`], and only while nothing else changed since. Its withdrawal must be the
/// address's latest `marketing_email` event; the contact must not have changed after it (a
/// PATCH, an import or the portal writes `updated_at`, not always a consent event), and a
/// suppression must be the one this link wrote. An unsubscribe made any other way is not the
/// link's to undo, a link forwarded or kept for years subscribes no one, and one link cannot
/// cycle the ledger.
async fn may_undo(app: &App, ws: &WorkspaceId, t: &Target, contact: Option<&contacts::Contact>, listed: bool) -> ApiResult<bool> {
    let subject = crate::privacy::Subject { email: t.address.clone(), contact_id: contact.map(|c| c.id.clone()), ..Default::default() };
    let ledger = consents::state(app, ws, &subject).await?;
    let ours = |c: &&Consent| c.source == ConsentSource::Portal && c.email_id.as_ref() == Some(&t.email_id);
    if ledger.history.iter().filter(ours).any(|c| c.granted) {
        return Ok(false);
    }
    let Some(latest) = ledger.history.iter().rev().find(|c| !c.erased && c.purpose == "marketing_email") else { return Ok(false) };
    if !(ours(&latest) && !latest.granted && (Timestamp::now().time() - latest.created_at.time()).num_seconds() <= UNDO_SECS) {
        return Ok(false);
    }
    if contact.is_some_and(|c| c.email_status == EmailStatus::Unsubscribed && c.updated_at != latest.created_at) {
        return Ok(false);
    }
    if listed {
        let entry: Option<(super::suppressions::Suppression, i64)> = app.db.get_object(ws, &keys::EMAIL_SUPPRESSION.sk(&t.address)).await?;
        if entry.is_none_or(|(s, _)| s.email_id.as_ref() != Some(&t.email_id)) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Unsubscribe (`subscribe: false`) or subscribe again (`true`, the undo [`may_undo`] allows)
/// the token's address from the workspace's marketing mail. Answers the state after; a request
/// that finds the state already there (a replay, a race's loser) changes nothing.
pub async fn set(app: &App, ws: &WorkspaceId, t: &Target, subscribe: bool, req: &Request<'_>) -> ApiResult<Subscription> {
    let tomb = crate::privacy::tombstone_sk(app, ws, &t.address).await?;
    let suppression_sk = keys::EMAIL_SUPPRESSION.sk(&t.address);
    for _ in 0..3 {
        let r = super::recipients::recipients_of(app, ws, vec![], vec![t.address.clone()], true).await?;
        let now = state_of(&r, &t.address);
        let due = if subscribe { Subscription::Unsubscribed } else { Subscription::Subscribed };
        if now != due {
            return Ok(now);
        }
        let contact = r.owners.get(&t.address).and_then(|id| r.contacts.get(id));
        let contact_id = contact.map(|c| c.id.to_string());
        let listed = r.suppressed.get(&t.address).is_some_and(|why| why == "unsubscribed");
        if subscribe && !may_undo(app, ws, t, contact, listed).await? {
            return Err(ApiError::conflict("this address was unsubscribed another way or too long ago; the link cannot undo it"));
        }
        let consent = Consent {
            id: ConsentId::generate(),
            object: "consent".into(),
            email: t.address.clone(),
            contact_id: contact.map(|c| c.id.clone()),
            purpose: "marketing_email".into(),
            granted: subscribe,
            // The link's page is the portal's; `email_id` is the evidence, which only the
            // platform sets.
            source: ConsentSource::Portal,
            text_shown: match (req.via, subscribe) {
                (Via::OneClick, _) => "List-Unsubscribe=One-Click (RFC 8058), sent by the mail client".into(),
                (Via::Page, false) => "Unsubscribe (the unsubscribe page's button)".into(),
                (Via::Page, true) => "Subscribe again (the unsubscribe page's button)".into(),
                (Via::Mail, _) => "Mail to the List-Unsubscribe mailto address (RFC 2369)".into(),
            },
            text_version: "unsubscribe/v1".into(),
            ip_address: req.ip_address.filter(|ip| ip.parse::<std::net::IpAddr>().is_ok()).map(String::from),
            user_agent: req.user_agent.map(|u| u.chars().take(512).collect()),
            created_at: Timestamp::now(),
            proof: None,
            email_id: Some(t.email_id.clone()),
            erased: false,
        };
        let (item, ev) = consents::writes(ws, &consent)?;
        // The tombstone first: an erasure that began meanwhile wins, as for every consent.
        let mut tx =
            Tx::new().check(ws_pk(ws), tomb.clone(), "attribute_not_exists(pk)").put_if(item, "attribute_not_exists(pk)", vec![]).event(ev);
        // The contact, when it is subscribed (unsubscribing) or unsubscribed (the undo), changed
        // as it was read.
        let from = if subscribe { EmailStatus::Unsubscribed } else { EmailStatus::Subscribed };
        if let Some(c) = contact.filter(|c| c.email_status == from) {
            let (old, version) = contacts::load(app, ws, &c.id).await?;
            if old.email_status != from {
                continue;
            }
            let new = contacts::Contact {
                email_status: if subscribe { EmailStatus::Subscribed } else { EmailStatus::Unsubscribed },
                updated_at: consent.created_at,
                ..old.clone()
            };
            tx = contacts::update_tx(ws, &old, &new, version, tx)?;
        }
        if subscribe && listed {
            // The entry this link wrote, as `may_undo` read it.
            let vals = vec![(":u", store::s("unsubscribed")), (":e", store::s(&t.email_id))];
            tx = tx.delete_if(ws_pk(ws), suppression_sk.clone(), "reason = :u AND email_id = :e", vals);
        } else if !subscribe && contact.is_none() {
            // Without a contact to carry it, the unsubscribe is kept on the suppression list.
            let s = super::suppressions::Suppression {
                address: t.address.clone(),
                object: "email_suppression".into(),
                reason: "unsubscribed".into(),
                email_id: Some(t.email_id.clone()),
                created_at: consent.created_at,
            };
            tx = tx.put_if(super::suppressions::item(ws, &s)?, "attribute_not_exists(pk)", vec![]);
        }
        if !subscribe {
            let data = Unsubscribed {
                object: "unsubscribe".into(),
                email: t.address.clone(),
                contact_id: contact_id.clone(),
                email_id: t.email_id.clone(),
                via: req.via.as_str().into(),
                consent_id: consent.id.clone(),
            };
            tx = tx.event(Event::new(ws, EventType::ContactUnsubscribed, &data));
        }
        match tx.commit(app).await {
            Ok(()) => return Ok(if subscribe { Subscription::Subscribed } else { Subscription::Unsubscribed }),
            // Erased meanwhile: nothing is mailed to it any more.
            Err(store::TxError::Condition(0)) => return Ok(Subscription::Blocked),
            // Someone else changed it first: look again.
            Err(store::TxError::Condition(_)) => continue,
            Err(e) => return Err(e.stale()),
        }
    }
    state(app, ws, &t.address).await
}
