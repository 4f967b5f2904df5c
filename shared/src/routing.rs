//! Prefix-agnostic routing: a path matches from the first segment that is one of the area's
//! root nouns, so `/api/v1/posts/{id}` (API Gateway) and `/lambda-url/posts/{id}`
//! (`cargo lambda watch`) reach the same handler.

use crate::app::App;
use crate::auth::Scope;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::ratelimit::Class;
use crate::request::{Reply, Req};
use futures_util::future::BoxFuture;
use http::Method;

pub type Handler = for<'a> fn(&'a App, Req) -> BoxFuture<'a, ApiResult<Reply>>;

/// The credential a route takes (docs/api.md, Credentials).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// `Authorization: Bearer` with an API key or an OAuth access token (every route but the portal's).
    Workspace,
    /// `X-Portal-Session`: one contact of one workspace (`/portal/me...`, `/portal/logout`).
    PortalSession,
    /// No credential (`POST /portal/sessions/exchange`: the link token in the body is the
    /// credential); rate-limited per source address.
    Public,
}

#[derive(Clone)]
pub struct Route {
    pub method: Method,
    /// Pattern relative to the API base, e.g. `/posts/{id}/schedule`.
    pub path: &'static str,
    pub class: Class,
    /// The scope a caller needs: `read` for GET, `write` for other methods, unless the area
    /// says `[needs = Scope::Admin]`.
    pub needs: Scope,
    /// False only for routes an OAuth caller may use without `x-workspace-id`.
    pub needs_workspace: bool,
    /// Largest accepted body (1 MiB unless the route says otherwise, e.g. imports).
    pub max_body: usize,
    pub auth: Auth,
    /// The effects (`domain::effects`) its handler may reach. A credential created with
    /// `requires_confirmation` for any of them needs a person's confirmation of the request;
    /// the handler can perform only these (`crate::authority::Grant::authorize`). The published
    /// capability list is made of these declarations.
    pub effects: &'static [crate::authority::EffectInfo],
    /// Set when the operation is deprecated (`[deprecation = Deprecation { .. }]`): it keeps
    /// answering, and every answer says so.
    pub deprecation: Option<Deprecation>,
    pub handler: Handler,
}

/// A deprecated operation, as docs/api.md ("Changes to version 1") announces one: the contract
/// marks it `deprecated` with these dates, and every answer carries `Deprecation` (RFC 9745,
/// the day as `@<unix seconds>`) and `Sunset` (RFC 8594, an HTTP date) headers.
#[derive(Clone, Copy, Debug)]
pub struct Deprecation {
    /// The day it was deprecated, `YYYY-MM-DD` (from 00:00 UTC).
    pub since: &'static str,
    /// The day from which it may stop answering: at least `MIN_NOTICE_DAYS` after `since`.
    pub sunset: &'static str,
    /// What to use instead, as the contract names it (`POST /emails/batch`).
    pub instead: &'static str,
}

impl Deprecation {
    /// The notice version 1 promises between a deprecation and its sunset.
    pub const MIN_NOTICE_DAYS: i64 = 180;

    fn day(d: &str) -> Option<chrono::DateTime<chrono::Utc>> {
        Some(chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").ok()?.and_time(chrono::NaiveTime::MIN).and_utc())
    }

    /// The headers of every answer of the operation (none for a date that does not parse,
    /// which `check` refuses when the contract is built).
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let (Some(since), Some(sunset)) = (Self::day(self.since), Self::day(self.sunset)) else { return vec![] };
        vec![("deprecation", format!("@{}", since.timestamp())), ("sunset", sunset.format("%a, %d %b %Y %H:%M:%S GMT").to_string())]
    }

    /// Panics unless both dates parse and the sunset is at least the promised notice later.
    pub fn check(&self) {
        let day = |d: &str| Self::day(d).unwrap_or_else(|| panic!("a deprecation date is YYYY-MM-DD, not {d:?}"));
        let notice = (day(self.sunset) - day(self.since)).num_days();
        assert!(
            notice >= Self::MIN_NOTICE_DAYS,
            "a sunset {notice} days after the deprecation: version 1 promises {}",
            Self::MIN_NOTICE_DAYS
        );
    }
}

/// The rate class of a route that names none: GET reads, everything else writes.
pub fn default_class(method: &Method) -> Class {
    if method == Method::GET { Class::Read } else { Class::Write }
}

/// The scope of a route that names none: GET reads, everything else writes.
pub fn default_scope(method: &Method) -> Scope {
    if method == Method::GET { Scope::Read } else { Scope::Write }
}

impl Route {
    /// The route of a handler annotated with `#[utoipa::path]`: method and path come from the
    /// annotation, the class from the method (GET is `read`, the rest `write`) unless the
    /// area says otherwise. The path is leaked once per route at cold start so matching
    /// borrows nothing.
    pub fn of<P: utoipa::Path>(handler: Handler) -> Self {
        use utoipa::openapi::path::HttpMethod as M;
        let method = match P::methods().first() {
            Some(M::Get) => Method::GET,
            Some(M::Post) => Method::POST,
            Some(M::Put) => Method::PUT,
            Some(M::Patch) => Method::PATCH,
            Some(M::Delete) => Method::DELETE,
            Some(M::Head) => Method::HEAD,
            Some(M::Options) => Method::OPTIONS,
            Some(M::Trace) => Method::TRACE,
            None => panic!("#[utoipa::path] of {} names no method", P::path()),
        };
        let (class, needs) = (default_class(&method), default_scope(&method));
        Self {
            method,
            path: Box::leak(P::path().into_boxed_str()),
            class,
            needs,
            needs_workspace: true,
            max_body: crate::request::MAX_BODY_BYTES,
            auth: Auth::Workspace,
            effects: &[],
            deprecation: None,
            handler,
        }
    }
}

/// An area's operations, declared once: each handler (an `async fn(&App, Req)` with its
/// `#[utoipa::path]` annotation) becomes a route of `routes()` and a path of `ApiDoc`.
/// Options after a handler change its route: `[class = Class::EmailSend]`,
/// `[needs = Scope::Admin]`, `[max_body = N]`, `[needs_workspace = false]`,
/// `[auth = Auth::PortalSession]`, `[effects = &[SendEmail::INFO]]`,
/// `[deprecation = Some(Deprecation { since, sunset, instead })]`.
///
/// ```ignore
/// shared::area! {
///     tag = "posts", description = "Posts for channels",
///     operations = [list_posts, create_post, send_email [class = Class::EmailSend]],
/// }
/// ```
#[macro_export]
macro_rules! area {
    (
        tag = $tag:literal, description = $desc:literal,
        operations = [ $( $handler:ident $( [ $($opt:ident = $val:expr),* $(,)? ] )? ),* $(,)? ]
        $(, schemas = [ $($schema:path),* $(,)? ] )? $(,)?
    ) => {
        /// Every route of this area, built from the operations' annotations on first use.
        pub fn routes() -> &'static [$crate::routing::Route] {
            static ROUTES: ::std::sync::OnceLock<Vec<$crate::routing::Route>> = ::std::sync::OnceLock::new();
            ROUTES.get_or_init(|| {
                #[allow(unused_imports)]
                use $crate::{auth::Scope, ratelimit::Class, routing::{Auth, Deprecation}};
                vec![$(
                    $crate::reexports::paste::paste! {{
                        fn handle<'a>(
                            app: &'a $crate::App,
                            req: $crate::request::Req,
                        ) -> $crate::reexports::BoxFuture<'a, $crate::error::ApiResult<$crate::request::Reply>> {
                            $crate::request::call(app, req, $handler)
                        }
                        #[allow(unused_mut)]
                        let mut route = $crate::routing::Route::of::<[<__path_ $handler>]>(handle);
                        $( $( route.$opt = $val; )* )?
                        route
                    }}
                ),*]
            })
        }

        #[derive(utoipa::OpenApi)]
        #[openapi(
            paths($($handler),*),
            $( components(schemas($($schema),*)), )?
            tags((name = $tag, description = $desc))
        )]
        pub struct ApiDoc;
    };
}

pub struct Matched<'r> {
    pub route: &'r Route,
    pub params: Vec<(&'static str, String)>,
    /// The path from the root noun on, e.g. `/posts/post_1`, whatever prefix came before it.
    pub relative_path: String,
}

fn literal_count(pattern: &str) -> usize {
    pattern.split('/').filter(|s| !s.is_empty() && !s.starts_with('{')).count()
}

/// The name of a `{param}` segment of a route's pattern.
fn param_name(pattern_segment: &str) -> Option<&str> {
    pattern_segment.strip_prefix('{').and_then(|p| p.strip_suffix('}'))
}

fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|s| !s.is_empty())
}

/// Every request goes through here: one walk of the route table, without splitting patterns
/// into vectors, finds the candidates, and parameters are decoded for the chosen route alone.
pub fn match_route<'r>(routes: &'r [Route], method: &Method, path: &str) -> ApiResult<Matched<'r>> {
    let segs: Vec<&str> = segments(path).collect();
    let is_root = |seg: &str| routes.iter().any(|r| r.path.split('/').nth(1) == Some(seg));
    let not_found = || ApiError::new(ErrorCode::NotFound, format!("no route for {path}"));
    let start = segs.iter().position(|s| is_root(s)).ok_or_else(not_found)?;
    let rel = &segs[start..];
    let fits = |r: &&Route| {
        let mut pat = segments(r.path);
        rel.iter().all(|s| pat.next().is_some_and(|p| param_name(p).is_some() || p == *s)) && pat.next().is_none()
    };
    let mut candidates: Vec<&Route> = routes.iter().filter(fits).collect();
    // A literal segment beats a parameter (`/workspaces/current` before `/workspaces/{id}`).
    let best = candidates.iter().map(|r| literal_count(r.path)).max().ok_or_else(not_found)?;
    candidates.retain(|r| literal_count(r.path) == best);
    let relative_path = format!("/{}", rel.join("/"));
    match candidates.iter().copied().find(|r| r.method == method) {
        Some(route) => {
            // `auth0%7C123` names the subject `auth0|123`; an invalid escape stays as sent.
            let decode = |s: &str| percent_encoding::percent_decode_str(s).decode_utf8().map_or_else(|_| s.to_string(), |d| d.into_owned());
            let params = segments(route.path).zip(rel).filter_map(|(p, s)| Some((param_name(p)?, decode(s)))).collect();
            Ok(Matched { route, params, relative_path })
        }
        None => {
            let mut allow: Vec<&str> = candidates.iter().map(|r| r.method.as_str()).collect();
            allow.sort_unstable();
            allow.dedup();
            Err(ApiError::new(ErrorCode::MethodNotAllowed, format!("{method} is not allowed on {relative_path}"))
                .with_header("allow", allow.join(", ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deprecation_is_announced_in_the_rfc_forms() {
        let d = Deprecation { since: "2026-11-01", sunset: "2027-05-01", instead: "POST /emails/batch" };
        d.check();
        let h = d.headers();
        assert_eq!(h[0], ("deprecation", "@1793491200".to_string()));
        assert_eq!(h[1], ("sunset", "Sat, 01 May 2027 00:00:00 GMT".to_string()));
        assert!(Deprecation { since: "soon", ..d }.headers().is_empty(), "no header from a date that does not parse");
        let short = Deprecation { sunset: "2027-01-01", ..d };
        assert!(std::panic::catch_unwind(|| short.check()).is_err(), "two months' notice is refused");
    }

    async fn nothing(_: &App, _: Req) -> ApiResult<Reply> {
        Ok(Reply::no_content())
    }

    fn handle<'a>(app: &'a App, req: Req) -> BoxFuture<'a, ApiResult<Reply>> {
        Box::pin(nothing(app, req))
    }

    fn r(method: Method, path: &'static str) -> Route {
        Route {
            class: default_class(&method),
            needs: default_scope(&method),
            method,
            path,
            needs_workspace: true,
            max_body: crate::request::MAX_BODY_BYTES,
            auth: Auth::Workspace,
            effects: &[],
            deprecation: None,
            handler: handle,
        }
    }

    static ROUTES: std::sync::LazyLock<Vec<Route>> = std::sync::LazyLock::new(|| {
        vec![
            r(Method::GET, "/posts"),
            r(Method::POST, "/posts"),
            r(Method::GET, "/posts/{id}"),
            r(Method::DELETE, "/posts/{id}"),
            r(Method::POST, "/posts/{id}/schedule"),
            r(Method::GET, "/workspaces/current"),
            r(Method::GET, "/workspaces/{id}"),
        ]
    });

    #[test]
    fn any_prefix_reaches_the_same_route() {
        for p in ["/api/v1/posts/post_1", "/lambda-url/posts/post_1", "/posts/post_1", "/posts/post_1/"] {
            let m = match_route(&ROUTES, &Method::GET, p).unwrap();
            assert_eq!(m.route.path, "/posts/{id}");
            assert_eq!(m.params, vec![("id", "post_1".to_string())]);
            assert_eq!(m.relative_path, "/posts/post_1");
        }
    }

    #[test]
    fn literals_win_and_errors_are_404_or_405() {
        assert_eq!(match_route(&ROUTES, &Method::GET, "/api/v1/workspaces/current").unwrap().route.path, "/workspaces/current");
        let e = match_route(&ROUTES, &Method::GET, "/api/v1/nothing").err().unwrap();
        assert_eq!(e.code, ErrorCode::NotFound);
        let e = match_route(&ROUTES, &Method::GET, "/api/v1/posts/a/b/c").err().unwrap();
        assert_eq!(e.code, ErrorCode::NotFound);
        let e = match_route(&ROUTES, &Method::PUT, "/api/v1/posts/post_1").err().unwrap();
        assert_eq!(e.code, ErrorCode::MethodNotAllowed);
        assert_eq!(e.headers, vec![("allow", "DELETE, GET".to_string())]);
    }
}
