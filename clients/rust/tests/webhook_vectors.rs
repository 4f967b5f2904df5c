//! The shared webhook signature vectors (the repo's copy, kept identical to the design's by
//! shared/tests/signature_vectors.rs): every vector verifies, every must-reject case fails.

use serde_json::Value;
use workspace_platform_client::webhooks::{self, VerifyError};

fn vectors() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/tests/vectors/webhook-signatures.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("vectors file")).expect("vectors are JSON")
}

fn secrets(v: &Value) -> Vec<&str> {
    match (&v["secret"], &v["secrets"]) {
        (Value::String(s), _) => vec![s.as_str()],
        (_, Value::Array(a)) => a.iter().map(|s| s.as_str().unwrap()).collect(),
        _ => panic!("vector without secret: {v}"),
    }
}

fn check(v: &Value, secret: &str) -> Result<(), VerifyError> {
    let ts = v["timestamp"].as_str().unwrap();
    webhooks::verify_at(secret, ts, v["signature"].as_str().unwrap(), v["body"].as_str().unwrap().as_bytes(), ts.parse().unwrap())
}

#[test]
fn every_vector_verifies_with_each_of_its_secrets() {
    let all = vectors();
    for v in all["vectors"].as_array().unwrap() {
        for secret in secrets(v) {
            assert_eq!(check(v, secret), Ok(()), "{}", v["name"]);
        }
        let single = secrets(v).len() == 1;
        if single {
            let ts: u64 = v["timestamp"].as_str().unwrap().parse().unwrap();
            assert_eq!(webhooks::sign(secrets(v)[0], ts, v["body"].as_str().unwrap().as_bytes()).unwrap(), v["signature"], "{}", v["name"]);
        }
    }
}

#[test]
fn every_must_reject_case_is_rejected() {
    let all = vectors();
    for v in all["must_reject"].as_array().unwrap() {
        for secret in secrets(v) {
            assert!(check(v, secret).is_err(), "{} verified", v["name"]);
        }
    }
}

#[test]
fn old_or_future_timestamps_are_replays() {
    let secret = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    let sig = webhooks::sign(secret, 1_700_000_000, b"{}").unwrap();
    assert_eq!(webhooks::verify_at(secret, "1700000000", &sig, b"{}", 1_700_000_301), Err(VerifyError::Expired));
    assert_eq!(webhooks::verify_at(secret, "1700000000", &sig, b"{}", 1_699_999_699), Err(VerifyError::Expired));
    assert_eq!(webhooks::verify_at(secret, "1700000000", &sig, b"{}", 1_700_000_300), Ok(()));
    assert_eq!(webhooks::verify_at(secret, "soon", &sig, b"{}", 1_700_000_000), Err(VerifyError::Timestamp));
    assert_eq!(webhooks::verify_at("AAEC", "1700000000", &sig, b"{}", 1_700_000_000), Err(VerifyError::Secret));
}
