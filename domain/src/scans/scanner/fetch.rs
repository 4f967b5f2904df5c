//! What the rules read about a site, fetched through `shared::outbound` (the SSRF-safe
//! client: each URL and each resolved address is checked, redirects are followed here one hop
//! at a time so every hop is checked too). The page is read up to 5 MB (decompressed; the
//! read stops there), robots.txt is honoured for everything beyond the page itself, and at
//! most 20 same-site assets are measured with HEAD.

use crate::scans::html;
use crate::scans::rules::{Asset, Site};
use shared::outbound::{Client, UrlError, UrlPolicy};
use std::io::Read;
use std::time::{Duration, Instant};

pub const MAX_HTML: usize = 5 * 1024 * 1024;
const MAX_TEXT: usize = 512 * 1024;
pub const MAX_HOPS: usize = 10;
const MAX_ASSETS: usize = 20;
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
pub const USER_AGENT: &str = "WorkspacePlatformScanner/1.0 (website audit; honours robots.txt)";

/// Why a site could not be scanned: the scan's `error.code` and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: &'static str,
    pub message: String,
}

fn failure(code: &'static str, message: impl Into<String>) -> Failure {
    Failure { code, message: message.into() }
}

/// The scanner's two clients: one that reads sites whatever their certificate, one that
/// verifies it (to report it).
pub struct Http {
    any_cert: Client,
    verifying: Client,
    policy: UrlPolicy,
}

impl Http {
    pub fn new(policy: UrlPolicy) -> Result<Self, String> {
        let policy = UrlPolicy { allow_http: true, ..policy };
        Ok(Self {
            any_cert: Client::new_accepting_any_certificate(policy, REQUEST_TIMEOUT, USER_AGENT)?,
            verifying: Client::new(policy, REQUEST_TIMEOUT, USER_AGENT)?,
            policy,
        })
    }
}

struct Got {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    ttfb_ms: u64,
    /// The body went past the cap; what was read is kept.
    truncated: bool,
    gzip: bool,
}

impl Got {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

fn url_failure(e: UrlError) -> Failure {
    match e {
        UrlError::Blocked(m) => failure("blocked_address", m),
        UrlError::Invalid(m) | UrlError::Client(m) => failure("unreachable", m),
    }
}

fn request_failure(e: &reqwest::Error) -> Failure {
    let code = match shared::outbound::error_kind(e) {
        "blocked_address" => "blocked_address",
        "dns" => "dns_failed",
        "timeout" => "timeout",
        _ => "unreachable",
    };
    failure(code, format!("{code}: {}", shared::outbound::error_kind(e)))
}

/// GET (or HEAD) a URL, reading at most `cap` bytes of its (decompressed) body.
async fn get(client: &Client, method: reqwest::Method, url: &str, cap: usize) -> Result<Got, Failure> {
    let started = Instant::now();
    let req = client.request(method, url).map_err(url_failure)?.header("accept-encoding", "gzip").header("accept", "text/html,*/*;q=0.8");
    let resp = req.send().await.map_err(|e| request_failure(&e))?;
    let ttfb_ms = started.elapsed().as_millis() as u64;
    let status = resp.status().as_u16();
    let headers: Vec<(String, String)> =
        resp.headers().iter().map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned())).collect();
    let gzip = headers.iter().any(|(k, v)| k == "content-encoding" && v.to_ascii_lowercase().contains("gzip"));
    let mut raw = Vec::new();
    let mut truncated = false;
    let mut resp = resp;
    while let Some(chunk) = resp.chunk().await.map_err(|e| request_failure(&e))? {
        raw.extend_from_slice(&chunk);
        if raw.len() > cap {
            truncated = true;
            break;
        }
    }
    let body = if gzip {
        // Decompressed up to the cap too (a small gzip can inflate to gigabytes).
        let mut out = Vec::new();
        let _ = flate2::read::GzDecoder::new(&raw[..]).take(cap as u64 + 1).read_to_end(&mut out);
        truncated |= out.len() > cap;
        out.truncate(cap);
        out
    } else {
        raw.truncate(cap);
        raw
    };
    Ok(Got { status, headers, body, ttfb_ms, truncated, gzip })
}

/// The rules of robots.txt that apply to this scanner: its own group, else `*`.
fn disallowed(robots: &str) -> Vec<String> {
    let mut groups: Vec<(Vec<String>, Vec<String>)> = vec![];
    let mut in_rules = true;
    for line in robots.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let Some((k, v)) = line.split_once(':') else { continue };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_string());
        if k == "user-agent" {
            if in_rules {
                groups.push((vec![], vec![]));
                in_rules = false;
            }
            if let Some(g) = groups.last_mut() {
                g.0.push(v.to_ascii_lowercase());
            }
        } else {
            in_rules = true;
            if k == "disallow"
                && !v.is_empty()
                && let Some(g) = groups.last_mut()
            {
                g.1.push(v);
            }
        }
    }
    let own = groups.iter().find(|(agents, _)| agents.iter().any(|a| a != "*" && USER_AGENT.to_ascii_lowercase().starts_with(a.as_str())));
    own.or_else(|| groups.iter().find(|(agents, _)| agents.iter().any(|a| a == "*"))).map(|(_, d)| d.clone()).unwrap_or_default()
}

fn allowed(rules: &[String], path: &str) -> bool {
    !rules.iter().any(|d| path.starts_with(d.as_str()))
}

/// A same-site asset's size and caching, from a HEAD.
async fn asset(http: &Http, kind: &'static str, u: &url::Url) -> Option<Asset> {
    let g = get(&http.any_cert, reqwest::Method::HEAD, u.as_str(), 0).await.ok().filter(|g| g.status < 400)?;
    Some(Asset {
        kind,
        url: u.to_string(),
        bytes: g.header("content-length").and_then(|l| l.parse().ok()),
        cache_control: g.header("cache-control").map(String::from),
    })
}

/// Collect everything the rules read.
pub async fn site(http: &Http, asked: &url::Url) -> Result<Site, Failure> {
    // The page, one redirect hop at a time.
    let mut chain = vec![asked.to_string()];
    let mut current = asked.clone();
    let page = loop {
        let got = get(&http.any_cert, reqwest::Method::GET, current.as_str(), MAX_HTML).await?;
        if (300..400).contains(&got.status)
            && let Some(location) = got.header("location")
        {
            if chain.len() > MAX_HOPS {
                return Err(failure("unreachable", format!("more than {MAX_HOPS} redirects: {}", chain.join(" -> "))));
            }
            current = current.join(location).map_err(|e| failure("unreachable", format!("a redirect to an invalid URL ({e})")))?;
            chain.push(current.to_string());
            continue;
        }
        break got;
    };
    if page.truncated {
        return Err(failure("too_large", format!("the page is larger than {} MB", MAX_HTML / (1024 * 1024))));
    }
    if page.status >= 400 {
        return Err(failure("unreachable", format!("the page answered HTTP {}", page.status)));
    }
    let content_type = page.header("content-type").unwrap_or("").to_ascii_lowercase();
    if !(content_type.contains("text/html") || content_type.contains("application/xhtml+xml")) {
        return Err(failure(
            "not_html",
            format!("the page is {}", if content_type.is_empty() { "of no declared type" } else { &content_type }),
        ));
    }
    let facts = html::extract(&page.body);
    let https = current.scheme() == "https";

    // Transport: https, the http redirect, the certificate.
    let (https_available, http_redirects_to_https, certificate_valid) = if https {
        let verified = http.verifying.request(reqwest::Method::HEAD, current.as_str()).map_err(url_failure)?.send().await.is_ok();
        let redirects = if asked.scheme() == "http" {
            Some(true)
        } else {
            let mut plain = current.clone();
            let _ = plain.set_scheme("http");
            let _ = plain.set_port(None);
            plain.set_path("/");
            plain.set_query(None);
            match get(&http.any_cert, reqwest::Method::GET, plain.as_str(), MAX_TEXT).await {
                Ok(g) => Some((300..400).contains(&g.status) && g.header("location").is_some_and(|l| l.starts_with("https://"))),
                // Nothing on port 80 at all: nothing to redirect.
                Err(_) => None,
            }
        };
        (Some(true), redirects, Some(verified))
    } else {
        let mut secure = current.clone();
        let _ = secure.set_scheme("https");
        let _ = secure.set_port(None);
        secure.set_path("/");
        secure.set_query(None);
        let ok = get(&http.any_cert, reqwest::Method::HEAD, secure.as_str(), 0).await.is_ok();
        (Some(ok), Some(false), None)
    };

    // robots.txt, then what it allows: the sitemap, llms.txt, the assets.
    let origin = current.origin().ascii_serialization();
    let text = |g: Got| (g.status == 200).then(|| String::from_utf8_lossy(&g.body).into_owned());
    let robots_txt = get(&http.any_cert, reqwest::Method::GET, &format!("{origin}/robots.txt"), MAX_TEXT).await.ok().and_then(text);
    let rules = robots_txt.as_deref().map(disallowed).unwrap_or_default();
    let sitemap_url = robots_txt
        .as_deref()
        .and_then(|r| {
            r.lines()
                .find_map(|l| l.trim().strip_prefix("Sitemap:").or_else(|| l.trim().strip_prefix("sitemap:")).map(|u| u.trim().to_string()))
        })
        .and_then(|u| current.join(&u).ok())
        .filter(|u| u.origin() == current.origin())
        .unwrap_or_else(|| current.join("/sitemap.xml").expect("a path joins"));
    let sitemap = if allowed(&rules, sitemap_url.path()) {
        match get(&http.any_cert, reqwest::Method::GET, sitemap_url.as_str(), MAX_HTML).await {
            Ok(g) if g.status == 200 => {
                let body = String::from_utf8_lossy(&g.body);
                let trimmed = body.trim_start_matches('\u{feff}').trim_start();
                let root = trimmed.strip_prefix("<?xml").map_or(trimmed, |r| r.split_once("?>").map_or("", |(_, rest)| rest.trim_start()));
                Some(
                    (root.starts_with("<urlset") && body.contains("</urlset>"))
                        || (root.starts_with("<sitemapindex") && body.contains("</sitemapindex>")),
                )
            }
            _ => None,
        }
    } else {
        None
    };
    let llms_txt = if allowed(&rules, "/llms.txt") {
        get(&http.any_cert, reqwest::Method::GET, &format!("{origin}/llms.txt"), MAX_TEXT).await.ok().and_then(text)
    } else {
        None
    };
    let candidates: Vec<(&'static str, url::Url)> = facts
        .scripts
        .iter()
        .map(|(u, _)| ("script", u))
        .chain(facts.stylesheets.iter().map(|u| ("style", u)))
        .chain(facts.image_urls.iter().map(|u| ("image", u)))
        .filter_map(|(k, u)| current.join(u).ok().map(|u| (k, u)))
        .filter(|(_, u)| u.origin() == current.origin() && allowed(&rules, u.path()))
        .take(MAX_ASSETS)
        .collect();
    let mut assets: Vec<Asset> = vec![];
    for chunk in candidates.chunks(4) {
        let measured = futures_util::future::join_all(chunk.iter().map(|(kind, u)| asset(http, kind, u))).await;
        assets.extend(measured.into_iter().flatten());
    }

    // Mail authentication: only where DNS may be asked (never from the local stack).
    let host = current.host_str().unwrap_or_default().to_string();
    let is_ip = host.parse::<std::net::IpAddr>().is_ok() || host.starts_with('[');
    let mail_dns = if http.policy.loopback_only || is_ip { None } else { super::dns::mail_records(&host).await };

    Ok(Site {
        final_url: current.to_string(),
        https_available,
        http_redirects_to_https,
        certificate_valid,
        redirects: chain,
        html_bytes: page.body.len(),
        ttfb_ms: page.ttfb_ms,
        compressed: page.gzip,
        headers: page.headers,
        html: facts,
        robots_txt,
        sitemap,
        llms_txt,
        assets,
        mail_dns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn robots_groups_apply_to_this_scanner_or_everyone() {
        let r = "User-agent: *\nDisallow: /private\n\nUser-agent: WorkspacePlatformScanner\nDisallow: /no-scans\nDisallow:\n";
        assert_eq!(disallowed(r), vec!["/no-scans"]);
        assert_eq!(disallowed("User-agent: *\nDisallow: /private\n"), vec!["/private"]);
        assert!(allowed(&disallowed("User-agent: *\nDisallow: /private\n"), "/llms.txt"));
        assert!(!allowed(&disallowed("User-agent: *\nDisallow: /\n"), "/llms.txt"));
        assert!(disallowed("").is_empty());
    }
}
