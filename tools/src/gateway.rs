//! The dev gateway: plays API Gateway locally. It serves every area under
//! `http://127.0.0.1:<port>/api/v1/...` (and the portal's pages under `/p/`) by calling the same `shared::http::serve` with the same
//! route tables the Lambda binaries run, and adds `x-dev-ddb-calls` (DynamoDB round trips the
//! request made) so tests and benchmarks can measure them.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use shared::App;
use shared::routing::Route;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use tokio::net::TcpListener;

pub const BASE_PATH: &str = "/api/v1";
/// API Gateway's own payload limit; the functions enforce the contract's 1 MiB themselves.
const GATEWAY_MAX_BODY: usize = 10 * 1024 * 1024;

/// Each area function's binary name and routes (in AWS each function sees only its own).
pub fn areas() -> Vec<(&'static str, &'static [Route])> {
    crate::api_areas().into_iter().map(|a| (a.name, (a.routes)())).collect()
}

/// The function API Gateway would send this request to (its `$default` route: workspaces):
/// the area whose root noun comes first in the path (API Gateway routes by the first noun:
/// `/portal/me/bookings` is the portal's, though `bookings` is another area's noun).
fn function_of(path: &str) -> &'static str {
    let areas = areas();
    path.split('/')
        .filter(|s| !s.is_empty())
        .find_map(|seg| areas.iter().find(|(_, routes)| routes.iter().any(|r| r.path.split('/').nth(1) == Some(seg))).map(|(n, _)| *n))
        .unwrap_or("workspaces")
}

/// Every area's routes, in one table.
pub fn all_routes() -> &'static [Route] {
    static ALL: OnceLock<&'static [Route]> = OnceLock::new();
    ALL.get_or_init(|| {
        let all: Vec<Route> = areas().into_iter().flat_map(|(_, r)| r.iter().cloned()).collect();
        Box::leak(all.into_boxed_slice())
    })
}

fn envelope_404(path: &str) -> http::Response<Full<Bytes>> {
    let e = shared::ApiError::new(shared::error::ErrorCode::NotFound, format!("no route for {path}"));
    let body = serde_json::to_vec(&e.body(&shared::ids::new_id("req"))).unwrap_or_default();
    http::Response::builder()
        .status(404)
        .header("content-type", "application/json; charset=utf-8")
        .body(Full::new(Bytes::from(body)))
        .expect("valid")
}

async fn handle(app: &App, mcp: &Arc<mcp::Upstream>, req: http::Request<hyper::body::Incoming>) -> http::Response<Full<Bytes>> {
    // The portal's pages (`/p/<slug>/...`) go to the portal function and the approval pages
    // (`/approvals/...`) to the capabilities function, as API Gateway's `/p/{proxy+}` and
    // `/approvals/{proxy+}` routes send them.
    let site = [&portal::pages::SITE, &capabilities::pages::SITE].into_iter().find(|s| req.uri().path().starts_with(s.prefix));
    let pages = site.is_some();
    // `/mcp` and its metadata go to the MCP function, as API Gateway's routes send them.
    let to_mcp = req.uri().path() == mcp::MCP_PATH || req.uri().path().starts_with("/.well-known/oauth-protected-resource");
    if !pages && !to_mcp && !req.uri().path().starts_with(&format!("{BASE_PATH}/")) {
        return envelope_404(req.uri().path());
    }
    let (parts, body) = req.into_parts();
    let bytes = match Limited::new(body, GATEWAY_MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return http::Response::builder()
                .status(413)
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from_static(br#"{"message":"Request Entity Too Large"}"#)))
                .expect("valid");
        }
    };
    let body = if bytes.is_empty() { lambda_http::Body::Empty } else { lambda_http::Body::Binary(bytes.to_vec()) };
    let function = function_of(parts.uri.path());
    let req = http::Request::from_parts(parts, body);
    let (resp, stats) = match site {
        _ if to_mcp => agent(app, mcp.clone(), req).await,
        Some(site) => page(app, site, req).await,
        None => api(app, function, req).await,
    };
    let (mut parts, body) = resp.into_parts();
    parts.headers.insert("x-dev-ddb-calls", stats.ddb_calls.into());
    let bytes = match body {
        lambda_http::Body::Empty => Bytes::new(),
        lambda_http::Body::Text(t) => Bytes::from(t),
        lambda_http::Body::Binary(b) => Bytes::from(b),
        _ => Bytes::new(),
    };
    http::Response::from_parts(parts, Full::new(bytes))
}

type Served<'a> = futures_util::future::BoxFuture<'a, (shared::http::Response, shared::http::Stats)>;

// The pipelines' futures are built in these frames and boxed, so the frame that polls them
// holds a pointer: in a debug build both inline in one frame took half a megabyte of stack
// and overflowed a test thread's 2 MiB.
#[inline(never)]
fn api<'a>(app: &'a App, function: &'static str, req: http::Request<lambda_http::Body>) -> Served<'a> {
    Box::pin(shared::metrics::as_function(function, shared::http::serve_with_stats(app, all_routes(), req)))
}

#[inline(never)]
fn page<'a>(app: &'a App, site: &'static shared::web::Site, req: http::Request<lambda_http::Body>) -> Served<'a> {
    let function = if std::ptr::eq(site, &portal::pages::SITE) { "portal" } else { "capabilities" };
    counted(function, shared::web::serve(app, site, req))
}

#[inline(never)]
fn agent<'a>(app: &'a App, upstream: Arc<mcp::Upstream>, req: http::Request<lambda_http::Body>) -> Served<'a> {
    counted("mcp", mcp::serve(app, upstream, req))
}

/// A handler outside the API pipeline (pages, MCP), as `function`, with its DynamoDB calls
/// counted as the pipeline counts its own.
fn counted<'a>(function: &'static str, fut: impl Future<Output = shared::http::Response> + Send + 'a) -> Served<'a> {
    Box::pin(async move {
        let (resp, calls) = shared::metrics::as_function(function, shared::metrics::count_ddb_calls(fut)).await;
        (resp, shared::http::Stats { ddb_calls: calls, status: 0 })
    })
}

/// Serve on 127.0.0.1:`port` (0 = any free port) until the task is dropped or aborted.
pub async fn start(app: Arc<App>, port: u16) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), String> {
    serve(bind(port).await?, app)
}

/// The gateway's socket, taken before its App exists (the App's configuration names the
/// gateway's own address: the portal's pages link to it).
pub async fn bind(port: u16) -> Result<TcpListener, String> {
    TcpListener::bind(("127.0.0.1", port)).await.map_err(|e| format!("bind 127.0.0.1:{port}: {e}"))
}

/// Serve on a bound socket until the task is dropped or aborted.
pub fn serve(listener: TcpListener, app: Arc<App>) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), String> {
    // As every API function's main does (shared::lambda::run_area).
    shared::approvals::install(&domain::approvals::DESK);
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    // The MCP server's tool calls come back to this gateway, as in AWS they go back through
    // the API's own domain.
    let policy = shared::outbound::UrlPolicy { loopback_only: true, allow_loopback: true, ..Default::default() };
    let mcp = Arc::new(mcp::Upstream { origin: format!("http://{addr}"), client: mcp::Upstream::client(policy) });
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            // A response goes out as soon as it is written, not after the client's delayed ACK.
            let _ = stream.set_nodelay(true);
            let (app, mcp) = (app.clone(), mcp.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |req| {
                    let (app, mcp) = (app.clone(), mcp.clone());
                    async move { Ok::<_, Infallible>(handle(&app, &mcp, req).await) }
                });
                let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
            });
        }
    });
    Ok((addr, task))
}
