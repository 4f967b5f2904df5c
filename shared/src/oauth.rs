//! OAuth access tokens: RS256/ES256 JWTs checked for signature, issuer, audience, `exp` and
//! `nbf`, against the identity provider's keys.
//!
//! The keys come from the provider's `jwks_uri` (`OAUTH_JWKS_URI`, or discovered from the
//! issuer's `/.well-known/openid-configuration`), fetched on first use through the SSRF-safe
//! client and kept for the container's life. A token naming an unknown `kid` triggers one
//! refresh (the provider rotated its keys), at most once per `OAUTH_JWKS_MIN_REFRESH_SECS`,
//! so tokens with made-up kids cannot make the platform hammer the provider. A fixed
//! document (`OAUTH_JWKS` / `OAUTH_JWKS_FILE`) is never fetched.

use crate::config::{JwksSource, OAuthConfig};
use crate::outbound::{self, UrlPolicy};
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

#[derive(Debug, Deserialize, Serialize)]
pub struct Claims {
    pub sub: String,
    #[serde(default)]
    pub scope: Option<String>,
    /// The client the token was issued to (RFC 9068); some providers say `azp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azp: Option<String>,
    /// When the person last signed in (epoch seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_time: Option<i64>,
}

/// Why a token was not accepted.
#[derive(Debug, PartialEq)]
pub enum Rejected {
    /// The token itself: 401 with this reason.
    Invalid(String),
    /// The provider's keys could not be fetched and none are cached: 503.
    KeysUnavailable(String),
}

type Key = (Option<String>, Algorithm, DecodingKey);

pub struct JwtVerifier {
    issuer: String,
    audience: String,
    source: JwksSource,
    min_refresh: Duration,
    keys: RwLock<Arc<Vec<Key>>>,
    /// When keys were last fetched (or tried); one fetch at a time.
    last_fetch: tokio::sync::Mutex<Option<Instant>>,
    /// How keys are fetched (None for a fixed document). The client is built on the first
    /// fetch, not at cold start: its TLS roots cost milliseconds most containers never need.
    http: Option<(UrlPolicy, Duration)>,
    client: std::sync::OnceLock<outbound::Client>,
}

/// The RS256 and ES256 keys of a JWK set; other keys in the set are ignored.
pub fn parse_jwks(json: &str) -> Result<Vec<Key>, String> {
    let set: JwkSet = serde_json::from_str(json).map_err(|e| format!("not a JWK set: {e}"))?;
    let mut keys = Vec::new();
    for jwk in &set.keys {
        let alg = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => Algorithm::RS256,
            AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => Algorithm::ES256,
            _ => continue,
        };
        let key = DecodingKey::from_jwk(jwk).map_err(|e| format!("bad JWK: {e}"))?;
        keys.push((jwk.common.key_id.clone(), alg, key));
    }
    if keys.is_empty() {
        return Err("the JWK set has no RS256 or ES256 key".into());
    }
    Ok(keys)
}

impl JwtVerifier {
    /// `policy` and `timeout` apply to fetching the keys (a fixed document needs neither).
    pub fn new(cfg: &OAuthConfig, policy: UrlPolicy, timeout: Duration) -> Result<Self, String> {
        let (keys, http) = match &cfg.jwks {
            JwksSource::Document(doc) => (parse_jwks(doc).map_err(|e| format!("OAuth JWKS: {e}"))?, None),
            _ => (vec![], Some((policy, timeout))),
        };
        Ok(Self {
            issuer: cfg.issuer.clone(),
            audience: cfg.audience.clone(),
            source: cfg.jwks.clone(),
            min_refresh: Duration::from_secs(cfg.min_refresh_secs),
            keys: RwLock::new(Arc::new(keys)),
            last_fetch: tokio::sync::Mutex::new(None),
            http,
            client: std::sync::OnceLock::new(),
        })
    }

    fn cached(&self) -> Arc<Vec<Key>> {
        self.keys.read().map(|k| k.clone()).unwrap_or_default()
    }

    pub async fn verify(&self, token: &str) -> Result<Claims, Rejected> {
        crate::crypto::install();
        let invalid = |why: &str| Rejected::Invalid(why.to_string());
        let header = jsonwebtoken::decode_header(token).map_err(|_| invalid("malformed token"))?;
        if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256) {
            return Err(invalid("algorithm not allowed"));
        }
        let find = |keys: &[Key]| {
            keys.iter().find(|(kid, alg, _)| *alg == header.alg && (header.kid.is_none() || *kid == header.kid)).map(|(_, _, k)| k.clone())
        };
        let mut keys = self.cached();
        if keys.is_empty() || find(&keys).is_none() {
            keys = self.refresh().await?;
        }
        let key = find(&keys).ok_or_else(|| invalid("no matching key"))?;
        let mut v = Validation::new(header.alg);
        v.set_issuer(&[&self.issuer]);
        v.set_audience(&[&self.audience]);
        v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        v.validate_nbf = true;
        v.leeway = 30;
        jsonwebtoken::decode::<Claims>(token, &key, &v).map(|d| d.claims).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind as K;
            invalid(match e.kind() {
                K::ExpiredSignature => "expired",
                K::ImmatureSignature => "not valid yet (nbf)",
                K::InvalidIssuer => "wrong issuer",
                K::InvalidAudience => "wrong audience",
                K::InvalidSignature => "bad signature",
                _ => "invalid token",
            })
        })
    }

    /// Fetch the keys again unless that happened less than `min_refresh` ago; concurrent
    /// callers wait for the one fetch. Answers the keys to use (the old ones if it failed).
    async fn refresh(&self) -> Result<Arc<Vec<Key>>, Rejected> {
        let Some((policy, timeout)) = self.http else { return Ok(self.cached()) };
        let mut last = self.last_fetch.lock().await;
        if last.is_some_and(|t| t.elapsed() < self.min_refresh) {
            let keys = self.cached();
            return if keys.is_empty() {
                Err(Rejected::KeysUnavailable("the identity provider's keys are unavailable".into()))
            } else {
                Ok(keys)
            };
        }
        *last = Some(Instant::now());
        let http = match self.client.get() {
            Some(c) => Ok(c),
            None => outbound::Client::new(policy, timeout, concat!("WorkspacePlatform/", env!("CARGO_PKG_VERSION")))
                .map(|c| self.client.get_or_init(|| c)),
        };
        match async { self.fetch(http?).await }.await {
            Ok(keys) => {
                let keys = Arc::new(keys);
                if let Ok(mut w) = self.keys.write() {
                    *w = keys.clone();
                }
                tracing::info!(keys = keys.len(), "fetched the identity provider's keys");
                Ok(keys)
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not fetch the identity provider's keys");
                let keys = self.cached();
                if keys.is_empty() { Err(Rejected::KeysUnavailable(e)) } else { Ok(keys) }
            }
        }
    }

    async fn fetch(&self, http: &outbound::Client) -> Result<Vec<Key>, String> {
        let uri = match &self.source {
            JwksSource::Uri(u) => u.clone(),
            JwksSource::Discover => {
                let url = format!("{}/.well-known/openid-configuration", self.issuer.trim_end_matches('/'));
                let doc: serde_json::Value = get_json(http, &url).await?;
                doc["jwks_uri"].as_str().ok_or("the issuer's openid-configuration has no jwks_uri")?.to_string()
            }
            JwksSource::Document(_) => return Err("a fixed JWKS is not fetched".into()),
        };
        let set: serde_json::Value = get_json(http, &uri).await?;
        parse_jwks(&set.to_string())
    }
}

/// Documents larger than this are not key sets.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

async fn get_json(http: &outbound::Client, url: &str) -> Result<serde_json::Value, String> {
    let req = http.request(reqwest::Method::GET, url).map_err(|e| format!("{url}: {e}"))?;
    let mut resp = req.send().await.map_err(|e| format!("{url}: {}", outbound::error_kind(&e)))?;
    if !resp.status().is_success() {
        return Err(format!("{url}: HTTP {}", resp.status().as_u16()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| format!("{url}: {}", outbound::error_kind(&e)))? {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_DOCUMENT_BYTES {
            return Err(format!("{url}: larger than {MAX_DOCUMENT_BYTES} bytes"));
        }
    }
    serde_json::from_slice(&body).map_err(|e| format!("{url}: not JSON ({e})"))
}
