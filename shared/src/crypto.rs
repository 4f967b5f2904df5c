//! Encryption at rest for secrets we must be able to read back (webhook endpoint secrets):
//! AES-256-GCM with the platform secret's derived encryption key, a random 96-bit nonce per
//! value, and the owning object's identity as associated data, so a sealed value copied onto
//! another item does not open.

use crate::error::ApiError;
use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use base64::Engine;
use base64::engine::general_purpose::STANDARD_NO_PAD as B64;

const VERSION: &str = "v1:";

/// Lower-case hex of a digest (hashes in keys, fingerprints).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn key(k: &[u8]) -> LessSafeKey {
    LessSafeKey::new(UnboundKey::new(&AES_256_GCM, k).expect("the derived key is 32 bytes"))
}

/// `v1:` + base64(nonce || ciphertext || tag).
pub fn seal(k: &[u8], aad: &str, plaintext: &[u8]) -> String {
    let nonce: [u8; NONCE_LEN] = rand::random();
    let mut buf = plaintext.to_vec();
    key(k).seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad.as_bytes()), &mut buf).expect("sealing cannot fail");
    let mut out = nonce.to_vec();
    out.extend_from_slice(&buf);
    format!("{VERSION}{}", B64.encode(out))
}

pub fn open(k: &[u8], aad: &str, sealed: &str) -> Result<Vec<u8>, ApiError> {
    let bad = || ApiError::internal("a sealed value does not open (wrong key or tampered)");
    let raw = B64.decode(sealed.strip_prefix(VERSION).ok_or_else(bad)?).map_err(|_| bad())?;
    if raw.len() < NONCE_LEN {
        return Err(bad());
    }
    let (nonce, ct) = raw.split_at(NONCE_LEN);
    let mut buf = ct.to_vec();
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| bad())?;
    let plain = key(k).open_in_place(nonce, Aad::from(aad.as_bytes()), &mut buf).map_err(|_| bad())?;
    Ok(plain.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_binding() {
        let k = [7u8; 32];
        let s = seal(&k, "ws_1/wh_1", b"whsec_abc");
        assert_ne!(s, seal(&k, "ws_1/wh_1", b"whsec_abc"), "fresh nonce per value");
        assert!(!s.contains("whsec"));
        assert_eq!(open(&k, "ws_1/wh_1", &s).unwrap(), b"whsec_abc");
        assert!(open(&k, "ws_2/wh_1", &s).is_err(), "bound to its owner");
        assert!(open(&[8u8; 32], "ws_1/wh_1", &s).is_err(), "needs the key");
        assert!(open(&k, "ws_1/wh_1", "v1:AAAA").is_err());
        assert!(open(&k, "ws_1/wh_1", "garbage").is_err());
    }
}
