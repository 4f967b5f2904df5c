//! Deals: an amount in minor units with its currency, a free-text stage while open, an
//! optional contact (which must exist in the workspace; checked in the same transaction), and
//! the lifecycle open -> won | lost (lost needs a reason), with reopening allowed and recorded.
//!
//! Items (pk = WS#<workspace>, sk = DEAL#<id>): GSI1 `WS#<ws>#DEAL#<status>` serves the status
//! filter; GSI2 `WS#<ws>#DEALS#<contact>` (only while linked) serves `contact_id` and lets the
//! contacts area unlink a deleted contact's deals.

use contacts::model::{activity, contact_sk};
use serde::{Deserialize, Serialize};
use shared::events::Event;
use shared::store::{self, Record, Tx, TxError, s, ws_pk};
use shared::validate::{Errors, Patch};
use shared::{ApiError, ApiResult, App, Reply, Req, route};
use std::collections::BTreeMap;
use utoipa::ToSchema;

pub static ROUTES: &[shared::routing::Route] = &[
    route!(GET "/deals", Read, list_deals),
    route!(POST "/deals", Write, create_deal),
    route!(GET "/deals/{id}", Read, get_deal),
    route!(PATCH "/deals/{id}", Write, update_deal),
    route!(DELETE "/deals/{id}", Write, delete_deal),
];

pub const MAX_VALUE: i64 = 1_000_000_000_000_000;

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DealStatus {
    Open,
    Won,
    Lost,
}

impl DealStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Won => "won",
            Self::Lost => "lost",
        }
    }
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct Deal {
    /// `deal_...`
    pub id: String,
    /// Always `deal`.
    pub object: String,
    pub title: String,
    /// In minor units of `currency` (cents for EUR), 0 or more.
    pub value: i64,
    /// ISO 4217, e.g. `EUR`.
    pub currency: String,
    pub stage: String,
    pub status: DealStatus,
    /// `ct_...`; null when unlinked (also when the contact was deleted).
    pub contact_id: Option<String>,
    /// `YYYY-MM-DD`.
    pub expected_close_date: Option<String>,
    /// Required when lost.
    pub lost_reason: Option<String>,
    /// Set when the deal is won or lost, cleared when reopened.
    pub closed_at: Option<String>,
    /// The last time a closed deal was reopened.
    pub reopened_at: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub created_at: String,
    pub updated_at: String,
}

fn sk(id: &str) -> String {
    format!("DEAL#{id}")
}

fn record(ws: &str, d: &Deal) -> ApiResult<Record> {
    let mut rec = Record::new(ws_pk(ws), sk(&d.id), d)?.gsi1(format!("{}#DEAL#{}", ws_pk(ws), d.status.as_str()), sk(&d.id));
    if let Some(c) = &d.contact_id {
        rec = rec.gsi2(format!("{}#DEALS#{c}", ws_pk(ws)), sk(&d.id));
    }
    Ok(rec)
}

fn check_common(errs: &mut Errors, d: &Deal) {
    errs.text("title", &d.title, 1, 200);
    errs.text("stage", &d.stage, 1, 100);
    if !(0..=MAX_VALUE).contains(&d.value) {
        errs.add("value", "must be 0 or more (minor units), at most 10^15");
    }
    if !shared::validate::is_currency(&d.currency) {
        errs.add("currency", "must be an ISO 4217 code like EUR");
    }
    if let Some(c) = &d.contact_id
        && !shared::ids::is_valid("ct", c)
    {
        errs.add("contact_id", "must be a contact id (ct_...)");
    }
    if let Some(date) = &d.expected_close_date
        && chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").is_err()
    {
        errs.add("expected_close_date", "must be a date like 2026-12-31");
    }
    if let Some(r) = &d.lost_reason {
        errs.text("lost_reason", r, 1, 500);
    }
    if d.status == DealStatus::Lost && d.lost_reason.is_none() {
        errs.add("lost_reason", "is required when a deal is lost");
    }
    errs.metadata("metadata", &d.metadata);
}

/// The contact must exist when the deal is written, and its timeline records the change.
fn with_contact(app: &App, ws: &str, d: &Deal, kind: &str, summary: String, mut tx: Tx) -> ApiResult<Tx> {
    if let Some(c) = &d.contact_id {
        tx = tx.check(app, ws_pk(ws), contact_sk(c), "attribute_exists(pk)");
        tx = tx.put(app, activity(ws, c, kind, summary, serde_json::json!({"deal_id": d.id, "title": d.title, "status": d.status}))?);
    }
    Ok(tx)
}

fn no_contact() -> ApiError {
    ApiError::validation("contact_id", "no such contact in this workspace")
}

async fn load(app: &App, req: &Req) -> ApiResult<(Deal, i64)> {
    let id = req.param("id");
    if !shared::ids::is_valid("deal", id) {
        return Err(ApiError::not_found("deal"));
    }
    store::get_object(app, req.ws(), &sk(id)).await?.ok_or_else(|| ApiError::not_found("deal"))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDeal {
    pub title: String,
    /// Minor units; default 0.
    #[serde(default)]
    pub value: i64,
    pub currency: String,
    /// Default `new`.
    #[serde(default)]
    pub stage: Option<String>,
    #[serde(default)]
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
    let tx = with_contact(app, ws, &d, "deal.created", format!("Deal created: {}", d.title), Tx::new())?;
    let has_contact = d.contact_id.is_some();
    tx.create(app, record(ws, &d)?.version(1))
        .event(app, Event::new(ws, "deal.created", &d))
        .commit(app)
        .await
        .map_err(|e| e.on_condition(|i| if has_contact && i == 0 { no_contact() } else { ApiError::conflict("the deal exists") }))?;
    Ok(Reply::created(&d))
}

#[utoipa::path(get, path = "/deals/{id}", tag = "deals", params(("id" = String, Path, description = "deal_...")),
    responses((status = 200, body = shared::openapi::Data<Deal>), shared::openapi::CommonErrors))]
pub async fn get_deal(app: &App, req: Req) -> ApiResult<Reply> {
    Ok(Reply::ok(&load(app, &req).await?.0))
}

/// Deals in creation order; filters combine.
#[utoipa::path(get, path = "/deals", tag = "deals",
    params(("limit" = Option<u32>, Query, description = "1..100, default 50"), ("cursor" = Option<String>, Query),
        ("status" = Option<DealStatus>, Query), ("stage" = Option<String>, Query), ("contact_id" = Option<String>, Query)),
    responses((status = 200, body = shared::openapi::ListOf<Deal>), shared::openapi::CommonErrors))]
pub async fn list_deals(app: &App, req: Req) -> ApiResult<Reply> {
    let (status, stage, contact) = (req.query("status"), req.query("stage"), req.query("contact_id"));
    let mut errs = Errors::new();
    let parsed: Option<DealStatus> = status.and_then(shared::validate::parse_enum);
    if status.is_some() && parsed.is_none() {
        errs.add("status", "must be one of open, won, lost");
    }
    if contact.is_some_and(|c| !shared::ids::is_valid("ct", c)) {
        errs.add("contact_id", "must be a contact id (ct_...)");
    }
    errs.finish()?;
    let page = req.page(app, "deals", &[("status", status), ("stage", stage), ("contact_id", contact)]).await?;
    let ws = req.ws();
    if let Some(c) = contact {
        // The contact's deals by index (keys only), then the deals by key; other filters apply to the page.
        let spec = store::QuerySpec::new(format!("{}#DEALS#{c}", ws_pk(ws)), "DEAL#", page.after.clone(), page.limit).on_gsi2();
        let out = store::query_keys_then_get(app, spec).await?;
        let deals: Vec<Deal> = out.items.into_iter().map(store::from_item).collect::<ApiResult<_>>()?;
        let deals: Vec<Deal> =
            deals.into_iter().filter(|d| parsed.is_none_or(|p| d.status == p) && stage.is_none_or(|st| d.stage == st)).collect();
        return Ok(Reply::list(&deals, out.next_after.map(|a| page.cursor_for(&a))));
    }
    let mut spec = match status {
        Some(st) => store::QuerySpec::new(format!("{}#DEAL#{st}", ws_pk(ws)), "DEAL#", page.after.clone(), page.limit).on_gsi1(),
        None => store::QuerySpec::new(ws_pk(ws), "DEAL#", page.after.clone(), page.limit),
    };
    if let Some(st) = stage {
        spec = spec.filter("stage = :stage", vec![(":stage", s(st))]);
    }
    shared::http::list_page::<Deal>(app, &page, spec).await
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct UpdateDeal {
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub title: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<i64>)]
    pub value: Patch<i64>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub currency: Patch<String>,
    /// Only while open.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub stage: Patch<String>,
    /// `won`, `lost` (needs `lost_reason`) or `open` (reopen).
    #[serde(default)]
    #[schema(value_type = Option<DealStatus>)]
    pub status: Patch<DealStatus>,
    /// `null` unlinks.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub contact_id: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub expected_close_date: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub lost_reason: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    pub metadata: Patch<BTreeMap<String, String>>,
}

/// Change a deal; moving `status` wins, loses or reopens it (events `deal.won`, `deal.lost`,
/// `deal.reopened`, otherwise `deal.updated`).
#[utoipa::path(patch, path = "/deals/{id}", tag = "deals", request_body = UpdateDeal, params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Deal>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn update_deal(app: &App, req: Req) -> ApiResult<Reply> {
    let input: UpdateDeal = req.json()?;
    let (old, version) = load(app, &req).await?;
    let mut d = old.clone();
    let mut errs = Errors::new();
    if let Some(t) = input.title.required(&mut errs, "title") {
        d.title = t.trim().to_string();
    }
    if let Some(v) = input.value.required(&mut errs, "value") {
        d.value = v;
    }
    if let Some(c) = input.currency.required(&mut errs, "currency") {
        d.currency = c.trim().to_ascii_uppercase();
    }
    if let Some(s) = input.status.required(&mut errs, "status") {
        d.status = s;
    }
    match input.stage.required(&mut errs, "stage") {
        None => {}
        // Frozen only while the deal stays closed: closing or reopening may set it.
        Some(st) if st.trim() != d.stage && d.status != DealStatus::Open && old.status != DealStatus::Open => {
            errs.add("stage", "can change only while the deal is open; reopen it first")
        }
        Some(st) => d.stage = st.trim().to_string(),
    }
    input.contact_id.apply_to(&mut d.contact_id);
    input.expected_close_date.apply_to(&mut d.expected_close_date);
    input.lost_reason.apply_to(&mut d.lost_reason);
    errs.patch_metadata("metadata", input.metadata, &mut d.metadata);
    let now = shared::ids::now_rfc3339();
    let event = match (old.status, d.status) {
        (DealStatus::Open, DealStatus::Won) | (DealStatus::Lost, DealStatus::Won) => "deal.won",
        (DealStatus::Open, DealStatus::Lost) | (DealStatus::Won, DealStatus::Lost) => "deal.lost",
        (DealStatus::Won | DealStatus::Lost, DealStatus::Open) => "deal.reopened",
        _ => "deal.updated",
    };
    match d.status {
        DealStatus::Open => {
            d.closed_at = None;
            d.lost_reason = None;
            if event == "deal.reopened" {
                d.reopened_at = Some(now.clone());
            }
        }
        DealStatus::Won => {
            d.lost_reason = None;
            if old.status != DealStatus::Won {
                d.closed_at = Some(now.clone());
            }
        }
        DealStatus::Lost if old.status != DealStatus::Lost => d.closed_at = Some(now.clone()),
        DealStatus::Lost => {}
    }
    check_common(&mut errs, &d);
    errs.finish()?;
    if d == old {
        return Ok(Reply::ok(&d));
    }
    d.updated_at = now;
    let ws = req.ws();
    let summary = match event {
        "deal.won" => format!("Deal won: {}", d.title),
        "deal.lost" => format!("Deal lost: {} ({})", d.title, d.lost_reason.as_deref().unwrap_or_default()),
        "deal.reopened" => format!("Deal reopened: {}", d.title),
        _ => format!("Deal updated: {}", d.title),
    };
    let has_contact = d.contact_id.is_some();
    let tx = with_contact(app, ws, &d, event, summary, Tx::new())?;
    tx.replace(app, record(ws, &d)?, version).event(app, Event::new(ws, event, &d)).commit(app).await.map_err(|e| match e {
        TxError::Condition(0) if has_contact => no_contact(),
        other => other.stale(),
    })?;
    Ok(Reply::ok(&d))
}

#[utoipa::path(delete, path = "/deals/{id}", tag = "deals", params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<shared::openapi::Deleted>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn delete_deal(app: &App, req: Req) -> ApiResult<Reply> {
    let (d, version) = load(app, &req).await?;
    let ws = req.ws();
    Tx::new()
        .delete_versioned(app, ws_pk(ws), sk(&d.id), version)
        .event(app, Event::new(ws, "deal.deleted", &d))
        .commit(app)
        .await
        .map_err(TxError::stale)?;
    Ok(Reply::deleted(&d.id, "deal"))
}

#[derive(utoipa::OpenApi)]
#[openapi(
    paths(list_deals, create_deal, get_deal, update_deal, delete_deal),
    components(schemas(Deal, DealStatus, CreateDeal, UpdateDeal)),
    tags((name = "deals", description = "Deals and their open -> won | lost lifecycle"))
)]
pub struct ApiDoc;
