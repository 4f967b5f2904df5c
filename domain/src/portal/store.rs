//! The portal's credentials in the table: login links, sessions, erasure codes and sign-in
//! codes stored as hashes, their exchange and revocation, the customer's own record (`me`)
//! and emails, and the privacy rule.

use super::{
    Delivery, ERASURE_CODE_SECS, ERASURE_CODE_TRIES, ERASURE_CODES_PER_SESSION, ErasureCode, LINK_PREFIX, LINK_SECS, Lang, Me, PortalEmail,
    PortalLink, PortalSession, SIGN_IN_CODE_TRIES, SIGN_IN_FLOOR, SIGN_IN_PREFIX, SignIn, UpdateMe, allowed_return, code_hash,
    link_refused, sign_in_mail, time,
};
use crate::contacts::{self, Contact, ContactId};
use crate::effects::{Authority, EmailSignInLink, EraseSubject, OpenPortalSession, SendEmail};
use crate::emails::secret_placeholder;
use crate::keys;
use crate::privacy::{Erase, Find, Rule};
use shared::auth::WorkspaceId;
use shared::auth::{PORTAL_SESSION_IDLE_SECS, PORTAL_SESSION_MAX_SECS, PORTAL_SESSION_PREFIX, hash_api_key, random_base62};
use shared::error::ErrorCode;
use shared::events::Event;
use shared::events::EventType;
use shared::ids::Timestamp;
use shared::outbox::Tx;
use shared::store::{self, Item, n, s};
use shared::{ApiError, ApiResult, App};

pub const PRIVACY: &[Rule] = &[
    Rule {
        kind: keys::PORTAL_LINK.kind,
        area: "portal",
        find: Find::ContactIndex(keys::PORTAL_LINKS_OF_CONTACT.whole()),
        export: false,
        erase: Erase::Delete,
    },
    Rule {
        kind: keys::PORTAL_SIGN_IN.kind,
        area: "portal",
        find: Find::ContactIndex(keys::PORTAL_SIGN_INS_OF_CONTACT.whole()),
        export: false,
        erase: Erase::Delete,
    },
    Rule {
        kind: keys::PORTAL_SESSION.kind,
        area: "portal",
        find: Find::ContactIndex(keys::PORTAL_SESSIONS_OF_CONTACT.whole()),
        export: true,
        erase: Erase::Delete,
    },
];

/// The effect `OpenPortalSession`, asked of `grant` for the contact as it is: a login link whose
/// token goes to the caller.
pub async fn return_link(
    grant: &shared::authority::Grant,
    app: &App,
    ws: &WorkspaceId,
    contact_id: &ContactId,
    return_url: Option<String>,
) -> ApiResult<PortalLink> {
    grant.may::<OpenPortalSession>()?;
    check_return(app, ws, return_url.as_deref()).await?;
    let (contact, version) = contacts::load(app, ws, contact_id).await?;
    // Whose session the caller gets, at the address the contact has now; the link is written
    // only while the contact is still as shown.
    let value = super::Opening { contact_id: contact.id.clone(), email: contact.email.clone(), return_url: return_url.clone() };
    let auth = grant.authorize_value::<OpenPortalSession>(&value)?;
    let sk = contacts::contact_sk(&contact.id);
    let guard = auth.tx(&[(&sk, version)])?.check_if(store::ws_pk(ws), sk.clone(), "version = :v", vec![(":v", n(version))]);
    let (_, token, url, expires) = create_link(app, ws, contact, return_url, Delivery::Return, auth.by(), guard).await?;
    Ok(PortalLink {
        object: "portal_link".into(),
        delivery: Delivery::Return,
        token: Some(token),
        url,
        contact_id: contact_id.clone(),
        email_id: None,
        expires_at: time(expires),
    })
}

/// The effect `SendEmail`: a login link emailed to the contact's own address, from the
/// workspace's first verified sending domain, to `return_url` (or the first portal origin).
pub async fn email_link(
    auth: &Authority<SendEmail>,
    app: &App,
    ws: &WorkspaceId,
    contact_id: &ContactId,
    return_url: Option<String>,
) -> ApiResult<PortalLink> {
    let (w, _) = crate::workspaces::load(app, ws).await?;
    let Some(base) = return_url.clone().or_else(|| w.portal_origins.first().map(|o| format!("{}/", o.trim_end_matches('/')))) else {
        return Err(ApiError::validation("return_url", "is needed to email a link when the workspace has no portal_origins"));
    };
    returns_to(&base, &w.portal_origins)?;
    let from = sender(app, ws).await?;
    // The token travels only inside the emailed URL.
    let (contact, _) = contacts::load(app, ws, contact_id).await?;
    let (contact, _token, url, expires) = create_link(app, ws, contact, Some(base), Delivery::Email, auth.by(), auth.tx(&[])?).await?;
    let url = url.unwrap_or_default();
    let text = format!(
        "Sign in to {} with this link (valid 15 minutes, once):\n\n{}\n\nIf you did not ask for it, ignore this email.",
        w.name,
        secret_placeholder("link")
    );
    let subject = format!("Your sign-in link for {}", w.name);
    let email = mail_to(app, ws, &contact, &from, &subject, text, &[("link", &url)]).await?;
    crate::emails::compose::send(auth, app, ws, &email, chrono::Utc::now().timestamp()).await?;
    Ok(PortalLink {
        object: "portal_link".into(),
        delivery: Delivery::Email,
        token: None,
        url: None,
        contact_id: contact_id.clone(),
        email_id: Some(email.id),
        expires_at: time(expires),
    })
}

/// The address the portal's own mail leaves from: `no-reply@` the first verified sending domain.
pub(crate) async fn sender(app: &App, ws: &WorkspaceId) -> ApiResult<String> {
    let names = crate::emails::domains::verified_names(app, ws).await?;
    names
        .first()
        .map(|d| format!("no-reply@{d}"))
        .ok_or_else(|| ApiError::conflict("the workspace has no verified sending domain to email the customer from"))
}

/// An email from the workspace to the contact alone; `secrets` (name, value) are one-time
/// credentials its text names by `emails::secret_placeholder`: sealed, they reach only SES.
pub(crate) async fn mail_to(
    app: &App,
    ws: &WorkspaceId,
    contact: &Contact,
    from: &str,
    subject: &str,
    text: String,
    secrets: &[(&str, &str)],
) -> ApiResult<crate::emails::Email> {
    let input: crate::emails::compose::SendEmail = serde_json::from_value(serde_json::json!({
        "from": from, "to": [contact.email], "contact_id": contact.id, "transactional": true, "tags": ["portal"],
        "subject": subject, "text": text,
    }))
    .map_err(|e| ApiError::internal(e))?;
    let mut email = Box::pin(crate::emails::compose::build_one(app, ws, input, chrono::Utc::now())).await?;
    if !secrets.is_empty() {
        email.carry_secrets(app.platform_secret().await?, secrets)?;
    }
    Ok(email)
}

/// A `return_url` a login link may carry: on one of the workspace's portal origins.
async fn check_return(app: &App, ws: &WorkspaceId, return_url: Option<&str>) -> ApiResult<()> {
    let Some(u) = return_url else { return Ok(()) };
    returns_to(u, &crate::workspaces::load(app, ws).await?.0.portal_origins)
}

/// [`allowed_return`] as the 400 a refused `return_url` is.
fn returns_to(url: &str, origins: &[String]) -> ApiResult<()> {
    if !allowed_return(url, origins) {
        return Err(ApiError::validation("return_url", "must be an https URL on one of the workspace's portal_origins"));
    }
    Ok(())
}

/// A one-time login link for a contact of the workspace (as loaded): (contact, token, url, expiry).
async fn create_link(
    app: &App,
    ws: &WorkspaceId,
    contact: Contact,
    return_url: Option<String>,
    delivery: Delivery,
    opened_by: &str,
    guard: Tx,
) -> ApiResult<(Contact, String, Option<String>, i64)> {
    let contact_id = &contact.id;
    let token = format!("{LINK_PREFIX}{}", random_base62(43));
    let now = chrono::Utc::now().timestamp();
    let link_id = shared::ids::new_id("plink");
    let item = Item::from([
        ("pk".into(), s(keys::PORTAL_LINK.pk(&hash_api_key(&token)))),
        ("sk".into(), s(keys::PORTAL_LINK.table.sk)),
        ("gsi1pk".into(), s(keys::PORTAL_LINK.gsi1_pk((ws, contact_id)))),
        ("gsi1sk".into(), s(keys::PORTAL_LINK.gsi1_sk(&link_id))),
        ("workspace_id".into(), s(ws)),
        ("contact_id".into(), s(contact_id.to_string())),
        ("delivery".into(), s(delivery.as_str())),
        ("opened_by".into(), s(opened_by)),
        ("expires_at".into(), n(now + LINK_SECS)),
    ]);
    // With the authority's guard: the contact is still the one the person approved.
    guard.put_if(item, "attribute_not_exists(pk)", vec![]).commit(app).await.map_err(store::TxError::stale)?;
    let url = return_url.map(|u| format!("{}#portal_token={token}", u.split('#').next().unwrap_or_default()));
    Ok((contact, token, url, now + LINK_SECS))
}

/// How the session behind `session_token` was opened: the proof a portal consent carries.
pub async fn proof(
    app: &App,
    ws: &WorkspaceId,
    session_token: &str,
    contact: &Contact,
) -> ApiResult<crate::contacts::consents::PortalProof> {
    let invalid = || ApiError::unauthorized("X-Portal-Session is invalid or expired");
    let item = app.db.get(&shared::auth::portal_session_pk(session_token), keys::PORTAL_SESSION.table.sk).await?.ok_or_else(invalid)?;
    // The proof names the person who signed in: the session must be this contact's, here.
    let owned = store::get_str(&item, "workspace_id") == Some(&**ws) && store::get_str(&item, "contact_id") == Some(contact.id.as_str());
    if !owned {
        return Err(invalid());
    }
    let text = |k: &str| store::get_str(&item, k).unwrap_or_default().to_string();
    Ok(crate::contacts::consents::PortalProof {
        session_id: text("session_id"),
        delivery: text("delivery"),
        opened_by: text("opened_by"),
        address_vouched: !crate::contacts::EmailChange::unvouched(contact),
    })
}

/// One conditional update of a portal session's item: false when its condition failed.
async fn update_session(app: &App, pk: &str, update: &str, condition: &str, values: Vec<(&str, shared::store::Value)>) -> ApiResult<bool> {
    let mut write = app.db.update(pk, keys::PORTAL_SESSION.table.sk, update).when(condition);
    for (k, v) in values {
        write = write.value(k, v);
    }
    Ok(write.apply().await?.is_some())
}

/// Irreversible self-service asks for proof from the customer's inbox, however the session
/// was opened: a 6-digit code (15 minutes) sent to the contact's own address and kept, hashed,
/// on the session. A new code replaces the old one; a session gets 3 codes and 5 guesses in all.
pub async fn send_erasure_code(
    auth: &Authority<SendEmail>,
    app: &App,
    ws: &WorkspaceId,
    session_token: &str,
    contact: &Contact,
) -> ApiResult<ErasureCode> {
    use rand::RngExt;
    crate::contacts::EmailChange::vouched(contact)?;
    let code = format!("{:06}", rand::rng().random_range(0..1_000_000u32));
    let pk = shared::auth::portal_session_pk(session_token);
    let expires = chrono::Utc::now().timestamp() + ERASURE_CODE_SECS;
    let from = sender(app, ws).await?;
    let text = format!(
        "Your code to confirm the erasure of your data: {}\n\nIt is valid 15 minutes. Erasure cannot be undone. If you did not ask for it, ignore this email.",
        secret_placeholder("code")
    );
    let email = mail_to(app, ws, contact, &from, "Confirm the erasure of your data", text, &[("code", &code)]).await?;
    let values =
        vec![(":h", s(code_hash(&pk, &code))), (":e", n(expires)), (":z", n(0)), (":one", n(1)), (":max", n(ERASURE_CODES_PER_SESSION))];
    if !update_session(
        app,
        &pk,
        "SET erase_code_hash = :h, erase_code_expires = :e, erase_code_tries = if_not_exists(erase_code_tries, :z), \
         erase_codes_sent = if_not_exists(erase_codes_sent, :z) + :one",
        "attribute_exists(pk) AND (attribute_not_exists(erase_codes_sent) OR erase_codes_sent < :max)",
        values,
    )
    .await?
    {
        return Err(match app.db.get(&pk, keys::PORTAL_SESSION.table.sk).await? {
            Some(_) => {
                ApiError::conflict(format!("this session has asked for {ERASURE_CODES_PER_SESSION} codes; sign in again for another"))
            }
            None => ApiError::unauthorized("X-Portal-Session is invalid or expired"),
        });
    }
    crate::emails::compose::send(auth, app, ws, &email, chrono::Utc::now().timestamp()).await?;
    Ok(ErasureCode { object: "portal_erasure_code".into(), email_id: email.id, expires_at: time(expires) })
}

/// The customer's proof for `EraseSubject` (`gdpr::erasure::erase_self`): the code from their
/// inbox, taken once (a conditional update counts the guess, a conditional removal spends the
/// code).
pub(crate) async fn spend_erasure_code(
    auth: &Authority<EraseSubject>,
    app: &App,
    session_token: &str,
    contact: &Contact,
    code: &str,
) -> ApiResult<()> {
    if auth.customer() != Some(contact.id.as_str()) {
        return Err(ApiError::forbidden("a customer erases only themselves"));
    }
    crate::contacts::EmailChange::vouched(contact)?;
    let refused =
        || ApiError::validation("code", "the code is wrong, expired or used up; ask for a new one at POST /portal/me/erasure/code");
    let pk = shared::auth::portal_session_pk(session_token);
    let now = chrono::Utc::now().timestamp();
    // A guess counts before it is compared; the right code is then spent by a removal that only
    // one request can make.
    let counted = update_session(
        app,
        &pk,
        "SET erase_code_tries = erase_code_tries + :one",
        "attribute_exists(erase_code_hash) AND erase_code_expires > :now AND erase_code_tries < :max",
        vec![(":one", n(1)), (":now", n(now)), (":max", n(ERASURE_CODE_TRIES))],
    )
    .await?;
    if !counted {
        return Err(refused());
    }
    let spent = update_session(
        app,
        &pk,
        "REMOVE erase_code_hash, erase_code_expires",
        "erase_code_hash = :h",
        vec![(":h", s(code_hash(&pk, code.trim())))],
    )
    .await?;
    if !spent {
        return Err(refused());
    }
    Ok(())
}

/// Exchange a link token for a session: the link is deleted on the way (a conditional delete
/// that returns it), so two racing exchanges get one session. Used, expired and unknown tokens
/// get the same answer.
pub async fn exchange(app: &App, token: &str) -> ApiResult<PortalSession> {
    exchange_token(app, token, None).await
}

/// [`exchange`] by the link's hash (a sign-in code stands for the link it was sent with);
/// `within`: the link must be this workspace's (the pages of one workspace sign in to it only).
async fn exchange_hash(app: &App, link_hash: &str, within: Option<&WorkspaceId>) -> ApiResult<PortalSession> {
    let no = link_refused;
    let now = chrono::Utc::now().timestamp();
    let cond = match within {
        Some(_) => "attribute_exists(pk) AND expires_at > :now AND workspace_id = :ws",
        None => "attribute_exists(pk) AND expires_at > :now",
    };
    let mut delete = app.db.delete_when(keys::PORTAL_LINK.pk(link_hash), keys::PORTAL_LINK.table.sk, cond).value(":now", n(now));
    if let Some(ws) = within {
        delete = delete.value(":ws", s(ws));
    }
    let old = delete.returning(shared::store::Returning::Old).apply().await?.ok_or_else(no)?;
    let delivery = store::get_str(&old, "delivery").unwrap_or("return").to_string();
    let opened_by = store::get_str(&old, "opened_by").unwrap_or_default().to_string();
    let (Some(ws), Some(ct)) = (store::get_str(&old, "workspace_id"), store::get_str(&old, "contact_id").and_then(ContactId::parse)) else {
        return Err(no());
    };
    // The contact may have been erased since the link was made.
    let wid = WorkspaceId::trusted(ws);
    let contact = contacts::load(app, &wid, &ct).await.map_err(|_| no())?.0;
    let session = format!("{PORTAL_SESSION_PREFIX}{}", random_base62(43));
    let session_id = shared::ids::new_id("psess");
    let expires = now + PORTAL_SESSION_IDLE_SECS;
    let item = Item::from([
        ("pk".into(), s(shared::auth::portal_session_pk(&session))),
        ("sk".into(), s(keys::PORTAL_SESSION.table.sk)),
        ("gsi1pk".into(), s(keys::PORTAL_SESSION.gsi1_pk((&wid, &ct)))),
        ("gsi1sk".into(), s(keys::PORTAL_SESSION.gsi1_sk(&session_id))),
        ("workspace_id".into(), s(ws)),
        ("contact_id".into(), s(ct.to_string())),
        ("session_id".into(), s(&session_id)),
        ("delivery".into(), s(&delivery)),
        ("opened_by".into(), s(&opened_by)),
        ("created_at".into(), s(shared::ids::Timestamp::now().to_string())),
        ("expires_at".into(), n(expires)),
        ("hard_expires_at".into(), n(now + PORTAL_SESSION_MAX_SECS)),
    ]);
    let ev = Event::new(
        ws,
        EventType::PortalSessionCreated,
        &serde_json::json!({"id": session_id, "object": "portal_session", "contact_id": ct.to_string(), "expires_at": time(expires)}),
    );
    Tx::new().put_if(item, "attribute_not_exists(pk)", vec![]).event(ev).commit(app).await.map_err(store::TxError::stale)?;
    Ok(PortalSession { object: "portal_session".into(), session_token: session, expires_at: time(expires), contact })
}

/// Whose a link is, before it is spent: the contact's address, so the page that asks "sign
/// in?" says as whom; None for a used, expired or other workspace's
/// link. Nothing is spent or changed.
pub async fn link_owner(app: &App, ws: &WorkspaceId, token: &str) -> ApiResult<Option<String>> {
    if !shared::auth::is_token(token, LINK_PREFIX) {
        return Ok(None);
    }
    let Some(item) = app.db.get(&keys::PORTAL_LINK.pk(&hash_api_key(token)), keys::PORTAL_LINK.table.sk).await? else { return Ok(None) };
    let live = store::get_str(&item, "workspace_id") == Some(&**ws)
        && store::get_i64(&item, "expires_at").is_some_and(|e| e > chrono::Utc::now().timestamp());
    let Some(ct) = store::get_str(&item, "contact_id").and_then(ContactId::parse).filter(|_| live) else { return Ok(None) };
    let Ok((c, _)) = contacts::load(app, ws, &ct).await else { return Ok(None) };
    // The whole address: a masked one (`a…@gmail.com`) is easy to match with a look-alike
    // account, and whoever holds a live link can sign in and read it anyway.
    Ok(Some(c.email))
}

/// A link token exchanged only by the pages of its own workspace.
pub async fn exchange_within(app: &App, ws: &WorkspaceId, token: &str) -> ApiResult<PortalSession> {
    exchange_token(app, token, Some(ws)).await
}

async fn exchange_token(app: &App, token: &str, within: Option<&WorkspaceId>) -> ApiResult<PortalSession> {
    if !shared::auth::is_token(token, LINK_PREFIX) {
        return Err(link_refused());
    }
    exchange_hash(app, &hash_api_key(token), within).await
}

fn sign_in_pk(attempt: &str) -> String {
    keys::PORTAL_SIGN_IN.pk(&hash_api_key(attempt))
}

/// The effect `EmailSignInLink`: a visitor to the workspace's portal types an address; when it
/// is a contact's, that contact gets a one-time link (to the portal's pages, or to
/// `return_url` on one of the workspace's origins) and a 6-digit code, from the workspace's
/// verified sending domain. Every address gets the same answer in the same time; attempts
/// are limited per address asked for (class `portal_sign_in_address`; the route or page limits
/// per network address, `portal_sign_in`).
/// `slug` names the workspace; an unknown one answers as an unknown address does. `pages`: the
/// origin of the portal's pages (`shared::request::pages_origin`).
pub async fn sign_in(
    auth: &Authority<EmailSignInLink>,
    app: &App,
    slug: &str,
    address: &str,
    return_url: Option<String>,
    pages: Option<&str>,
    lang: Lang,
) -> ApiResult<SignIn> {
    let started = tokio::time::Instant::now();
    let result = sign_in_unpadded(auth, app, slug, address, return_url, pages, lang).await;
    // Only refusals that never depend on who owns the address answer at once: its shape and
    // its rate. Everything else, failures included, takes the same floor.
    let immediate = result.as_ref().is_err_and(|e| matches!(e.code, ErrorCode::ValidationError | ErrorCode::RateLimited));
    if !immediate {
        tokio::time::sleep_until(started + SIGN_IN_FLOOR).await;
    }
    result
}

async fn sign_in_unpadded(
    auth: &Authority<EmailSignInLink>,
    app: &App,
    slug: &str,
    address: &str,
    return_url: Option<String>,
    pages: Option<&str>,
    lang: Lang,
) -> ApiResult<SignIn> {
    let Some(address) = shared::validate::normalise_email(address) else {
        return Err(ApiError::validation("email", "must be an email address"));
    };
    // Per address asked for, known or not (keyed by an HMAC: the bucket names no address).
    let key = &app.platform_secret().await?.csrf_key;
    let bucket =
        format!("SIGNIN#{}", shared::crypto::hex(&shared::crypto::hmac_sha256(key, format!("sign-in/{slug}/{address}").as_bytes())));
    let decision = app.limiter.acquire(&app.db, &bucket, shared::ratelimit::Class::PortalSignInAddress).await?;
    if !decision.allowed {
        return Err(decision.into_error());
    }
    let Some((ws, _)) = crate::workspaces::by_slug(app, slug).await? else {
        let attempt = format!("{SIGN_IN_PREFIX}{}", random_base62(43));
        return Ok(SignIn { object: "portal_sign_in".into(), attempt, expires_at: time(chrono::Utc::now().timestamp() + LINK_SECS) });
    };
    let ws = &ws;
    let (w, _) = crate::workspaces::load(app, ws).await?;
    // A return URL off the workspace's origins is refused for every address alike.
    if let Some(u) = &return_url
        && !allowed_return(u, &w.portal_origins)
    {
        return Err(ApiError::validation("return_url", "must be an https URL on one of the workspace's portal_origins"));
    }
    if return_url.is_none() && pages.is_none() {
        return Err(ApiError::unavailable("the portal's pages have no address (PORTAL_PAGES_URL) to link to"));
    }
    let attempt = format!("{SIGN_IN_PREFIX}{}", random_base62(43));
    let pk = sign_in_pk(&attempt);
    let now = chrono::Utc::now().timestamp();
    let expires = now + LINK_SECS;
    let mut item = Item::from([
        ("pk".into(), s(&pk)),
        ("sk".into(), s(keys::PORTAL_SIGN_IN.table.sk)),
        ("workspace_id".into(), s(ws)),
        ("tries".into(), n(0)),
        ("expires_at".into(), n(expires)),
    ]);
    // Only a contact's address, with a domain to write from, gets mail; the rest get the
    // same answer and an attempt no code opens.
    let owner = crate::contacts::email_owner(app, ws, &address).await?.and_then(|c| ContactId::parse(&c));
    let from = crate::emails::domains::verified_names(app, ws).await?.first().map(|d| format!("no-reply@{d}"));
    if let (Some(ct), Some(from)) = (owner, from) {
        // The link opens the pages' sign-in (the token in the query: a page that asks before
        // it spends it, so a mail scanner's fetch spends nothing), or the workspace's own page
        // (in the fragment, which no server sees).
        let (contact, _) = contacts::load(app, ws, &ct).await?;
        let (contact, token, _, _) = create_link(app, ws, contact, None, Delivery::Email, "portal:sign-in", auth.tx(&[])?).await?;
        use rand::RngExt;
        let code = format!("{:06}", rand::rng().random_range(0..1_000_000u32));
        let url = match &return_url {
            Some(u) => format!("{}#portal_token={token}", u.split('#').next().unwrap_or_default()),
            None => format!("{}/p/{slug}/link?token={token}", pages.unwrap_or_default()),
        };
        let (subject, text) = sign_in_mail(lang, &w.name, &secret_placeholder("link"), &secret_placeholder("code"));
        let email = mail_to(app, ws, &contact, &from, &subject, text, &[("link", &url), ("code", &code)]).await?;
        item.insert("contact_id".into(), s(ct.to_string()));
        item.insert("gsi1pk".into(), s(keys::PORTAL_SIGN_IN.gsi1_pk((ws, &ct))));
        item.insert("gsi1sk".into(), s(keys::PORTAL_SIGN_IN.gsi1_sk(&shared::ids::new_id("psign"))));
        item.insert("code_hash".into(), s(code_hash(&pk, &code)));
        item.insert("link_hash".into(), s(hash_api_key(&token)));
        app.db.put(item).apply().await?;
        crate::emails::compose::send(auth, app, ws, &email, now).await?;
    } else {
        app.db.put(item).apply().await?;
    }
    Ok(SignIn { object: "portal_sign_in".into(), attempt, expires_at: time(expires) })
}

/// The code from the customer's inbox opens the sign-in it was sent for, once: a guess counts
/// before it is compared, the right one deletes the attempt (a conditional delete only one
/// request makes) and spends its link. Wrong, used up, expired and unknown all answer alike.
/// `within`: the workspace whose pages ask.
pub async fn verify_sign_in(app: &App, attempt: &str, code: &str, within: Option<&WorkspaceId>) -> ApiResult<PortalSession> {
    let refused = || ApiError::validation("code", "the code is wrong, expired or used up; ask for a new sign-in");
    let shaped = shared::auth::is_token(attempt, SIGN_IN_PREFIX);
    let code = code.trim();
    if !shaped || code.len() != 6 || !code.bytes().all(|b| b.is_ascii_digit()) {
        return Err(refused());
    }
    let pk = sign_in_pk(attempt);
    let now = chrono::Utc::now().timestamp();
    let mut cond = "attribute_exists(pk) AND expires_at > :now AND tries < :max".to_string();
    let mut values = vec![(":one", n(1)), (":now", n(now)), (":max", n(SIGN_IN_CODE_TRIES))];
    if let Some(ws) = within {
        cond.push_str(" AND workspace_id = :ws");
        values.push((":ws", s(ws)));
    }
    let mut counted = app.db.update(&pk, keys::PORTAL_SIGN_IN.table.sk, "SET tries = tries + :one").when(&cond);
    for (k, v) in values {
        counted = counted.value(k, v);
    }
    if counted.apply().await?.is_none() {
        return Err(refused());
    }
    let spent = app
        .db
        .delete_when(pk.clone(), keys::PORTAL_SIGN_IN.table.sk, "code_hash = :h")
        .value(":h", s(code_hash(&pk, code)))
        .returning(shared::store::Returning::Old)
        .apply()
        .await?
        .ok_or_else(refused)?;
    let link = store::get_str(&spent, "link_hash").ok_or_else(refused)?;
    exchange_hash(app, link, within).await
}

/// Sign-out everywhere: every session of the contact ends (each device's cookie is dead), and
/// every link and sign-in not yet used goes with them. The lists are an index, read a moment
/// behind the table: a sign-in finished in that moment can outlive it.
pub async fn end_sessions(app: &App, ws: &WorkspaceId, contact_id: &ContactId) -> ApiResult<()> {
    for list in [keys::PORTAL_SESSIONS_OF_CONTACT, keys::PORTAL_LINKS_OF_CONTACT, keys::PORTAL_SIGN_INS_OF_CONTACT] {
        let mut after = None;
        loop {
            let out = app.db.query_page(list.query((ws, contact_id), after, 100)).await?;
            for item in &out.items {
                if let (Some(pk), Some(sk)) = (store::get_str(item, "pk"), store::get_str(item, "sk")) {
                    app.db.delete(pk, sk).await?;
                }
            }
            match out.next_after {
                Some(a) => after = Some(a),
                None => break,
            }
        }
    }
    Ok(())
}

/// End a session (logout, or the customer's own erasure): its look-up item goes.
pub async fn revoke(app: &App, session_token: &str) -> ApiResult<()> {
    app.db.delete(&shared::auth::portal_session_pk(session_token), keys::PORTAL_SESSION.table.sk).await
}

/// The customer's view of their contact.
pub async fn me(app: &App, ws: &WorkspaceId, c: Contact) -> ApiResult<Me> {
    let subject = crate::privacy::Subject::of(&c);
    let state = contacts::consents::state(app, ws, &subject).await?;
    Ok(Me { object: "portal_me".into(), marketing_consent: state.purposes.get("marketing_email").map(|p| p.granted), contact: c })
}

/// The customer changes their name or phone (never their address: that is the vouched email
/// change), and records their marketing choice: a consent event with source `portal`, the
/// wording they saw, and the session's proof. `current` is the session's contact as read.
pub async fn update_me(
    app: &App,
    ws: &WorkspaceId,
    current: (Contact, i64),
    session_token: &str,
    user_agent: Option<&str>,
    input: UpdateMe,
) -> ApiResult<Me> {
    let (old, version) = current;
    let consent = (input.marketing_consent, input.consent_text, input.consent_text_version);
    let change =
        contacts::UpdateContact { first_name: input.first_name, last_name: input.last_name, phone: input.phone, ..Default::default() };
    let mut c = old.clone();
    let mut errs = shared::validate::Errors::new();
    change.apply(&mut c, &mut errs);
    contacts::validate(&mut errs, &c);
    // The wording's limits hold whether or not a choice comes with it.
    if consent.1.as_ref().is_some_and(|t| t.chars().count() > 10_000) {
        errs.add("consent_text", "must be at most 10000 characters");
    }
    if consent.2.as_ref().is_some_and(|t| t.chars().count() > 100) {
        errs.add("consent_text_version", "must be at most 100 characters");
    }
    errs.finish()?;
    // The session's proof before any write: a session ended meanwhile changes nothing.
    let proven = match consent.0 {
        Some(_) => Some(proof(app, ws, session_token, &c).await?),
        None => None,
    };
    if !contacts::changed_fields(&old, &c).is_empty() {
        c.updated_at = Timestamp::now();
        contacts::commit_update(app, ws, &old, &c, version).await?;
    }
    if let (Some(granted), text, text_version) = consent {
        let subject = crate::privacy::Subject::of(&c);
        let evidence = contacts::consents::ConsentEvidence {
            text_shown: text.unwrap_or_else(|| "Marketing emails: changed by the customer in the portal".into()),
            text_version: text_version.unwrap_or_else(|| "portal".into()),
            source: Some(contacts::consents::ConsentSource::Portal),
            ip_address: None,
            user_agent: user_agent.map(|s| s.chars().take(512).collect()),
        };
        let mut consent = evidence.consent(&subject, "marketing_email", granted)?;
        consent.proof = proven;
        contacts::consents::record(app, ws, &consent).await?;
    }
    let (c, _) = contacts::load(app, ws, &c.id).await.map_err(|_| ApiError::unauthorized("this session's contact no longer exists"))?;
    me(app, ws, c).await
}

/// One page of the emails sent to a contact, newest first (the API's list and the pages'):
/// only mail addressed to the customer (To, Cc or Bcc holds their address, current or former).
/// Mail merely linked to the contact (staff writing about them) is the workspace's, not
/// theirs. A page may hold fewer than `limit`; the cursor goes on.
pub async fn emails_of(
    app: &App,
    ws: &WorkspaceId,
    c: &Contact,
    after: Option<String>,
    limit: usize,
) -> ApiResult<(Vec<PortalEmail>, Option<String>)> {
    #[derive(serde::Deserialize)]
    struct Row {
        #[serde(flatten)]
        email: PortalEmail,
        #[serde(default)]
        to: Vec<String>,
        #[serde(default)]
        cc: Vec<String>,
        #[serde(default)]
        bcc: Vec<String>,
    }
    let spec = keys::EMAILS_OF_CONTACT.query((ws, &c.id), after, limit).descending();
    let (rows, next) = shared::request::keyed_page::<Row>(app, spec).await?;
    let mut own: Vec<String> = shared::validate::normalise_email(&c.email).into_iter().collect();
    let to_them = |r: &Row, own: &[String]| {
        r.to.iter().chain(&r.cc).chain(&r.bcc).filter_map(|a| shared::validate::normalise_email(a)).any(|a| own.contains(&a))
    };
    // Former addresses only when the current one does not account for the page (one Query).
    if rows.iter().any(|r| !to_them(r, &own)) {
        own.extend(
            contacts::formers(app, ws, &c.id)
                .await?
                .into_iter()
                .filter(|f| f.field == "email")
                .filter_map(|f| shared::validate::normalise_email(&f.value)),
        );
    }
    let mut list: Vec<PortalEmail> = rows.into_iter().filter(|r| to_them(r, &own)).map(|r| r.email).collect();
    list.sort_by(|a, b| b.id.cmp(&a.id));
    Ok((list, next))
}
