//! The HTTP side of a delivery: one `shared::outbound::Client` per container (no redirects,
//! non-public addresses refused at resolution) with the webhook timeout.

use crate::webhooks::Attempt;
use shared::config::WebhookSettings;
use shared::outbound::UrlError;
use std::time::{Duration, Instant};

pub const USER_AGENT: &str = concat!("WorkspacePlatform-Webhooks/", env!("CARGO_PKG_VERSION"));
const EXCERPT_BYTES: usize = 2048;
const EXCERPT_CHARS: usize = 500;

pub struct Sender {
    client: shared::outbound::Client,
}

/// What one attempt produced.
pub struct Sent {
    pub attempt: Attempt,
    pub success: bool,
    /// The receiver answered 410 Gone: it wants no more deliveries.
    pub gone: bool,
    /// Seconds from a `Retry-After` header.
    pub retry_after: Option<u64>,
}

impl Sender {
    pub fn new(settings: &WebhookSettings) -> Result<Self, String> {
        let client = shared::outbound::Client::new(settings.url_policy, Duration::from_secs(settings.timeout_secs), USER_AGENT)?;
        Ok(Self { client })
    }

    /// POST the body, signed now with every key. Never fails: errors become the attempt's record.
    /// `message_id` is the event's id: Standard Webhooks' `webhook-id`, the same on every attempt.
    pub async fn send(&self, url: &str, keys: &[Vec<u8>], message_id: &str, body: &str, headers: &[(&str, &str)], number: u32) -> Sent {
        let at = shared::ids::Timestamp::now();
        let started = Instant::now();
        let sent = |status_code: Option<u16>, error: Option<&str>, excerpt: Option<String>, retry_after: Option<u64>| Sent {
            attempt: Attempt {
                number,
                at,
                duration_ms: started.elapsed().as_millis() as u64,
                status_code,
                error: error.map(String::from),
                response_excerpt: excerpt,
            },
            success: status_code.is_some_and(|c| (200..300).contains(&c)),
            gone: status_code == Some(410),
            retry_after,
        };
        let req = match self.client.request(reqwest::Method::POST, url) {
            Ok(r) => r,
            Err(UrlError::Blocked(_)) => return sent(None, Some("blocked_address"), None, None),
            Err(UrlError::Invalid(_)) => return sent(None, Some("invalid_url"), None, None),
            // Not the endpoint's fault: a failed attempt, retried like any other.
            Err(UrlError::Client(_)) => return sent(None, Some("request"), None, None),
        };
        // Taken per attempt: a retry is signed afresh with a fresh timestamp.
        let ts = chrono::Utc::now().timestamp().to_string();
        let mut req = req
            .header("content-type", "application/json")
            .header(shared::signing::TIMESTAMP_HEADER, &ts)
            .header(shared::signing::SIGNATURE_HEADER, shared::signing::signature_header(keys, &ts, body.as_bytes()))
            .header(shared::signing::STANDARD_ID_HEADER, message_id)
            .header(shared::signing::STANDARD_TIMESTAMP_HEADER, &ts)
            .header(
                shared::signing::STANDARD_SIGNATURE_HEADER,
                shared::signing::standard_signature_header(keys, message_id, &ts, body.as_bytes()),
            )
            .body(body.to_string());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        match req.send().await {
            Ok(mut resp) => {
                let status = resp.status().as_u16();
                let retry_after =
                    resp.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok());
                let mut buf = Vec::new();
                while buf.len() < EXCERPT_BYTES {
                    match resp.chunk().await {
                        Ok(Some(c)) => buf.extend_from_slice(&c),
                        _ => break,
                    }
                }
                let excerpt: String = String::from_utf8_lossy(&buf).chars().take(EXCERPT_CHARS).collect();
                sent(Some(status), None, (!excerpt.is_empty()).then_some(excerpt), retry_after)
            }
            Err(e) => sent(None, Some(shared::outbound::error_kind(&e)), None, None),
        }
    }
}
