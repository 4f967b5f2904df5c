//! Links that carry a customer's authority over one object (an emailed booking's manage link):
//! the token is `<object id>.<contact id>.<expires>.<tag>`, the tag the first 128 bits of an
//! HMAC-SHA256 of the purpose, the workspace, the object, the contact and the expiry (Unix
//! seconds) under a key derived from the platform's root. So a token names no address, cannot
//! be turned to another object, contact, workspace or purpose, and dies at its expiry.
//!
//! Tokens are made under the current root and accepted under the retired and pending ones (as
//! sealed values are opened): a rotation does not break links already mailed, and removing a
//! retired root ends them. Opening is pure (no read), so a forged token costs nothing but a
//! hash; the caller then loads the object and checks it still belongs to the contact.

use crate::app::PlatformSecret;
use base64::Engine;

/// A kind of link: the purpose its tokens are made for, and the portal's page that takes them
/// (under `/p/<slug>`).
pub struct Kind {
    pub purpose: &'static str,
    pub page: &'static str,
    /// How its objects' ids start: what [`redact`] looks for.
    pub object_prefix: &'static str,
}

/// A booking's manage link (`domain::bookings::manage`; `domain::webhooks::dispatch` adds it to
/// `booking.*` deliveries).
pub const BOOKING: Kind = Kind { purpose: "booking", page: "/booking", object_prefix: "bk_" };

impl Kind {
    /// The link for `claims` at the pages `origin` of the workspace with `slug`.
    pub fn url(&self, secret: &PlatformSecret, origin: &str, slug: &str, ws: &str, claims: &Claims) -> Option<String> {
        let token = sign(secret, self.purpose, ws, claims)?;
        Some(format!("{}/p/{slug}{}?token={token}", origin.trim_end_matches('/'), self.page))
    }
}

/// Every link kind, for [`redact`].
const KINDS: &[&Kind] = &[&BOOKING];

/// A character of an id's Crockford base32 part.
fn crockford(b: u8) -> bool {
    b.is_ascii_digit() || (b.is_ascii_uppercase() && !matches!(b, b'I' | b'L' | b'O' | b'U'))
}

/// The length of the token `s` starts with, when it starts with one of a kind whose objects'
/// ids start `object_prefix`: by its shape (the two ids, the expiry, 22 characters of tag), which
/// percent-encoding, JSON and HTML escaping leave as it is, wherever the token stands.
fn token_at(s: &[u8], object_prefix: &[u8]) -> Option<usize> {
    let id = |at: usize, prefix: &[u8]| -> Option<usize> {
        let rest = s.get(at..)?.strip_prefix(prefix)?;
        (rest.len() >= 26 && rest[..26].iter().all(|b| crockford(*b))).then_some(at + prefix.len() + 26)
    };
    let dot = |at: usize| (s.get(at) == Some(&b'.')).then_some(at + 1);
    let mut n = dot(id(0, object_prefix)?)?;
    n = dot(id(n, b"ct_")?)?;
    n += usize::from(s.get(n) == Some(&b'-'));
    let digits = s[n..].iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 20 {
        return None;
    }
    n = dot(n + digits)?;
    let tag = s[n..].iter().take(22).take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-')).count();
    (tag == 22).then_some(n + 22)
}

/// `text` with every link's token in it replaced by `[redacted]`: for text that came back from
/// outside and will be stored where readers of the workspace see it (a customer's mail carrying
/// their booking email's link, a webhook receiver's answer echoing a delivery). Found by the
/// token's shape, not the page's address, so every page of a link (`/booking/move?token=...`)
/// and every encoding of it is caught.
pub fn redact(text: &str) -> std::borrow::Cow<'_, str> {
    let mut out = std::borrow::Cow::Borrowed(text);
    for kind in KINDS {
        let prefix = kind.object_prefix;
        if !out.contains(prefix) {
            continue;
        }
        let mut s = String::with_capacity(out.len());
        let mut rest: &str = &out;
        while let Some(i) = rest.find(prefix) {
            s.push_str(&rest[..i]);
            rest = &rest[i..];
            match token_at(rest.as_bytes(), prefix.as_bytes()) {
                Some(n) => {
                    s.push_str("[redacted]");
                    rest = &rest[n..];
                }
                None => {
                    s.push_str(prefix);
                    rest = &rest[prefix.len()..];
                }
            }
        }
        s.push_str(rest);
        out = std::borrow::Cow::Owned(s);
    }
    out
}

/// What a valid token says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claims {
    pub object: String,
    pub contact: String,
    /// Unix seconds after which the token opens nothing.
    pub expires: i64,
}

fn message(purpose: &str, ws: &str, c: &Claims) -> Vec<u8> {
    format!("link/v1\n{purpose}\n{ws}\n{}\n{}\n{}\n", c.object, c.contact, c.expires).into_bytes()
}

/// An id may sit in a token: no separator, no space, nothing a URL's query would escape.
fn plain(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The token for `claims`, or None when an id could not sit in one (an erased contact's `""`).
pub fn sign(secret: &PlatformSecret, purpose: &str, ws: &str, claims: &Claims) -> Option<String> {
    if !plain(&claims.object) || !plain(&claims.contact) {
        return None;
    }
    let tag = &crate::crypto::hmac_sha256(secret.link_key(), &message(purpose, ws, claims))[..16];
    let tag = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(tag);
    Some(format!("{}.{}.{}.{tag}", claims.object, claims.contact, claims.expires))
}

/// What `token` grants for `purpose` in workspace `ws` at `now` (Unix seconds), or None:
/// malformed, altered, another workspace's or purpose's, or expired.
pub fn open(secret: &PlatformSecret, purpose: &str, ws: &str, token: &str, now: i64) -> Option<Claims> {
    let mut parts = token.split('.');
    let (object, contact, expires, tag) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || !plain(object) || !plain(contact) {
        return None;
    }
    let expires: i64 = expires.parse().ok().filter(|e: &i64| e.to_string() == expires)?;
    let tag = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(tag).ok().filter(|t| t.len() == 16)?;
    let claims = Claims { object: object.into(), contact: contact.into(), expires };
    let m = message(purpose, ws, &claims);
    let valid = secret.link_keys().any(|k| crate::crypto::hmac_sha256_verify_prefix(k, &m, &tag));
    (valid && now < expires).then_some(claims)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(root: &str, retired: &[&str]) -> PlatformSecret {
        PlatformSecret::parse(&serde_json::json!({"root_key": root, "retired_root_keys": retired}).to_string()).unwrap()
    }

    #[test]
    fn a_token_opens_only_what_it_was_made_for_until_it_expires() {
        let k = secret(&"a".repeat(32), &[]);
        let c = Claims { object: "bk_1".into(), contact: "ct_1".into(), expires: 2_000 };
        let t = sign(&k, "booking", "ws_1", &c).unwrap();
        assert_eq!(open(&k, "booking", "ws_1", &t, 1_999), Some(c.clone()));
        assert_eq!(open(&k, "booking", "ws_1", &t, 2_000), None, "expired at its end");
        assert_eq!(open(&k, "booking", "ws_2", &t, 0), None, "another workspace");
        assert_eq!(open(&k, "export", "ws_1", &t, 0), None, "another purpose");
        for altered in
            [t.replace("bk_1", "bk_2"), t.replace("ct_1", "ct_2"), t.replace(".2000.", ".2001."), format!("{t}A"), format!("{t}.x")]
        {
            assert_eq!(open(&k, "booking", "ws_1", &altered, 0), None, "{altered}");
        }
        assert_eq!(open(&secret(&"b".repeat(32), &[]), "booking", "ws_1", &t, 0), None, "another root");
        assert_eq!(sign(&k, "booking", "ws_1", &Claims { contact: String::new(), ..c.clone() }), None, "an erased contact");
        assert_eq!(sign(&k, "booking", "ws_1", &Claims { object: "a.b".into(), ..c }), None);
    }

    #[test]
    fn redacting_removes_every_token_however_it_is_written_and_keeps_the_rest() {
        let k = secret(&"a".repeat(32), &[]);
        let c = Claims {
            object: "bk_01M8JWKQ350F0QFSFQQ8Y3X6KK".into(),
            contact: "ct_01M8JWKQ350F0QFSFQQ8Y3X6KM".into(),
            expires: 1_800_000_000,
        };
        let t = sign(&k, "booking", "ws_1", &c).unwrap();
        for (written, redacted) in [
            (format!("See https://x/p/a/booking?token={t}. Thanks"), "See https://x/p/a/booking?token=[redacted]. Thanks".to_string()),
            (format!("/booking/move?token={t}&date=2026-12-01"), "/booking/move?token=[redacted]&date=2026-12-01".into()),
            (format!("%2Fbooking%3Ftoken%3D{t}"), "%2Fbooking%3Ftoken%3D[redacted]".into()),
            (format!("\"url\":\"/booking?token\\u003d{t}\""), "\"url\":\"/booking?token\\u003d[redacted]\"".into()),
            (format!("{t}--{t}"), "[redacted]--[redacted]".into()),
        ] {
            assert_eq!(redact(&written), redacted);
        }
        // Text that only looks like part of one stays.
        for kept in ["bk_1.ct_2.3.x", "a bk_ b", "bk_01M8JWKQ350F0QFSFQQ8Y3X6KK is my booking"] {
            assert_eq!(redact(kept), kept);
        }
        assert!(matches!(redact("no links here"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn a_rotation_keeps_links_until_their_root_is_removed() {
        let (old, new) = ("o".repeat(32), "n".repeat(32));
        let c = Claims { object: "bk_1".into(), contact: "ct_1".into(), expires: 10 };
        let t = sign(&secret(&old, &[]), "booking", "ws_1", &c).unwrap();
        assert_eq!(open(&secret(&new, &[&old]), "booking", "ws_1", &t, 0), Some(c));
        assert_eq!(open(&secret(&new, &[]), "booking", "ws_1", &t, 0), None);
    }
}
