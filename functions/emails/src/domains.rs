//! Sending domain routes; the model, SES calls and ownership rules are
//! `domain::emails::domains`.

use domain::emails::domains::{self as model, DomainId, SendingDomain};
use serde::Deserialize;
use shared::{ApiResult, App, Reply, WsReq};
use utoipa::ToSchema;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDomain {
    /// The domain to send from, e.g. `mail.acme.com` (its subdomains are covered too).
    #[schema(
        min_length = 3,
        max_length = 253,
        example = "mail.acme.com",
        pattern = "^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.)+[A-Za-z]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.?$"
    )]
    pub name: String,
}

/// Add a sending domain (owners and admins): creates its SES identity with Easy DKIM and
/// answers the DNS records to publish. A domain belongs to one workspace of the deployment.
#[utoipa::path(post, path = "/emails/domains", tag = "emails", request_body = CreateDomain,
    responses((status = 201, body = shared::openapi::Data<SendingDomain>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_domain(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: CreateDomain = req.json()?;
    Ok(Reply::created(&model::create(&req.grant, app, &req.ws, &input.name).await?))
}

/// The workspace's sending domains with their last known status (read one to refresh it).
#[utoipa::path(get, path = "/emails/domains", tag = "emails",
    params(shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<SendingDomain>), shared::openapi::CommonErrors))]
pub async fn list_domains(app: &App, req: WsReq) -> ApiResult<Reply> {
    let page = req.page(app, "email_domains", &[]).await?;
    Ok(Reply::page(&page, domain::emails::domains::list(app, &req.ws, page.after.clone(), page.limit).await?))
}

/// One sending domain, its status refreshed from SES (`pending` until SES sees the DNS
/// records, then `verified`; `failed` if SES gives up).
#[utoipa::path(get, path = "/emails/domains/{id}", tag = "emails", params(("id" = String, Path, description = "`dom_...`")),
    responses((status = 200, body = shared::openapi::Data<SendingDomain>), shared::openapi::CommonErrors))]
pub async fn get_domain(app: &App, req: WsReq) -> ApiResult<Reply> {
    let id: DomainId = req.path_id("id")?;
    let (d, version) = model::load(app, &req.ws, &id).await?;
    Ok(Reply::ok(&model::refresh(app, &req.ws, d, version).await?))
}

/// Remove a sending domain (owners and admins) and its SES identity. Emails from it that have
/// not left yet fail with `sender_not_verified`.
#[utoipa::path(delete, path = "/emails/domains/{id}", tag = "emails", params(("id" = String, Path, description = "`dom_...`")),
    responses((status = 200, body = shared::openapi::Data<shared::openapi::Deleted>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn delete_domain(app: &App, req: WsReq) -> ApiResult<Reply> {
    let id: DomainId = req.path_id("id")?;
    let d = model::delete(&req.grant, app, &req.ws, &id).await?;
    Ok(Reply::deleted(&d.id, "email_domain"))
}
