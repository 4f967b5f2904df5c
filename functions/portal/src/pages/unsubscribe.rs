//! The page behind an email's `List-Unsubscribe` link (`domain::emails::unsubscribe`),
//! `/unsubscribe?token=...` (the token in the query: access logs record paths). A GET only
//! shows where the address stands and asks (a mail scanner that fetches the link changes
//! nothing); a POST whose body is RFC 8058's `List-Unsubscribe=One-Click` (form-encoded or
//! multipart) is the mail client's one-click request. The page's own buttons post
//! `action=unsubscribe` or `action=subscribe` (the undo). The link is the credential: no
//! session, no form token.

use super::Ctx;
use super::layout::Notice;
use domain::emails::unsubscribe::{self, Request, Subscription, Target, Via};
use maud::html;
use shared::web::{View, Visit};
use shared::{ApiResult, App};

/// `a…@example.org`: enough for the owner to recognise, little for anyone else.
fn masked(address: &str) -> String {
    match address.split_once('@') {
        Some((local, domain)) => format!("{}…@{domain}", local.chars().next().unwrap_or('…')),
        None => "…".into(),
    }
}

fn page(ctx: &Ctx, v: &Visit, t: &Target, state: Subscription, changed: bool, notice: Option<Notice>) -> View {
    let w = ctx.w;
    let who = masked(&t.address);
    let name = &ctx.ws.name;
    let action = format!("{}/unsubscribe?token={}", ctx.base, v.query("token").unwrap_or_default());
    let (title, text, button) = match state {
        Subscription::Subscribed if changed => (w.resub_title, w.resub_done, Some(("unsubscribe", w.unsub_button))),
        Subscription::Subscribed => (w.unsub_title, w.unsub_question, Some(("unsubscribe", w.unsub_button))),
        Subscription::Unsubscribed => (w.unsub_done_title, w.unsub_done, Some(("subscribe", w.resub_button))),
        Subscription::Blocked => (w.unsub_done_title, w.unsub_blocked, None),
    };
    ctx.page(
        title,
        notice,
        html! {
            p { (text.replacen("{}", name, 1)) }
            p { strong { (who) } }
            @if let Some((value, label)) = button {
                form method="post" action=(action) {
                    input type="hidden" name="action" value=(value);
                    button type="submit" { (label) }
                }
            }
        },
    )
}

/// The page's context, never signed in: the link is its own credential (and a bearer page
/// carries no form token for the layout's sign-out).
async fn ctx(app: &App, v: &Visit) -> ApiResult<Ctx> {
    let mut ctx = Ctx::of(app, v).await?;
    ctx.signed_in = false;
    Ok(ctx)
}

async fn target(app: &App, v: &Visit) -> ApiResult<Target> {
    unsubscribe::open(app, &v.ws, v.query("token").unwrap_or_default()).await
}

pub async fn show(app: &App, v: Visit) -> ApiResult<View> {
    let t = target(app, &v).await?;
    let state = unsubscribe::state(app, &v.ws, &t.address).await?;
    Ok(page(&ctx(app, &v).await?, &v, &t, state, false, None))
}

pub async fn post(app: &App, v: Visit) -> ApiResult<View> {
    let t = target(app, &v).await?;
    let one_click = {
        let body = String::from_utf8_lossy(&v.body);
        body.contains("List-Unsubscribe") && body.contains("One-Click")
    };
    let (subscribe, via) = match v.field("action") {
        Some("subscribe") => (true, Via::Page),
        Some("unsubscribe") => (false, Via::Page),
        _ if one_click => (false, Via::OneClick),
        _ => return Err(shared::ApiError::validation("body", "List-Unsubscribe=One-Click (RFC 8058) or the page's action")),
    };
    // Subscribing again is a person's choice on this page, never another site's form.
    if subscribe && v.header("sec-fetch-site") == Some("cross-site") {
        return Err(shared::ApiError::forbidden("subscribe again from the page itself"));
    }
    let req = Request { via, ip_address: Some(v.source.as_str()), user_agent: v.header("user-agent") };
    let ctx = ctx(app, &v).await?;
    match unsubscribe::set(app, &v.ws, &t, subscribe, &req).await {
        Ok(state) => Ok(page(&ctx, &v, &t, state, subscribe, None)),
        Err(e) if e.status() == http::StatusCode::CONFLICT => {
            let state = unsubscribe::state(app, &v.ws, &t.address).await?;
            Ok(page(&ctx, &v, &t, state, false, Some(Notice::Problem(ctx.w.undo_refused.into()))).status(http::StatusCode::CONFLICT))
        }
        Err(e) => Err(e),
    }
}
