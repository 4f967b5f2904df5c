//! Images of a post, fetched from their URLs when a variant is published (through the
//! SSRF-safe client), within a size limit and recognised by their bytes: jpeg, png, webp, gif.

use super::network::{ErrorCategory, NetError};
use crate::posts::Media;
use shared::outbound::Client;

pub struct Image {
    pub bytes: Vec<u8>,
    pub mime: &'static str,
    pub alt: String,
}

/// The image type from its first bytes (a `Content-Type` header can lie).
pub fn sniff(b: &[u8]) -> Option<&'static str> {
    if b.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if b.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if b.len() >= 12 && &b[..4] == b"RIFF" && &b[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

fn refused(i: usize, why: String) -> NetError {
    NetError::new(ErrorCategory::UserContent, format!("image {i}: {why}"))
}

/// Fetch image `i` with at most `max_bytes`.
pub async fn fetch(http: &Client, i: usize, m: &Media, max_bytes: usize) -> Result<Image, NetError> {
    let req = http.request(reqwest::Method::GET, &m.url).map_err(|e| refused(i, format!("the URL is refused: {e}")))?;
    let mut resp = req.send().await.map_err(|e| {
        let mut n = NetError::transport(&e);
        n.message = format!("image {i}: {}", n.message);
        n
    })?;
    let status = resp.status().as_u16();
    if status >= 500 {
        return Err(NetError::new(ErrorCategory::Network, format!("image {i}: its server answered {status}")));
    }
    if !(200..300).contains(&status) {
        return Err(refused(i, format!("its server answered {status}")));
    }
    if resp.content_length().is_some_and(|l| l as usize > max_bytes) {
        return Err(refused(i, format!("larger than this network's {max_bytes} bytes")));
    }
    let mut bytes = vec![];
    while let Some(chunk) = resp.chunk().await.map_err(|e| NetError::transport(&e))? {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > max_bytes {
            return Err(refused(i, format!("larger than this network's {max_bytes} bytes")));
        }
    }
    let mime = sniff(&bytes).ok_or_else(|| refused(i, "not a jpeg, png, webp or gif image".into()))?;
    Ok(Image { bytes, mime, alt: m.alt.clone() })
}

/// Every image of a variant, in order.
pub async fn fetch_all(http: &Client, media: &[Media], max_bytes: usize) -> Result<Vec<Image>, NetError> {
    let all = futures_util::future::join_all(media.iter().enumerate().map(|(i, m)| fetch(http, i, m, max_bytes))).await;
    all.into_iter().collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn types_come_from_the_bytes() {
        assert_eq!(super::sniff(b"\x89PNG\r\n\x1a\nrest"), Some("image/png"));
        assert_eq!(super::sniff(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(super::sniff(b"<html>"), None);
    }
}
