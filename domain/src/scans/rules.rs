//! The scan's rules and scoring (docs/scan-scoring.md, versioned by [`SCORING_VERSION`]).
//! Each rule reads what the scanner collected ([`Site`]) and answers passed, failed, or
//! `None` when it cannot be measured (never a guess). A failed rule costs its weight in its
//! category; a category scores the share of its measured weight that passed; the overall
//! score is the weighted mean of the measured categories, graded on the HTTP Observatory's
//! scale.

use super::html::HtmlFacts;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub const SCORING_VERSION: &str = "2026-11.1";

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Security,
    Seo,
    Performance,
    AiReadiness,
    Privacy,
    Email,
}

impl Category {
    pub const ALL: [Category; 6] =
        [Category::Security, Category::Seo, Category::Performance, Category::AiReadiness, Category::Privacy, Category::Email];

    /// The category's share of the overall score.
    pub fn weight(self) -> u32 {
        match self {
            Category::Security => 30,
            Category::Seo => 20,
            Category::Performance => 15,
            Category::AiReadiness => 10,
            Category::Privacy => 15,
            Category::Email => 10,
        }
    }
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Critical,
    High,
    Medium,
    Low,
    Info,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[schema(as = ScanFinding)]
pub struct Finding {
    pub rule_id: String,
    pub category: Category,
    pub severity: Severity,
    /// `null` when the rule could not be measured.
    pub passed: Option<bool>,
    /// Points this finding cost its category (0 or negative).
    pub score_impact: i32,
    pub title: String,
    /// What was seen (a header's value, the URLs at fault).
    pub evidence: String,
    pub remediation: String,
}

/// A static asset the page references, as fetched (HEAD or a ranged GET).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Asset {
    /// `script`, `style` or `image`.
    pub kind: &'static str,
    pub url: String,
    pub bytes: Option<u64>,
    pub cache_control: Option<String>,
}

/// The domain's mail authentication records, as DNS answered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MailDns {
    pub spf: Option<String>,
    pub dmarc: Option<String>,
}

/// Everything the scanner collected about a site.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Site {
    pub final_url: String,
    /// None when not checked.
    pub https_available: Option<bool>,
    pub http_redirects_to_https: Option<bool>,
    pub certificate_valid: Option<bool>,
    /// The redirect chain from the asked URL, the final URL last.
    pub redirects: Vec<String>,
    /// Lower-case names; repeated headers (`set-cookie`) repeat.
    pub headers: Vec<(String, String)>,
    pub html: HtmlFacts,
    pub html_bytes: usize,
    pub ttfb_ms: u64,
    /// The page came gzip- or br-encoded.
    pub compressed: bool,
    /// `None`: no robots.txt.
    pub robots_txt: Option<String>,
    /// `None`: no sitemap found; `Some(parseable)`.
    pub sitemap: Option<bool>,
    pub llms_txt: Option<String>,
    pub assets: Vec<Asset>,
    /// `None`: DNS could not answer.
    pub mail_dns: Option<MailDns>,
}

impl Site {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
    fn headers_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers.iter().filter(move |(n, _)| n == name).map(|(_, v)| v.as_str())
    }
    fn is_https(&self) -> bool {
        self.final_url.starts_with("https://")
    }
    fn host(&self) -> String {
        url::Url::parse(&self.final_url).ok().and_then(|u| u.host_str().map(str::to_string)).unwrap_or_default()
    }
    /// Script and iframe URLs of the raw HTML, resolved against the page.
    fn third_party(&self, urls: &[String]) -> Vec<String> {
        let host = self.host();
        let base = url::Url::parse(&self.final_url).ok();
        urls.iter()
            .filter_map(|u| base.as_ref().and_then(|b| b.join(u).ok()))
            .filter(|u| u.host_str().is_some_and(|h| h != host))
            .map(|u| u.to_string())
            .collect()
    }
}

type Check = fn(&Site) -> (Option<bool>, String);

struct Rule {
    id: &'static str,
    category: Category,
    severity: Severity,
    weight: u32,
    title: &'static str,
    remediation: &'static str,
    check: Check,
}

/// Trackers a page loads before any consent: hosts of analytics and ad scripts.
pub const TRACKER_HOSTS: &[&str] = &[
    "google-analytics.com",
    "googletagmanager.com",
    "doubleclick.net",
    "connect.facebook.net",
    "static.hotjar.com",
    "script.hotjar.com",
    "snap.licdn.com",
    "analytics.tiktok.com",
    "bat.bing.com",
    "cdn.segment.com",
    "js.hs-scripts.com",
    "static.ads-twitter.com",
    "mc.yandex.ru",
    "cdn.mxpnl.com",
];

/// Consent managers, by the hosts or globals of their scripts.
pub const CONSENT_MANAGERS: &[(&str, &str)] = &[
    ("Cookiebot", "consent.cookiebot.com"),
    ("OneTrust", "cdn.cookielaw.org"),
    ("CookieYes", "cdn-cookieyes.com"),
    ("Usercentrics", "app.usercentrics.eu"),
    ("Didomi", "sdk.privacy-center.org"),
    ("Iubenda", "cdn.iubenda.com"),
    ("Klaro", "klaro"),
    ("Osano", "cmp.osano.com"),
];

/// AI crawlers a robots.txt may block.
pub const AI_CRAWLERS: &[&str] = &[
    "GPTBot",
    "ChatGPT-User",
    "OAI-SearchBot",
    "ClaudeBot",
    "anthropic-ai",
    "Google-Extended",
    "PerplexityBot",
    "CCBot",
    "Bytespider",
    "Applebot-Extended",
];

fn hsts_max_age(v: &str) -> Option<u64> {
    v.split(';').find_map(|p| p.trim().to_ascii_lowercase().strip_prefix("max-age=").and_then(|n| n.trim_matches('"').parse().ok()))
}

fn csp(s: &Site) -> Option<String> {
    s.header("content-security-policy").map(str::to_ascii_lowercase)
}

/// The sources of a CSP directive (`script-src` falls back to `default-src`).
fn directive(csp: &str, name: &str) -> Option<String> {
    csp.split(';')
        .map(str::trim)
        .find_map(|d| d.strip_prefix(name).filter(|r| r.is_empty() || r.starts_with(' ')).map(|r| r.trim().to_string()))
}

fn yes(ok: bool, evidence: impl Into<String>) -> (Option<bool>, String) {
    (Some(ok), evidence.into())
}

fn unmeasured(why: &str) -> (Option<bool>, String) {
    (None, why.to_string())
}

/// Group `User-agent` lines with their `Disallow` lines; answers the agents that disallow `/`.
fn robots_blocks_all(robots: &str) -> Vec<String> {
    let mut blocked = vec![];
    let mut agents: Vec<String> = vec![];
    let mut in_rules = false;
    for line in robots.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let Some((k, v)) = line.split_once(':') else { continue };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        if k == "user-agent" {
            if in_rules {
                agents.clear();
                in_rules = false;
            }
            agents.push(v.to_string());
        } else {
            in_rules = true;
            if k == "disallow" && v == "/" {
                blocked.extend(agents.iter().cloned());
            }
        }
    }
    blocked
}

const RULES: &[Rule] = &[
    // ---------- security: transport ----------
    Rule {
        id: "transport.https",
        category: Category::Security,
        severity: Severity::Critical,
        weight: 20,
        title: "The site is served over HTTPS",
        remediation: "Serve the site over HTTPS with a certificate for its host (e.g. from Let's Encrypt).",
        check: |s| match s.https_available {
            Some(ok) => yes(ok, if ok { "https answered" } else { "https did not answer" }),
            None => yes(s.is_https(), s.final_url.clone()),
        },
    },
    Rule {
        id: "transport.http_redirect",
        category: Category::Security,
        severity: Severity::High,
        weight: 10,
        title: "HTTP redirects to HTTPS",
        remediation: "Answer every http:// request with a 301 to the same path on https://.",
        check: |s| match s.http_redirects_to_https {
            Some(ok) => yes(ok, s.redirects.join(" -> ")),
            None => unmeasured("http was not checked"),
        },
    },
    Rule {
        id: "transport.certificate",
        category: Category::Security,
        severity: Severity::High,
        weight: 5,
        title: "The certificate is valid for the host",
        remediation: "Install a certificate issued by a public CA that names the host and has not expired.",
        check: |s| match s.certificate_valid {
            Some(ok) => yes(ok, if ok { "verified against the public roots" } else { "not trusted for this host" }),
            None => unmeasured("no https"),
        },
    },
    Rule {
        id: "transport.redirect_chain",
        category: Category::Security,
        severity: Severity::Low,
        weight: 2,
        title: "At most two redirects before the page",
        remediation: "Link to the final URL; each redirect costs a round trip.",
        check: |s| yes(s.redirects.len() <= 3, format!("{} hops: {}", s.redirects.len().saturating_sub(1), s.redirects.join(" -> "))),
    },
    Rule {
        id: "transport.hsts",
        category: Category::Security,
        severity: Severity::High,
        weight: 10,
        title: "Strict-Transport-Security for at least six months",
        remediation: "Send Strict-Transport-Security: max-age=31536000; includeSubDomains on every https response.",
        check: |s| {
            if !s.is_https() {
                return unmeasured("not https");
            }
            match s.header("strict-transport-security") {
                Some(v) => yes(hsts_max_age(v).is_some_and(|a| a >= 15_552_000), v),
                None => yes(false, "no Strict-Transport-Security header"),
            }
        },
    },
    Rule {
        id: "transport.hsts_preload",
        category: Category::Security,
        severity: Severity::Info,
        weight: 2,
        title: "HSTS includes subdomains and is preload-ready",
        remediation: "Add includeSubDomains; preload and submit the domain to hstspreload.org.",
        check: |s| match s.header("strict-transport-security") {
            Some(v) => {
                let l = v.to_ascii_lowercase();
                yes(l.contains("includesubdomains") && l.contains("preload"), v)
            }
            None if s.is_https() => yes(false, "no Strict-Transport-Security header"),
            None => unmeasured("not https"),
        },
    },
    // ---------- security: headers ----------
    Rule {
        id: "headers.csp",
        category: Category::Security,
        severity: Severity::High,
        weight: 15,
        title: "A Content-Security-Policy is set",
        remediation: "Send a Content-Security-Policy, starting from default-src 'self', and allow what the page needs.",
        check: |s| match s.header("content-security-policy") {
            Some(v) => yes(true, v),
            None => yes(false, "no Content-Security-Policy header"),
        },
    },
    Rule {
        id: "headers.csp_unsafe",
        category: Category::Security,
        severity: Severity::Medium,
        weight: 10,
        title: "The CSP allows no unsafe-inline or unsafe-eval scripts",
        remediation: "Move inline scripts to files (or use nonces/hashes) and drop 'unsafe-inline' and 'unsafe-eval' from script-src.",
        check: |s| match csp(s) {
            Some(c) => {
                let scripts = directive(&c, "script-src").or_else(|| directive(&c, "default-src")).unwrap_or_default();
                let unsafe_ = scripts.contains("'unsafe-inline'") || scripts.contains("'unsafe-eval'");
                yes(!unsafe_, format!("script sources: {scripts}"))
            }
            None => unmeasured("no Content-Security-Policy"),
        },
    },
    Rule {
        id: "headers.csp_default_src",
        category: Category::Security,
        severity: Severity::Low,
        weight: 5,
        title: "The CSP has a default-src",
        remediation: "Add default-src 'self' (or 'none') so every resource type is restricted.",
        check: |s| match csp(s) {
            Some(c) => yes(directive(&c, "default-src").is_some(), c),
            None => unmeasured("no Content-Security-Policy"),
        },
    },
    Rule {
        id: "headers.x_content_type_options",
        category: Category::Security,
        severity: Severity::Medium,
        weight: 5,
        title: "X-Content-Type-Options: nosniff",
        remediation: "Send X-Content-Type-Options: nosniff.",
        check: |s| {
            let v = s.header("x-content-type-options").unwrap_or("");
            yes(v.trim().eq_ignore_ascii_case("nosniff"), if v.is_empty() { "absent" } else { v })
        },
    },
    Rule {
        id: "headers.frame_options",
        category: Category::Security,
        severity: Severity::Medium,
        weight: 5,
        title: "Framing is restricted (X-Frame-Options or frame-ancestors)",
        remediation: "Send Content-Security-Policy: frame-ancestors 'self' (or X-Frame-Options: DENY).",
        check: |s| {
            let xfo = s.header("x-frame-options").unwrap_or("").trim().to_ascii_uppercase();
            let fa = csp(s).and_then(|c| directive(&c, "frame-ancestors"));
            let ok = xfo == "DENY" || xfo == "SAMEORIGIN" || fa.as_deref().is_some_and(|f| !f.contains('*'));
            yes(
                ok,
                format!(
                    "X-Frame-Options: {}; frame-ancestors: {}",
                    if xfo.is_empty() { "absent" } else { &xfo },
                    fa.as_deref().unwrap_or("absent")
                ),
            )
        },
    },
    Rule {
        id: "headers.referrer_policy",
        category: Category::Security,
        severity: Severity::Low,
        weight: 5,
        title: "A privacy-preserving Referrer-Policy",
        remediation: "Send Referrer-Policy: strict-origin-when-cross-origin (or stricter).",
        check: |s| {
            let v = s.header("referrer-policy").unwrap_or("").to_ascii_lowercase();
            let last = v.split(',').next_back().unwrap_or("").trim().to_string();
            let ok = ["no-referrer", "same-origin", "strict-origin", "strict-origin-when-cross-origin"].contains(&last.as_str());
            yes(ok, if v.is_empty() { "absent".to_string() } else { v })
        },
    },
    Rule {
        id: "headers.permissions_policy",
        category: Category::Security,
        severity: Severity::Low,
        weight: 3,
        title: "A Permissions-Policy is set",
        remediation: "Send Permissions-Policy turning off what the site does not use (camera=(), microphone=(), geolocation=()).",
        check: |s| match s.header("permissions-policy") {
            Some(v) => yes(true, v),
            None => yes(false, "absent"),
        },
    },
    Rule {
        id: "cookies.flags",
        category: Category::Security,
        severity: Severity::Medium,
        weight: 5,
        title: "Session cookies are Secure, HttpOnly and SameSite",
        remediation: "Set Secure; HttpOnly; SameSite=Lax (or Strict) on session and authentication cookies.",
        check: |s| {
            let cookies: Vec<&str> = s.headers_named("set-cookie").collect();
            if cookies.is_empty() {
                return unmeasured("no cookies set");
            }
            let session_like = |c: &str| {
                let name = c.split('=').next().unwrap_or("").to_ascii_lowercase();
                ["sess", "sid", "auth", "token", "login", "jwt"].iter().any(|k| name.contains(k))
            };
            let bad: Vec<String> = cookies
                .iter()
                .filter(|c| session_like(c))
                .filter(|c| {
                    let l = c.to_ascii_lowercase();
                    !(l.contains("; secure") && l.contains("httponly") && l.contains("samesite="))
                })
                .map(|c| c.split(';').next().unwrap_or("").split('=').next().unwrap_or("").to_string())
                .collect();
            if !cookies.iter().any(|c| session_like(c)) {
                return unmeasured("no session-like cookies");
            }
            yes(
                bad.is_empty(),
                if bad.is_empty() { "session cookies are flagged".to_string() } else { format!("missing flags: {}", bad.join(", ")) },
            )
        },
    },
    Rule {
        id: "content.sri",
        category: Category::Security,
        severity: Severity::Medium,
        weight: 5,
        title: "Third-party scripts carry Subresource Integrity",
        remediation: "Add integrity=\"sha384-...\" and crossorigin=\"anonymous\" to scripts loaded from other hosts.",
        check: |s| {
            let host = s.host();
            let base = url::Url::parse(&s.final_url).ok();
            let third: Vec<&(String, bool)> = s
                .html
                .scripts
                .iter()
                .filter(|(u, _)| base.as_ref().and_then(|b| b.join(u).ok()).is_some_and(|u| u.host_str().is_some_and(|h| h != host)))
                .collect();
            if third.is_empty() {
                return unmeasured("no third-party scripts");
            }
            let missing: Vec<&str> = third.iter().filter(|(_, i)| !i).map(|(u, _)| u.as_str()).collect();
            yes(missing.is_empty(), if missing.is_empty() { "all have integrity".to_string() } else { missing.join(", ") })
        },
    },
    Rule {
        id: "content.mixed",
        category: Category::Security,
        severity: Severity::High,
        weight: 10,
        title: "No mixed content",
        remediation: "Load every script, style, image and frame over https.",
        check: |s| {
            if !s.is_https() {
                return unmeasured("not https");
            }
            let h = &s.html;
            let http: Vec<&str> = h
                .scripts
                .iter()
                .map(|(u, _)| u.as_str())
                .chain(h.stylesheets.iter().map(String::as_str))
                .chain(h.image_urls.iter().map(String::as_str))
                .chain(h.iframes.iter().map(String::as_str))
                .filter(|u| u.to_ascii_lowercase().starts_with("http://"))
                .collect();
            yes(http.is_empty(), if http.is_empty() { "none".to_string() } else { http.join(", ") })
        },
    },
    // ---------- SEO ----------
    Rule {
        id: "seo.title",
        category: Category::Seo,
        severity: Severity::High,
        weight: 10,
        title: "A title of 10 to 70 characters",
        remediation: "Give the page a unique <title> of about 50 to 60 characters.",
        check: |s| match &s.html.title {
            Some(t) => yes((10..=70).contains(&t.chars().count()), format!("{} characters: {t}", t.chars().count())),
            None => yes(false, "no <title>"),
        },
    },
    Rule {
        id: "seo.meta_description",
        category: Category::Seo,
        severity: Severity::Medium,
        weight: 8,
        title: "A meta description",
        remediation: "Add <meta name=\"description\"> summarising the page in 50 to 160 characters.",
        check: |s| match s.html.meta_description.as_deref().filter(|d| !d.is_empty()) {
            Some(d) => yes(true, d),
            None => yes(false, "absent"),
        },
    },
    Rule {
        id: "seo.h1",
        category: Category::Seo,
        severity: Severity::Low,
        weight: 5,
        title: "Exactly one h1",
        remediation: "Give the page one <h1> naming its subject.",
        check: |s| yes(s.html.h1_count == 1, format!("{} h1 elements", s.html.h1_count)),
    },
    Rule {
        id: "seo.canonical",
        category: Category::Seo,
        severity: Severity::Low,
        weight: 5,
        title: "A canonical URL",
        remediation: "Add <link rel=\"canonical\" href=\"...\"> with the page's preferred URL.",
        check: |s| match &s.html.canonical {
            Some(c) => yes(!c.trim().is_empty(), c.clone()),
            None => yes(false, "absent"),
        },
    },
    Rule {
        id: "seo.hreflang",
        category: Category::Seo,
        severity: Severity::Info,
        weight: 0,
        title: "Language alternates (hreflang)",
        remediation: "If the site has translations, link them with <link rel=\"alternate\" hreflang>.",
        check: |s| if s.html.hreflang.is_empty() { unmeasured("no language alternates") } else { yes(true, s.html.hreflang.join(", ")) },
    },
    Rule {
        id: "seo.viewport",
        category: Category::Seo,
        severity: Severity::Medium,
        weight: 8,
        title: "A viewport for mobile devices",
        remediation: "Add <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">.",
        check: |s| yes(s.html.viewport, if s.html.viewport { "present" } else { "absent" }),
    },
    Rule {
        id: "seo.lang",
        category: Category::Seo,
        severity: Severity::Low,
        weight: 5,
        title: "The document's language is declared",
        remediation: "Add lang=\"..\" to <html>.",
        check: |s| match &s.html.lang {
            Some(l) => yes(true, l.clone()),
            None => yes(false, "no lang on <html>"),
        },
    },
    Rule {
        id: "seo.img_alt",
        category: Category::Seo,
        severity: Severity::Low,
        weight: 5,
        title: "Images have alt text",
        remediation: "Describe each image in alt=\"..\" (alt=\"\" for decorative ones).",
        check: |s| {
            if s.html.images == 0 {
                return unmeasured("no images");
            }
            yes(s.html.images_without_alt == 0, format!("{} of {} images lack alt", s.html.images_without_alt, s.html.images))
        },
    },
    Rule {
        id: "seo.indexable",
        category: Category::Seo,
        severity: Severity::Critical,
        weight: 15,
        title: "The page may be indexed (no noindex)",
        remediation: "Remove noindex from the robots meta tag and the X-Robots-Tag header if the page should be found.",
        check: |s| {
            let header = s.header("x-robots-tag").is_some_and(|v| v.to_ascii_lowercase().contains("noindex"));
            let blocked = s.html.robots_noindex || header;
            yes(!blocked, if blocked { "noindex" } else { "indexable" })
        },
    },
    Rule {
        id: "seo.robots_txt",
        category: Category::Seo,
        severity: Severity::Medium,
        weight: 8,
        title: "robots.txt exists and does not block everything",
        remediation: "Serve /robots.txt; do not Disallow: / for all user agents.",
        check: |s| match &s.robots_txt {
            Some(r) => {
                let all = robots_blocks_all(r).iter().any(|a| a == "*");
                yes(!all, if all { "User-agent: * is disallowed everything" } else { "present" })
            }
            None => yes(false, "no /robots.txt"),
        },
    },
    Rule {
        id: "seo.sitemap",
        category: Category::Seo,
        severity: Severity::Low,
        weight: 5,
        title: "A parseable sitemap",
        remediation: "Serve /sitemap.xml (and name it in robots.txt with Sitemap:).",
        check: |s| match s.sitemap {
            Some(ok) => yes(ok, if ok { "parseable" } else { "found but not a sitemap" }),
            None => yes(false, "no sitemap"),
        },
    },
    Rule {
        id: "seo.open_graph",
        category: Category::Seo,
        severity: Severity::Low,
        weight: 3,
        title: "Open Graph tags for link previews",
        remediation: "Add og:title, og:description and og:image.",
        check: |s| yes(s.html.open_graph.iter().any(|p| p == "og:title"), s.html.open_graph.join(", ")),
    },
    Rule {
        id: "seo.json_ld",
        category: Category::Seo,
        severity: Severity::Low,
        weight: 3,
        title: "Structured data (JSON-LD)",
        remediation: "Describe the organisation and pages with schema.org JSON-LD.",
        check: |s| yes(!s.html.json_ld_types.is_empty(), s.html.json_ld_types.join(", ")),
    },
    // ---------- AI readiness ----------
    Rule {
        id: "ai.llms_txt",
        category: Category::AiReadiness,
        severity: Severity::Medium,
        weight: 40,
        title: "A well-formed /llms.txt",
        remediation: "Serve /llms.txt in the llmstxt.org format: an H1 with the site's name first, a summary, then sections of links.",
        check: |s| match &s.llms_txt {
            Some(t) => {
                let first = t.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
                yes(first.starts_with("# ") && first.len() > 2, format!("first line: {}", first.chars().take(80).collect::<String>()))
            }
            None => yes(false, "no /llms.txt"),
        },
    },
    Rule {
        id: "ai.crawlers",
        category: Category::AiReadiness,
        severity: Severity::Medium,
        weight: 40,
        title: "AI crawlers are not blocked",
        remediation: "If you want to be found by AI assistants, do not Disallow: / for GPTBot, ClaudeBot, PerplexityBot, Google-Extended and the like.",
        check: |s| match &s.robots_txt {
            Some(r) => {
                let blocked = robots_blocks_all(r);
                let all = blocked.iter().any(|a| a == "*");
                let named: Vec<&str> =
                    AI_CRAWLERS.iter().copied().filter(|c| all || blocked.iter().any(|b| b.eq_ignore_ascii_case(c))).collect();
                yes(named.is_empty(), if named.is_empty() { "none blocked".to_string() } else { format!("blocked: {}", named.join(", ")) })
            }
            None => yes(true, "no robots.txt: nothing is blocked"),
        },
    },
    Rule {
        id: "ai.json_ld",
        category: Category::AiReadiness,
        severity: Severity::Low,
        weight: 20,
        title: "Machine-readable structured data",
        remediation: "Add schema.org JSON-LD so assistants can read what the page is about.",
        check: |s| yes(s.html.json_ld_blocks > 0, format!("{} JSON-LD blocks", s.html.json_ld_blocks)),
    },
    // ---------- performance ----------
    Rule {
        id: "perf.ttfb",
        category: Category::Performance,
        severity: Severity::Medium,
        weight: 25,
        title: "Time to first byte under 800 ms",
        remediation: "Cache pages at the edge or speed up the server's response.",
        check: |s| yes(s.ttfb_ms < 800, format!("{} ms", s.ttfb_ms)),
    },
    Rule {
        id: "perf.html_size",
        category: Category::Performance,
        severity: Severity::Low,
        weight: 15,
        title: "HTML under 500 KB",
        remediation: "Trim inline data and markup; load what is below the fold later.",
        check: |s| yes(s.html_bytes < 500 * 1024, format!("{} bytes", s.html_bytes)),
    },
    Rule {
        id: "perf.compression",
        category: Category::Performance,
        severity: Severity::Medium,
        weight: 20,
        title: "The HTML is compressed (gzip or br)",
        remediation: "Enable gzip or brotli for text responses.",
        check: |s| yes(s.compressed, s.header("content-encoding").unwrap_or("identity")),
    },
    Rule {
        id: "perf.assets",
        category: Category::Performance,
        severity: Severity::Low,
        weight: 15,
        title: "At most 50 assets and 3 MB",
        remediation: "Bundle scripts and styles, compress and resize images.",
        check: |s| {
            let bytes: u64 = s.assets.iter().filter_map(|a| a.bytes).sum();
            let listed = s.html.scripts.len() + s.html.stylesheets.len() + s.html.image_urls.len();
            yes(
                listed <= 50 && bytes <= 3 * 1024 * 1024,
                format!("{listed} assets referenced, {bytes} bytes in the {} measured", s.assets.len()),
            )
        },
    },
    Rule {
        id: "perf.caching",
        category: Category::Performance,
        severity: Severity::Low,
        weight: 25,
        title: "Static assets are cached for a day or more",
        remediation: "Serve fingerprinted assets with Cache-Control: public, max-age=31536000, immutable.",
        check: |s| {
            if s.assets.is_empty() {
                return unmeasured("no same-site assets measured");
            }
            let cached = |cc: &Option<String>| {
                cc.as_deref().is_some_and(|c| {
                    let c = c.to_ascii_lowercase();
                    c.contains("immutable")
                        || c.split(',').filter_map(|p| p.trim().strip_prefix("max-age=")?.parse::<u64>().ok()).any(|a| a >= 86_400)
                })
            };
            let bad: Vec<&str> = s.assets.iter().filter(|a| !cached(&a.cache_control)).map(|a| a.url.as_str()).collect();
            yes(bad.is_empty(), if bad.is_empty() { "all cached".to_string() } else { format!("not cached: {}", bad.join(", ")) })
        },
    },
    // ---------- privacy ----------
    Rule {
        id: "privacy.trackers_before_consent",
        category: Category::Privacy,
        severity: Severity::High,
        weight: 50,
        title: "No trackers load before consent",
        remediation: "Load analytics and ad scripts only after consent, through a consent manager that blocks them until then.",
        check: |s| {
            let found = trackers(s);
            yes(found.is_empty(), if found.is_empty() { "none in the initial HTML".to_string() } else { found.join(", ") })
        },
    },
    Rule {
        id: "privacy.consent_manager",
        category: Category::Privacy,
        severity: Severity::Medium,
        weight: 25,
        title: "A consent manager where trackers are used",
        remediation: "Use a consent manager (Cookiebot, OneTrust, Usercentrics, ...) that asks before any tracker loads.",
        check: |s| {
            let cmp = consent_manager(s);
            match (cmp, trackers(s).is_empty()) {
                (Some(name), _) => yes(true, name),
                (None, true) => unmeasured("no trackers, no consent manager needed"),
                (None, false) => yes(false, "trackers but no consent manager"),
            }
        },
    },
    Rule {
        id: "privacy.policy_link",
        category: Category::Privacy,
        severity: Severity::Medium,
        weight: 25,
        title: "A privacy policy is linked",
        remediation: "Link the privacy policy from every page (usually the footer).",
        check: |s| {
            let words = ["privacy", "datenschutz", "confidentialit", "privacidad", "privacybeleid"];
            let link = s.html.links.iter().find(|(h, t)| {
                let (h, t) = (h.to_ascii_lowercase(), t.to_ascii_lowercase());
                words.iter().any(|w| h.contains(w) || t.contains(w))
            });
            match link {
                Some((h, _)) => yes(true, h.clone()),
                None => yes(false, "no link naming a privacy policy"),
            }
        },
    },
    // ---------- email ----------
    Rule {
        id: "email.spf",
        category: Category::Email,
        severity: Severity::Medium,
        weight: 50,
        title: "An SPF record",
        remediation: "Publish a TXT record v=spf1 ... -all naming the servers that send your mail.",
        check: |s| match &s.mail_dns {
            Some(d) => match &d.spf {
                Some(v) => yes(true, v.clone()),
                None => yes(false, "no v=spf1 TXT record"),
            },
            None => unmeasured("DNS could not answer"),
        },
    },
    Rule {
        id: "email.dmarc",
        category: Category::Email,
        severity: Severity::Medium,
        weight: 50,
        title: "A DMARC policy that quarantines or rejects",
        remediation: "Publish _dmarc TXT v=DMARC1; p=quarantine (or reject) once SPF and DKIM align.",
        check: |s| match &s.mail_dns {
            Some(d) => match &d.dmarc {
                Some(v) => {
                    let l = v.to_ascii_lowercase().replace(' ', "");
                    yes(l.contains("p=quarantine") || l.contains("p=reject"), v.clone())
                }
                None => yes(false, "no _dmarc TXT record"),
            },
            None => unmeasured("DNS could not answer"),
        },
    },
];

fn trackers(s: &Site) -> Vec<String> {
    let mut urls: Vec<String> = s.html.scripts.iter().map(|(u, _)| u.clone()).collect();
    urls.extend(s.html.iframes.iter().cloned());
    let mut found: Vec<String> = s
        .third_party(&urls)
        .into_iter()
        .filter_map(|u| url::Url::parse(&u).ok()?.host_str().map(str::to_string))
        .filter(|h| TRACKER_HOSTS.iter().any(|t| h == t || h.ends_with(&format!(".{t}"))))
        .collect();
    // Tag snippets that inject the tracker from inline code.
    found.extend(TRACKER_HOSTS.iter().filter(|t| s.html.inline_script.contains(*t)).map(|t| t.to_string()));
    found.sort();
    found.dedup();
    found
}

fn consent_manager(s: &Site) -> Option<String> {
    let scripts: Vec<&str> = s.html.scripts.iter().map(|(u, _)| u.as_str()).collect();
    CONSENT_MANAGERS
        .iter()
        .find(|(_, needle)| scripts.iter().any(|u| u.contains(needle)) || s.html.inline_script.contains(needle))
        .map(|(name, _)| name.to_string())
}

/// Every rule's finding for the site.
pub fn evaluate(site: &Site) -> Vec<Finding> {
    RULES
        .iter()
        .map(|r| {
            let (passed, evidence) = (r.check)(site);
            Finding {
                rule_id: r.id.into(),
                category: r.category,
                severity: r.severity,
                passed,
                score_impact: if passed == Some(false) { -(r.weight as i32) } else { 0 },
                title: r.title.into(),
                evidence: evidence.chars().take(1000).collect(),
                remediation: r.remediation.into(),
            }
        })
        .collect()
}

/// Each category's score (`None` when none of its rules could be measured).
pub fn category_scores(findings: &[Finding]) -> Vec<(Category, Option<u8>)> {
    let weight = |id: &str| RULES.iter().find(|r| r.id == id).map_or(0, |r| r.weight);
    Category::ALL
        .iter()
        .map(|c| {
            let measured: Vec<&Finding> = findings.iter().filter(|f| f.category == *c && f.passed.is_some()).collect();
            let total: u32 = measured.iter().map(|f| weight(&f.rule_id)).sum();
            let passed: u32 = measured.iter().filter(|f| f.passed == Some(true)).map(|f| weight(&f.rule_id)).sum();
            (*c, (total > 0).then(|| ((passed * 100 + total / 2) / total) as u8))
        })
        .collect()
}

/// The weighted mean of the measured categories.
pub fn overall(categories: &[(Category, Option<u8>)]) -> u8 {
    let measured: Vec<(u32, u32)> = categories.iter().filter_map(|(c, s)| s.map(|s| (c.weight(), s as u32))).collect();
    let total: u32 = measured.iter().map(|(w, _)| w).sum();
    if total == 0 {
        return 0;
    }
    ((measured.iter().map(|(w, s)| w * s).sum::<u32>() + total / 2) / total) as u8
}

/// The HTTP Observatory's grade scale.
pub fn grade(score: u8) -> &'static str {
    match score {
        100.. => "A+",
        90..=99 => "A",
        85..=89 => "A-",
        80..=84 => "B+",
        70..=79 => "B",
        65..=69 => "B-",
        60..=64 => "C+",
        50..=59 => "C",
        45..=49 => "C-",
        40..=44 => "D+",
        30..=39 => "D",
        25..=29 => "D-",
        _ => "F",
    }
}

/// docs/scan-scoring.md, generated from the rules (`make generate` writes it; a test keeps it
/// current).
pub fn scoring_doc() -> String {
    let name = |v: serde_json::Value| v.as_str().map(String::from).unwrap_or_default();
    let mut out = format!(
        "# Scan scoring, version `{SCORING_VERSION}`\n\n\
         Generated from `domain/src/scans/rules.rs` by `make generate`; a scan's `scoring_version` names the version\n\
         that scored it.\n\n\
         - Each rule answers passed, failed, or `null` when it cannot be measured (no https to judge HSTS on, no DNS answer for SPF): a `null` is left out, never guessed.\n\
         - A failed rule's `score_impact` is minus its weight. A category scores the share of its measured weight that passed, 0-100, or `null` when none of its rules could be measured.\n\
         - The overall `score` is the mean of the measured categories, weighted as below, and its `grade` follows the HTTP Observatory's scale: A+ 100, A 90-99, A- 85-89, B+ 80-84, B 70-79, B- 65-69, C+ 60-64, C 50-59, C- 45-49, D+ 40-44, D 30-39, D- 25-29, F below 25.\n\
         - Checks that need a browser (rendering, scripts run after load, Core Web Vitals) are not made: the scanner reads the HTTP answers and the raw HTML only.\n\n\
         | category | weight |\n|---|---|\n"
    );
    for c in Category::ALL {
        out.push_str(&format!("| {} | {} |\n", name(serde_json::to_value(c).unwrap_or_default()), c.weight()));
    }
    out.push_str("\n## Rules\n\n");
    out.push_str(&markdown_table());
    out
}

/// The rule table: every rule with its category, severity and weight.
pub fn markdown_table() -> String {
    let mut out = String::from("| rule | category | severity | weight | checks |\n|---|---|---|---|---|\n");
    for r in RULES {
        let cat = serde_json::to_value(r.category).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
        let sev = serde_json::to_value(r.severity).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
        out.push_str(&format!("| `{}` | {cat} | {sev} | {} | {} |\n", r.id, r.weight, r.title));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scans::html::extract;

    fn find<'a>(f: &'a [Finding], id: &str) -> &'a Finding {
        f.iter().find(|x| x.rule_id == id).unwrap_or_else(|| panic!("no rule {id}"))
    }

    fn good() -> Site {
        let html = br#"<!doctype html><html lang="en"><head><title>Acme anvils, made to last</title>
            <meta name="description" content="Anvils forged in Bergen since 1901."><meta name="viewport" content="width=device-width">
            <meta property="og:title" content="Acme"><link rel="canonical" href="https://acme.test/">
            <link rel="stylesheet" href="/site.css"><script src="/app.js"></script>
            <script src="https://cdn.example/lib.js" integrity="sha384-abc" crossorigin="anonymous"></script>
            <script type="application/ld+json">{"@type":"Organization","name":"Acme"}</script></head>
            <body><h1>Anvils</h1><img src="/anvil.png" alt="An anvil"><a href="/privacy">Privacy</a></body></html>"#;
        Site {
            final_url: "https://acme.test/".into(),
            https_available: Some(true),
            http_redirects_to_https: Some(true),
            certificate_valid: Some(true),
            redirects: vec!["http://acme.test/".into(), "https://acme.test/".into()],
            headers: vec![
                ("strict-transport-security".into(), "max-age=63072000; includeSubDomains; preload".into()),
                ("content-security-policy".into(), "default-src 'self'; frame-ancestors 'none'".into()),
                ("x-content-type-options".into(), "nosniff".into()),
                ("referrer-policy".into(), "strict-origin-when-cross-origin".into()),
                ("permissions-policy".into(), "camera=()".into()),
                ("set-cookie".into(), "sessionid=1; Path=/; Secure; HttpOnly; SameSite=Lax".into()),
                ("content-encoding".into(), "gzip".into()),
            ],
            html: extract(html),
            html_bytes: html.len(),
            ttfb_ms: 20,
            compressed: true,
            robots_txt: Some("User-agent: *\nAllow: /\nSitemap: https://acme.test/sitemap.xml\n".into()),
            sitemap: Some(true),
            llms_txt: Some("# Acme\n\n> Anvils.\n".into()),
            assets: vec![Asset {
                kind: "script",
                url: "https://acme.test/app.js".into(),
                bytes: Some(1000),
                cache_control: Some("max-age=31536000, immutable".into()),
            }],
            mail_dns: None,
        }
    }

    #[test]
    fn a_well_configured_site_scores_an_a_and_email_is_unmeasured_without_dns() {
        let f = evaluate(&good());
        let failed: Vec<&str> = f.iter().filter(|x| x.passed == Some(false)).map(|x| x.rule_id.as_str()).collect();
        assert!(failed.is_empty(), "{failed:?}");
        let cats = category_scores(&f);
        assert_eq!(cats.iter().find(|(c, _)| *c == Category::Email).unwrap().1, None);
        assert_eq!(find(&f, "email.spf").passed, None);
        let score = overall(&cats);
        assert!(score >= 90 && grade(score).starts_with('A'), "{score} {cats:?}");
    }

    #[test]
    fn a_neglected_site_fails_what_it_neglects() {
        let html = br#"<html><head><title>Home</title><script src="https://www.googletagmanager.com/gtag/js?id=G-1"></script>
            <script src="http://cdn.example/x.js"></script></head><body><img src="a.png"><img src="b.png"></body></html>"#;
        let s = Site {
            final_url: "http://shop.test/".into(),
            https_available: Some(false),
            http_redirects_to_https: Some(false),
            redirects: vec!["http://shop.test/".into()],
            headers: vec![("set-cookie".into(), "PHPSESSID=1; path=/".into())],
            html: extract(html),
            html_bytes: html.len(),
            ttfb_ms: 1200,
            mail_dns: Some(MailDns { spf: None, dmarc: Some("v=DMARC1; p=none".into()) }),
            ..Site::default()
        };
        let f = evaluate(&s);
        for id in [
            "transport.https",
            "transport.http_redirect",
            "headers.csp",
            "cookies.flags",
            "content.sri",
            "seo.title",
            "seo.img_alt",
            "seo.robots_txt",
            "ai.llms_txt",
            "perf.ttfb",
            "perf.compression",
            "privacy.trackers_before_consent",
            "privacy.consent_manager",
            "privacy.policy_link",
            "email.spf",
            "email.dmarc",
        ] {
            assert_eq!(find(&f, id).passed, Some(false), "{id}: {:?}", find(&f, id));
        }
        assert!(find(&f, "privacy.trackers_before_consent").evidence.contains("googletagmanager.com"));
        assert_eq!(find(&f, "headers.csp_unsafe").passed, None, "no CSP: not measurable");
        assert_eq!(find(&f, "content.mixed").passed, None, "an http page has no mixed content");
        let score = overall(&category_scores(&f));
        assert!(score <= 40, "{score}");
        assert_eq!(find(&f, "transport.https").score_impact, -20);
    }

    /// A site that gets the rest wrong: a long redirect chain, a weak HSTS, unsafe framing,
    /// mixed content, noindex, a heavy page with uncached assets, AI crawlers blocked.
    fn sloppy() -> Site {
        let mut html = br#"<html lang="en"><head><title>A shop that is almost right</title><meta name="robots" content="noindex">
            <link rel="stylesheet" href="http://cdn.example/x.css"><script src="https://cdn.example/lib.js"></script></head><body>"#
            .to_vec();
        for i in 0..60 {
            html.extend_from_slice(format!(r#"<img src="/i{i}.png" alt="">"#).as_bytes());
        }
        html.extend_from_slice(b"</body></html>");
        let mut s = good();
        s.html = extract(&html);
        s.html_bytes = 600 * 1024;
        s.certificate_valid = Some(false);
        s.redirects = (0..5).map(|i| format!("https://acme.test/{i}")).collect();
        s.headers = vec![
            ("strict-transport-security".into(), "max-age=300".into()),
            ("content-security-policy".into(), "default-src 'self' 'unsafe-inline'; frame-ancestors *".into()),
            ("referrer-policy".into(), "unsafe-url".into()),
        ];
        s.compressed = false;
        s.ttfb_ms = 100;
        s.robots_txt = Some("User-agent: *\nDisallow: /\n".into());
        s.sitemap = Some(false);
        s.llms_txt = Some("Acme\n".into());
        s.assets = vec![Asset { kind: "image", url: "https://acme.test/i0.png".into(), bytes: Some(4_000_000), cache_control: None }];
        s.mail_dns = Some(MailDns { spf: Some("v=spf1 -all".into()), dmarc: Some("v=DMARC1; p=reject".into()) });
        s
    }

    /// Every rule is seen passing and failing in these fixtures (hreflang, weighted 0, only
    /// informs), so none is untested or unable to fail.
    #[test]
    fn every_rule_passes_and_fails_on_some_fixture() {
        let neglected = Site {
            final_url: "http://shop.test/".into(),
            https_available: Some(false),
            http_redirects_to_https: Some(false),
            headers: vec![("set-cookie".into(), "PHPSESSID=1".into())],
            html: extract(br#"<script src="https://www.googletagmanager.com/gtm.js"></script><img src="a.png">"#),
            ttfb_ms: 2000,
            mail_dns: Some(MailDns::default()),
            ..Site::default()
        };
        let mut with_cmp = neglected.clone();
        with_cmp.html = extract(br#"<script src="https://consent.cookiebot.com/uc.js"></script><script src="https://www.googletagmanager.com/gtm.js"></script>"#);
        with_cmp.headers.push(("content-security-policy".into(), "script-src 'self'".into()));
        let all: Vec<Finding> = [good(), sloppy(), neglected, with_cmp].iter().flat_map(evaluate).collect();
        for r in RULES.iter().filter(|r| r.weight > 0) {
            let seen = |v: bool| all.iter().any(|f| f.rule_id == r.id && f.passed == Some(v));
            assert!(seen(true) && seen(false), "{}: passes {} fails {}", r.id, seen(true), seen(false));
        }
        let sloppy = evaluate(&sloppy());
        assert!(find(&sloppy, "content.mixed").evidence.contains("http://cdn.example/x.css"));
        assert_eq!(find(&sloppy, "seo.indexable").passed, Some(false));
    }

    #[test]
    fn csp_robots_and_hsts_are_read_like_browsers_and_crawlers_do() {
        assert_eq!(
            directive("default-src 'self'; script-src 'self' 'unsafe-inline'", "script-src").as_deref(),
            Some("'self' 'unsafe-inline'")
        );
        assert_eq!(directive("script-src-elem 'self'", "script-src"), None);
        assert_eq!(hsts_max_age("max-age=\"31536000\"; includeSubDomains"), Some(31_536_000));
        let robots = "User-agent: GPTBot\nUser-agent: CCBot\nDisallow: /\n\nUser-agent: *\nDisallow: /admin\n";
        assert_eq!(robots_blocks_all(robots), vec!["GPTBot", "CCBot"]);
        let mut s = good();
        s.robots_txt = Some(robots.into());
        let f = evaluate(&s);
        assert_eq!(find(&f, "ai.crawlers").passed, Some(false));
        assert!(find(&f, "ai.crawlers").evidence.contains("GPTBot, CCBot"));
        assert_eq!(find(&f, "seo.robots_txt").passed, Some(true));
        s.headers.retain(|(n, _)| n != "content-security-policy");
        s.headers.push(("content-security-policy".into(), "script-src 'self' 'unsafe-eval'".into()));
        let f = evaluate(&s);
        assert_eq!((find(&f, "headers.csp_unsafe").passed, find(&f, "headers.csp_default_src").passed), (Some(false), Some(false)));
        assert_eq!(grade(100), "A+");
        assert_eq!(grade(24), "F");
    }
}
