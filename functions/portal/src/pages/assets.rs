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
    let ws = super::workspace(app, &v.ws).await?;
    let accent = ws.accent_color.unwrap_or_else(|| DEFAULT_ACCENT.into());
    // Only a colour the settings checked reaches the sheet; the markup escapes nothing here.
    let accent = if domain::workspaces::accent_contrast(&accent).is_some() { accent } else { DEFAULT_ACCENT.into() };
    Ok(View::asset("text/css; charset=utf-8", format!(":root{{--accent:{accent}}}\n{CSS}").into_bytes(), 300))
}

pub async fn script(_app: &App, _v: Visit) -> ApiResult<View> {
    Ok(View::asset("text/javascript; charset=utf-8", JS.as_bytes().to_vec(), 86_400))
}

/// Fetched logos (or that fetching failed), per URL, for a while: at most `LOGOS_KEPT`.
struct Kept {
    url: String,
    at: Instant,
    logo: Option<(&'static str, Vec<u8>)>,
}
static LOGOS: Mutex<Vec<Kept>> = Mutex::new(Vec::new());
const LOGOS_KEPT: usize = 32;
/// How long a failed fetch is remembered: visitors do not each wait for a dead host.
const LOGO_FAILURE_TTL: Duration = Duration::from_secs(60);

/// The container's one client for logos (the SSRF-safe one, with its address checks).
fn client(app: &App) -> ApiResult<&'static shared::outbound::Client> {
    static CLIENT: std::sync::OnceLock<Result<shared::outbound::Client, String>> = std::sync::OnceLock::new();
    CLIENT
        .get_or_init(|| shared::outbound::Client::new(app.cfg.webhooks.url_policy, Duration::from_secs(5), "WorkspacePlatform-Portal"))
        .as_ref()
        .map_err(|e| ApiError::internal(e.clone()))
}

/// The image type its first bytes say it is, if it is one the pages serve.
fn sniff(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        [0x89, b'P', b'N', b'G', ..] => Some("image/png"),
        [0xff, 0xd8, 0xff, ..] => Some("image/jpeg"),
        [b'G', b'I', b'F', b'8', ..] => Some("image/gif"),
        [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => Some("image/webp"),
        _ => None,
    }
}

/// Fetch a logo: at most `LOGO_MAX_BYTES` read, whatever the server announces.
async fn fetch(app: &App, url: &str) -> ApiResult<Option<(&'static str, Vec<u8>)>> {
    let Ok(req) = client(app)?.request(reqwest::Method::GET, url) else { return Ok(None) };
    let Ok(mut resp) = req.send().await else { return Ok(None) };
    if !resp.status().is_success() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(c)) if bytes.len() + c.len() <= LOGO_MAX_BYTES => bytes.extend_from_slice(&c),
            Ok(None) => break,
            Ok(Some(_)) | Err(_) => return Ok(None),
        }
    }
    Ok(sniff(&bytes).map(|ct| (ct, bytes)))
}

/// The workspace's logo, fetched through the SSRF-safe client: a PNG, JPEG, GIF or WebP by its
/// own bytes (an SVG can carry script), at most 256 KiB.
pub async fn logo(app: &App, v: Visit) -> ApiResult<View> {
    let ws = super::workspace(app, &v.ws).await?;
    let url = ws.logo_url.ok_or_else(|| ApiError::not_found("logo"))?;
    let fresh = |k: &Kept| k.at.elapsed() < if k.logo.is_some() { LOGO_TTL } else { LOGO_FAILURE_TTL };
    let kept = LOGOS.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|k| k.url == url && fresh(k)).map(|k| k.logo.clone());
    let logo = match kept {
        Some(l) => l,
        None => {
            let l = fetch(app, &url).await?;
            let mut cache = LOGOS.lock().unwrap_or_else(|p| p.into_inner());
            cache.retain(|k| k.url != url && fresh(k));
            if cache.len() >= LOGOS_KEPT {
                cache.remove(0);
            }
            cache.push(Kept { url, at: Instant::now(), logo: l.clone() });
            l
        }
    };
    let (ct, bytes) = logo.ok_or_else(|| ApiError::not_found("logo"))?;
    Ok(View::asset(ct, bytes, 600))
}
