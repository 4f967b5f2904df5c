//! Authentication: who is calling, for which workspace, with which scopes.
//!
//! - API keys: `wsp_` + 43 base62 characters (256 bits). Only the SHA-256 hash is stored, in a
//!   look-up item keyed by the hash (`pk = APIKEY#<hash>`): authentication is one consistent
//!   GetItem, whose answer a container keeps for 5 s ([`KeyCache`], `API_KEY_CACHE_SECS`). So a warm
//!   request spends no round trip on its key, and a revoked key stops working at once in the
//!   container that revoked it and within that time everywhere else.
//! - OAuth access tokens: RS256/ES256 JWTs verified against the identity provider's keys
//!   (`crate::oauth`); `x-workspace-id` names the workspace and the subject must be a member.
//!
//! Handlers only ever see the resulting `Principal`.

use crate::error::{ApiError, ErrorCode, ErrorDetail};
use crate::keys;
use crate::oauth::Rejected;
pub use crate::oauth::{Claims, JwtVerifier};
use crate::store::{self, Db, get_str};
use rand::RngExt;
use serde::{Deserialize, Serialize};

pub const API_KEY_PREFIX: &str = "wsp_";
const API_KEY_RANDOM_LEN: usize = 43;
const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// What a credential may do. `read`: every GET. `write`: content (posts, contacts, deals,
/// emails, ...). `admin`: what changes who can do what or where data goes (API keys,
/// members, the workspace's settings and sending domains, webhooks, channels). `confirm`:
/// mint capability confirmations, i.e. approve another credential's write as a person; only
/// OAuth tokens carry it, never API keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Read,
    Write,
    Admin,
    Confirm,
}

impl Scope {
    pub const ALL: [Scope; 4] = [Scope::Read, Scope::Write, Scope::Admin, Scope::Confirm];
    /// What an API key may hold at most (a key is not a person, so it cannot confirm).
    pub const API_KEY_MAX: [Scope; 3] = [Scope::Read, Scope::Write, Scope::Admin];

    pub fn name(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Admin => "admin",
            Scope::Confirm => "confirm",
        }
    }

    /// Unknown names grant nothing (they are dropped, never widened to a default).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// How a person's access token was obtained: the OAuth client it was issued to (`client_id`,
/// RFC 9068, or `azp`) and when they last signed in (`auth_time`), as the token says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SignIn {
    pub client_id: Option<String>,
    pub auth_time: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credential {
    ApiKey {
        key_id: String,
    },
    /// A person's access token, with how and when they signed in.
    OAuth(SignIn),
    /// A customer's portal session: reaches this one contact only.
    Portal {
        session_id: String,
        contact_id: String,
    },
    /// A link that carries a customer's authority over one object (`crate::links`: an emailed
    /// booking's manage link): reaches that object of this contact only, on the pages that take
    /// such a link.
    Link {
        object: String,
        contact_id: String,
    },
    /// No credential (the portal's token exchange), from this source address.
    Public {
        source: String,
    },
}

/// Which confirmable writes of a credential need a capability confirmation (an API key's
/// `requires_confirmation`): `true` every one, `false` none, or a list of capabilities.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum RequiresConfirmation {
    All(bool),
    Only(Vec<String>),
}

impl Default for RequiresConfirmation {
    fn default() -> Self {
        Self::All(false)
    }
}

/// Capability names of earlier releases and the effect each now names: a key restricted for
/// `emails.batch` stays restricted for every email it can send.
pub const CAPABILITY_ALIASES: &[(&str, &str)] = &[("emails.batch", "emails.send"), ("helpdesk.reply", "emails.send")];

/// The current name of a capability (itself unless it is an earlier release's alias).
pub fn capability_name(name: &str) -> &str {
    CAPABILITY_ALIASES.iter().find(|(old, _)| *old == name).map_or(name, |(_, new)| new)
}

impl RequiresConfirmation {
    pub fn covers(&self, capability: &str) -> bool {
        match self {
            Self::All(all) => *all,
            Self::Only(list) => list.iter().any(|c| capability_name(c) == capability),
        }
    }

    /// Does `self` demand at least every confirmation `other` demands? (A credential may
    /// create keys only at least as restricted as itself.)
    pub fn at_least(&self, other: &RequiresConfirmation) -> bool {
        match (self, other) {
            (Self::All(true), _) | (_, Self::All(false)) => true,
            (_, Self::All(true)) => false,
            (Self::All(false), Self::Only(theirs)) => theirs.is_empty(),
            (Self::Only(_), Self::Only(theirs)) => theirs.iter().all(|c| self.covers(capability_name(c))),
        }
    }
}

pub use crate::ids::WorkspaceId;

#[derive(Clone, Debug)]
pub struct Principal {
    /// The workspace the credential reaches; None only for OAuth calls to routes that need no
    /// workspace (GET /workspaces).
    pub workspace_id: Option<WorkspaceId>,
    /// `key:<key id>` or the token's `sub`.
    pub subject: String,
    pub scopes: Vec<Scope>,
    pub credential: Credential,
    /// Which of its confirmable writes need a person's confirmation (API keys only).
    pub requires_confirmation: RequiresConfirmation,
}

impl Principal {
    /// The workspace the credential reaches, or on a route without one the empty id, which no
    /// item has: a key built from it reads nothing.
    pub fn workspace_or_none(&self) -> &WorkspaceId {
        self.workspace_id.as_ref().unwrap_or(&crate::ids::NO_WORKSPACE)
    }

    /// What the caller's rate buckets and list cursors are bound to: the workspace, or the
    /// subject on routes without one.
    pub fn tenant_scope(&self) -> String {
        match (&self.credential, &self.workspace_id) {
            // Per session (docs/api.md): one customer cannot spend the workspace's buckets.
            (Credential::Portal { session_id, .. }, _) => format!("PORTAL#{session_id}"),
            (Credential::Public { source }, _) => format!("IP#{source}"),
            // Per contact, not per object: a move makes a new booking and a new token, and must
            // not make a new bucket.
            (Credential::Link { contact_id, .. }, _) => format!("LINK#{contact_id}"),
            (_, Some(ws)) => ws.to_string(),
            (_, None) => format!("SUB#{}", self.subject),
        }
    }

    /// The contact a portal session reaches; None for every other credential.
    pub fn portal_contact(&self) -> Option<&str> {
        match &self.credential {
            Credential::Portal { contact_id, .. } => Some(contact_id),
            _ => None,
        }
    }

    /// The holder of a link that opened (`crate::links`) for `object` of `contact_id`.
    pub fn link(ws: &WorkspaceId, object: &str, contact_id: &str) -> Self {
        Principal {
            workspace_id: Some(ws.clone()),
            subject: format!("link:{object}"),
            scopes: vec![],
            credential: Credential::Link { object: object.into(), contact_id: contact_id.into() },
            requires_confirmation: RequiresConfirmation::default(),
        }
    }

    pub fn public(source: &str) -> Self {
        Principal {
            workspace_id: None,
            subject: "anonymous".into(),
            scopes: vec![],
            credential: Credential::Public { source: source.chars().take(64).collect() },
            requires_confirmation: RequiresConfirmation::default(),
        }
    }
}

/// `len` random characters from [0-9A-Za-z], from the thread-local CSPRNG.
/// Is `token` `prefix` + 43 base62 characters, the shape of every token [`random_base62`]
/// makes for a credential (a portal session, a login link, a sign-in attempt)?
pub fn is_token(token: &str, prefix: &str) -> bool {
    token.strip_prefix(prefix).is_some_and(|t| t.len() == 43 && t.bytes().all(|b| b.is_ascii_alphanumeric()))
}

pub fn random_base62(len: usize) -> String {
    let mut rng = rand::rng();
    (0..len).map(|_| BASE62[rng.random_range(0..BASE62.len())] as char).collect()
}

pub fn generate_api_key() -> String {
    format!("{API_KEY_PREFIX}{}", random_base62(API_KEY_RANDOM_LEN))
}

pub fn hash_api_key(key: &str) -> String {
    crate::crypto::sha256_hex(key.as_bytes())
}

fn looks_like_api_key(token: &str) -> bool {
    token.strip_prefix(API_KEY_PREFIX).is_some_and(|t| t.len() >= 40 && t.len() <= 128 && t.bytes().all(|b| b.is_ascii_alphanumeric()))
}

pub fn api_key_lookup_pk(hash: &str) -> String {
    keys::API_KEY_LOOKUP.pk(hash)
}
pub const API_KEY_LOOKUP_SK: &str = keys::API_KEY_LOOKUP.kind.table.sk;

pub fn member_sk(subject: &str) -> String {
    keys::MEMBER.sk(subject)
}

/// Roles grant scopes; a token's scopes are intersected with its subject's role.
pub fn role_scopes(role: &str) -> &'static [Scope] {
    match role {
        "owner" | "admin" => &[Scope::Read, Scope::Write, Scope::Admin, Scope::Confirm],
        "member" => &[Scope::Read, Scope::Write, Scope::Confirm],
        "viewer" => &[Scope::Read],
        _ => &[],
    }
}

pub const ROLES: [&str; 4] = ["owner", "admin", "member", "viewer"];

fn invalid(why: &str) -> ApiError {
    ApiError::unauthorized(format!("Authorization header is invalid: {why}"))
}

/// Entries a container keeps at most (a few MB); past it, the expired ones go, or all of them.
const KEY_CACHE_MAX: usize = 10_000;

type KeyOutcome = Result<Principal, ApiError>;

/// A container's memory of API key look-ups, by key hash: the principal, or the refusal of a
/// revoked key. Unknown keys are not kept, so a key works from the moment it is created.
pub struct KeyCache {
    ttl: std::time::Duration,
    map: std::sync::Mutex<std::collections::HashMap<String, (std::time::Instant, KeyOutcome)>>,
}

impl KeyCache {
    /// `ttl` zero keeps nothing (every request reads its key).
    pub fn new(ttl: std::time::Duration) -> Self {
        Self { ttl, map: Default::default() }
    }

    fn get(&self, hash: &str) -> Option<KeyOutcome> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.get(hash).filter(|(at, _)| at.elapsed() < self.ttl).map(|(_, outcome)| outcome.clone())
    }

    fn put(&self, hash: String, outcome: KeyOutcome) {
        if self.ttl.is_zero() {
            return;
        }
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= KEY_CACHE_MAX {
            map.retain(|_, (at, _)| at.elapsed() < self.ttl);
            if map.len() >= KEY_CACHE_MAX {
                map.clear();
            }
        }
        map.insert(hash, (std::time::Instant::now(), outcome));
    }

    /// Drop what this container knows of a key (its revocation, here and now).
    pub fn forget(&self, hash: &str) {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).remove(hash);
    }
}

/// Resolve the caller. `needs_workspace` is false only for routes that list the caller's workspaces.
pub async fn authenticate(
    db: &Db,
    keys: &KeyCache,
    jwt: Option<&JwtVerifier>,
    headers: &http::HeaderMap,
    needs_workspace: bool,
) -> Result<Principal, ApiError> {
    let raw = headers
        .get(http::header::AUTHORIZATION)
        .ok_or_else(|| ApiError::unauthorized("Authorization header is missing; send Authorization: Bearer <API key or access token>"))?;
    let raw = raw.to_str().map_err(|_| invalid("not valid text"))?;
    let (scheme, token) = raw.trim().split_once(' ').ok_or_else(|| invalid("expected \"Bearer <credential>\""))?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(invalid("expected the Bearer scheme"));
    }
    let token = token.trim();
    if token.starts_with(API_KEY_PREFIX) {
        if !looks_like_api_key(token) {
            return Err(invalid("malformed API key"));
        }
        let hash = hash_api_key(token);
        if let Some(outcome) = keys.get(&hash) {
            return outcome;
        }
        let outcome = authenticate_key(db, &hash).await;
        // A principal or a revocation is kept; an unknown key or a failed read is not.
        if outcome.as_ref().map_or_else(|e| e.code == ErrorCode::Forbidden, |_| true) {
            keys.put(hash, outcome.clone());
        }
        outcome
    } else if token.split('.').count() == 3 {
        authenticate_token(db, jwt, headers, token, needs_workspace).await
    } else {
        Err(invalid("the credential is neither an API key nor an access token"))
    }
}

async fn authenticate_key(db: &Db, hash: &str) -> Result<Principal, ApiError> {
    let item = db.get(&api_key_lookup_pk(hash), API_KEY_LOOKUP_SK).await?.ok_or_else(|| invalid("unknown API key"))?;
    if item.get("revoked").and_then(|v| v.as_bool().ok()).copied().unwrap_or(false) {
        return Err(ApiError::forbidden("this API key has been revoked"));
    }
    let (Some(ws), Some(key_id)) = (get_str(&item, "workspace_id"), get_str(&item, "key_id")) else {
        return Err(ApiError::internal("API key look-up item lacks workspace_id or key_id"));
    };
    // Missing or unknown scopes grant nothing.
    let scopes: Vec<Scope> = item
        .get("scopes")
        .and_then(|v| v.as_l().ok())
        .map(|l| l.iter().filter_map(|s| Scope::parse(s.as_s().ok()?)).filter(|s| Scope::API_KEY_MAX.contains(s)).collect())
        .unwrap_or_default();
    let requires_confirmation = item.get("requires_confirmation").and_then(|v| crate::store::from_attribute(v).ok()).unwrap_or_default();
    Ok(Principal {
        workspace_id: Some(WorkspaceId::trusted(ws.to_string())),
        subject: format!("key:{key_id}"),
        scopes,
        credential: Credential::ApiKey { key_id: key_id.to_string() },
        requires_confirmation,
    })
}

async fn authenticate_token(
    db: &Db,
    jwt: Option<&JwtVerifier>,
    headers: &http::HeaderMap,
    token: &str,
    needs_workspace: bool,
) -> Result<Principal, ApiError> {
    let verifier = jwt.ok_or_else(|| invalid("access tokens are not accepted by this deployment"))?;
    let claims = verifier.verify(token).await.map_err(|r| match r {
        Rejected::Invalid(why) => invalid(&format!("access token rejected ({why})")),
        Rejected::KeysUnavailable(why) => ApiError::unavailable(format!("OAuth keys: {why}")),
    })?;
    // A token without a `scope` claim, or with only unknown scopes, grants nothing.
    let token_scopes: Vec<Scope> = claims.scope.as_deref().unwrap_or("").split_whitespace().filter_map(Scope::parse).collect();
    // The client a token was issued to, which may approve (`may_approve`): `client_id`
    // (RFC 9068) or `azp`; a token that names two clients names none.
    let client_id = match (&claims.client_id, &claims.azp) {
        (Some(c), Some(a)) if c != a => None,
        (c, a) => c.clone().or_else(|| a.clone()),
    };
    let sign_in = SignIn { client_id, auth_time: claims.auth_time };
    let ws = headers.get("x-workspace-id").and_then(|v| v.to_str().ok()).map(str::trim).filter(|s| !s.is_empty());
    let Some(ws) = ws else {
        if needs_workspace {
            return Err(ApiError::new(ErrorCode::ValidationError, "x-workspace-id header is required with an OAuth access token")
                .with_details(vec![ErrorDetail::field("x-workspace-id", "required with OAuth access tokens")]));
        }
        return Ok(Principal {
            workspace_id: None,
            subject: claims.sub,
            scopes: token_scopes,
            credential: Credential::OAuth(sign_in),
            requires_confirmation: RequiresConfirmation::default(),
        });
    };
    let not_member = || ApiError::forbidden("the token's subject is not a member of this workspace");
    if !crate::ids::is_valid("ws", ws) {
        return Err(not_member());
    }
    // Well-formed; the membership read decides whether the subject reaches it.
    let member = db.get(&store::ws_pk(&WorkspaceId::trusted(ws)), &member_sk(&claims.sub)).await?.ok_or_else(not_member)?;
    let allowed = role_scopes(get_str(&member, "role").unwrap_or(""));
    let scopes = token_scopes.into_iter().filter(|s| allowed.contains(s)).collect();
    Ok(Principal {
        workspace_id: Some(WorkspaceId::trusted(ws.to_string())),
        subject: claims.sub,
        scopes,
        credential: Credential::OAuth(sign_in),
        requires_confirmation: RequiresConfirmation::default(),
    })
}

// ---------- portal sessions ----------

pub const PORTAL_SESSION_HEADER: &str = "x-portal-session";
pub const PORTAL_SESSION_PREFIX: &str = "pss_";
/// Sliding lifetime of a portal session, and its hard limit from creation.
pub const PORTAL_SESSION_IDLE_SECS: i64 = 3600;
pub const PORTAL_SESSION_MAX_SECS: i64 = 8 * 3600;

pub fn portal_session_pk(token: &str) -> String {
    keys::PORTAL_SESSION.pk(&hash_api_key(token))
}

/// Resolve `X-Portal-Session`: one consistent GetItem of the hashed token (an expired or
/// revoked session is absent). The sliding expiry moves forward at most once a minute per
/// session, with a conditional write beside the request.
pub async fn authenticate_portal(db: &Db, headers: &http::HeaderMap) -> Result<Principal, ApiError> {
    let token = headers
        .get(PORTAL_SESSION_HEADER)
        .ok_or_else(|| {
            ApiError::unauthorized("X-Portal-Session header is missing; exchange a login link at POST /portal/sessions/exchange")
        })?
        .to_str()
        .unwrap_or_default()
        .trim();
    let invalid = || ApiError::unauthorized("X-Portal-Session is invalid or expired");
    let ok_shape = is_token(token, PORTAL_SESSION_PREFIX);
    if !ok_shape {
        return Err(invalid());
    }
    let pk = portal_session_pk(token);
    let item = db.get(&pk, keys::PORTAL_SESSION.table.sk).await?.ok_or_else(invalid)?;
    let (Some(ws), Some(session_id), Some(contact_id)) =
        (get_str(&item, "workspace_id"), get_str(&item, "session_id"), get_str(&item, "contact_id"))
    else {
        return Err(ApiError::internal("portal session item lacks its fields"));
    };
    let now = crate::ids::now_ms() / 1000;
    let expires = store::get_i64(&item, "expires_at").unwrap_or(0);
    let hard = store::get_i64(&item, "hard_expires_at").unwrap_or(0);
    let slid = (now + PORTAL_SESSION_IDLE_SECS).min(hard);
    if slid - expires >= 60 {
        let res = db
            .client
            .update_item()
            .table_name(&db.table)
            .key("pk", store::s(&pk))
            .key("sk", store::s(keys::PORTAL_SESSION.table.sk))
            .update_expression("SET expires_at = :e")
            .condition_expression("attribute_exists(pk) AND expires_at < :e")
            .expression_attribute_values(":e", store::n(slid))
            .send()
            .await;
        if let Err(e) = res
            && !e.as_service_error().is_some_and(|s| s.is_conditional_check_failed_exception())
        {
            tracing::warn!(error = %aws_sdk_dynamodb::error::DisplayErrorContext(e), "could not extend a portal session");
        }
    }
    Ok(Principal {
        workspace_id: Some(WorkspaceId::trusted(ws.to_string())),
        subject: format!("portal:{contact_id}"),
        scopes: vec![Scope::Read, Scope::Write],
        credential: Credential::Portal { session_id: session_id.to_string(), contact_id: contact_id.to_string() },
        requires_confirmation: RequiresConfirmation::default(),
    })
}

/// `last_used_at` of API keys, tracked lazily: at most one conditional write per key per hour
/// per container, run concurrently with the rate-limit call so it adds no latency.
pub async fn touch_last_used(db: &Db, principal: &Principal) {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static TOUCHED: OnceLock<Mutex<HashMap<String, i64>>> = OnceLock::new();
    const HOUR_MS: i64 = 3_600_000;
    let (Credential::ApiKey { key_id }, Some(ws)) = (&principal.credential, &principal.workspace_id) else { return };
    let now = crate::ids::now_ms();
    {
        let mut t = TOUCHED.get_or_init(Default::default).lock().unwrap();
        if t.get(key_id).is_some_and(|last| now - last < HOUR_MS) {
            return;
        }
        t.insert(key_id.clone(), now);
    }
    let res = db
        .client
        .update_item()
        .table_name(&db.table)
        .key("pk", store::s(store::ws_pk(ws)))
        .key("sk", store::s(keys::API_KEY.sk(&crate::ids::ApiKeyId::trusted(key_id.as_str()))))
        .update_expression("SET last_used_at = :at, last_used_ms = :now")
        .condition_expression("attribute_exists(pk) AND (attribute_not_exists(last_used_ms) OR last_used_ms < :hour_ago)")
        .expression_attribute_values(":at", store::s(crate::ids::now_rfc3339()))
        .expression_attribute_values(":now", store::n(now))
        .expression_attribute_values(":hour_ago", store::n(now - HOUR_MS))
        .send()
        .await;
    if let Err(e) = res
        && !e.as_service_error().is_some_and(|s| s.is_conditional_check_failed_exception())
    {
        tracing::warn!(error = %aws_sdk_dynamodb::error::DisplayErrorContext(e), "could not record last_used_at");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(key_id: &str) -> Principal {
        Principal {
            workspace_id: Some(WorkspaceId::trusted("ws_1")),
            subject: format!("key:{key_id}"),
            scopes: vec![Scope::Read],
            credential: Credential::ApiKey { key_id: key_id.into() },
            requires_confirmation: RequiresConfirmation::default(),
        }
    }

    #[test]
    fn the_key_cache_keeps_answers_for_its_ttl_and_forgets_on_demand() {
        let cache = KeyCache::new(std::time::Duration::from_millis(50));
        cache.put("h1".into(), Ok(principal("k1")));
        cache.put("h2".into(), Err(ApiError::forbidden("revoked")));
        assert_eq!(cache.get("h1").unwrap().unwrap().subject, "key:k1");
        assert_eq!(cache.get("h2").unwrap().unwrap_err().code, ErrorCode::Forbidden);
        cache.forget("h1");
        assert!(cache.get("h1").is_none());
        std::thread::sleep(std::time::Duration::from_millis(60));
        assert!(cache.get("h2").is_none(), "expired");
        let off = KeyCache::new(std::time::Duration::ZERO);
        off.put("h1".into(), Ok(principal("k1")));
        assert!(off.get("h1").is_none(), "a zero TTL keeps nothing");
    }

    #[test]
    fn keys_are_long_random_base62_and_hash_stably() {
        let a = generate_api_key();
        let b = generate_api_key();
        assert_ne!(a, b);
        assert!(looks_like_api_key(&a), "{a}");
        assert_eq!(a.len(), 4 + 43);
        assert_eq!(hash_api_key(&a), hash_api_key(&a));
        assert_eq!(hash_api_key(&a).len(), 64);
        assert!(!looks_like_api_key("wsp_short"));
        assert!(!looks_like_api_key("wsp_!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"));
    }

    #[test]
    fn roles_grant_scopes() {
        assert_eq!(role_scopes("viewer"), &[Scope::Read]);
        assert_eq!(role_scopes("member"), &[Scope::Read, Scope::Write, Scope::Confirm]);
        assert!(role_scopes("owner").contains(&Scope::Admin) && role_scopes("admin").contains(&Scope::Admin));
        assert!(role_scopes("stranger").is_empty());
        assert_eq!(Scope::parse("admin"), Some(Scope::Admin));
        assert_eq!(Scope::parse("Admin"), None);
    }
}
