//! The request pipeline every area function runs, in the order of architecture.md:
//! request id + span -> route -> authenticate -> scope -> rate limit -> body checks ->
//! idempotency -> handler -> response with `Request-Id` and rate-limit headers.
//! Every failure, including a panic in a handler, leaves as the error envelope.

use crate::app::App;
use crate::auth::{Principal, Scope};
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::idempotency::{self, Begin};
use crate::ratelimit::Class;
use crate::routing::{Route, match_route};
use bytes::Bytes;
use futures_util::FutureExt;
use http::{HeaderValue, Method, StatusCode};
use lambda_http::Body;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::panic::AssertUnwindSafe;
use std::time::Instant;
use tracing::Instrument;

pub const MAX_BODY_BYTES: usize = 1024 * 1024;
const JSON: &str = "application/json; charset=utf-8";

/// What a handler receives: the principal and the parsed request. Handlers never read raw
/// identity headers.
pub struct Req {
    pub principal: Principal,
    pub method: Method,
    pub params: Vec<(&'static str, String)>,
    pub query: Vec<(String, String)>,
    /// The raw query string, for [`Req::query_as`].
    pub query_string: String,
    pub headers: http::HeaderMap,
    pub body: Bytes,
    pub request_id: String,
}

impl Req {
    /// The caller's workspace. The pipeline guarantees one for every route that needs it.
    pub fn ws(&self) -> &str {
        self.principal.workspace_id.as_deref().unwrap_or_default()
    }
    pub fn param(&self, name: &str) -> &str {
        self.params.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str()).unwrap_or_default()
    }
    /// A typed id from the path: a malformed one is 404 (no object can have it), as a
    /// well-formed id of another workspace is.
    pub fn path_id<T: crate::ids::PrefixedId>(&self, name: &str) -> ApiResult<T> {
        T::parse(self.param(name)).ok_or_else(|| ApiError::not_found(T::OBJECT))
    }
    /// The query string as a struct (`serde_urlencoded`): unknown parameters are ignored, a
    /// value of the wrong shape is 400 naming the parameter.
    pub fn query_as<T: DeserializeOwned>(&self) -> ApiResult<T> {
        let de = serde_urlencoded::Deserializer::new(url::form_urlencoded::parse(self.query_string.as_bytes()));
        serde_path_to_error::deserialize(de).map_err(|e| {
            let field = e.path().to_string();
            let field = if field == "." { "query".to_string() } else { field };
            ApiError::validation(&field, e.inner().to_string())
        })
    }
    pub fn query(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
    pub fn json<T: DeserializeOwned>(&self) -> ApiResult<T> {
        crate::validate::parse_json(&self.body)
    }
    /// Parse `limit`/`cursor` for a list bound to the caller's scope (its workspace, or its
    /// subject on routes without one) and the given filters.
    pub async fn page(&self, app: &App, list: &str, filters: &[(&str, Option<&str>)]) -> ApiResult<crate::cursor::PageRequest> {
        let key = &app.platform_secret().await?.cursor_key;
        let scope = self.principal.tenant_scope();
        crate::cursor::PageRequest::parse(key, &scope, list, self.query("limit"), self.query("cursor"), filters)
    }
}

/// One page of a list: run the query, decode the items, mint the next cursor.
pub async fn list_page<T: DeserializeOwned + Serialize>(
    app: &App,
    page: &crate::cursor::PageRequest,
    spec: crate::store::QuerySpec<'_>,
) -> ApiResult<Reply> {
    let out = crate::store::query_page(app, spec).await?;
    let items = out.items.into_iter().map(crate::store::from_item::<T>).collect::<ApiResult<Vec<_>>>()?;
    Ok(Reply::list(&items, out.next_after.map(|a| page.cursor_for(&a))))
}

pub struct Reply {
    pub status: StatusCode,
    pub body: Bytes,
    /// What an idempotent replay returns instead of `body` (secrets shown once are removed).
    pub replay_body: Option<Bytes>,
}

fn to_bytes<T: Serialize>(v: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(v).expect("response types serialize"))
}

#[derive(Serialize)]
struct One<'a, T> {
    data: &'a T,
}

#[derive(Serialize)]
struct List<'a, T> {
    data: &'a [T],
    has_more: bool,
    next_cursor: Option<String>,
}

impl Reply {
    pub fn with_status<T: Serialize>(status: StatusCode, data: &T) -> Self {
        Self { status, body: to_bytes(&One { data }), replay_body: None }
    }
    pub fn ok<T: Serialize>(data: &T) -> Self {
        Self::with_status(StatusCode::OK, data)
    }
    pub fn created<T: Serialize>(data: &T) -> Self {
        Self::with_status(StatusCode::CREATED, data)
    }
    pub fn no_content() -> Self {
        Self { status: StatusCode::NO_CONTENT, body: Bytes::new(), replay_body: None }
    }
    pub fn list<T: Serialize>(items: &[T], next_cursor: Option<String>) -> Self {
        let body = List { data: items, has_more: next_cursor.is_some(), next_cursor };
        Self { status: StatusCode::OK, body: to_bytes(&body), replay_body: None }
    }
    /// `{"data": {"id", "object", "deleted": true}}`.
    pub fn deleted(id: &str, object: &str) -> Self {
        Self::ok(&serde_json::json!({"id": id, "object": object, "deleted": true}))
    }
    /// Store `redacted` for idempotent replays instead of the body (for secrets shown once).
    pub fn replay_as<T: Serialize>(mut self, redacted: &T) -> Self {
        self.replay_body = Some(to_bytes(&One { data: redacted }));
        self
    }
}

/// What the pipeline measured about one request.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    pub ddb_calls: u32,
    pub status: u16,
}

pub type Response = http::Response<Body>;

/// Serve one request of an area.
pub async fn serve(app: &App, routes: &'static [Route], req: http::Request<Body>) -> Response {
    serve_with_stats(app, routes, req).await.0
}

pub async fn serve_with_stats(app: &App, routes: &'static [Route], req: http::Request<Body>) -> (Response, Stats) {
    let request_id = request_id_of(&req);
    let span = tracing::info_span!("request", request_id = %request_id, method = %req.method(), path = %req.uri().path());
    async move {
        let started = Instant::now();
        let fut = AssertUnwindSafe(handle(app, routes, req, &request_id)).catch_unwind();
        let (res, ddb_calls) = crate::metrics::count_ddb_calls(fut).await;
        let mut resp = match res {
            Ok(r) => r,
            Err(_) => error_response(&ApiError::internal("handler panicked"), &request_id, &[]),
        };
        resp.headers_mut().insert("request-id", header_value(&request_id));
        let status = resp.status().as_u16();
        tracing::info!(status, ddb_calls, duration_ms = started.elapsed().as_millis() as u64, "request done");
        (resp, Stats { ddb_calls, status })
    }
    .instrument(span)
    .await
}

fn header_value(s: &str) -> HeaderValue {
    HeaderValue::from_str(s).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

fn request_id_of(req: &http::Request<Body>) -> String {
    use lambda_http::RequestExt;
    use lambda_http::request::RequestContext;
    if let Some(RequestContext::ApiGatewayV2(ctx)) = req.request_context_ref()
        && let Some(id) = ctx.request_id.as_deref().filter(|s| !s.is_empty())
    {
        return id.to_string();
    }
    crate::ids::new_id("req")
}

fn json_response(status: StatusCode, body: Bytes, headers: &[(&'static str, String)]) -> Response {
    let mut b = http::Response::builder().status(status);
    if !body.is_empty() {
        b = b.header(http::header::CONTENT_TYPE, JSON);
    }
    for (k, v) in headers {
        b = b.header(*k, header_value(v));
    }
    b.body(if body.is_empty() { Body::Empty } else { Body::Binary(body.to_vec()) }).expect("status and headers are valid")
}

pub fn error_response(e: &ApiError, request_id: &str, extra: &[(&'static str, String)]) -> Response {
    let mut headers = e.headers.clone();
    headers.extend(extra.iter().filter(|(k, _)| !e.headers.iter().any(|(ek, _)| ek == k)).cloned());
    json_response(e.status(), to_bytes(&e.body(request_id)), &headers)
}

fn is_json(ct: Option<&HeaderValue>) -> bool {
    let Some(ct) = ct.and_then(|v| v.to_str().ok()) else { return false };
    let mime = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

async fn handle(app: &App, routes: &'static [Route], req: http::Request<Body>, request_id: &str) -> Response {
    let (parts, body) = req.into_parts();
    let m = match match_route(routes, &parts.method, parts.uri.path()) {
        Ok(m) => m,
        Err(e) => return error_response(&e, request_id, &[]),
    };
    let principal = match crate::auth::authenticate(app, &parts.headers, m.route.needs_workspace).await {
        Ok(p) => p,
        Err(e) => return error_response(&e, request_id, &[]),
    };
    let needed = if m.route.class == Class::Read { Scope::Read } else { Scope::Write };
    if !principal.scopes.contains(&needed) {
        let e = ApiError::forbidden(format!("this credential lacks the {} scope", if needed == Scope::Read { "read" } else { "write" }));
        return error_response(&e, request_id, &[]);
    }

    let bucket = principal.tenant_scope();
    let (decision, ()) =
        tokio::join!(app.limiter.acquire(&app.ddb, &app.cfg.table, &bucket, m.route.class), crate::auth::touch_last_used(app, &principal),);
    let decision = match decision {
        Ok(d) => d,
        Err(e) => return error_response(&e, request_id, &[]),
    };
    let rl_headers = decision.headers();
    if !decision.allowed {
        return error_response(&decision.into_error(), request_id, &[]);
    }
    let fail = |e: ApiError| error_response(&e, request_id, &rl_headers);

    let body: Bytes = match body {
        Body::Empty => Bytes::new(),
        Body::Text(t) => Bytes::from(t),
        Body::Binary(b) => Bytes::from(b),
        _ => Bytes::new(),
    };
    if body.len() > m.route.max_body {
        return fail(ApiError::new(ErrorCode::PayloadTooLarge, format!("the body exceeds {} bytes", m.route.max_body)));
    }
    if !body.is_empty() && !is_json(parts.headers.get(http::header::CONTENT_TYPE)) {
        return fail(ApiError::new(ErrorCode::UnsupportedMediaType, "the body must be JSON sent as Content-Type: application/json"));
    }
    let query_string = parts.uri.query().unwrap_or("").to_string();
    let query: Vec<(String, String)> = url::form_urlencoded::parse(query_string.as_bytes()).into_owned().collect();

    let mut reservation = None;
    let idem_key = parts.headers.get("idempotency-key").map(|v| v.to_str().unwrap_or("\u{7f}").to_string());
    if parts.method != Method::GET
        && let Some(key) = idem_key
    {
        if let Err(e) = idempotency::validate_key(&key) {
            return fail(e);
        }
        let path_q = match parts.uri.query() {
            Some(q) => format!("{}?{q}", m.relative_path),
            None => m.relative_path.clone(),
        };
        let fp = idempotency::fingerprint(parts.method.as_str(), &path_q, &body);
        match idempotency::begin(app, principal.workspace_id.as_deref().unwrap_or_default(), &key, fp).await {
            Ok(Begin::Proceed(r)) => reservation = Some(r),
            Ok(Begin::Replay(stored)) => {
                let mut h = rl_headers.clone();
                h.push(("idempotent-replayed", "true".into()));
                let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
                return json_response(status, Bytes::from(stored.body), &h);
            }
            Err(e) => return fail(e),
        }
    }

    let req = Req {
        principal,
        method: parts.method,
        params: m.params,
        query,
        query_string,
        headers: parts.headers,
        body,
        request_id: request_id.to_string(),
    };
    let result = AssertUnwindSafe((m.route.handler)(app, req)).catch_unwind().await;
    let result = result.unwrap_or_else(|_| Err(ApiError::internal("handler panicked")));
    let (status, body, replay) = match result {
        Ok(r) => (r.status, r.body.clone(), r.replay_body.unwrap_or(r.body)),
        Err(e) => {
            let b = to_bytes(&e.body(request_id));
            let resp = error_response(&e, request_id, &rl_headers);
            if let Some(r) = &reservation {
                if e.status().is_server_error() {
                    idempotency::release(app, r).await;
                } else if let Err(err) = idempotency::complete(app, r, e.status().as_u16(), &b).await {
                    tracing::warn!(error = %err, "could not store idempotent error response");
                }
            }
            return resp;
        }
    };
    if let Some(r) = &reservation
        && let Err(e) = idempotency::complete(app, r, status.as_u16(), &replay).await
    {
        // The write happened; failing the response now would invite a duplicate retry.
        tracing::warn!(error = %e, "could not store idempotent response");
    }
    json_response(status, body, &rl_headers)
}
