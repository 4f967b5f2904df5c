//! Webhook signatures, as receivers verify them (see docs/api.md, Webhooks):
//! `X-Service-Signature: v1,<base64(HMAC-SHA256(key, "{timestamp}.{rawBody}"))>`, where key is
//! the base64-decoded endpoint secret after `whsec_`. While a secret rotates the header holds
//! one entry per valid secret, newest first, separated by one space.
//!
//! The server signs with [`signature_header`]; receivers written in Rust can use [`verify`].
//!
//! Every delivery is also signed as Standard Webhooks (standardwebhooks.com) specifies, so its
//! verifier libraries (`standardwebhooks`, `svix`) work unchanged with the same `whsec_`
//! secret: `webhook-id`, `webhook-timestamp` and `webhook-signature`, whose entries sign
//! `"{id}.{timestamp}.{rawBody}"` ([`standard_signature_header`]).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use hmac::{KeyInit, Mac};

pub const SECRET_PREFIX: &str = "whsec_";
pub const SIGNATURE_HEADER: &str = "X-Service-Signature";
pub const TIMESTAMP_HEADER: &str = "X-Service-Timestamp";
/// Standard Webhooks' headers: the message id (the event's, the same on every attempt), the
/// attempt's unix seconds, and the signatures.
pub const STANDARD_ID_HEADER: &str = "webhook-id";
pub const STANDARD_TIMESTAMP_HEADER: &str = "webhook-timestamp";
pub const STANDARD_SIGNATURE_HEADER: &str = "webhook-signature";
/// Receivers reject timestamps further than this from their clock.
pub const DEFAULT_TOLERANCE_SECS: i64 = 300;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// The key bytes of a `whsec_...` secret.
pub fn secret_key(secret: &str) -> Result<Vec<u8>, VerifyError> {
    let b64 = secret.strip_prefix(SECRET_PREFIX).ok_or(VerifyError::BadSecret)?;
    let key = B64.decode(b64).map_err(|_| VerifyError::BadSecret)?;
    if key.is_empty() {
        return Err(VerifyError::BadSecret);
    }
    Ok(key)
}

/// A new endpoint secret: `whsec_` + base64 of 32 random bytes.
pub fn generate_secret() -> String {
    let bytes: [u8; 32] = rand::random();
    format!("{SECRET_PREFIX}{}", B64.encode(bytes))
}

fn mac(key: &[u8], timestamp: &str, body: &[u8]) -> HmacSha256 {
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    m.update(timestamp.as_bytes());
    m.update(b".");
    m.update(body);
    m
}

/// One `v1,<base64>` entry.
pub fn sign(key: &[u8], timestamp: &str, body: &[u8]) -> String {
    format!("v1,{}", B64.encode(mac(key, timestamp, body).finalize().into_bytes()))
}

/// The header value for every valid key, newest first.
pub fn signature_header<K: AsRef<[u8]>>(keys: &[K], timestamp: &str, body: &[u8]) -> String {
    keys.iter().map(|k| sign(k.as_ref(), timestamp, body)).collect::<Vec<_>>().join(" ")
}

/// `webhook-signature`: one `v1,<base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}"))>` entry
/// per valid key, newest first, separated by a space (as the standard allows during a rotation).
pub fn standard_signature_header<K: AsRef<[u8]>>(keys: &[K], id: &str, timestamp: &str, body: &[u8]) -> String {
    signature_header(keys, &format!("{id}.{timestamp}"), body)
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum VerifyError {
    BadSecret,
    BadTimestamp,
    /// The timestamp is further than the tolerance from the receiver's clock (replay).
    StaleTimestamp,
    NoMatch,
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::BadSecret => "the secret is not a whsec_ base64 secret",
            Self::BadTimestamp => "the timestamp is not unix seconds",
            Self::StaleTimestamp => "the timestamp is outside the tolerance",
            Self::NoMatch => "no signature matches",
        })
    }
}

impl std::error::Error for VerifyError {}

/// Verify a delivery as a receiver: `secret` is the endpoint's `whsec_...` secret, the other
/// arguments are the two headers and the raw body bytes exactly as received. `now` is unix
/// seconds. Any entry of the header may match (rotation); comparison is constant time.
pub fn verify(
    secret: &str,
    signature_header: &str,
    timestamp: &str,
    body: &[u8],
    now: i64,
    tolerance_secs: i64,
) -> Result<(), VerifyError> {
    let key = secret_key(secret)?;
    let ts: i64 = timestamp.parse().map_err(|_| VerifyError::BadTimestamp)?;
    // abs_diff: a hostile timestamp (i64::MIN) cannot overflow the subtraction.
    if now.abs_diff(ts) > tolerance_secs.unsigned_abs() {
        return Err(VerifyError::StaleTimestamp);
    }
    let matched = signature_header.split(' ').filter_map(|e| e.strip_prefix("v1,")).filter_map(|b| B64.decode(b).ok()).any(|sig| {
        // verify_slice compares in constant time.
        mac(&key, timestamp, body).verify_slice(&sig).is_ok()
    });
    if matched { Ok(()) } else { Err(VerifyError::NoMatch) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_secrets_are_32_bytes_and_distinct() {
        let a = generate_secret();
        assert_eq!(secret_key(&a).unwrap().len(), 32);
        assert_ne!(a, generate_secret());
        assert_eq!(secret_key("whsec_!!"), Err(VerifyError::BadSecret));
        assert_eq!(secret_key("AAEC"), Err(VerifyError::BadSecret));
    }

    #[test]
    fn verify_checks_time_and_any_entry() {
        let (old, new) = (generate_secret(), generate_secret());
        let keys = [secret_key(&new).unwrap(), secret_key(&old).unwrap()];
        let h = signature_header(&keys, "1000", b"{}");
        assert!(verify(&old, &h, "1000", b"{}", 1000, 300).is_ok());
        assert!(verify(&new, &h, "1000", b"{}", 1299, 300).is_ok());
        assert_eq!(verify(&new, &h, "1000", b"{}", 1301, 300), Err(VerifyError::StaleTimestamp));
        assert_eq!(verify(&new, &h, "1000", b"{ }", 1000, 300), Err(VerifyError::NoMatch));
        assert_eq!(verify(&generate_secret(), &h, "1000", b"{}", 1000, 300), Err(VerifyError::NoMatch));
        assert_eq!(verify(&new, &h, "soon", b"{}", 1000, 300), Err(VerifyError::BadTimestamp));
        for hostile in [i64::MIN, i64::MAX] {
            let t = hostile.to_string();
            assert_eq!(verify(&new, &h, &t, b"{}", 1000, 300), Err(VerifyError::StaleTimestamp));
            assert_eq!(verify(&new, &h, "1000", b"{}", hostile, 300), Err(VerifyError::StaleTimestamp));
        }
    }
}
