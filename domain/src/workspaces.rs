//! Workspaces: the tenant itself, its API keys and its members (keys: `keys::WORKSPACE`,
//! `keys::SLUG_CLAIM`, `keys::API_KEY`, `keys::API_KEY_LOOKUP`, `keys::MEMBER`).

use crate::keys;
use serde::{Deserialize, Serialize};
use shared::auth::Scope;
use shared::{ApiError, ApiResult, App};
use std::collections::BTreeMap;

shared::prefixed_id!(ApiKeyId, "key", "api key");
use utoipa::ToSchema;

/// The workspace item's sort key (`keys::WORKSPACE` has no placeholder).
pub const WORKSPACE_SK: &str = keys::WORKSPACE.table.sk;

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct Workspace {
    /// `ws_...`
    pub id: String,
    /// Always `workspace`.
    pub object: String,
    pub name: String,
    /// Unique across the platform: lowercase letters, digits and hyphens.
    pub slug: String,
    /// IANA time zone, e.g. `Europe/Berlin`.
    pub timezone: String,
    /// BCP 47 tag, e.g. `en` or `de-AT`.
    pub locale: String,
    /// ISO 4217 code.
    pub default_currency: String,
    /// Origins (`https://host[:port]`) a portal login link may return to; at most 10.
    #[serde(default)]
    pub portal_origins: Vec<String>,
    pub metadata: BTreeMap<String, String>,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct ApiKey {
    /// `key_...`
    pub id: String,
    /// Always `api_key`.
    pub object: String,
    pub name: String,
    /// The first characters of the key, to recognise it.
    pub prefix: String,
    pub scopes: Vec<Scope>,
    /// Which of its confirmable writes need a person's capability confirmation
    /// (`X-Capability-Confirmation`): `true` all of them, `false` none, or a list of
    /// capabilities (`GET /capabilities`).
    #[serde(default)]
    pub requires_confirmation: shared::auth::RequiresConfirmation,
    /// Who made it: `key:<key id>` or an OAuth subject; absent for the key a workspace is
    /// created with.
    #[serde(default)]
    pub created_by: Option<String>,
    pub created_at: String,
    pub last_used_at: Option<String>,
    pub revoked_at: Option<String>,
    /// The full key: present only in the response that created it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub secret: Option<String>,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct Member {
    /// Always `member`.
    pub object: String,
    /// The identity provider's subject (`sub` claim).
    pub subject: String,
    /// owner, admin, member or viewer.
    pub role: String,
    pub workspace_id: String,
    pub created_at: String,
}

/// The workspace item, with its version.
pub async fn load(app: &App, ws: &str) -> ApiResult<(Workspace, i64)> {
    app.db.get_object(ws, WORKSPACE_SK).await?.ok_or_else(|| ApiError::not_found("workspace"))
}
