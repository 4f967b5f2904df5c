//! The pages' style sheet (with the workspace's accent), the optional script, and the
//! workspace's logo, served from the pages' own origin so no page makes a third-party request.

use shared::web::{View, Visit};
use shared::{ApiError, ApiResult, App};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const CSS: &str = include_str!("static/portal.css");
const JS: &str = include_str!("static/portal.js");
/// The default accent (blue, 6.7:1 on white).
const DEFAULT_ACCENT: &str = "#1d4ed8";
const LOGO_MAX_BYTES: usize = 256 * 1024;
const LOGO_TTL: Duration = Duration::from_secs(600);

pub async fn style(app: &App, v: Visit) -> ApiResult<View> {
    let (ws, _) = domain::workspaces::load(app, &v.ws).await?;
    let accent = ws.accent_color.unwrap_or_else(|| DEFAULT_ACCENT.into());
    // Only a colour the settings checked reaches the sheet; the markup escapes nothing here.
    let accent = if domain::workspaces::accent_contrast(&accent).is_some() { accent } else { DEFAULT_ACCENT.into() };
    Ok(View::asset("text/css; charset=utf-8", format!(":root{{--accent:{accent}}}\n{CSS}").into_bytes(), 300))
}

pub async fn script(_app: &App, _v: Visit) -> ApiResult<View> {
    Ok(View::asset("text/javascript; charset=utf-8", JS.as_bytes().to_vec(), 86_400))
}

/// One fetched logo per container, for ten minutes.
type Cached = (String, Instant, &'static str, Vec<u8>);
static LOGOS: Mutex<Vec<Cached>> = Mutex::new(Vec::new());

/// The workspace's logo, fetched through the SSRF-safe client: an image of a known raster
/// type and size only (an SVG can carry script).
pub async fn logo(app: &App, v: Visit) -> ApiResult<View> {
    let (ws, _) = domain::workspaces::load(app, &v.ws).await?;
    let url = ws.logo_url.ok_or_else(|| ApiError::not_found("logo"))?;
    if let Some((_, _, ct, bytes)) =
        LOGOS.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|(u, at, _, _)| *u == url && at.elapsed() < LOGO_TTL)
    {
        return Ok(View::asset(ct, bytes.clone(), 600));
    }
    let client = shared::outbound::Client::new(app.cfg.webhooks.url_policy, Duration::from_secs(5), "WorkspacePlatform-Portal")
        .map_err(ApiError::internal)?;
    let unavailable = || ApiError::not_found("logo");
    let resp = client.request(reqwest::Method::GET, &url).map_err(|_| unavailable())?.send().await.map_err(|_| unavailable())?;
    if !resp.status().is_success() || resp.content_length().is_some_and(|l| l as usize > LOGO_MAX_BYTES) {
        return Err(unavailable());
    }
    let ct = match resp.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default() {
        t if t.starts_with("image/png") => "image/png",
        t if t.starts_with("image/jpeg") => "image/jpeg",
        t if t.starts_with("image/webp") => "image/webp",
        t if t.starts_with("image/gif") => "image/gif",
        _ => return Err(unavailable()),
    };
    let bytes = resp.bytes().await.map_err(|_| unavailable())?;
    if bytes.len() > LOGO_MAX_BYTES {
        return Err(unavailable());
    }
    let mut cache = LOGOS.lock().unwrap_or_else(|p| p.into_inner());
    cache.retain(|(u, at, _, _)| *u != url && at.elapsed() < LOGO_TTL);
    cache.push((url, Instant::now(), ct, bytes.to_vec()));
    Ok(View::asset(ct, bytes.to_vec(), 600))
}
