//! The body of every area's `main`: clients built once per container, then the runtime loop.
//!
//! The event is turned into a request by lambda_http's conversion, but the answer is turned
//! into API Gateway's response document here: `lambda_http::run` would re-read every body
//! and decode it by its content type's charset (linking encoding_rs's tables into every
//! function), while the pipeline's bodies are already UTF-8 text or none.

use crate::app::App;
use crate::routing::Route;
use futures_util::future::BoxFuture;
use lambda_http::aws_lambda_events::apigw::ApiGatewayV2httpResponse;
use lambda_http::request::LambdaRequest;
use lambda_http::{Body, LambdaEvent};
use std::convert::Infallible;

/// `desk` records the approval requests of restricted keys' 428s (`crate::approvals`).
pub async fn run_area(routes: &'static [Route], desk: &'static dyn crate::approvals::Desk) -> Result<(), lambda_http::Error> {
    crate::approvals::install(desk);
    run(routes, None).await
}

/// An area that also serves web pages (the portal's `/p/<slug>/...`, `crate::web`).
pub async fn run_area_with_pages(
    routes: &'static [Route],
    site: &'static crate::web::Site,
    desk: &'static dyn crate::approvals::Desk,
) -> Result<(), lambda_http::Error> {
    crate::approvals::install(desk);
    run(routes, Some(site)).await
}

/// Serve one request: a page of `site` under `/p/`, else the JSON API.
pub async fn serve(
    app: &App,
    routes: &'static [Route],
    site: Option<&crate::web::Site>,
    req: http::Request<Body>,
) -> crate::http::Response {
    match site {
        // Boxed, each: the two pipelines' futures side by side make one deep frame.
        Some(site) if req.uri().path().starts_with(site.prefix) => Box::pin(crate::web::serve(app, site, req)).await,
        _ => Box::pin(crate::http::serve(app, routes, req)).await,
    }
}

async fn run(routes: &'static [Route], site: Option<&'static crate::web::Site>) -> Result<(), lambda_http::Error> {
    run_with(move |app, req| Box::pin(serve(app, routes, site, req))).await
}

/// The runtime loop around any request handler (the areas' pipeline, or the MCP server's).
pub async fn run_with<F>(handle: F) -> Result<(), lambda_http::Error>
where
    F: Fn(&'static App, http::Request<Body>) -> BoxFuture<'static, crate::http::Response> + Copy + Send + Sync + 'static,
{
    crate::telemetry::init();
    // Leaked on purpose: the state lives as long as the container, and handlers borrow it.
    let app: &'static App = Box::leak(Box::new(App::from_env().await?));
    // Boxed: the pipeline's future is deep, and the runtime's layers around an unboxed one
    // exceed the compiler's type-layout depth in every function's `main`.
    let handler = move |event: LambdaEvent<LambdaRequest>| -> BoxFuture<'static, Result<ApiGatewayV2httpResponse, Infallible>> {
        let req = http::Request::<Body>::from(event.payload);
        Box::pin(async move { Ok(to_api_gateway(handle(app, req).await)) })
    };
    lambda_http::lambda_runtime::run(lambda_http::service_fn(handler)).await
}

/// An HTTP API (payload 2.0) response: `Set-Cookie` goes in `cookies`, other headers as they
/// are (API Gateway joins repeated ones), binary bodies base64-encoded.
fn to_api_gateway(resp: crate::http::Response) -> ApiGatewayV2httpResponse {
    let (parts, body) = resp.into_parts();
    let mut headers = parts.headers;
    let cookies = headers.get_all(http::header::SET_COOKIE).iter().filter_map(|v| v.to_str().ok().map(str::to_string)).collect();
    headers.remove(http::header::SET_COOKIE);
    let (is_base64_encoded, body) = match body {
        Body::Empty => (false, None),
        b @ Body::Binary(_) => (true, Some(b)),
        b => (false, Some(b)),
    };
    let mut out = ApiGatewayV2httpResponse::default();
    out.status_code = i64::from(parts.status.as_u16());
    out.headers = headers;
    out.cookies = cookies;
    out.is_base64_encoded = is_base64_encoded;
    out.body = body;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_response_document_is_api_gateways() {
        let resp = http::Response::builder()
            .status(201)
            .header("content-type", "application/json")
            .header("set-cookie", "a=1")
            .header("set-cookie", "b=2")
            .body(Body::Text("{\"id\":\"post_1\"}".into()))
            .unwrap();
        let doc = serde_json::to_value(to_api_gateway(resp)).unwrap();
        assert_eq!(doc["statusCode"], 201);
        assert_eq!(doc["body"], "{\"id\":\"post_1\"}");
        assert_eq!(doc["isBase64Encoded"], false);
        assert_eq!(doc["headers"]["content-type"], "application/json");
        assert!(doc["headers"].get("set-cookie").is_none());
        assert_eq!(doc["cookies"], serde_json::json!(["a=1", "b=2"]));

        let bin = to_api_gateway(http::Response::builder().status(200).body(Body::Binary(vec![0, 255])).unwrap());
        let doc = serde_json::to_value(bin).unwrap();
        assert_eq!(doc["isBase64Encoded"], true);
        assert_eq!(doc["body"], "AP8=");
        let empty = serde_json::to_value(to_api_gateway(http::Response::builder().status(204).body(Body::Empty).unwrap())).unwrap();
        assert!(empty.get("body").is_none_or(|b| b.is_null()), "{empty}");
    }
}
