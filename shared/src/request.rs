//! What a handler receives ([`Req`]: the principal and the parsed request) and returns
//! ([`Reply`]: a status and the `{"data": ..}` envelope), plus the list-page helper.

use crate::app::App;
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use bytes::Bytes;
use http::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Largest accepted body unless a route says otherwise.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The largest body any route accepts (imports, batch sends). Lambda takes at most 6 MB per
/// invocation, and API Gateway hands the body over inside a JSON event: as a string whose
/// quotes and backslashes are escaped again (at worst twice the size), or base64 (4/3) when
/// the content is binary. 2.5 MiB doubled still fits with room for headers and the context,
/// so a client gets our 413 envelope, never API Gateway's own error.
pub const MAX_LARGE_BODY_BYTES: usize = 5 * 512 * 1024;

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
    /// What the pipeline proved: the only way to an effect's authority.
    pub grant: crate::authority::Grant,
    /// Where the portal's pages are ([`pages_origin`]), for links to them.
    pub pages_origin: Option<String>,
}

/// What the handler of a workspace's route receives: the request and the workspace its
/// credential reaches, established before the handler runs, so a handler cannot forget to ask
/// or ask for another. The pipeline answers 403 before the handler on every route that needs a
/// workspace and has none; a route declared without one (`needs_workspace = false`) whose
/// handler takes a `WsReq` gets the same answer.
pub struct WsReq {
    pub ws: crate::auth::WorkspaceId,
    pub req: Req,
}

impl std::ops::Deref for WsReq {
    type Target = Req;
    fn deref(&self) -> &Req {
        &self.req
    }
}

/// The request types a handler may take: [`Req`], or [`WsReq`] on a workspace's route.
pub trait FromReq: Sized + Send + 'static {
    fn from_req(req: Req) -> ApiResult<Self>;
}

impl FromReq for Req {
    fn from_req(req: Req) -> ApiResult<Self> {
        Ok(req)
    }
}

impl FromReq for WsReq {
    fn from_req(req: Req) -> ApiResult<Self> {
        let ws = req.principal.workspace_id.clone();
        let ws = ws.ok_or_else(|| ApiError::forbidden("this route needs a credential that reaches a workspace"))?;
        Ok(WsReq { ws, req })
    }
}

/// Call handler `f` with the request type it takes (`shared::area!` routes every operation
/// through here).
pub fn call<'a, R, F, Fut>(app: &'a App, req: Req, f: F) -> futures_util::future::BoxFuture<'a, ApiResult<Reply>>
where
    R: FromReq,
    F: FnOnce(&'a App, R) -> Fut,
    Fut: std::future::Future<Output = ApiResult<Reply>> + Send + 'a,
{
    match R::from_req(req) {
        Ok(r) => Box::pin(f(app, r)),
        Err(e) => Box::pin(async move { Err(e) }),
    }
}

impl Req {
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
    /// The query's parameters as `T`; a missing required one is named as required. An empty
    /// value is a value (the contract says `minLength: 1`), refused by the field's own check.
    pub fn query_as<T: DeserializeOwned>(&self) -> ApiResult<T> {
        let de = serde_urlencoded::Deserializer::new(url::form_urlencoded::parse(self.query_string.as_bytes()));
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let msg = e.inner().to_string();
            match msg.strip_prefix("missing field `").and_then(|m| m.strip_suffix('`')) {
                Some(name) => ApiError::validation(name, "is required"),
                None => ApiError::validation(if path == "." { "query" } else { &path }, msg),
            }
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

/// One page of a keys-only index: the page's keys, then its items in the index's order (one
/// BatchGetItem), decoded; and the sort key to continue after.
pub async fn keyed_page<T: DeserializeOwned>(app: &App, spec: crate::store::QuerySpec<'_>) -> ApiResult<(Vec<T>, Option<String>)> {
    let out = app.db.query_keys_then_get(spec).await?;
    let items = out.items.into_iter().map(crate::store::from_item::<T>).collect::<ApiResult<Vec<_>>>()?;
    Ok((items, out.next_after))
}

/// One page of a query, decoded; and the sort key to continue after.
pub async fn page<T: DeserializeOwned>(app: &App, spec: crate::store::QuerySpec<'_>) -> ApiResult<(Vec<T>, Option<String>)> {
    let out = app.db.query_page(spec).await?;
    let items = out.items.into_iter().map(crate::store::from_item::<T>).collect::<ApiResult<Vec<_>>>()?;
    Ok((items, out.next_after))
}

pub struct Reply {
    pub status: StatusCode,
    pub body: Bytes,
    /// What an idempotent replay returns instead of `body` (secrets shown once are removed).
    pub replay_body: Option<Bytes>,
}

pub(crate) fn to_bytes<T: Serialize>(v: &T) -> Bytes {
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
    /// 202: a job was accepted and runs on.
    pub fn accepted<T: Serialize>(data: &T) -> Self {
        Self::with_status(StatusCode::ACCEPTED, data)
    }
    pub fn no_content() -> Self {
        Self { status: StatusCode::NO_CONTENT, body: Bytes::new(), replay_body: None }
    }
    pub fn list<T: Serialize>(items: &[T], next_cursor: Option<String>) -> Self {
        let body = List { data: items, has_more: next_cursor.is_some(), next_cursor };
        Self { status: StatusCode::OK, body: to_bytes(&body), replay_body: None }
    }
    /// One page of a list as `domain` returns it (the items and the key to go on from), with
    /// the cursor for that key minted for this page's request.
    pub fn page<T: Serialize>(request: &crate::cursor::PageRequest, (items, next): (Vec<T>, Option<String>)) -> Self {
        Self::list(&items, next.map(|a| request.cursor_for(&a)))
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

/// The caller's address as API Gateway saw it (the bucket of credential-less routes).
pub fn source_ip(parts: &http::request::Parts) -> String {
    use lambda_http::request::RequestContext;
    match parts.extensions.get::<RequestContext>() {
        Some(RequestContext::ApiGatewayV2(ctx)) => ctx.http.source_ip.clone().unwrap_or_else(|| "unknown".into()),
        _ => "unknown".into(),
    }
}

/// Where the pages are served: `PORTAL_PAGES_URL`, else the domain API Gateway received the
/// request on (its request context, which the caller cannot choose, unlike `Host`).
pub fn pages_origin(app: &App, parts: &http::request::Parts) -> Option<String> {
    use lambda_http::request::RequestContext;
    if let Some(o) = &app.cfg.portal_pages_url {
        return Some(o.clone());
    }
    match parts.extensions.get::<RequestContext>() {
        Some(RequestContext::ApiGatewayV2(ctx)) => ctx.domain_name.as_ref().map(|d| format!("https://{d}")),
        _ => None,
    }
}
