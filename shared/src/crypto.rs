//! The process's one crypto backend, ring: rustls (the SDK's HTTPS, webhook deliveries, OAuth
//! keys) and JWT signatures use it through [`install`], and secrets at rest are sealed with it.
//! One backend because each is linked whole into every function: aws-lc, the default of rustls
//! and jsonwebtoken, was 0.8 MB of each binary.
//!
//! Encryption at rest for secrets we must be able to read back (webhook endpoint secrets):
//! AES-256-GCM with the platform secret's derived encryption key, a random 96-bit nonce per
//! value, and the owning object's identity as associated data, so a sealed value copied onto
//! another item does not open.

use base64::Engine;
use base64::engine::general_purpose::STANDARD_NO_PAD as B64;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};

/// Make ring the provider of rustls and of jsonwebtoken for this process. Called before a TLS
/// client is built and before a JWT is checked or signed; later calls do nothing.
pub fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // An Err means a provider is installed already (a test process may have done so).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let _ = jwt::PROVIDER.install_default();
    });
}

/// RS256 and ES256, the only algorithms `oauth` accepts, on ring; the admin CLI signs ES256.
mod jwt {
    use jsonwebtoken::crypto::{CryptoProvider, JwtSigner, JwtVerifier, KeyUtils};
    use jsonwebtoken::errors::{ErrorKind, Result};
    use jsonwebtoken::signature;
    use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, DecodingKeyKind, EncodingKey};
    use ring::signature::{
        self as sig, ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, RSA_PKCS1_2048_8192_SHA256,
    };

    pub static PROVIDER: CryptoProvider =
        CryptoProvider { signer_factory: signer, verifier_factory: verifier, key_utils: KeyUtils::new_unimplemented() };

    struct Verifier(Algorithm, DecodingKey);

    fn verifier(alg: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>> {
        let family = match alg {
            Algorithm::RS256 => AlgorithmFamily::Rsa,
            Algorithm::ES256 => AlgorithmFamily::Ec,
            _ => return Err(ErrorKind::InvalidAlgorithm.into()),
        };
        if key.family() != family {
            return Err(ErrorKind::InvalidKeyFormat.into());
        }
        Ok(Box::new(Verifier(*alg, key.clone())))
    }

    impl signature::Verifier<Vec<u8>> for Verifier {
        fn verify(&self, msg: &[u8], signature: &Vec<u8>) -> std::result::Result<(), signature::Error> {
            let checked = match (self.0, self.1.kind()) {
                (Algorithm::RS256, DecodingKeyKind::RsaModulusExponent { n, e }) => {
                    sig::RsaPublicKeyComponents { n, e }.verify(&RSA_PKCS1_2048_8192_SHA256, msg, signature)
                }
                (Algorithm::RS256, DecodingKeyKind::SecretOrDer(der)) => {
                    sig::UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, der).verify(msg, signature)
                }
                (Algorithm::ES256, DecodingKeyKind::SecretOrDer(point)) => {
                    sig::UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point).verify(msg, signature)
                }
                _ => Err(ring::error::Unspecified),
            };
            checked.map_err(|_| signature::Error::new())
        }
    }

    impl JwtVerifier for Verifier {
        fn algorithm(&self) -> Algorithm {
            self.0
        }
    }

    struct Es256Signer(EcdsaKeyPair);

    fn signer(alg: &Algorithm, key: &EncodingKey) -> Result<Box<dyn JwtSigner>> {
        if *alg != Algorithm::ES256 {
            return Err(ErrorKind::InvalidAlgorithm.into());
        }
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, key.as_bytes(), &ring::rand::SystemRandom::new())
            .map_err(|_| ErrorKind::InvalidEcdsaKey)?;
        Ok(Box::new(Es256Signer(pair)))
    }

    impl signature::Signer<Vec<u8>> for Es256Signer {
        fn try_sign(&self, msg: &[u8]) -> std::result::Result<Vec<u8>, signature::Error> {
            let signed = self.0.sign(&ring::rand::SystemRandom::new(), msg).map_err(|_| signature::Error::new())?;
            Ok(signed.as_ref().to_vec())
        }
    }

    impl JwtSigner for Es256Signer {
        fn algorithm(&self) -> Algorithm {
            Algorithm::ES256
        }
    }
}

const VERSION: &str = "v1:";

/// HMAC-SHA256 of `message` under `key`: the platform's derived keys, its tokens (form tokens,
/// reply addresses, unsubscribe links) and keyed hashes (tombstones, rate-limit buckets).
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    use hmac::{KeyInit, Mac};
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(message);
    m.finalize().into_bytes().into()
}

/// Whether `tag` is the start (at least 16 bytes) of HMAC-SHA256 of `message` under `key`,
/// compared in constant time.
pub fn hmac_sha256_verify_prefix(key: &[u8], message: &[u8], tag: &[u8]) -> bool {
    use hmac::{KeyInit, Mac};
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(message);
    tag.len() >= 16 && m.verify_truncated_left(tag).is_ok()
}

/// Lower-case hex of a digest (hashes in keys, fingerprints).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Lower-case hex SHA-256 (a stored token's or key's hash, a body's fingerprint).
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(bytes))
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

/// The plaintext, or None when the value does not open (wrong key or tampered). Crypto is below
/// `error`'s users, so the caller says what a failure means.
pub fn open(k: &[u8], aad: &str, sealed: &str) -> Option<Vec<u8>> {
    let raw = B64.decode(sealed.strip_prefix(VERSION)?).ok()?;
    if raw.len() < NONCE_LEN {
        return None;
    }
    let (nonce, ct) = raw.split_at(NONCE_LEN);
    let mut buf = ct.to_vec();
    let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
    let plain = key(k).open_in_place(nonce, Aad::from(aad.as_bytes()), &mut buf).ok()?;
    Some(plain.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231_and_checks_prefixes() {
        // RFC 4231, test case 2.
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(hex(&mac), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        assert!(hmac_sha256_verify_prefix(b"Jefe", b"what do ya want for nothing?", &mac[..16]));
        assert!(!hmac_sha256_verify_prefix(b"Jefe", b"what do ya want for nothing!", &mac[..16]));
        assert!(!hmac_sha256_verify_prefix(b"Jefe", b"what do ya want for nothing?", &mac[..15]), "at least 128 bits");
    }

    #[test]
    fn round_trip_and_binding() {
        let k = [7u8; 32];
        let s = seal(&k, "ws_1/wh_1", b"whsec_abc");
        assert_ne!(s, seal(&k, "ws_1/wh_1", b"whsec_abc"), "fresh nonce per value");
        assert!(!s.contains("whsec"));
        assert_eq!(open(&k, "ws_1/wh_1", &s).unwrap(), b"whsec_abc");
        assert!(open(&k, "ws_2/wh_1", &s).is_none(), "bound to its owner");
        assert!(open(&[8u8; 32], "ws_1/wh_1", &s).is_none(), "needs the key");
        assert!(open(&k, "ws_1/wh_1", "v1:AAAA").is_none());
        assert!(open(&k, "ws_1/wh_1", "garbage").is_none());
    }
}
