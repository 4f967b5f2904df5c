//! AWS services other than DynamoDB, over plain HTTPS: S3, SQS, Secrets Manager and the SES
//! identity calls. Requests are signed with SigV4 by `aws-sigv4` (the signer the SDK itself
//! uses) and sent over the project's reqwest client; each service module builds its requests
//! and reads its answers, this module does what they share: credentials, signing, attempts,
//! the dependency budget, errors and the IAM action each call records.
//!
//! Why not the SDK crates: a function links each SDK client's orchestrator plumbing, endpoint
//! rules and the (de)serialisers of every error shape of every operation it calls. For the
//! dozen small calls here that was about 0.2 MB of every function binary (SQS and Secrets
//! Manager are in all of them) and 0.15 MB more in the emails function (SES), most of the gap
//! to the 6 MB goal (docs/benchmarks.md). DynamoDB, called everywhere with rich types, stays
//! on the SDK.
//!
//! Behaviour follows the SDK clients of `App`: each attempt gets half the dependency budget,
//! connecting at most a second; transient failures (connection, timeout, 5xx, throttling) are
//! tried up to three times within the budget.

pub mod s3;
pub mod secrets;
pub mod ses;
pub mod sqs;

pub use s3::S3;

use crate::metrics::{iam_action, record_action};
use aws_config::SdkConfig;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningInstructions, SigningSettings, sign};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

/// Attempts of one call (the SDK's standard retry mode makes three).
const ATTEMPTS: u32 = 3;

/// A failed AWS call: the service's error code and message, or what went wrong on the way.
#[derive(Debug, Clone)]
pub struct AwsError {
    pub status: Option<u16>,
    pub code: String,
    pub message: String,
}

impl AwsError {
    fn local(code: &str, message: impl std::fmt::Display) -> Self {
        Self { status: None, code: code.into(), message: message.to_string() }
    }
    /// Worth another attempt: no answer, a server error or throttling. By code too, since
    /// S3's CompleteMultipartUpload reports an `InternalError` inside a 200 and some services
    /// throttle with a 400.
    fn transient(&self) -> bool {
        const CODES: &[&str] = &[
            "Timeout",
            "Connection",
            "InternalError",
            "InternalFailure",
            "ServiceUnavailable",
            "SlowDown",
            "RequestTimeout",
            "Throttling",
            "ThrottlingException",
            "TooManyRequestsException",
            "RequestThrottled",
            "RequestLimitExceeded",
        ];
        CODES.contains(&self.code.as_str()) || self.status.is_some_and(|s| s >= 500 || s == 429)
    }
}

impl std::fmt::Display for AwsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.status {
            Some(s) => write!(f, "{} ({s}): {}", self.code, self.message),
            None => write!(f, "{}: {}", self.code, self.message),
        }
    }
}

impl std::error::Error for AwsError {}

/// The connection to AWS of a container: configuration, credentials and one HTTP client for
/// every service here. The service clients (`s3()`, `sqs()`, ...) are views of it.
pub struct Aws {
    credentials: Option<SharedCredentialsProvider>,
    region: String,
    /// A custom endpoint (moto locally) serves every service.
    endpoint: Option<String>,
    dependency: Duration,
    /// Built on the first call: building it loads the trust store.
    http: OnceLock<Result<reqwest::Client, String>>,
}

/// One call to a service, as its module built it.
struct Call<'a> {
    /// The service as the SDK names it (for the IAM action) and its SigV4 signing name.
    service: &'static str,
    signing_name: &'static str,
    /// The SDK's operation name, for the IAM action and errors.
    op: &'static str,
    method: &'a str,
    url: String,
    headers: Vec<(&'a str, &'a str)>,
    body: Vec<u8>,
    settings: SigningSettings,
    /// Leave a successful answer's body to read after the attempts (an object's bytes).
    stream: bool,
    /// The protocol's error in an answer (status, headers, body), if it is one.
    error: fn(&str, u16, &http::HeaderMap, &[u8]) -> Option<AwsError>,
}

/// An answer's body: read within the attempt, or (an object's bytes) left to read.
enum Body {
    Read(Vec<u8>),
    Pending(reqwest::Response),
}

struct Answer {
    headers: http::HeaderMap,
    body: Vec<u8>,
}

impl Aws {
    /// `dependency`: one call's budget, retries included (`DEPENDENCY_TIMEOUT_MS`).
    pub fn new(sdk: &SdkConfig, dependency: Duration) -> Self {
        Self {
            credentials: sdk.credentials_provider(),
            region: sdk.region().map(|r| r.to_string()).unwrap_or_else(|| "us-east-1".into()),
            endpoint: sdk.endpoint_url().map(|e| e.trim_end_matches('/').to_string()),
            dependency,
            http: OnceLock::new(),
        }
    }

    pub fn s3(&self) -> S3<'_> {
        S3 { aws: self }
    }

    pub fn sqs(&self) -> sqs::Sqs<'_> {
        sqs::Sqs { aws: self, endpoint: None }
    }

    pub fn ses(&self) -> ses::Ses<'_> {
        ses::Ses { aws: self }
    }

    pub fn secrets(&self) -> secrets::Secrets<'_> {
        secrets::Secrets { aws: self }
    }

    /// A service's endpoint: the custom one, or AWS's regional `https://{prefix}.{region}...`.
    fn endpoint(&self, prefix: &str) -> String {
        match &self.endpoint {
            Some(ep) => ep.clone(),
            None => format!("https://{prefix}.{}.amazonaws.com", self.region),
        }
    }

    /// SigV4 of a request with the container's current credentials: the headers to add (or, for
    /// a presigned link, the query parameters).
    async fn signature(&self, call: &Call<'_>, body: SignableBody<'_>, at: SystemTime) -> Result<SigningInstructions, AwsError> {
        let provider = self.credentials.as_ref().ok_or_else(|| AwsError::local("Credentials", "no credentials provider configured"))?;
        let identity: aws_smithy_runtime_api::client::identity::Identity =
            provider.provide_credentials().await.map_err(|e| AwsError::local("Credentials", e))?.into();
        let params = aws_sigv4::sign::v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(call.signing_name)
            .time(at)
            .settings(call.settings.clone())
            .build()
            .map_err(|e| AwsError::local("Signing", e))?
            .into();
        let signable =
            SignableRequest::new(call.method, &call.url, call.headers.iter().copied(), body).map_err(|e| AwsError::local("Signing", e))?;
        Ok(sign(signable, &params).map_err(|e| AwsError::local("Signing", e))?.into_parts().0)
    }

    fn http(&self) -> Result<&reqwest::Client, AwsError> {
        // The read timeout bounds a stall between reads (of a large object, too), not a transfer.
        let (connect, read) = (self.dependency.min(Duration::from_secs(1)), self.dependency / 2);
        let built = self.http.get_or_init(|| crate::sdk_http::aws_http_client(Some(connect), Some(read)));
        built.as_ref().map_err(|e| AwsError::local("Connection", e))
    }

    /// One call: its attempts, up to the service's answer, within the dependency budget; then
    /// the answer's body, which may be large (an inbound message of 30 MB) and so is bounded by
    /// the client's read timeout (a stall) instead of the budget.
    async fn call(&self, call: Call<'_>) -> Result<Answer, AwsError> {
        if let Some(action) = iam_action(call.service, call.op) {
            record_action(&action);
        }
        let op = call.op;
        let attempts = async {
            let mut last = None;
            for attempt in 0..ATTEMPTS {
                if attempt > 0 {
                    // Jittered, growing pause (the SDK's is similar): 50-100 ms, then 100-200 ms.
                    let jitter =
                        u64::from(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().subsec_micros() % 50);
                    tokio::time::sleep(Duration::from_millis((50 + jitter) << (attempt - 1))).await;
                }
                match self.attempt(&call).await {
                    Ok(a) => return Ok(a),
                    Err(e) if e.transient() => last = Some(e),
                    Err(e) => return Err(e),
                }
            }
            Err(last.unwrap_or_else(|| AwsError::local("Timeout", "no attempt made")))
        };
        let named = |e: AwsError| AwsError { message: format!("{op}: {}", e.message), ..e };
        let (headers, body) = match tokio::time::timeout(self.dependency, attempts).await {
            Ok(r) => r.map_err(named)?,
            Err(_) => return Err(AwsError::local("Timeout", format!("{op} took longer than {} ms", self.dependency.as_millis()))),
        };
        let body = match body {
            Body::Read(b) => b,
            Body::Pending(resp) => resp.bytes().await.map_err(|e| named(transport_error(&e)))?.to_vec(),
        };
        Ok(Answer { headers, body })
    }

    async fn attempt(&self, call: &Call<'_>) -> Result<(http::HeaderMap, Body), AwsError> {
        let body = SignableBody::Bytes(&call.body);
        let instructions = self.signature(call, body, SystemTime::now()).await?;
        let method = reqwest::Method::from_bytes(call.method.as_bytes()).map_err(|e| AwsError::local("Request", e))?;
        let mut req = self.http()?.request(method, &call.url);
        for (k, v) in call.headers.iter().copied().chain(instructions.headers()) {
            req = req.header(k, v);
        }
        let half = self.dependency / 2;
        let resp = match tokio::time::timeout(half, req.body(call.body.clone()).send()).await {
            Ok(r) => r.map_err(|e| transport_error(&e))?,
            Err(_) => return Err(AwsError::local("Timeout", format!("no answer within {} ms", half.as_millis()))),
        };
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        if (200..300).contains(&status) && call.stream {
            return Ok((headers, Body::Pending(resp)));
        }
        let body = resp.bytes().await.map_err(|e| transport_error(&e))?.to_vec();
        if let Some(e) = (call.error)(call.op, status, &headers, &body) {
            return Err(e);
        }
        Ok((headers, Body::Read(body)))
    }

    /// A call in one of AWS's JSON protocols (awsJson 1.0/1.1, restJson1) of `service`, named
    /// as the SDK and as SigV4 name it: `input` as the body, the answer's document (`null` when
    /// empty), errors read from JSON.
    async fn json(
        &self,
        (service, signing_name): (&'static str, &'static str),
        op: &'static str,
        method: &str,
        url: String,
        headers: Vec<(&str, &str)>,
        input: Option<serde_json::Value>,
    ) -> Result<serde_json::Value, AwsError> {
        let body = input.map(|i| i.to_string().into_bytes()).unwrap_or_default();
        let call = Call {
            service,
            signing_name,
            op,
            method,
            url,
            headers,
            body,
            settings: SigningSettings::default(),
            stream: false,
            error: json_error,
        };
        let a = self.call(call).await?;
        if a.body.is_empty() {
            return Ok(serde_json::Value::Null);
        }
        serde_json::from_slice(&a.body).map_err(|e| AwsError::local("Response", format!("{op}: the answer is not JSON: {e}")))
    }
}

/// A request that got no (whole) answer: timed out, or the connection failed while sending or
/// reading (worth a retry); anything else (a request that could not be built, an answer that
/// could not be decoded) would fail again.
fn transport_error(e: &reqwest::Error) -> AwsError {
    let mut message = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        message.push_str(&format!(": {s}"));
        src = s.source();
    }
    let code = if e.is_timeout() {
        "Timeout"
    } else if e.is_connect() || e.is_request() || e.is_body() {
        "Connection"
    } else {
        "Request"
    };
    AwsError::local(code, message)
}

/// The error of a JSON protocol's answer (awsJson 1.0/1.1, restJson1). The code comes from the
/// `x-amzn-errortype` header or the body's `__type`/`code`, either possibly qualified
/// (`com.amazonaws.sqs#QueueDoesNotExist`, `NotFoundException:http://...`).
fn json_error(_op: &str, status: u16, headers: &http::HeaderMap, body: &[u8]) -> Option<AwsError> {
    if (200..300).contains(&status) {
        return None;
    }
    let doc: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let field = |names: &[&str]| names.iter().find_map(|n| doc.get(*n).and_then(serde_json::Value::as_str)).map(String::from);
    let raw =
        headers.get("x-amzn-errortype").and_then(|v| v.to_str().ok()).map(String::from).or_else(|| field(&["__type", "code", "Code"]));
    let code = raw
        .as_deref()
        .map(|r| r.split(':').next().unwrap_or(r))
        .map(|r| r.rsplit('#').next().unwrap_or(r))
        .filter(|c| !c.is_empty())
        .map(String::from)
        .unwrap_or_else(|| if status == 404 { "NotFound".into() } else { format!("HTTP{status}") });
    Some(AwsError { status: Some(status), code, message: field(&["message", "Message"]).unwrap_or_default() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_errors_name_their_code_from_any_of_the_protocols() {
        let none = http::HeaderMap::new();
        let e = json_error("SendMessage", 400, &none, br#"{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"gone"}"#).unwrap();
        assert_eq!((e.code.as_str(), e.message.as_str(), e.transient()), ("QueueDoesNotExist", "gone", false));
        let mut h = http::HeaderMap::new();
        h.insert("x-amzn-errortype", "NotFoundException:http://internal.amazon.com/coral/com.amazon.coral.service/".parse().unwrap());
        let e = json_error("GetEmailIdentity", 404, &h, br#"{"message":"no identity"}"#).unwrap();
        assert_eq!(e.code, "NotFoundException");
        assert!(json_error("GetSecretValue", 400, &none, br#"{"__type":"ThrottlingException"}"#).unwrap().transient());
        assert!(json_error("SendMessage", 503, &none, b"<html>").unwrap().transient());
        assert_eq!(json_error("X", 404, &none, b"").unwrap().code, "NotFound");
        assert!(json_error("X", 200, &none, b"{}").is_none());
    }
}
