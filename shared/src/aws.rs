//! The AWS services other than DynamoDB on their SDK clients: S3 (export documents, inbound
//! mail and its files), SQS (the outbox and the work queues), Secrets Manager (the platform
//! secret) and SES v2 (sending domains; the sender builds its own client for SendEmail).
//!
//! Every client is built from the function's one `SdkConfig`, on first use (a function that
//! never calls a service does not pay for its client at init): the project's transport
//! (`sdk_http`), the dependency budget as the SDK's timeouts (`Timeouts::sdk`: a stalled
//! dependency answers 503 within `DEPENDENCY_TIMEOUT_MS`), the SDK's standard retries (which
//! know each service's transient errors), and the `CallLog` interceptor that records each
//! call's IAM action for the IAM check. What is left here is what the project decides: a
//! service error read as its code, and S3's "no such key" as `None`.

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_smithy_runtime_api::client::result::SdkError;
use std::sync::OnceLock;

/// The tag key of the SES identities a stack manages (template.yaml's policy names it too).
pub const IDENTITY_TAG_KEY: &str = "platform-stack";
/// The tag key naming the workspace an identity was created for: it marks an identity the API
/// made (one whose creation answer was lost is recognised by it and taken over).
pub const WORKSPACE_TAG_KEY: &str = "platform-workspace";

/// A failed AWS call: the service's error code and message, or what went wrong on the way
/// (`dispatch`, `timeout`, `response`).
#[derive(Debug, Clone)]
pub struct AwsError {
    pub code: String,
    pub message: String,
}

impl AwsError {
    /// The object or identity does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self.code.as_str(), "NoSuchKey" | "NotFound" | "NotFoundException" | "ResourceNotFoundException")
    }
}

impl std::fmt::Display for AwsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for AwsError {}

impl<E: ProvideErrorMetadata + std::fmt::Debug, R: std::fmt::Debug> From<SdkError<E, R>> for AwsError {
    fn from(e: SdkError<E, R>) -> Self {
        match &e {
            SdkError::ServiceError(s) => {
                Self { code: s.err().code().unwrap_or("Unknown").to_string(), message: s.err().message().unwrap_or_default().to_string() }
            }
            SdkError::TimeoutError(_) => Self { code: "Timeout".into(), message: format!("{e:?}") },
            SdkError::DispatchFailure(_) => Self { code: "Connection".into(), message: format!("{e:?}") },
            _ => Self { code: "Response".into(), message: format!("{e:?}") },
        }
    }
}

/// The SDK clients of a container, built on first use.
pub struct Aws {
    sdk: aws_config::SdkConfig,
    /// Another SQS endpoint (tests point one at a closed port).
    sqs_endpoint: Option<String>,
    s3: OnceLock<aws_sdk_s3::Client>,
    sqs: OnceLock<aws_sdk_sqs::Client>,
    ses: OnceLock<aws_sdk_sesv2::Client>,
    secrets: OnceLock<aws_sdk_secretsmanager::Client>,
}

impl Aws {
    /// `sdk` carries the budgets (the function's `Timeouts::sdk`).
    pub fn new(sdk: &aws_config::SdkConfig) -> Self {
        Self {
            sdk: sdk.clone(),
            sqs_endpoint: None,
            s3: OnceLock::new(),
            sqs: OnceLock::new(),
            ses: OnceLock::new(),
            secrets: OnceLock::new(),
        }
    }

    pub fn with_sqs_endpoint(self, endpoint: &str) -> Self {
        Self { sqs_endpoint: Some(endpoint.trim_end_matches('/').to_string()), sqs: OnceLock::new(), ..self }
    }

    pub fn s3(&self) -> &aws_sdk_s3::Client {
        self.s3.get_or_init(|| {
            // A custom endpoint (moto locally) serves every bucket under one host.
            let conf = aws_sdk_s3::config::Builder::from(&self.sdk)
                .force_path_style(self.sdk.endpoint_url().is_some())
                .interceptor(crate::metrics::CallLog)
                .build();
            aws_sdk_s3::Client::from_conf(conf)
        })
    }

    pub fn sqs(&self) -> &aws_sdk_sqs::Client {
        self.sqs.get_or_init(|| {
            let mut conf = aws_sdk_sqs::config::Builder::from(&self.sdk).interceptor(crate::metrics::CallLog);
            if let Some(ep) = &self.sqs_endpoint {
                conf = conf.endpoint_url(ep);
            }
            aws_sdk_sqs::Client::from_conf(conf.build())
        })
    }

    pub fn ses(&self) -> &aws_sdk_sesv2::Client {
        self.ses.get_or_init(|| {
            aws_sdk_sesv2::Client::from_conf(aws_sdk_sesv2::config::Builder::from(&self.sdk).interceptor(crate::metrics::CallLog).build())
        })
    }

    pub fn secrets(&self) -> &aws_sdk_secretsmanager::Client {
        self.secrets.get_or_init(|| {
            let conf = aws_sdk_secretsmanager::config::Builder::from(&self.sdk).interceptor(crate::metrics::CallLog).build();
            aws_sdk_secretsmanager::Client::from_conf(conf)
        })
    }
}

/// Send one message to a queue after `delay_secs` (SQS allows 0 to 900).
pub async fn enqueue(sqs: &aws_sdk_sqs::Client, queue_url: &str, body: &str, delay_secs: i64) -> Result<(), AwsError> {
    let mut req = sqs.send_message().queue_url(queue_url).message_body(body);
    if delay_secs > 0 {
        req = req.delay_seconds(delay_secs.clamp(0, 900) as i32);
    }
    req.send().await?;
    Ok(())
}

/// An object's bytes, or `None` when there is no such key.
pub async fn get_object(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<Option<Vec<u8>>, AwsError> {
    match s3.get_object().bucket(bucket).key(key).send().await {
        Ok(out) => {
            let bytes = out.body.collect().await.map_err(|e| AwsError { code: "Response".into(), message: e.to_string() })?;
            Ok(Some(bytes.into_bytes().to_vec()))
        }
        Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Objects written for a record that is not committed yet carry this tag; the bucket's
/// lifecycle rule removes tagged objects after a day, so a record never written (refused, given
/// up on) leaves no copy of its files behind. [`link_object`] removes the tag once it is.
pub const UNLINKED_TAG: &str = "state=unlinked";

/// Write an object tagged [`UNLINKED_TAG`] (SSE is the bucket's default).
pub async fn put_unlinked(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    bytes: impl Into<aws_sdk_s3::primitives::ByteStream>,
    content_type: &str,
) -> Result<(), AwsError> {
    // Tags set with the object need their own permission.
    crate::metrics::record_call("s3:PutObjectTagging", &crate::metrics::s3_resource(bucket, key));
    s3.put_object().bucket(bucket).key(key).tagging(UNLINKED_TAG).content_type(content_type).body(bytes.into()).send().await?;
    Ok(())
}

/// An object's size and user metadata, or `None` when there is no such key.
pub async fn object_head(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
) -> Result<Option<(u64, std::collections::HashMap<String, String>)>, AwsError> {
    match s3.head_object().bucket(bucket).key(key).send().await {
        Ok(out) => Ok(Some((out.content_length().unwrap_or(0).max(0) as u64, out.metadata.unwrap_or_default()))),
        Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found()) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// A presigned PUT link valid for `expires` (at most: it ends with the credentials that signed
/// it) that writes exactly `length` bytes with `metadata` (both signed: the uploader must send
/// the headers answered with the link). The link carries the caller's authority to write the
/// object, so it records `s3:PutObject`.
pub async fn presigned_put(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    length: u64,
    metadata: &[(&str, &str)],
    expires: std::time::Duration,
) -> Result<(String, Vec<(String, String)>), AwsError> {
    crate::metrics::record_call("s3:PutObject", &crate::metrics::s3_resource(bucket, key));
    let config = aws_sdk_s3::presigning::PresigningConfig::expires_in(expires)
        .map_err(|e| AwsError { code: "InvalidExpiry".into(), message: e.to_string() })?;
    let mut put = s3.put_object().bucket(bucket).key(key).content_length(length as i64);
    for (k, v) in metadata {
        put = put.metadata(*k, *v);
    }
    let req = put.presigned(config).await?;
    let headers = req.headers().filter(|(k, _)| !k.eq_ignore_ascii_case("host")).map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Ok((req.uri().to_string(), headers))
}

/// Take the [`UNLINKED_TAG`] off an object whose record is committed (idempotent; an object
/// that was never written is no error).
pub async fn link_object(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<(), AwsError> {
    match s3.delete_object_tagging().bucket(bucket).key(key).send().await.map_err(AwsError::from) {
        Err(e) if !e.is_not_found() => Err(e),
        _ => Ok(()),
    }
}

/// Delete an object (S3 answers a missing key as deleted).
pub async fn delete_object(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<(), AwsError> {
    s3.delete_object().bucket(bucket).key(key).send().await?;
    Ok(())
}

/// A presigned GET link valid for `expires`, with S3's overrides of the answer's type,
/// encoding and disposition. The link carries the caller's authority to read the object, so
/// it records `s3:GetObject`.
pub async fn presigned_get(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    content_type: &str,
    content_encoding: Option<&str>,
    content_disposition: Option<&str>,
    expires: std::time::Duration,
) -> Result<String, AwsError> {
    crate::metrics::record_call("s3:GetObject", &crate::metrics::s3_resource(bucket, key));
    let config = aws_sdk_s3::presigning::PresigningConfig::expires_in(expires)
        .map_err(|e| AwsError { code: "InvalidExpiry".into(), message: e.to_string() })?;
    let req = s3
        .get_object()
        .bucket(bucket)
        .key(key)
        .response_content_type(content_type)
        .set_response_content_encoding(content_encoding.map(String::from))
        .set_response_content_disposition(content_disposition.map(String::from))
        .presigned(config)
        .await?;
    Ok(req.uri().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The link's length and metadata are signed: S3 refuses a PUT of other bytes or headers.
    #[tokio::test]
    async fn a_presigned_put_signs_its_length_and_metadata() {
        let conf = aws_sdk_s3::Config::builder()
            .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
            .region(aws_sdk_s3::config::Region::new("eu-west-1"))
            .credentials_provider(aws_sdk_s3::config::Credentials::new("AKID", "SECRET", None, None, "test"))
            .build();
        let s3 = aws_sdk_s3::Client::from_conf(conf);
        let (url, headers) =
            presigned_put(&s3, "b", "uploads/k", 42, &[("sha256", "ab")], std::time::Duration::from_secs(60)).await.unwrap();
        let signed = url::Url::parse(&url).unwrap().query_pairs().find(|(k, _)| k == "X-Amz-SignedHeaders").unwrap().1.to_string();
        assert_eq!(signed, "content-length;host;x-amz-meta-sha256");
        assert!(
            headers.contains(&("content-length".into(), "42".into())) && headers.contains(&("x-amz-meta-sha256".into(), "ab".into())),
            "{headers:?}"
        );
    }
}
