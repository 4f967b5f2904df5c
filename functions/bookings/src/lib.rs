//! Bookings: resources, services, availability, holds and bookings. The rules, the cells that
//! make overlaps impossible and the slot arithmetic are `domain::bookings`.

use domain::bookings::notify::Notify;
use domain::bookings::{self, booking, list};
use domain::bookings::{
    Availability, Booking, BookingStatus, CancelBooking, CancelledBy, ContactInput, CreateBooking, CreateHold, CreateResource, Hold,
    Notifications, Price, RescheduleBooking, Resource, ResourceId, Service, ServiceId, ServiceInput, Slot, UpdateResource, schedule,
};
use domain::effects::{self as fx, Effect as _};
use serde::Deserialize;
use shared::{ApiError, ApiResult, App, Reply, WsReq};

shared::area! {
    tag = "bookings", description = "Resources, services, availability, holds and bookings that never overlap",
    operations = [
        list_resources, create_resource, get_resource, update_resource, delete_resource,
        list_services, create_service, get_service, update_service, delete_service,
        availability, create_hold,
        // A booking's notifications are emails to its contact.
        list_bookings, create_booking [effects = &[fx::SendEmail::INFO]], get_booking,
        confirm_booking [effects = &[fx::SendEmail::INFO]], cancel_booking [effects = &[fx::SendEmail::INFO]],
        reschedule_booking [effects = &[fx::SendEmail::INFO]], no_show_booking, complete_booking,
    ],
    schemas = [Resource, CreateResource, UpdateResource, schedule::Interval, schedule::Exception, Service, ServiceInput, Price,
        Booking, BookingStatus, CancelledBy, Notifications, CreateBooking, ContactInput, Hold, CreateHold, CancelBooking, RescheduleBooking, Slot, Availability],
}

async fn resource(app: &App, req: &WsReq) -> ApiResult<(Resource, i64)> {
    let id: ResourceId = req.path_id("id")?;
    bookings::load_resource(app, &req.ws, &id).await?.ok_or_else(|| ApiError::not_found("resource"))
}

async fn service(app: &App, req: &WsReq) -> ApiResult<(Service, i64)> {
    let id: ServiceId = req.path_id("id")?;
    bookings::load_service(app, &req.ws, &id).await?.ok_or_else(|| ApiError::not_found("service"))
}

// ---------- resources ----------

/// Create a bookable resource with its time zone, opening hours and capacity.
#[utoipa::path(post, path = "/bookings/resources", tag = "bookings", request_body = CreateResource,
    responses((status = 201, body = shared::openapi::Data<Resource>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_resource(app: &App, req: WsReq) -> ApiResult<Reply> {
    Ok(Reply::created(&bookings::create_resource(app, &req.ws, req.json()?).await?))
}

/// Bookable resources (people, rooms, equipment) in creation order.
#[utoipa::path(get, path = "/bookings/resources", tag = "bookings", params(shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<Resource>), shared::openapi::CommonErrors))]
pub async fn list_resources(app: &App, req: WsReq) -> ApiResult<Reply> {
    let page = req.page(app, "booking_resources", &[]).await?;
    Ok(Reply::page(&page, list::resources(app, &req.ws, page.after.clone(), page.limit).await?))
}

/// One bookable resource.
#[utoipa::path(get, path = "/bookings/resources/{id}", tag = "bookings", params(("id" = String, Path, description = "res_...")),
    responses((status = 200, body = shared::openapi::Data<Resource>), shared::openapi::CommonErrors))]
pub async fn get_resource(app: &App, req: WsReq) -> ApiResult<Reply> {
    Ok(Reply::ok(&resource(app, &req).await?.0))
}

/// Change a resource's name, hours, exceptions or capacity.
#[utoipa::path(patch, path = "/bookings/resources/{id}", tag = "bookings", request_body = UpdateResource, params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Resource>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn update_resource(app: &App, req: WsReq) -> ApiResult<Reply> {
    let patch: UpdateResource = req.json()?;
    let (r, version) = resource(app, &req).await?;
    Ok(Reply::ok(&bookings::update_resource(app, &req.ws, r, version, patch).await?))
}

/// Delete a resource; services stop offering it, and its bookings stay as they are.
#[utoipa::path(delete, path = "/bookings/resources/{id}", tag = "bookings", params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<shared::openapi::Deleted>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn delete_resource(app: &App, req: WsReq) -> ApiResult<Reply> {
    let (r, version) = resource(app, &req).await?;
    bookings::delete_resource(app, &req.ws, &r, version).await?;
    Ok(Reply::deleted(&r.id, "booking_resource"))
}

// ---------- services ----------

/// Create a service: its duration, buffers, notice, advance window and resources.
#[utoipa::path(post, path = "/bookings/services", tag = "bookings", request_body = ServiceInput,
    responses((status = 201, body = shared::openapi::Data<Service>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_service(app: &App, req: WsReq) -> ApiResult<Reply> {
    Ok(Reply::created(&bookings::create_service(app, &req.ws, req.json()?).await?))
}

/// Bookable services in creation order.
#[utoipa::path(get, path = "/bookings/services", tag = "bookings", params(shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<Service>), shared::openapi::CommonErrors))]
pub async fn list_services(app: &App, req: WsReq) -> ApiResult<Reply> {
    let page = req.page(app, "booking_services", &[]).await?;
    Ok(Reply::page(&page, list::services(app, &req.ws, page.after.clone(), page.limit).await?))
}

/// One bookable service.
#[utoipa::path(get, path = "/bookings/services/{id}", tag = "bookings", params(("id" = String, Path, description = "svc_...")),
    responses((status = 200, body = shared::openapi::Data<Service>), shared::openapi::CommonErrors))]
pub async fn get_service(app: &App, req: WsReq) -> ApiResult<Reply> {
    Ok(Reply::ok(&service(app, &req).await?.0))
}

/// Change a service's duration, buffers, windows or resources.
#[utoipa::path(patch, path = "/bookings/services/{id}", tag = "bookings", request_body = ServiceInput, params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Service>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn update_service(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: ServiceInput = req.json()?;
    let (svc, version) = service(app, &req).await?;
    Ok(Reply::ok(&bookings::update_service(app, &req.ws, svc, version, input).await?))
}

/// Delete a service; existing bookings keep their copy of it.
#[utoipa::path(delete, path = "/bookings/services/{id}", tag = "bookings", params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<shared::openapi::Deleted>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn delete_service(app: &App, req: WsReq) -> ApiResult<Reply> {
    let (svc, version) = service(app, &req).await?;
    bookings::delete_service(app, &req.ws, &svc, version).await?;
    Ok(Reply::deleted(&svc.id, "booking_service"))
}

// ---------- availability and holds ----------

#[derive(Deserialize)]
struct AvailabilityQuery {
    service_id: ServiceId,
    from: String,
    to: String,
    timezone: Option<String>,
}

/// Free start times per local date of `timezone` (default UTC), from opening hours,
/// exceptions, buffers, notice and advance limits, bookings and live holds. At most 31 days.
/// `from` and `to` are instants or dates: a date is the whole day in `timezone` (or, without
/// one, in the zone of the service's first resource), so `from=2027-03-29&to=2027-03-29` is that day.
#[utoipa::path(get, path = "/bookings/availability", tag = "bookings",
    params(("service_id" = domain::ids::ServiceId, Query),
        ("from" = String, Query, description = "An RFC 3339 instant, or a date (YYYY-MM-DD): from the start of that day", example = "2027-03-29"),
        ("to" = String, Query, description = "An RFC 3339 instant, or a date (YYYY-MM-DD): to the end of that day", example = "2027-03-29"),
        ("timezone" = Option<String>, Query, example = "Europe/Oslo")),
    responses((status = 200, body = shared::openapi::Data<Availability>), shared::openapi::CommonErrors))]
pub async fn availability(app: &App, req: WsReq) -> ApiResult<Reply> {
    let q: AvailabilityQuery = req.query_as()?;
    Ok(Reply::ok(&booking::availability(app, &req.ws, Some(&q.service_id), &q.from, &q.to, q.timezone.as_deref()).await?))
}

/// Reserve a slot (5 minutes unless `hold_seconds` says otherwise); `POST /bookings` with
/// `hold_id` converts it. An expired hold
/// frees the slot at once (its time is in the condition, not left to TTL deletion).
#[utoipa::path(post, path = "/bookings/holds", tag = "bookings", request_body = CreateHold,
    responses((status = 201, body = shared::openapi::Data<Hold>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_hold(app: &App, req: WsReq) -> ApiResult<Reply> {
    Ok(Reply::created(&booking::create_hold(app, &req.ws, req.json()?).await?))
}

// ---------- bookings ----------

/// Book a slot: on `resource_id`, the hold's resource, or the first free resource of the
/// service. Two bookings never overlap on a resource beyond its capacity: the loser of a race
/// gets 409 naming the slot.
#[utoipa::path(post, path = "/bookings", tag = "bookings", request_body = CreateBooking,
    responses((status = 201, body = shared::openapi::Data<Booking>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_booking(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: CreateBooking = req.json()?;
    let send = req.grant.authorize_notice::<fx::SendEmail>()?;
    let send = Notify { send: &send, pages: req.pages_origin.as_deref() };
    Ok(Reply::created(&booking::create(&send, app, &req.ws, input).await?))
}

/// Bookings, newest first (`order=oldest` for creation order, `order=soonest` by start time),
/// filtered by `status` (an index), `contact_id`, `resource_id` and the start time (`from`
/// inclusive, `to` exclusive). By start time, the start index gives the order and the other
/// filters apply within each page (a page can be short; follow `next_cursor`).
#[utoipa::path(get, path = "/bookings", tag = "bookings",
    params(shared::openapi::PageParams, ("status" = Option<BookingStatus>, Query),
        ("contact_id" = Option<domain::ids::ContactId>, Query),
        ("resource_id" = Option<domain::ids::ResourceId>, Query),
        ("from" = Option<String>, Query, format = DateTime), ("to" = Option<String>, Query, format = DateTime),
        ("order" = Option<String>, Query, pattern = "^(newest|oldest|soonest)$")),
    responses((status = 200, body = shared::openapi::ListOf<Booking>), shared::openapi::CommonErrors))]
pub async fn list_bookings(app: &App, req: WsReq) -> ApiResult<Reply> {
    let f = req.query_as::<list::ListBookings>()?.check()?;
    let bound = f.bound();
    let filters: Vec<(&str, Option<&str>)> = bound.iter().map(|(k, v)| (*k, v.as_deref())).collect();
    let page = req.page(app, "bookings", &filters).await?;
    Ok(Reply::page(&page, list::list(app, &req.ws, &f, page.after.clone(), page.limit).await?))
}

/// One booking, with its status history fields.
#[utoipa::path(get, path = "/bookings/{id}", tag = "bookings", params(("id" = String, Path, description = "bk_...")),
    responses((status = 200, body = shared::openapi::Data<Booking>), shared::openapi::CommonErrors))]
pub async fn get_booking(app: &App, req: WsReq) -> ApiResult<Reply> {
    Ok(Reply::ok(&booking::load(app, &req.ws, &req.path_id("id")?).await?.booking))
}

/// pending -> confirmed (sends the service's confirmation and schedules its reminder).
#[utoipa::path(post, path = "/bookings/{id}/confirm", tag = "bookings", params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Booking>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn confirm_booking(app: &App, req: WsReq) -> ApiResult<Reply> {
    let send = req.grant.authorize_notice::<fx::SendEmail>()?;
    let send = Notify { send: &send, pages: req.pages_origin.as_deref() };
    Ok(Reply::ok(&booking::confirm(&send, app, &req.ws, &req.path_id("id")?).await?))
}

/// confirmed -> completed.
#[utoipa::path(post, path = "/bookings/{id}/complete", tag = "bookings", params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Booking>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn complete_booking(app: &App, req: WsReq) -> ApiResult<Reply> {
    Ok(Reply::ok(&booking::close(app, &req.ws, &req.path_id("id")?, booking::Outcome::Completed).await?))
}

/// confirmed -> no_show.
#[utoipa::path(post, path = "/bookings/{id}/no-show", tag = "bookings", params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Booking>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn no_show_booking(app: &App, req: WsReq) -> ApiResult<Reply> {
    Ok(Reply::ok(&booking::close(app, &req.ws, &req.path_id("id")?, booking::Outcome::NoShow).await?))
}

/// pending or confirmed -> cancelled; the slot is free again at once. A customer cannot
/// cancel inside the service's cancellation window. With the service's confirmations on and a
/// caller that may send email, the customer gets a notice with the invite's cancellation.
#[utoipa::path(post, path = "/bookings/{id}/cancel", tag = "bookings", request_body(content = CancelBooking, description = "optional"),
    params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Booking>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn cancel_booking(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: CancelBooking = if req.body.is_empty() { CancelBooking::default() } else { req.json()? };
    let by = booking::Canceller::Staff { recorded_as: input.cancelled_by.unwrap_or(CancelledBy::Staff) };
    // The notice is an email: a key that must ask before it sends asks before it cancels.
    let send = req.grant.authorize_notice::<fx::SendEmail>()?;
    let send = Notify { send: &send, pages: req.pages_origin.as_deref() };
    Ok(Reply::ok(&booking::cancel(Some(&send), app, &req.ws, &req.path_id("id")?, by, input.reason).await?))
}

/// Move a pending or confirmed booking to another slot of its resource in one transaction:
/// the old booking becomes `cancelled` with `rescheduled_to`, the answer is the new one (with
/// `rescheduled_from`). If the new time is taken, nothing changes (409).
#[utoipa::path(post, path = "/bookings/{id}/reschedule", tag = "bookings", request_body = RescheduleBooking, params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Booking>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn reschedule_booking(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: RescheduleBooking = req.json()?;
    let send = req.grant.authorize_notice::<fx::SendEmail>()?;
    let send = Notify { send: &send, pages: req.pages_origin.as_deref() };
    Ok(Reply::ok(
        &booking::reschedule(
            &send,
            app,
            &req.ws,
            &req.path_id("id")?,
            booking::Canceller::Staff { recorded_as: domain::bookings::CancelledBy::Staff },
            input.start,
        )
        .await?,
    ))
}
