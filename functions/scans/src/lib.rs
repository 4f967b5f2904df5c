//! Website scans: `POST /scans` queues an audit of a URL (or answers the same URL's scan from
//! the last 10 minutes), the scanner (`functions/scanner`) runs it, `GET /scans/{id}` reads
//! the score, sub-scores and findings. The rules and their weights are in
//! `domain::scans::rules` and docs/scan-scoring.md.

use domain::scans::rules::{Category, Finding, Severity};
use domain::scans::{Categories, Requested, Scan, ScanFailure, ScanId, ScanStatus};
use serde::Deserialize;
use shared::{ApiError, ApiResult, App, Reply, WsReq};
use utoipa::ToSchema;

shared::area! {
    tag = "scans", description = "Website audits: security headers, SEO, AI readiness, performance, privacy and mail authentication, scored with evidence",
    operations = [create_scan, list_scans, get_scan],
    schemas = [Scan, ScanStatus, ScanFailure, Categories, Finding, Category, Severity, CreateScan],
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateScan {
    /// The page to audit: http or https.
    #[schema(format = "uri", max_length = 2048)]
    pub url: String,
    /// Scan again even if the same URL was scanned in the last 10 minutes.
    #[serde(default)]
    pub force: bool,
}

/// Audit a website. Answers 202 with the queued scan, or 200 with the same URL's scan from the
/// last 10 minutes (running or finished) unless `force` is true. Events `scan.completed`,
/// `scan.failed`.
#[utoipa::path(post, path = "/scans", tag = "scans", request_body = CreateScan,
    responses((status = 202, body = shared::openapi::Data<Scan>), (status = 200, body = shared::openapi::Data<Scan>),
        shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_scan(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: CreateScan = req.json()?;
    let url = domain::scans::normalise_url(&input.url, app.cfg.webhooks.url_policy).map_err(|m| ApiError::validation("url", m))?;
    match domain::scans::request(app, &req.ws, &url, input.force).await? {
        Requested::Created(scan) => Ok(Reply::accepted(&scan)),
        Requested::Existing(scan) => Ok(Reply::ok(&scan)),
    }
}

/// Scans in creation order, by `status` or `host` (each an index, O(page); the status index
/// holds keys only, so its page is read by key after).
#[utoipa::path(get, path = "/scans", tag = "scans",
    params(shared::openapi::PageParams, ("status" = Option<ScanStatus>, Query), ("host" = Option<String>, Query)),
    responses((status = 200, body = shared::openapi::ListOf<Scan>), shared::openapi::CommonErrors))]
pub async fn list_scans(app: &App, req: WsReq) -> ApiResult<Reply> {
    let q = req.query_as::<domain::scans::ListScans>()?.normalized();
    let page = req.page(app, "scans", &q.bound()).await?;
    Ok(Reply::page(&page, domain::scans::list(app, &req.ws, &q, page.after.clone(), page.limit).await?))
}

/// One scan; when completed, its score, grade, categories and findings.
#[utoipa::path(get, path = "/scans/{id}", tag = "scans", params(("id" = String, Path, description = "scan_...")),
    responses((status = 200, body = shared::openapi::Data<Scan>), shared::openapi::CommonErrors))]
pub async fn get_scan(app: &App, req: WsReq) -> ApiResult<Reply> {
    let id: ScanId = req.path_id("id")?;
    let (scan, _) = domain::scans::load(app, &req.ws, &id).await?.ok_or_else(|| ApiError::not_found("scan"))?;
    Ok(Reply::ok(&scan))
}
