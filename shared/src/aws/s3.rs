//! S3, for the object operations the functions use: put, get, head and delete an object, a
//! multipart upload, and presigned GET links. S3 wants its own signing (the path escaped
//! once, the payload's hash in a header) and answers in XML.

use super::{Aws, AwsError, Call};
use crate::metrics::record_action;
use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignatureLocation, SigningSettings, UriPathNormalizationMode,
};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use std::time::{Duration, SystemTime};

/// Characters S3 (SigV4) leaves unescaped in a query value: RFC 3986's unreserved set.
const QUERY: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');
/// In an object key `/` separates segments and stays as is.
const KEY: &AsciiSet = &QUERY.remove(b'/');

const XMLNS: &str = "http://s3.amazonaws.com/doc/2006-03-01/";

impl AwsError {
    /// The object does not exist (GET's NoSuchKey; HEAD answers a bare 404).
    pub fn is_not_found(&self) -> bool {
        self.code == "NoSuchKey" || self.code == "NotFound"
    }
}

/// The S3 client of a container (`Aws::s3`).
pub struct S3<'a> {
    pub(super) aws: &'a Aws,
}

/// An S3 request before it is addressed and signed.
struct Op<'a> {
    op: &'static str,
    method: &'a str,
    bucket: &'a str,
    key: &'a str,
    query: Vec<(&'a str, &'a str)>,
    headers: Vec<(&'a str, &'a str)>,
    body: Vec<u8>,
}

impl<'a> Op<'a> {
    /// A call without query, headers or body; the operations add theirs.
    fn new(op: &'static str, method: &'a str, bucket: &'a str, key: &'a str) -> Self {
        Self { op, method, bucket, key, query: vec![], headers: vec![], body: vec![] }
    }
}

impl S3<'_> {
    pub async fn put_object(&self, bucket: &str, key: &str, body: Vec<u8>, headers: &[(&str, &str)]) -> Result<(), AwsError> {
        if headers.iter().any(|(h, _)| h.eq_ignore_ascii_case("x-amz-tagging")) {
            // Tags set with the object need this permission as well.
            record_action("s3:PutObjectTagging");
        }
        let call = Op { headers: headers.to_vec(), body, ..Op::new("PutObject", "PUT", bucket, key) };
        self.call(call).await.map(|_| ())
    }

    /// Remove every tag of an object (the lifecycle rules that match tags no longer do).
    pub async fn delete_object_tagging(&self, bucket: &str, key: &str) -> Result<(), AwsError> {
        let call = Op { query: vec![("tagging", "")], ..Op::new("DeleteObjectTagging", "DELETE", bucket, key) };
        self.call(call).await.map(|_| ())
    }

    /// The object's bytes, or `None` when there is no such key.
    pub async fn get_object(&self, bucket: &str, key: &str) -> Result<Option<Vec<u8>>, AwsError> {
        match self.call(Op::new("GetObject", "GET", bucket, key)).await {
            Ok(a) => Ok(Some(a.body)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether the object exists.
    pub async fn head_object(&self, bucket: &str, key: &str) -> Result<bool, AwsError> {
        match self.call(Op::new("HeadObject", "HEAD", bucket, key)).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Deleting a key that does not exist succeeds, as in S3.
    pub async fn delete_object(&self, bucket: &str, key: &str) -> Result<(), AwsError> {
        self.call(Op::new("DeleteObject", "DELETE", bucket, key)).await.map(|_| ())
    }

    /// Start a multipart upload; answers its upload id.
    pub async fn create_multipart_upload(&self, bucket: &str, key: &str, headers: &[(&str, &str)]) -> Result<String, AwsError> {
        let call = Op { query: vec![("uploads", "")], headers: headers.to_vec(), ..Op::new("CreateMultipartUpload", "POST", bucket, key) };
        let a = self.call(call).await?;
        xml_text(&a.body, "UploadId")
            .filter(|id| !id.is_empty())
            .ok_or_else(|| AwsError::local("CreateMultipartUpload", "no UploadId in the answer"))
    }

    /// Upload part `n` (from 1); answers its ETag.
    pub async fn upload_part(&self, bucket: &str, key: &str, upload_id: &str, n: u32, body: Vec<u8>) -> Result<String, AwsError> {
        let n = n.to_string();
        let call = Op { query: vec![("partNumber", &n), ("uploadId", upload_id)], body, ..Op::new("UploadPart", "PUT", bucket, key) };
        let a = self.call(call).await?;
        a.headers
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(String::from)
            .ok_or_else(|| AwsError::local("UploadPart", "no ETag in the answer"))
    }

    /// Join the parts, `(number, ETag)` in order, into the object.
    pub async fn complete_multipart_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: &[(u32, String)],
    ) -> Result<(), AwsError> {
        let mut xml = format!(r#"<CompleteMultipartUpload xmlns="{XMLNS}">"#);
        for (n, etag) in parts {
            xml.push_str(&format!("<Part><PartNumber>{n}</PartNumber><ETag>{}</ETag></Part>", xml_escape(etag)));
        }
        xml.push_str("</CompleteMultipartUpload>");
        let call = Op {
            query: vec![("uploadId", upload_id)],
            headers: vec![("content-type", "application/xml")],
            body: xml.into_bytes(),
            ..Op::new("CompleteMultipartUpload", "POST", bucket, key)
        };
        self.call(call).await.map(|_| ())
    }

    pub async fn abort_multipart_upload(&self, bucket: &str, key: &str, upload_id: &str) -> Result<(), AwsError> {
        let call = Op { query: vec![("uploadId", upload_id)], ..Op::new("AbortMultipartUpload", "DELETE", bucket, key) };
        self.call(call).await.map(|_| ())
    }

    /// Create a bucket (the admin CLI and the local stack; template.yaml makes the deployed
    /// ones). A bucket that exists and is ours already is fine.
    pub async fn create_bucket(&self, bucket: &str) -> Result<(), AwsError> {
        let body = if self.aws.region == "us-east-1" {
            vec![]
        } else {
            format!(
                r#"<CreateBucketConfiguration xmlns="{XMLNS}"><LocationConstraint>{}</LocationConstraint></CreateBucketConfiguration>"#,
                self.aws.region
            )
            .into_bytes()
        };
        let call = Op { body, ..Op::new("CreateBucket", "PUT", bucket, "") };
        match self.call(call).await {
            // us-east-1 answers BucketAlreadyExists to its owner as well.
            Err(e) if e.code == "BucketAlreadyOwnedByYou" || e.code == "BucketAlreadyExists" => Ok(()),
            r => r.map(|_| ()),
        }
    }

    /// One lifecycle rule on the bucket: objects under `prefix` expire after `days`.
    pub async fn put_bucket_expiry(&self, bucket: &str, prefix: &str, days: u32) -> Result<(), AwsError> {
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
        let call = Op {
            query: vec![("lifecycle", "")],
            headers,
            body: xml.into_bytes(),
            ..Op::new("PutBucketLifecycleConfiguration", "PUT", bucket, "")
        };
        self.call(call).await.map(|_| ())
    }

    /// A presigned GET link valid for `expires`, with S3's `response-*` overrides
    /// (`response-content-type`, ...). The link carries the caller's authority to read the
    /// object, so it records `s3:GetObject`.
    pub async fn presigned_get(&self, bucket: &str, key: &str, response: &[(&str, &str)], expires: Duration) -> Result<String, AwsError> {
        record_action("s3:GetObject");
        let mut settings = signing_settings();
        settings.signature_location = SignatureLocation::QueryParams;
        settings.expires_in = Some(expires);
        settings.payload_checksum_kind = PayloadChecksumKind::NoHeader;
        let url = self.url(bucket, key, response);
        self.signed_url(&url, settings, SystemTime::now()).await
    }

    async fn signed_url(&self, url: &str, settings: SigningSettings, at: SystemTime) -> Result<String, AwsError> {
        let call = Call { url: url.to_string(), settings, ..self.request(Op::new("GetObject", "GET", "", "")) };
        let instructions = self.aws.signature(&call, SignableBody::UnsignedPayload, at).await?;
        let mut url = url.to_string();
        for (i, (k, v)) in instructions.params().iter().enumerate() {
            let sep = if i == 0 && !url.contains('?') { '?' } else { '&' };
            url.push_str(&format!("{sep}{k}={}", utf8_percent_encode(v, QUERY)));
        }
        Ok(url)
    }

    fn url(&self, bucket: &str, key: &str, query: &[(&str, &str)]) -> String {
        let bucket_only = key.is_empty();
        let key = utf8_percent_encode(key, KEY);
        let mut url = match &self.aws.endpoint {
            // The bucket itself (key ""): `/bucket`, not `/bucket/`.
            Some(ep) if bucket_only => format!("{ep}/{bucket}"),
            Some(ep) => format!("{ep}/{bucket}/{key}"),
            // A bucket name with dots does not match S3's wildcard certificate as a host name.
            None if bucket.contains('.') => format!("https://s3.{}.amazonaws.com/{bucket}/{key}", self.aws.region),
            None => format!("https://{bucket}.s3.{}.amazonaws.com/{key}", self.aws.region),
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

    /// One call: addressed, signed the S3 way, and its errors read from S3's XML.
    async fn call(&self, op: Op<'_>) -> Result<super::Answer, AwsError> {
        self.aws.call(self.request(op)).await
    }

    fn request<'a>(&self, op: Op<'a>) -> Call<'a> {
        Call {
            service: "S3",
            signing_name: "s3",
            op: op.op,
            method: op.method,
            url: self.url(op.bucket, op.key, &op.query),
            headers: op.headers,
            body: op.body,
            settings: signing_settings(),
            // An object's bytes are read after the attempts; the other answers are small XML.
            stream: op.op == "GetObject",
            error: xml_error,
        }
    }
}

/// S3's error in an answer; CompleteMultipartUpload may answer 200 with an error in the body.
fn xml_error(op: &str, status: u16, _headers: &http::HeaderMap, body: &[u8]) -> Option<AwsError> {
    let failed = !(200..300).contains(&status) || (op == "CompleteMultipartUpload" && xml_text(body, "Code").is_some());
    if !failed {
        return None;
    }
    let code = xml_text(body, "Code").unwrap_or_else(|| if status == 404 { "NotFound".into() } else { format!("HTTP{status}") });
    Some(AwsError { status: Some(status), code, message: xml_text(body, "Message").unwrap_or_default() })
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
    use aws_config::SdkConfig;
    use aws_credential_types::provider::SharedCredentialsProvider;

    fn client(endpoint: Option<&str>) -> Aws {
        let creds = aws_credential_types::Credentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None, None, "test");
        let mut sdk =
            SdkConfig::builder().region(aws_config::Region::new("us-east-1")).credentials_provider(SharedCredentialsProvider::new(creds));
        if let Some(ep) = endpoint {
            sdk = sdk.endpoint_url(ep);
        }
        Aws::new(&sdk.build(), Duration::from_secs(5))
    }

    #[test]
    fn urls_escape_keys_once_and_keep_their_slashes() {
        let aws = client(None);
        let s = aws.s3();
        assert_eq!(s.url("exports", "ws_1/a b+ü.json", &[]), "https://exports.s3.us-east-1.amazonaws.com/ws_1/a%20b%2B%C3%BC.json");
        assert_eq!(s.url("my.bucket", "k", &[("uploads", "")]), "https://s3.us-east-1.amazonaws.com/my.bucket/k?uploads");
        let local = client(Some("http://127.0.0.1:5000/"));
        assert_eq!(
            local.s3().url("b", "k", &[("response-content-type", "application/json"), ("partNumber", "2")]),
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
        let aws = Aws::new(&sdk, Duration::from_secs(5));
        let s = aws.s3();
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
        let e = AwsError { status: Some(404), code: "NoSuchKey".into(), message: String::new() };
        assert!(e.is_not_found() && !e.transient());
        assert!(!AwsError { status: Some(404), code: "NoSuchBucket".into(), message: String::new() }.is_not_found());
        assert!(AwsError { status: Some(503), code: "SlowDown".into(), message: String::new() }.transient());
        assert!(AwsError::local("Timeout", "x").transient());
        // CompleteMultipartUpload's error inside a 200 is an error, retried like a 500.
        let in_200 = xml_error("CompleteMultipartUpload", 200, &http::HeaderMap::new(), b"<Error><Code>InternalError</Code></Error>");
        assert!(in_200.is_some_and(|e| e.transient()));
        assert!(xml_error("PutObject", 200, &http::HeaderMap::new(), b"").is_none());
        assert_eq!(xml_error("HeadObject", 404, &http::HeaderMap::new(), b"").map(|e| e.is_not_found()), Some(true));
        assert!(!AwsError { status: Some(403), code: "AccessDenied".into(), message: String::new() }.transient());
    }
}
