//! Per-container state: the DynamoDB client built at cold start, the other SDK clients and
//! the platform secret on first use, kept for the container's life, and the in-memory parts
//! of the limiter.

use crate::config::Config;
use crate::error::ApiError;
use crate::metrics::{CallLog, DynamoCallCounter};
use crate::oauth::JwtVerifier;
use crate::ratelimit::RateLimiter;
use crate::store::Db;
use std::time::Instant;
use tokio::sync::OnceCell;

pub struct App {
    pub cfg: Config,
    pub db: Db,
    /// The configuration the DynamoDB client was built from, for a function that builds an
    /// SDK client of its own (the email sender's SES).
    sdk: aws_config::SdkConfig,
    /// The other services' SDK clients (`sqs()`, `s3()`, `ses()`), each built on first use.
    aws: crate::aws::Aws,
    pub limiter: RateLimiter,
    /// API key look-ups this container trusts for `cfg.api_key_cache_secs`.
    pub keys: crate::auth::KeyCache,
    pub jwt: Option<JwtVerifier>,
    /// The approval pages' sign-in at the same provider (`crate::oidc`), when configured.
    pub pages_sign_in: Option<crate::oidc::Provider>,
    platform: OnceCell<PlatformSecret>,
    /// When reading the platform secret last failed: the requests queued behind that read
    /// answer 503 at once instead of each trying again in turn (each up to the budget).
    platform_failed: std::sync::Mutex<Option<Instant>>,
}

/// Key material shared by every function, stored in Secrets Manager as
/// `{"root_key": "<at least 32 random characters>", "retired_root_keys": ["<older>", ...]}`
/// (SAM generates the first `root_key` at deploy time). Purpose-specific keys are derived from
/// the roots. Rotation needs no migration (docs/deploy.md): put a new `root_key` and move the old
/// one to the front of `retired_root_keys`; new values are sealed with the new root, and values
/// sealed under any retired root still open (AES-GCM's tag tells which key fits). Cursors are
/// signed with the current root only (a page link from before a rotation is refused once).
/// Tombstones are keyed by the oldest root, the last of `retired_root_keys` (or `root_key`
/// while there is none), so an erased address stays findable across rotations: never remove it.
#[derive(Clone)]
pub struct PlatformSecret {
    pub cursor_key: Vec<u8>,
    encryption_key: Vec<u8>,
    /// The retired roots' encryption keys, newest first: they open, never seal.
    retired_encryption_keys: Vec<Vec<u8>>,
    /// Keys the hash of an erased address (per workspace), so a tombstone names no one.
    pub tombstone_key: Vec<u8>,
    /// Keys the helpdesk's reply-address tokens (stored as look-ups, so a rotation only changes
    /// the tokens of replies sent after it).
    pub reply_token_key: Vec<u8>,
    /// Keys the portal pages' form tokens (`shared::web`), bound to the browser's cookies.
    pub csrf_key: Vec<u8>,
    /// Keys the one-click unsubscribe links in sent mail. From the oldest root, as the
    /// tombstones are: a link in a message sent years ago still works after a rotation.
    pub unsubscribe_key: Vec<u8>,
    /// Keys the links that carry a customer's authority (`crate::links`): the current root's
    /// first, then the retired and pending roots', which open links and never make them.
    link_keys: Vec<Vec<u8>>,
}

impl std::fmt::Debug for PlatformSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PlatformSecret(..)")
    }
}

fn derive(root: &[u8], purpose: &str) -> Vec<u8> {
    crate::crypto::hmac_sha256(root, purpose.as_bytes()).to_vec()
}

impl PlatformSecret {
    pub fn parse(json: &str) -> Result<Self, String> {
        let v: serde_json::Value = serde_json::from_str(json).map_err(|e| format!("platform secret is not JSON: {e}"))?;
        let root = v["root_key"].as_str().ok_or("platform secret lacks root_key")?;
        let list = |name: &str| -> Result<Vec<&str>, String> {
            match &v[name] {
                serde_json::Value::Null => Ok(vec![]),
                serde_json::Value::Array(keys) => keys.iter().map(|k| k.as_str().ok_or(format!("{name} holds strings only"))).collect(),
                _ => Err(format!("{name} must be a list of strings")),
            }
        };
        let retired = list("retired_root_keys")?;
        // A rotation's first phase: every container learns to open under the next root before
        // any seals with it (docs/deploy.md).
        let pending = list("pending_root_keys")?;
        if std::iter::once(&root).chain(&retired).chain(&pending).any(|r| r.len() < 32) {
            return Err("every root key must be at least 32 characters".into());
        }
        let oldest = retired.last().copied().unwrap_or(root);
        Ok(Self {
            cursor_key: derive(root.as_bytes(), "cursor/v1"),
            encryption_key: derive(root.as_bytes(), "encryption/v1"),
            retired_encryption_keys: retired.iter().chain(&pending).map(|r| derive(r.as_bytes(), "encryption/v1")).collect(),
            tombstone_key: derive(oldest.as_bytes(), "tombstone/v1"),
            reply_token_key: derive(root.as_bytes(), "helpdesk-reply/v1"),
            csrf_key: derive(root.as_bytes(), "portal-csrf/v1"),
            unsubscribe_key: derive(oldest.as_bytes(), "unsubscribe/v1"),
            link_keys: std::iter::once(&root).chain(&retired).chain(&pending).map(|r| derive(r.as_bytes(), "link/v1")).collect(),
        })
    }

    /// The key new links are made under (`crate::links`).
    pub fn link_key(&self) -> &[u8] {
        &self.link_keys[0]
    }

    /// The keys a link is accepted under, current first.
    pub fn link_keys(&self) -> impl Iterator<Item = &[u8]> {
        self.link_keys.iter().map(Vec::as_slice)
    }

    /// Seal `plaintext` under the current root, bound to `aad` (what it belongs to).
    pub fn seal(&self, aad: &str, plaintext: &[u8]) -> String {
        crate::crypto::seal(&self.encryption_key, aad, plaintext)
    }

    /// Open a value sealed under the current root or any retired one.
    pub fn open(&self, aad: &str, sealed: &str) -> Result<Vec<u8>, ApiError> {
        std::iter::once(&self.encryption_key)
            .chain(&self.retired_encryption_keys)
            .find_map(|k| crate::crypto::open(k, aad, sealed))
            .ok_or_else(|| ApiError::internal("a sealed value does not open (wrong key or tampered)"))
    }

    /// A fresh secret value for bootstrap: 64 random alphanumerics, like SAM's generator.
    pub fn generate_json() -> String {
        serde_json::json!({"root_key": crate::auth::random_base62(64)}).to_string()
    }
}

/// The SDK configuration of a function: region and credentials from the variables the Lambda
/// runtime sets. Unlike aws-config's default chain, nothing here reads profile files or asks
/// IMDS or STS, so a cold start does no I/O and those providers are not linked in.
/// `AWS_ENDPOINT_URL` points every client at a local emulator (`make watch`, the cold-start
/// bench); `App::from_env` honours `AWS_ENDPOINT_URL_DYNAMODB` too.
pub fn sdk_from_env() -> aws_config::SdkConfig {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let credentials = aws_config::environment::EnvironmentVariableCredentialsProvider::new();
    let mut sdk = aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(var("AWS_REGION").or_else(|| var("AWS_DEFAULT_REGION")).map(aws_config::Region::new))
        .http_client(crate::sdk_http::client())
        .credentials_provider(aws_sdk_dynamodb::config::SharedCredentialsProvider::new(credentials));
    if let Some(endpoint) = var("AWS_ENDPOINT_URL") {
        sdk = sdk.endpoint_url(endpoint);
    }
    sdk.build()
}

/// After a failed read of the platform secret, requests answer 503 this long without trying.
const PLATFORM_RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// How long a hand-off to a queue may take ([`App::hand_off`]).
pub const HAND_OFF_MS: u64 = 1_500;

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
        crate::metrics::name_resources(&[
            (&cfg.events_queue_url, "EventsQueue"),
            (&cfg.deliveries_queue_url, "DeliveriesQueue"),
            (&cfg.contact_imports_queue_url, "ContactImportsQueue"),
            (&cfg.emails_queue_url, "EmailsQueue"),
            (&cfg.publish_queue_url, "PublishQueue"),
            (&cfg.gdpr_queue_url, "GdprQueue"),
            (&cfg.scans_queue_url, "ScansQueue"),
            (&cfg.exports_bucket, "ExportsBucket"),
            (&cfg.mail_bucket, "MailBucket"),
        ]);
        let dependency = std::time::Duration::from_millis(cfg.timeouts.dependency_ms);
        let jwt = cfg.oauth.as_ref().map(|o| JwtVerifier::new(o, cfg.webhooks.url_policy, dependency)).transpose()?;
        let pages_sign_in =
            cfg.oauth.as_ref().map(|o| crate::oidc::Provider::new(o, cfg.webhooks.url_policy, dependency)).transpose()?.flatten();
        Ok(Self {
            db: Db { client: aws_sdk_dynamodb::Client::from_conf(ddb_conf), table: cfg.table.clone() },
            sdk: sdk.clone(),
            aws: crate::aws::Aws::new(sdk),
            limiter: RateLimiter::new(cfg.limits.clone()),
            keys: crate::auth::KeyCache::new(std::time::Duration::from_secs(cfg.api_key_cache_secs)),
            jwt,
            pages_sign_in,
            platform: OnceCell::new(),
            platform_failed: std::sync::Mutex::new(None),
            cfg,
        })
    }

    /// Build from the Lambda environment (`sdk_from_env`).
    pub async fn from_env() -> Result<Self, String> {
        let cfg = Config::from_env()?;
        let ddb_endpoint = std::env::var("AWS_ENDPOINT_URL_DYNAMODB").ok().filter(|v| !v.is_empty());
        Self::with_dynamodb_endpoint(cfg, &sdk_from_env(), ddb_endpoint.as_deref())
    }

    /// The SDK configuration the clients are built from (a function that needs a client of its
    /// own, such as the email sender's SES client without retries, starts from it).
    pub fn sdk(&self) -> &aws_config::SdkConfig {
        &self.sdk
    }

    /// SQS: the events outbox and the work queues.
    pub fn sqs(&self) -> &aws_sdk_sqs::Client {
        self.aws.sqs()
    }

    /// Send one message to a queue after `delay_secs` (0 to 900).
    pub async fn enqueue(&self, queue_url: &str, body: &str, delay_secs: i64) -> Result<(), crate::aws::AwsError> {
        crate::aws::enqueue(self.sqs(), queue_url, body, delay_secs).await
    }

    /// Send a message whose work is already safe in the table (an event in the outbox, an
    /// email or a post in its due index), within [`HAND_OFF_MS`]: a sweep sends what this
    /// does not, so a slow queue costs that work a delay, never a committed request its
    /// budget. (A request that ran out of budget after its commit would answer 503 and free
    /// its `Idempotency-Key`, and the client's retry would do the write twice.)
    pub async fn hand_off(&self, queue_url: &str, body: &str, delay_secs: i64) -> Result<(), crate::aws::AwsError> {
        match tokio::time::timeout(std::time::Duration::from_millis(HAND_OFF_MS), self.enqueue(queue_url, body, delay_secs)).await {
            Ok(sent) => sent,
            Err(_) => Err(crate::aws::AwsError { code: "Timeout".into(), message: format!("no answer in {HAND_OFF_MS} ms") }),
        }
    }

    /// SES v2 for identity management (sending domains); the sender builds its own SDK client
    /// without retries for SendEmail.
    pub fn ses(&self) -> &aws_sdk_sesv2::Client {
        self.aws.ses()
    }

    /// Export documents, inbound mail and its attachments.
    pub fn s3(&self) -> &aws_sdk_s3::Client {
        self.aws.s3()
    }

    /// This app with another SQS endpoint (tests point one at a closed port).
    pub fn with_sqs_endpoint(self, endpoint: &str) -> Self {
        Self { aws: self.aws.with_sqs_endpoint(endpoint), ..self }
    }

    pub async fn platform_secret(&self) -> Result<&PlatformSecret, ApiError> {
        // Cached per container, but every function that reads it needs the permission.
        crate::metrics::record_call("secretsmanager:GetSecretValue", "PlatformSecret");
        self.platform
            .get_or_try_init(|| async {
                let failed = |at: &Option<Instant>| at.is_some_and(|t| t.elapsed() < PLATFORM_RETRY_AFTER);
                if failed(&self.platform_failed.lock().expect("lock")) {
                    return Err(ApiError::unavailable("secrets manager: failed a moment ago"));
                }
                let got = self.aws.secrets().get_secret_value().secret_id(&self.cfg.platform_secret_id).send().await;
                let got = got.map_err(|e| {
                    *self.platform_failed.lock().expect("lock") = Some(Instant::now());
                    ApiError::unavailable(format!("secrets manager: {}", crate::aws::AwsError::from(e)))
                })?;
                let s = got.secret_string.ok_or_else(|| ApiError::internal("platform secret has no string value"))?;
                PlatformSecret::parse(&s).map_err(|e| ApiError::internal(e))
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rotated_root_seals_anew_and_still_opens_what_the_old_one_sealed() {
        let (old, new) = ("a".repeat(40), "b".repeat(40));
        let before = PlatformSecret::parse(&serde_json::json!({"root_key": old}).to_string()).unwrap();
        let sealed = before.seal("ws_1/wh_1", b"whsec_1");
        let after = PlatformSecret::parse(&serde_json::json!({"root_key": new, "retired_root_keys": [old]}).to_string()).unwrap();
        assert_eq!(after.open("ws_1/wh_1", &sealed).unwrap(), b"whsec_1", "old data opens");
        assert!(after.open("ws_1/other", &sealed).is_err(), "still bound to what it belongs to");
        let resealed = after.seal("ws_1/wh_1", b"whsec_2");
        assert!(before.open("ws_1/wh_1", &resealed).is_err(), "new data is under the new root");
        assert_eq!(after.tombstone_key, before.tombstone_key, "erased addresses stay findable");
        assert_ne!(after.cursor_key, before.cursor_key);
        let newest =
            PlatformSecret::parse(&serde_json::json!({"root_key": "c".repeat(40), "retired_root_keys": [new, old]}).to_string()).unwrap();
        assert_eq!(newest.open("ws_1/wh_1", &sealed).unwrap(), b"whsec_1", "two rotations later");
        assert!(PlatformSecret::parse(r#"{"root_key": "x", "retired_root_keys": []}"#).is_err());
        // Phase one of a rotation: an old container that already knows the next root as
        // pending opens what a new container sealed with it.
        let pending = PlatformSecret::parse(&serde_json::json!({"root_key": old, "pending_root_keys": [new]}).to_string()).unwrap();
        assert_eq!(pending.open("ws_1/wh_1", &resealed).unwrap(), b"whsec_2");
        assert_eq!(pending.tombstone_key, before.tombstone_key);
        assert!(PlatformSecret::parse(&serde_json::json!({"root_key": new, "retired_root_keys": "no"}).to_string()).is_err());
    }

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
