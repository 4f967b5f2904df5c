//! Verifying the deliveries an endpoint receives.
//!
//! Each delivery is signed over `{X-Service-Timestamp}.{raw body}` with HMAC-SHA256, keyed
//! by the endpoint secret decoded from base64 after its `whsec_` prefix. While a secret
//! rotates, `X-Service-Signature` holds one `v1,<base64>` entry per valid secret, newest
//! first; any entry that matches passes.

use base64::Engine;
use hmac::{KeyInit, Mac};
use subtle::ConstantTimeEq;

/// How far a delivery's timestamp may be from now: older ones are replays.
pub const TOLERANCE_SECS: u64 = 300;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyError {
    /// The secret is not `whsec_` followed by base64.
    Secret,
    /// `X-Service-Timestamp` is missing or not unix seconds.
    Timestamp,
    /// The timestamp is more than [`TOLERANCE_SECS`] from now.
    Expired,
    /// No entry of `X-Service-Signature` matches.
    Signature,
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            VerifyError::Secret => "the webhook secret is not whsec_<base64>",
            VerifyError::Timestamp => "X-Service-Timestamp is missing or not unix seconds",
            VerifyError::Expired => "X-Service-Timestamp is too far from now",
            VerifyError::Signature => "no X-Service-Signature entry matches",
        })
    }
}

impl std::error::Error for VerifyError {}

/// Checks a delivery now: `timestamp` and `signature` are the `X-Service-Timestamp` and
/// `X-Service-Signature` headers, `raw_body` the body exactly as received (never re-serialised).
///
/// ```
/// let secret = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
/// let body = br#"{"id":"evt_1"}"#;
/// let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
/// let signature = workspace_platform_client::webhooks::sign(secret, now, body).unwrap();
/// assert!(workspace_platform_client::webhooks::verify(secret, &now.to_string(), &signature, body).is_ok());
/// ```
pub fn verify(secret: &str, timestamp: &str, signature: &str, raw_body: &[u8]) -> Result<(), VerifyError> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    verify_at(secret, timestamp, signature, raw_body, now)
}

/// [`verify`] as of `now` (unix seconds).
pub fn verify_at(secret: &str, timestamp: &str, signature: &str, raw_body: &[u8], now: u64) -> Result<(), VerifyError> {
    let key = key(secret)?;
    let ts: u64 = timestamp.trim().parse().map_err(|_| VerifyError::Timestamp)?;
    if ts.abs_diff(now) > TOLERANCE_SECS {
        return Err(VerifyError::Expired);
    }
    let expected = mac(&key, timestamp.trim(), raw_body);
    let matched = signature
        .split(' ')
        .filter_map(|entry| entry.strip_prefix("v1,"))
        .filter_map(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
        .any(|given| bool::from(given.ct_eq(&expected)));
    if matched { Ok(()) } else { Err(VerifyError::Signature) }
}

/// The `X-Service-Signature` value the service would send (one secret): for tests of a receiver.
pub fn sign(secret: &str, timestamp: u64, raw_body: &[u8]) -> Result<String, VerifyError> {
    let key = key(secret)?;
    Ok(format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac(&key, &timestamp.to_string(), raw_body))))
}

fn key(secret: &str) -> Result<Vec<u8>, VerifyError> {
    let b64 = secret.strip_prefix("whsec_").ok_or(VerifyError::Secret)?;
    base64::engine::general_purpose::STANDARD.decode(b64).map_err(|_| VerifyError::Secret)
}

fn mac(key: &[u8], timestamp: &str, body: &[u8]) -> Vec<u8> {
    let mut m = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(timestamp.as_bytes());
    m.update(b".");
    m.update(body);
    m.finalize().into_bytes().to_vec()
}
