//! Signing a person in: the pages send the browser to the workspace's OpenID provider
//! (authorization code with PKCE, `shared::oidc`), take the code back at the one callback,
//! verify the access token as the API verifies a bearer token, and keep it sealed in an
//! `HttpOnly` cookie for as long as it lives. Each page then authenticates that token for its
//! workspace, so a person who is not a member of it is not signed in there.

use super::{COOKIE_PATH, Ctx};
use domain::approvals::ApprovalState;
use maud::html;
use shared::oidc::Pending;
use shared::web::{PERSON_COOKIE, PERSON_COOKIE_AAD, View, Visit};
use shared::{ApiError, ApiResult, App};

/// Between leaving for the provider and coming back.
const PENDING_COOKIE: &str = "approver_sign_in";
const PENDING_AAD: &str = "approvals/sign-in";
const PENDING_SECS: i64 = 600;
/// A sign-in lasts as long as the provider's token does, at most this.
const SESSION_MAX_SECS: i64 = 8 * 3600;

fn words(v: &Visit) -> &'static super::words::Words {
    super::words::of(domain::portal::Lang::from_accept_language(v.header("accept-language")))
}

/// Signed out: what the pages are and the way in. Signed in: the requests waiting.
pub async fn home(app: &App, v: Visit) -> ApiResult<View> {
    let ctx = Ctx::of(app, &v).await?;
    let w = ctx.w;
    if v.person.is_none() {
        return Ok(ctx.page(
            w.title_home,
            None,
            html! {
                p { (w.sign_in_intro) }
                @if app.pages_sign_in.is_some() {
                    a.button href={ (ctx.base) "/sign-in" } { (w.sign_in) }
                } @else {
                    p.notice.problem role="alert" { (w.sign_in_missing) }
                }
            },
        ));
    }
    super::may_read(v.person.as_ref().ok_or_else(|| ApiError::unauthorized("sign in first"))?)?;
    let (pending, _) = domain::approvals::list(app, &v.ws, Some(ApprovalState::Pending), None, 50).await?;
    Ok(ctx.page(
        w.pending_title,
        None,
        html! {
            @if pending.is_empty() {
                p { (w.none_pending) }
            }
            ul.cards {
                @for r in &pending {
                    li {
                        h2 { a href={ (ctx.base) "/requests/" (r.id.as_str()) } { (r.preview.summary) } }
                        p.hint { (w.asked_by) " " (r.api_key_id.as_str()) " · " (w.expires) " " (r.expires_at.to_string()) }
                    }
                }
            }
        },
    ))
}

/// Only a path of this site is a place to come back to.
fn safe_next(next: &str) -> bool {
    next.starts_with('/')
        && !next.starts_with("//")
        && next.len() <= 200
        && next.bytes().all(|b| b.is_ascii_alphanumeric() || b"/_-".contains(&b))
}

/// To the provider, remembering (sealed) the state, the PKCE verifier and where to come back.
pub async fn start(app: &App, v: Visit) -> ApiResult<View> {
    let provider = app.pages_sign_in.as_ref().ok_or_else(|| ApiError::forbidden(words(&v).sign_in_missing))?;
    let origin = v.origin.as_deref().ok_or_else(|| ApiError::internal("the pages' origin is unknown"))?;
    let next = v.query("next").filter(|n| safe_next(n)).unwrap_or("/");
    let redirect = format!("{}{COOKIE_PATH}/callback", origin.trim_end_matches('/'));
    let (url, pending) = provider.start(&redirect, &format!("{}{next}", v.base)).await.map_err(|e| {
        tracing::warn!(error = %e, "approval pages: sign-in could not start");
        ApiError::unavailable(format!("the identity provider: {e}"))
    })?;
    let pending = serde_json::to_vec(&pending).map_err(|e| ApiError::internal(e.to_string()))?;
    let sealed = app.platform_secret().await?.seal(PENDING_AAD, &pending);
    Ok(View::redirect(url).cookie(v.set_cookie(PENDING_COOKIE, &sealed, PENDING_SECS)))
}

/// Back from the provider: the state must be the one this browser left with, the code is
/// exchanged (with the verifier), and the token must pass the API's own checks.
pub async fn callback(app: &App, v: Visit) -> ApiResult<View> {
    let w = words(&v);
    let refused = |why: String| refused(w, why);
    let provider = app.pages_sign_in.as_ref().ok_or_else(|| ApiError::forbidden(w.sign_in_missing))?;
    let secret = app.platform_secret().await?;
    let pending: Pending = v
        .cookie(PENDING_COOKIE)
        .and_then(|c| secret.open(PENDING_AAD, c).ok())
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| refused("no sign-in under way in this browser".into()))?;
    if v.query("error").is_some() {
        return Err(refused("the provider refused".into()));
    }
    use subtle::ConstantTimeEq;
    let state = v.query("state").unwrap_or_default();
    if !bool::from(state.as_bytes().ct_eq(pending.state.as_bytes())) {
        return Err(refused("state mismatch".into()));
    }
    let code = v.query("code").filter(|c| !c.is_empty()).ok_or_else(|| refused("no code".into()))?;
    let origin = v.origin.as_deref().ok_or_else(|| ApiError::internal("the pages' origin is unknown"))?;
    let redirect = format!("{}{COOKIE_PATH}/callback", origin.trim_end_matches('/'));
    let (token, lifetime) = provider.finish(&redirect, code, &pending).await.map_err(|e| refused(e.to_string()))?;
    let verifier = app.jwt.as_ref().ok_or_else(|| refused("no token verifier".into()))?;
    verifier.verify(&token).await.map_err(|e| refused(format!("{e:?}")))?;
    let max_age = lifetime.map_or(3600, |d| d.as_secs() as i64).clamp(60, SESSION_MAX_SECS) - 30;
    let sealed = secret.seal(PERSON_COOKIE_AAD, token.as_bytes());
    let next = if safe_next(&pending.next) { pending.next } else { COOKIE_PATH.to_string() };
    Ok(View::redirect(next).cookie(v.set_cookie(PERSON_COOKIE, &sealed, max_age)).cookie(v.set_cookie(PENDING_COOKIE, "", 0)))
}

fn refused(w: &super::words::Words, why: String) -> ApiError {
    tracing::info!(why, "approval pages: sign-in refused");
    ApiError::forbidden(w.error_sign_in)
}

pub async fn sign_out(_app: &App, v: Visit) -> ApiResult<View> {
    Ok(View::redirect(format!("{}/", v.base)).cookie(v.set_cookie(PERSON_COOKIE, "", 0)))
}
