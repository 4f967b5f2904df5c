//! The page behind an email's `List-Unsubscribe` link (`domain::emails::unsubscribe`). A GET
//! only shows where the address stands and asks (a mail scanner that fetches the link changes
//! nothing); a POST without the page's `action` field is the mail client's RFC 8058 one-click
//! request, which unsubscribes. The page's own buttons post `action=unsubscribe` or
//! `action=subscribe` (the undo). The link is the credential: no session, no form token.

use super::Ctx;
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

fn page(ctx: &Ctx, v: &Visit, t: &Target, state: Subscription, changed: bool) -> View {
    let w = ctx.w;
    let who = masked(&t.address);
    let name = &ctx.ws.name;
    let action = format!("{}/unsubscribe/{}", ctx.base, v.param("token"));
    let (title, text, button) = match state {
        Subscription::Subscribed if changed => (w.resub_title, w.resub_done, Some(("unsubscribe", w.unsub_button))),
        Subscription::Subscribed => (w.unsub_title, w.unsub_question, Some(("unsubscribe", w.unsub_button))),
        Subscription::Unsubscribed => (w.unsub_done_title, w.unsub_done, Some(("subscribe", w.resub_button))),
        Subscription::Blocked => (w.unsub_done_title, w.unsub_blocked, None),
    };
    ctx.page(
        title,
        None,
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

pub async fn show(app: &App, v: Visit) -> ApiResult<View> {
    let t = unsubscribe::open(app, &v.ws, v.param("token")).await?;
    let state = unsubscribe::state(app, &v.ws, &t.address).await?;
    Ok(page(&Ctx::of(app, &v).await?, &v, &t, state, false))
}

pub async fn post(app: &App, v: Visit) -> ApiResult<View> {
    let t = unsubscribe::open(app, &v.ws, v.param("token")).await?;
    let (subscribe, via) = match v.field("action") {
        Some("subscribe") => (true, Via::Page),
        Some(_) => (false, Via::Page),
        None => (false, Via::OneClick),
    };
    let req = Request { via, ip_address: Some(v.source.as_str()), user_agent: v.header("user-agent") };
    let state = unsubscribe::set(app, &v.ws, &t, subscribe, &req).await?;
    Ok(page(&Ctx::of(app, &v).await?, &v, &t, state, subscribe))
}
