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
    #[schema(pattern = "^ws_[0-7][0-9A-HJKMNP-TV-Z]{25}$")]
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
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct ApiKey {
    /// `key_...`
    #[schema(pattern = "^key_[0-7][0-9A-HJKMNP-TV-Z]{25}$")]
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
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub last_used_at: Option<String>,
    #[schema(format = DateTime)]
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
    #[schema(pattern = "^ws_[0-7][0-9A-HJKMNP-TV-Z]{25}$")]
    pub workspace_id: String,
    #[schema(format = DateTime)]
    pub created_at: String,
}

/// The workspace item, with its version.
pub async fn load(app: &App, ws: &str) -> ApiResult<(Workspace, i64)> {
    app.db.get_object(ws, WORKSPACE_SK).await?.ok_or_else(|| ApiError::not_found("workspace"))
}

// ---------- the effects: the workspace's settings, members and keys ----------

use crate::effects::{Authority, ChangeMember, CreateApiKey, RevokeApiKey, UpdateWorkspace};
use shared::events::Event;
use shared::store::{self, Record, s, ws_pk};

pub fn slug_pk(slug: &str) -> String {
    keys::SLUG_CLAIM.pk(&[slug])
}

/// The claim that makes a slug one workspace's across the platform.
pub fn slug_item(slug: &str, ws: &str) -> store::Item {
    store::Item::from([("pk".into(), s(slug_pk(slug))), ("sk".into(), s(keys::SLUG_CLAIM.sk(&[]))), ("workspace_id".into(), s(ws))])
}

/// The effect `UpdateWorkspace`: the settings as changed (read at `version`), the slug's claim
/// moved with them when it changed.
pub async fn save_settings(auth: &Authority<UpdateWorkspace>, app: &App, ws: &Workspace, version: i64, old_slug: &str) -> ApiResult<()> {
    let mut tx = auth.tx(&[])?.replace(Record::new(ws_pk(&ws.id), WORKSPACE_SK.into(), ws)?, version);
    if ws.slug != old_slug {
        tx = tx.put_if(slug_item(&ws.slug, &ws.id), "attribute_not_exists(pk)", vec![]).delete_if(
            slug_pk(old_slug),
            keys::SLUG_CLAIM.sk(&[]),
            "workspace_id = :ws",
            vec![(":ws", s(&ws.id))],
        );
    }
    tx.event(Event::new(&ws.id, "workspace.updated", ws)).commit(app).await.map_err(|e| {
        e.on_condition(|i| match i {
            1 => ApiError::conflict("this slug is taken").with_details(vec![shared::error::ErrorDetail::field("slug", "is taken")]),
            _ => ApiError::conflict("the workspace was changed concurrently; read it again and retry"),
        })
    })
}

/// The effect `ChangeMember`: `member` written over the role it had (`old_role`), and, when an
/// owner's role is touched, `acting_owner` still an owner as it commits.
pub async fn set_member(
    auth: &Authority<ChangeMember>,
    app: &App,
    member: &Member,
    old_role: Option<&str>,
    acting_owner: Option<&str>,
) -> ApiResult<()> {
    let ws = member.workspace_id.as_str();
    let rec = Record::new(ws_pk(ws), shared::auth::member_sk(&member.subject), member)?
        .gsi1(keys::MEMBER.gsi1_pk(&[&member.subject]), keys::MEMBER.gsi1_sk(&[ws]));
    // The member is as read (no concurrent change is lost).
    let tx = auth.tx(&[])?;
    let mut tx = match old_role {
        Some(old) => tx.put_if_named(rec.item, "#role = :old", &[("#role", "role")], vec![(":old", s(old))]),
        None => tx.put_if(rec.item, "attribute_not_exists(pk)", vec![]),
    };
    if let Some(owner) = acting_owner {
        tx = tx.update(
            aws_sdk_dynamodb::types::Update::builder()
                .key("pk", s(ws_pk(ws)))
                .key("sk", s(shared::auth::member_sk(owner)))
                .update_expression("SET checked_at = :now")
                .condition_expression("#role = :owner")
                .expression_attribute_names("#role", "role")
                .expression_attribute_values(":owner", s("owner"))
                .expression_attribute_values(":now", s(shared::ids::now_rfc3339())),
        );
    }
    let kind = if old_role.is_some() { "workspace.member.updated" } else { "workspace.member.added" };
    tx.event(Event::new(ws, kind, member))
        .commit(app)
        .await
        .map_err(|e| e.on_condition(|_| ApiError::conflict("the member or your own role changed meanwhile; read them again and retry")))
}

/// The effect `CreateApiKey`: the key's listing and look-up items (its secret only hashed).
pub async fn create_api_key(auth: &Authority<CreateApiKey>, app: &App, ws: &str, key: &ApiKey, items: Vec<store::Item>) -> ApiResult<()> {
    let mut tx = auth.tx(&[])?;
    for item in items {
        tx = tx.put_if(item, "attribute_not_exists(pk)", vec![]);
    }
    tx.event(Event::new(ws, "api_key.created", key)).commit(app).await.map_err(store::TxError::stale)
}

/// The effect `RevokeApiKey`: requests with the key get 403 from then on (other containers may
/// accept it for up to `auth::KEY_CACHE_TTL` more). Revoking a revoked key changes nothing.
pub async fn revoke_api_key(auth: &Authority<RevokeApiKey>, app: &App, ws: &str, id: &ApiKeyId) -> ApiResult<ApiKey> {
    let sk = keys::API_KEY.sk(&[id]);
    let item = app.db.get(&ws_pk(ws), &sk).await?.ok_or_else(|| ApiError::not_found("api key"))?;
    let hash = store::get_str(&item, "hash").unwrap_or_default().to_string();
    let version = store::get_i64(&item, "version").unwrap_or(0);
    let mut key: ApiKey = store::from_item(item)?;
    if key.revoked_at.is_some() {
        return Ok(key);
    }
    key.revoked_at = Some(shared::ids::now_rfc3339());
    let revoke_lookup = aws_sdk_dynamodb::types::Update::builder()
        .key("pk", s(shared::auth::api_key_lookup_pk(&hash)))
        .key("sk", s(shared::auth::API_KEY_LOOKUP_SK))
        .update_expression("SET revoked = :t")
        .condition_expression("attribute_exists(pk)")
        .expression_attribute_values(":t", aws_sdk_dynamodb::types::AttributeValue::Bool(true));
    let listing = Record::new(ws_pk(ws), sk, &key)?.attr("hash", s(&hash));
    auth.tx(&[])?
        .replace(listing, version)
        .update(revoke_lookup)
        .event(Event::new(ws, "api_key.revoked", &key))
        .commit(app)
        .await
        .map_err(store::TxError::stale)?;
    // This container stops trusting the key now; the others within auth::KEY_CACHE_TTL.
    app.keys.forget(&hash);
    Ok(key)
}
