//! Deals: an amount in minor units with its currency, a free-text stage while open, an
//! optional contact (which must exist in the workspace; checked in the same transaction), and
//! the lifecycle open -> won | lost (lost needs a reason), with reopening allowed and recorded.
//!
//! Items (pk = WS#<workspace>, sk = DEAL#<id>): GSI1 `WS#<ws>#DEAL#<status>` serves the status
//! filter; GSI2 `WS#<ws>#DEALS#<contact>` (only while linked) serves `contact_id` and lets the
//! contacts area unlink a deleted contact's deals.

use domain::contacts::{activity, contact_sk};
use domain::deals::{Change, Deal, DealId, DealStatus, UpdateDeal, check_common, record};
use domain::keys;
use serde::Deserialize;
use shared::events::Event;
use shared::outbox::Tx;
use shared::store::{TxError, s, ws_pk};
use shared::validate::Errors;
use shared::{ApiError, ApiResult, App, Reply, Req};
use std::collections::BTreeMap;
use utoipa::ToSchema;

shared::area! {
    tag = "deals", description = "Deals and their open -> won | lost lifecycle",
    operations = [list_deals, create_deal, get_deal, update_deal, delete_deal],
    schemas = [Deal, DealStatus, CreateDeal, UpdateDeal],
}

/// The contact must exist when the deal is written, and its timeline records the change.
fn with_contact(ws: &str, d: &Deal, kind: &str, summary: String, mut tx: Tx) -> ApiResult<Tx> {
    if let Some(c) = &d.contact_id {
        tx = tx.check(ws_pk(ws), contact_sk(c), "attribute_exists(pk)");
        tx = tx.put(activity(ws, c, kind, summary, serde_json::json!({"deal_id": d.id, "title": d.title, "status": d.status}))?);
    }
    Ok(tx)
}

fn no_contact() -> ApiError {
    ApiError::validation("contact_id", "no such contact in this workspace")
}

async fn load(app: &App, req: &Req) -> ApiResult<(Deal, i64)> {
    let id: DealId = req.path_id("id")?;
    app.db.get_object(req.ws(), &keys::DEAL.sk(&[&id])).await?.ok_or_else(|| ApiError::not_found("deal"))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDeal {
    #[schema(min_length = 1, max_length = 200, pattern = "\\S")]
    pub title: String,
    /// Minor units; default 0.
    #[serde(default)]
    pub value: i64,
    pub currency: String,
    /// Default `new`.
    #[serde(default)]
    pub stage: Option<String>,
    #[serde(default)]
    #[schema(pattern = "^ct_[0-7][0-9A-HJKMNP-TV-Z]{25}$")]
    pub contact_id: Option<String>,
    #[serde(default)]
    pub expected_close_date: Option<String>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

/// Create an open deal.
#[utoipa::path(post, path = "/deals", tag = "deals", request_body = CreateDeal,
    responses((status = 201, body = shared::openapi::Data<Deal>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_deal(app: &App, req: Req) -> ApiResult<Reply> {
    let input: CreateDeal = req.json()?;
    let now = shared::ids::now_rfc3339();
    let d = Deal {
        id: shared::ids::new_id("deal"),
        object: "deal".into(),
        title: input.title.trim().to_string(),
        value: input.value,
        currency: input.currency.trim().to_ascii_uppercase(),
        stage: input.stage.map(|s| s.trim().to_string()).unwrap_or_else(|| "new".into()),
        status: DealStatus::Open,
        contact_id: input.contact_id,
        expected_close_date: input.expected_close_date,
        lost_reason: None,
        closed_at: None,
        reopened_at: None,
        metadata: input.metadata,
        created_at: now.clone(),
        updated_at: now,
    };
    let mut errs = Errors::new();
    check_common(&mut errs, &d);
    errs.finish()?;
    let ws = req.ws();
    let tx = with_contact(ws, &d, "deal.created", format!("Deal created: {}", d.title), Tx::new())?;
    let has_contact = d.contact_id.is_some();
    tx.create(record(ws, &d)?.version(1))
        .event(Event::new(ws, "deal.created", &d))
        .commit(app)
        .await
        .map_err(|e| e.on_condition(|i| if has_contact && i == 0 { no_contact() } else { ApiError::conflict("the deal exists") }))?;
    Ok(Reply::created(&d))
}

/// One deal.
#[utoipa::path(get, path = "/deals/{id}", tag = "deals", params(("id" = String, Path, description = "deal_...")),
    responses((status = 200, body = shared::openapi::Data<Deal>), shared::openapi::CommonErrors))]
pub async fn get_deal(app: &App, req: Req) -> ApiResult<Reply> {
    Ok(Reply::ok(&load(app, &req).await?.0))
}

/// The filters of `GET /deals` (`limit` and `cursor` are the page's).
#[derive(Deserialize)]
struct ListDeals {
    status: Option<DealStatus>,
    stage: Option<String>,
    #[serde(default, deserialize_with = "shared::validate::prefixed_id")]
    contact_id: Option<domain::contacts::ContactId>,
}

/// Deals in creation order; filters combine.
#[utoipa::path(get, path = "/deals", tag = "deals",
    params(shared::openapi::PageParams,
        ("status" = Option<DealStatus>, Query), ("stage" = Option<String>, Query), ("contact_id" = Option<String>, Query, pattern = "^ct_[0-7][0-9A-HJKMNP-TV-Z]{25}$")),
    responses((status = 200, body = shared::openapi::ListOf<Deal>), shared::openapi::CommonErrors))]
pub async fn list_deals(app: &App, req: Req) -> ApiResult<Reply> {
    let q: ListDeals = req.query_as()?;
    let parsed = q.status;
    let (status, stage, contact) = (parsed.map(DealStatus::as_str), q.stage.as_deref(), q.contact_id.as_deref());
    let page = req.page(app, "deals", &[("status", status), ("stage", stage), ("contact_id", contact)]).await?;
    let ws = req.ws();
    if let Some(c) = contact {
        // The contact's deals by index (keys only), then the deals by key; other filters apply to the page.
        let spec = keys::DEALS_OF_CONTACT.query(&[ws, c], &[], page.after.clone(), page.limit);
        let (deals, next) = shared::request::keyed_page::<Deal>(app, spec).await?;
        let deals: Vec<Deal> =
            deals.into_iter().filter(|d| parsed.is_none_or(|p| d.status == p) && stage.is_none_or(|st| d.stage == st)).collect();
        return Ok(Reply::list(&deals, next.map(|a| page.cursor_for(&a))));
    }
    let mut spec = match status {
        Some(st) => keys::DEALS_BY_STATUS.query(&[ws, st], &[], page.after.clone(), page.limit),
        None => keys::DEALS.query(&[ws], &[], page.after.clone(), page.limit),
    };
    if let Some(st) = stage {
        spec = spec.filter("stage = :stage", vec![(":stage", s(st))]);
    }
    shared::request::list_page::<Deal>(app, &page, spec).await
}

/// Change a deal; moving `status` wins, loses or reopens it (events `deal.won`, `deal.lost`,
/// `deal.reopened`, otherwise `deal.updated`).
#[utoipa::path(patch, path = "/deals/{id}", tag = "deals", request_body = UpdateDeal, params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Deal>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn update_deal(app: &App, req: Req) -> ApiResult<Reply> {
    let input: UpdateDeal = req.json()?;
    let (old, version) = load(app, &req).await?;
    let Some(Change { deal: d, transition }) = old.apply(input, &shared::ids::now_rfc3339())? else { return Ok(Reply::ok(&old)) };
    let ws = req.ws();
    let has_contact = d.contact_id.is_some();
    let tx = with_contact(ws, &d, transition.event_type(), transition.summary(&d), Tx::new())?;
    tx.replace(record(ws, &d)?, version).event(Event::new(ws, transition.event_type(), &d)).commit(app).await.map_err(|e| match e {
        TxError::Condition(0) if has_contact => no_contact(),
        other => other.stale(),
    })?;
    Ok(Reply::ok(&d))
}

/// Delete a deal.
#[utoipa::path(delete, path = "/deals/{id}", tag = "deals", params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<shared::openapi::Deleted>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn delete_deal(app: &App, req: Req) -> ApiResult<Reply> {
    let (d, version) = load(app, &req).await?;
    let ws = req.ws();
    Tx::new()
        .delete_versioned(ws_pk(ws), keys::DEAL.sk(&[&d.id]), version)
        .event(Event::new(ws, "deal.deleted", &d))
        .commit(app)
        .await
        .map_err(TxError::stale)?;
    Ok(Reply::deleted(&d.id, "deal"))
}
