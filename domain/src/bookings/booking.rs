//! What the booking routes do: availability, holds, bookings and their state changes. Each
//! validates its input, checks the slot, and changes the booking through `ops` (cells, the
//! booking, its event in one transaction); notifications go out through `notify`.

use super::notify::Notify;
use super::slots;
use super::store::{self, StoredBooking};
use super::{
    Availability, Booking, BookingId, BookingStatus, CancelledBy, CreateBooking, CreateHold, DEFAULT_HOLD_SECS, Hold, Resource, Service,
    ServiceId, notify, schedule,
};
use crate::contacts::ContactId;
use crate::ids::ResourceId;
use shared::auth::WorkspaceId;
use shared::events::EventType;
use shared::ids::Timestamp;
use shared::validate::Errors;
use shared::{ApiError, ApiResult, App};

/// Free start times per local date of `timezone` (default UTC) between `from` and `to`
/// (instants, or dates: the whole day in `timezone`, or without one in the zone of the
/// service's first resource). At most `schedule::MAX_RANGE_DAYS` days.
pub async fn availability(
    app: &App,
    ws: &WorkspaceId,
    service_id: Option<&ServiceId>,
    from: &str,
    to: &str,
    timezone: Option<&str>,
) -> ApiResult<Availability> {
    let sid = service_id.ok_or_else(|| ApiError::validation("service_id", "is required"))?;
    let asked = timezone
        .map(|t| super::tz(t).ok_or_else(|| ApiError::validation("timezone", "must be an IANA time zone such as Europe/Oslo")))
        .transpose()?;
    let (svc, _) =
        store::load_service(app, ws, sid).await?.ok_or_else(|| ApiError::validation("service_id", "no such service in this workspace"))?;
    let resources = store::resources_of(app, ws, &svc).await?;
    // Dates are days of the asked zone, or of where the service happens.
    let days_in = asked.clone().or_else(|| resources.first().and_then(|r| super::tz(&r.timezone))).unwrap_or_else(shared::zone::Zone::utc);
    let (from, to) = (slots::parse_bound("from", from, &days_in, false)?, slots::parse_bound("to", to, &days_in, true)?);
    if to <= from {
        return Err(ApiError::validation("to", "must be after from"));
    }
    if to - from > chrono::Duration::days(schedule::MAX_RANGE_DAYS) {
        return Err(ApiError::validation("to", format!("at most {} days after from", schedule::MAX_RANGE_DAYS)));
    }
    let out = asked.unwrap_or_else(shared::zone::Zone::utc);
    Ok(Availability(store::availability(app, ws, &svc, &resources, slots::Window { from, to, out, now: chrono::Utc::now() }).await?))
}

/// The service a slot request names: a 400 on `service_id` when the workspace has none.
async fn service(app: &App, ws: &WorkspaceId, sid: &ServiceId) -> ApiResult<Service> {
    Ok(store::load_service(app, ws, sid).await?.ok_or_else(|| ApiError::validation("service_id", "no such service in this workspace"))?.0)
}

/// The resources of `svc` that may take the slot (`resource_id`'s, or any), and the cells of
/// the first of them, read concurrently with the resources.
async fn candidates(
    app: &App,
    ws: &WorkspaceId,
    svc: &Service,
    start: chrono::DateTime<chrono::Utc>,
    resource_id: Option<&ResourceId>,
) -> ApiResult<(Vec<Resource>, Option<store::Prefetched>)> {
    let first = match resource_id {
        Some(r) => svc.resource_ids.iter().find(|x| *x == r),
        None => svc.resource_ids.first(),
    };
    let cells = async {
        match first {
            Some(r) => store::prefetch(app, ws, svc, r, start).await.map(Some),
            None => Ok(None),
        }
    };
    let (mut resources, prefetched) = tokio::try_join!(store::resources_of(app, ws, svc), cells)?;
    if let Some(r) = resource_id {
        resources.retain(|x| x.id == *r);
        if resources.is_empty() {
            return Err(ApiError::validation("resource_id", "is not a resource of this service"));
        }
    }
    let now = chrono::Utc::now();
    let mut first_err = None;
    resources.retain(|r| match slots::check_slot(svc, r, start, now) {
        Ok(()) => true,
        Err(e) => {
            first_err.get_or_insert(e);
            false
        }
    });
    if resources.is_empty() {
        return Err(first_err.unwrap_or_else(|| ApiError::validation("service_id", "the service has no resources")));
    }
    Ok((resources, prefetched))
}

/// The service, the start and the candidates of a slot one request names (a hold, a move).
async fn slot_for(
    app: &App,
    ws: &WorkspaceId,
    service_id: &ServiceId,
    start: Timestamp,
    resource_id: Option<&ResourceId>,
) -> ApiResult<(Service, chrono::DateTime<chrono::Utc>, Vec<Resource>, Option<store::Prefetched>)> {
    let start = start.time();
    let svc = service(app, ws, service_id).await?;
    let (resources, prefetched) = candidates(app, ws, &svc, start, resource_id).await?;
    Ok((svc, start, resources, prefetched))
}

/// Reserve a slot for `hold_seconds` (default `DEFAULT_HOLD_SECS`).
pub async fn create_hold(app: &App, ws: &WorkspaceId, input: CreateHold) -> ApiResult<Hold> {
    let secs = input.hold_seconds.unwrap_or(DEFAULT_HOLD_SECS);
    if !(5..=1800).contains(&secs) {
        return Err(ApiError::validation("hold_seconds", "must be 5 to 1800"));
    }
    let (svc, start, resources, prefetched) = slot_for(app, ws, &input.service_id, input.start, input.resource_id.as_ref()).await?;
    store::hold(app, ws, store::Request { svc: &svc, candidates: &resources, start, hold: None, prefetched }, secs).await
}

/// Book a slot: on `resource_id`, the hold's resource, or the first free resource of the
/// service; a confirmed booking's confirmation goes out (the effect `SendEmail`). Three
/// rounds of reads and writes: the service, hold and contact together; the resources and the
/// first one's cells together; one transaction (with the contact, when it is new).
pub async fn create(send: &Notify<'_>, app: &App, ws: &WorkspaceId, input: CreateBooking) -> ApiResult<Booking> {
    let mut errs = Errors::new();
    if let Some(n) = &input.notes {
        errs.text("notes", n, 0, 2000);
    }
    errs.metadata("metadata", &input.metadata);
    errs.finish()?;
    let (sid, start) = (&input.service_id, input.start.time());
    let party = store::PartyInput::parse(input.contact_id.clone(), input.contact.as_ref())?;
    let hold = async {
        match &input.hold_id {
            Some(h) => store::load_hold(app, ws, h)
                .await?
                .ok_or_else(|| ApiError::validation("hold_id", "no such hold, or it has expired"))
                .map(Some),
            None => Ok(None),
        }
    };
    // Errors in a fixed order, whichever read ends first.
    let (svc, hold, party) = tokio::join!(service(app, ws, sid), hold, party.resolve(app, ws));
    let (svc, hold, party) = (svc?, hold?, party?);
    if let Some(h) = &hold
        && (h.service_id != *sid || h.start.time() != start)
    {
        return Err(ApiError::validation("hold_id", "holds another service or start"));
    }
    let resource = hold.as_ref().map(|h| h.resource_id.clone()).or(input.resource_id.clone());
    let (resources, prefetched) = candidates(app, ws, &svc, start, resource.as_ref()).await?;
    let mut b = Booking::new(&svc, party.id().clone(), start, Timestamp::now());
    (b.notes, b.metadata) = (input.notes, input.metadata);
    let b = Booking { reminder_email_id: notify::reminder_id(&svc, &b), ..b };
    let req = store::Request { svc: &svc, candidates: &resources, start, hold: hold.as_ref(), prefetched };
    let b = store::book(app, ws, req, b, party).await?;
    if b.status == BookingStatus::Confirmed
        && let Some(res) = resources.iter().find(|r| r.id == b.resource_id)
    {
        notify::confirmed(send, app, ws, &svc, res, &b).await;
    }
    Ok(b)
}

/// The booking, or 404.
pub async fn load(app: &App, ws: &WorkspaceId, id: &BookingId) -> ApiResult<StoredBooking> {
    store::load_booking(app, ws, id).await?.ok_or_else(|| ApiError::not_found("booking"))
}

fn illegal(b: &Booking, action: &str) -> ApiError {
    ApiError::conflict(format!("a {} booking cannot be {action}", b.status.as_str()))
}

/// pending -> confirmed: the confirmation goes out and the reminder is scheduled.
pub async fn confirm(send: &Notify<'_>, app: &App, ws: &WorkspaceId, id: &BookingId) -> ApiResult<Booking> {
    let sb = load(app, ws, id).await?;
    if sb.booking.status != BookingStatus::Pending {
        return Err(illegal(&sb.booking, "confirmed"));
    }
    let svc = store::load_service(app, ws, &sb.booking.service_id).await?.map(|s| s.0);
    let mut next = sb.booking.clone();
    next.status = BookingStatus::Confirmed;
    next.updated_at = Timestamp::now();
    next.reminder_email_id = svc.as_ref().and_then(|s| notify::reminder_id(s, &next));
    let next = store::transition(app, ws, &sb, next, EventType::BookingConfirmed, false).await?;
    if let (Some(svc), Some((res, _))) = (svc, store::load_resource(app, ws, &next.resource_id).await?) {
        notify::confirmed(send, app, ws, &svc, &res, &next).await;
    }
    Ok(next)
}

/// What happened to a confirmed booking: it took place, or the customer did not come.
#[derive(Clone, Copy)]
pub enum Outcome {
    Completed,
    NoShow,
}

/// confirmed -> completed or no_show.
pub async fn close(app: &App, ws: &WorkspaceId, id: &BookingId, outcome: Outcome) -> ApiResult<Booking> {
    let (to, action, event) = match outcome {
        Outcome::Completed => (BookingStatus::Completed, "completed", EventType::BookingCompleted),
        Outcome::NoShow => (BookingStatus::NoShow, "marked no-show", EventType::BookingNoShow),
    };
    let sb = load(app, ws, id).await?;
    if sb.booking.status != BookingStatus::Confirmed {
        return Err(illegal(&sb.booking, action));
    }
    let mut next = sb.booking.clone();
    next.status = to;
    next.updated_at = Timestamp::now();
    store::transition(app, ws, &sb, next, event, false).await
}

/// Who cancels: staff (recording it as theirs or, acting for the customer, as the customer's,
/// which keeps the customer's cancellation window), or the customer of a portal session, who
/// reaches only their own bookings.
pub enum Canceller<'a> {
    Staff { recorded_as: CancelledBy },
    Customer(&'a ContactId),
}

/// Cancel a pending or confirmed booking; a customer's other bookings are 404, as if they did
/// not exist. With `send` (the caller may send email), the customer gets the cancellation
/// notice with its invite's cancellation.
pub async fn cancel(
    send: Option<&Notify<'_>>,
    app: &App,
    ws: &WorkspaceId,
    id: &BookingId,
    by: Canceller<'_>,
    reason: Option<String>,
) -> ApiResult<Booking> {
    if let Some(r) = &reason {
        let mut errs = Errors::new();
        errs.text("reason", r, 0, 500);
        errs.finish()?;
    }
    let sb = store::load_booking(app, ws, id)
        .await?
        .filter(|b| match by {
            Canceller::Staff { .. } => true,
            Canceller::Customer(c) => b.booking.contact_id == c.as_str(),
        })
        .ok_or_else(|| ApiError::not_found("booking"))?;
    let recorded_as = match by {
        Canceller::Staff { recorded_as } => recorded_as,
        Canceller::Customer(_) => CancelledBy::Customer,
    };
    let was_confirmed = sb.booking.status == BookingStatus::Confirmed;
    let done = store::cancel(app, ws, &sb, recorded_as, reason).await?;
    if let Some(send) = send {
        // The service and resource it was of, for the notice (gone: nothing to say).
        let found = futures_util::future::try_join(
            store::load_service(app, ws, &done.service_id),
            store::load_resource(app, ws, &done.resource_id),
        );
        match found.await {
            Ok((Some((svc, _)), Some((res, _)))) => notify::cancelled(send, app, ws, &svc, &res, &done, was_confirmed).await,
            Ok(_) => {}
            Err(e) => tracing::warn!(booking_id = %done.id, error = %e, "booking cancellation notice not sent"),
        }
    }
    Ok(done)
}

/// A start a form names (the portal's pages): an RFC 3339 time, or the field's error.
pub fn form_start(v: Option<&str>) -> ApiResult<Timestamp> {
    slots::parse_time("start", v.unwrap_or_default()).map(Timestamp::from)
}

/// Move a pending or confirmed booking to another slot of its resource; the old reminder is
/// withdrawn and the new one scheduled (the effect `SendEmail`). A customer moves only their own
/// bookings (others are 404), and not later than the service's cancellation window before it.
pub async fn reschedule(
    send: &Notify<'_>,
    app: &App,
    ws: &WorkspaceId,
    id: &BookingId,
    by: Canceller<'_>,
    start: Timestamp,
) -> ApiResult<Booking> {
    let sb = load(app, ws, id).await?;
    if let Canceller::Customer(c) = by
        && sb.booking.contact_id != c.as_str()
    {
        return Err(ApiError::not_found("booking"));
    }
    if !sb.booking.open() {
        return Err(illegal(&sb.booking, "rescheduled"));
    }
    let (svc, start, resources, prefetched) = slot_for(app, ws, &sb.booking.service_id, start, Some(&sb.booking.resource_id)).await?;
    if matches!(by, Canceller::Customer(_)) {
        sb.booking.customer_may("move", &svc, chrono::Utc::now())?;
    }
    let new = store::reschedule(app, ws, &svc, &resources[0], &sb, start, prefetched).await?;
    notify::cancel_reminder(app, ws, &sb.booking).await;
    notify::scheduled(send, app, ws, &svc, &resources[0], &new).await;
    notify::moved(send, app, ws, &svc, &resources[0], &new).await;
    Ok(new)
}

/// The booking a manage link's claims open (`manage`; the pages checked the token): the one it
/// names, or the one it was moved to, while it is still the link's customer's. 404 otherwise.
pub async fn by_link(app: &App, ws: &WorkspaceId, link: &shared::links::Claims) -> ApiResult<StoredBooking> {
    let gone = || ApiError::not_found("booking");
    let contact = ContactId::parse(&link.contact).ok_or_else(gone)?;
    let first = BookingId::parse(&link.object).ok_or_else(gone)?;
    // The customer still exists and is not being erased: a deleted contact's link ends as its
    // portal sessions do, and an erasure that began stops the link's moves and cancellations.
    let customer =
        async { crate::contacts::load(app, ws, &contact).await.map_err(|e| if e.status().as_u16() == 404 { gone() } else { e }) };
    let ((c, _), mut sb) = tokio::try_join!(customer, store::load_booking(app, ws, &first))?;
    let tomb = crate::privacy::tombstone_sk(app, ws, &c.email).await?;
    if app.db.get(&shared::store::ws_pk(ws), &tomb).await?.is_some() {
        return Err(gone());
    }
    // A chain of moves is followed this far.
    for _ in 0..10 {
        let found = sb.filter(|b| b.booking.contact_id == link.contact.as_str()).ok_or_else(gone)?;
        match &found.booking.rescheduled_to {
            Some(next) => sb = store::load_booking(app, ws, next).await?,
            None => return Ok(found),
        }
    }
    Err(gone())
}
