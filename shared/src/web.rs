//! The pipeline of the hosted web pages, beside the JSON one of `crate::http`: the same stages
//! for a browser. Two sites use it: the customer portal (`/p/<workspace slug>/...`, customers'
//! sessions) and the approval pages (`/approvals/<workspace slug>/...`, people of the workspace
//! signed in with the workspace's OpenID provider). Route -> workspace by its slug -> session
//! from the site's cookie (a portal session of this workspace only; a person's access token,
//! verified as the API verifies it, of a member of this workspace) -> rate limit -> form body
//! and its CSRF token -> [`Grant`] -> handler -> HTML with the security headers. A page handler
//! reaches effects only through the grant, as an API handler does.
//!
//! Why each defence:
//! - Cookies are `HttpOnly; Secure; SameSite=Lax` and scoped to `/p/<slug>` (a portal session
//!   belongs to one workspace) or `/approvals` (a person's sign-in serves every workspace they
//!   are a member of, each checked on every page), so a script cannot read them, other sites'
//!   forms do not carry them, and another workspace's portal never gets them (a session of
//!   another workspace that arrives anyway counts as none).
//! - Every form carries a token: HMAC of the browser's `portal_csrf` cookie and its session,
//!   under a key derived from the platform secret. A post without it, with another one, or from
//!   another site (`Sec-Fetch-Site: cross-site`) is refused with 403 before the handler runs.
//! - `Content-Security-Policy` allows only the pages' own style, images and script, no inline
//!   code, no framing, and forms only to the pages themselves; no page makes a third-party request.

use crate::app::App;
use crate::auth::{Principal, WorkspaceId};
use crate::authority::{EffectInfo, Grant};
use crate::error::{ApiError, ApiResult};
use crate::ratelimit::Class;
use bytes::Bytes;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use http::{HeaderValue, Method, StatusCode};
use lambda_http::Body;
use std::panic::AssertUnwindSafe;
use std::time::Instant;
use tracing::Instrument;

pub const SESSION_COOKIE: &str = "portal_session";
/// The approval pages' session: a person's access token, sealed under the platform's key.
pub const PERSON_COOKIE: &str = "approver_session";
/// What the person cookie's seal is bound to.
pub const PERSON_COOKIE_AAD: &str = "approvals/session";
pub const CSRF_COOKIE: &str = "portal_csrf";
/// The form field that carries the CSRF token.
pub const CSRF_FIELD: &str = "csrf";
/// Largest form a page takes.
pub const MAX_FORM_BYTES: usize = 16 * 1024;

pub const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; script-src 'self'; form-action 'self'; \
                       frame-ancestors 'none'; base-uri 'none'";

pub type Response = http::Response<Body>;

pub type PageHandler = for<'a> fn(&'a App, Visit) -> BoxFuture<'a, ApiResult<View>>;

/// One page: a method and a path under the site's `<prefix><slug>` (`/bookings/{id}/cancel`).
pub struct Page {
    pub method: Method,
    pub path: &'static str,
    /// Without a session the visitor is sent to the sign-in page.
    pub signed_in: bool,
    /// The effects its handler may reach, as an API route declares them.
    pub effects: &'static [EffectInfo],
    /// Its rate class, per session or (signed out) per network address; None: `portal` with a
    /// session, else `read` for GET and `write` for the rest.
    pub class: Option<Class>,
    /// Its address carries its own capability (an emailed unsubscribe link): its POST needs no
    /// form token and may come from anywhere (a mail provider's server, RFC 8058), in any
    /// content type; the page sets no cookie.
    pub bearer: bool,
    /// Its address carries a link's `token` for this purpose (`crate::links`: an emailed
    /// booking's manage link): the visitor acts as the link's contact on its one object, with
    /// no session and no cookie. The token is checked before anything else (an invalid one is
    /// 404 and costs no read); a POST must come from the page itself (not another site), as a
    /// form.
    pub link: Option<&'static str>,
    pub handler: PageHandler,
}

/// A page of a site, declared in one line: `page!(POST "/bookings/{id}/cancel" =>
/// bookings::cancel, signed_in = true, effects = &[...], class = Class::...)`.
#[macro_export]
macro_rules! page {
    ($method:ident $path:literal => $handler:path $(, signed_in = $signed:expr)? $(, effects = $effects:expr)? $(, class = $class:expr)? $(, bearer = $bearer:expr)? $(, link = $link:expr)?) => {
        $crate::web::Page {
            method: $crate::reexports::http::Method::$method,
            path: $path,
            signed_in: false $(|| $signed)?,
            bearer: false $(|| $bearer)?,
            link: { #[allow(unused_mut, unused_assignments)] let mut l: Option<&'static str> = None; $( l = Some($link); )? l },
            class: { #[allow(unused_mut, unused_assignments)] let mut c: Option<$crate::ratelimit::Class> = None; $( c = Some($class); )? c },
            effects: { #[allow(unused_mut, unused_assignments)] let mut e: &'static [$crate::authority::EffectInfo] = &[]; $( e = $effects; )? e },
            handler: {
                fn handle<'a>(app: &'a $crate::App, v: $crate::web::Visit) -> $crate::reexports::BoxFuture<'a, $crate::ApiResult<$crate::web::View>> {
                    Box::pin($handler(app, v))
                }
                handle as $crate::web::PageHandler
            },
        }
    };
}

/// An error as the site shows it.
pub struct Failure<'a> {
    pub status: StatusCode,
    pub message: &'a str,
    /// `/p/<slug>` when the workspace is known (for the style sheet and the way back).
    pub base: Option<&'a str>,
    pub accept_language: Option<&'a str>,
}

/// Who signs in to a site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sessions {
    /// A customer: the `portal_session` cookie, a portal session of this workspace.
    Portal,
    /// A person of the workspace: [`PERSON_COOKIE`], their access token sealed, verified and
    /// checked for membership on every page, as the API checks a bearer token.
    Person,
}

/// What a slug names: the workspace, and its current slug when this one is a former one.
pub type Resolved = (WorkspaceId, Option<String>);

/// The pages of one site and what the pipeline needs from it.
pub struct Site {
    /// `/p/` or `/approvals/`: the workspace's slug follows.
    pub prefix: &'static str,
    pub sessions: Sessions,
    /// Where the site's cookies are sent: `None` for the workspace's own pages
    /// (`<prefix><slug>`), or one path for the whole site.
    pub cookie_path: Option<&'static str>,
    /// Pages outside any workspace, at `<prefix><path>` (an OpenID provider's one callback).
    /// They have no session and reach no effect; their `Visit::ws` is empty.
    pub root: &'static [Page],
    pub pages: &'static [Page],
    /// The workspace a slug names, and its current slug when this one is a former one (the
    /// visitor is sent there).
    pub resolve: for<'a> fn(&'a App, &'a str) -> BoxFuture<'a, ApiResult<Option<Resolved>>>,
    pub failure: fn(&Failure<'_>) -> String,
}

/// What a page handler receives.
pub struct Visit {
    pub ws: WorkspaceId,
    pub slug: String,
    /// `/p/<slug>`: every link and form of the page starts with it.
    pub base: String,
    /// The session token and its contact, when signed in to this workspace (a person's site:
    /// the sealed cookie and the person's subject).
    pub session: Option<(String, String)>,
    /// A person's site: who is signed in, as the API would authenticate their token for this
    /// workspace (scopes capped by their role).
    pub person: Option<Principal>,
    /// A link page: what its token grants (checked, unexpired) and the token itself.
    pub link: Option<(crate::links::Claims, String)>,
    /// Where this visit's cookies are sent.
    pub cookie_path: String,
    pub params: Vec<(&'static str, String)>,
    pub query: Vec<(String, String)>,
    /// The request's body as it came (a bearer page may read a body that is not a form).
    pub body: Bytes,
    pub form: Vec<(String, String)>,
    pub headers: http::HeaderMap,
    /// The token this page's forms must carry.
    pub csrf: String,
    /// The caller's network address (rate buckets of anonymous pages).
    pub source: String,
    /// Where the pages are served (`crate::request::pages_origin`), for links in emails.
    pub origin: Option<String>,
    pub grant: Grant,
}

impl Visit {
    pub fn param(&self, name: &str) -> &str {
        self.params.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str()).unwrap_or_default()
    }
    pub fn query(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
    pub fn field(&self, name: &str) -> Option<&str> {
        self.form.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    pub fn cookie(&self, name: &str) -> Option<&str> {
        cookie(&self.headers, name)
    }
    /// The signed-in contact's id; the pipeline sends visitors without a session away first.
    pub fn contact(&self) -> ApiResult<&str> {
        self.session.as_ref().map(|(_, c)| c.as_str()).ok_or_else(|| ApiError::unauthorized("sign in first"))
    }
    pub fn session_token(&self) -> &str {
        self.session.as_ref().map(|(t, _)| t.as_str()).unwrap_or_default()
    }
    /// A `Set-Cookie` for this site: `HttpOnly; Secure; SameSite=Lax`, scoped to its pages;
    /// `max_age` 0 removes it.
    pub fn set_cookie(&self, name: &str, value: &str, max_age: i64) -> String {
        set_cookie(&self.cookie_path, name, value, max_age)
    }
}

fn set_cookie(base: &str, name: &str, value: &str, max_age: i64) -> String {
    format!("{name}={value}; Path={base}; Max-Age={max_age}; HttpOnly; Secure; SameSite=Lax")
}

/// The value of cookie `name`.
pub fn cookie<'h>(headers: &'h http::HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

enum Content {
    Html(String),
    Redirect(String),
    Asset { content_type: &'static str, bytes: Vec<u8>, max_age: u32 },
}

/// What a page handler answers.
pub struct View {
    status: StatusCode,
    content: Content,
    cookies: Vec<String>,
    lang: Option<&'static str>,
}

impl View {
    pub fn html(html: String) -> Self {
        Self { status: StatusCode::OK, content: Content::Html(html), cookies: vec![], lang: None }
    }
    /// 303 See Other: after a form, the browser asks for `to` with GET.
    pub fn redirect(to: impl Into<String>) -> Self {
        Self { status: StatusCode::SEE_OTHER, content: Content::Redirect(to.into()), cookies: vec![], lang: None }
    }
    /// A style sheet, a script or an image, cached by the browser for `max_age` seconds.
    pub fn asset(content_type: &'static str, bytes: Vec<u8>, max_age: u32) -> Self {
        Self { status: StatusCode::OK, content: Content::Asset { content_type, bytes, max_age }, cookies: vec![], lang: None }
    }
    pub fn status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }
    pub fn cookie(mut self, set_cookie: String) -> Self {
        self.cookies.push(set_cookie);
        self
    }
    pub fn lang(mut self, tag: &'static str) -> Self {
        self.lang = Some(tag);
        self
    }
}

fn param_name(seg: &'static str) -> Option<&'static str> {
    seg.strip_prefix('{').and_then(|p| p.strip_suffix('}'))
}

/// The page for `method` and `rest` (the path after `/p/<slug>`), with its parameters; a
/// known path with another method is 405.
fn find<'p>(pages: &'p [Page], method: &Method, rest: &str) -> ApiResult<(&'p Page, Vec<(&'static str, String)>)> {
    let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let mut path_known = false;
    for page in pages {
        let pat: Vec<&'static str> = page.path.split('/').filter(|s| !s.is_empty()).collect();
        if pat.len() != segs.len() || !pat.iter().zip(&segs).all(|(p, s)| p.starts_with('{') || p == s) {
            continue;
        }
        path_known = true;
        if page.method == method || (method == Method::HEAD && page.method == Method::GET) {
            let params = pat.iter().zip(&segs).filter_map(|(p, s)| Some((param_name(p)?, s.to_string()))).collect();
            return Ok((page, params));
        }
    }
    Err(if path_known {
        ApiError::new(crate::error::ErrorCode::MethodNotAllowed, "this page does not take that method")
    } else {
        ApiError::not_found("page")
    })
}

/// The token of a form: HMAC of the site and workspace (`/p/acme`), the browser's nonce and its
/// session, under the platform's key.
pub fn csrf_token(key: &[u8], site: &str, nonce: &str, session: &str) -> String {
    crate::crypto::hex(&crate::crypto::hmac_sha256(key, format!("{site}\n{nonce}\n{session}").as_bytes()))
}

/// Serve one request for a page of `site`.
pub async fn serve(app: &App, site: &Site, req: http::Request<Body>) -> Response {
    let started = Instant::now();
    let path = req.uri().path().to_string();
    let span = tracing::info_span!("page", method = %req.method(), path = %path);
    async move {
        let accept_language = req.headers().get(http::header::ACCEPT_LANGUAGE).and_then(|v| v.to_str().ok()).map(str::to_string);
        let fut = AssertUnwindSafe(visit(app, site, req)).catch_unwind();
        let budget = std::time::Duration::from_millis(app.cfg.timeouts.request_ms);
        let (res, ddb_calls) = crate::metrics::count_ddb_calls(tokio::time::timeout(budget, fut)).await;
        let (result, base) = match res {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => (Err(ApiError::internal("page handler panicked")), None),
            Err(_) => (Err(ApiError::unavailable("the page ran past its time budget")), None),
        };
        let resp = match result {
            Ok(v) => respond(v),
            Err(e) => {
                e.log();
                let message = if e.status().is_server_error() { "" } else { e.message.as_str() };
                let html = (site.failure)(&Failure {
                    status: e.status(),
                    message,
                    base: base.as_deref(),
                    accept_language: accept_language.as_deref(),
                });
                let mut resp = respond(View::html(html).status(e.status()));
                for (k, val) in &e.headers {
                    if let Ok(val) = HeaderValue::from_str(val) {
                        resp.headers_mut().insert(*k, val);
                    }
                }
                resp
            }
        };
        let status = resp.status().as_u16();
        let duration_ms = started.elapsed().as_millis() as u64;
        tracing::info!(status, ddb_calls, duration_ms, "page done");
        crate::metrics::request(&format!("PAGE {}{{slug}}", site.prefix), status, duration_ms, ddb_calls);
        resp
    }
    .instrument(span)
    .await
}

/// The stages; answers the view (or why not) and the site's base once the slug is known.
async fn visit(app: &App, site: &Site, req: http::Request<Body>) -> (ApiResult<View>, Option<String>) {
    let (parts, body) = req.into_parts();
    let Some(after) = parts.uri.path().strip_prefix(site.prefix) else { return (Err(ApiError::not_found("page")), None) };
    let after = after.to_string();
    // A root page is `<prefix><name>` exactly, and read only (no form, so no CSRF to check):
    // `<prefix><slug>/` stays a workspace's home whatever its slug.
    if !after.contains('/')
        && parts.method == Method::GET
        && let Ok((page, _)) = find(site.root, &parts.method, &format!("/{after}"))
    {
        let base = site.prefix.trim_end_matches('/').to_string();
        return (root(app, site, page, parts, base.clone()).await, Some(base));
    }
    let (slug, rest) = after.split_once('/').map_or((after.as_str(), None), |(s, r)| (s, Some(r)));
    let slug = slug.to_string();
    let Some(rest) = rest.map(|r| format!("/{r}")) else {
        // `<prefix><slug>` without its slash: the pages' relative links need the folder.
        return (Ok(View::redirect(format!("{}{slug}/", site.prefix))), None);
    };
    let ws = match (site.resolve)(app, &slug).await {
        // A bearer page (an emailed link) is served under a former slug as under the current
        // one: a redirect would turn a mail provider's one-click POST into a GET.
        Ok(Some((ws, Some(_)))) if find(site.pages, &parts.method, &rest).is_ok_and(|(p, _)| p.bearer) => ws,
        Ok(Some((_, Some(current)))) => {
            // A former slug: the same page under the workspace's slug now.
            let query = parts.uri.query().map(|q| format!("?{q}")).unwrap_or_default();
            return (Ok(View::redirect(format!("{}{current}{rest}{query}", site.prefix))), None);
        }
        Ok(Some((ws, None))) => ws,
        Ok(None) => return (Err(ApiError::not_found("workspace pages")), None),
        Err(e) => return (Err(e), None),
    };
    let base = format!("{}{slug}", site.prefix);
    let out = stages(app, site, parts, body, ws, slug, &rest).await;
    (out, Some(base))
}

/// A page outside any workspace: rate limited per network address, no session, no form, no
/// effect.
async fn root(app: &App, site: &Site, page: &Page, parts: http::request::Parts, base: String) -> ApiResult<View> {
    let source = crate::request::source_ip(&parts);
    let principal = Principal::public(&source);
    let decision = app.limiter.acquire(&app.db, &principal.tenant_scope(), page.class.unwrap_or(Class::Read)).await?;
    if !decision.allowed {
        return Err(decision.into_error());
    }
    let query = url::form_urlencoded::parse(parts.uri.query().unwrap_or_default().as_bytes()).into_owned().collect();
    let v = Visit {
        ws: WorkspaceId::trusted(String::new()),
        slug: String::new(),
        cookie_path: site.cookie_path.unwrap_or(site.prefix.trim_end_matches('/')).to_string(),
        base,
        session: None,
        person: None,
        link: None,
        params: vec![],
        query,
        body: Bytes::new(),
        form: vec![],
        origin: crate::request::pages_origin(app, &parts),
        headers: parts.headers,
        csrf: String::new(),
        source,
        grant: Grant::new(principal, &[], None, "GET", page.path, Bytes::new()),
    };
    (page.handler)(app, v).await
}

/// The signed-in person of a person's site: their sealed access token opened and verified,
/// and their membership of this workspace (the API's own check of a bearer token). None when
/// the cookie holds nothing that passes: the visitor signs in again.
async fn person(app: &App, ws: &WorkspaceId, sealed: &str) -> ApiResult<Option<Principal>> {
    let secret = app.platform_secret().await?;
    let Ok(token) = secret.open(PERSON_COOKIE_AAD, sealed) else { return Ok(None) };
    let Ok(token) = String::from_utf8(token) else { return Ok(None) };
    let mut h = http::HeaderMap::new();
    let (Ok(bearer), Ok(wsv)) = (HeaderValue::from_str(&format!("Bearer {token}")), HeaderValue::from_str(ws)) else { return Ok(None) };
    h.insert(http::header::AUTHORIZATION, bearer);
    h.insert("x-workspace-id", wsv);
    match crate::auth::authenticate(&app.db, &app.keys, app.jwt.as_ref(), &h, true).await {
        Ok(p) => Ok(Some(p)),
        Err(e) if e.status().is_client_error() => Ok(None),
        Err(e) => Err(e),
    }
}

#[allow(clippy::too_many_arguments)]
async fn stages(
    app: &App,
    site: &Site,
    parts: http::request::Parts,
    body: Body,
    ws: WorkspaceId,
    slug: String,
    rest: &str,
) -> ApiResult<View> {
    let (page, params) = find(site.pages, &parts.method, rest)?;
    let query: Vec<(String, String)> = url::form_urlencoded::parse(parts.uri.query().unwrap_or_default().as_bytes()).into_owned().collect();
    let link = match page.link {
        Some(purpose) => {
            let token = query.iter().find(|(k, _)| k == "token").map(|(_, v)| v.as_str()).unwrap_or_default();
            let now = chrono::Utc::now().timestamp();
            let claims = crate::links::open(app.platform_secret().await?, purpose, &ws, token, now)
                .ok_or_else(|| ApiError::new(crate::error::ErrorCode::NotFound, "this link has expired or is not valid"))?;
            Some((claims, token.to_string()))
        }
        None => None,
    };
    // Neither kind of page sets a cookie: their address is the credential.
    let cookieless = page.bearer || link.is_some();
    let base = format!("{}{slug}", site.prefix);
    let cookie_path = site.cookie_path.map_or_else(|| base.clone(), String::from);
    let source = crate::request::source_ip(&parts);
    let origin = crate::request::pages_origin(app, &parts);
    // The session, if the cookie holds one of this workspace's.
    let mut cookies_out = vec![];
    let cookie_name = match site.sessions {
        Sessions::Portal => SESSION_COOKIE,
        Sessions::Person => PERSON_COOKIE,
    };
    let session = match cookie(&parts.headers, cookie_name) {
        // A link page acts for the link's contact, whoever else the browser is signed in as.
        _ if link.is_some() => None,
        // Expired, or not a member here: signed out of this workspace's pages. The cookie stays
        // (it may serve another workspace) until the person signs out.
        Some(sealed) if !sealed.is_empty() && site.sessions == Sessions::Person => {
            person(app, &ws, sealed).await?.map(|p| (sealed.to_string(), p))
        }
        Some(token) if !token.is_empty() => {
            let mut h = http::HeaderMap::new();
            h.insert(crate::auth::PORTAL_SESSION_HEADER, HeaderValue::from_str(token).unwrap_or(HeaderValue::from_static("-")));
            match crate::auth::authenticate_portal(&app.db, &h).await {
                Ok(p) if p.workspace_id.as_ref() == Some(&ws) => Some((token.to_string(), p)),
                Ok(_) | Err(ApiError { code: crate::error::ErrorCode::Unauthorized, .. }) => {
                    cookies_out.push(set_cookie(&cookie_path, SESSION_COOKIE, "", 0));
                    None
                }
                Err(e) => return Err(e),
            }
        }
        _ => None,
    };
    if page.signed_in && session.is_none() {
        let mut v = View::redirect(format!("{base}/"));
        v.cookies = cookies_out;
        return Ok(v);
    }
    let principal = match (&link, &session) {
        (Some((c, _)), _) => Principal::link(&ws, &c.object, &c.contact),
        (None, Some((_, p))) => p.clone(),
        (None, None) => Principal::public(&source),
    };
    let class = page.class.unwrap_or(match (&session, parts.method == Method::GET) {
        // A link spends its contact's bucket (`LINK#<contact>`), as a portal session does.
        _ if link.is_some() => Class::Portal,
        // A person spends their workspace's buckets, as their API calls do.
        (Some(_), get) if site.sessions == Sessions::Person => {
            if get {
                Class::Read
            } else {
                Class::Write
            }
        }
        (Some(_), _) => Class::Portal,
        (None, true) => Class::Read,
        (None, false) => Class::Write,
    });
    // Signing in is limited per network address whoever asks: a session does not buy a bucket.
    let scope = if class == Class::PortalSignIn { Principal::public(&source).tenant_scope() } else { principal.tenant_scope() };
    let decision = app.limiter.acquire(&app.db, &scope, class).await?;
    if !decision.allowed {
        return Err(decision.into_error());
    }
    // The browser's nonce for form tokens: set on its first page (a bearer page's forms need
    // none, and it sets no cookie).
    let nonce = match cookie(&parts.headers, CSRF_COOKIE).filter(|n| n.len() == 32 && n.bytes().all(|b| b.is_ascii_alphanumeric())) {
        Some(n) => n.to_string(),
        None if cookieless => String::new(),
        None => {
            let n = crate::auth::random_base62(32);
            cookies_out.push(set_cookie(&cookie_path, CSRF_COOKIE, &n, 400 * 86_400));
            n
        }
    };
    let key = &app.platform_secret().await?.csrf_key;
    let token = session.as_ref().map(|(t, _)| t.as_str()).unwrap_or_default();
    // Bound to the site and workspace (`/p/acme`, `/approvals/acme`), the browser and its session.
    let csrf = csrf_token(key, &base, &nonce, token);
    let body: Bytes = match body {
        Body::Empty => Bytes::new(),
        Body::Text(t) => Bytes::from(t),
        Body::Binary(b) => Bytes::from(b),
        _ => Bytes::new(),
    };
    let mut form = vec![];
    if parts.method == Method::POST {
        if body.len() > MAX_FORM_BYTES {
            return Err(ApiError::new(crate::error::ErrorCode::PayloadTooLarge, "the form is too large"));
        }
        let ct = parts.headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let urlencoded = ct.to_ascii_lowercase().starts_with("application/x-www-form-urlencoded");
        if !urlencoded && !page.bearer {
            return Err(ApiError::new(crate::error::ErrorCode::UnsupportedMediaType, "a form of this page posts as a form"));
        }
        if urlencoded {
            form = url::form_urlencoded::parse(&body).into_owned().collect::<Vec<_>>();
        }
        let cross_site = parts.headers.get("sec-fetch-site").is_some_and(|v| v.as_bytes() == b"cross-site");
        let sent = form.iter().find(|(k, _)| k == CSRF_FIELD).map(|(_, v)| v.as_str()).unwrap_or_default();
        use subtle::ConstantTimeEq;
        if link.is_some() && cross_site {
            return Err(ApiError::forbidden("this link's forms are sent from its own page"));
        }
        if !cookieless && (cross_site || !bool::from(sent.as_bytes().ct_eq(csrf.as_bytes()))) {
            return Err(ApiError::forbidden("this form has expired or came from another site; reload the page and send it again"));
        }
    }
    let grant = Grant::new(principal, page.effects, None, parts.method.as_str(), rest, body.clone());
    let person = session.as_ref().filter(|_| site.sessions == Sessions::Person).map(|(_, p)| p.clone());
    let v = Visit {
        ws,
        slug,
        base,
        cookie_path,
        person,
        link,
        session: session.map(|(t, p)| {
            let who = match site.sessions {
                Sessions::Portal => p.portal_contact().unwrap_or_default().to_string(),
                Sessions::Person => p.subject.clone(),
            };
            (t, who)
        }),
        params,
        query,
        body,
        form,
        headers: parts.headers,
        csrf,
        source,
        origin,
        grant,
    };
    let mut view = (page.handler)(app, v).await?;
    cookies_out.append(&mut view.cookies);
    view.cookies = if cookieless { vec![] } else { cookies_out };
    Ok(view)
}

fn respond(v: View) -> Response {
    let mut b = http::Response::builder()
        .status(v.status)
        .header("content-security-policy", CSP)
        .header("x-frame-options", "DENY")
        .header("x-content-type-options", "nosniff")
        .header("referrer-policy", "no-referrer")
        .header("cross-origin-opener-policy", "same-origin")
        .header("permissions-policy", "camera=(), microphone=(), geolocation=()");
    // An asset may be kept by shared caches: it never carries a browser's cookie.
    if !matches!(v.content, Content::Asset { .. }) {
        for c in &v.cookies {
            b = b.header(http::header::SET_COOKIE, c);
        }
    }
    if let Some(l) = v.lang {
        b = b.header(http::header::CONTENT_LANGUAGE, l);
    }
    let body = match v.content {
        Content::Html(h) => {
            b = b.header(http::header::CONTENT_TYPE, "text/html; charset=utf-8").header(http::header::CACHE_CONTROL, "no-store");
            Body::Text(h)
        }
        Content::Redirect(to) => {
            b = b.header(http::header::LOCATION, to).header(http::header::CACHE_CONTROL, "no-store");
            Body::Empty
        }
        Content::Asset { content_type, bytes, max_age } => {
            b = b
                .header(http::header::CONTENT_TYPE, content_type)
                .header(http::header::CACHE_CONTROL, format!("public, max-age={max_age}"));
            match String::from_utf8(bytes) {
                Ok(t) => Body::Text(t),
                Err(e) => Body::Binary(e.into_bytes()),
            }
        }
    };
    b.body(body).unwrap_or_else(|_| http::Response::new(Body::Empty))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noop<'a>(_: &'a App, _: Visit) -> BoxFuture<'a, ApiResult<View>> {
        Box::pin(async { Ok(View::html(String::new())) })
    }

    #[test]
    fn pages_match_by_segment_and_method() {
        const fn page(method: Method, path: &'static str) -> Page {
            Page { method, path, signed_in: false, effects: &[], class: None, bearer: false, link: None, handler: noop }
        }
        static PAGES: &[Page] = &[page(Method::GET, "/"), page(Method::GET, "/bookings"), page(Method::POST, "/bookings/{id}/cancel")];
        assert_eq!(find(PAGES, &Method::GET, "/").unwrap().0.path, "/");
        let (p, params) = find(PAGES, &Method::POST, "/bookings/bk_1/cancel").unwrap();
        assert_eq!((p.path, params), ("/bookings/{id}/cancel", vec![("id", "bk_1".to_string())]));
        assert_eq!(find(PAGES, &Method::GET, "/bookings/bk_1/cancel").err().unwrap().status(), 405);
        assert_eq!(find(PAGES, &Method::GET, "/nope").err().unwrap().status(), 404);
    }

    #[test]
    fn cookies_are_read_by_name_and_set_for_the_site_only() {
        let mut h = http::HeaderMap::new();
        h.insert(http::header::COOKIE, HeaderValue::from_static("a=1; portal_session=pss_x; b=2"));
        assert_eq!(cookie(&h, SESSION_COOKIE), Some("pss_x"));
        assert_eq!(cookie(&h, "c"), None);
        let c = set_cookie("/p/acme", SESSION_COOKIE, "v", 60);
        assert_eq!(c, "portal_session=v; Path=/p/acme; Max-Age=60; HttpOnly; Secure; SameSite=Lax");
    }

    #[test]
    fn a_form_token_is_bound_to_the_site_the_nonce_and_the_session() {
        let t = csrf_token(b"k", "acme", "n", "");
        assert_ne!(t, csrf_token(b"k", "other", "n", ""));
        assert_ne!(t, csrf_token(b"k", "acme", "m", ""));
        assert_ne!(t, csrf_token(b"k", "acme", "n", "pss_1"));
        assert_ne!(t, csrf_token(b"j", "acme", "n", ""));
    }
}
