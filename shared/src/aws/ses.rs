//! SES v2 identity management in its REST-JSON protocol: the sending domains' create, read and
//! delete (the email sender keeps the SDK's client for SendEmail).

use super::{Aws, AwsError};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};

/// The tag key of the SES identities a stack manages (template.yaml's policy names it too).
pub const IDENTITY_TAG_KEY: &str = "platform-stack";
/// The tag key naming the workspace an identity was created for: it marks an identity the API
/// made (one whose creation answer was lost is recognised by it and taken over).
pub const WORKSPACE_TAG_KEY: &str = "platform-workspace";

/// The SES client of a container (`Aws::ses`).
pub struct Ses<'a> {
    pub(super) aws: &'a Aws,
}

/// What SES says about an identity.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    /// Email may be sent from it.
    pub verified_for_sending: bool,
    /// `PENDING`, `SUCCESS`, `FAILED`, `TEMPORARY_FAILURE` or `NOT_STARTED` (absent on create).
    pub verification_status: Option<String>,
    /// The Easy DKIM tokens to publish as CNAME records.
    pub dkim_tokens: Vec<String>,
    /// Its tags (GetEmailIdentity answers them; CreateEmailIdentity does not).
    pub tags: Vec<(String, String)>,
}

impl Identity {
    fn from_json(v: &Value) -> Self {
        let tokens = v["DkimAttributes"]["Tokens"].as_array().map(Vec::as_slice).unwrap_or_default();
        Self {
            verified_for_sending: v["VerifiedForSendingStatus"].as_bool().unwrap_or(false),
            verification_status: v["VerificationStatus"].as_str().map(String::from),
            dkim_tokens: tokens.iter().filter_map(|t| t.as_str().map(String::from)).collect(),
            tags: v["Tags"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .filter_map(|t| Some((t["Key"].as_str()?.to_string(), t["Value"].as_str()?.to_string())))
                .collect(),
        }
    }
}

impl Ses<'_> {
    async fn call(&self, op: &'static str, method: &str, identity: Option<&str>, body: Option<Value>) -> Result<Value, AwsError> {
        let mut url = format!("{}/v2/email/identities", self.aws.endpoint("email"));
        if let Some(name) = identity {
            url.push('/');
            url.push_str(&utf8_percent_encode(name, NON_ALPHANUMERIC).to_string());
        }
        let headers = if body.is_some() { vec![("content-type", "application/json")] } else { vec![] };
        self.aws.json(("SESv2", "ses"), op, method, url, headers, body).await
    }

    /// Create a domain identity with Easy DKIM (`AlreadyExistsException`, `LimitExceededException`)
    /// with these tags (`platform-stack` is what the policy lets this stack manage).
    pub async fn create_identity(&self, name: &str, tags: &[(&str, &str)]) -> Result<Identity, AwsError> {
        let mut body = json!({"EmailIdentity": name});
        if !tags.is_empty() {
            body["Tags"] = tags.iter().map(|(k, v)| json!({"Key": k, "Value": v})).collect();
        }
        let out = self.call("CreateEmailIdentity", "POST", None, Some(body)).await?;
        Ok(Identity::from_json(&out))
    }

    /// The identity's state (`NotFoundException` when there is none).
    pub async fn get_identity(&self, name: &str) -> Result<Identity, AwsError> {
        Ok(Identity::from_json(&self.call("GetEmailIdentity", "GET", Some(name), None).await?))
    }

    pub async fn delete_identity(&self, name: &str) -> Result<(), AwsError> {
        self.call("DeleteEmailIdentity", "DELETE", Some(name), None).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_read_from_the_documented_answer() {
        let got = json!({"IdentityType": "DOMAIN", "VerifiedForSendingStatus": false, "VerificationStatus": "PENDING",
            "DkimAttributes": {"SigningEnabled": true, "Status": "PENDING", "Tokens": ["a1", "b2", "c3"]}});
        let i = Identity::from_json(&got);
        assert_eq!(i.dkim_tokens, ["a1", "b2", "c3"]);
        assert_eq!((i.verified_for_sending, i.verification_status.as_deref()), (false, Some("PENDING")));
        assert_eq!(
            Identity::from_json(&Value::Null),
            Identity { verified_for_sending: false, verification_status: None, dkim_tokens: vec![], tags: vec![] }
        );
    }
}
