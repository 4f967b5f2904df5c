//! Workspaces: the tenant itself, its API keys and its members (keys: `keys::WORKSPACE`,
//! `keys::SLUG_CLAIM`, `keys::API_KEY`, `keys::API_KEY_LOOKUP`, `keys::MEMBER`).

use crate::keys;
use serde::{Deserialize, Serialize};
use shared::auth::Scope;
use shared::auth::WorkspaceId;
use shared::events::EventType;
use shared::{ApiError, ApiResult, App};
use std::collections::BTreeMap;

pub use crate::ids::ApiKeyId;
use utoipa::ToSchema;

/// The workspace item's sort key (`keys::WORKSPACE` has no placeholder).
pub const WORKSPACE_SK: &str = keys::WORKSPACE.table.sk;

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

/// The workspace item, with its version.
pub async fn load(app: &App, ws: &WorkspaceId) -> ApiResult<(Workspace, i64)> {
    app.db.get_object(ws, WORKSPACE_SK).await?.ok_or_else(|| ApiError::not_found("workspace"))
}

// ---------- the effects: the workspace's settings, members and keys ----------

use crate::effects::{self as fx, Authority, ChangeMember, RevokeApiKey};
use shared::events::Event;
use shared::store::{self, Record, s, ws_pk};

pub fn slug_pk(slug: &str) -> String {
    keys::SLUG_CLAIM.pk(&[slug])
}

/// The workspace that holds `slug` (the portal's pages are addressed by it), and the slug it
/// uses now when this one is a former slug of it. A slug a workspace gave up stays reserved for
/// it for good: links and bookmarks its customers kept never open another workspace's pages.
pub async fn by_slug(app: &App, slug: &str) -> ApiResult<Option<(WorkspaceId, Option<String>)>> {
    if !valid_slug(slug) {
        return Ok(None);
    }
    let item = app.db.get(&slug_pk(slug), &keys::SLUG_CLAIM.sk(&[])).await?;
    Ok(item.and_then(|i| {
        let ws = store::get_str(&i, "workspace_id").map(WorkspaceId::trusted)?;
        Some((ws, store::get_str(&i, "moved_to").map(String::from)))
    }))
}

/// The claim that makes a slug one workspace's across the platform.
pub fn slug_item(slug: &str, ws: &str) -> store::Item {
    store::Item::from([("pk".into(), s(slug_pk(slug))), ("sk".into(), s(keys::SLUG_CLAIM.sk(&[]))), ("workspace_id".into(), s(ws))])
}

/// The effect `UpdateWorkspace`: the settings as changed (read at `version`), the slug's claim
/// moved with them when it changed.
pub async fn save_settings(
    auth: &Authority<fx::UpdateWorkspace>,
    app: &App,
    ws: &Workspace,
    version: i64,
    old_slug: &str,
) -> ApiResult<()> {
    let mut tx = auth.tx(&[])?.replace(Record::new(ws_pk(&ws.id), WORKSPACE_SK.into(), ws)?, version);
    if ws.slug != old_slug {
        // The new slug is free, or one this workspace used before; the old one stays reserved
        // for it, pointing at the new one.
        let moved = shared::store::Update::new(slug_pk(old_slug), keys::SLUG_CLAIM.sk(&[]), "SET moved_to = :to")
            .when("workspace_id = :ws")
            .value(":to", s(&ws.slug))
            .value(":ws", s(&ws.id));
        tx = tx
            .put_if(slug_item(&ws.slug, &ws.id), "attribute_not_exists(pk) OR workspace_id = :ws", vec![(":ws", s(&ws.id))])
            .update(moved);
    }
    tx.event(Event::new(&ws.id, EventType::WorkspaceUpdated, ws)).commit(app).await.map_err(|e| {
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
    let ws = &member.workspace_id;
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
            shared::store::Update::new(ws_pk(ws), shared::auth::member_sk(owner), "SET checked_at = :now")
                .when("#role = :owner")
                .name("#role", "role")
                .value(":owner", s("owner"))
                .value(":now", s(shared::ids::Timestamp::now().to_string())),
        );
    }
    let kind = if old_role.is_some() { EventType::WorkspaceMemberUpdated } else { EventType::WorkspaceMemberAdded };
    tx.event(Event::new(ws, kind, member))
        .commit(app)
        .await
        .map_err(|e| e.on_condition(|_| ApiError::conflict("the member or your own role changed meanwhile; read them again and retry")))
}

/// The effect `CreateApiKey`: the key's listing and look-up items (its secret only hashed).
pub async fn create_api_key(
    auth: &Authority<fx::CreateApiKey>,
    app: &App,
    ws: &WorkspaceId,
    key: &ApiKey,
    items: Vec<store::Item>,
) -> ApiResult<()> {
    let mut tx = auth.tx(&[])?;
    for item in items {
        tx = tx.put_if(item, "attribute_not_exists(pk)", vec![]);
    }
    tx.event(Event::new(ws, EventType::ApiKeyCreated, key)).commit(app).await.map_err(store::TxError::stale)
}

/// The effect `RevokeApiKey`: requests with the key get 403 from then on (other containers may
/// accept it for up to `auth::KEY_CACHE_TTL` more). Revoking a revoked key changes nothing.
pub async fn revoke_api_key(auth: &Authority<RevokeApiKey>, app: &App, ws: &WorkspaceId, id: &ApiKeyId) -> ApiResult<ApiKey> {
    let sk = keys::API_KEY.sk(&[id]);
    let item = app.db.get(&ws_pk(ws), &sk).await?.ok_or_else(|| ApiError::not_found("api key"))?;
    let hash = store::get_str(&item, "hash").unwrap_or_default().to_string();
    let version = store::get_i64(&item, "version").unwrap_or(0);
    let mut key: ApiKey = store::from_item(item)?;
    if key.revoked_at.is_some() {
        return Ok(key);
    }
    key.revoked_at = Some(shared::ids::Timestamp::now());
    let revoke_lookup =
        shared::store::Update::new(shared::auth::api_key_lookup_pk(&hash), shared::auth::API_KEY_LOOKUP_SK, "SET revoked = :t")
            .when("attribute_exists(pk)")
            .value(":t", shared::store::Value::Bool(true));
    let listing = Record::new(ws_pk(ws), sk, &key)?.attr("hash", s(&hash));
    auth.tx(&[])?
        .replace(listing, version)
        .update(revoke_lookup)
        .event(Event::new(ws, EventType::ApiKeyRevoked, &key))
        .commit(app)
        .await
        .map_err(store::TxError::stale)?;
    // This container stops trusting the key now; the others within auth::KEY_CACHE_TTL.
    app.keys.forget(&hash);
    Ok(key)
}

// ---------- operations ----------

use shared::auth::{self, Credential, Principal, RequiresConfirmation};
use shared::authority::Grant;
use shared::ids::Timestamp;
use shared::outbox::Tx;
use shared::validate::{self, Errors, Patch};

fn valid_slug(slug: &str) -> bool {
    (3..=48).contains(&slug.len())
        && slug.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !slug.starts_with('-')
        && !slug.ends_with('-')
        && !slug.contains("--")
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

// ---------- operations used by the admin CLI (no HTTP route creates workspaces) ----------

/// Create a workspace with a first API key. Returns the workspace and the key's secret.
pub async fn create_workspace(app: &App, name: &str) -> ApiResult<(Workspace, String)> {
    let mut errs = Errors::new();
    errs.text("name", name, 1, 100);
    errs.finish()?;
    let base = slugify(name);
    for attempt in 0..5 {
        // A taken slug gets a suffix from the random end of a fresh id.
        let slug = if attempt == 0 {
            base.clone()
        } else {
            let id = shared::ids::new_id("x");
            format!("{base}-{}", id[id.len() - 6..].to_lowercase())
        };
        let now = shared::ids::Timestamp::now();
        let ws = Workspace {
            id: WorkspaceId::trusted(shared::ids::new_id("ws")),
            object: "workspace".into(),
            name: name.into(),
            slug: slug.clone(),
            timezone: "UTC".into(),
            locale: "en".into(),
            default_currency: "EUR".into(),
            portal_origins: vec![],
            logo_url: None,
            accent_color: None,
            metadata: BTreeMap::new(),
            created_at: now,
            updated_at: now,
        };
        let (key, secret, key_items) = new_api_key(&ws.id, "default", Scope::API_KEY_MAX.to_vec(), Default::default(), None)?;
        let mut tx = Tx::new()
            .put_if(slug_item(&slug, &ws.id), "attribute_not_exists(pk)", vec![])
            .create(Record::new(ws_pk(&ws.id), WORKSPACE_SK.into(), &ws)?.version(1))
            .event(Event::new(&ws.id, EventType::WorkspaceCreated, &ws))
            .event(Event::new(&ws.id, EventType::ApiKeyCreated, &key));
        for item in key_items {
            tx = tx.put_if(item, "attribute_not_exists(pk)", vec![]);
        }
        match tx.commit(app).await {
            Ok(()) => return Ok((ws, secret)),
            Err(store::TxError::Condition(0)) => continue,
            Err(e) => return Err(e.stale()),
        }
    }
    Err(ApiError::conflict("could not find a free slug for this name"))
}

/// Add (or change the role of) an OAuth subject in a workspace.
pub async fn add_member(app: &App, ws: &WorkspaceId, subject: &str, role: &str) -> ApiResult<Member> {
    let mut errs = Errors::new();
    errs.text("subject", subject, 1, 255);
    if !auth::ROLES.contains(&role) {
        errs.add("role", format!("must be one of {}", auth::ROLES.join(", ")));
    }
    errs.finish()?;
    if app.db.get(&ws_pk(ws), WORKSPACE_SK).await?.is_none() {
        return Err(ApiError::not_found("workspace"));
    }
    let member = Member {
        object: "member".into(),
        subject: subject.into(),
        role: role.into(),
        workspace_id: ws.clone(),
        created_at: shared::ids::Timestamp::now(),
    };
    let rec =
        Record::new(ws_pk(ws), auth::member_sk(subject), &member)?.gsi1(keys::MEMBER.gsi1_pk(&[subject]), keys::MEMBER.gsi1_sk(&[ws]));
    Tx::new()
        .put(rec.item)
        .event(Event::new(ws, EventType::WorkspaceMemberAdded, &member))
        .commit(app)
        .await
        .map_err(store::TxError::stale)?;
    Ok(member)
}

/// A new key: the object, its secret, and the two items (listing + look-up by hash) to write.
fn new_api_key(
    ws: &WorkspaceId,
    name: &str,
    scopes: Vec<Scope>,
    requires_confirmation: RequiresConfirmation,
    created_by: Option<&str>,
) -> ApiResult<(ApiKey, String, Vec<store::Item>)> {
    let secret = auth::generate_api_key();
    let hash = auth::hash_api_key(&secret);
    let key = ApiKey {
        id: crate::ids::ApiKeyId::generate(),
        object: "api_key".into(),
        name: name.into(),
        prefix: secret[..12].to_string(),
        scopes: scopes.clone(),
        requires_confirmation: requires_confirmation.clone(),
        created_by: created_by.map(String::from),
        created_at: shared::ids::Timestamp::now(),
        last_used_at: None,
        revoked_at: None,
        secret: None,
    };
    let listing = Record::new(ws_pk(ws), keys::API_KEY.sk(&[&key.id]), &key)?.attr("hash", s(&hash)).version(1).item;
    let lookup = store::Item::from([
        ("pk".into(), s(auth::api_key_lookup_pk(&hash))),
        ("sk".into(), s(auth::API_KEY_LOOKUP_SK)),
        ("workspace_id".into(), s(ws)),
        ("key_id".into(), s(&key.id)),
        ("scopes".into(), store::to_attribute(&scopes)?),
        ("revoked".into(), shared::store::Value::Bool(false)),
        ("requires_confirmation".into(), store::to_attribute(&requires_confirmation)?),
    ]);
    Ok((key, secret, vec![listing, lookup]))
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

/// Change the settings (the effect `UpdateWorkspace`); the workspace as it now is.
pub async fn update(auth: &Authority<fx::UpdateWorkspace>, app: &App, ws_id: &WorkspaceId, input: UpdateWorkspace) -> ApiResult<Workspace> {
    let (mut ws, version) = load(app, ws_id).await?;
    let old_slug = ws.slug.clone();
    let mut errs = Errors::new();
    let mut required =
        |field: &str, p: Patch<String>, target: &mut String, ok: &dyn Fn(&str) -> bool, msg: &str| match p.required(&mut errs, field) {
            None => {}
            Some(v) if ok(&v) => *target = v,
            Some(_) => errs.add(field, msg),
        };
    required("name", input.name, &mut ws.name, &|v| !v.trim().is_empty() && v.chars().count() <= 100, "must be 1 to 100 characters");
    required("slug", input.slug, &mut ws.slug, &valid_slug, "must be 3 to 48 lowercase letters, digits and single hyphens");
    required("timezone", input.timezone, &mut ws.timezone, &validate::is_timezone, "must be an IANA time zone such as Europe/Berlin");
    required("locale", input.locale, &mut ws.locale, &validate::is_locale, "must be a BCP 47 language tag such as en or de-AT");
    required(
        "default_currency",
        input.default_currency,
        &mut ws.default_currency,
        &validate::is_currency,
        "must be an ISO 4217 code such as EUR",
    );
    errs.patch_metadata("metadata", input.metadata, &mut ws.metadata);
    match input.portal_origins {
        Patch::Absent => {}
        Patch::Null => ws.portal_origins.clear(),
        Patch::Value(list) => {
            if list.len() > 10 {
                errs.add("portal_origins", "at most 10 origins");
            }
            let mut origins = vec![];
            for (i, o) in list.iter().enumerate() {
                match url::Url::parse(o) {
                    Ok(u)
                        if u.scheme() == "https"
                            && u.host_str().is_some()
                            && u.path() == "/"
                            && u.query().is_none()
                            && u.username().is_empty() =>
                    {
                        origins.push(u.origin().ascii_serialization())
                    }
                    _ => errs.add(format!("portal_origins[{i}]"), "must be an https origin such as https://shop.example.com"),
                }
            }
            origins.dedup();
            ws.portal_origins = origins;
        }
    }
    match input.logo_url {
        Patch::Absent => {}
        Patch::Null => ws.logo_url = None,
        Patch::Value(u) => match shared::outbound::check_url(&u, app.cfg.webhooks.url_policy) {
            Ok(_) => ws.logo_url = Some(u),
            Err(e) => errs.add("logo_url", format!("must be an https URL the platform may fetch: {e}")),
        },
    }
    match input.accent_color {
        Patch::Absent => {}
        Patch::Null => ws.accent_color = None,
        Patch::Value(c) => match accent_contrast(&c) {
            None => errs.add("accent_color", "must be a colour as #rrggbb"),
            Some((white, black)) if white < 4.5 => errs.add(
                "accent_color",
                format!("has a contrast of {white:.2}:1 against white (and {black:.2}:1 against black); white text on it and it on a white page need 4.5:1"),
            ),
            Some(_) => ws.accent_color = Some(c.to_ascii_lowercase()),
        },
    }
    errs.finish()?;
    ws.updated_at = shared::ids::Timestamp::now();
    save_settings(auth, app, &ws, version, &old_slug).await?;
    Ok(ws)
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

/// The workspaces an OAuth subject is a member of, after `after`; the page and the key to go
/// on from.
pub async fn of_subject(app: &App, subject: &str, after: Option<String>, limit: usize) -> ApiResult<(Vec<Workspace>, Option<String>)> {
    let spec = keys::MEMBERSHIPS.query(&[subject], &[], after, limit);
    let out = app.db.query_page(spec).await?;
    let ids: Vec<String> = out.items.iter().filter_map(|i| store::get_str(i, "workspace_id").map(String::from)).collect();
    // batch_get keeps the order and retries keys DynamoDB leaves unprocessed.
    let keys: Vec<(String, String)> = ids.iter().map(|id| (ws_pk(id), WORKSPACE_SK.to_string())).collect();
    let workspaces: Vec<Workspace> = app.db.batch_get(&keys).await?.into_iter().map(store::from_item).collect::<ApiResult<_>>()?;
    Ok((workspaces, out.next_after))
}

/// A member's role.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetMember {
    /// owner, admin, member or viewer.
    pub role: String,
}

/// Add a member or change a member's role (the effect `ChangeMember`). Only an owner grants
/// `owner` or changes another owner's role, and never their own.
pub async fn change_member(
    auth: &Authority<ChangeMember>,
    app: &App,
    ws: &WorkspaceId,
    by: &Principal,
    subject: &str,
    input: SetMember,
) -> ApiResult<Member> {
    let subject = subject.to_string();
    let mut errs = Errors::new();
    errs.text("subject", &subject, 1, 255);
    if !auth::ROLES.contains(&input.role.as_str()) {
        errs.add("role", format!("must be one of {}", auth::ROLES.join(", ")));
    }
    errs.finish()?;
    let caller = &by.subject;
    let (current, caller_role) = if matches!(by.credential, Credential::OAuth) && caller != &subject {
        let keys_ = [(ws_pk(ws), auth::member_sk(&subject)), (ws_pk(ws), auth::member_sk(caller))];
        let found = app.db.batch_get(&keys_).await?;
        let role_of = |s: &str| {
            found.iter().find(|i| store::get_str(i, "subject") == Some(s)).and_then(|i| store::get_str(i, "role")).map(String::from)
        };
        (found.iter().find(|i| store::get_str(i, "subject") == Some(subject.as_str())).cloned(), role_of(caller))
    } else {
        let current = app.db.get(&ws_pk(ws), &auth::member_sk(&subject)).await?;
        let caller_role = current.as_ref().filter(|_| caller == &subject).and_then(|i| store::get_str(i, "role")).map(String::from);
        (current, caller_role)
    };
    let old_role = current.as_ref().and_then(|i| store::get_str(i, "role")).map(String::from);
    if old_role.as_deref() == Some(input.role.as_str()) {
        return store::from_item::<Member>(current.unwrap_or_default());
    }
    let touches_owner = input.role == "owner" || old_role.as_deref() == Some("owner");
    if touches_owner && caller == &subject {
        return Err(ApiError::forbidden("an owner's role is changed by another owner"));
    }
    if touches_owner && caller_role.as_deref() != Some("owner") {
        return Err(ApiError::forbidden("only an owner grants owner or changes an owner's role"));
    }
    let member = Member {
        object: "member".into(),
        subject: subject.clone(),
        role: input.role.clone(),
        workspace_id: ws.clone(),
        created_at: current
            .as_ref()
            .and_then(|i| store::get_str(i, "created_at"))
            .and_then(shared::ids::Timestamp::parse)
            .unwrap_or_else(shared::ids::Timestamp::now),
    };
    // An owner acting on owners is still one when this commits.
    let acting_owner = touches_owner.then_some(caller.as_str());
    set_member(auth, app, &member, old_role.as_deref(), acting_owner).await?;
    Ok(member)
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

/// Validate and create an API key no stronger than the credential `by` that asks for it (the
/// effect `CreateApiKey`, asked of `grant` once the request is valid): the key shown once with
/// its secret, and the key as kept.
pub async fn issue_api_key(app: &App, ws: &WorkspaceId, grant: &Grant, by: &Principal, input: CreateApiKey) -> ApiResult<(ApiKey, ApiKey)> {
    let mut errs = Errors::new();
    errs.text("name", &input.name, 1, 100);
    let mut scopes = input.scopes.unwrap_or_else(|| vec![Scope::Read, Scope::Write]);
    scopes.sort_by_key(|s| *s as u8);
    scopes.dedup();
    if scopes.is_empty() {
        errs.add("scopes", "must not be empty");
    }
    if scopes.contains(&Scope::Confirm) {
        errs.add("scopes", "an API key cannot hold confirm: confirmations come from a person's OAuth token");
    } else if scopes.iter().any(|s| !by.scopes.contains(s)) {
        // A credential cannot mint a key more powerful than itself.
        errs.add("scopes", "cannot exceed the scopes of the calling credential");
    }
    // A new key is at least as restricted as the credential that makes it; without a value it
    // inherits the caller's restrictions. Earlier releases' capability names become today's.
    let own = grant.requires_confirmation();
    let requires_confirmation = match input.requires_confirmation.unwrap_or_else(|| own.clone()) {
        RequiresConfirmation::Only(list) => {
            for (i, c) in list.iter().enumerate() {
                if !crate::capabilities::exists(c) {
                    errs.add(format!("requires_confirmation[{i}]"), "not a capability (see GET /capabilities)");
                }
            }
            let mut names: Vec<String> = list.iter().map(|c| shared::auth::capability_name(c).to_string()).collect();
            names.sort();
            names.dedup();
            RequiresConfirmation::Only(names)
        }
        all => all,
    };
    if !requires_confirmation.at_least(own) {
        errs.add(
            "requires_confirmation",
            format!(
                "must require at least the confirmations of the calling credential ({})",
                serde_json::to_string(own).unwrap_or_default()
            ),
        );
    }
    errs.finish()?;
    let authority = grant.authorize::<fx::CreateApiKey>()?;
    let (key, secret, items) = new_api_key(ws, &input.name, scopes, requires_confirmation, Some(&by.subject))?;
    create_api_key(&authority, app, ws, &key, items).await?;
    let shown = ApiKey { secret: Some(secret), ..key.clone() };
    Ok((shown, key))
}

/// One page of the workspace's API keys (secrets are stored apart, as hashes).
pub async fn api_keys(app: &App, ws: &WorkspaceId, after: Option<String>, limit: usize) -> ApiResult<(Vec<ApiKey>, Option<String>)> {
    shared::request::page(app, keys::API_KEYS.query(&[ws], &[], after, limit)).await
}

/// One page of the workspace's members.
pub async fn members(app: &App, ws: &WorkspaceId, after: Option<String>, limit: usize) -> ApiResult<(Vec<Member>, Option<String>)> {
    shared::request::page(app, keys::MEMBERS.query(&[ws], &[], after, limit)).await
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
