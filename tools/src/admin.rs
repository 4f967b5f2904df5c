//! Operator tasks: create the AWS resources locally (bootstrap), onboard workspaces and
//! members, and mint development access tokens.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection, ProjectionType, ScalarAttributeType,
    TimeToLiveSpecification,
};
use aws_sdk_sqs::types::QueueAttributeName;
use serde::Serialize;
use shared::config::{Config, OAuthConfig};
use std::collections::BTreeMap;

/// Resource names of one local deployment.
#[derive(Clone, Debug, Serialize)]
pub struct Names {
    pub table: String,
    pub events_queue: String,
    pub deliveries_queue: String,
    pub contact_imports_queue: String,
    pub emails_queue: String,
    pub publish_queue: String,
    pub email_feedback_queue: String,
    pub gdpr_queue: String,
    pub scans_queue: String,
    pub exports_bucket: String,
    pub inbound_mail_queue: String,
    pub mail_bucket: String,
    pub secret_id: String,
}

impl Default for Names {
    fn default() -> Self {
        Self {
            table: "platform".into(),
            events_queue: "platform-events".into(),
            deliveries_queue: "platform-deliveries".into(),
            contact_imports_queue: "platform-contact-imports".into(),
            emails_queue: "platform-emails".into(),
            publish_queue: "platform-publish".into(),
            email_feedback_queue: "platform-email-feedback".into(),
            gdpr_queue: "platform-gdpr".into(),
            scans_queue: "platform-scans".into(),
            exports_bucket: "platform-exports".into(),
            inbound_mail_queue: "platform-inbound-mail".into(),
            mail_bucket: "platform-mail".into(),
            secret_id: "platform/secret".into(),
        }
    }
}

impl Names {
    pub fn from_env() -> Self {
        let d = Self::default();
        let get = |k: &str, d: String| std::env::var(k).ok().filter(|v| !v.is_empty()).unwrap_or(d);
        Self {
            table: get("TABLE_NAME", d.table),
            events_queue: get("EVENTS_QUEUE_NAME", d.events_queue),
            deliveries_queue: get("DELIVERIES_QUEUE_NAME", d.deliveries_queue),
            contact_imports_queue: get("CONTACT_IMPORTS_QUEUE_NAME", d.contact_imports_queue),
            emails_queue: get("EMAILS_QUEUE_NAME", d.emails_queue),
            publish_queue: get("PUBLISH_QUEUE_NAME", d.publish_queue),
            email_feedback_queue: get("EMAIL_FEEDBACK_QUEUE_NAME", d.email_feedback_queue),
            gdpr_queue: get("GDPR_QUEUE_NAME", d.gdpr_queue),
            scans_queue: get("SCANS_QUEUE_NAME", d.scans_queue),
            exports_bucket: get("EXPORTS_BUCKET", d.exports_bucket),
            inbound_mail_queue: get("INBOUND_MAIL_QUEUE_NAME", d.inbound_mail_queue),
            mail_bucket: get("MAIL_BUCKET", d.mail_bucket),
            secret_id: get("PLATFORM_SECRET_ID", d.secret_id),
        }
    }
}

/// The stack outputs the admin CLI reads (`--outputs FILE`), each with the configuration
/// variable of the functions it sets. The file is what `sam list stack-outputs --output json`
/// (or `aws cloudformation describe-stacks --query 'Stacks[0].Outputs'`) prints; the local
/// stack writes the same file (`.local/dev.outputs.json`), so the README's onboarding runs
/// the same way against both. `tools/tests/template.rs` checks the template outputs each one.
pub const STACK_OUTPUTS: &[(&str, &str)] = &[
    ("Region", "AWS_REGION"),
    ("TableName", "TABLE_NAME"),
    ("EventsQueueUrl", "EVENTS_QUEUE_URL"),
    ("DeliveriesQueueUrl", "DELIVERIES_QUEUE_URL"),
    ("ContactImportsQueueUrl", "CONTACT_IMPORTS_QUEUE_URL"),
    ("EmailsQueueUrl", "EMAILS_QUEUE_URL"),
    ("PublishQueueUrl", "PUBLISH_QUEUE_URL"),
    ("GdprQueueUrl", "GDPR_QUEUE_URL"),
    ("ScansQueueUrl", "SCANS_QUEUE_URL"),
    ("ExportsBucketName", "EXPORTS_BUCKET"),
    ("MailBucketName", "MAIL_BUCKET"),
    ("PlatformSecretArn", "PLATFORM_SECRET_ID"),
];

/// The configuration variables a stack-outputs file sets (unknown outputs are ignored).
pub fn vars_from_outputs(json: &str) -> Result<BTreeMap<String, String>, String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Output {
        output_key: String,
        output_value: String,
    }
    let outputs: Vec<Output> =
        serde_json::from_str(json).map_err(|e| format!("not a list of {{\"OutputKey\", \"OutputValue\"}} objects: {e}"))?;
    let mut vars = BTreeMap::new();
    for o in outputs {
        if let Some((_, var)) = STACK_OUTPUTS.iter().find(|(k, _)| *k == o.output_key) {
            vars.insert(var.to_string(), o.output_value);
        }
    }
    match STACK_OUTPUTS.iter().find(|(_, v)| !vars.contains_key(*v)) {
        Some((key, _)) => Err(format!("the stack outputs have no {key} (is this the platform's stack, deployed from this template?)")),
        None => Ok(vars),
    }
}

/// A stack-outputs file for configuration variables (the local stack's, from its environment).
pub fn outputs_json(vars: &[(&str, String)]) -> String {
    let outputs: Vec<serde_json::Value> = STACK_OUTPUTS
        .iter()
        .filter_map(|(key, var)| {
            vars.iter().find(|(v, _)| v == var).map(|(_, value)| serde_json::json!({"OutputKey": key, "OutputValue": value}))
        })
        .collect();
    serde_json::to_string_pretty(&outputs).expect("outputs serialize")
}

/// What bootstrap created (or found).
#[derive(Clone, Debug, Serialize)]
pub struct Resources {
    pub table: String,
    pub events_queue_url: String,
    pub events_dlq_url: String,
    pub deliveries_queue_url: String,
    pub deliveries_dlq_url: String,
    pub contact_imports_queue_url: String,
    pub contact_imports_dlq_url: String,
    pub emails_queue_url: String,
    pub emails_dlq_url: String,
    pub publish_queue_url: String,
    pub publish_dlq_url: String,
    /// Where SES notifications arrive (on AWS through SNS).
    pub email_feedback_queue_url: String,
    pub email_feedback_dlq_url: String,
    /// GDPR export and erasure jobs.
    pub gdpr_queue_url: String,
    pub gdpr_dlq_url: String,
    /// Website scans to run.
    pub scans_queue_url: String,
    pub scans_dlq_url: String,
    pub exports_bucket: String,
    /// SES receipt notifications of inbound mail (on AWS through SNS).
    pub inbound_mail_queue_url: String,
    pub inbound_mail_dlq_url: String,
    /// Raw inbound messages and the helpdesk's attachments.
    pub mail_bucket: String,
    pub secret_id: String,
}

pub const DEV_ISSUER: &str = "https://dev-issuer.local/";
/// An absolute URI: the approval pages ask the provider for it as a resource indicator (RFC 8707).
pub const DEV_AUDIENCE: &str = "urn:workspace-platform:local";
pub const DEV_JWKS: &str = include_str!("../dev-keys/oauth-dev-jwks.json");
/// The development signing key: `mint-token` signs with it, and so does `make dev`'s OpenID
/// provider (`crate::oidc`), so one JWK set verifies both.
pub const DEV_PRIVATE_KEY: &str = include_str!("../dev-keys/oauth-dev-private.pem");
/// Its key id in `DEV_JWKS`.
pub const DEV_KID: &str = "local-dev-1";

pub fn dev_oauth() -> OAuthConfig {
    OAuthConfig {
        issuer: DEV_ISSUER.into(),
        audience: DEV_AUDIENCE.into(),
        jwks: shared::config::JwksSource::Document(DEV_JWKS.into()),
        min_refresh_secs: 60,
        pages_client_id: None,
        approver_clients: vec![crate::oidc::CLIENT_ID.into()],
        approver_max_auth_age_secs: 600,
    }
}

/// The configuration the functions get locally: the same variables through the same code
/// (`Config::from_vars`) as in Lambda. The stack's own resources come from bootstrap; every
/// other variable set in the environment wins over its local default.
pub fn local_config(res: &Resources) -> Result<Config, String> {
    let resource = |k: &str| -> Option<String> {
        Some(match k {
            "TABLE_NAME" => res.table.clone(),
            "EVENTS_QUEUE_URL" => res.events_queue_url.clone(),
            "DELIVERIES_QUEUE_URL" => res.deliveries_queue_url.clone(),
            "CONTACT_IMPORTS_QUEUE_URL" => res.contact_imports_queue_url.clone(),
            "EMAILS_QUEUE_URL" => res.emails_queue_url.clone(),
            "PUBLISH_QUEUE_URL" => res.publish_queue_url.clone(),
            "GDPR_QUEUE_URL" => res.gdpr_queue_url.clone(),
            "SCANS_QUEUE_URL" => res.scans_queue_url.clone(),
            "EXPORTS_BUCKET" => res.exports_bucket.clone(),
            "MAIL_BUCKET" => res.mail_bucket.clone(),
            "PLATFORM_SECRET_ID" => res.secret_id.clone(),
            _ => return None,
        })
    };
    let local_default = |k: &str| -> Option<String> {
        Some(match k {
            // Locally the webhook receivers are on 127.0.0.1 over http.
            "WEBHOOK_ALLOW_LOOPBACK" => "true".into(),
            // Nothing the local stack calls may leave the machine, not even a DNS query.
            "OUTBOUND_LOOPBACK_ONLY" => "true".into(),
            "OAUTH_ISSUER" => DEV_ISSUER.into(),
            "OAUTH_AUDIENCE" => DEV_AUDIENCE.into(),
            "OAUTH_JWKS" => DEV_JWKS.into(),
            // The approval pages' client, whose tokens `mint-token` mints as a person's.
            "OAUTH_APPROVER_CLIENT_IDS" => crate::oidc::CLIENT_ID.into(),
            _ => return None,
        })
    };
    Config::from_vars(&|k| resource(k).or_else(|| std::env::var(k).ok().filter(|v| !v.is_empty())).or_else(|| local_default(k)))
}

/// SDK configuration for the local emulators: dummy credentials, moto as the default endpoint.
pub async fn local_sdk_config(moto_endpoint: &str) -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(shared::sdk_http::client())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sqs::config::Credentials::new("local", "local", None, None, "local"))
        .endpoint_url(moto_endpoint)
        .load()
        .await
}

fn key(name: &str, t: KeyType) -> KeySchemaElement {
    KeySchemaElement::builder().attribute_name(name).key_type(t).build().expect("name and type set")
}
fn attr(name: &str) -> AttributeDefinition {
    AttributeDefinition::builder().attribute_name(name).attribute_type(ScalarAttributeType::S).build().expect("name and type set")
}
fn gsi(name: &str, projection: ProjectionType) -> GlobalSecondaryIndex {
    GlobalSecondaryIndex::builder()
        .index_name(name)
        .key_schema(key(&format!("{name}pk"), KeyType::Hash))
        .key_schema(key(&format!("{name}sk"), KeyType::Range))
        .projection(Projection::builder().projection_type(projection).build())
        .build()
        .expect("index fields set")
}

/// Create the table (with GSIs and TTL), the queues with their dead-letter queues, the exports
/// bucket (with its 7-day expiry) and the platform secret. Safe to run again: existing
/// resources are kept.
pub async fn bootstrap(
    ddb: &aws_sdk_dynamodb::Client,
    sqs: &aws_sdk_sqs::Client,
    sm: &aws_sdk_secretsmanager::Client,
    s3: &aws_sdk_s3::Client,
    names: &Names,
) -> Result<Resources, String> {
    let created = ddb
        .create_table()
        .table_name(&names.table)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key("pk", KeyType::Hash))
        .key_schema(key("sk", KeyType::Range))
        .attribute_definitions(attr("pk"))
        .attribute_definitions(attr("sk"))
        .attribute_definitions(attr("gsi1pk"))
        .attribute_definitions(attr("gsi1sk"))
        .attribute_definitions(attr("gsi2pk"))
        .attribute_definitions(attr("gsi2sk"))
        .global_secondary_indexes(gsi("gsi1", ProjectionType::All))
        .global_secondary_indexes(gsi("gsi2", ProjectionType::KeysOnly))
        .send()
        .await;
    match created {
        Ok(_) => {
            ddb.update_time_to_live()
                .table_name(&names.table)
                .time_to_live_specification(
                    TimeToLiveSpecification::builder().enabled(true).attribute_name("expires_at").build().expect("set"),
                )
                .send()
                .await
                .map_err(|e| format!("enable TTL: {}", aws_sdk_dynamodb::error::DisplayErrorContext(e)))?;
        }
        Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_in_use_exception()) => {}
        Err(e) => return Err(format!("create table: {}", aws_sdk_dynamodb::error::DisplayErrorContext(e))),
    }

    // Visibility 90 s: above the dispatcher's timeout (60 s), so a message is not handed to a
    // second invocation while the first still works on it.
    let (events_queue_url, events_dlq_url) = create_queue_with_dlq(sqs, &names.events_queue, 10, 90).await?;
    // Deliveries are re-received once per retry (and once more per 12 h of waiting), so their
    // dead-letter threshold is far above the retry schedule's length.
    let (deliveries_queue_url, deliveries_dlq_url) = create_queue_with_dlq(sqs, &names.deliveries_queue, 50, 90).await?;
    // An import resumes where it stopped each time its message comes back; five tries.
    let (contact_imports_queue_url, contact_imports_dlq_url) = create_queue_with_dlq(sqs, &names.contact_imports_queue, 5, 600).await?;
    // Visibility above the sender's timeout; a job's emails are re-enqueued on their own, so
    // a message that keeps failing is broken.
    let (emails_queue_url, emails_dlq_url) = create_queue_with_dlq(sqs, &names.emails_queue, 10, 90).await?;
    // Visibility above the publisher's timeout; a run that needs to come back later sends
    // its own delayed message.
    let (publish_queue_url, publish_dlq_url) = create_queue_with_dlq(sqs, &names.publish_queue, 10, 90).await?;
    let (email_feedback_queue_url, email_feedback_dlq_url) = create_queue_with_dlq(sqs, &names.email_feedback_queue, 5, 30).await?;
    // A job resumes from its last saved position on each delivery; visibility above the
    // worker's 15-minute timeout.
    let (gdpr_queue_url, gdpr_dlq_url) = create_queue_with_dlq(sqs, &names.gdpr_queue, 6, 960).await?;
    // A scan takes at most a minute; visibility above the scanner's timeout, three tries.
    let (scans_queue_url, scans_dlq_url) = create_queue_with_dlq(sqs, &names.scans_queue, 5, 120).await?;
    create_bucket(s3, &names.exports_bucket, "exports/", 7).await?;
    let (inbound_mail_queue_url, inbound_mail_dlq_url) = create_queue_with_dlq(sqs, &names.inbound_mail_queue, 5, 180).await?;
    create_bucket(s3, &names.mail_bucket, "inbound/", 7).await?;
    let secret = sm.create_secret().name(&names.secret_id).secret_string(shared::app::PlatformSecret::generate_json()).send().await;
    match secret {
        Ok(_) => {}
        Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_exists_exception()) => {}
        Err(e) => return Err(format!("create secret: {}", aws_sdk_secretsmanager::error::DisplayErrorContext(e))),
    }
    Ok(Resources {
        table: names.table.clone(),
        events_queue_url,
        events_dlq_url,
        deliveries_queue_url,
        deliveries_dlq_url,
        contact_imports_queue_url,
        contact_imports_dlq_url,
        emails_queue_url,
        emails_dlq_url,
        publish_queue_url,
        publish_dlq_url,
        email_feedback_queue_url,
        email_feedback_dlq_url,
        gdpr_queue_url,
        gdpr_dlq_url,
        scans_queue_url,
        scans_dlq_url,
        exports_bucket: names.exports_bucket.clone(),
        inbound_mail_queue_url,
        inbound_mail_dlq_url,
        mail_bucket: names.mail_bucket.clone(),
        secret_id: names.secret_id.clone(),
    })
}

/// A bucket as template.yaml makes it: objects under `prefix` expire after `days`.
async fn create_bucket(s3: &aws_sdk_s3::Client, name: &str, prefix: &str, days: u32) -> Result<(), String> {
    use aws_sdk_s3::types::{BucketLifecycleConfiguration, ExpirationStatus, LifecycleExpiration, LifecycleRule, LifecycleRuleFilter};
    use aws_sdk_s3::types::{BucketLocationConstraint, CreateBucketConfiguration};
    // Outside us-east-1, S3 wants the bucket's region named.
    let region = s3.config().region().map(|r| r.to_string()).filter(|r| r != "us-east-1");
    let location =
        region.map(|r| CreateBucketConfiguration::builder().location_constraint(BucketLocationConstraint::from(r.as_str())).build());
    match s3.create_bucket().bucket(name).set_create_bucket_configuration(location).send().await.map_err(shared::aws::AwsError::from) {
        // us-east-1 answers BucketAlreadyExists to its owner as well.
        Err(e) if e.code != "BucketAlreadyOwnedByYou" && e.code != "BucketAlreadyExists" => {
            return Err(format!("create bucket {name}: {e}"));
        }
        _ => {}
    }
    let rule = LifecycleRule::builder()
        .id(format!("expire-{}", prefix.trim_end_matches('/')))
        .filter(LifecycleRuleFilter::builder().prefix(prefix).build())
        .status(ExpirationStatus::Enabled)
        .expiration(LifecycleExpiration::builder().days(days as i32).build())
        .build()
        .map_err(|e| e.to_string())?;
    let conf = BucketLifecycleConfiguration::builder().rules(rule).build().map_err(|e| e.to_string())?;
    s3.put_bucket_lifecycle_configuration()
        .bucket(name)
        .lifecycle_configuration(conf)
        .send()
        .await
        .map_err(|e| format!("bucket lifecycle: {}", shared::aws::AwsError::from(e)))?;
    Ok(())
}

async fn create_queue_with_dlq(
    sqs: &aws_sdk_sqs::Client,
    name: &str,
    max_receive: u32,
    visibility: u32,
) -> Result<(String, String), String> {
    let dlq_url = create_queue(sqs, &format!("{name}-dlq"), &[(QueueAttributeName::MessageRetentionPeriod, "1209600")]).await?;
    let dlq_arn = sqs
        .get_queue_attributes()
        .queue_url(&dlq_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| format!("dlq arn: {}", aws_sdk_sqs::error::DisplayErrorContext(e)))?
        .attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .ok_or("dlq has no ARN")?;
    let redrive = serde_json::json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive}).to_string();
    let url = create_queue(
        sqs,
        name,
        &[(QueueAttributeName::VisibilityTimeout, &visibility.to_string()), (QueueAttributeName::RedrivePolicy, &redrive)],
    )
    .await?;
    Ok((url, dlq_url))
}

async fn create_queue(sqs: &aws_sdk_sqs::Client, name: &str, attrs: &[(QueueAttributeName, &str)]) -> Result<String, String> {
    let mut req = sqs.create_queue().queue_name(name);
    for (k, v) in attrs {
        req = req.attributes(k.clone(), *v);
    }
    match req.send().await {
        Ok(out) => out.queue_url.ok_or_else(|| format!("queue {name} has no URL")),
        // Same name with other attributes: keep the existing queue.
        Err(e) if e.as_service_error().is_some_and(|s| s.is_queue_name_exists()) => sqs
            .get_queue_url()
            .queue_name(name)
            .send()
            .await
            .map_err(|e| format!("queue {name}: {}", aws_sdk_sqs::error::DisplayErrorContext(e)))?
            .queue_url
            .ok_or_else(|| format!("queue {name} has no URL")),
        Err(e) => Err(format!("create queue {name}: {}", aws_sdk_sqs::error::DisplayErrorContext(e))),
    }
}

/// True for endpoints on this machine; development-only commands refuse anything else.
pub fn is_loopback_endpoint(endpoint: &str) -> bool {
    url::Url::parse(endpoint)
        .ok()
        .and_then(|u| u.host_str().map(String::from))
        .is_some_and(|h| h == "localhost" || h.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()) || h == "[::1]")
}

/// An ES256 access token signed by the local development key.
pub fn mint_token(subject: &str, scope: &str, ttl_secs: i64) -> Result<String, String> {
    mint_token_from(DEV_ISSUER, subject, scope, ttl_secs)
}

/// [`mint_token`] as `issuer`: `make dev`'s issuer is its OpenID provider (`OAUTH_ISSUER` in
/// .local/dev.env), which signs with this same key.
pub fn mint_token_from(issuer: &str, subject: &str, scope: &str, ttl_secs: i64) -> Result<String, String> {
    mint_token_signed_in(issuer, subject, scope, ttl_secs, Some(crate::oidc::CLIENT_ID), 0)
}

/// [`mint_token_from`] issued to `client` (None: no `client_id` claim), for a person who signed
/// in `signed_in_secs_ago`: a token of another client, or of an old sign-in, cannot approve.
pub fn mint_token_signed_in(
    issuer: &str,
    subject: &str,
    scope: &str,
    ttl_secs: i64,
    client: Option<&str>,
    signed_in_secs_ago: i64,
) -> Result<String, String> {
    let now = chrono::Utc::now().timestamp();
    let mut claims = serde_json::json!({"iss": issuer, "aud": DEV_AUDIENCE, "sub": subject, "exp": now + ttl_secs, "iat": now,
        "scope": scope, "auth_time": now - signed_in_secs_ago});
    if let Some(c) = client {
        claims["client_id"] = c.into();
    }
    mint_token_with(DEV_KID, claims)
}

/// Any claims, under any key id, signed by the local development key (tests of key rotation
/// and of `nbf`).
pub fn mint_token_with(kid: &str, claims: serde_json::Value) -> Result<String, String> {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some(kid.into());
    shared::crypto::install();
    let key = jsonwebtoken::EncodingKey::from_ec_pem(DEV_PRIVATE_KEY.as_bytes()).map_err(|e| e.to_string())?;
    jsonwebtoken::encode(&header, &claims, &key).map_err(|e| e.to_string())
}

/// The development JWK set with its one key under another key id (a "rotated" set).
pub fn dev_jwks_with_kid(kid: &str) -> serde_json::Value {
    let mut set: serde_json::Value = serde_json::from_str(DEV_JWKS).expect("dev JWKS is JSON");
    set["keys"][0]["kid"] = kid.into();
    set
}

/// Store a raw message in the mail bucket as SES's S3 action does (`inbound/<SES id>`) and
/// answer the receipt notification SES would send (SNS envelope), naming `recipients`, with
/// SES's spam and virus verdicts (`PASS` / `FAIL`).
pub async fn store_inbound(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    raw: &[u8],
    recipients: &[String],
    spam: &str,
    virus: &str,
) -> Result<String, String> {
    let id = shared::ids::new_id("local");
    let key = format!("inbound/{id}");
    s3.put_object()
        .bucket(bucket)
        .key(&key)
        .body(raw.to_vec().into())
        .send()
        .await
        .map_err(|e| format!("store the message: {}", shared::aws::AwsError::from(e)))?;
    Ok(domain::helpdesk::mail::notification(&id, bucket, &key, recipients, spam, virus))
}

/// Feed one inbound message to the stack exactly as SES would: the raw MIME into the mail
/// bucket, the notification into the inbound queue. Answers SES's message id.
pub async fn send_inbound(app: &shared::App, res: &Resources, raw: &[u8], recipients: &[String]) -> Result<String, String> {
    let body = store_inbound(app.s3(), &res.mail_bucket, raw, recipients, "PASS", "PASS").await?;
    let id = domain::helpdesk::mail::receipt(&body).map(|r| r.ses_message_id).unwrap_or_default();
    app.enqueue(&res.inbound_mail_queue_url, &body, 0).await.map_err(|e| e.to_string())?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_detection() {
        assert!(is_loopback_endpoint("http://127.0.0.1:4566"));
        assert!(is_loopback_endpoint("http://localhost:8000"));
        assert!(!is_loopback_endpoint("https://dynamodb.eu-west-1.amazonaws.com"));
        assert!(!is_loopback_endpoint("garbage"));
    }

    #[tokio::test]
    async fn minted_tokens_verify_against_the_dev_jwks_and_nothing_else() {
        use shared::oauth::{JwtVerifier, Rejected};
        let verifier = |cfg: &OAuthConfig| JwtVerifier::new(cfg, Default::default(), std::time::Duration::from_secs(1)).unwrap();
        let reason = |r: Result<shared::oauth::Claims, Rejected>| match r {
            Err(Rejected::Invalid(why)) => why,
            other => panic!("{other:?}"),
        };
        let v = verifier(&dev_oauth());
        let t = mint_token("user_1", "read write", 60).unwrap();
        assert_eq!(v.verify(&t).await.unwrap().sub, "user_1");
        let expired = mint_token("user_1", "read", -120).unwrap();
        assert_eq!(reason(v.verify(&expired).await), "expired");
        let wrong_aud = verifier(&OAuthConfig { audience: "other".into(), ..dev_oauth() });
        assert_eq!(reason(wrong_aud.verify(&t).await), "wrong audience");
        let mut tampered = t.clone();
        tampered.insert(t.rfind('.').unwrap() - 2, 'x');
        assert!(v.verify(&tampered).await.is_err());
        // alg=none and HS256 tokens are refused before any key is tried.
        let none = format!("{}.{}.", "eyJhbGciOiJub25lIn0", t.split('.').nth(1).unwrap());
        assert_eq!(reason(v.verify(&none).await), "malformed token");
        // Not valid before a time beyond the leeway.
        let now = chrono::Utc::now().timestamp();
        let claims = |nbf: i64| serde_json::json!({"iss": DEV_ISSUER, "aud": DEV_AUDIENCE, "sub": "u", "exp": now + 600, "nbf": nbf});
        assert_eq!(reason(v.verify(&mint_token_with("local-dev-1", claims(now + 300)).unwrap()).await), "not valid yet (nbf)");
        assert!(v.verify(&mint_token_with("local-dev-1", claims(now - 5)).unwrap()).await.is_ok());
        // A fixed document is never fetched: an unknown kid is simply unknown.
        assert_eq!(reason(v.verify(&mint_token_with("other-kid", claims(now - 5)).unwrap()).await), "no matching key");
    }
}
