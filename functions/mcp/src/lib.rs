//! The MCP server at `POST /mcp`: every operation of the contract is a tool (`tools.json`,
//! generated with the contract), and a tool call is a request to the API itself with the
//! caller's own credential. The operation runs in its area's function through the same
//! pipeline as any client's request (authentication, scopes, rate limits, idempotency,
//! authority), so there is no second path to any effect: this crate holds no store access
//! and links no area (function crates never depend on each other, docs/architecture.md).
//!
//! Streamable HTTP, stateless, JSON answers (rmcp's tower service; API Gateway buffers, so
//! no SSE). What the server adds is the agent's side of approvals (docs/agents.md): a
//! derived Idempotency-Key, so the same call repeated after a person approved runs the
//! approved write once, and the approval request surfaced as a URL elicitation or a tool
//! error the agent can act on.

mod call;
mod catalog;
mod server;

use lambda_http::Body;
use shared::App;
use shared::error::ApiError;
use std::sync::Arc;

pub use catalog::{PAGE_BYTES, catalog};

/// Where tool calls go: the API's origin as this request reached it, and the client that
/// reaches it (`shared::outbound`, so the call is held to the same address rules as any
/// outbound request).
pub struct Upstream {
    pub origin: String,
    pub client: Arc<shared::outbound::Client>,
}

impl Upstream {
    /// One MCP request's time for all its calls to the API (under the function's 29 s and API
    /// Gateway's 30 s).
    pub const BUDGET: std::time::Duration = std::time::Duration::from_secs(24);

    pub fn client(policy: shared::outbound::UrlPolicy) -> Arc<shared::outbound::Client> {
        Arc::new(
            shared::outbound::Client::new(policy, Self::BUDGET, "workspace-platform-mcp").expect("a static user agent is a valid header"),
        )
    }
}

/// What a tool call needs of the MCP request that carried it (rmcp hands the handler the
/// request's parts; this rides in their extensions).
#[derive(Clone)]
pub(crate) struct Caller {
    upstream: Arc<Upstream>,
    /// When this invocation must have answered: every call to the API gets what is left, so
    /// the function answers (in the envelope) before Lambda's timeout and API Gateway's 30 s.
    deadline: tokio::time::Instant,
    /// The credential, forwarded as it came: the API authenticates it again per call.
    authorization: http::HeaderValue,
    workspace: Option<http::HeaderValue>,
    /// The client opens URLs for its user (URL elicitation), as its session id says.
    url_elicitation: bool,
}

/// The session id of protocol versions before 2026-07-28, which this stateless server keeps
/// nothing for: it carries what the client declared at `initialize` that the server needs
/// later (whether it takes URL elicitations), so any container can answer any request. It
/// proves nothing and grants nothing: the credential comes with every request, and a client
/// that claims the capability falsely only gets the approval as an error it cannot open.
const SESSION_HEADER: &str = "mcp-session-id";

fn session_id(url_elicitation: bool) -> String {
    format!("s1{}{}", if url_elicitation { "u" } else { "n" }, shared::auth::random_base62(24))
}

fn session_url_elicitation(headers: &http::HeaderMap) -> bool {
    headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()).is_some_and(|s| s.starts_with("s1u"))
}

/// For an `initialize` request: whether the client declared URL elicitation.
fn initialize_declares_url_elicitation(body: &Body) -> Option<bool> {
    let bytes: &[u8] = match body {
        Body::Text(t) => t.as_bytes(),
        Body::Binary(b) => b,
        _ => return None,
    };
    // Every tool call's body passes here: parse only one that can be an `initialize`.
    if !bytes.windows(12).any(|w| w == b"\"initialize\"") {
        return None;
    }
    let msg: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    (msg["method"] == "initialize").then(|| msg.pointer("/params/capabilities/elicitation/url").is_some())
}

/// What an agent's token asks for: never `confirm` (approving is a person's).
const AGENT_SCOPES: &str = "read write admin";

const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";
pub const MCP_PATH: &str = "/mcp";

/// Serve one request: `/mcp`, or its protected-resource metadata (RFC 9728).
pub async fn serve(app: &App, upstream: Arc<Upstream>, req: http::Request<Body>) -> shared::http::Response {
    let request_id = shared::ids::new_id("req");
    let path = req.uri().path().to_string();
    if path == METADATA_PATH || path == format!("{METADATA_PATH}{MCP_PATH}") {
        return metadata(app, &upstream.origin, &request_id);
    }
    if path != MCP_PATH {
        let e = ApiError::new(shared::error::ErrorCode::NotFound, format!("no route for {path}"));
        return shared::http::error_response(&e, &request_id, &[]);
    }
    // A request whose Host or Origin is not the API's own is a page in someone's browser using
    // a name that rebinds (the spec's DNS-rebinding rule), or a cross-site call: refused first.
    if let Some(which) = foreign_host_or_origin(req.headers(), &upstream.origin) {
        let e = ApiError::forbidden(format!("the {which} header is not this API's"));
        return shared::http::error_response(&e, &request_id, &[]);
    }
    // Every MCP request, `initialize` and `tools/list` included, needs a valid credential: the
    // 401 names the metadata, so an OAuth-capable client signs in by itself.
    let principal = match shared::auth::authenticate(&app.db, &app.keys, app.jwt.as_ref(), req.headers(), true).await {
        Ok(p) => p,
        Err(mut e) => {
            if e.status() == http::StatusCode::UNAUTHORIZED {
                let given = req.headers().contains_key(http::header::AUTHORIZATION);
                let error = if given { ", error=\"invalid_token\"" } else { "" };
                e.headers.push((
                    "www-authenticate",
                    format!("Bearer resource_metadata=\"{}{METADATA_PATH}{MCP_PATH}\", scope=\"{AGENT_SCOPES}\"{error}", upstream.origin),
                ));
            }
            return shared::http::error_response(&e, &request_id, &[]);
        }
    };
    // Approving is a person's act, on the hosted page; a token that may approve is not handed
    // to an agent (no tool approves either).
    if principal.scopes.contains(&shared::auth::Scope::Confirm) {
        let e = ApiError::forbidden("a token with the confirm scope approves for a person; an agent's token asks for read, write or admin");
        return shared::http::error_response(&e, &request_id, &[]);
    }
    let headers = req.headers();
    let caller = Caller {
        upstream,
        deadline: tokio::time::Instant::now() + Upstream::BUDGET,
        authorization: headers.get(http::header::AUTHORIZATION).cloned().expect("authenticated"),
        workspace: headers.get("x-workspace-id").cloned(),
        url_elicitation: session_url_elicitation(headers),
    };
    let (mut parts, body) = req.into_parts();
    let initialize = initialize_declares_url_elicitation(&body);
    // rmcp keeps no sessions here: the id is this crate's to read, not the transport's.
    parts.headers.remove(SESSION_HEADER);
    parts.extensions.insert(caller);
    let resp = server::service().handle(http::Request::from_parts(parts, body)).await;
    let (mut parts, body) = resp.into_parts();
    let json = parts.headers.get(http::header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !parts.status.is_success() && !json {
        // The transport's own refusals (a GET or DELETE, a missing Accept, a wrong media type,
        // an oversized body) come as plain text: answer them in the envelope, as the API does.
        let code = match parts.status.as_u16() {
            405 => shared::error::ErrorCode::MethodNotAllowed,
            413 => shared::error::ErrorCode::PayloadTooLarge,
            415 => shared::error::ErrorCode::UnsupportedMediaType,
            s if s >= 500 => shared::error::ErrorCode::Internal,
            _ => shared::error::ErrorCode::ValidationError,
        };
        let text = http_body_util::BodyExt::collect(body).await.map(|c| c.to_bytes()).unwrap_or_default();
        let e = ApiError::new(code, String::from_utf8_lossy(&text).trim().to_string());
        let mut resp = shared::http::error_response(&e, &request_id, &[]);
        *resp.status_mut() = parts.status;
        if let Some(allow) = parts.headers.get(http::header::ALLOW) {
            resp.headers_mut().insert(http::header::ALLOW, allow.clone());
        }
        return resp;
    }
    if let Some(url_elicitation) = initialize
        && parts.status.is_success()
    {
        parts.headers.insert(SESSION_HEADER, http::HeaderValue::from_str(&session_id(url_elicitation)).expect("ASCII"));
    }
    let bytes = http_body_util::BodyExt::collect(body).await.map(|c| c.to_bytes()).unwrap_or_default();
    let body = if bytes.is_empty() {
        Body::Empty
    } else {
        match String::from_utf8(bytes.to_vec()) {
            Ok(s) => Body::Text(s),
            Err(e) => Body::Binary(e.into_bytes()),
        }
    };
    let mut resp = http::Response::from_parts(parts, body);
    resp.headers_mut().insert("request-id", http::HeaderValue::from_str(&request_id).expect("ids are ASCII"));
    resp
}

/// `Host` must be the API's (API Gateway routes by it, so in AWS it always is); `Origin`, when
/// a browser sends one, must be the API's origin.
fn foreign_host_or_origin(headers: &http::HeaderMap, origin: &str) -> Option<&'static str> {
    let authority = origin.split_once("://").map_or(origin, |(_, a)| a);
    let header = |n: http::header::HeaderName| headers.get(n).map(|v| v.to_str().unwrap_or_default().to_ascii_lowercase());
    if header(http::header::HOST).is_some_and(|h| h != authority.to_ascii_lowercase()) {
        return Some("Host");
    }
    if header(http::header::ORIGIN).is_some_and(|o| o != origin.to_ascii_lowercase()) {
        return Some("Origin");
    }
    None
}

/// RFC 9728: this resource, the issuer whose tokens it takes, and how to send them.
fn metadata(app: &App, origin: &str, request_id: &str) -> shared::http::Response {
    let servers: Vec<&str> = app.cfg.oauth.iter().map(|o| o.issuer.as_str()).collect();
    let doc = serde_json::json!({
        "resource": format!("{origin}{MCP_PATH}"),
        "authorization_servers": servers,
        "bearer_methods_supported": ["header"],
        "scopes_supported": AGENT_SCOPES.split(' ').collect::<Vec<_>>(),
        "resource_name": "Workspace platform",
    });
    http::Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .header("cache-control", "public, max-age=300")
        .header("request-id", request_id)
        .body(Body::Text(doc.to_string()))
        .expect("valid response")
}
