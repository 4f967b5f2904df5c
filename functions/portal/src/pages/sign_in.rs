//! Signing in from the inbox: the address, then the emailed link or code; signing out.

use super::Ctx;
use super::layout::{Notice, code_field, csrf};
use domain::effects as fx;
use domain::portal;
use maud::html;
use shared::auth::PORTAL_SESSION_MAX_SECS;
use shared::error::ErrorCode;
use shared::web::{SESSION_COOKIE, View, Visit};
use shared::{ApiResult, App};

/// The browser's handle on its sign-in (`psi_...`), between the address and the code.
const ATTEMPT_COOKIE: &str = "portal_sign_in";

fn form(ctx: &Ctx, notice: Option<Notice>) -> View {
    let w = ctx.w;
    ctx.page(
        w.sign_in_title,
        notice,
        html! {
            p { (w.sign_in_intro) }
            form method="post" action={ (ctx.base) "/sign-in" } {
                (csrf(ctx))
                label for="email" { (w.email_label) }
                input #email type="email" name="email" autocomplete="email" required maxlength="254";
                button type="submit" { (w.send_link) }
            }
        },
    )
}

/// The start: the sign-in form, or the customer's pages when signed in.
pub async fn home(app: &App, v: Visit) -> ApiResult<View> {
    if v.session.is_some() {
        return Ok(View::redirect(format!("{}/account", v.base)));
    }
    let ctx = Ctx::of(app, &v).await?;
    let notice = (v.query("m") == Some("signed_out")).then(|| Notice::Done(ctx.w.signed_out.into()));
    Ok(form(&ctx, notice))
}

/// The address: a link and a code go to it if it is a contact's; every address gets the same
/// answer in the same time (`portal::sign_in`), limited per network address (the page's class)
/// and per address (the operation's).
pub async fn start(app: &App, v: Visit) -> ApiResult<View> {
    if v.session.is_some() {
        return Ok(View::redirect(format!("{}/account", v.base)));
    }
    let auth = v.grant.authorize::<fx::EmailSignInLink>()?;
    let lang = portal::Lang::from_accept_language(v.header("accept-language"));
    let address = v.field("email").unwrap_or_default();
    match portal::sign_in(&auth, app, &v.slug, address, None, v.origin.as_deref(), lang).await {
        Ok(s) => Ok(View::redirect(format!("{}/code", v.base)).cookie(v.set_cookie(ATTEMPT_COOKIE, &s.attempt, portal::LINK_SECS))),
        Err(e) if e.code == ErrorCode::ValidationError => {
            let ctx = Ctx::of(app, &v).await?;
            Ok(form(&ctx, Some(Notice::Problem(e.message))).status(http::StatusCode::BAD_REQUEST))
        }
        Err(e) => Err(e),
    }
}

fn code_page(ctx: &Ctx, notice: Option<Notice>) -> View {
    let w = ctx.w;
    ctx.page(
        w.code_title,
        notice,
        html! {
            p { (w.code_intro) }
            form method="post" action={ (ctx.base) "/code" } {
                (csrf(ctx))
                (code_field(ctx))
                button type="submit" { (w.code_submit) }
            }
            p { a href={ (ctx.base) "/" } { (w.code_start_over) } }
        },
    )
}

pub async fn code_form(app: &App, v: Visit) -> ApiResult<View> {
    if v.cookie(ATTEMPT_COOKIE).is_none() {
        return Ok(View::redirect(format!("{}/", v.base)));
    }
    Ok(code_page(&Ctx::of(app, &v).await?, None))
}

/// The code from the email opens a session for this browser.
pub async fn code(app: &App, v: Visit) -> ApiResult<View> {
    let attempt = v.cookie(ATTEMPT_COOKIE).unwrap_or_default();
    let code = v.field("code").unwrap_or_default();
    match portal::verify_sign_in(app, attempt, code, Some(&v.ws)).await {
        Ok(session) => Ok(signed_in(&v, &session.session_token).cookie(v.set_cookie(ATTEMPT_COOKIE, "", 0))),
        Err(e) if e.status().is_client_error() => {
            let ctx = Ctx::of(app, &v).await?;
            Ok(code_page(&ctx, Some(Notice::Problem(ctx.w.code_wrong.into()))).status(http::StatusCode::BAD_REQUEST))
        }
        Err(e) => Err(e),
    }
}

fn signed_in(v: &Visit, session: &str) -> View {
    View::redirect(format!("{}/account", v.base)).cookie(v.set_cookie(SESSION_COOKIE, session, PORTAL_SESSION_MAX_SECS))
}

/// The emailed link asks before it signs in: a mail scanner that fetches it spends nothing, and
/// the page names the account it opens (a link someone else sent you opens theirs).
pub async fn link_form(app: &App, v: Visit) -> ApiResult<View> {
    let Some(token) = v.query("token") else { return Ok(View::redirect(format!("{}/", v.base))) };
    let ctx = Ctx::of(app, &v).await?;
    let w = ctx.w;
    let Some(owner) = portal::link_owner(app, &v.ws, token).await? else {
        return Ok(form(&ctx, Some(Notice::Problem(w.link_refused.into()))).status(http::StatusCode::UNAUTHORIZED));
    };
    Ok(ctx.page(
        w.link_title,
        None,
        html! {
            p { (w.link_intro) }
            p { (w.link_as) " " strong { (owner) } }
            form method="post" action={ (ctx.base) "/link" } {
                (csrf(&ctx))
                input type="hidden" name="token" value=(token);
                button type="submit" { (w.link_submit) }
            }
        },
    ))
}

pub async fn link(app: &App, v: Visit) -> ApiResult<View> {
    let token = v.field("token").unwrap_or_default();
    match portal::exchange_within(app, &v.ws, token).await {
        Ok(session) => Ok(signed_in(&v, &session.session_token)),
        Err(e) if e.status().is_client_error() => {
            let ctx = Ctx::of(app, &v).await?;
            Ok(form(&ctx, Some(Notice::Problem(ctx.w.link_refused.into()))).status(http::StatusCode::UNAUTHORIZED))
        }
        Err(e) => Err(e),
    }
}

/// Sign-out ends every session of the customer, on every device.
pub async fn sign_out(app: &App, v: Visit) -> ApiResult<View> {
    // Works for a deleted contact too: signing out always ends the sessions.
    let ct = super::session_contact_id(&v)?;
    portal::end_sessions(app, &v.ws, &ct).await?;
    Ok(View::redirect(format!("{}/?m=signed_out", v.base)).cookie(v.set_cookie(SESSION_COOKIE, "", 0)))
}
