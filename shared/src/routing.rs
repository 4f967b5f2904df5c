//! Prefix-agnostic routing: a path matches from the first segment that is one of the area's
//! root nouns, so `/api/v1/posts/{id}` (API Gateway) and `/lambda-url/posts/{id}`
//! (`cargo lambda watch`) reach the same handler.

use crate::app::App;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::http::{Reply, Req};
use crate::ratelimit::Class;
use futures_util::future::BoxFuture;
use http::Method;

pub type Handler = for<'a> fn(&'a App, Req) -> BoxFuture<'a, ApiResult<Reply>>;

#[derive(Clone)]
pub struct Route {
    pub method: Method,
    /// Pattern relative to the API base, e.g. `/posts/{id}/schedule`.
    pub path: &'static str,
    pub class: Class,
    /// False only for routes an OAuth caller may use without `x-workspace-id`.
    pub needs_workspace: bool,
    /// Largest accepted body (1 MiB unless the route says otherwise, e.g. imports).
    pub max_body: usize,
    pub handler: Handler,
}

/// `route!(GET "/posts/{id}", Read, get_post)`: a route whose handler is `async fn(&App, Req)`.
#[macro_export]
macro_rules! route {
    ($method:ident $path:literal, $class:ident, $handler:path) => {
        $crate::route!(@build $method $path, $class, $handler, true, $crate::http::MAX_BODY_BYTES)
    };
    ($method:ident $path:literal, $class:ident, $handler:path, no_workspace) => {
        $crate::route!(@build $method $path, $class, $handler, false, $crate::http::MAX_BODY_BYTES)
    };
    ($method:ident $path:literal, $class:ident, $handler:path, max_body = $max:expr) => {
        $crate::route!(@build $method $path, $class, $handler, true, $max)
    };
    (@build $method:ident $path:literal, $class:ident, $handler:path, $ws:expr, $max:expr) => {
        $crate::routing::Route {
            method: $crate::reexports::http::Method::$method,
            path: $path,
            class: $crate::ratelimit::Class::$class,
            needs_workspace: $ws,
            max_body: $max,
            handler: {
                fn handle<'a>(
                    app: &'a $crate::App,
                    req: $crate::http::Req,
                ) -> $crate::reexports::BoxFuture<'a, $crate::error::ApiResult<$crate::http::Reply>> {
                    Box::pin($handler(app, req))
                }
                handle
            },
        }
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

pub fn match_route<'r>(routes: &'r [Route], method: &Method, path: &str) -> ApiResult<Matched<'r>> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let is_root = |seg: &str| routes.iter().any(|r| r.path.split('/').nth(1) == Some(seg));
    let not_found = || ApiError::new(ErrorCode::NotFound, format!("no route for {path}"));
    let start = segments.iter().position(|s| is_root(s)).ok_or_else(not_found)?;
    let rel = &segments[start..];

    let mut candidates: Vec<(&Route, Vec<(&'static str, String)>)> = Vec::new();
    for r in routes {
        let pat: Vec<&'static str> = r.path.split('/').filter(|s| !s.is_empty()).collect();
        if pat.len() != rel.len() {
            continue;
        }
        let mut params = Vec::new();
        let ok = pat.iter().zip(rel).all(|(p, s)| match p.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
            Some(name) => {
                params.push((name, s.to_string()));
                true
            }
            None => p == s,
        });
        if ok {
            candidates.push((r, params));
        }
    }
    // A literal segment beats a parameter (`/workspaces/current` before `/workspaces/{id}`).
    let best = candidates.iter().map(|(r, _)| literal_count(r.path)).max().ok_or_else(not_found)?;
    candidates.retain(|(r, _)| literal_count(r.path) == best);
    let relative_path = format!("/{}", rel.join("/"));
    match candidates.iter().position(|(r, _)| r.method == method) {
        Some(i) => {
            let (route, params) = candidates.swap_remove(i);
            Ok(Matched { route, params, relative_path })
        }
        None => {
            let mut allow: Vec<&str> = candidates.iter().map(|(r, _)| r.method.as_str()).collect();
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

    async fn nothing(_: &App, _: Req) -> ApiResult<Reply> {
        Ok(Reply::no_content())
    }

    static ROUTES: &[Route] = &[
        crate::route!(GET "/posts", Read, nothing),
        crate::route!(POST "/posts", Write, nothing),
        crate::route!(GET "/posts/{id}", Read, nothing),
        crate::route!(DELETE "/posts/{id}", Write, nothing),
        crate::route!(POST "/posts/{id}/schedule", Write, nothing),
        crate::route!(GET "/workspaces/current", Read, nothing),
        crate::route!(GET "/workspaces/{id}", Read, nothing),
    ];

    #[test]
    fn any_prefix_reaches_the_same_route() {
        for p in ["/api/v1/posts/post_1", "/lambda-url/posts/post_1", "/posts/post_1", "/posts/post_1/"] {
            let m = match_route(ROUTES, &Method::GET, p).unwrap();
            assert_eq!(m.route.path, "/posts/{id}");
            assert_eq!(m.params, vec![("id", "post_1".to_string())]);
            assert_eq!(m.relative_path, "/posts/post_1");
        }
    }

    #[test]
    fn literals_win_and_errors_are_404_or_405() {
        assert_eq!(match_route(ROUTES, &Method::GET, "/api/v1/workspaces/current").unwrap().route.path, "/workspaces/current");
        let e = match_route(ROUTES, &Method::GET, "/api/v1/nothing").err().unwrap();
        assert_eq!(e.code, ErrorCode::NotFound);
        let e = match_route(ROUTES, &Method::GET, "/api/v1/posts/a/b/c").err().unwrap();
        assert_eq!(e.code, ErrorCode::NotFound);
        let e = match_route(ROUTES, &Method::PUT, "/api/v1/posts/post_1").err().unwrap();
        assert_eq!(e.code, ErrorCode::MethodNotAllowed);
        assert_eq!(e.headers, vec![("allow", "DELETE, GET".to_string())]);
    }
}
