//! The customer's bookings: upcoming and past, cancel within the service's window, move to an
//! open slot of the same resource (times in the customer's zone).

use super::layout::{Notice, csrf};
use super::{Ctx, customer};
use domain::bookings::booking::{self, Canceller};
use domain::bookings::notify::Notify;
use domain::bookings::{self, Booking, BookingId, BookingStatus};
use domain::effects as fx;
use maud::{Markup, html};
use shared::web::{View, Visit};
use shared::{ApiError, ApiResult, App};
use std::collections::HashMap;

/// Bookings shown per list: a customer's own, so a page holds them all in practice.
const SHOWN: usize = 50;

pub fn status(ctx: &Ctx, s: BookingStatus) -> &'static str {
    match s {
        BookingStatus::Pending => ctx.w.status_pending,
        BookingStatus::Confirmed => ctx.w.status_confirmed,
        BookingStatus::Cancelled => ctx.w.status_cancelled,
        _ => ctx.w.status_other,
    }
}

/// The services' names and cancellation windows, one read per service shown.
async fn services(app: &App, v: &Visit, list: &[&Booking]) -> ApiResult<HashMap<String, (String, i64)>> {
    let mut out = HashMap::new();
    for b in list {
        let id = b.service_id.to_string();
        if !out.contains_key(&id)
            && let Some((svc, _)) = bookings::load_service(app, &v.ws, &b.service_id).await?
        {
            out.insert(id, (svc.name, svc.cancellation_window_minutes));
        }
    }
    Ok(out)
}

async fn render(app: &App, v: &Visit, notice: Option<Notice>) -> ApiResult<View> {
    let ctx = Ctx::of(app, v).await?;
    let w = ctx.w;
    let ct = customer(app, v).await?.0.id;
    let now = shared::ids::Timestamp::now();
    let (upcoming, _) = bookings::of_contact(app, &v.ws, &ct, &now.to_string(), true, None, SHOWN).await?;
    let (past, _) = bookings::of_contact(app, &v.ws, &ct, &now.to_string(), false, None, SHOWN).await?;
    let names = services(app, v, &upcoming.iter().chain(&past).collect::<Vec<_>>()).await?;
    let row = |b: &Booking, open: bool| -> Markup {
        let (name, window) = names.get(b.service_id.as_str()).cloned().unwrap_or_default();
        let active = b.open();
        let until = shared::ids::Timestamp::from(b.customer_change_until(window));
        html! {
            li.booking {
                h3 { (name) }
                p { (ctx.when(&b.start)) " · " (status(&ctx, b.status)) }
                @if open && active {
                    p.hint { (w.changeable_until.replace("{}", &ctx.when(&until))) }
                    div.actions {
                        a.button.secondary href={ (ctx.base) "/bookings/" (b.id) "/move" } { (w.move_booking) span.visually-hidden { ": " (name) ", " (ctx.when(&b.start)) } }
                        form method="post" action={ (ctx.base) "/bookings/" (b.id) "/cancel" } {
                            (csrf(&ctx))
                            button type="submit" { (w.cancel) span.visually-hidden { ": " (name) ", " (ctx.when(&b.start)) } }
                        }
                    }
                }
            }
        }
    };
    let list = |items: &[Booking], open: bool| -> Markup {
        html! {
            @if items.is_empty() { p { (w.no_bookings) } }
            @else { ul.cards { @for b in items { (row(b, open)) } } }
        }
    };
    Ok(ctx.page(
        w.bookings_title,
        notice,
        html! {
            h2 { (w.upcoming) }
            (list(&upcoming, true))
            h2 { (w.past) }
            (list(&past, false))
        },
    ))
}

pub async fn list(app: &App, v: Visit) -> ApiResult<View> {
    let w = super::words::of(domain::portal::Lang::from_accept_language(v.header("accept-language")));
    let notice = match v.query("m") {
        Some("cancelled") => Some(Notice::Done(w.cancelled.into())),
        Some("moved") => Some(Notice::Done(w.moved.into())),
        _ => None,
    };
    render(app, &v, notice).await
}

/// A refusal the customer can act on is shown on the bookings page with its status.
async fn refused(app: &App, v: &Visit, e: ApiError) -> ApiResult<View> {
    if !e.status().is_client_error() || e.status() == http::StatusCode::TOO_MANY_REQUESTS {
        return Err(e);
    }
    let status = e.status();
    Ok(render(app, v, Some(Notice::Problem(e.message))).await?.status(status))
}

pub async fn cancel(app: &App, v: Visit) -> ApiResult<View> {
    let ct = customer(app, &v).await?.0.id;
    let Some(id) = BookingId::parse(v.param("id")) else { return refused(app, &v, ApiError::not_found("booking")).await };
    let send = v.grant.authorize_notice::<fx::SendEmail>()?;
    let send = Notify { send: &send, pages: v.origin.as_deref() };
    match booking::cancel(Some(&send), app, &v.ws, &id, Canceller::Customer(&ct), None).await {
        Ok(_) => Ok(View::redirect(format!("{}/bookings?m=cancelled", v.base))),
        Err(e) => refused(app, &v, e).await,
    }
}

/// Seven days of open times from `date` (default today, in the customer's zone).
pub async fn move_form(app: &App, v: Visit) -> ApiResult<View> {
    let ctx = Ctx::of(app, &v).await?;
    let ct = customer(app, &v).await?.0.id;
    let b = BookingId::parse(v.param("id")).ok_or_else(|| ApiError::not_found("booking"))?;
    let sb = booking::load(app, &v.ws, &b)
        .await
        .ok()
        .filter(|s| s.booking.contact_id == ct.as_str())
        .ok_or_else(|| ApiError::not_found("booking"))?;
    let action = format!("{}/bookings/{}/move", ctx.base, b);
    let back = (format!("{}/bookings", ctx.base), ctx.w.back_to_bookings);
    slots(app, &v, &ctx, &sb.booking, &action, "?", back).await
}

/// The open times of `b`'s resource for seven days from the `date` in the query, as buttons
/// that post `start` to `action` (`sep`: what joins `action` and the pager's `date`).
pub async fn slots(app: &App, v: &Visit, ctx: &Ctx, b: &Booking, action: &str, sep: &str, back: (String, &str)) -> ApiResult<View> {
    let w = ctx.w;
    let today = chrono::Utc::now().with_timezone(&ctx.zone).date_naive();
    // Within a year from today: any other date is today's week (no date arithmetic overflows).
    let last = today + chrono::Days::new(365);
    let from = v.query("date").and_then(|d| chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").ok()).unwrap_or(today).clamp(today, last);
    let to = from + chrono::Days::new(7);
    let free = booking::availability(
        app,
        &v.ws,
        Some(&b.service_id),
        &from.to_string(),
        &(to - chrono::Days::new(1)).to_string(),
        Some(&ctx.zone_name),
    )
    .await?;
    let days: Vec<(String, Vec<String>)> = free
        .0
        .into_iter()
        .map(|(day, slots)| (day, slots.into_iter().filter(|s| s.resource_ids.contains(&b.resource_id)).map(|s| s.start).collect()))
        .filter(|(_, s): &(String, Vec<String>)| !s.is_empty())
        .collect();
    let earlier = (from > today).then(|| (from - chrono::Days::new(7)).max(today));
    Ok(ctx.page(
        w.move_title,
        None,
        html! {
            p { (ctx.when(&b.start)) }
            p { (w.move_intro) }
            @if days.is_empty() { p { (w.no_slots) } }
            @for (day, starts) in &days {
                h2 data-day=(day) { (ctx.day(&day_start(&starts[0]))) }
                form.slots method="post" action=(action) {
                    (csrf(ctx))
                    @for s in starts {
                        button type="submit" name="start" value=(s) { (hour(s)) }
                    }
                }
            }
            p.pager {
                @if let Some(e) = earlier { a href={ (action) (sep) "date=" (e) } { (w.earlier) } " " }
                a href={ (action) (sep) "date=" (to) } { (w.later) }
            }
            p { a href=(back.0) { (back.1) } }
        },
    ))
}

/// The instant of a slot's start (its day is the heading's).
fn day_start(first: &str) -> shared::ids::Timestamp {
    chrono::DateTime::parse_from_rfc3339(first)
        .map(|t| shared::ids::Timestamp::from(t.with_timezone(&chrono::Utc)))
        .unwrap_or_else(|_| shared::ids::Timestamp::now())
}

/// `HH:MM` of an RFC 3339 time written in the customer's zone.
fn hour(rfc3339: &str) -> &str {
    rfc3339.get(11..16).unwrap_or(rfc3339)
}

pub async fn move_to(app: &App, v: Visit) -> ApiResult<View> {
    let ct = customer(app, &v).await?.0.id;
    let Some(id) = BookingId::parse(v.param("id")) else { return refused(app, &v, ApiError::not_found("booking")).await };
    let send = v.grant.authorize_notice::<fx::SendEmail>()?;
    let send = Notify { send: &send, pages: v.origin.as_deref() };
    let start = match booking::form_start(v.field("start")) {
        Ok(start) => start,
        Err(e) => return refused(app, &v, e).await,
    };
    match booking::reschedule(&send, app, &v.ws, &id, Canceller::Customer(&ct), start).await {
        Ok(_) => Ok(View::redirect(format!("{}/bookings?m=moved", v.base))),
        Err(e) => refused(app, &v, e).await,
    }
}
