//! Deals: an amount in minor units with its currency, a free-text stage while open, an
//! optional contact (which must exist in the workspace; checked in the same transaction), and
//! the lifecycle open -> won | lost (lost needs a reason), with reopening allowed and recorded.
//!
//! Items (pk = WS#<workspace>, sk = DEAL#<id>): GSI1 `WS#<ws>#DEAL#<status>` serves the status
//! filter; GSI2 `WS#<ws>#DEALS#<contact>` (only while linked) serves `contact_id` and lets the
//! contacts area unlink a deleted contact's deals.

use domain::deals::{CreateDeal, Deal, DealId, DealStatus, UpdateDeal};
use shared::{ApiResult, App, Reply, WsReq};

shared::area! {
    tag = "deals", description = "Deals and their open -> won | lost lifecycle",
    operations = [list_deals, create_deal, get_deal, update_deal, delete_deal],
    schemas = [Deal, DealStatus, CreateDeal, UpdateDeal],
}

async fn load(app: &App, req: &WsReq) -> ApiResult<(Deal, i64)> {
    domain::deals::load(app, &req.ws, &req.path_id::<DealId>("id")?).await
}

/// Create an open deal.
#[utoipa::path(post, path = "/deals", tag = "deals", request_body = CreateDeal,
    responses((status = 201, body = shared::openapi::Data<Deal>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_deal(app: &App, req: WsReq) -> ApiResult<Reply> {
    Ok(Reply::created(&domain::deals::create(app, &req.ws, req.json()?).await?))
}

/// One deal.
#[utoipa::path(get, path = "/deals/{id}", tag = "deals", params(("id" = String, Path, description = "deal_...")),
    responses((status = 200, body = shared::openapi::Data<Deal>), shared::openapi::CommonErrors))]
pub async fn get_deal(app: &App, req: WsReq) -> ApiResult<Reply> {
    Ok(Reply::ok(&load(app, &req).await?.0))
}

/// Deals in creation order; filters combine.
#[utoipa::path(get, path = "/deals", tag = "deals",
    params(shared::openapi::PageParams,
        ("status" = Option<DealStatus>, Query), ("stage" = Option<String>, Query), ("contact_id" = Option<domain::ids::ContactId>, Query)),
    responses((status = 200, body = shared::openapi::ListOf<Deal>), shared::openapi::CommonErrors))]
pub async fn list_deals(app: &App, req: WsReq) -> ApiResult<Reply> {
    let q: domain::deals::ListDeals = req.query_as()?;
    let page = req.page(app, "deals", &q.bound()).await?;
    Ok(Reply::page(&page, domain::deals::list(app, &req.ws, &q, page.after.clone(), page.limit).await?))
}

/// Change a deal; moving `status` wins, loses or reopens it (events `deal.won`, `deal.lost`,
/// `deal.reopened`, otherwise `deal.updated`).
#[utoipa::path(patch, path = "/deals/{id}", tag = "deals", request_body = UpdateDeal, params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Deal>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn update_deal(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: UpdateDeal = req.json()?;
    let (old, version) = load(app, &req).await?;
    Ok(Reply::ok(&domain::deals::update(app, &req.ws, old, version, input).await?))
}

/// Delete a deal.
#[utoipa::path(delete, path = "/deals/{id}", tag = "deals", params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<shared::openapi::Deleted>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn delete_deal(app: &App, req: WsReq) -> ApiResult<Reply> {
    let (d, version) = load(app, &req).await?;
    domain::deals::delete(app, &req.ws, &d, version).await?;
    Ok(Reply::deleted(&d.id, "deal"))
}
