//! Opaque, tamper-evident list cursors. A cursor carries the sort key to continue after and is
//! bound to the workspace, the list and its filters by an HMAC (key from the platform secret),
//! so a forged, edited or foreign cursor is `400 INVALID_CURSOR` and never reads other data.

use crate::error::{ApiError, ErrorCode, ErrorDetail};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

const TAG_LEN: usize = 16;
pub const DEFAULT_LIMIT: usize = 50;
pub const MAX_LIMIT: usize = 100;

#[derive(Serialize, Deserialize)]
struct Payload {
    v: u8,
    /// workspace
    w: String,
    /// list name
    l: String,
    /// hash of the canonical filters
    f: String,
    /// continue after this sort key
    a: String,
}

/// What a list handler needs: page size, where to continue, and how to mint the next cursor.
pub struct PageRequest {
    pub limit: usize,
    pub after: Option<String>,
    key: Vec<u8>,
    ws: String,
    list: String,
    filters: String,
}

fn tag(key: &[u8], payload: &str) -> [u8; TAG_LEN] {
    let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(payload.as_bytes());
    let full = m.finalize().into_bytes();
    let mut t = [0u8; TAG_LEN];
    t.copy_from_slice(&full[..TAG_LEN]);
    t
}

fn filters_hash(filters: &[(&str, Option<&str>)]) -> String {
    let mut h = Sha256::new();
    for (k, v) in filters {
        h.update(k.as_bytes());
        h.update([0]);
        h.update(v.unwrap_or("\u{1}").as_bytes());
        h.update([0]);
    }
    crate::crypto::hex(&h.finalize()[..8])
}

impl PageRequest {
    /// `limit`/`cursor` from the query; `filters` are the list's filter values in a fixed order.
    pub fn parse(
        key: &[u8],
        ws: &str,
        list: &str,
        limit: Option<&str>,
        cursor: Option<&str>,
        filters: &[(&str, Option<&str>)],
    ) -> Result<Self, ApiError> {
        let limit = match limit {
            None => DEFAULT_LIMIT,
            Some(s) => match s.parse::<usize>() {
                Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
                _ => {
                    return Err(ApiError::new(ErrorCode::ValidationError, format!("limit must be an integer from 1 to {MAX_LIMIT}"))
                        .with_details(vec![ErrorDetail::field("limit", format!("must be an integer from 1 to {MAX_LIMIT}"))]));
                }
            },
        };
        let mut p = Self { limit, after: None, key: key.to_vec(), ws: ws.into(), list: list.into(), filters: filters_hash(filters) };
        if let Some(c) = cursor {
            p.after = Some(p.decode(c)?);
        }
        Ok(p)
    }

    fn decode(&self, cursor: &str) -> Result<String, ApiError> {
        let bad = ApiError::invalid_cursor;
        let (payload, t) = cursor.split_once('.').ok_or_else(bad)?;
        let t = B64.decode(t).map_err(|_| bad())?;
        if t.len() != TAG_LEN || !bool::from(t.ct_eq(&tag(&self.key, payload))) {
            return Err(bad());
        }
        let p: Payload = serde_json::from_slice(&B64.decode(payload).map_err(|_| bad())?).map_err(|_| bad())?;
        if p.v != 1 || p.w != self.ws || p.l != self.list || p.f != self.filters {
            return Err(bad());
        }
        Ok(p.a)
    }

    pub fn cursor_for(&self, after: &str) -> String {
        let p = Payload { v: 1, w: self.ws.clone(), l: self.list.clone(), f: self.filters.clone(), a: after.into() };
        let payload = B64.encode(serde_json::to_vec(&p).expect("payload serializes"));
        let t = tag(&self.key, &payload);
        format!("{payload}.{}", B64.encode(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn page(ws: &str, cursor: Option<&str>, status: Option<&str>) -> Result<PageRequest, ApiError> {
        PageRequest::parse(KEY, ws, "posts", None, cursor, &[("status", status)])
    }

    #[test]
    fn round_trip() {
        let p = page("ws_a", None, Some("draft")).unwrap();
        assert_eq!(p.limit, DEFAULT_LIMIT);
        let c = p.cursor_for("POST#post_1");
        assert_eq!(page("ws_a", Some(&c), Some("draft")).unwrap().after.as_deref(), Some("POST#post_1"));
    }

    #[test]
    fn tampered_foreign_or_refiltered_cursors_are_rejected() {
        let c = page("ws_a", None, None).unwrap().cursor_for("POST#post_1");
        let code = |r: Result<PageRequest, ApiError>| r.err().map(|e| e.code);
        assert_eq!(code(page("ws_b", Some(&c), None)), Some(ErrorCode::InvalidCursor));
        assert_eq!(code(page("ws_a", Some(&c), Some("draft"))), Some(ErrorCode::InvalidCursor));
        let mut t = c.clone().into_bytes();
        t[3] = if t[3] == b'A' { b'B' } else { b'A' };
        assert_eq!(code(page("ws_a", Some(std::str::from_utf8(&t).unwrap()), None)), Some(ErrorCode::InvalidCursor));
        assert_eq!(code(page("ws_a", Some("garbage"), None)), Some(ErrorCode::InvalidCursor));
        assert_eq!(code(page("ws_a", Some("a.b.c"), None)), Some(ErrorCode::InvalidCursor));
        let other = PageRequest::parse(KEY, "ws_a", "contacts", None, None, &[("status", None)]).unwrap().cursor_for("x");
        assert_eq!(code(page("ws_a", Some(&other), None)), Some(ErrorCode::InvalidCursor));
    }

    #[test]
    fn limit_is_bounded() {
        for bad in ["0", "101", "-1", "ten", ""] {
            let e = PageRequest::parse(KEY, "w", "l", Some(bad), None, &[]).err().unwrap();
            assert_eq!(e.code, ErrorCode::ValidationError, "{bad}");
        }
        assert_eq!(PageRequest::parse(KEY, "w", "l", Some("100"), None, &[]).unwrap().limit, 100);
    }
}
