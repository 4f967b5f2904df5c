//! Email template routes; the model and rendering are `domain::emails::templates`.

use domain::emails::templates::{self, CreateTemplate, Template, UpdateTemplate};
use shared::{ApiResult, App, Reply, WsReq};

/// Create a template; its slug is its id (409 if taken).
#[utoipa::path(post, path = "/emails/templates", tag = "emails", request_body = CreateTemplate,
    responses((status = 201, body = shared::openapi::Data<Template>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_template(app: &App, req: WsReq) -> ApiResult<Reply> {
    Ok(Reply::created(&templates::create(app, &req.ws, req.json()?).await?))
}

/// One email template by its slug.
#[utoipa::path(get, path = "/emails/templates/{slug}", tag = "emails", params(("slug" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Template>), shared::openapi::CommonErrors))]
pub async fn get_template(app: &App, req: WsReq) -> ApiResult<Reply> {
    Ok(Reply::ok(&templates::load(app, &req.ws, req.param("slug")).await?.0))
}

/// Templates by slug.
#[utoipa::path(get, path = "/emails/templates", tag = "emails",
    params(shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<Template>), shared::openapi::CommonErrors))]
pub async fn list_templates(app: &App, req: WsReq) -> ApiResult<Reply> {
    let page = req.page(app, "email_templates", &[]).await?;
    Ok(Reply::page(&page, domain::emails::templates::list(app, &req.ws, page.after.clone(), page.limit).await?))
}

/// Change a template. Emails already accepted keep the content they were rendered with.
#[utoipa::path(patch, path = "/emails/templates/{slug}", tag = "emails", request_body = UpdateTemplate, params(("slug" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Template>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn update_template(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: UpdateTemplate = req.json()?;
    let ws = &req.ws;
    let (old, version) = templates::load(app, ws, req.param("slug")).await?;
    Ok(Reply::ok(&templates::update(app, ws, old, version, input).await?))
}

/// Delete a template. Emails already accepted are not affected (they were rendered on accept).
#[utoipa::path(delete, path = "/emails/templates/{slug}", tag = "emails", params(("slug" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<shared::openapi::Deleted>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn delete_template(app: &App, req: WsReq) -> ApiResult<Reply> {
    let ws = &req.ws;
    let (t, version) = templates::load(app, ws, req.param("slug")).await?;
    templates::delete(app, ws, &t, version).await?;
    Ok(Reply::deleted(&t.slug, "email_template"))
}
