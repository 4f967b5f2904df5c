//! Import routes; the job, its chunks and the worker's loop are `domain::contacts::import`.

use domain::contacts::import::{self, CreateImport, ImportJob, RowError};
use shared::{ApiError, ApiResult, App, Reply, WsReq};

/// Start an import (class `contact_import`): 202 with the job; follow `GET /contacts/imports/{id}`.
#[utoipa::path(post, path = "/contacts/imports", tag = "contacts", request_body = CreateImport,
    responses((status = 202, body = shared::openapi::Data<ImportJob>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_import(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: CreateImport = req.json()?;
    let job = import::start(app, &req.ws, input).await?;
    Ok(Reply::accepted(&job))
}

/// One contact import with its progress counts.
#[utoipa::path(get, path = "/contacts/imports/{id}", tag = "contacts", params(("id" = String, Path, description = "imp_...")),
    responses((status = 200, body = shared::openapi::Data<ImportJob>), shared::openapi::CommonErrors))]
pub async fn get_import(app: &App, req: WsReq) -> ApiResult<Reply> {
    let id: import::ImportId = req.path_id("id")?;
    let (job, _, _) = import::load_job(app, &req.ws, &id).await?.ok_or_else(|| ApiError::not_found("import"))?;
    Ok(Reply::ok(&job))
}

/// The rows that failed, in row order.
#[utoipa::path(get, path = "/contacts/imports/{id}/errors", tag = "contacts",
    params(("id" = String, Path), shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<RowError>), shared::openapi::CommonErrors))]
pub async fn list_import_errors(app: &App, req: WsReq) -> ApiResult<Reply> {
    let id: import::ImportId = req.path_id("id")?;
    import::load_job(app, &req.ws, &id).await?.ok_or_else(|| ApiError::not_found("import"))?;
    let page = req.page(app, &format!("contacts/imports/{id}/errors"), &[]).await?;
    Ok(Reply::page(&page, import::errors(app, &req.ws, &id, page.after.clone(), page.limit).await?))
}
