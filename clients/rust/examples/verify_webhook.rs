//! An axum handler that accepts only deliveries signed with the endpoint's secret.
//!
//! `WEBHOOK_SECRET=whsec_... cargo run -p workspace-platform-client --example verify_webhook`,
//! then point a webhook endpoint at http://127.0.0.1:8080/hooks/platform (make dev allows
//! loopback endpoint URLs).

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use workspace_platform_client::webhooks;

async fn receive(headers: HeaderMap, body: Bytes) -> StatusCode {
    let secret = std::env::var("WEBHOOK_SECRET").unwrap_or_default();
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    // The raw body, exactly as received: parsing and re-serialising JSON changes the bytes.
    match webhooks::verify(&secret, &header("x-service-timestamp"), &header("x-service-signature"), &body) {
        Ok(()) => {
            let event: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            println!("{} {}", event["type"], event["id"]);
            StatusCode::NO_CONTENT
        }
        Err(e) => {
            eprintln!("rejected: {e}");
            StatusCode::UNAUTHORIZED
        }
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let app = axum::Router::new().route("/hooks/platform", post(receive));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
    axum::serve(listener, app).await
}
