//! Secrets Manager in its JSON protocol (awsJson 1.1): reading a secret's string.

use super::{Aws, AwsError, Call};
use aws_sigv4::http_request::SigningSettings;
use serde_json::json;

/// The Secrets Manager client of a container (`Aws::secrets`).
pub struct Secrets<'a> {
    pub(super) aws: &'a Aws,
}

impl Secrets<'_> {
    /// The secret's current string value (`None` when it holds binary data only).
    pub async fn get_string(&self, secret_id: &str) -> Result<Option<String>, AwsError> {
        let call = Call {
            service: "Secrets Manager",
            signing_name: "secretsmanager",
            op: "GetSecretValue",
            method: "POST",
            url: format!("{}/", self.aws.endpoint("secretsmanager")),
            headers: vec![("content-type", "application/x-amz-json-1.1"), ("x-amz-target", "secretsmanager.GetSecretValue")],
            body: json!({"SecretId": secret_id}).to_string().into_bytes(),
            settings: SigningSettings::default(),
            stream: false,
            error: super::json_error,
        };
        let out = self.aws.json(call).await?;
        Ok(out["SecretString"].as_str().map(String::from))
    }
}
