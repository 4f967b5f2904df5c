//! Website scans: a customer asks for an audit of a site and gets a score, sub-scores and
//! evidenced findings. What a page's HTML says is `html`, the rules and their scoring `rules`;
//! this module holds the scan object, its keys and its transitions (queued -> running ->
//! completed | failed). The fetching is the scanner's (`functions/scanner`).
//!
//! Items (pk = WS#<workspace>): the scan (`SCAN#<id>`; GSI1 by host, GSI2 by status) and, for
//! 10 minutes, a claim of its normalised URL (`SCANURL#<sha256>`), so a second request for the
//! same URL in that window answers the same scan, also when two race.

pub mod html;
pub mod rules;
pub mod scanner;
mod store;

pub use crate::ids::ScanId;
use rules::{Category, Finding};
use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::ids::Timestamp;
use shared::{ApiError, ApiResult};
pub use store::{enqueue_after, list, load, record, release_host_slot, request, save, take_host_slot};
use utoipa::ToSchema;

/// A second `POST /scans` of a URL within this window answers the first scan.
pub const DEDUP_SECS: i64 = 600;

/// A scan whose worker died is tried this many times, then `failed`.
pub const MAX_ATTEMPTS: u32 = 3;

/// Scans running against one host at once, across workspaces and containers.
pub const SLOTS_PER_HOST: usize = 2;

/// A slot's lease: above the scan's 60 s budget, so a dead scanner's slot frees itself.
pub const SLOT_LEASE_MS: i64 = 90_000;

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ScanStatus {
    Queued,
    Running,
    Completed,
    Failed,
}

impl ScanStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ScanStatus::Queued => "queued",
            ScanStatus::Running => "running",
            ScanStatus::Completed => "completed",
            ScanStatus::Failed => "failed",
        }
    }
}

/// Why a scan failed: `dns_failed`, `unreachable`, `timeout`, `blocked_address`,
/// `too_large`, `not_html` (or `internal` when the scanner itself kept failing).
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq, Eq)]
#[schema(as = ScanError)]
pub struct ScanFailure {
    pub code: String,
    pub message: String,
}

/// Each category's score, 0-100, or `null` when it could not be measured.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, Default, PartialEq, Eq)]
#[schema(as = ScanCategories)]
pub struct Categories {
    pub security: Option<u8>,
    pub seo: Option<u8>,
    pub performance: Option<u8>,
    pub ai_readiness: Option<u8>,
    pub privacy: Option<u8>,
    pub email: Option<u8>,
}

impl Categories {
    pub fn of(scores: &[(Category, Option<u8>)]) -> Self {
        let get = |c: Category| scores.iter().find(|(x, _)| *x == c).and_then(|(_, s)| *s);
        Self {
            security: get(Category::Security),
            seo: get(Category::Seo),
            performance: get(Category::Performance),
            ai_readiness: get(Category::AiReadiness),
            privacy: get(Category::Privacy),
            email: get(Category::Email),
        }
    }
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct Scan {
    /// `scan_...`
    pub id: ScanId,
    /// Always `scan`.
    pub object: String,
    /// The URL asked for, normalised.
    pub url: String,
    pub host: String,
    /// Where the redirects ended.
    pub final_url: Option<String>,
    pub status: ScanStatus,
    pub error: Option<ScanFailure>,
    /// 0-100, when completed.
    pub score: Option<u8>,
    /// A+ .. F on the HTTP Observatory's scale, when completed.
    pub grade: Option<String>,
    pub categories: Option<Categories>,
    #[serde(default)]
    pub findings: Vec<Finding>,
    pub scoring_version: Option<String>,
    #[serde(default)]
    pub attempts: u32,
    pub created_at: Timestamp,
    pub started_at: Option<Timestamp>,
    pub completed_at: Option<Timestamp>,
    pub updated_at: Timestamp,
}

/// A URL to scan: http or https, a host, no credentials; fragments dropped, the host lower-case.
/// An IP literal must pass the deployment's address rules now; names are checked on every
/// connection by the scanner.
pub fn normalise_url(raw: &str, policy: shared::outbound::UrlPolicy) -> Result<url::Url, String> {
    if raw.len() > shared::outbound::MAX_URL_LEN {
        return Err(format!("at most {} characters", shared::outbound::MAX_URL_LEN));
    }
    let mut u = url::Url::parse(raw.trim()).map_err(|e| format!("not a URL ({e})"))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err("must be http or https".into());
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err("must not carry credentials".into());
    }
    // A DNS name has at most 253 characters (and the host is part of an index key).
    if u.host_str().is_some_and(|h| h.len() > 253) {
        return Err("the host name is longer than 253 characters".into());
    }
    let ip = match u.host() {
        None => return Err("must name a host".into()),
        Some(url::Host::Domain("")) => return Err("must name a host".into()),
        Some(url::Host::Domain(_)) => None,
        Some(url::Host::Ipv4(v4)) => Some(std::net::IpAddr::V4(v4)),
        Some(url::Host::Ipv6(v6)) => Some(std::net::IpAddr::V6(v6)),
    };
    if ip.is_some_and(|ip| !shared::outbound::ip_allowed(ip, policy)) {
        return Err("names an address the scanner may not reach".into());
    }
    u.set_fragment(None);
    Ok(u)
}

/// What `POST /scans` did: a new scan, or the one of the same URL from the last 10 minutes.
pub enum Requested {
    Created(Scan),
    Existing(Scan),
}

/// The scanner's message: which scan to run.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Job {
    #[serde(deserialize_with = "WorkspaceId::from_record")]
    pub workspace_id: WorkspaceId,
    pub scan_id: ScanId,
}

fn message(ws: &WorkspaceId, scan_id: &str) -> ApiResult<String> {
    serde_json::to_string(&Job { workspace_id: ws.clone(), scan_id: ScanId::trusted(scan_id) }).map_err(|e| ApiError::internal(e))
}

/// An event's payload: the scan without its findings (which can be long).
fn summary(scan: &Scan) -> serde_json::Value {
    serde_json::json!({
        "id": scan.id, "object": "scan", "url": scan.url, "final_url": scan.final_url, "status": scan.status,
        "error": scan.error, "score": scan.score, "grade": scan.grade, "categories": scan.categories,
        "scoring_version": scan.scoring_version, "completed_at": scan.completed_at,
    })
}

/// Score a completed scan from the scanner's findings.
pub fn complete(scan: &mut Scan, final_url: String, findings: Vec<Finding>, now: shared::ids::Timestamp) {
    let cats = rules::category_scores(&findings);
    let score = rules::overall(&cats);
    scan.final_url = Some(final_url);
    scan.status = ScanStatus::Completed;
    scan.score = Some(score);
    scan.grade = Some(rules::grade(score).to_string());
    scan.categories = Some(Categories::of(&cats));
    scan.findings = findings;
    scan.scoring_version = Some(rules::SCORING_VERSION.into());
    scan.error = None;
    scan.completed_at = Some(now);
    scan.updated_at = now;
}

pub fn fail(scan: &mut Scan, code: &str, message: String, now: shared::ids::Timestamp) {
    scan.status = ScanStatus::Failed;
    scan.error = Some(ScanFailure { code: code.into(), message });
    scan.completed_at = Some(now);
    scan.updated_at = now;
}

/// The filters of `GET /scans` (`limit` and `cursor` are the page's).
#[derive(Deserialize)]
pub struct ListScans {
    pub status: Option<ScanStatus>,
    pub host: Option<String>,
}

impl ListScans {
    /// The host as the index keys it.
    pub fn normalized(mut self) -> Self {
        self.host = self.host.map(|h| h.trim().to_ascii_lowercase());
        self
    }

    /// The filters as a page's cursor binds them.
    pub fn bound(&self) -> [(&'static str, Option<&str>); 2] {
        [("status", self.status.map(ScanStatus::as_str)), ("host", self.host.as_deref())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::outbound::UrlPolicy;

    #[test]
    fn urls_are_normalised_and_checked() {
        let prod = UrlPolicy::default();
        assert_eq!(normalise_url("https://Example.COM/a?b#frag", prod).unwrap().as_str(), "https://example.com/a?b");
        assert!(normalise_url("http://example.com", prod).is_ok());
        for bad in ["ftp://example.com", "https://u:p@example.com", "not a url", "http://169.254.169.254/latest", "http://10.0.0.1/"] {
            assert!(normalise_url(bad, prod).is_err(), "{bad}");
        }
        assert!(normalise_url("http://127.0.0.1:8080/", prod).is_err());
        assert!(normalise_url(&format!("https://{}.example.com/", "a.".repeat(200)), prod).is_err());
        assert!(
            normalise_url("http://127.0.0.1:8080/", UrlPolicy { allow_loopback: true, loopback_only: true, allow_http: false }).is_ok()
        );
    }
}
