//! Configuration from the environment (Lambda sets it from template.yaml; the dev gateway and
//! tests build it directly). Nothing here does I/O: secrets are loaded lazily by `App`.

use crate::ratelimit::{Class, Limit};
use std::collections::HashMap;

#[derive(Clone, Debug)]
pub struct Config {
    pub table: String,
    pub events_queue_url: String,
    /// Webhook delivery attempts waiting for their (re)try.
    pub deliveries_queue_url: String,
    /// Contact import jobs for the import worker.
    pub contact_imports_queue_url: String,
    /// Emails to send now (or at their time) for the email sender.
    pub emails_queue_url: String,
    /// Posts due for publishing (`functions/publisher`).
    pub publish_queue_url: String,
    /// GDPR export and erasure jobs (`functions/gdpr-worker`).
    pub gdpr_queue_url: String,
    /// Website scans to run (`functions/scanner`).
    pub scans_queue_url: String,
    /// How long the publisher's claim on a post's variant lasts (`PUBLISH_LEASE_SECS`, default
    /// 120, at least 10): longer than one publish run (the function's 60 s timeout), so a live
    /// run never loses its claim; after a crashed one's, the next run publishes it with the
    /// same idempotency key.
    pub publish_lease_secs: i64,
    /// How long a scanner's claim on a scan lasts (`SCAN_LEASE_SECS`, default 90, at least
    /// 10): as long as the scanner's timeout, so a copy of the message never takes a live
    /// scan over (it keeps its message and finds the scan done on redelivery), and under the
    /// queue's 120 s visibility timeout, so a crashed scan waits no longer than SQS does.
    pub scan_lease_secs: i64,
    /// S3 bucket of export documents (SSE, objects expire after 7 days).
    pub exports_bucket: String,
    /// S3 bucket of inbound mail (raw messages SES stores under `inbound/`) and the helpdesk's
    /// attachments (`attachments/`).
    pub mail_bucket: String,
    /// Compressed size at which an export cuts a part of its multipart upload (S3 needs at
    /// least 5 MiB but for the last part; a smaller value is for emulators, in tests).
    pub export_part_bytes: usize,
    /// Secrets Manager id of the platform secret (cursor and encryption keys).
    pub platform_secret_id: String,
    pub oauth: Option<OAuthConfig>,
    pub limits: HashMap<Class, Limit>,
    pub webhooks: WebhookSettings,
    pub email: EmailSettings,
    pub timeouts: Timeouts,
    /// How long a container trusts an API key look-up (`API_KEY_CACHE_SECS`, default 5, 0 =
    /// never): the bound on how late a revocation reaches other containers.
    pub api_key_cache_secs: u64,
    /// Where the portal's pages are served (`PORTAL_PAGES_URL`, `https://api.example.com`; the
    /// pages are under `/p/<workspace slug>/`): the base of the sign-in links they email. Never
    /// taken from a request's `Host`, which a caller chooses.
    pub portal_pages_url: Option<String>,
}

/// How long a container trusts an API key look-up unless `API_KEY_CACHE_SECS` says otherwise:
/// the documented bound on how late a revocation reaches the other containers.
pub const API_KEY_CACHE_DEFAULT_SECS: u64 = 5;

/// How long a hung dependency may hold a request. API Gateway gives up after 29 s with an
/// answer outside the envelope, so the API answers `503 UNAVAILABLE` with `Retry-After` well
/// before that.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// One request, end to end (`REQUEST_TIMEOUT_MS`).
    pub request_ms: u64,
    /// One AWS call including its retries (`DEPENDENCY_TIMEOUT_MS`); each attempt gets half,
    /// so a stalled connection is retried once, and connecting gets at most a second.
    pub dependency_ms: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self { request_ms: 10_000, dependency_ms: 5_000 }
    }
}

impl Timeouts {
    fn from_vars(var: Vars) -> Result<Self, String> {
        let d = Self::default();
        let ms = |k: &str, d: u64| -> Result<u64, String> {
            match var(k) {
                None => Ok(d),
                Some(v) => {
                    v.parse::<u64>().ok().filter(|v| (100..=25_000).contains(v)).ok_or(format!("{k} must be 100..25000 milliseconds"))
                }
            }
        };
        Ok(Self { request_ms: ms("REQUEST_TIMEOUT_MS", d.request_ms)?, dependency_ms: ms("DEPENDENCY_TIMEOUT_MS", d.dependency_ms)? })
    }

    /// The SDK's timeouts for every client of the container.
    pub fn sdk(&self) -> aws_config::timeout::TimeoutConfig {
        use std::time::Duration;
        aws_config::timeout::TimeoutConfig::builder()
            .connect_timeout(Duration::from_millis(self.dependency_ms.min(1_000)))
            .operation_attempt_timeout(Duration::from_millis(self.dependency_ms / 2))
            .operation_timeout(Duration::from_millis(self.dependency_ms))
            .build()
    }
}

#[derive(Clone, Debug)]
pub struct EmailSettings {
    /// The domains (and their subdomains) workspaces may add as sending domains
    /// (`ALLOWED_SENDING_DOMAINS`, comma-separated); empty = any domain.
    pub allowed_domains: Vec<String>,
    /// The SES configuration set whose event destination feeds delivery, bounce and complaint
    /// notifications back (`SES_CONFIGURATION_SET`; empty = none).
    pub configuration_set: Option<String>,
    /// A queued email not sent this long after its queue message went out is enqueued again by
    /// the schedule tick (`EMAIL_REQUEUE_AFTER_SECS`).
    pub requeue_after_secs: i64,
    /// How long a sender's claim on an email lasts (`EMAIL_CLAIM_SECS`, default 90): longer than
    /// the sender's Lambda timeout (60 s), so a live invocation never loses its claim; after a
    /// crashed one's, the next copy records the email's outcome as unknown.
    pub claim_secs: i64,
    /// The value of the `platform-stack` tag (`aws::ses::IDENTITY_TAG_KEY`) on the SES identities this stack creates
    /// (`SES_IDENTITY_TAG`, the stack's name): its IAM policy may read and delete only identities
    /// carrying it, never another application's in the same account.
    pub identity_tag: Option<String>,
    /// The largest message, attachments encoded, an email may make (`EMAIL_MAX_MESSAGE_BYTES`,
    /// default 40 MB: SES's limit). Lower it for recipients' limits (Gmail takes 25 MB).
    pub max_message_bytes: usize,
    /// The domains whose mail SES receives for this deployment (`INBOUND_MAIL_DOMAINS`,
    /// comma-separated, the template's `InboundMailDomains`): marketing mail from them offers a
    /// mailto unsubscribe address.
    pub inbound_domains: Vec<String>,
}

/// SES's limit on a whole message (v2 API), attachments and encoding included.
pub const SES_MAX_MESSAGE_BYTES: usize = 40_000_000;

impl Default for EmailSettings {
    fn default() -> Self {
        Self {
            allowed_domains: vec![],
            configuration_set: None,
            requeue_after_secs: 120,
            claim_secs: 90,
            identity_tag: None,
            max_message_bytes: SES_MAX_MESSAGE_BYTES,
            inbound_domains: vec![],
        }
    }
}

impl EmailSettings {
    fn from_vars(var: Vars) -> Self {
        let domains = |list: Option<String>| -> Vec<String> {
            list.unwrap_or_default()
                .split(',')
                .map(|s| s.trim().trim_end_matches('.').to_ascii_lowercase())
                .filter(|s| !s.is_empty())
                .collect()
        };
        let allowed_domains = domains(var("ALLOWED_SENDING_DOMAINS"));
        let configuration_set = var("SES_CONFIGURATION_SET");
        let requeue_after_secs = var("EMAIL_REQUEUE_AFTER_SECS").and_then(|v| v.parse().ok()).unwrap_or(120);
        // Past the 15 s the sender keeps for recording an answer (production: above its 60 s
        // timeout plus that, 90 s).
        let claim_secs = var("EMAIL_CLAIM_SECS").and_then(|v| v.parse().ok()).filter(|s: &i64| *s >= 20).unwrap_or(90);
        let max_message_bytes = var("EMAIL_MAX_MESSAGE_BYTES")
            .and_then(|v| v.parse().ok())
            .filter(|n: &usize| *n <= SES_MAX_MESSAGE_BYTES)
            .unwrap_or(SES_MAX_MESSAGE_BYTES);
        Self {
            allowed_domains,
            configuration_set,
            requeue_after_secs,
            claim_secs,
            identity_tag: var("SES_IDENTITY_TAG"),
            max_message_bytes,
            inbound_domains: domains(var("INBOUND_MAIL_DOMAINS")),
        }
    }

    /// Does this deployment receive mail for `domain` (one of `inbound_domains` exactly: an
    /// MX record names one domain, not its subdomains)?
    pub fn receives(&self, domain: &str) -> bool {
        self.inbound_domains.iter().any(|d| d.eq_ignore_ascii_case(domain))
    }

    /// May a workspace add `domain` (lower-cased) as a sending domain?
    pub fn allows_domain(&self, domain: &str) -> bool {
        self.allowed_domains.is_empty() || self.allowed_domains.iter().any(|a| crate::validate::within_domain(domain, a))
    }
}

#[derive(Clone, Debug)]
pub struct WebhookSettings {
    /// Where endpoints may point (`WEBHOOK_ALLOW_LOOPBACK=true`: http and loopback, dev only).
    pub url_policy: crate::outbound::UrlPolicy,
    /// Delays before retry 1, 2, ... in seconds (`WEBHOOK_RETRY_SCHEDULE`, comma-separated);
    /// after the last one the delivery is dead.
    pub retry_schedule: Vec<u64>,
    /// An endpoint failing continuously this long is disabled (`WEBHOOK_DISABLE_AFTER_SECS`).
    pub disable_after_secs: i64,
    /// Outbox items older than this are re-sent by the sweep (`OUTBOX_SWEEP_AGE_SECS`).
    pub outbox_sweep_age_secs: i64,
    pub timeout_secs: u64,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            url_policy: crate::outbound::UrlPolicy::default(),
            // docs/api.md: about 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h.
            retry_schedule: vec![5, 300, 1_800, 7_200, 18_000, 36_000, 36_000],
            disable_after_secs: 5 * 86_400,
            outbox_sweep_age_secs: 60,
            timeout_secs: 15,
        }
    }
}

impl WebhookSettings {
    fn from_vars(var: Vars) -> Result<Self, String> {
        let mut w = Self::default();
        if let Some(v) = var("OUTBOUND_LOOPBACK_ONLY") {
            w.url_policy.loopback_only = v == "true";
        }
        if let Some(v) = var("WEBHOOK_ALLOW_LOOPBACK") {
            w.url_policy.allow_loopback = v == "true";
        }
        if let Some(v) = var("WEBHOOK_RETRY_SCHEDULE") {
            w.retry_schedule = parse_schedule(&v)?;
        }
        let num = |k: &str, d: i64| -> Result<i64, String> {
            var(k).map_or(Ok(d), |v| v.parse::<i64>().map_err(|_| format!("{k} must be a whole number of seconds")))
        };
        w.disable_after_secs = num("WEBHOOK_DISABLE_AFTER_SECS", w.disable_after_secs)?;
        w.outbox_sweep_age_secs = num("OUTBOX_SWEEP_AGE_SECS", w.outbox_sweep_age_secs)?;
        Ok(w)
    }
}

/// `5,300,1800`: 1 to 20 delays of 1 s to 12 h (the longest an SQS message can stay hidden).
pub fn parse_schedule(v: &str) -> Result<Vec<u64>, String> {
    let s: Vec<u64> = v
        .split(',')
        .map(|p| p.trim().parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|_| "WEBHOOK_RETRY_SCHEDULE: seconds, comma-separated")?;
    if s.is_empty() || s.len() > 20 || s.iter().any(|d| *d == 0 || *d > 43_200) {
        return Err("WEBHOOK_RETRY_SCHEDULE: 1 to 20 delays, each 1..43200 seconds".into());
    }
    Ok(s)
}

#[derive(Clone, Debug)]
pub struct OAuthConfig {
    pub issuer: String,
    pub audience: String,
    pub jwks: JwksSource,
    /// A token with an unknown key id refreshes the keys at most this often
    /// (`OAUTH_JWKS_MIN_REFRESH_SECS`, default 60).
    pub min_refresh_secs: u64,
    /// The approval pages' client at the provider (`OAUTH_PAGES_CLIENT_ID`): a public client
    /// using PKCE, whose one redirect URI is `<pages origin>/approvals/callback`. Without it the
    /// pages say sign-in is not set up; the API is unaffected.
    pub pages_client_id: Option<String>,
    /// The clients whose tokens may approve (`OAUTH_APPROVER_CLIENT_IDS`, comma-separated;
    /// default: the pages' client): an agent's own OAuth client never approves its requests.
    pub approver_clients: Vec<String>,
    /// An approver's sign-in is fresh for this long (`OAUTH_APPROVER_MAX_AUTH_AGE_SECS`,
    /// default 600): their token's `auth_time` must be this recent.
    pub approver_max_auth_age_secs: i64,
}

/// Where the identity provider's signing keys come from.
#[derive(Clone, Debug, PartialEq)]
pub enum JwksSource {
    /// `OAUTH_JWKS` or `OAUTH_JWKS_FILE`: a fixed JWK set (local development; never fetched).
    Document(String),
    /// `OAUTH_JWKS_URI`: fetched on first use and when a token names an unknown key.
    Uri(String),
    /// None of them: `jwks_uri` from the issuer's `/.well-known/openid-configuration`.
    Discover,
}

/// Where configuration variables come from: the environment in Lambda, the environment over
/// local defaults in the local stack (`tools::admin::local_config`). Empty counts as unset.
pub type Vars<'a> = &'a dyn Fn(&str) -> Option<String>;

impl Config {
    /// The Lambda environment, as template.yaml sets it.
    pub fn from_env() -> Result<Self, String> {
        Self::from_vars(&|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
    }

    /// Every variable is read here, through the same code wherever the functions run.
    pub fn from_vars(vars: Vars) -> Result<Self, String> {
        let var = |k: &str| vars(k).ok_or_else(|| format!("missing environment variable {k}"));
        let lease = |k: &str, default: i64| match vars(k) {
            Some(v) => v.parse().ok().filter(|s: &i64| *s >= 10).ok_or(format!("{k}: seconds, at least 10")),
            None => Ok(default),
        };
        let oauth = match (vars("OAUTH_ISSUER"), vars("OAUTH_AUDIENCE")) {
            (Some(issuer), Some(audience)) => {
                let jwks = match (vars("OAUTH_JWKS"), vars("OAUTH_JWKS_FILE"), vars("OAUTH_JWKS_URI")) {
                    (Some(j), _, _) => JwksSource::Document(j),
                    (None, Some(f), _) => JwksSource::Document(std::fs::read_to_string(&f).map_err(|e| format!("OAUTH_JWKS_FILE: {e}"))?),
                    (None, None, Some(u)) => JwksSource::Uri(u),
                    (None, None, None) => JwksSource::Discover,
                };
                let min_refresh_secs = match vars("OAUTH_JWKS_MIN_REFRESH_SECS") {
                    Some(v) => v.parse().map_err(|_| "OAUTH_JWKS_MIN_REFRESH_SECS: seconds".to_string())?,
                    None => 60,
                };
                let pages_client_id = vars("OAUTH_PAGES_CLIENT_ID");
                let approver_clients = match vars("OAUTH_APPROVER_CLIENT_IDS") {
                    Some(list) => list.split(',').map(str::trim).filter(|c| !c.is_empty()).map(String::from).collect(),
                    None => pages_client_id.iter().cloned().collect(),
                };
                let approver_max_auth_age_secs = match vars("OAUTH_APPROVER_MAX_AUTH_AGE_SECS") {
                    Some(v) => v.parse().ok().filter(|s: &i64| *s >= 60).ok_or("OAUTH_APPROVER_MAX_AUTH_AGE_SECS: seconds, at least 60")?,
                    None => 600,
                };
                Some(OAuthConfig {
                    issuer,
                    audience,
                    jwks,
                    min_refresh_secs,
                    pages_client_id,
                    approver_clients,
                    approver_max_auth_age_secs,
                })
            }
            _ => None,
        };
        let mut limits = Class::defaults();
        for class in Class::ALL {
            let key = format!("RATE_LIMIT_{}", class.name().to_ascii_uppercase());
            if let Some(v) = vars(&key) {
                limits.insert(class, Limit::parse(&v).map_err(|e| format!("{key}: {e}"))?);
            }
        }
        Ok(Self {
            table: var("TABLE_NAME")?,
            events_queue_url: var("EVENTS_QUEUE_URL")?,
            deliveries_queue_url: var("DELIVERIES_QUEUE_URL")?,
            contact_imports_queue_url: var("CONTACT_IMPORTS_QUEUE_URL")?,
            emails_queue_url: var("EMAILS_QUEUE_URL")?,
            publish_queue_url: var("PUBLISH_QUEUE_URL")?,
            gdpr_queue_url: var("GDPR_QUEUE_URL")?,
            scans_queue_url: var("SCANS_QUEUE_URL")?,
            publish_lease_secs: lease("PUBLISH_LEASE_SECS", 120)?,
            scan_lease_secs: lease("SCAN_LEASE_SECS", 90)?,
            exports_bucket: var("EXPORTS_BUCKET")?,
            mail_bucket: var("MAIL_BUCKET")?,
            export_part_bytes: match vars("EXPORT_PART_BYTES") {
                Some(v) => v.parse().map_err(|_| "EXPORT_PART_BYTES: a number of bytes".to_string())?,
                None => 5 * 1024 * 1024,
            },
            platform_secret_id: var("PLATFORM_SECRET_ID")?,
            oauth,
            limits,
            webhooks: WebhookSettings::from_vars(vars)?,
            email: EmailSettings::from_vars(vars),
            timeouts: Timeouts::from_vars(vars)?,
            api_key_cache_secs: match vars("API_KEY_CACHE_SECS") {
                Some(v) => v.parse().map_err(|_| "API_KEY_CACHE_SECS: seconds".to_string())?,
                None => API_KEY_CACHE_DEFAULT_SECS,
            },
            portal_pages_url: match vars("PORTAL_PAGES_URL").filter(|v| !v.is_empty()) {
                Some(v) => {
                    let u = url::Url::parse(&v).map_err(|_| "PORTAL_PAGES_URL: an absolute URL such as https://api.example.com")?;
                    Some(u.origin().ascii_serialization())
                }
                None => None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_sending_domains_cover_themselves_and_their_subdomains() {
        let s = EmailSettings { allowed_domains: vec!["example.com".into()], ..Default::default() };
        assert!(s.allows_domain("example.com") && s.allows_domain("mail.example.com"));
        assert!(!s.allows_domain("badexample.com") && !s.allows_domain("example.com.evil.org"));
        assert!(EmailSettings::default().allows_domain("anything.org"), "no list: any domain");
    }

    fn vars(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    const BASE: &[(&str, &str)] = &[
        ("TABLE_NAME", "t"),
        ("EVENTS_QUEUE_URL", "q1"),
        ("DELIVERIES_QUEUE_URL", "q2"),
        ("CONTACT_IMPORTS_QUEUE_URL", "q3"),
        ("EMAILS_QUEUE_URL", "q4"),
        ("PUBLISH_QUEUE_URL", "q5"),
        ("GDPR_QUEUE_URL", "q6"),
        ("SCANS_QUEUE_URL", "q7"),
        ("EXPORTS_BUCKET", "b"),
        ("MAIL_BUCKET", "m"),
        ("PLATFORM_SECRET_ID", "s"),
    ];

    #[test]
    fn variables_are_read_through_one_function() {
        let c = Config::from_vars(&vars(BASE)).unwrap();
        assert_eq!(c.timeouts, Timeouts::default());
        assert!(c.oauth.is_none());
        let with: &'static [(&str, &str)] = Box::leak(
            [BASE, &[("REQUEST_TIMEOUT_MS", "3000"), ("DEPENDENCY_TIMEOUT_MS", "1500"), ("RATE_LIMIT_WRITE", "600/min:300")]]
                .concat()
                .into_boxed_slice(),
        );
        let c = Config::from_vars(&vars(with)).unwrap();
        assert_eq!(c.timeouts, Timeouts { request_ms: 3000, dependency_ms: 1500 });
        assert_eq!(c.limits[&Class::Write], Limit::parse("600/min:300").unwrap());
        let bad: &'static [(&str, &str)] = Box::leak([BASE, &[("REQUEST_TIMEOUT_MS", "60000")]].concat().into_boxed_slice());
        assert!(Config::from_vars(&vars(bad)).unwrap_err().contains("REQUEST_TIMEOUT_MS"));
        assert!(Config::from_vars(&vars(&BASE[1..])).unwrap_err().contains("TABLE_NAME"));
        assert_eq!(Config::from_vars(&vars(BASE)).unwrap().publish_lease_secs, 120);
        assert_eq!(Config::from_vars(&vars(BASE)).unwrap().scan_lease_secs, 90);
        for name in ["PUBLISH_LEASE_SECS", "SCAN_LEASE_SECS"] {
            for (v, ok) in [("10", true), ("9", false), ("soon", false)] {
                let set: &'static [(&str, &str)] = Box::leak([BASE, &[(name, v)]].concat().into_boxed_slice());
                assert_eq!(Config::from_vars(&vars(set)).is_ok(), ok, "{name}={v}");
            }
        }
    }
}
