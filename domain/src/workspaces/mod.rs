//! Workspaces: the tenant itself, its API keys and its members (keys: `keys::WORKSPACE`,
//! `keys::SLUG_CLAIM`, `keys::API_KEY`, `keys::API_KEY_LOOKUP`, `keys::MEMBER`).

mod store;

pub use crate::ids::ApiKeyId;
use serde::{Deserialize, Serialize};
use shared::auth::RequiresConfirmation;
use shared::auth::Scope;
use shared::auth::WorkspaceId;
use shared::ids::Timestamp;
use shared::validate::Patch;
use shared::{ApiError, ApiResult};
use std::collections::BTreeMap;
pub use store::{
    WORKSPACE_SK, add_member, api_keys, by_slug, change_member, create_api_key, create_workspace, issue_api_key, load, members, of_subject,
    revoke_api_key, save_settings, set_member, slug_item, slug_pk, update,
};
use utoipa::ToSchema;

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct Workspace {
    /// `ws_...`
    #[serde(deserialize_with = "WorkspaceId::from_record")]
    pub id: WorkspaceId,
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
    /// The portal pages' logo: an https URL of a PNG, JPEG, WebP or GIF (at most 256 KiB),
    /// fetched by the platform and served from the pages' own origin.
    #[serde(default)]
    #[schema(max_length = 2048)]
    pub logo_url: Option<String>,
    /// The portal pages' accent colour, `#rrggbb`: buttons and links carry it, so it must have
    /// a contrast of at least 4.5:1 against white (the page and the buttons' text).
    #[serde(default)]
    #[schema(pattern = "^#[0-9a-fA-F]{6}$")]
    pub accent_color: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct ApiKey {
    /// `key_...`
    pub id: ApiKeyId,
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
    pub created_at: Timestamp,
    pub last_used_at: Option<Timestamp>,
    pub revoked_at: Option<Timestamp>,
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
    #[serde(deserialize_with = "WorkspaceId::from_record")]
    pub workspace_id: WorkspaceId,
    pub created_at: Timestamp,
}

fn valid_slug(slug: &str) -> bool {
    (3..=48).contains(&slug.len())
        && slug.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !slug.starts_with('-')
        && !slug.ends_with('-')
        && !slug.contains("--")
}

/// The value of `UpdateWorkspace`: each setting that changes, as it is and as it will be.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Resetting {
    pub workspace_id: WorkspaceId,
    /// By field name; a field the change leaves as it is does not appear.
    pub changes: BTreeMap<String, Change>,
}

#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Change {
    pub before: serde_json::Value,
    pub after: serde_json::Value,
}

impl crate::effects::Valued for crate::effects::UpdateWorkspace {
    type Value = Resetting;
}

impl Resetting {
    /// The fields in which `after` differs from `before` (the time of the change is not one).
    pub fn between(before: &Workspace, after: &Workspace) -> ApiResult<Self> {
        let json = |w: &Workspace| serde_json::to_value(w).map_err(|e| ApiError::internal(format!("a workspace as JSON: {e}")));
        let (old, new) = (json(before)?, json(after)?);
        let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else { return Err(ApiError::internal("a workspace is an object")) };
        let changes = new
            .iter()
            .filter(|(k, v)| k.as_str() != "updated_at" && old.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), Change { before: old.get(k).cloned().unwrap_or_default(), after: v.clone() }))
            .collect();
        Ok(Self { workspace_id: after.id.clone(), changes })
    }
}

/// The value of `ChangeMember`: who, the role they have (none for a new member) and the one
/// they will have.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Membership {
    pub subject: String,
    pub old_role: Option<String>,
    pub new_role: String,
}

impl crate::effects::Valued for crate::effects::ChangeMember {
    type Value = Membership;
}

/// The value of `CreateApiKey`: the credential that will exist (its secret is made after the
/// approval and shown once, so it is never part of what anyone approves).
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct NewKey {
    pub name: String,
    pub scopes: Vec<Scope>,
    pub requires_confirmation: shared::auth::RequiresConfirmation,
}

impl crate::effects::Valued for crate::effects::CreateApiKey {
    type Value = NewKey;
}

/// The value of `RevokeApiKey`: the key that stops working, as its listing shows it.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Revoking {
    pub key_id: ApiKeyId,
    pub name: String,
    pub prefix: String,
    pub scopes: Vec<Scope>,
    pub created_by: Option<String>,
}

impl crate::effects::Valued for crate::effects::RevokeApiKey {
    type Value = Revoking;
}

/// A slug from a name: `Acme GmbH & Co` -> `acme-gmbh-co`.
pub fn slugify(name: &str) -> String {
    let mut out = String::new();
    for c in name.to_lowercase().chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-').chars().take(40).collect::<String>();
    if out.len() < 3 { format!("ws-{out}").trim_end_matches('-').to_string() } else { out }
}

/// A change to the workspace's settings.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct UpdateWorkspace {
    #[serde(default)]
    #[schema(value_type = String, min_length = 1, max_length = 100, pattern = "\\S")]
    pub name: Patch<String>,
    /// 3 to 48 lowercase letters, digits and single hyphens, neither first nor last.
    #[serde(default)]
    #[schema(value_type = String, min_length = 3, max_length = 48, pattern = "^[a-z0-9]+(-[a-z0-9]+)*$")]
    pub slug: Patch<String>,
    #[serde(default)]
    // The shapes `validate::is_timezone`, `is_locale` and `is_currency` accept; which names,
    // tags and codes exist is theirs (docs/api.md).
    #[schema(value_type = String, pattern = "^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$")]
    pub timezone: Patch<String>,
    #[serde(default)]
    #[schema(value_type = String, pattern = "^[a-z]{2,3}(-([A-Z]{2}|[0-9]{3}|[A-Z][a-z]{3}))*$")]
    pub locale: Patch<String>,
    #[serde(default)]
    #[schema(value_type = String, pattern = "^[A-Z]{3}$")]
    pub default_currency: Patch<String>,
    /// Origins a portal login link may return to (`https://shop.example.com`); replaces the list.
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>, max_items = 10)]
    pub portal_origins: Patch<Vec<String>>,
    /// https URL of the portal pages' logo; null removes it.
    #[serde(default)]
    #[schema(value_type = Option<String>, max_length = 2048)]
    pub logo_url: Patch<String>,
    /// `#rrggbb` with a contrast of at least 4.5:1 against white; null for the default.
    #[serde(default)]
    #[schema(value_type = Option<String>, pattern = "^#[0-9a-fA-F]{6}$")]
    pub accent_color: Patch<String>,
    /// Replaces the whole map.
    #[serde(default)]
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    pub metadata: Patch<BTreeMap<String, String>>,
}

/// A `#rrggbb` colour's contrast ratios (WCAG 2) against white and against black.
pub fn accent_contrast(c: &str) -> Option<(f64, f64)> {
    let hex = c.strip_prefix('#').filter(|h| h.len() == 6 && h.bytes().all(|b| b.is_ascii_hexdigit()))?;
    let channel = |i: usize| {
        let v = f64::from(u8::from_str_radix(&hex[i..i + 2], 16).ok()?) / 255.0;
        Some(if v <= 0.04045 { v / 12.92 } else { ((v + 0.055) / 1.055).powf(2.4) })
    };
    let l = 0.2126 * channel(0)? + 0.7152 * channel(2)? + 0.0722 * channel(4)?;
    Some((1.05 / (l + 0.05), (l + 0.05) / 0.05))
}

/// A member's role.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetMember {
    /// owner, admin, member or viewer.
    pub role: String,
}

/// A new API key.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateApiKey {
    /// 1 to 100 characters.
    #[schema(min_length = 1, max_length = 100, pattern = "\\S")]
    pub name: String,
    /// Defaults to `["read", "write"]`; never `confirm` (a key is not a person).
    #[serde(default)]
    pub scopes: Option<Vec<Scope>>,
    /// `true`: every confirmable write of this key needs a person's capability confirmation;
    /// a list: these capabilities only (`GET /capabilities`). Defaults to `false`.
    #[serde(default)]
    pub requires_confirmation: Option<RequiresConfirmation>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        assert_eq!(slugify("Acme GmbH & Co"), "acme-gmbh-co");
        assert_eq!(slugify("A"), "ws-a");
        assert!(valid_slug(&slugify("Zoë's Café!!")), "{}", slugify("Zoë's Café!!"));
        assert!(valid_slug("acme-2"));
        assert!(!valid_slug("-acme") && !valid_slug("ac") && !valid_slug("Acme") && !valid_slug("a--b"));
    }
}

#[cfg(test)]
mod accent_tests {
    #[test]
    fn an_accent_needs_4_5_to_1_against_white() {
        let (white, black) = super::accent_contrast("#000000").unwrap();
        assert!((white - 21.0).abs() < 0.01 && (black - 1.0).abs() < 0.01);
        assert!(super::accent_contrast("#1d4ed8").unwrap().0 >= 4.5, "a usual brand blue passes");
        assert!(super::accent_contrast("#ffd400").unwrap().0 < 4.5, "yellow on white does not");
        assert!(super::accent_contrast("#777777").unwrap().0 < 4.5, "#777 is 4.48:1");
        assert!(super::accent_contrast("1d4ed8").is_none() && super::accent_contrast("#1d4ed").is_none());
    }
}
