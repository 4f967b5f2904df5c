//! Per-container state: SDK clients built once at cold start, the platform secret loaded on
//! first use and cached for the container's life, and the in-memory parts of the limiter.

use crate::config::Config;
use crate::error::ApiError;
use crate::metrics::{CallLog, DynamoCallCounter};
use crate::oauth::JwtVerifier;
use crate::ratelimit::RateLimiter;
use crate::store::Db;
use tokio::sync::OnceCell;

pub struct App {
    pub cfg: Config,
    pub db: Db,
    pub sqs: Lazy<aws_sdk_sqs::Client>,
    pub secrets: Lazy<aws_sdk_secretsmanager::Client>,
    /// SES v2 for identity management (sending domains); the sender builds its own client
    /// without retries for SendEmail.
    pub ses: Lazy<aws_sdk_sesv2::Client>,
    /// Export documents (and other large objects).
    pub s3: Lazy<aws_sdk_s3::Client>,
    pub limiter: RateLimiter,
    /// API key look-ups this container trusts for `cfg.api_key_cache_secs`.
    pub keys: crate::auth::KeyCache,
    pub jwt: Option<JwtVerifier>,
    platform: OnceCell<PlatformSecret>,
}

/// Key material shared by every function, stored in Secrets Manager as
/// `{"root_key": "<at least 32 random characters>"}` (SAM generates it at deploy time).
/// Purpose-specific keys are derived from it, so rotating one secret rotates them all.
#[derive(Clone)]
pub struct PlatformSecret {
    pub cursor_key: Vec<u8>,
    pub encryption_key: Vec<u8>,
    /// Keys the hash of an erased address (per workspace), so a tombstone names no one.
    pub tombstone_key: Vec<u8>,
}

impl std::fmt::Debug for PlatformSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PlatformSecret(..)")
    }
}

fn derive(root: &[u8], purpose: &str) -> Vec<u8> {
    use hmac::{KeyInit, Mac};
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(root).expect("any key length");
    m.update(purpose.as_bytes());
    m.finalize().into_bytes().to_vec()
}

impl PlatformSecret {
    pub fn parse(json: &str) -> Result<Self, String> {
        let v: serde_json::Value = serde_json::from_str(json).map_err(|e| format!("platform secret is not JSON: {e}"))?;
        let root = v["root_key"].as_str().ok_or("platform secret lacks root_key")?;
        if root.len() < 32 {
            return Err("root_key must be at least 32 characters".into());
        }
        Ok(Self {
            cursor_key: derive(root.as_bytes(), "cursor/v1"),
            encryption_key: derive(root.as_bytes(), "encryption/v1"),
            tombstone_key: derive(root.as_bytes(), "tombstone/v1"),
        })
    }

    /// A fresh secret value for bootstrap: 64 random alphanumerics, like SAM's generator.
    pub fn generate_json() -> String {
        serde_json::json!({"root_key": crate::auth::random_base62(64)}).to_string()
    }
}

/// A client built on first use. Every request needs DynamoDB; most never touch SQS, S3, SES
/// or Secrets Manager, so a cold start does not pay for building them.
pub struct Lazy<T> {
    cell: std::sync::OnceLock<T>,
    build: Box<dyn Fn() -> T + Send + Sync>,
}

impl<T> Lazy<T> {
    pub fn new(build: impl Fn() -> T + Send + Sync + 'static) -> Self {
        Self { cell: std::sync::OnceLock::new(), build: Box::new(build) }
    }
}

/// A client built already (tests swap one for a client of another endpoint).
impl<T> From<T> for Lazy<T> {
    fn from(value: T) -> Self {
        Self { cell: std::sync::OnceLock::from(value), build: Box::new(|| unreachable!("a ready client is never built")) }
    }
}

impl<T> std::ops::Deref for Lazy<T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.cell.get_or_init(|| (self.build)())
    }
}

impl App {
    pub fn new(cfg: Config, sdk: &aws_config::SdkConfig) -> Result<Self, String> {
        Self::with_dynamodb_endpoint(cfg, sdk, None)
    }

    /// Locally DynamoDB (DynamoDB Local) and the other services (moto) live at different endpoints.
    pub fn with_dynamodb_endpoint(cfg: Config, sdk: &aws_config::SdkConfig, ddb_endpoint: Option<&str>) -> Result<Self, String> {
        // Every client gets the same bounded timeouts: a hung dependency answers 503, not a
        // request that waits for API Gateway's 29 s.
        let sdk = &sdk.to_builder().timeout_config(cfg.timeouts.sdk()).build();
        let mut ddb_conf = aws_sdk_dynamodb::config::Builder::from(sdk).interceptor(DynamoCallCounter).interceptor(CallLog);
        if let Some(ep) = ddb_endpoint {
            ddb_conf = ddb_conf.endpoint_url(ep);
        }
        let ddb_conf = ddb_conf.build();
        let dependency = std::time::Duration::from_millis(cfg.timeouts.dependency_ms);
        let jwt = cfg.oauth.as_ref().map(|o| JwtVerifier::new(o, cfg.webhooks.url_policy, dependency)).transpose()?;
        Ok(Self {
            db: Db { client: aws_sdk_dynamodb::Client::from_conf(ddb_conf), table: cfg.table.clone() },
            sqs: {
                let sdk = sdk.clone();
                Lazy::new(move || aws_sdk_sqs::Client::from_conf(aws_sdk_sqs::config::Builder::from(&sdk).interceptor(CallLog).build()))
            },
            secrets: {
                let sdk = sdk.clone();
                Lazy::new(move || {
                    aws_sdk_secretsmanager::Client::from_conf(
                        aws_sdk_secretsmanager::config::Builder::from(&sdk).interceptor(CallLog).build(),
                    )
                })
            },
            ses: {
                let sdk = sdk.clone();
                Lazy::new(move || aws_sdk_sesv2::Client::from_conf(aws_sdk_sesv2::config::Builder::from(&sdk).interceptor(CallLog).build()))
            },
            // A custom endpoint (moto) serves buckets by path, not by host name.
            s3: {
                let sdk = sdk.clone();
                Lazy::new(move || {
                    aws_sdk_s3::Client::from_conf(
                        aws_sdk_s3::config::Builder::from(&sdk).force_path_style(sdk.endpoint_url().is_some()).interceptor(CallLog).build(),
                    )
                })
            },
            limiter: RateLimiter::new(cfg.limits.clone()),
            keys: crate::auth::KeyCache::new(std::time::Duration::from_secs(cfg.api_key_cache_secs)),
            jwt,
            platform: OnceCell::new(),
            cfg,
        })
    }

    /// Build from the Lambda environment; the SDK honours AWS_ENDPOINT_URL(_DYNAMODB) itself.
    pub async fn from_env() -> Result<Self, String> {
        let cfg = Config::from_env()?;
        let sdk = aws_config::load_from_env().await;
        Self::new(cfg, &sdk)
    }

    pub async fn platform_secret(&self) -> Result<&PlatformSecret, ApiError> {
        // Cached per container, but every function that reads it needs the permission.
        crate::metrics::record_action("secretsmanager:GetSecretValue");
        self.platform
            .get_or_try_init(|| async {
                let out = self.secrets.get_secret_value().secret_id(&self.cfg.platform_secret_id).send().await.map_err(|e| {
                    ApiError::unavailable(format!("secrets manager: {}", aws_sdk_secretsmanager::error::DisplayErrorContext(e)))
                })?;
                let s = out.secret_string().ok_or_else(|| ApiError::internal("platform secret has no string value"))?;
                PlatformSecret::parse(s).map_err(ApiError::internal)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_secret_parses_and_debug_hides_it() {
        let s = PlatformSecret::parse(&PlatformSecret::generate_json()).unwrap();
        assert_eq!(s.cursor_key.len(), 32);
        assert_eq!(format!("{s:?}"), "PlatformSecret(..)");
        assert_ne!(s.cursor_key, s.encryption_key, "one key per purpose");
        assert!(PlatformSecret::parse(r#"{"root_key":"short"}"#).is_err());
        assert!(PlatformSecret::parse(r#"{"cursor_key":"x"}"#).is_err());
    }
}
