//! Approval requests: a restricted API key's write that reached a confirmable effect without a
//! person's approval is stored with a preview of everything it will do, rendered when it was
//! asked (every recipient, the subject and the bodies as SES will get them, the object it
//! changes), and the version of every object the effect depends on then, whatever the request
//! named it in. A person who may cause the effect themselves approves or denies it; approving
//! mints the confirmation bound to those versions, and the same request again (same key, path,
//! body and Idempotency-Key) runs once on it (`shared::approvals` finds it). docs/authority.md.
//!
//! Items (pk = WS#<workspace>): `APPROVAL#<apr id>` (the request: `doc` holds what was asked and
//! shown, the other attributes its decision), `APRKEY#<hash>` (the look-up of one exact
//! request, `shared::keys::APPROVAL_LOOKUP`).

mod store;

use crate::capabilities::{self, Bound};
pub use crate::ids::ApprovalRequestId;
use crate::ids::{ApiKeyId, ConfirmationId};
pub use capabilities::may_approve;
use serde::{Deserialize, Serialize};
use shared::ids::Timestamp;
pub use store::{approve, deny, erase, from_item, list, load};
use utoipa::ToSchema;

/// A request waits this long for a person.
pub const LIFETIME_SECS: i64 = 24 * 3600;

/// Once approved, the request must be sent again within this time.
pub const APPROVED_FOR_SECS: i64 = 3600;

/// A request whose stored preview would pass this is not recorded (an item holds 400 KB); the
/// 428 still names what to confirm, for an app that mints directly.
const MAX_DOC_BYTES: usize = 300 * 1024;

/// Kept for the audit, as confirmations are.
const RETENTION_SECS: i64 = capabilities::AUDIT_RETENTION_SECS;

/// The process's desk: what `shared::approvals` asks to record a 428's approval request.
pub static DESK: Desk = Desk;

pub struct Desk;

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    /// Waiting for a person.
    Pending,
    /// A person approved it: the same request, sent again, runs once.
    Approved,
    Denied,
    /// Nobody decided before `expires_at`.
    Expired,
    /// Something it depends on changed before a person approved it (`changed` says what):
    /// the agent asks again on what it is now.
    Stale,
}

impl ApprovalState {
    /// The state of a stored request at `now_ms`: a decision (or the sweep's `expired`) stays;
    /// a request still pending in the table is expired once its time ran out, before the sweep
    /// gets to it.
    pub fn at(stored: Option<&str>, expires_ms: i64, now_ms: i64) -> Self {
        match stored {
            Some("approved") => Self::Approved,
            Some("denied") => Self::Denied,
            Some("stale") => Self::Stale,
            Some("expired") => Self::Expired,
            _ if expires_ms <= now_ms => Self::Expired,
            _ => Self::Pending,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Expired => "expired",
            Self::Stale => "stale",
        }
    }
}

/// An email as SES will receive it.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[schema(as = ApprovalEmailPreview)]
pub struct EmailPreview {
    pub from: String,
    pub to: Vec<String>,
    pub cc: Vec<String>,
    pub bcc: Vec<String>,
    pub reply_to: Vec<String>,
    pub subject: String,
    pub html: Option<String>,
    pub text: Option<String>,
}

/// What the effect will do, rendered when the request was asked.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, Default, PartialEq)]
#[schema(as = ApprovalPreview)]
pub struct Preview {
    /// One line: what happens, to whom.
    pub summary: String,
    /// Every email it sends, as SES will receive it (subject, HTML and text bodies).
    pub emails: Vec<EmailPreview>,
    /// The request's body as sent, with credentials and secrets shown as `[hidden]` (absent
    /// for emails, shown as `emails`, and for a body without one).
    #[schema(value_type = Option<Object>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<serde_json::Value>,
    /// Why an email could not be rendered (the request will fail the same way once approved).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// The effect's complete value, as its function built it when the request was asked: what the
/// person is shown whole, and what approving binds by its digest. The run builds it again and
/// is refused as stale when the digest differs.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[schema(as = ApprovalEffect)]
pub struct EffectValue {
    /// Hex SHA-256 of the value's canonical JSON (keys sorted, no whitespace).
    pub digest: String,
    /// The value, whole (its shape is the effect's: `messages` of an email, `subject` of an
    /// erasure).
    #[schema(value_type = Object)]
    pub value: serde_json::Value,
}

/// An object that changed after the request was asked.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq, Eq)]
#[schema(as = ApprovalChange)]
pub struct Changed {
    pub object: String,
    pub id: String,
}

/// A restricted key's write waiting for (or decided by) a person.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct ApprovalRequest {
    /// `apr_...`
    pub id: ApprovalRequestId,
    /// Always `approval_request`.
    pub object: String,
    pub state: ApprovalState,
    /// The effect (`emails.send`).
    pub capability: String,
    /// What the effect is, in words.
    pub effect: String,
    /// The scope an approver must hold themselves (`admin`: an owner or admin of the workspace).
    pub approver_needs: String,
    pub method: String,
    /// Relative to the API base (`/webhooks/wh_...`).
    pub path: String,
    pub idempotency_key: String,
    /// Hex SHA-256 of the exact body.
    pub body_sha256: String,
    /// The key that asked.
    pub api_key_id: ApiKeyId,
    pub preview: Preview,
    /// The effect's value (valued effects: emails sent by `POST /emails` and a batch, erasures,
    /// exports), whose digest an approval binds; null for an effect whose approval binds the
    /// request and `bound`.
    pub effect_value: Option<EffectValue>,
    /// Every object the effect depends on, at its version when the request was asked: what
    /// an approval binds.
    pub bound: Vec<Bound>,
    /// Set when `state` is `stale`.
    #[serde(default)]
    pub changed: Vec<Changed>,
    /// When an approved run was refused because its value changed: the fields that differ
    /// (JSON pointers into `effect_value.value`).
    #[serde(default)]
    pub changed_fields: Vec<String>,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    pub decided_at: Option<Timestamp>,
    /// The person (their token's subject) who approved or denied it.
    pub decided_by: Option<String>,
    /// A denial's reason.
    pub reason: Option<String>,
    /// The confirmation an approval minted (`GET /capability-confirmations/{id}`: whether and
    /// by which request it was used).
    pub confirmation_id: Option<ConfirmationId>,
}

/// What a request asked and was shown: the part of the item that never changes.
#[derive(Serialize, Deserialize)]
struct Doc {
    capability: String,
    method: String,
    path: String,
    idempotency_key: String,
    body_sha256: String,
    api_key_id: String,
    preview: Preview,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    effect: Option<EffectValue>,
    bound: Vec<Bound>,
    created_at: Timestamp,
    expires_at: Timestamp,
}

/// The hosted page of an approval request (`functions/capabilities/src/pages`).
pub fn page_url(origin: &str, slug: &str, id: &str) -> String {
    format!("{}/approvals/{slug}/requests/{id}", origin.trim_end_matches('/'))
}

/// What a webhook gets: enough to tell someone, without the bodies (read the request for them).
fn event_body(r: &ApprovalRequest) -> serde_json::Value {
    serde_json::json!({
        "id": r.id, "object": "approval_request", "state": r.state, "capability": r.capability, "effect": r.effect,
        "approver_needs": r.approver_needs, "method": r.method, "path": r.path, "api_key_id": r.api_key_id,
        "summary": r.preview.summary, "created_at": r.created_at, "expires_at": r.expires_at,
        "decided_at": r.decided_at, "decided_by": r.decided_by, "reason": r.reason,
        // The receipt: what was approved, by digest, so a consumer can check what ran.
        "effect_digest": r.effect_value.as_ref().map(|e| &e.digest), "confirmation_id": r.confirmation_id,
    })
}

/// Levels of a request body a preview shows as JSON.
const MAX_SHOWN_DEPTH: usize = 16;

fn depth(v: &serde_json::Value) -> usize {
    match v {
        serde_json::Value::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        serde_json::Value::Array(l) => 1 + l.iter().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Keys whose values a preview never shows: a channel's credentials, a webhook's secret.
fn hidden(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["credentials", "secret", "password", "token", "api_key"].iter().any(|h| k.contains(h))
}

fn redact(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), if hidden(k) { Value::from("[hidden]") } else { redact(v) })).collect())
        }
        Value::Array(l) => Value::Array(l.iter().map(redact).collect()),
        other => other.clone(),
    }
}

/// What a denial says.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DenyApproval {
    /// Why, for the agent and the audit (1 to 500 characters).
    #[schema(min_length = 1, max_length = 500)]
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_request_expires_with_its_time_and_a_decision_stays() {
        let (expires, now) = (1_000, 999);
        assert_eq!(ApprovalState::at(Some("pending"), expires, now), ApprovalState::Pending);
        assert_eq!(ApprovalState::at(Some("pending"), expires, expires), ApprovalState::Expired, "expiry is inclusive");
        assert_eq!(ApprovalState::at(None, 0, now), ApprovalState::Expired, "an item without a time is not pending");
        for (stored, state) in [("approved", ApprovalState::Approved), ("denied", ApprovalState::Denied), ("stale", ApprovalState::Stale)] {
            assert_eq!(ApprovalState::at(Some(stored), expires, expires + 1), state, "{stored} after the expiry");
        }
        assert_eq!(ApprovalState::at(Some("expired"), expires, now), ApprovalState::Expired, "the sweep's word stands");
    }

    #[test]
    fn previews_hide_credentials_and_secrets() {
        let body = serde_json::json!({"type": "bluesky", "credentials": {"handle": "a", "app_password": "p"},
            "url": "https://x", "nested": [{"secret": "whsec_1", "name": "n"}]});
        let r = redact(&body);
        assert_eq!(r["credentials"], "[hidden]");
        assert_eq!(r["nested"][0]["secret"], "[hidden]");
        assert_eq!((r["url"].as_str(), r["nested"][0]["name"].as_str()), (Some("https://x"), Some("n")));
    }
}
