//! Capability confirmations: the published list of confirmable writes and the confirmation
//! object (the audit of who approved what). The list is made of the effects each route
//! declares (`shared::routing::Route::effects`, from `crate::effects`): `make generate` writes it to `capabilities.json` next
//! to this file and into the contract (`x-capabilities`), and its drift check keeps the copy
//! current. The pipeline's side (consuming a token) is `shared::confirmation`.

mod store;

use crate::ids::ApiKeyId;
pub use crate::ids::ConfirmationId;
use serde::{Deserialize, Serialize};
use shared::auth::{Credential, Principal, Scope};
use shared::ids::Timestamp;
use shared::{ApiError, ApiResult};
use std::sync::LazyLock;
pub use store::{bind, create, from_item, item, list, load, routes_of};
use utoipa::ToSchema;

/// A confirmable write: the capability (an effect of `crate::effects`) a person confirms, and
/// one route that can cause it (a capability reached by several routes has a row for each).
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq, Eq)]
pub struct Capability {
    /// `emails.send`
    pub capability: String,
    pub method: String,
    /// Relative to the API base, with `{parameters}`: `/webhooks/{id}`.
    pub path: String,
    /// The operation's summary.
    pub summary: String,
}

static ALL: LazyLock<Vec<Capability>> =
    LazyLock::new(|| serde_json::from_str(include_str!("capabilities.json")).expect("capabilities.json is generated valid"));

/// Every confirmable write, sorted by capability.
pub fn all() -> &'static [Capability] {
    &ALL
}

/// Is this capability's effect described by a value (`crate::effects`, `valued`)?
pub fn valued(capability: &str) -> bool {
    let name = shared::auth::capability_name(capability);
    crate::effects::ALL.iter().any(|e| e.capability == name && e.valued)
}

/// Is this a capability (or an earlier release's name of one)?
pub fn exists(capability: &str) -> bool {
    let name = shared::auth::capability_name(capability);
    all().iter().any(|c| c.capability == name)
}

/// The kind of id (its prefix) a route's `{id}` names, where a confirmation binds that object:
/// `post` for `/posts/{id}`, `dom` for `/emails/domains/{id}`; `None` where the path's id binds
/// nothing.
pub fn path_id_kind(pattern: &str) -> Option<&'static str> {
    match pattern.split('/').nth(1).unwrap_or_default() {
        "posts" => Some("post"),
        "webhooks" => Some("wh"),
        "channels" => Some("ch"),
        "emails" if pattern.starts_with("/emails/domains/") => Some("dom"),
        "bookings" => Some("bk"),
        "helpdesk" => Some("conv"),
        _ => None,
    }
}

/// Does a concrete path (`/webhooks/wh_1`, normalised) fit a pattern (`/webhooks/{id}`)?
pub fn path_fits(pattern: &str, path: &str) -> bool {
    let (p, c): (Vec<&str>, Vec<&str>) =
        (pattern.split('/').filter(|x| !x.is_empty()).collect(), path.split('/').filter(|x| !x.is_empty()).collect());
    p.len() == c.len()
        && p.iter().zip(&c).all(
            |(p, c)| {
                if p.starts_with('{') { c.bytes().all(|b| b.is_ascii_graphic() && b != b'?' && b != b'#') } else { p == c }
            },
        )
}

/// The effect a capability (or an earlier release's name of one) names.
pub fn effect(capability: &str) -> ApiResult<&'static crate::effects::EffectInfo> {
    let name = shared::auth::capability_name(capability);
    crate::effects::ALL.iter().find(|e| e.capability == name).ok_or_else(|| ApiError::internal(format!("no effect {name}")))
}

/// The approver rule: a person (never a key) with the `confirm` scope who could cause the
/// effect themselves, without anyone's confirmation: its least scope through their role and
/// token (an admin effect needs an owner or admin). For minting here and for approving an
/// approval request (`crate::approvals`).
pub fn may_approve(p: &Principal, capability: &str, oauth: Option<&shared::config::OAuthConfig>, now_secs: i64) -> ApiResult<()> {
    let info = effect(capability)?;
    let Credential::OAuth(signed) = &p.credential else {
        return Err(ApiError::forbidden("only a person approves (an OAuth access token); an API key never does"));
    };
    let rule = oauth.ok_or_else(|| ApiError::forbidden("this deployment accepts no access tokens"))?;
    // A person at the approval pages, not an agent's own client holding `confirm`.
    if !signed.client_id.as_ref().is_some_and(|c| rule.approver_clients.contains(c)) {
        return Err(ApiError::forbidden(format!(
            "approving needs a token issued to an approver client ({}; OAUTH_APPROVER_CLIENT_IDS): this token's client is {}",
            if rule.approver_clients.is_empty() { "none is configured".to_string() } else { rule.approver_clients.join(", ") },
            signed.client_id.as_deref().unwrap_or("not named")
        )));
    }
    let max = rule.approver_max_auth_age_secs;
    if !signed.auth_time.is_some_and(|t| t <= now_secs + 30 && now_secs - t <= max) {
        return Err(ApiError::forbidden(format!(
            "approving needs a fresh sign-in: the token's auth_time must be within the last {max} seconds; sign in again"
        )));
    }
    if !p.scopes.contains(&Scope::Confirm) {
        return Err(ApiError::forbidden("approving needs the confirm scope"));
    }
    if !info.held_by(p) {
        return Err(ApiError::forbidden(format!(
            "approving {} needs the {} scope yourself (your role and your token): only someone who may {} may approve it",
            info.capability,
            info.needs.name(),
            info.summary.to_lowercase()
        )));
    }
    Ok(())
}

/// The routes whose bodies name the objects an effect reaches (contacts, templates, services):
/// a confirmation of one binds them, so it needs the body.
pub const BODY_BOUND: [&str; 7] =
    ["/emails", "/emails/batch", "/bookings", "/helpdesk/conversations", "/portal/sessions", "/gdpr/erasures", "/gdpr/exports"];

/// Tokens live 60 s to 15 min.
pub const MIN_LIFETIME_SECS: i64 = 60;

pub const MAX_LIFETIME_SECS: i64 = 900;

pub const DEFAULT_LIFETIME_SECS: i64 = 300;

/// How long the audit record is kept (the item's TTL).
pub const AUDIT_RETENTION_SECS: i64 = 90 * 24 * 3600;

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ConfirmationStatus {
    /// Minted, not used, not expired.
    Issued,
    Used,
    /// Not used before `expires_at`.
    Expired,
}

impl ConfirmationStatus {
    /// The status of a stored confirmation at `now_ms`: used stays used; an unused one expires
    /// with its token.
    pub fn at(stored: Option<&str>, token_expires_ms: i64, now_ms: i64) -> Self {
        match stored {
            Some("used") => Self::Used,
            _ if token_expires_ms <= now_ms => Self::Expired,
            _ => Self::Issued,
        }
    }
}

/// A person's approval of one exact write. The token itself is shown once, at creation.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
#[schema(as = CapabilityConfirmation)]
pub struct Confirmation {
    /// `cc_...`
    pub id: ConfirmationId,
    /// Always `capability_confirmation`.
    pub object: String,
    pub capability: String,
    pub method: String,
    /// The confirmed request's path, relative to the API base (`/webhooks/wh_...`).
    pub path: String,
    pub idempotency_key: String,
    /// Hex SHA-256 of the exact request body bytes.
    pub body_sha256: String,
    /// What the person saw when approving.
    pub preview_summary: String,
    /// The person, as the approving app names them.
    pub approved_by: String,
    /// The subject of the credential that minted the confirmation.
    pub confirmed_by: String,
    /// The API key that may use it.
    pub api_key_id: ApiKeyId,
    pub status: ConfirmationStatus,
    pub created_at: Timestamp,
    /// The token's end of life.
    pub expires_at: Timestamp,
    pub used_at: Option<Timestamp>,
    /// The `Request-Id` of the request that used it.
    pub used_by_request_id: Option<String>,
    /// Only in the response that created it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub confirmation_token: Option<String>,
    /// The state the person approved: the objects that decide the effect, each at the version
    /// they saw (the recipient's contact and address, the post, the template). If any of them
    /// changes before the token is used, the write is refused with 428 and reason `stale`.
    #[serde(default)]
    pub bound: Vec<Bound>,
    /// The digest of the effect's value a person approved (an approval request that showed
    /// one): the run is refused as stale unless it builds the same value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect_digest: Option<String>,
}

/// One object a confirmation binds, as it was when the person approved.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq, Eq)]
#[schema(as = CapabilityConfirmationBound)]
pub struct Bound {
    /// `contact`, `post`, `email_template`, `conversation`, `webhook_endpoint`, `channel`,
    /// `booking`, `sending_domain`.
    pub object: String,
    /// Its id (a template's slug).
    pub id: String,
    /// 0: it did not exist, and must not exist when the token is used.
    pub version: i64,
    /// What the person saw of it: a contact's address, a post's opening words, a template's
    /// subject as this request renders it.
    pub preview: String,
}

/// At most this many objects bound by one confirmation (each is one condition of the
/// transaction that uses it).
pub const MAX_BOUND: usize = 25;

/// One exact write to confirm for one API key.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateConfirmation {
    /// One of `GET /capabilities`.
    #[schema(min_length = 1, max_length = 100)]
    pub capability: String,
    /// The capability's method.
    #[schema(min_length = 1, max_length = 10)]
    pub method: String,
    /// The concrete path of the request, relative to the API base or with it
    /// (`/webhooks/wh_...` or `/api/v1/webhooks/wh_...`), fitting the capability's path.
    #[schema(min_length = 1, max_length = 1000)]
    pub path: String,
    /// The `Idempotency-Key` the request will carry.
    #[schema(min_length = 1, max_length = 255)]
    pub idempotency_key: String,
    /// Hex SHA-256 of the exact request body bytes (of the empty body for a DELETE).
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub body_sha256: String,
    /// What the person saw and approved, kept for the audit.
    #[schema(min_length = 1, max_length = 4000)]
    pub preview_summary: String,
    /// The person, as the approving app names them.
    #[schema(min_length = 1, max_length = 200)]
    pub approved_by: String,
    /// The API key (`key_...`) that will send the request.
    #[schema(value_type = crate::ids::ApiKeyId)]
    pub api_key_id: String,
    /// Seconds the token lives, 60 to 900 (default 300).
    #[schema(minimum = 60, maximum = 900)]
    pub expires_in: Option<i64>,
    /// The exact request body (its SHA-256 must be `body_sha256`). Required on the routes whose
    /// bodies name what the effect reaches (`/emails`, `/emails/batch`, `/bookings`,
    /// `/helpdesk/conversations`, `/portal/sessions`, `/gdpr/erasures`, `/gdpr/exports`): the
    /// confirmation binds the contacts, templates and services it names and answers what they
    /// resolve to (`bound`). Objects named by the path are bound in any case.
    #[schema(max_length = 1048576)]
    pub body: Option<String>,
    /// The digest of the effect's value the person approves, as an approval request shows it
    /// (`effect_value.digest`). Every confirmable effect builds its value again when the
    /// request runs and runs only on this digest: a confirmation without it is refused then
    /// (428, `mismatch` `effect_digest`). Approving the approval request sets it for you.
    #[serde(default)]
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub effect_digest: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::store::{from_item, item};
    use super::*;
    use shared::auth::WorkspaceId;

    #[test]
    fn an_unused_confirmation_expires_with_its_token_and_a_used_one_stays_used() {
        assert_eq!(ConfirmationStatus::at(Some("issued"), 1_000, 999), ConfirmationStatus::Issued);
        assert_eq!(ConfirmationStatus::at(Some("issued"), 1_000, 1_000), ConfirmationStatus::Expired);
        assert_eq!(ConfirmationStatus::at(None, 0, 1), ConfirmationStatus::Expired);
        assert_eq!(ConfirmationStatus::at(Some("used"), 1_000, 5_000), ConfirmationStatus::Used);
    }
    use shared::store::s;

    #[test]
    fn the_list_is_sorted_unique_names_effects_and_real_methods() {
        let rows: Vec<(&str, &str, &str)> = all().iter().map(|c| (c.capability.as_str(), c.path.as_str(), c.method.as_str())).collect();
        let mut sorted = rows.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(rows, sorted);
        assert!(all().iter().all(|c| ["POST", "PUT", "PATCH", "DELETE"].contains(&c.method.as_str())));
        assert!(all().iter().all(|c| crate::effects::ALL.iter().any(|e| e.capability == c.capability)));
        // Every effect is reachable, and sending an email by every route that can.
        // (A public effect is no capability: nobody confirms what anyone may cause.)
        assert!(
            crate::effects::ALL.iter().filter(|e| !e.public).all(|e| routes_of(e.capability).next().is_some()),
            "an effect no route reaches"
        );
        let sends: Vec<&str> = routes_of("emails.send").map(|c| c.path.as_str()).collect();
        for p in ["/emails", "/emails/batch", "/helpdesk/conversations", "/helpdesk/conversations/{id}/messages", "/bookings"] {
            assert!(sends.contains(&p), "{p} sends email: {sends:?}");
        }
        assert!(exists("emails.batch") && exists("helpdesk.reply"), "earlier names still name their effect");
    }

    #[test]
    fn concrete_paths_fit_their_pattern() {
        assert!(path_fits("/webhooks/{id}", "/webhooks/wh_1"));
        assert!(!path_fits("/webhooks/{id}", "/webhooks"));
        assert!(!path_fits("/webhooks/{id}", "/webhooks/wh_1/rotate-secret"));
        assert!(!path_fits("/emails", "/emails/batch"));
        assert!(path_fits("/emails/batch", "/emails/batch"));
    }

    #[test]
    fn status_follows_state_and_expiry() {
        let c = Confirmation {
            id: ConfirmationId::trusted("cc_1"),
            object: String::new(),
            capability: "emails.send".into(),
            method: "POST".into(),
            path: "/emails".into(),
            idempotency_key: "k".into(),
            body_sha256: "00".into(),
            preview_summary: "p".into(),
            approved_by: "a".into(),
            confirmed_by: "sub".into(),
            api_key_id: ApiKeyId::trusted("key_1"),
            status: ConfirmationStatus::Issued,
            created_at: shared::ids::Timestamp::now(),
            expires_at: shared::ids::Timestamp::now(),
            used_at: None,
            used_by_request_id: None,
            confirmation_token: None,
            bound: vec![],
            effect_digest: None,
        };
        let future = shared::ids::now_ms() + 60_000;
        assert_eq!(from_item(&item(&WorkspaceId::trusted("ws_1"), &c, &[], "h", future)).unwrap().status, ConfirmationStatus::Issued);
        assert_eq!(from_item(&item(&WorkspaceId::trusted("ws_1"), &c, &[], "h", 1)).unwrap().status, ConfirmationStatus::Expired);
        let mut used = item(&WorkspaceId::trusted("ws_1"), &c, &[], "h", 1);
        used.insert("state".into(), s("used"));
        assert_eq!(from_item(&used).unwrap().status, ConfirmationStatus::Used);
    }

    #[test]
    fn only_a_person_who_holds_the_effect_approves_it() {
        let now = 1_000_000;
        let signed = |client: Option<&str>, auth_time: Option<i64>| shared::auth::SignIn { client_id: client.map(String::from), auth_time };
        let person = |scopes: Vec<Scope>| Principal {
            workspace_id: Some(WorkspaceId::trusted("ws_1")),
            subject: "sub".into(),
            scopes,
            credential: Credential::OAuth(signed(Some("pages"), Some(now - 60))),
            requires_confirmation: Default::default(),
        };
        let rule = shared::config::OAuthConfig {
            issuer: "i".into(),
            audience: "a".into(),
            jwks: shared::config::JwksSource::Discover,
            min_refresh_secs: 60,
            pages_client_id: Some("pages".into()),
            approver_clients: vec!["pages".into()],
            approver_max_auth_age_secs: 600,
        };
        let may = |p: &Principal, cap: &str| may_approve(p, cap, Some(&rule), now);
        let member = person(vec![Scope::Read, Scope::Write, Scope::Confirm]);
        let admin = person(vec![Scope::Read, Scope::Write, Scope::Admin, Scope::Confirm]);
        assert!(may(&member, "emails.send").is_ok());
        assert_eq!(may(&member, "members.change").unwrap_err().status().as_u16(), 403);
        assert!(may(&admin, "members.change").is_ok());
        assert_eq!(may(&person(vec![Scope::Write]), "emails.send").unwrap_err().status().as_u16(), 403);
        let key = Principal { credential: Credential::ApiKey { key_id: "key_1".into() }, ..admin.clone() };
        assert_eq!(may(&key, "emails.send").unwrap_err().status().as_u16(), 403);
        // A person's token, but from another client, from no named client, signed in too long
        // ago, or without a sign-in time: none approves.
        for (client, at, why) in [
            (Some("agent-app"), Some(now - 60), "approver client"),
            (None, Some(now - 60), "approver client"),
            (Some("pages"), Some(now - 601), "fresh sign-in"),
            (Some("pages"), None, "fresh sign-in"),
            (Some("pages"), Some(now + 3600), "fresh sign-in"),
        ] {
            let p = Principal { credential: Credential::OAuth(signed(client, at)), ..admin.clone() };
            let e = may(&p, "emails.send").unwrap_err();
            assert!(e.status().as_u16() == 403 && e.message.contains(why), "{client:?} {at:?}: {}", e.message);
        }
        assert!(may_approve(&admin, "emails.send", None, now).is_err(), "no issuer, no approver");
    }
}
