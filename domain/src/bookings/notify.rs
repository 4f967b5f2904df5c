//! Booking emails through the emails area: a confirmation when a booking is confirmed, a notice
//! when it is moved or cancelled (each with its calendar invite, `invite`), and a reminder
//! scheduled before its start (its id is chosen before the booking is written, so the booking
//! names it and cancelling the booking cancels it). The confirmation setting of the service's
//! notifications turns the confirmation and the two notices on or off together. Sending is best
//! effort after the booking commits: a failure is logged, the booking stands. Each carries the
//! booking's manage link (`manage`), sealed with the email, when the pages have an address.

use super::invite::{self, Method, Party};
use super::{Booking, BookingStatus, Resource, Service};
use crate::effects::{self, Authority};
use crate::emails::compose::{self, SendEmail};
use crate::emails::secret_placeholder;
use shared::auth::WorkspaceId;
use shared::ids::Timestamp;

use crate::ids::EmailId;
use chrono::{DateTime, Duration, Utc};
use shared::store::ws_pk;
use shared::{ApiError, ApiResult, App};

/// How a booking's customer hears of it: the proof that lets mail go out, and where the portal's
/// pages are (the request's pages origin) for the manage link.
pub struct Notify<'a> {
    pub send: &'a Authority<effects::SendEmail>,
    pub pages: Option<&'a str>,
}

/// The manage link's name in a booking email: the placeholder its text holds, and the template
/// variable a workspace's own booking templates may use (`{{manage_url}}`).
pub const MANAGE_URL: &str = "manage_url";

/// The reminder's id for a confirmed booking whose reminder is still in the future.
pub fn reminder_id(svc: &Service, b: &Booking) -> Option<EmailId> {
    let n = svc.notifications.as_ref()?;
    let before = n.reminder_minutes_before?;
    let start = b.start.time();
    (b.status == BookingStatus::Confirmed && start - Duration::minutes(before) > Utc::now() + Duration::minutes(1)).then(EmailId::generate)
}

/// After a booking became confirmed: its confirmation now and its reminder at its time.
pub async fn confirmed(n: &Notify<'_>, app: &App, ws: &WorkspaceId, svc: &Service, res: &Resource, b: &Booking) {
    notice(n, app, ws, svc, res, b, "booking_confirmation", Some(Method::Request)).await;
    scheduled(n, app, ws, svc, res, b).await;
}

/// After a booking was moved (`new`, the booking it became): the notice with the moved invite.
pub async fn moved(n: &Notify<'_>, app: &App, ws: &WorkspaceId, svc: &Service, res: &Resource, new: &Booking) {
    notice(n, app, ws, svc, res, new, "booking_rescheduled", Some(Method::Request)).await;
}

/// After a booking was cancelled: the notice with the invite's cancellation.
/// `was_confirmed`: only a booking that was confirmed had its invite sent, so only its notice
/// cancels one.
pub async fn cancelled(n: &Notify<'_>, app: &App, ws: &WorkspaceId, svc: &Service, res: &Resource, b: &Booking, was_confirmed: bool) {
    notice(n, app, ws, svc, res, b, "booking_cancelled", was_confirmed.then_some(Method::Cancel)).await;
}

/// One notice (`slug`: its template) when the service's confirmations are on; a failure is
/// logged, the booking stands.
#[allow(clippy::too_many_arguments)]
async fn notice(
    n: &Notify<'_>,
    app: &App,
    ws: &WorkspaceId,
    svc: &Service,
    res: &Resource,
    b: &Booking,
    slug: &str,
    invite: Option<Method>,
) {
    if svc.notifications.as_ref().is_some_and(|n| n.confirmation)
        && let Err(e) = Box::pin(send(n, app, ws, svc, res, b, slug, None, invite)).await
    {
        tracing::warn!(booking_id = %b.id, notice = slug, error = %e, "booking notice not sent");
    }
}

/// Schedule the booking's reminder (its id is already on the booking).
pub async fn scheduled(n: &Notify<'_>, app: &App, ws: &WorkspaceId, svc: &Service, res: &Resource, b: &Booking) {
    let (Some(settings), Some(id)) = (&svc.notifications, &b.reminder_email_id) else { return };
    let Some(before) = settings.reminder_minutes_before else { return };
    let at = b.start.time() - Duration::minutes(before);
    // Boxed: the email pipeline's future is large, and this runs inside a request's.
    if let Err(e) = Box::pin(send(n, app, ws, svc, res, b, "booking_reminder", Some((id, at)), None)).await {
        tracing::warn!(booking_id = %b.id, error = %e, "booking reminder not scheduled");
    }
}

/// Cancel a booking's reminder, if it has one that has not left.
pub async fn cancel_reminder(app: &App, ws: &WorkspaceId, b: &Booking) {
    if let Some(id) = &b.reminder_email_id
        && let Err(e) = Box::pin(compose::cancel(app, ws, id)).await
    {
        tracing::info!(booking_id = %b.id, email_id = %id, error = %e, "reminder not cancelled");
    }
}

#[allow(clippy::too_many_arguments)]
async fn send(
    n: &Notify<'_>,
    app: &App,
    ws: &WorkspaceId,
    svc: &Service,
    res: &Resource,
    b: &Booking,
    slug: &str,
    reminder: Option<(&EmailId, DateTime<Utc>)>,
    invite: Option<Method>,
) -> ApiResult<()> {
    let notifications = svc.notifications.as_ref().ok_or_else(|| ApiError::internal("no notifications"))?;
    let cid =
        Some(b.contact_id.clone()).filter(|c| !c.is_erased()).ok_or_else(|| ApiError::internal("an erased booking has no contact"))?;
    let has_template = async { Ok(app.db.get(&ws_pk(ws), &crate::keys::EMAIL_TEMPLATE.sk(slug)).await?.is_some()) };
    let ((contact, _), has_template, pages) =
        tokio::try_join!(crate::contacts::load(app, ws, &cid), has_template, super::manage::Pages::of(app, ws, n.pages))?;
    let secret = app.platform_secret().await?;
    let manage_url = pages.and_then(|p| p.url(secret, ws, b));
    // Where the link goes in the text: a placeholder, put back by the sender alone.
    let link = secret_placeholder(MANAGE_URL);
    let tz = super::tz(&res.timezone).unwrap_or_else(shared::zone::Zone::utc);
    let local = |t: &Timestamp| t.with_timezone(&tz).format("%A %e %B %Y, %H:%M %Z").to_string();
    let (start, end) = (local(&b.start), local(&b.end));
    let mut body = serde_json::json!({
        "from": notifications.from,
        "to": [contact.email],
        "contact_id": b.contact_id,
        "transactional": true,
        "tags": ["booking"],
        "metadata": {"booking_id": b.id},
    });
    if has_template {
        body["template_slug"] = slug.into();
        body["variables"] = serde_json::json!({"service": svc.name, "start": start, "end": end, "resource": res.name, "booking_id": b.id});
        // Empty when the pages have no address, so a template that names it still renders.
        body["variables"]["manage_url"] = if manage_url.is_some() { link.clone() } else { String::new() }.into();
    } else {
        let (subject, text) = match slug {
            "booking_reminder" => ("Reminder", "This is a reminder of your booking"),
            "booking_rescheduled" => ("Moved", "Your booking is moved"),
            "booking_cancelled" => ("Cancelled", "Your booking is cancelled"),
            _ => ("Booked", "Your booking is confirmed"),
        };
        body["subject"] = format!("{subject}: {} on {start}", svc.name).into();
        let manage = if manage_url.is_some() { format!("\n\nTo cancel or move it: {link}\n") } else { String::new() };
        body["text"] = format!("{text}: {} with {}, {start} to {end}.{manage}", svc.name, res.name).into();
    }
    if let Some((_, at)) = reminder {
        body["scheduled_at"] = shared::ids::format_time(at).into();
    }
    let input: SendEmail = serde_json::from_value(body).map_err(|e| ApiError::internal(e))?;
    let now = Utc::now();
    let mut email = Box::pin(compose::build_one(app, ws, input, now)).await?;
    if let Some((id, _)) = reminder {
        // A seal is bound to the email's id: booking mail is transactional and carries none yet.
        if email.sealed_secrets.is_some() {
            return Err(ApiError::internal("a reminder with sealed content cannot take its id"));
        }
        email.id = id.clone();
    }
    if let Some(url) = &manage_url {
        email.carry_secrets(secret, &[(MANAGE_URL, url)])?;
    }
    if let Some(method) = invite {
        let (name, address) =
            shared::validate::parse_mailbox(&notifications.from).ok_or_else(|| ApiError::internal("the notifications' sender"))?;
        let attendee_name =
            [contact.first_name.as_deref(), contact.last_name.as_deref()].into_iter().flatten().collect::<Vec<_>>().join(" ");
        let organizer = Party { name: name.as_deref(), address: &address };
        let attendee = Party { name: Some(&attendee_name), address: &contact.email };
        // A booking awaiting confirmation is in the calendar as tentative.
        let tentative = b.status == BookingStatus::Pending;
        email.calendar = Some(invite::invite(ws, b, svc, res, &organizer, &attendee, method, tentative));
    }
    compose::send(n.send, app, ws, &email, now.timestamp()).await
}
