//! Mastodon (docs.joinmastodon.org): the account from `verify_credentials`, the limits from
//! `GET /api/v2/instance`, statuses with `POST /api/v1/statuses` and an `Idempotency-Key`
//! derived from the variant, so a repeated attempt returns the first status instead of
//! posting twice (Mastodon keeps keys for an hour; the publisher retries well within it).

use super::network::{Connected, ErrorCategory, NetError, Network, Outgoing, Published};
use serde::{Deserialize, Serialize};
use shared::outbound::Client;
use utoipa::ToSchema;

#[derive(Serialize, Deserialize, ToSchema, Clone)]
#[serde(deny_unknown_fields)]
#[schema(as = MastodonCredentials)]
pub struct Credentials {
    /// The instance, e.g. `https://mastodon.social`.
    #[schema(format = "uri", max_length = 2048)]
    pub instance_url: String,
    /// A user access token with the `write:statuses`, `write:media` and `read:accounts` scopes.
    #[schema(min_length = 1, max_length = 512)]
    pub access_token: String,
}

impl Credentials {
    pub fn validate(&self, errs: &mut shared::validate::Errors, policy: shared::outbound::UrlPolicy) {
        super::check_url(errs, "credentials.instance_url", &self.instance_url, policy);
        errs.text("credentials.access_token", &self.access_token, 1, 512);
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.instance_url.trim_end_matches('/'))
    }
}

pub struct Mastodon;

/// Mastodon's default image limit is 16 MB; a post's images are held in memory, so less.
const MAX_IMAGE_BYTES: usize = 8 * 1024 * 1024;

/// `multipart/form-data` with the file and its description (alt text).
fn multipart(img: &super::media::Image, boundary: &str) -> Vec<u8> {
    let ext = img.mime.trim_start_matches("image/");
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"image.{ext}\"\r\nContent-Type: {}\r\n\r\n",
        img.mime
    )
    .into_bytes();
    body.extend_from_slice(&img.bytes);
    body.extend_from_slice(
        format!("\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"description\"\r\n\r\n{}\r\n--{boundary}--\r\n", img.alt)
            .as_bytes(),
    );
    body
}

/// The `POST /api/v1/statuses` parameters of a variant.
fn status_body(out: &Outgoing, media_ids: &[String]) -> serde_json::Value {
    let mut body = serde_json::json!({
        "status": out.text,
        "visibility": out.visibility.unwrap_or(crate::posts::Visibility::Public),
        "media_ids": media_ids,
    });
    if let Some(l) = &out.language {
        body["language"] = l.as_str().into();
    }
    if let Some(s) = out.spoiler_text.as_deref().filter(|s| !s.is_empty()) {
        body["spoiler_text"] = s.into();
    }
    if let Some(s) = out.sensitive {
        body["sensitive"] = s.into();
    }
    body
}

/// Upload an image (`POST /api/v2/media`) and wait while the server processes it (206).
async fn upload(http: &Client, creds: &Credentials, img: &super::media::Image) -> Result<String, NetError> {
    let boundary = format!("----platform{}", shared::ids::new_id("b"));
    let resp = http
        .request(reqwest::Method::POST, &creds.url("/api/v2/media"))
        .map_err(|e| NetError::new(ErrorCategory::UserContent, e.to_string()))?
        .bearer_auth(&creds.access_token)
        .header("content-type", format!("multipart/form-data; boundary={boundary}"))
        .body(multipart(img, &boundary))
        .send()
        .await
        .map_err(|e| NetError::transport(&e))?;
    if !resp.status().is_success() {
        return Err(fail(resp).await);
    }
    let v: serde_json::Value =
        resp.json().await.map_err(|e| NetError::new(ErrorCategory::PlatformError, format!("unreadable answer: {e}")))?;
    let id = v["id"].as_str().ok_or_else(|| NetError::new(ErrorCategory::PlatformError, "no media id"))?.to_string();
    if v["url"].is_string() {
        return Ok(id);
    }
    for _ in 0..40 {
        let resp = http
            .request(reqwest::Method::GET, &creds.url(&format!("/api/v1/media/{id}")))
            .map_err(|e| NetError::new(ErrorCategory::UserContent, e.to_string()))?
            .bearer_auth(&creds.access_token)
            .send()
            .await
            .map_err(|e| NetError::transport(&e))?;
        match resp.status().as_u16() {
            200 => return Ok(id),
            206 => tokio::time::sleep(std::time::Duration::from_millis(250)).await,
            _ => return Err(fail(resp).await),
        }
    }
    Err(NetError::new(ErrorCategory::PlatformError, "the instance is still processing an image"))
}

/// Mastodon counts characters, every link as 23.
pub fn characters(text: &str) -> usize {
    text.split_whitespace()
        .map(|w| if w.starts_with("https://") || w.starts_with("http://") { 23 } else { w.chars().count() })
        .sum::<usize>()
        + text.chars().filter(|c| c.is_whitespace()).count()
}

/// Mastodon's error body is `{"error": "..."}`.
async fn fail(resp: reqwest::Response) -> NetError {
    let status = resp.status().as_u16();
    let retry = super::network::retry_after(resp.headers());
    let body: serde_json::Value = resp.json().await.unwrap_or_default();
    let msg = body.get("error").and_then(|e| e.as_str()).unwrap_or("no reason given");
    NetError::from_status(status, format!("mastodon answered {status}: {msg}"), retry)
}

async fn get_json(http: &Client, creds: &Credentials, path: &str, auth: bool) -> Result<serde_json::Value, NetError> {
    let mut req =
        http.request(reqwest::Method::GET, &creds.url(path)).map_err(|e| NetError::new(ErrorCategory::UserContent, e.to_string()))?;
    if auth {
        req = req.bearer_auth(&creds.access_token);
    }
    let resp = req.send().await.map_err(|e| NetError::transport(&e))?;
    if !resp.status().is_success() {
        return Err(fail(resp).await);
    }
    resp.json().await.map_err(|e| NetError::new(ErrorCategory::PlatformError, format!("unreadable answer: {e}")))
}

impl Network for Mastodon {
    type Credentials = Credentials;

    async fn connect(&self, http: &Client, creds: &Credentials) -> Result<Connected, NetError> {
        let (account, instance) = tokio::join!(
            get_json(http, creds, "/api/v1/accounts/verify_credentials", true),
            get_json(http, creds, "/api/v2/instance", false)
        );
        let (account, instance) = (account?, instance?);
        let statuses = &instance["configuration"]["statuses"];
        let host = url::Url::parse(&creds.instance_url).ok().and_then(|u| u.host_str().map(String::from)).unwrap_or_default();
        let username = account["username"].as_str().unwrap_or_default();
        Ok(Connected {
            masked_identity: format!("@{username}@{host}"),
            limits: super::Limits {
                max_characters: statuses["max_characters"].as_u64().unwrap_or(500).min(100_000) as u32,
                max_media: statuses["max_media_attachments"].as_u64().unwrap_or(4).min(20) as u32,
            },
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
        let images = super::media::fetch_all(http, &out.media, MAX_IMAGE_BYTES).await?;
        let mut media_ids = vec![];
        for img in &images {
            media_ids.push(upload(http, creds, img).await?);
        }
        let req = http
            .request(reqwest::Method::POST, &creds.url("/api/v1/statuses"))
            .map_err(|e| NetError::new(ErrorCategory::UserContent, e.to_string()))?
            .bearer_auth(&creds.access_token)
            .header("idempotency-key", &out.idempotency_key)
            .json(&status_body(out, &media_ids));
        let resp = req.send().await.map_err(|e| NetError::transport(&e))?;
        if !resp.status().is_success() {
            return Err(fail(resp).await);
        }
        let status: serde_json::Value =
            resp.json().await.map_err(|e| NetError::new(ErrorCategory::PlatformError, format!("unreadable answer: {e}")))?;
        Ok(Published {
            remote_id: status["id"].as_str().map(String::from),
            permalink: status["url"].as_str().or(status["uri"].as_str()).map(String::from),
            session: None,
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn links_count_as_23() {
        assert_eq!(super::characters("hello"), 5);
        assert_eq!(super::characters("see https://example.com/a/very/long/path/indeed/yes"), 4 + 23);
    }
}
