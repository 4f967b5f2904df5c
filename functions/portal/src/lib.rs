//! The customer portal: an API credential mints a one-time login link for a contact
//! (`POST /portal/sessions`); the customer exchanges it once for a session
//! (`POST /portal/sessions/exchange`, no credential) and, with `X-Portal-Session` only, sees and
//! changes what concerns them: their profile and marketing consent, their bookings (cancel
//! within the service's window), the emails sent to them, an export of their data, their
//! erasure. A session reaches its own contact only; every other id is 404. Its routes have
//! their own rate class, `portal`, per session.

use domain::bookings;
use domain::bookings::booking::Canceller;
use domain::bookings::notify::Notify;
use domain::bookings::{Booking, BookingId};
use domain::contacts::{self, Contact, ContactId};
use domain::effects::{self as fx, Effect as _};
use domain::gdpr::ExportId;
use domain::gdpr::export::{self, ExportJob};
use domain::portal::{self, Me, PortalLink, PortalSession, UpdateMe};
use serde::Deserialize;
use shared::{ApiError, ApiResult, App, Reply, Req, WsReq};
use utoipa::ToSchema;

pub mod pages;

shared::area! {
    tag = "portal", description = "The customer portal: login links, sessions, and a customer's own data",
    operations = [
        create_session [effects = &[fx::SendEmail::INFO, fx::OpenPortalSession::INFO]],
        exchange_session [auth = Auth::Public, class = Class::Portal],
        sign_in [auth = Auth::Public, class = Class::PortalSignIn, needs_workspace = false, effects = &[fx::EmailSignInLink::INFO]],
        verify_sign_in [auth = Auth::Public, class = Class::PortalSignIn, needs_workspace = false],
        get_me [auth = Auth::PortalSession, class = Class::Portal],
        update_me [auth = Auth::PortalSession, class = Class::Portal],
        my_bookings [auth = Auth::PortalSession, class = Class::Portal],
        cancel_my_booking [auth = Auth::PortalSession, class = Class::Portal, effects = &[fx::SendEmail::INFO]],
        my_booking_slots [auth = Auth::PortalSession, class = Class::Portal],
        reschedule_my_booking [auth = Auth::PortalSession, class = Class::Portal, effects = &[fx::SendEmail::INFO]],
        my_emails [auth = Auth::PortalSession, class = Class::Portal],
        export_me [auth = Auth::PortalSession, class = Class::GdprExport, effects = &[fx::ExportSubject::INFO]],
        my_export [auth = Auth::PortalSession, class = Class::Portal],
        erasure_code [auth = Auth::PortalSession, class = Class::Portal, effects = &[fx::SendEmail::INFO]],
        erase_me [auth = Auth::PortalSession, class = Class::Portal, effects = &[fx::EraseSubject::INFO]],
        logout [auth = Auth::PortalSession, class = Class::Portal],
    ],
    schemas = [StartSignIn, portal::SignIn, portal::Lang, VerifySignIn, RescheduleMine, CreateSession, contacts::EmailChange, domain::contacts::consents::PortalProof, PortalLink, portal::Delivery, Exchange, PortalSession, Me, UpdateMe, portal::PortalEmail, CancelMine,
        portal::ErasureCode, EraseMe],
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSession {
    #[schema(value_type = domain::ids::ContactId)]
    pub contact_id: String,
    /// https, on one of the workspace's `portal_origins`; the answer's `url` is it with the
    /// token in the fragment.
    #[schema(max_length = 2048)]
    pub return_url: Option<String>,
    /// `email` (default): the link goes to the contact's address and the answer holds no
    /// token. `return`: the token comes back to the caller, for its own signed-in pages; needs
    /// the admin scope (capability `portal.sessions.return`).
    #[serde(default)]
    pub delivery: portal::Delivery,
}

/// A one-time login link for a contact, valid 15 minutes and exchanged once: emailed to the
/// contact (default), or handed to an admin caller (`delivery: return`, the token shown once).
#[utoipa::path(post, path = "/portal/sessions", tag = "portal", request_body = CreateSession,
    responses((status = 201, body = shared::openapi::Data<PortalLink>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_session(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: CreateSession = req.json()?;
    let id = ContactId::parse(&input.contact_id).ok_or_else(|| ApiError::validation("contact_id", "not a contact id (ct_...)"))?;
    let link = match input.delivery {
        portal::Delivery::Email => {
            portal::email_link(&req.grant.authorize_notice::<fx::SendEmail>()?, app, &req.ws, &id, input.return_url).await?
        }
        portal::Delivery::Return => portal::return_link(&req.grant, app, &req.ws, &id, input.return_url).await?,
    };
    // The token is a credential: a replay shows the link without it.
    let redacted = PortalLink { token: None, url: None, ..link.clone() };
    Ok(Reply::created(&link).replay_as(&redacted))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Exchange {
    /// The login link's token (`psl_...`).
    #[schema(max_length = 100)]
    pub token: String,
}

/// Exchange a login link's token for a session (no credential: the token is one). A used,
/// expired or unknown token gets the same 401. Event `portal.session.created`.
#[utoipa::path(post, path = "/portal/sessions/exchange", tag = "portal", request_body = Exchange, security(()),
    responses((status = 201, body = shared::openapi::Data<PortalSession>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn exchange_session(app: &App, req: Req) -> ApiResult<Reply> {
    let input: Exchange = req.json()?;
    Ok(Reply::created(&portal::exchange(app, &input.token).await?))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartSignIn {
    /// The workspace's slug.
    #[schema(max_length = 48)]
    pub workspace: String,
    /// The address the customer typed.
    #[schema(max_length = 254)]
    pub email: String,
    /// https, on one of the workspace's `portal_origins`: the emailed link goes there with the
    /// token in the fragment. Without it the link opens the portal's own pages.
    #[schema(max_length = 2048)]
    pub return_url: Option<String>,
    /// The language of the email (default `en`).
    pub lang: Option<portal::Lang>,
}

/// Start a customer's sign-in from their own address (no credential). When the address is a
/// contact's, the contact gets a one-time link and a 6-digit code from the workspace's
/// verified sending domain; every address gets the same answer in the same time. Limited per
/// network address (class `portal_sign_in`) and per address (`portal_sign_in_address`).
#[utoipa::path(post, path = "/portal/sign-in", tag = "portal", request_body = StartSignIn, security(()),
    responses((status = 202, body = shared::openapi::Data<portal::SignIn>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn sign_in(app: &App, req: Req) -> ApiResult<Reply> {
    let input: StartSignIn = req.json()?;
    let auth = req.grant.authorize::<fx::EmailSignInLink>()?;
    let lang = input.lang.unwrap_or_default();
    Ok(Reply::accepted(
        &portal::sign_in(&auth, app, &input.workspace, &input.email, input.return_url, req.pages_origin.as_deref(), lang).await?,
    ))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifySignIn {
    /// `attempt` of the `POST /portal/sign-in` answer.
    #[schema(max_length = 100)]
    pub attempt: String,
    /// The 6 digits from the email.
    #[schema(pattern = "^[0-9]{6}$")]
    pub code: String,
}

/// Exchange a sign-in's emailed code for a session (no credential). 5 guesses per sign-in; a
/// wrong, used, expired or unknown one gets the same 400.
#[utoipa::path(post, path = "/portal/sign-in/verify", tag = "portal", request_body = VerifySignIn, security(()),
    responses((status = 201, body = shared::openapi::Data<PortalSession>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn verify_sign_in(app: &App, req: Req) -> ApiResult<Reply> {
    let input: VerifySignIn = req.json()?;
    Ok(Reply::created(&portal::verify_sign_in(app, &input.attempt, &input.code, None).await?))
}

/// The session's contact id, once its contact is known to exist: a session ends on every
/// route as soon as its contact is deleted or erased.
async fn me(app: &App, req: &WsReq) -> ApiResult<ContactId> {
    contact(app, req).await?;
    session_contact(req)
}

fn session_contact(req: &Req) -> ApiResult<ContactId> {
    req.principal.portal_contact().and_then(ContactId::parse).ok_or_else(|| ApiError::unauthorized("X-Portal-Session is required"))
}

/// The session's contact, or 401 once it is gone (erased or deleted).
async fn contact(app: &App, req: &WsReq) -> ApiResult<(Contact, i64)> {
    contacts::load(app, &req.ws, &session_contact(req)?)
        .await
        .map_err(|_| ApiError::unauthorized("this session's contact no longer exists"))
}

/// The signed-in customer's own contact record.
#[utoipa::path(get, path = "/portal/me", tag = "portal", security(("portal_session" = [])),
    responses((status = 200, body = shared::openapi::Data<Me>), shared::openapi::CommonErrors))]
pub async fn get_me(app: &App, req: WsReq) -> ApiResult<Reply> {
    let (c, _) = contact(app, &req).await?;
    Ok(Reply::ok(&portal::me(app, &req.ws, c).await?))
}

/// Change the customer's name or phone, and record their marketing choice.
#[utoipa::path(patch, path = "/portal/me", tag = "portal", request_body = UpdateMe, security(("portal_session" = [])),
    responses((status = 200, body = shared::openapi::Data<Me>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn update_me(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: UpdateMe = req.json()?;
    let current = contact(app, &req).await?;
    let user_agent = req.headers.get("user-agent").and_then(|v| v.to_str().ok());
    Ok(Reply::ok(&portal::update_me(app, &req.ws, current, session_token(&req), user_agent, input).await?))
}

/// `limit` and `cursor` are the page's.
#[derive(Deserialize)]
struct BookingsQuery {
    when: Option<When>,
}

#[derive(Deserialize, ToSchema, Clone, Copy, PartialEq)]
#[serde(rename_all = "snake_case")]
enum When {
    Upcoming,
    Past,
}

/// The customer's bookings: `when=upcoming` (default, soonest first) or `when=past` (latest first).
#[utoipa::path(get, path = "/portal/me/bookings", tag = "portal", security(("portal_session" = [])),
    params(shared::openapi::PageParams, ("when" = Option<String>, Query, pattern = "^(upcoming|past)$", description = "upcoming (default) or past")),
    responses((status = 200, body = shared::openapi::ListOf<Booking>), shared::openapi::CommonErrors))]
pub async fn my_bookings(app: &App, req: WsReq) -> ApiResult<Reply> {
    let q: BookingsQuery = req.query_as()?;
    let when = q.when.unwrap_or(When::Upcoming);
    let name = if when == When::Upcoming { "upcoming" } else { "past" };
    let page = req.page(app, "portal_bookings", &[("when", Some(name))]).await?;
    let ct = me(app, &req).await?;
    let now = shared::ids::Timestamp::now().to_string();
    Ok(Reply::page(&page, bookings::of_contact(app, &req.ws, &ct, &now, when == When::Upcoming, page.after.clone(), page.limit).await?))
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct CancelMine {
    #[schema(max_length = 500)]
    pub reason: Option<String>,
}

/// Cancel one of the customer's bookings; inside the service's cancellation window it is 409.
#[utoipa::path(post, path = "/portal/me/bookings/{id}/cancel", tag = "portal", security(("portal_session" = [])),
    request_body(content = CancelMine, description = "optional"), params(("id" = String, Path, description = "bk_...")),
    responses((status = 200, body = shared::openapi::Data<Booking>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn cancel_my_booking(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: CancelMine = if req.body.is_empty() { CancelMine::default() } else { req.json()? };
    let id: BookingId = req.path_id("id")?;
    let ct = me(app, &req).await?;
    let send = req.grant.authorize_notice::<fx::SendEmail>()?;
    let send = Notify { send: &send, pages: req.pages_origin.as_deref() };
    let b = domain::bookings::booking::cancel(Some(&send), app, &req.ws, &id, Canceller::Customer(&ct), input.reason).await?;
    Ok(Reply::ok(&b))
}

#[derive(Deserialize)]
struct SlotsQuery {
    from: String,
    to: String,
    timezone: Option<String>,
}

/// Open start times to move one of the customer's bookings to (its service and resource),
/// by local date of `timezone` (default UTC), between `from` and `to` (dates or instants).
#[utoipa::path(get, path = "/portal/me/bookings/{id}/slots", tag = "portal", security(("portal_session" = [])),
    params(("id" = String, Path, description = "bk_..."),
        ("from" = String, Query, description = "a date (YYYY-MM-DD) or an RFC 3339 instant"),
        ("to" = String, Query, description = "a date (YYYY-MM-DD) or an RFC 3339 instant"),
        ("timezone" = Option<String>, Query, description = "IANA time zone of the dates and answers")),
    responses((status = 200, body = shared::openapi::Data<domain::bookings::Availability>), shared::openapi::CommonErrors))]
pub async fn my_booking_slots(app: &App, req: WsReq) -> ApiResult<Reply> {
    let q: SlotsQuery = req.query_as()?;
    let id: BookingId = req.path_id("id")?;
    let ct = me(app, &req).await?;
    let b = domain::bookings::booking::load(app, &req.ws, &id)
        .await
        .ok()
        .filter(|b| b.booking.contact_id == ct.as_str())
        .ok_or_else(|| ApiError::not_found("booking"))?;
    let mut free =
        domain::bookings::booking::availability(app, &req.ws, Some(&b.booking.service_id), &q.from, &q.to, q.timezone.as_deref()).await?;
    // Its own resource only: a move keeps the resource.
    for slots in free.0.values_mut() {
        slots.retain(|s| s.resource_ids.contains(&b.booking.resource_id));
    }
    free.0.retain(|_, v| !v.is_empty());
    Ok(Reply::ok(&free))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RescheduleMine {
    /// The new start (RFC 3339), one of `GET /portal/me/bookings/{id}/slots`.
    pub start: shared::ids::Timestamp,
}

/// Move one of the customer's bookings to an open slot of its resource; inside the service's
/// cancellation window it is 409.
#[utoipa::path(post, path = "/portal/me/bookings/{id}/reschedule", tag = "portal", security(("portal_session" = [])),
    request_body = RescheduleMine, params(("id" = String, Path, description = "bk_...")),
    responses((status = 200, body = shared::openapi::Data<Booking>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn reschedule_my_booking(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: RescheduleMine = req.json()?;
    let id: BookingId = req.path_id("id")?;
    let ct = me(app, &req).await?;
    let send = req.grant.authorize_notice::<fx::SendEmail>()?;
    let send = Notify { send: &send, pages: req.pages_origin.as_deref() };
    Ok(Reply::ok(&domain::bookings::booking::reschedule(&send, app, &req.ws, &id, Canceller::Customer(&ct), input.start).await?))
}

/// The emails sent to the customer, newest first.
#[utoipa::path(get, path = "/portal/me/emails", tag = "portal", security(("portal_session" = [])), params(shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<portal::PortalEmail>), shared::openapi::CommonErrors))]
pub async fn my_emails(app: &App, req: WsReq) -> ApiResult<Reply> {
    let page = req.page(app, "portal_emails", &[]).await?;
    let (c, _) = contact(app, &req).await?;
    Ok(Reply::page(&page, portal::emails_of(app, &req.ws, &c, page.after.clone(), page.limit).await?))
}

/// An export of everything the workspace holds about the customer (rate class `gdpr_export`);
/// follow it at `GET /portal/me/exports/{id}`.
#[utoipa::path(post, path = "/portal/me/export", tag = "portal", security(("portal_session" = [])),
    responses((status = 202, body = shared::openapi::Data<ExportJob>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn export_me(app: &App, req: WsReq) -> ApiResult<Reply> {
    let (c, _) = contact(app, &req).await?;
    let subject = domain::gdpr::subject_of(app, &req.ws, &c).await?;
    Ok(Reply::accepted(&export::start_subject(&req.grant, app, &req.ws, &subject).await?))
}

/// One of the customer's exports, with its download link once completed, for a session the
/// customer opened from their own inbox (an emailed link or a sign-in code). A session opened
/// with a link handed to the API caller (`delivery: return`) never sees the link: whoever
/// called the API is not shown the customer's data.
#[utoipa::path(get, path = "/portal/me/exports/{id}", tag = "portal", security(("portal_session" = [])),
    params(("id" = String, Path, description = "gx_...")),
    responses((status = 200, body = shared::openapi::Data<ExportJob>), shared::openapi::CommonErrors))]
pub async fn my_export(app: &App, req: WsReq) -> ApiResult<Reply> {
    let id: ExportId = req.path_id("id")?;
    let (c, _) = contact(app, &req).await?;
    let mut job = export::load(app, &req.ws, &id)
        .await?
        .filter(|j| j.subject.as_ref().and_then(|s| s.contact_id.as_deref()) == Some(c.id.as_str()))
        .ok_or_else(|| ApiError::not_found("export"))?;
    if job.download_url.is_some() && portal::proof(app, &req.ws, session_token(&req), &c).await?.delivery == "return" {
        job.download_url = None;
    }
    Ok(Reply::ok(&job))
}

/// Send the customer a code (6 digits, 15 minutes, 5 guesses) that confirms their erasure; a
/// new code replaces the last. Needs a verified sending domain.
#[utoipa::path(post, path = "/portal/me/erasure/code", tag = "portal", security(("portal_session" = [])),
    responses((status = 202, body = shared::openapi::Data<portal::ErasureCode>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn erasure_code(app: &App, req: WsReq) -> ApiResult<Reply> {
    let (c, _) = contact(app, &req).await?;
    let auth = req.grant.authorize_notice::<fx::SendEmail>()?;
    Ok(Reply::accepted(&portal::send_erasure_code(&auth, app, &req.ws, session_token(&req), &c).await?))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EraseMe {
    /// The code `POST /portal/me/erasure/code` sent to the customer's address.
    #[schema(pattern = "^[0-9]{6}$")]
    pub code: String,
}

/// Erase the customer (everything, as `POST /gdpr/erasures` does) with the code sent to their
/// address, and end the session. Answers 202 with the erasure's audit record.
#[utoipa::path(post, path = "/portal/me/erasure", tag = "portal", security(("portal_session" = [])), request_body = EraseMe,
    responses((status = 202, body = shared::openapi::Data<domain::gdpr::erasure::Erasure>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn erase_me(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: EraseMe = req.json()?;
    if input.code.len() != 6 || !input.code.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::validation("code", "the 6 digits of the emailed code"));
    }
    let (c, _) = contact(app, &req).await?;
    let e = domain::gdpr::erasure::erase_self(&req.grant, app, &req.ws, session_token(&req), &c, &input.code).await?;
    portal::revoke(app, session_token(&req)).await?;
    portal::end_sessions(app, &req.ws, &c.id).await?;
    Ok(Reply::accepted(&e))
}

fn session_token(req: &Req) -> &str {
    req.headers.get(shared::auth::PORTAL_SESSION_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default().trim()
}

/// End the session.
#[utoipa::path(post, path = "/portal/logout", tag = "portal", security(("portal_session" = [])),
    responses((status = 204, description = "the session is revoked"), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn logout(app: &App, req: Req) -> ApiResult<Reply> {
    portal::revoke(app, session_token(&req)).await?;
    Ok(Reply::no_content())
}
