//! Secrets Manager in its JSON protocol (awsJson 1.1): reading a secret's string.

use super::{Aws, AwsError};
use serde_json::json;

/// The Secrets Manager client of a container (`Aws::secrets`).
pub struct Secrets<'a> {
    pub(super) aws: &'a Aws,
}

impl Secrets<'_> {
    /// The secret's current string value (`None` when it holds binary data only).
    pub async fn get_string(&self, secret_id: &str) -> Result<Option<String>, AwsError> {
        let url = format!("{}/", self.aws.endpoint("secretsmanager"));
        let headers = vec![("content-type", "application/x-amz-json-1.1"), ("x-amz-target", "secretsmanager.GetSecretValue")];
        let input = json!({"SecretId": secret_id});
        let out = self.aws.json(("Secrets Manager", "secretsmanager"), "GetSecretValue", "POST", url, headers, Some(input)).await?;
        Ok(out["SecretString"].as_str().map(String::from))
    }
}
