//! The shared signature vectors: every positive vector must produce the exact header and
//! verify; every must-reject vector must fail verification.

use serde_json::Value;
use shared::signing::{secret_key, signature_header, verify};
use std::path::Path;

fn vectors() -> Value {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The repository's own copy of the vectors: nothing outside it is read.
    let text = std::fs::read_to_string(here.join("tests/vectors/webhook-signatures.json")).expect("vectors file");
    serde_json::from_str(&text).expect("vectors are JSON")
}

fn secrets(v: &Value) -> Vec<String> {
    match (&v["secret"], &v["secrets"]) {
        (Value::String(s), _) => vec![s.clone()],
        (_, Value::Array(a)) => a.iter().map(|s| s.as_str().unwrap().to_string()).collect(),
        _ => panic!("vector without secret: {v}"),
    }
}

#[test]
fn positive_vectors_sign_and_verify() {
    let all = vectors();
    let list = all["vectors"].as_array().unwrap();
    assert!(list.len() >= 3);
    for v in list {
        let name = v["name"].as_str().unwrap();
        let ts = v["timestamp"].as_str().unwrap();
        let body = v["body"].as_str().unwrap().as_bytes();
        let expected = v["signature"].as_str().unwrap();
        let secrets = secrets(v);
        let keys: Vec<Vec<u8>> = secrets.iter().map(|s| secret_key(s).unwrap()).collect();
        assert_eq!(signature_header(&keys, ts, body), expected, "vector {name}");
        let now: i64 = ts.parse().unwrap();
        for s in &secrets {
            assert!(verify(s, expected, ts, body, now, 300).is_ok(), "vector {name} verifies with each secret");
        }
    }
}

#[test]
fn must_reject_vectors_fail() {
    let all = vectors();
    let list = all["must_reject"].as_array().unwrap();
    assert!(!list.is_empty());
    for v in list {
        let name = v["name"].as_str().unwrap();
        let ts = v["timestamp"].as_str().unwrap();
        let body = v["body"].as_str().unwrap().as_bytes();
        let sig = v["signature"].as_str().unwrap();
        let now: i64 = ts.parse().unwrap();
        for s in secrets(v) {
            assert!(verify(&s, sig, ts, body, now, 300).is_err(), "vector {name} must be rejected");
            assert_ne!(signature_header(&[secret_key(&s).unwrap()], ts, body), sig, "vector {name}: we never produce it");
        }
    }
}

/// Standard Webhooks' own example (its specification and the `standardwebhooks` libraries'
/// tests): the same secret form, signing `"{id}.{timestamp}.{body}"`.
#[test]
fn the_standard_webhooks_example_signs_alike() {
    let key = secret_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    let header =
        shared::signing::standard_signature_header(&[key], "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", br#"{"test": 2432232314}"#);
    assert_eq!(header, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
}
