//! Bluesky (AT Protocol): `com.atproto.server.createSession` with an app password (the
//! session is cached sealed and renewed with `refreshSession`), posts with
//! `com.atproto.repo.createRecord` of an `app.bsky.feed.post` whose record key is a TID
//! derived from the variant. A second attempt first asks `getRecord` for that key and treats
//! the variant as published when it is there (the PDS answers a repeated key with 500, not a
//! conflict), so one variant never makes two posts.

use super::network::{Connected, ErrorCategory, NetError, Network, Outgoing, Published};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use shared::outbound::Client;
use utoipa::ToSchema;

pub const DEFAULT_SERVICE: &str = "https://bsky.social";
pub const MAX_GRAPHEMES: u32 = 300;
/// Bluesky's limit per image.
const MAX_IMAGE_BYTES: usize = 1_000_000;
const COLLECTION: &str = "app.bsky.feed.post";

#[derive(Serialize, Deserialize, ToSchema, Clone)]
#[serde(deny_unknown_fields)]
#[schema(as = BlueskyCredentials)]
pub struct Credentials {
    /// e.g. `ada.bsky.social` (a leading `@` is ignored).
    #[schema(min_length = 3, max_length = 253)]
    pub handle: String,
    /// An app password (Settings -> App passwords), never the account password.
    #[schema(min_length = 1, max_length = 256)]
    pub app_password: String,
    /// The PDS, default `https://bsky.social`.
    #[serde(default)]
    #[schema(format = "uri", max_length = 2048)]
    pub service_url: Option<String>,
}

impl Credentials {
    pub fn validate(&mut self, errs: &mut shared::validate::Errors, policy: shared::outbound::UrlPolicy) {
        self.handle = self.handle.trim().trim_start_matches('@').to_ascii_lowercase();
        if self.handle.len() < 3 || self.handle.len() > 253 || !self.handle.contains('.') {
            errs.add("credentials.handle", "must be a handle such as ada.bsky.social");
        }
        errs.text("credentials.app_password", &self.app_password, 1, 256);
        if let Some(u) = &self.service_url {
            super::check_url(errs, "credentials.service_url", u, policy);
        }
    }

    fn xrpc(&self, method: &str) -> String {
        format!("{}/xrpc/{method}", self.service_url.as_deref().unwrap_or(DEFAULT_SERVICE).trim_end_matches('/'))
    }
}

/// The cached session.
#[derive(Serialize, Deserialize, Clone, Debug)]
struct Session {
    #[serde(rename = "accessJwt")]
    access: String,
    #[serde(rename = "refreshJwt")]
    refresh: String,
    did: String,
    handle: String,
}

pub struct Bluesky;

pub fn graphemes(text: &str) -> usize {
    unicode_segmentation::UnicodeSegmentation::graphemes(text, true).count()
}

const TID_ALPHABET: &[u8; 32] = b"234567abcdefghijklmnopqrstuvwxyz";

/// A TID (13 characters, sortable base32) for a variant: the post's creation time in
/// microseconds and 10 bits of the key's hash as the clock id, so it is the same on every
/// attempt and differs between variants.
pub fn tid_for(key: &str, created_at: &str) -> String {
    use sha2::Digest;
    let micros = chrono::DateTime::parse_from_rfc3339(created_at).map(|t| t.timestamp_micros()).unwrap_or(0).max(0) as u64;
    let h = sha2::Sha256::digest(key.as_bytes());
    let clock = u64::from(u16::from_be_bytes([h[0], h[1]]) & 0x3ff);
    let v = ((micros & ((1 << 53) - 1)) << 10) | clock;
    (0..13).rev().map(|i| TID_ALPHABET[((v >> (5 * i)) & 31) as usize] as char).collect()
}

/// Words with their byte ranges (facets index UTF-8 bytes).
fn words(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split(char::is_whitespace).filter(|w| !w.is_empty()).map(move |w| {
        let start = w.as_ptr() as usize - text.as_ptr() as usize;
        (start, w.trim_end_matches(['.', ',', ';', ':', '!', '?', ')', '"', '\'']))
    })
}

/// Rich-text facets: links, hashtags and mentions (a mention whose handle does not resolve
/// stays plain text).
async fn facets(http: &Client, creds: &Credentials, text: &str) -> Vec<Value> {
    let mut out = vec![];
    for (start, w) in words(text) {
        let range = json!({"byteStart": start, "byteEnd": start + w.len()});
        if (w.starts_with("https://") || w.starts_with("http://")) && w.len() > 8 {
            out.push(json!({"index": range, "features": [{"$type": "app.bsky.richtext.facet#link", "uri": w}]}));
        } else if let Some(tag) = w.strip_prefix('#').filter(|t| !t.is_empty() && !t.chars().all(|c| c.is_ascii_digit()) && t.len() <= 64) {
            out.push(json!({"index": range, "features": [{"$type": "app.bsky.richtext.facet#tag", "tag": tag}]}));
        } else if let Some(handle) = w.strip_prefix('@').filter(|h| h.contains('.') && h.len() <= 253) {
            let url = format!("{}?handle={}", creds.xrpc("com.atproto.identity.resolveHandle"), handle.to_ascii_lowercase());
            let Ok(req) = http.request(reqwest::Method::GET, &url) else { continue };
            if let Ok(resp) = req.send().await
                && resp.status().is_success()
                && let Ok(v) = resp.json::<Value>().await
                && let Some(did) = v["did"].as_str()
            {
                out.push(json!({"index": range, "features": [{"$type": "app.bsky.richtext.facet#mention", "did": did}]}));
            }
        }
    }
    out
}

/// An XRPC error body is `{"error": "Name", "message": "..."}`.
async fn fail(resp: reqwest::Response) -> NetError {
    let status = resp.status().as_u16();
    let retry = super::network::retry_after(resp.headers());
    let body: Value = resp.json().await.unwrap_or_default();
    let name = body["error"].as_str().unwrap_or("Error");
    let msg = body["message"].as_str().unwrap_or("");
    let mut e = NetError::from_status(status, format!("bluesky answered {status} {name}: {msg}"), retry);
    if matches!(name, "ExpiredToken" | "InvalidToken" | "AuthenticationRequired" | "AccountTakedown") {
        e.category = ErrorCategory::AuthExpired;
    } else if status == 400 && name == "InvalidRequest" {
        e.category = ErrorCategory::UserContent;
    }
    e
}

async fn call(http: &Client, method: reqwest::Method, url: &str, bearer: Option<&str>, body: Option<&Value>) -> Result<Value, NetError> {
    let mut req = http.request(method, url).map_err(|e| NetError::new(ErrorCategory::UserContent, e.to_string()))?;
    if let Some(t) = bearer {
        req = req.bearer_auth(t);
    }
    if let Some(b) = body {
        req = req.json(b);
    }
    let resp = req.send().await.map_err(|e| NetError::transport(&e))?;
    if !resp.status().is_success() {
        return Err(fail(resp).await);
    }
    resp.json().await.map_err(|e| NetError::new(ErrorCategory::PlatformError, format!("unreadable answer: {e}")))
}

async fn login(http: &Client, creds: &Credentials) -> Result<Session, NetError> {
    let body = json!({"identifier": creds.handle, "password": creds.app_password});
    let v = call(http, reqwest::Method::POST, &creds.xrpc("com.atproto.server.createSession"), None, Some(&body)).await?;
    serde_json::from_value(v).map_err(|e| NetError::new(ErrorCategory::PlatformError, format!("unreadable session: {e}")))
}

/// A fresh session: refresh the cached one, or log in again when that is refused.
async fn renew(http: &Client, creds: &Credentials, old: Option<&Session>) -> Result<Session, NetError> {
    if let Some(s) = old
        && let Ok(v) = call(http, reqwest::Method::POST, &creds.xrpc("com.atproto.server.refreshSession"), Some(&s.refresh), None).await
        && let Ok(s) = serde_json::from_value::<Session>(v)
    {
        return Ok(s);
    }
    login(http, creds).await
}

/// The variant's record if it exists.
async fn existing(http: &Client, creds: &Credentials, s: &Session, rkey: &str) -> Result<Option<Value>, NetError> {
    let url = format!("{}?repo={}&collection={COLLECTION}&rkey={rkey}", creds.xrpc("com.atproto.repo.getRecord"), s.did);
    match call(http, reqwest::Method::GET, &url, Some(&s.access), None).await {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.message.contains("RecordNotFound") => Ok(None),
        Err(e) => Err(e),
    }
}

fn published(s: &Session, rkey: &str, uri: Option<&str>) -> Published {
    Published {
        remote_id: Some(uri.map(String::from).unwrap_or_else(|| format!("at://{}/{COLLECTION}/{rkey}", s.did))),
        permalink: Some(format!("https://bsky.app/profile/{}/post/{rkey}", s.handle)),
        session: serde_json::to_value(s).ok(),
    }
}

async fn create(http: &Client, creds: &Credentials, s: &Session, rkey: &str, out: &Outgoing) -> Result<Published, NetError> {
    if let Some(v) = existing(http, creds, s, rkey).await? {
        return Ok(published(s, rkey, v["uri"].as_str()));
    }
    let mut record = json!({"$type": COLLECTION, "text": out.text, "createdAt": shared::ids::Timestamp::now()});
    let f = facets(http, creds, &out.text).await;
    if !f.is_empty() {
        record["facets"] = Value::Array(f);
    }
    if let Some(l) = &out.language {
        record["langs"] = json!([l]);
    }
    if !out.media.is_empty() {
        let mut images = vec![];
        for img in super::media::fetch_all(http, &out.media, MAX_IMAGE_BYTES).await? {
            let resp = http
                .request(reqwest::Method::POST, &creds.xrpc("com.atproto.repo.uploadBlob"))
                .map_err(|e| NetError::new(ErrorCategory::UserContent, e.to_string()))?
                .bearer_auth(&s.access)
                .header("content-type", img.mime)
                .body(img.bytes)
                .send()
                .await
                .map_err(|e| NetError::transport(&e))?;
            if !resp.status().is_success() {
                return Err(fail(resp).await);
            }
            let v: Value = resp.json().await.map_err(|e| NetError::new(ErrorCategory::PlatformError, format!("unreadable answer: {e}")))?;
            images.push(json!({"alt": img.alt, "image": v["blob"]}));
        }
        record["embed"] = json!({"$type": "app.bsky.embed.images", "images": images});
    }
    let body = json!({"repo": s.did, "collection": COLLECTION, "rkey": rkey, "record": record});
    match call(http, reqwest::Method::POST, &creds.xrpc("com.atproto.repo.createRecord"), Some(&s.access), Some(&body)).await {
        Ok(v) => Ok(published(s, rkey, v["uri"].as_str())),
        // An ambiguous failure may have created the record: look before saying it failed.
        Err(e) if e.category.retryable() => match existing(http, creds, s, rkey).await {
            Ok(Some(v)) => Ok(published(s, rkey, v["uri"].as_str())),
            _ => Err(e),
        },
        Err(e) => Err(e),
    }
}

impl Network for Bluesky {
    type Credentials = Credentials;

    async fn connect(&self, http: &Client, creds: &Credentials) -> Result<Connected, NetError> {
        let s = login(http, creds).await?;
        Ok(Connected {
            masked_identity: format!("@{}", s.handle),
            limits: super::Limits { max_characters: MAX_GRAPHEMES, max_media: 4 },
            session: serde_json::to_value(&s).ok(),
        })
    }

    async fn publish(&self, http: &Client, creds: &Credentials, session: Option<Value>, out: &Outgoing) -> Result<Published, NetError> {
        let rkey = tid_for(&out.idempotency_key, &out.created_at);
        let cached = session.and_then(|v| serde_json::from_value::<Session>(v).ok());
        let s = match cached.clone() {
            Some(s) => s,
            None => login(http, creds).await?,
        };
        match create(http, creds, &s, &rkey, out).await {
            Err(e) if e.category == ErrorCategory::AuthExpired => {
                let s = renew(http, creds, Some(&s)).await?;
                create(http, creds, &s, &rkey, out).await
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tids_are_valid_stable_and_distinct() {
        let a = tid_for("post_1/ch_1", "2026-11-23T10:00:00.123456Z");
        assert_eq!(a.len(), 13);
        assert!("234567abcdefghij".contains(a.chars().next().unwrap()), "{a}");
        assert!(a.chars().all(|c| TID_ALPHABET.contains(&(c as u8))));
        assert_eq!(a, tid_for("post_1/ch_1", "2026-11-23T10:00:00.123456Z"));
        assert_ne!(a, tid_for("post_1/ch_2", "2026-11-23T10:00:00.123456Z"));
    }

    #[test]
    fn words_carry_utf8_byte_offsets() {
        let text = "Hei på deg! Se https://example.com/x. #rust";
        let w: Vec<(usize, &str)> = words(text).collect();
        let link = w.iter().find(|(_, s)| s.starts_with("https")).unwrap();
        assert_eq!(&text[link.0..link.0 + link.1.len()], "https://example.com/x");
        assert_eq!(w.last().unwrap().1, "#rust");
        assert_eq!(graphemes("👩‍👩‍👧 å"), 3);
    }
}
