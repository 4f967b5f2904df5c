//! The page of one booking behind its manage link (`domain::bookings::manage`),
//! `/booking?token=...`: no sign-in, no cookie; the link's token is the credential, checked by
//! the pipeline (`shared::web`, a link page) before the page runs. It shows the booking and
//! lets the customer cancel it or move it as the signed-in pages do, the same domain functions
//! deciding (the service's window, the resource's open slots); the token reaches this booking
//! (or the one it was moved to) and nothing else of the customer's.

use super::Ctx;
use super::bookings::{slots, status};
use super::layout::Notice;
use domain::bookings::booking::{self, Canceller};
use domain::bookings::notify::Notify;
use domain::bookings::{self, Booking, manage};
use domain::contacts::ContactId;
use domain::effects as fx;
use maud::html;
use shared::web::{View, Visit};
use shared::{ApiError, ApiResult, App};

/// The booking the link opens now and its contact; a link to a booking since moved is sent to
/// the booking it became (so the page's forms carry a token for that one).
async fn opened(app: &App, v: &Visit) -> ApiResult<Result<(Booking, ContactId), View>> {
    let (claims, _) = v.link.as_ref().ok_or_else(|| ApiError::internal("a link page without its link"))?;
    let sb = booking::by_link(app, &v.ws, claims).await?;
    if sb.booking.id.as_str() != claims.object {
        // Only the page's own notices pass along: nothing a visitor typed reaches the header.
        let query = v.query("m").filter(|m| matches!(*m, "cancelled" | "moved")).map(|m| format!("&m={m}")).unwrap_or_default();
        return Ok(Err(View::redirect(format!("{}?token={}{query}", here(v), token(app, v, &sb.booking).await?))));
    }
    // `by_link` answers only the link's customer's booking.
    let contact = sb.booking.contact_id.clone();
    Ok(Ok((sb.booking, contact)))
}

async fn token(app: &App, v: &Visit, b: &Booking) -> ApiResult<String> {
    manage::token(app.platform_secret().await?, &v.ws, b).ok_or_else(|| ApiError::not_found("booking"))
}

fn here(v: &Visit) -> String {
    format!("{}{}", v.base, manage::PAGE)
}

/// The page's context, never signed in: a link page carries no form token for the layout's
/// sign-out, and shows no navigation to the customer's other pages.
async fn ctx(app: &App, v: &Visit) -> ApiResult<Ctx> {
    let mut ctx = Ctx::of(app, v).await?;
    ctx.signed_in = false;
    Ok(ctx)
}

async fn render(app: &App, v: &Visit, b: &Booking, notice: Option<Notice>) -> ApiResult<View> {
    let ctx = ctx(app, v).await?;
    let w = ctx.w;
    let (name, window) = match bookings::load_service(app, &v.ws, &b.service_id).await? {
        Some((svc, _)) => (svc.name, svc.cancellation_window_minutes),
        None => (String::new(), 0),
    };
    let token = token(app, v, b).await?;
    let until = b.customer_change_until(window);
    let open = b.open() && chrono::Utc::now() <= until;
    let until = shared::ids::Timestamp::from(until);
    Ok(ctx.page(
        w.manage_title,
        notice,
        html! {
            div.booking {
                h2 { (name) }
                p { (ctx.when(&b.start)) " · " (status(&ctx, b.status)) }
                @if open {
                    p.hint { (w.changeable_until.replace("{}", &ctx.when(&until))) }
                    div.actions {
                        a.button.secondary href={ (here(v)) "/move?token=" (token) } { (w.move_booking) }
                        form method="post" action={ (here(v)) "/cancel?token=" (token) } {
                            button type="submit" { (w.cancel) }
                        }
                    }
                }
            }
        },
    ))
}

pub async fn show(app: &App, v: Visit) -> ApiResult<View> {
    let (b, _) = match opened(app, &v).await? {
        Ok(found) => found,
        Err(redirect) => return Ok(redirect),
    };
    let w = super::words::of(domain::portal::Lang::from_accept_language(v.header("accept-language")));
    let notice = match v.query("m") {
        Some("cancelled") => Some(Notice::Done(w.cancelled.into())),
        Some("moved") => Some(Notice::Done(w.moved.into())),
        _ => None,
    };
    render(app, &v, &b, notice).await
}

/// A refusal the customer can act on (too late to change, the slot taken) is shown on the
/// booking's page with its status.
async fn refused(app: &App, v: &Visit, b: &Booking, e: ApiError) -> ApiResult<View> {
    if !e.status().is_client_error() || e.status() == http::StatusCode::TOO_MANY_REQUESTS {
        return Err(e);
    }
    let status = e.status();
    Ok(render(app, v, b, Some(Notice::Problem(e.message))).await?.status(status))
}

/// The booking a form acts on: the link's own, never the one it was moved to (the customer
/// saw and chose this one).
async fn acted_on(app: &App, v: &Visit) -> ApiResult<(Booking, ContactId)> {
    opened(app, v).await?.map_err(|_| ApiError::conflict("this booking was moved; open its link again"))
}

pub async fn cancel(app: &App, v: Visit) -> ApiResult<View> {
    let (b, contact) = acted_on(app, &v).await?;
    let send = v.grant.authorize_notice::<fx::SendEmail>()?;
    let notify = Notify { send: &send, pages: v.origin.as_deref() };
    match booking::cancel(Some(&notify), app, &v.ws, &b.id, Canceller::Customer(&contact), None).await {
        Ok(done) => Ok(View::redirect(format!("{}?token={}&m=cancelled", here(&v), token(app, &v, &done).await?))),
        Err(e) => refused(app, &v, &b, e).await,
    }
}

pub async fn move_form(app: &App, v: Visit) -> ApiResult<View> {
    let (b, _) = match opened(app, &v).await? {
        Ok(found) => found,
        Err(redirect) => return Ok(redirect),
    };
    let ctx = ctx(app, &v).await?;
    let token = token(app, &v, &b).await?;
    let action = format!("{}/move?token={token}", here(&v));
    let back = (format!("{}?token={token}", here(&v)), ctx.w.back_to_booking);
    slots(app, &v, &ctx, &b, &action, "&", back).await
}

pub async fn move_to(app: &App, v: Visit) -> ApiResult<View> {
    let (b, contact) = acted_on(app, &v).await?;
    let send = v.grant.authorize_notice::<fx::SendEmail>()?;
    let notify = Notify { send: &send, pages: v.origin.as_deref() };
    let start = match booking::form_start(v.field("start")) {
        Ok(start) => start,
        Err(e) => return refused(app, &v, &b, e).await,
    };
    match booking::reschedule(&notify, app, &v.ws, &b.id, Canceller::Customer(&contact), start).await {
        Ok(new) => Ok(View::redirect(format!("{}?token={}&m=moved", here(&v), token(app, &v, &new).await?))),
        Err(e) => refused(app, &v, &b, e).await,
    }
}
