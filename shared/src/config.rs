//! Configuration from the environment (Lambda sets it from template.yaml; the dev gateway and
//! tests build it directly). Nothing here does I/O: secrets are loaded lazily by `App`.

use crate::ratelimit::{Class, Limit};
use std::collections::HashMap;

#[derive(Clone, Debug)]
pub struct Config {
    pub table: String,
    pub events_queue_url: String,
    /// Secrets Manager id of the platform secret (cursor and encryption keys).
    pub platform_secret_id: String,
    pub oauth: Option<OAuthConfig>,
    pub limits: HashMap<Class, Limit>,
}

#[derive(Clone, Debug)]
pub struct OAuthConfig {
    pub issuer: String,
    pub audience: String,
    /// The JWKS document (JSON) of the identity provider.
    pub jwks: String,
}

impl Config {
    pub fn from_env() -> Result<Self, String> {
        let var = |k: &str| std::env::var(k).map_err(|_| format!("missing environment variable {k}"));
        let oauth = match (std::env::var("OAUTH_ISSUER"), std::env::var("OAUTH_AUDIENCE")) {
            (Ok(issuer), Ok(audience)) if !issuer.is_empty() => {
                let jwks = match std::env::var("OAUTH_JWKS") {
                    Ok(j) if !j.is_empty() => j,
                    _ => std::fs::read_to_string(var("OAUTH_JWKS_FILE")?).map_err(|e| format!("OAUTH_JWKS_FILE: {e}"))?,
                };
                Some(OAuthConfig { issuer, audience, jwks })
            }
            _ => None,
        };
        let mut limits = Class::defaults();
        for class in Class::ALL {
            let key = format!("RATE_LIMIT_{}", class.name().to_ascii_uppercase());
            if let Ok(v) = std::env::var(&key) {
                limits.insert(class, Limit::parse(&v).map_err(|e| format!("{key}: {e}"))?);
            }
        }
        Ok(Self {
            table: var("TABLE_NAME")?,
            events_queue_url: var("EVENTS_QUEUE_URL")?,
            platform_secret_id: var("PLATFORM_SECRET_ID")?,
            oauth,
            limits,
        })
    }
}
