//! Webhook channels: an HTTPS POST of each variant to the customer's URL, signed exactly like
//! webhook deliveries (`X-Service-Signature` over `{timestamp}.{rawBody}`). The receiver may
//! answer JSON `{"remote_id", "permalink"}`. `X-Service-Idempotency-Key` is the same for
//! every attempt of a variant, so a receiver that saw it before answers without posting again.

use super::network::{Connected, ErrorCategory, NetError, Network, Outgoing, Published};
use serde::{Deserialize, Serialize};
use shared::outbound::Client;
use utoipa::ToSchema;

/// What a client sends: only the URL (the signing secret is generated).
#[derive(Serialize, Deserialize, ToSchema, Clone)]
#[serde(deny_unknown_fields)]
#[schema(as = WebhookChannelInput)]
pub struct Input {
    #[schema(format = "uri", max_length = 2048)]
    pub url: String,
}

#[derive(Serialize, Deserialize, Clone)]
pub struct Credentials {
    pub url: String,
    /// `whsec_...`, shown once at creation.
    pub secret: String,
}

pub struct Webhook;

/// The JSON body a webhook channel receives.
#[derive(Serialize)]
struct Body<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    post_id: &'a str,
    channel_id: &'a str,
    idempotency_key: &'a str,
    text: &'a str,
    media: &'a [crate::posts::Media],
}

impl Network for Webhook {
    type Credentials = Credentials;

    async fn connect(&self, http: &Client, creds: &Credentials) -> Result<Connected, NetError> {
        // Nothing to log in to: the URL must resolve to an allowed address.
        let u = shared::outbound::check_url_resolved(&creds.url, http.policy())
            .await
            .map_err(|m| NetError::new(ErrorCategory::UserContent, format!("url: {m}")))?;
        Ok(Connected {
            masked_identity: u.host_str().unwrap_or_default().to_string(),
            limits: super::Limits { max_characters: crate::posts::MAX_CONTENT_CHARS as u32, max_media: 10 },
            session: None,
        })
    }

    async fn publish(
        &self,
        http: &Client,
        creds: &Credentials,
        _: Option<serde_json::Value>,
        out: &Outgoing,
    ) -> Result<Published, NetError> {
        let body = serde_json::to_vec(&Body {
            kind: "post.variant",
            post_id: &out.post_id,
            channel_id: &out.channel_id,
            idempotency_key: &out.idempotency_key,
            text: &out.text,
            media: &out.media,
        })
        .map_err(|e| NetError::new(ErrorCategory::PlatformError, e.to_string()))?;
        let key = shared::signing::secret_key(&creds.secret).map_err(|e| NetError::new(ErrorCategory::AuthExpired, e.to_string()))?;
        let ts = chrono::Utc::now().timestamp().to_string();
        let req = http
            .request(reqwest::Method::POST, &creds.url)
            .map_err(|e| NetError::new(ErrorCategory::UserContent, e.to_string()))?
            .header("content-type", "application/json")
            .header("x-service-timestamp", &ts)
            .header("x-service-signature", shared::signing::signature_header(&[key], &ts, &body))
            .header("x-service-idempotency-key", &out.idempotency_key)
            .body(body);
        let resp = req.send().await.map_err(|e| NetError::transport(&e))?;
        let status = resp.status().as_u16();
        let retry = super::network::retry_after(resp.headers());
        let text = resp.text().await.unwrap_or_default();
        if !(200..300).contains(&status) {
            return Err(NetError::from_status(status, format!("the receiver answered {status}"), retry));
        }
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let field = |k: &str| v.get(k).and_then(|x| x.as_str()).filter(|s| !s.is_empty() && s.len() <= 2048).map(String::from);
        Ok(Published { remote_id: field("remote_id"), permalink: field("permalink"), session: None })
    }
}
