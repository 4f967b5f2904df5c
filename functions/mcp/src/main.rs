use std::sync::{Arc, OnceLock};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    shared::lambda::run_with(|app, req| {
        Box::pin(async move {
            let upstream = Arc::new(mcp::Upstream { origin: origin(&req), client: client() });
            mcp::serve(app, upstream, req).await
        })
    })
    .await
}

/// The API's origin as API Gateway received this request (its request context, which the
/// caller cannot choose, unlike `Host`): tool calls go back through the same domain.
fn origin(req: &http::Request<lambda_http::Body>) -> String {
    use lambda_http::request::RequestContext;
    match req.extensions().get::<RequestContext>() {
        Some(RequestContext::ApiGatewayV2(ctx)) => ctx.domain_name.as_ref().map(|d| format!("https://{d}")).unwrap_or_default(),
        _ => String::new(),
    }
}

/// One client per container: its connections to the API are reused across invocations.
fn client() -> Arc<shared::outbound::Client> {
    static CLIENT: OnceLock<Arc<shared::outbound::Client>> = OnceLock::new();
    CLIENT.get_or_init(|| mcp::Upstream::client(shared::outbound::UrlPolicy::default())).clone()
}
