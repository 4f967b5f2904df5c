//! S3, for the object operations the functions use: put, get, head and delete an object, a
//! multipart upload, and presigned GET links. Requests are signed with SigV4 by `aws-sigv4`
//! (the signer the SDK itself uses) and sent over the project's reqwest client.
//!
//! Why not `aws-sdk-s3`: for these nine calls it linked S3's endpoint rules, S3 Express
//! session credentials, flexible checksums and the (de)serialisers of a hundred operations
//! into every function that touched a bucket, most of the gap between those functions and
//! the 6 MB goal (docs/benchmarks.md). Behaviour follows the SDK clients of `App`: each
//! attempt gets half the dependency budget, connecting at most a second, transient failures
//! (connection, timeout, 5xx, throttling) are tried up to three times within the budget, and
//! each call records its IAM action for the policy check.

use crate::metrics::{iam_action, record_action};
use aws_config::SdkConfig;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SignatureLocation, SigningInstructions, SigningSettings,
    UriPathNormalizationMode, sign,
};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

/// Characters S3 (SigV4) leaves unescaped in a query value: RFC 3986's unreserved set.
const QUERY: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');
/// In an object key `/` separates segments and stays as is.
const KEY: &AsciiSet = &QUERY.remove(b'/');

const XMLNS: &str = "http://s3.amazonaws.com/doc/2006-03-01/";

/// Attempts of one call (the SDK's standard retry mode makes three).
const ATTEMPTS: u32 = 3;

/// A failed S3 call: S3's error code and message, or what went wrong on the way.
#[derive(Debug, Clone)]
pub struct S3Error {
    pub status: Option<u16>,
    pub code: String,
    pub message: String,
}

impl S3Error {
    fn local(code: &str, message: impl std::fmt::Display) -> Self {
        Self { status: None, code: code.into(), message: message.to_string() }
    }
    /// Worth another attempt: no answer, a server error or throttling. By code too, since
    /// CompleteMultipartUpload reports an `InternalError` inside a 200.
    fn transient(&self) -> bool {
        const CODES: &[&str] =
            &["Timeout", "Connection", "InternalError", "SlowDown", "RequestTimeout", "Throttling", "RequestLimitExceeded"];
        CODES.contains(&self.code.as_str()) || self.status.is_some_and(|s| s >= 500 || s == 429)
    }
    /// The object does not exist (GET's NoSuchKey; HEAD answers a bare 404).
    pub fn is_not_found(&self) -> bool {
        self.code == "NoSuchKey" || self.code == "NotFound"
    }
}

impl std::fmt::Display for S3Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.status {
            Some(s) => write!(f, "{} ({s}): {}", self.code, self.message),
            None => write!(f, "{}: {}", self.code, self.message),
        }
    }
}

impl std::error::Error for S3Error {}

/// The S3 client of a container, built from the same configuration as the SDK clients.
pub struct S3 {
    credentials: Option<SharedCredentialsProvider>,
    region: String,
    /// A custom endpoint (moto locally) serves buckets by path; AWS by host name.
    endpoint: Option<String>,
    dependency: Duration,
    /// Built on the first call: building it loads the trust store.
    http: OnceLock<Result<reqwest::Client, String>>,
}

struct Call<'a> {
    /// The SDK's operation name, for the IAM action and errors.
    op: &'static str,
    method: &'a str,
    bucket: &'a str,
    key: &'a str,
    query: Vec<(&'a str, &'a str)>,
    headers: Vec<(&'a str, &'a str)>,
    body: Vec<u8>,
}

impl<'a> Call<'a> {
    /// A call without query, headers or body; the operations add theirs.
    fn new(op: &'static str, method: &'a str, bucket: &'a str, key: &'a str) -> Self {
        Self { op, method, bucket, key, query: vec![], headers: vec![], body: vec![] }
    }
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

impl S3 {
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

    pub async fn put_object(&self, bucket: &str, key: &str, body: Vec<u8>, headers: &[(&str, &str)]) -> Result<(), S3Error> {
        let call = Call { headers: headers.to_vec(), body, ..Call::new("PutObject", "PUT", bucket, key) };
        self.call(call).await.map(|_| ())
    }

    /// The object's bytes, or `None` when there is no such key.
    pub async fn get_object(&self, bucket: &str, key: &str) -> Result<Option<Vec<u8>>, S3Error> {
        match self.call(Call::new("GetObject", "GET", bucket, key)).await {
            Ok(a) => Ok(Some(a.body)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether the object exists.
    pub async fn head_object(&self, bucket: &str, key: &str) -> Result<bool, S3Error> {
        match self.call(Call::new("HeadObject", "HEAD", bucket, key)).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Deleting a key that does not exist succeeds, as in S3.
    pub async fn delete_object(&self, bucket: &str, key: &str) -> Result<(), S3Error> {
        self.call(Call::new("DeleteObject", "DELETE", bucket, key)).await.map(|_| ())
    }

    /// Start a multipart upload; answers its upload id.
    pub async fn create_multipart_upload(&self, bucket: &str, key: &str, headers: &[(&str, &str)]) -> Result<String, S3Error> {
        let call =
            Call { query: vec![("uploads", "")], headers: headers.to_vec(), ..Call::new("CreateMultipartUpload", "POST", bucket, key) };
        let a = self.call(call).await?;
        xml_text(&a.body, "UploadId")
            .filter(|id| !id.is_empty())
            .ok_or_else(|| S3Error::local("CreateMultipartUpload", "no UploadId in the answer"))
    }

    /// Upload part `n` (from 1); answers its ETag.
    pub async fn upload_part(&self, bucket: &str, key: &str, upload_id: &str, n: u32, body: Vec<u8>) -> Result<String, S3Error> {
        let n = n.to_string();
        let call = Call { query: vec![("partNumber", &n), ("uploadId", upload_id)], body, ..Call::new("UploadPart", "PUT", bucket, key) };
        let a = self.call(call).await?;
        a.headers
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(String::from)
            .ok_or_else(|| S3Error::local("UploadPart", "no ETag in the answer"))
    }

    /// Join the parts, `(number, ETag)` in order, into the object.
    pub async fn complete_multipart_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: &[(u32, String)],
    ) -> Result<(), S3Error> {
        let mut xml = format!(r#"<CompleteMultipartUpload xmlns="{XMLNS}">"#);
        for (n, etag) in parts {
            xml.push_str(&format!("<Part><PartNumber>{n}</PartNumber><ETag>{}</ETag></Part>", xml_escape(etag)));
        }
        xml.push_str("</CompleteMultipartUpload>");
        let call = Call {
            query: vec![("uploadId", upload_id)],
            headers: vec![("content-type", "application/xml")],
            body: xml.into_bytes(),
            ..Call::new("CompleteMultipartUpload", "POST", bucket, key)
        };
        self.call(call).await.map(|_| ())
    }

    pub async fn abort_multipart_upload(&self, bucket: &str, key: &str, upload_id: &str) -> Result<(), S3Error> {
        let call = Call { query: vec![("uploadId", upload_id)], ..Call::new("AbortMultipartUpload", "DELETE", bucket, key) };
        self.call(call).await.map(|_| ())
    }

    /// Create a bucket (the admin CLI and the local stack; template.yaml makes the deployed
    /// ones). A bucket that exists and is ours already is fine.
    pub async fn create_bucket(&self, bucket: &str) -> Result<(), S3Error> {
        let body = if self.region == "us-east-1" {
            vec![]
        } else {
            format!(
                r#"<CreateBucketConfiguration xmlns="{XMLNS}"><LocationConstraint>{}</LocationConstraint></CreateBucketConfiguration>"#,
                self.region
            )
            .into_bytes()
        };
        let call = Call { body, ..Call::new("CreateBucket", "PUT", bucket, "") };
        match self.call(call).await {
            // us-east-1 answers BucketAlreadyExists to its owner as well.
            Err(e) if e.code == "BucketAlreadyOwnedByYou" || e.code == "BucketAlreadyExists" => Ok(()),
            r => r.map(|_| ()),
        }
    }

    /// One lifecycle rule on the bucket: objects under `prefix` expire after `days`.
    pub async fn put_bucket_expiry(&self, bucket: &str, prefix: &str, days: u32) -> Result<(), S3Error> {
        use base64::Engine;
        use sha2::Digest;
        let id = format!("expire-{}", prefix.trim_end_matches('/'));
        let xml = format!(
            r#"<LifecycleConfiguration xmlns="{XMLNS}"><Rule><ID>{}</ID><Filter><Prefix>{}</Prefix></Filter><Status>Enabled</Status><Expiration><Days>{days}</Days></Expiration></Rule></LifecycleConfiguration>"#,
            xml_escape(&id),
            xml_escape(prefix)
        );
        // S3 wants a checksum of this body (Content-MD5 or a flexible one).
        let sum = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(xml.as_bytes()));
        let headers =
            vec![("content-type", "application/xml"), ("x-amz-sdk-checksum-algorithm", "SHA256"), ("x-amz-checksum-sha256", sum.as_str())];
        let call = Call {
            query: vec![("lifecycle", "")],
            headers,
            body: xml.into_bytes(),
            ..Call::new("PutBucketLifecycleConfiguration", "PUT", bucket, "")
        };
        self.call(call).await.map(|_| ())
    }

    /// A presigned GET link valid for `expires`, with S3's `response-*` overrides
    /// (`response-content-type`, ...). The link carries the caller's authority to read the
    /// object, so it records `s3:GetObject`.
    pub async fn presigned_get(&self, bucket: &str, key: &str, response: &[(&str, &str)], expires: Duration) -> Result<String, S3Error> {
        record_action("s3:GetObject");
        let mut settings = signing_settings();
        settings.signature_location = SignatureLocation::QueryParams;
        settings.expires_in = Some(expires);
        settings.payload_checksum_kind = PayloadChecksumKind::NoHeader;
        let url = self.url(bucket, key, response);
        self.signed_url(&url, settings, SystemTime::now()).await
    }

    async fn signed_url(&self, url: &str, settings: SigningSettings, at: SystemTime) -> Result<String, S3Error> {
        let instructions = self.signature("GET", url, &[], SignableBody::UnsignedPayload, settings, at).await?;
        let mut url = url.to_string();
        for (i, (k, v)) in instructions.params().iter().enumerate() {
            let sep = if i == 0 && !url.contains('?') { '?' } else { '&' };
            url.push_str(&format!("{sep}{k}={}", utf8_percent_encode(v, QUERY)));
        }
        Ok(url)
    }

    /// SigV4 of a request with the container's current credentials: the headers to add (or, for
    /// a presigned link, the query parameters).
    async fn signature(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: SignableBody<'_>,
        settings: SigningSettings,
        at: SystemTime,
    ) -> Result<SigningInstructions, S3Error> {
        let provider = self.credentials.as_ref().ok_or_else(|| S3Error::local("Credentials", "no credentials provider configured"))?;
        let identity: aws_smithy_runtime_api::client::identity::Identity =
            provider.provide_credentials().await.map_err(|e| S3Error::local("Credentials", e))?.into();
        let params = aws_sigv4::sign::v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name("s3")
            .time(at)
            .settings(settings)
            .build()
            .map_err(|e| S3Error::local("Signing", e))?
            .into();
        let signable = SignableRequest::new(method, url, headers.iter().copied(), body).map_err(|e| S3Error::local("Signing", e))?;
        Ok(sign(signable, &params).map_err(|e| S3Error::local("Signing", e))?.into_parts().0)
    }

    fn url(&self, bucket: &str, key: &str, query: &[(&str, &str)]) -> String {
        let bucket_only = key.is_empty();
        let key = utf8_percent_encode(key, KEY);
        let mut url = match &self.endpoint {
            // The bucket itself (key ""): `/bucket`, not `/bucket/`.
            Some(ep) if bucket_only => format!("{ep}/{bucket}"),
            Some(ep) => format!("{ep}/{bucket}/{key}"),
            // A bucket name with dots does not match S3's wildcard certificate as a host name.
            None if bucket.contains('.') => format!("https://s3.{}.amazonaws.com/{bucket}/{key}", self.region),
            None => format!("https://{bucket}.s3.{}.amazonaws.com/{key}", self.region),
        };
        for (i, (k, v)) in query.iter().enumerate() {
            url.push(if i == 0 { '?' } else { '&' });
            url.push_str(&utf8_percent_encode(k, QUERY).to_string());
            if !v.is_empty() {
                url.push('=');
                url.push_str(&utf8_percent_encode(v, QUERY).to_string());
            }
        }
        url
    }

    fn http(&self) -> Result<&reqwest::Client, S3Error> {
        // The read timeout bounds a stall between reads (of a large object, too), not a transfer.
        let (connect, read) = (self.dependency.min(Duration::from_secs(1)), self.dependency / 2);
        let built = self.http.get_or_init(|| crate::sdk_http::aws_http_client(Some(connect), Some(read)));
        built.as_ref().map_err(|e| S3Error::local("Connection", e))
    }

    /// One call: its attempts, up to S3's answer, within the dependency budget; then the
    /// answer's body, which may be large (an inbound message of 30 MB) and so is bounded by the
    /// client's read timeout (a stall) instead of the budget.
    async fn call(&self, call: Call<'_>) -> Result<Answer, S3Error> {
        if let Some(action) = iam_action("S3", call.op) {
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
            Err(last.unwrap_or_else(|| S3Error::local("Timeout", "no attempt made")))
        };
        let named = |e: S3Error| S3Error { message: format!("{op}: {}", e.message), ..e };
        let (headers, body) = match tokio::time::timeout(self.dependency, attempts).await {
            Ok(r) => r.map_err(named)?,
            Err(_) => return Err(S3Error::local("Timeout", format!("{op} took longer than {} ms", self.dependency.as_millis()))),
        };
        let body = match body {
            Body::Read(b) => b,
            Body::Pending(resp) => resp.bytes().await.map_err(|e| named(transport_error(&e)))?.to_vec(),
        };
        Ok(Answer { headers, body })
    }

    async fn attempt(&self, call: &Call<'_>) -> Result<(http::HeaderMap, Body), S3Error> {
        let url = self.url(call.bucket, call.key, &call.query);
        let body = SignableBody::Bytes(&call.body);
        let instructions = self.signature(call.method, &url, &call.headers, body, signing_settings(), SystemTime::now()).await?;
        let method = reqwest::Method::from_bytes(call.method.as_bytes()).map_err(|e| S3Error::local("Request", e))?;
        let mut req = self.http()?.request(method, &url);
        for (k, v) in call.headers.iter().copied().chain(instructions.headers()) {
            req = req.header(k, v);
        }
        let half = self.dependency / 2;
        let resp = match tokio::time::timeout(half, req.body(call.body.clone()).send()).await {
            Ok(r) => r.map_err(|e| transport_error(&e))?,
            Err(_) => return Err(S3Error::local("Timeout", format!("no answer within {} ms", half.as_millis()))),
        };
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        // An object's bytes are read after the attempts; the other answers are small XML.
        if (200..300).contains(&status) && call.op == "GetObject" {
            return Ok((headers, Body::Pending(resp)));
        }
        let body = resp.bytes().await.map_err(|e| transport_error(&e))?.to_vec();
        // CompleteMultipartUpload may answer 200 with an error in the body.
        let failed = !(200..300).contains(&status) || (call.op == "CompleteMultipartUpload" && xml_text(&body, "Code").is_some());
        if failed {
            let code = xml_text(&body, "Code").unwrap_or_else(|| if status == 404 { "NotFound".into() } else { format!("HTTP{status}") });
            return Err(S3Error { status: Some(status), code, message: xml_text(&body, "Message").unwrap_or_default() });
        }
        Ok((headers, Body::Read(body)))
    }
}

/// A request that got no answer: timed out, or the connection failed (both worth a retry).
fn transport_error(e: &reqwest::Error) -> S3Error {
    let mut message = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        message.push_str(&format!(": {s}"));
        src = s.source();
    }
    S3Error::local(if e.is_timeout() { "Timeout" } else { "Connection" }, message)
}

/// How S3 wants requests signed: the path escaped once, as sent, and the payload's hash in
/// `x-amz-content-sha256`.
fn signing_settings() -> SigningSettings {
    let mut s = SigningSettings::default();
    s.percent_encoding_mode = PercentEncodingMode::Single;
    s.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    s.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    s
}

/// The text of the first `<tag>` in an S3 XML answer (flat documents: UploadId, Code, Message).
fn xml_text(body: &[u8], tag: &str) -> Option<String> {
    let body = std::str::from_utf8(body).ok()?;
    let start = body.find(&format!("<{tag}>"))? + tag.len() + 2;
    let end = start + body[start..].find(&format!("</{tag}>"))?;
    Some(xml_unescape(&body[start..end]))
}

fn xml_unescape(s: &str) -> String {
    s.replace("&quot;", "\"").replace("&apos;", "'").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(endpoint: Option<&str>) -> S3 {
        let creds = aws_credential_types::Credentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None, None, "test");
        let mut sdk =
            SdkConfig::builder().region(aws_config::Region::new("us-east-1")).credentials_provider(SharedCredentialsProvider::new(creds));
        if let Some(ep) = endpoint {
            sdk = sdk.endpoint_url(ep);
        }
        S3::new(&sdk.build(), Duration::from_secs(5))
    }

    #[test]
    fn urls_escape_keys_once_and_keep_their_slashes() {
        let s = client(None);
        assert_eq!(s.url("exports", "ws_1/a b+ü.json", &[]), "https://exports.s3.us-east-1.amazonaws.com/ws_1/a%20b%2B%C3%BC.json");
        assert_eq!(s.url("my.bucket", "k", &[("uploads", "")]), "https://s3.us-east-1.amazonaws.com/my.bucket/k?uploads");
        let local = client(Some("http://127.0.0.1:5000/"));
        assert_eq!(
            local.url("b", "k", &[("response-content-type", "application/json"), ("partNumber", "2")]),
            "http://127.0.0.1:5000/b/k?response-content-type=application%2Fjson&partNumber=2"
        );
    }

    /// AWS's documented presigned GET example (S3 User Guide, "Authenticating Requests: Using
    /// Query Parameters"): the same credentials, time and object give the same signature.
    #[tokio::test]
    async fn presigned_links_match_the_aws_documented_example() {
        let creds =
            aws_credential_types::Credentials::new("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", None, None, "doc");
        let sdk = SdkConfig::builder()
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(SharedCredentialsProvider::new(creds))
            .build();
        let s = S3::new(&sdk, Duration::from_secs(5));
        let mut settings = signing_settings();
        settings.signature_location = SignatureLocation::QueryParams;
        settings.expires_in = Some(Duration::from_secs(86_400));
        settings.payload_checksum_kind = PayloadChecksumKind::NoHeader;
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_369_353_600); // 2013-05-24T00:00:00Z
        let url = s.signed_url("https://examplebucket.s3.amazonaws.com/test.txt", settings, at).await.unwrap();
        assert!(url.contains("X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"), "{url}");
        assert!(url.contains("X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"), "{url}");
    }

    #[test]
    fn xml_answers_and_errors_parse() {
        let body = b"<InitiateMultipartUploadResult><Bucket>b</Bucket><UploadId>a&amp;b</UploadId></InitiateMultipartUploadResult>";
        assert_eq!(xml_text(body, "UploadId").as_deref(), Some("a&b"));
        assert_eq!(xml_text(b"<Error><Code>NoSuchKey</Code></Error>", "Message"), None);
        let e = S3Error { status: Some(404), code: "NoSuchKey".into(), message: String::new() };
        assert!(e.is_not_found() && !e.transient());
        assert!(!S3Error { status: Some(404), code: "NoSuchBucket".into(), message: String::new() }.is_not_found());
        assert!(S3Error { status: Some(503), code: "SlowDown".into(), message: String::new() }.transient());
        assert!(S3Error::local("Timeout", "x").transient());
        // CompleteMultipartUpload's error inside a 200 is retried like a 500.
        assert!(S3Error { status: Some(200), code: "InternalError".into(), message: String::new() }.transient());
        assert!(!S3Error { status: Some(403), code: "AccessDenied".into(), message: String::new() }.transient());
    }
}
