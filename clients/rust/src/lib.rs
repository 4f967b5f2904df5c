//! Client for the Workspace Platform API.
//!
//! Every operation of the contract is a typed method on [`Client`] (generated from the
//! embedded OpenAPI document, see [`contract`]); lists come back as a [`Page`] or, with the
//! `_all` variant, as a [`Stream`](futures_util::Stream) that follows `next_cursor`.
//!
//! ```no_run
//! use futures_util::StreamExt;
//! use workspace_platform_client::{Client, ListPostsQuery};
//!
//! # async fn run() -> workspace_platform_client::Result<()> {
//! let client = Client::with_api_key("https://api.example.com/api/v1", "wsp_...")?;
//! let posts = client.list_posts_all(&ListPostsQuery::default());
//! futures_util::pin_mut!(posts);
//! while let Some(post) = posts.next().await {
//!     println!("{}", post?.id);
//! }
//! # Ok(()) }
//! ```
//!
//! Writes carry an `Idempotency-Key` (a fresh one per call, reused by that call's retries, or
//! yours through [`Client::idempotency_key`]); 429 and 503 are retried after `Retry-After`,
//! other errors come back as [`Error::Api`] with the API's code, message, details and request
//! id.

#[rustfmt::skip]
mod generated;
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
pub mod webhooks;

pub use generated::*;

use futures_util::Stream;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// The contract this client was generated from, byte for byte as published.
pub mod contract {
    pub const OPENAPI_JSON: &str = include_str!("../contract/openapi.json");
    pub const OPENAPI_YAML: &str = include_str!("../contract/openapi.yaml");
    /// The API version the contract (and this package's version) carries.
    pub const API_VERSION: &str = env!("CARGO_PKG_VERSION");
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The API's error envelope, with the status and `Retry-After` of the response.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ApiError {
    #[serde(skip)]
    pub status: u16,
    pub code: String,
    pub message: String,
    #[serde(default)]
    pub details: Vec<serde_json::Value>,
    #[serde(default)]
    pub request_id: Option<String>,
    /// Seconds, from `Retry-After`.
    #[serde(skip)]
    pub retry_after: Option<u64>,
}

#[derive(Debug)]
pub enum Error {
    /// The API answered with its error envelope.
    Api(ApiError),
    /// No answer: connection refused or dropped, TLS, or the per-attempt timeout.
    Transport(reqwest::Error),
    /// A 2xx whose body is not what the contract says (a bug on one side).
    Decode { status: u16, message: String, body: String },
    /// The client was set up wrongly (a base URL that does not parse, a header value).
    Config(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Api(e) => write!(f, "{} {}: {} (request {})", e.status, e.code, e.message, e.request_id.as_deref().unwrap_or("-")),
            Error::Transport(e) => write!(f, "transport: {e}"),
            Error::Decode { status, message, .. } => write!(f, "a {status} body that does not decode: {message}"),
            Error::Config(m) => write!(f, "configuration: {m}"),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// The API error, if the API answered one.
    pub fn api(&self) -> Option<&ApiError> {
        match self {
            Error::Api(e) => Some(e),
            _ => None,
        }
    }
}

/// `{"data": T}`
#[derive(Debug, Clone, Deserialize)]
pub struct Data<T> {
    pub data: T,
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page<T> {
    pub data: Vec<T>,
    pub has_more: bool,
    #[serde(default)]
    pub next_cursor: Option<String>,
}

#[derive(Clone)]
enum Credential {
    ApiKey(String),
    OAuth { token: String, workspace_id: String },
    Portal(String),
}

struct Inner {
    http: reqwest::Client,
    base: String,
    credential: Credential,
    max_retries: u32,
}

/// A handle to the API; cheap to clone. Per-call options ([`Client::idempotency_key`],
/// [`Client::confirmation`]) return a configured copy.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
    idempotency_key: Option<String>,
    confirmation: Option<String>,
}

/// Settings beyond the credential.
#[derive(Debug, Clone)]
pub struct Options {
    /// Per attempt. Default 30 s.
    pub timeout: Duration,
    /// Retries of a 429, a 503 or a dropped connection. Default 3.
    pub max_retries: u32,
}

impl Default for Options {
    fn default() -> Self {
        Self { timeout: Duration::from_secs(30), max_retries: 3 }
    }
}

impl Client {
    /// `base_url` is the deployment's `/api/v1`, e.g. `https://<api-id>.execute-api.<region>.amazonaws.com/api/v1`.
    pub fn with_api_key(base_url: &str, api_key: &str) -> Result<Self> {
        Self::new(base_url, Credential::ApiKey(api_key.into()), Options::default())
    }

    /// An OAuth access token acting in one workspace (`x-workspace-id`).
    pub fn with_access_token(base_url: &str, token: &str, workspace_id: &str) -> Result<Self> {
        Self::new(base_url, Credential::OAuth { token: token.into(), workspace_id: workspace_id.into() }, Options::default())
    }

    /// A customer's portal session (`pss_...`, from `exchange_portal_token`): it reaches only
    /// the `/portal/me...` operations, for that customer.
    pub fn with_portal_session(base_url: &str, session: &str) -> Result<Self> {
        Self::new(base_url, Credential::Portal(session.into()), Options::default())
    }

    /// The same client with other [`Options`].
    pub fn with_options(&self, options: Options) -> Result<Self> {
        Self::new(&self.inner.base, self.inner.credential.clone(), options)
    }

    fn new(base_url: &str, credential: Credential, options: Options) -> Result<Self> {
        reqwest::Url::parse(base_url).map_err(|e| Error::Config(format!("base_url: {e}")))?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls()?)
            .timeout(options.timeout)
            .user_agent(concat!("workspace-platform-client-rust/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Error::Config(e.to_string()))?;
        Ok(Self {
            inner: Arc::new(Inner { http, base: base_url.trim_end_matches('/').into(), credential, max_retries: options.max_retries }),
            idempotency_key: None,
            confirmation: None,
        })
    }

    /// This copy sends `key` as the Idempotency-Key of its writes (instead of a fresh one per
    /// call): send the same logical write again with the same key and it happens once.
    pub fn idempotency_key(&self, key: impl Into<String>) -> Self {
        Self { idempotency_key: Some(key.into()), ..self.clone() }
    }

    /// This copy sends `X-Capability-Confirmation: token` (a person's confirmation of this
    /// exact write, minted with [`Client::create_confirmation`]); use it with the
    /// idempotency key the confirmation names.
    pub fn confirmation(&self, token: impl Into<String>) -> Self {
        Self { confirmation: Some(token.into()), ..self.clone() }
    }

    /// Any operation by method and path (relative to the base URL), for what the typed
    /// methods do not cover; the same retries, idempotency and errors.
    pub async fn call<T: DeserializeOwned, Q: Serialize + ?Sized, B: Serialize + ?Sized>(
        &self,
        method: reqwest::Method,
        path: &str,
        query: Option<&Q>,
        body: Option<&B>,
    ) -> Result<T> {
        let (status, bytes) = self.send(method, path, query, body).await?;
        if bytes.is_empty() && status == 204 {
            return serde_json::from_slice(b"null").map_err(|e| Error::Decode { status, message: e.to_string(), body: String::new() });
        }
        serde_json::from_slice(&bytes).map_err(|e| Error::Decode {
            status,
            message: e.to_string(),
            body: String::from_utf8_lossy(&bytes).into(),
        })
    }

    async fn send<Q: Serialize + ?Sized, B: Serialize + ?Sized>(
        &self,
        method: reqwest::Method,
        path: &str,
        query: Option<&Q>,
        body: Option<&B>,
    ) -> Result<(u16, Vec<u8>)> {
        let write = method != reqwest::Method::GET;
        // One key for the logical write, reused by every retry of it.
        let key = write.then(|| self.idempotency_key.clone().unwrap_or_else(|| ulid::Ulid::generate().to_string()));
        let body = body.map(serde_json::to_vec).transpose().map_err(|e| Error::Config(format!("body: {e}")))?;
        let query = query.map(serde_urlencoded::to_string).transpose().map_err(|e| Error::Config(format!("query: {e}")))?;
        let url = match query.filter(|q| !q.is_empty()) {
            Some(q) => format!("{}{path}?{q}", self.inner.base),
            None => format!("{}{path}", self.inner.base),
        };
        let mut attempt = 0;
        loop {
            let mut req = self.inner.http.request(method.clone(), &url);
            req = match &self.inner.credential {
                Credential::ApiKey(k) => req.bearer_auth(k),
                Credential::OAuth { token, workspace_id } => req.bearer_auth(token).header("x-workspace-id", workspace_id),
                Credential::Portal(session) => req.header("X-Portal-Session", session),
            };
            if let Some(k) = &key {
                req = req.header("Idempotency-Key", k);
            }
            if let Some(t) = &self.confirmation {
                req = req.header("X-Capability-Confirmation", t);
            }
            if let Some(b) = &body {
                req = req.header("Content-Type", "application/json").body(b.clone());
            }
            let wait = match req.send().await {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let retry_after = resp.headers().get("retry-after").and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
                    let request_id = resp.headers().get("request-id").and_then(|v| v.to_str().ok()).map(String::from);
                    let bytes = resp.bytes().await.map_err(Error::Transport)?.to_vec();
                    if (200..300).contains(&status) {
                        return Ok((status, bytes));
                    }
                    if !matches!(status, 429 | 503) || attempt >= self.inner.max_retries {
                        return Err(Error::Api(api_error(status, retry_after, request_id, &bytes)));
                    }
                    retry_after.map(Duration::from_secs).unwrap_or_else(|| backoff(attempt))
                }
                // A GET, or a write whose key makes a second delivery harmless.
                Err(e) if attempt < self.inner.max_retries && (e.is_connect() || e.is_request() || e.is_timeout()) => backoff(attempt),
                Err(e) => return Err(Error::Transport(e)),
            };
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    /// Pages of `path` as one stream of items.
    fn paginate<T, Q>(&self, path: String, query: Option<&Q>) -> impl Stream<Item = Result<T>> + Send + 'static
    where
        T: DeserializeOwned + Send + 'static,
        Q: Serialize + ?Sized,
    {
        let base: Vec<(String, String)> = query
            .and_then(|q| serde_urlencoded::to_string(q).ok())
            .map(|s| serde_urlencoded::from_str(&s).unwrap_or_default())
            .unwrap_or_default();
        let client = self.clone();
        let state = (Some(None::<String>), Vec::<T>::new().into_iter());
        futures_util::stream::unfold((client, path, base, state), |(client, path, base, (mut cursor, mut buffered))| async move {
            loop {
                if let Some(item) = buffered.next() {
                    return Some((Ok(item), (client, path, base, (cursor, buffered))));
                }
                // `cursor` is None once the last page is read.
                let next = cursor.take()?;
                let mut q = base.clone();
                q.retain(|(k, _)| k != "cursor");
                if let Some(c) = next {
                    q.push(("cursor".into(), c));
                }
                match client.call::<Page<T>, _, ()>(reqwest::Method::GET, &path, Some(&q), None).await {
                    Ok(page) => {
                        cursor = if page.has_more { page.next_cursor.map(Some) } else { None };
                        buffered = page.data.into_iter();
                    }
                    Err(e) => return Some((Err(e), (client, path, base, (None, Vec::new().into_iter())))),
                }
            }
        })
    }
}

fn api_error(status: u16, retry_after: Option<u64>, request_id: Option<String>, body: &[u8]) -> ApiError {
    #[derive(Deserialize)]
    struct Envelope {
        error: ApiError,
    }
    match serde_json::from_slice::<Envelope>(body) {
        Ok(Envelope { mut error }) => {
            error.status = status;
            error.retry_after = retry_after;
            error.request_id = error.request_id.or(request_id);
            error
        }
        // Not the API's envelope: a proxy or load balancer answered.
        Err(_) => ApiError {
            status,
            code: format!("HTTP_{status}"),
            message: String::from_utf8_lossy(&body[..body.len().min(512)]).into(),
            details: vec![],
            request_id,
            retry_after,
        },
    }
}

/// 0.5 s, 1 s, 2 s, ... with up to 50 % jitter, at most 20 s.
fn backoff(attempt: u32) -> Duration {
    let base = 500u64.saturating_mul(1 << attempt.min(6)).min(20_000);
    let jitter = (ulid::Ulid::generate().random() as u64) % (base / 2 + 1);
    Duration::from_millis(base / 2 + jitter)
}

/// A query struct from its URL form (`a=1&b=x`).
#[doc(hidden)]
pub fn parse_query<Q: DeserializeOwned>(query: &str) -> Result<Q> {
    serde_urlencoded::from_str(query).map_err(|e| Error::Config(format!("query: {e}")))
}

/// A path parameter, percent-encoded as one segment.
fn encode(segment: &str) -> String {
    const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');
    percent_encoding::utf8_percent_encode(segment, SEGMENT).to_string()
}

/// TLS on ring with the platform's trust store, built for this client alone: the host
/// application's process-wide rustls provider (if any) is neither needed nor changed.
fn tls() -> Result<rustls::ClientConfig> {
    use rustls_platform_verifier::BuilderVerifierExt;
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_platform_verifier())
        .map_err(|e| Error::Config(format!("tls: {e}")))?
        .with_no_client_auth();
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client built from today's contract reads an answer from a later one: a status value
    /// and a field it does not know (docs/api.md, "Changes to version 1").
    #[test]
    fn an_older_client_reads_new_enum_values_and_fields() {
        let later = serde_json::json!({
            "id": "ct_01JD8X4M7Q2V9K3R5T6W8Y0Z1A", "object": "contact", "email": "ada@example.org",
            "status": "vip", "email_status": "paused_for_review", "labels": [], "metadata": {}, "custom_fields": {},
            "created_at": "2026-11-28T10:00:00Z", "updated_at": "2026-11-28T10:00:00Z", "loyalty_tier": "gold"
        });
        let contact: Contact = serde_json::from_value(later).expect("an unknown value and field parse");
        assert_eq!(contact.status, ContactStatus::Other);
        assert_eq!(contact.email_status, ContactEmailStatus::Other);
        assert_eq!(contact.email, "ada@example.org");
    }
}
