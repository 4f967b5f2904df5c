//! Workspaces: the tenant itself, its API keys and its members.
//!
//! Items (pk = WS#<workspace>):
//! - `WORKSPACE`: the workspace; `SLUG#<slug>` (own partition) keeps slugs unique platform-wide.
//! - `APIKEY#<key id>`: the key as listed; its secret is only in the look-up item
//!   `APIKEY#<sha256>` (own partition), which authentication reads.
//! - `MEMBER#<subject>`: an OAuth subject's role; GSI1 `MEMBERSHIP#<subject>` lists a subject's workspaces.

use domain::effects::{self as fx, Effect as _};
use domain::keys;
pub use domain::workspaces::{ApiKey, Member, WORKSPACE_SK, Workspace};
use serde::{Deserialize, Serialize};
use shared::auth::{self, Credential, RequiresConfirmation, Scope};
use shared::events::Event;
use shared::outbox::Tx;
use shared::store::{self, Record, s, ws_pk};
use shared::validate::{self, Errors, Patch};
use shared::{ApiError, ApiResult, App, Reply, Req};
use std::collections::BTreeMap;
use utoipa::ToSchema;

shared::area! {
    tag = "workspaces", description = "The workspace, its API keys and members",
    operations = [
        list_workspaces [needs_workspace = false],
        get_current, list_members,
        set_member [needs = Scope::Admin, effects = &[fx::ChangeMember::INFO]],
        // Who may do what, and the workspace's settings: owners and admins.
        update_current [needs = Scope::Admin, effects = &[fx::UpdateWorkspace::INFO]], list_api_keys [needs = Scope::Admin],
        create_api_key [needs = Scope::Admin, effects = &[fx::CreateApiKey::INFO]],
        revoke_api_key [needs = Scope::Admin, effects = &[fx::RevokeApiKey::INFO]],
    ],
    schemas = [Workspace, ApiKey, Member, UpdateWorkspace, CreateApiKey, Scope, RequiresConfirmation, SetMember],
}

use domain::workspaces::slug_item;

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
        let now = shared::ids::now_rfc3339();
        let ws = Workspace {
            id: shared::ids::new_id("ws"),
            object: "workspace".into(),
            name: name.into(),
            slug: slug.clone(),
            timezone: "UTC".into(),
            locale: "en".into(),
            default_currency: "EUR".into(),
            portal_origins: vec![],
            metadata: BTreeMap::new(),
            created_at: now.clone(),
            updated_at: now,
        };
        let (key, secret, key_items) = new_api_key(&ws.id, "default", Scope::API_KEY_MAX.to_vec(), Default::default(), None)?;
        let mut tx = Tx::new()
            .put_if(slug_item(&slug, &ws.id), "attribute_not_exists(pk)", vec![])
            .create(Record::new(ws_pk(&ws.id), WORKSPACE_SK.into(), &ws)?.version(1))
            .event(Event::new(&ws.id, "workspace.created", &ws))
            .event(Event::new(&ws.id, "api_key.created", &key));
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
pub async fn add_member(app: &App, ws: &str, subject: &str, role: &str) -> ApiResult<Member> {
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
        workspace_id: ws.into(),
        created_at: shared::ids::now_rfc3339(),
    };
    let rec =
        Record::new(ws_pk(ws), auth::member_sk(subject), &member)?.gsi1(keys::MEMBER.gsi1_pk(&[subject]), keys::MEMBER.gsi1_sk(&[ws]));
    Tx::new().put(rec.item).event(Event::new(ws, "workspace.member.added", &member)).commit(app).await.map_err(store::TxError::stale)?;
    Ok(member)
}

/// A new key: the object, its secret, and the two items (listing + look-up by hash) to write.
fn new_api_key(
    ws: &str,
    name: &str,
    scopes: Vec<Scope>,
    requires_confirmation: RequiresConfirmation,
    created_by: Option<&str>,
) -> ApiResult<(ApiKey, String, Vec<store::Item>)> {
    let secret = auth::generate_api_key();
    let hash = auth::hash_api_key(&secret);
    let key = ApiKey {
        id: shared::ids::new_id("key"),
        object: "api_key".into(),
        name: name.into(),
        prefix: secret[..12].to_string(),
        scopes: scopes.clone(),
        requires_confirmation: requires_confirmation.clone(),
        created_by: created_by.map(String::from),
        created_at: shared::ids::now_rfc3339(),
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
        ("revoked".into(), aws_sdk_dynamodb::types::AttributeValue::Bool(false)),
        ("requires_confirmation".into(), store::to_attribute(&requires_confirmation)?),
    ]);
    Ok((key, secret, vec![listing, lookup]))
}

// ---------- routes ----------

/// The workspace of the calling credential.
#[utoipa::path(get, path = "/workspaces/current", tag = "workspaces",
    responses((status = 200, body = shared::openapi::Data<Workspace>), shared::openapi::CommonErrors))]
pub async fn get_current(app: &App, req: Req) -> ApiResult<Reply> {
    Ok(Reply::ok(&domain::workspaces::load(app, req.ws()).await?.0))
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct UpdateWorkspace {
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub name: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub slug: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub timezone: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub locale: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub default_currency: Patch<String>,
    /// Origins a portal login link may return to (`https://shop.example.com`); replaces the list.
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>, max_items = 10)]
    pub portal_origins: Patch<Vec<String>>,
    /// Replaces the whole map.
    #[serde(default)]
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    pub metadata: Patch<BTreeMap<String, String>>,
}

/// Change name, slug, time zone, locale, default currency, portal origins or metadata. (Sending domains are
/// their own resource: `/emails/domains`.)
#[utoipa::path(patch, path = "/workspaces/current", tag = "workspaces", request_body = UpdateWorkspace,
    responses((status = 200, body = shared::openapi::Data<Workspace>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn update_current(app: &App, req: Req) -> ApiResult<Reply> {
    let authority = req.grant.authorize::<fx::UpdateWorkspace>()?;
    let input: UpdateWorkspace = req.json()?;
    let (mut ws, version) = domain::workspaces::load(app, req.ws()).await?;
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
    errs.finish()?;
    ws.updated_at = shared::ids::now_rfc3339();
    domain::workspaces::save_settings(&authority, app, &ws, version, &old_slug).await?;
    Ok(Reply::ok(&ws))
}

/// The workspaces the caller can use: with an OAuth token, every workspace its subject is a
/// member of; with an API key, the key's workspace.
#[utoipa::path(get, path = "/workspaces", tag = "workspaces",
    params(shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<Workspace>), shared::openapi::CommonErrors))]
pub async fn list_workspaces(app: &App, req: Req) -> ApiResult<Reply> {
    let page = req.page(app, "workspaces", &[]).await?;
    if req.principal.credential != Credential::OAuth {
        // Cursors are honoured (and validated) even though a key has exactly one workspace.
        let items = if page.after.is_some() { vec![] } else { vec![domain::workspaces::load(app, req.ws()).await?.0] };
        return Ok(Reply::list(&items, None));
    }
    let spec = keys::MEMBERSHIPS.query(&[&req.principal.subject], &[], page.after.clone(), page.limit);
    let out = app.db.query_page(spec).await?;
    let ids: Vec<String> = out.items.iter().filter_map(|i| store::get_str(i, "workspace_id").map(String::from)).collect();
    // batch_get keeps the order and retries keys DynamoDB leaves unprocessed.
    let keys: Vec<(String, String)> = ids.iter().map(|id| (ws_pk(id), WORKSPACE_SK.to_string())).collect();
    let workspaces: Vec<Workspace> = app.db.batch_get(&keys).await?.into_iter().map(store::from_item).collect::<ApiResult<_>>()?;
    Ok(Reply::list(&workspaces, out.next_after.map(|a| page.cursor_for(&a))))
}

/// API keys of this workspace (secrets are never listed).
#[utoipa::path(get, path = "/workspaces/current/api-keys", tag = "workspaces",
    params(shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<ApiKey>), shared::openapi::CommonErrors))]
pub async fn list_api_keys(app: &App, req: Req) -> ApiResult<Reply> {
    list_simple::<ApiKey>(app, &req, "api_keys", keys::API_KEYS).await
}

/// Members (OAuth subjects) of this workspace.
#[utoipa::path(get, path = "/workspaces/current/members", tag = "workspaces",
    params(shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<Member>), shared::openapi::CommonErrors))]
pub async fn list_members(app: &App, req: Req) -> ApiResult<Reply> {
    list_simple::<Member>(app, &req, "members", keys::MEMBERS).await
}

async fn list_simple<T: serde::de::DeserializeOwned + Serialize>(app: &App, req: &Req, name: &str, list: keys::List) -> ApiResult<Reply> {
    let page = req.page(app, name, &[]).await?;
    shared::request::list_page::<T>(app, &page, list.query(&[req.ws()], &[], page.after.clone(), page.limit)).await
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetMember {
    /// owner, admin, member or viewer.
    pub role: String,
}

/// Add a member or change a member's role (owners and admins). Only an owner grants `owner` or
/// changes another owner's role, and never their own: the owner who demotes another stays one
/// (checked in the same transaction), so a workspace always keeps an owner. Events
/// `workspace.member.added` / `workspace.member.updated`.
#[utoipa::path(put, path = "/workspaces/current/members/{subject}", tag = "workspaces", request_body = SetMember,
    params(("subject" = String, Path, description = "the identity provider's subject (`sub`), percent-encoded")),
    responses((status = 200, body = shared::openapi::Data<Member>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn set_member(app: &App, req: Req) -> ApiResult<Reply> {
    let authority = req.grant.authorize::<fx::ChangeMember>()?;
    let input: SetMember = req.json()?;
    let subject = req.param("subject").to_string();
    let mut errs = Errors::new();
    errs.text("subject", &subject, 1, 255);
    if !auth::ROLES.contains(&input.role.as_str()) {
        errs.add("role", format!("must be one of {}", auth::ROLES.join(", ")));
    }
    errs.finish()?;
    let ws = req.ws();
    let caller = &req.principal.subject;
    let (current, caller_role) = if matches!(req.principal.credential, Credential::OAuth) && caller != &subject {
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
        return Ok(Reply::ok(&store::from_item::<Member>(current.unwrap_or_default())?));
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
        workspace_id: ws.into(),
        created_at: current.as_ref().and_then(|i| store::get_str(i, "created_at")).map_or_else(shared::ids::now_rfc3339, String::from),
    };
    // An owner acting on owners is still one when this commits.
    let acting_owner = touches_owner.then_some(caller.as_str());
    domain::workspaces::set_member(&authority, app, &member, old_role.as_deref(), acting_owner).await?;
    Ok(Reply::ok(&member))
}

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

/// Create an API key. The response's `secret` is the only time the key is shown.
#[utoipa::path(post, path = "/workspaces/current/api-keys", tag = "workspaces", request_body = CreateApiKey,
    responses((status = 201, body = shared::openapi::Data<ApiKey>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_api_key(app: &App, req: Req) -> ApiResult<Reply> {
    let input: CreateApiKey = req.json()?;
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
    } else if scopes.iter().any(|s| !req.principal.scopes.contains(s)) {
        // A credential cannot mint a key more powerful than itself.
        errs.add("scopes", "cannot exceed the scopes of the calling credential");
    }
    // A new key is at least as restricted as the credential that makes it; without a value it
    // inherits the caller's restrictions. Earlier releases' capability names become today's.
    let own = req.grant.requires_confirmation();
    let requires_confirmation = match input.requires_confirmation.unwrap_or_else(|| own.clone()) {
        RequiresConfirmation::Only(list) => {
            for (i, c) in list.iter().enumerate() {
                if !domain::capabilities::exists(c) {
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
    let authority = req.grant.authorize::<fx::CreateApiKey>()?;
    let (key, secret, items) = new_api_key(req.ws(), &input.name, scopes, requires_confirmation, Some(&req.principal.subject))?;
    domain::workspaces::create_api_key(&authority, app, req.ws(), &key, items).await?;
    let shown = ApiKey { secret: Some(secret), ..key.clone() };
    Ok(Reply::with_status(http::StatusCode::CREATED, &shown).replay_as(&key))
}

/// Revoke an API key; requests with it get 403 from then on (other Lambda containers may
/// accept it for up to 5 s more).
#[utoipa::path(delete, path = "/workspaces/current/api-keys/{id}", tag = "workspaces",
    params(("id" = String, Path, description = "key_...")),
    responses((status = 200, body = shared::openapi::Data<ApiKey>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn revoke_api_key(app: &App, req: Req) -> ApiResult<Reply> {
    let authority = req.grant.authorize::<fx::RevokeApiKey>()?;
    let id: domain::workspaces::ApiKeyId = req.path_id("id")?;
    let key = domain::workspaces::revoke_api_key(&authority, app, req.ws(), &id).await?;
    Ok(Reply::ok(&key))
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
