//! What the workspace sent and holds: the customer's emails, a download of their data (the
//! link goes to their address), and their erasure (with a code from their inbox).

use super::Ctx;
use super::layout::{Notice, code_field, csrf};
use domain::contacts::Contact;
use domain::effects as fx;
use domain::gdpr::export;
use domain::gdpr::jobs::JobStatus;
use domain::ids::ExportId;
use maud::html;
use shared::web::{SESSION_COOKIE, View, Visit};
use shared::{ApiError, ApiResult, App};

async fn contact(app: &App, v: &Visit) -> ApiResult<Contact> {
    Ok(super::customer(app, v).await?.0)
}

pub async fn emails(app: &App, v: Visit) -> ApiResult<View> {
    let ctx = Ctx::of(app, &v).await?;
    let w = ctx.w;
    let c = contact(app, &v).await?;
    let (list, _) = domain::portal::emails_of(app, &v.ws, &c, None, 50).await?;
    Ok(ctx.page(
        w.emails_title,
        None,
        html! {
            @if list.is_empty() { p { (w.no_emails) } }
            @else {
                ul.cards {
                    @for e in &list {
                        li { h3 { (e.subject) } p { (ctx.when(&e.created_at)) " · " (w.from) " " (e.from) } }
                    }
                }
            }
        },
    ))
}

pub async fn show(app: &App, v: Visit) -> ApiResult<View> {
    contact(app, &v).await?;
    let ctx = Ctx::of(app, &v).await?;
    let w = ctx.w;
    let notice = match v.query("m") {
        Some("sent") => Some(Notice::Done(w.export_sent.into())),
        _ => None,
    };
    Ok(ctx.page(
        w.data_title,
        notice,
        html! {
            section aria-labelledby="export" {
                h2 #export { (w.export_heading) }
                p { (w.export_intro) }
                form method="post" action={ (ctx.base) "/data/export" } { (csrf(&ctx)) button type="submit" { (w.export_start) } }
            }
            section aria-labelledby="erase" {
                h2 #erase { (w.erase_heading) }
                p { (w.erase_intro) }
                form method="post" action={ (ctx.base) "/data/erasure/code" } { (csrf(&ctx)) button.danger type="submit" { (w.erase_start) } }
            }
        },
    ))
}

pub async fn export(app: &App, v: Visit) -> ApiResult<View> {
    let c = contact(app, &v).await?;
    let subject = domain::gdpr::subject_of(app, &v.ws, &c).await?;
    let job = export::start_subject(&v.grant, app, &v.ws, &subject).await?;
    Ok(View::redirect(format!("{}/data/exports/{}", v.base, job.id)))
}

async fn own_export(app: &App, v: &Visit, c: &Contact) -> ApiResult<export::ExportJob> {
    // A malformed id names no export.
    let Some(id) = ExportId::parse(v.param("id")) else { return Err(ApiError::not_found("export")) };
    export::load(app, &v.ws, &id)
        .await?
        .filter(|j| j.subject.as_ref().and_then(|s| s.contact_id.as_deref()) == Some(c.id.as_str()))
        .ok_or_else(|| ApiError::not_found("export"))
}

pub async fn export_status(app: &App, v: Visit) -> ApiResult<View> {
    let ctx = Ctx::of(app, &v).await?;
    let w = ctx.w;
    let c = contact(app, &v).await?;
    let job = own_export(app, &v, &c).await?;
    Ok(ctx.page(
        w.export_heading,
        None,
        html! {
            @match job.status {
                JobStatus::Completed if job.download_url.is_some() => {
                    p { (w.export_ready) }
                    form method="post" action={ (ctx.base) "/data/exports/" (job.id) "/send" } { (csrf(&ctx)) button type="submit" { (w.export_send) } }
                }
                JobStatus::Failed | JobStatus::Completed => p role="alert" { (w.export_failed) },
                _ => {
                    p role="status" { (w.export_pending) }
                    p { a.button.secondary href={ (ctx.base) "/data/exports/" (job.id) } { (w.refresh) } }
                }
            }
        },
    ))
}

pub async fn export_send(app: &App, v: Visit) -> ApiResult<View> {
    let c = contact(app, &v).await?;
    let lang = domain::portal::Lang::from_accept_language(v.header("accept-language"));
    let auth = v.grant.authorize_notice::<fx::SendEmail>()?;
    let id = ExportId::parse(v.param("id")).ok_or_else(|| ApiError::not_found("export"))?;
    export::email_link(&auth, app, &v.ws, &c, &id, lang).await?;
    Ok(View::redirect(format!("{}/data?m=sent", v.base)))
}

pub async fn erasure_code(app: &App, v: Visit) -> ApiResult<View> {
    let c = contact(app, &v).await?;
    let auth = v.grant.authorize_notice::<fx::SendEmail>()?;
    domain::portal::send_erasure_code(&auth, app, &v.ws, v.session_token(), &c).await?;
    Ok(View::redirect(format!("{}/data/erasure", v.base)))
}

fn erasure_page(ctx: &Ctx, notice: Option<Notice>) -> View {
    let w = ctx.w;
    ctx.page(
        w.erase_heading,
        notice,
        html! {
            p { (w.erase_code_intro) }
            form method="post" action={ (ctx.base) "/data/erasure" } {
                (csrf(ctx))
                (code_field(ctx))
                button.danger type="submit" { (w.erase_confirm) }
            }
        },
    )
}

pub async fn erasure_form(app: &App, v: Visit) -> ApiResult<View> {
    contact(app, &v).await?;
    Ok(erasure_page(&Ctx::of(app, &v).await?, None))
}

/// The erasure with the emailed code; the session ends with it.
pub async fn erase(app: &App, v: Visit) -> ApiResult<View> {
    let ctx = Ctx::of(app, &v).await?;
    let c = contact(app, &v).await?;
    let code = v.field("code").unwrap_or_default().trim().to_string();
    match domain::gdpr::erasure::erase_self(&v.grant, app, &v.ws, v.session_token(), &c, &code).await {
        Ok(_) => {
            // Every session, link and sign-in of the customer ends with the request; the
            // erasure job removes the rest.
            domain::portal::revoke(app, v.session_token()).await?;
            domain::portal::end_sessions(app, &v.ws, &c.id).await?;
            let mut done = ctx;
            done.signed_in = false;
            let w = done.w;
            Ok(done.page(w.erased_title, None, html! { p { (w.erased_text) } }).cookie(v.set_cookie(SESSION_COOKIE, "", 0)))
        }
        Err(e) if e.status() == http::StatusCode::BAD_REQUEST => {
            Ok(erasure_page(&ctx, Some(Notice::Problem(ctx.w.code_wrong.into()))).status(http::StatusCode::BAD_REQUEST))
        }
        Err(e) => Err(e),
    }
}
