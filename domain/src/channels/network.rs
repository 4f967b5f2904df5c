//! What every network adapter provides (one module per network: `bluesky`, `mastodon`,
//! `webhook`), and the error categories publishing records.

use crate::ids::{ChannelId, PostId};
use serde::Serialize;
use shared::outbound::Client;

pub use crate::posts::ErrorCategory;

#[derive(Debug, Clone)]
pub struct NetError {
    pub category: ErrorCategory,
    pub message: String,
    /// Seconds the network asked us to wait (Retry-After, X-RateLimit-Reset).
    pub retry_after: Option<u64>,
    /// A transport failure's cause (`shared::outbound::error_kind`): `dns` and
    /// `blocked_address` mean the address given cannot be reached from here at all.
    pub cause: Option<&'static str>,
}

impl NetError {
    pub fn new(category: ErrorCategory, message: impl Into<String>) -> Self {
        Self { category, message: message.into(), retry_after: None, cause: None }
    }

    /// A failed request: the SSRF guard's refusal, a timeout or a refused connection.
    pub fn transport(e: &reqwest::Error) -> Self {
        let kind = shared::outbound::error_kind(e);
        Self { cause: Some(kind), ..Self::new(ErrorCategory::Network, format!("request failed: {kind}")) }
    }

    /// From a non-success status: 401/403 are refused credentials, 429 a rate limit, 5xx the
    /// network's own trouble, other 4xx a refusal of this content.
    pub fn from_status(status: u16, message: String, retry_after: Option<u64>) -> Self {
        let category = match status {
            401 | 403 => ErrorCategory::AuthExpired,
            429 => ErrorCategory::RateLimited,
            500..=599 => ErrorCategory::PlatformError,
            422 => ErrorCategory::UserContent,
            _ => ErrorCategory::PlatformRejected,
        };
        Self { category, message, retry_after, cause: None }
    }
}

/// `Retry-After` in seconds, or an `X-RateLimit-Reset` time (Mastodon), whichever is given.
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<u64> {
    let get = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    if let Some(secs) = get("retry-after").and_then(|v| v.trim().parse::<u64>().ok()) {
        return Some(secs);
    }
    let reset = get("x-ratelimit-reset")?;
    let at = chrono::DateTime::parse_from_rfc3339(reset).ok().map(|t| t.timestamp()).or_else(|| reset.parse::<i64>().ok())?;
    Some((at - chrono::Utc::now().timestamp()).clamp(1, 900) as u64)
}

/// What the network says about an account on connect or verify.
#[derive(Debug, Clone)]
pub struct Connected {
    /// e.g. `@ada.bsky.social`, `@ada@mastodon.social`, `hooks.acme.com`.
    pub masked_identity: String,
    pub limits: super::Limits,
    /// Network session to cache (sealed), e.g. Bluesky's tokens.
    pub session: Option<serde_json::Value>,
}

/// One variant to publish.
#[derive(Debug, Clone, Serialize)]
pub struct Outgoing {
    pub workspace_id: String,
    pub post_id: PostId,
    pub channel_id: ChannelId,
    pub text: String,
    pub media: Vec<crate::posts::Media>,
    pub language: Option<String>,
    /// Mastodon's status options (others ignore them).
    pub visibility: Option<crate::posts::Visibility>,
    pub spoiler_text: Option<String>,
    pub sensitive: Option<bool>,
    /// The post's creation time (RFC 3339): Bluesky's record key carries it.
    pub created_at: String,
    /// A stable key for this variant: the network's idempotency key or record key comes from it.
    pub idempotency_key: String,
}

#[derive(Debug, Clone)]
pub struct Published {
    pub remote_id: Option<String>,
    pub permalink: Option<String>,
    /// A renewed session to cache.
    pub session: Option<serde_json::Value>,
}

/// A network: connect (check credentials now), publish one variant exactly once (a repeated
/// call for the same `Outgoing::idempotency_key` must find the first post, not make a
/// second), and validate content against its limits.
#[allow(async_fn_in_trait)] // used with static dispatch only (`super::network_for`)
pub trait Network {
    type Credentials: serde::de::DeserializeOwned + Serialize;
    async fn connect(&self, http: &Client, creds: &Self::Credentials) -> Result<Connected, NetError>;
    async fn publish(
        &self,
        http: &Client,
        creds: &Self::Credentials,
        session: Option<serde_json::Value>,
        out: &Outgoing,
    ) -> Result<Published, NetError>;
}

// ---------- each network behind one call ----------

use super::{Creds, bluesky, mastodon, webhook};

/// The one outbound client of the channel adapters (SSRF-safe; loopback only where the
/// deployment allows it, as for webhooks).
pub fn http_client(app: &shared::App) -> Result<Client, String> {
    Client::new(
        app.cfg.webhooks.url_policy,
        std::time::Duration::from_secs(app.cfg.webhooks.timeout_secs.max(5)),
        "workspace-platform-channels/1",
    )
}

/// Check credentials with the network now.
pub async fn connect(http: &Client, creds: &Creds) -> Result<Connected, NetError> {
    match creds {
        Creds::Bluesky(c) => bluesky::Bluesky.connect(http, c).await,
        Creds::Mastodon(c) => mastodon::Mastodon.connect(http, c).await,
        Creds::Webhook(c) => webhook::Webhook.connect(http, c).await,
    }
}

/// Publish one variant (exactly once per `out.idempotency_key`, see [`Network`]).
pub async fn publish(http: &Client, creds: &Creds, session: Option<serde_json::Value>, out: &Outgoing) -> Result<Published, NetError> {
    match creds {
        Creds::Bluesky(c) => bluesky::Bluesky.publish(http, c, session, out).await,
        Creds::Mastodon(c) => mastodon::Mastodon.publish(http, c, session, out).await,
        Creds::Webhook(c) => webhook::Webhook.publish(http, c, session, out).await,
    }
}
