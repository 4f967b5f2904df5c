//! Workspaces in the table: the workspace with its slug claim, its API keys and their
//! look-ups, its members, the effects that change them (settings, membership, keys) and the
//! lists.

use super::{ApiKey, CreateApiKey, Member, SetMember, UpdateWorkspace, Workspace, accent_contrast, slugify, valid_slug};
use crate::effects::{self as fx, Authority, ChangeMember, RevokeApiKey};
use crate::ids::ApiKeyId;
use crate::keys;
use shared::auth::Scope;
use shared::auth::WorkspaceId;
use shared::auth::{self, Credential, Principal, RequiresConfirmation};
use shared::authority::Grant;
use shared::events::Event;
use shared::events::EventType;
use shared::outbox::Tx;
use shared::store::{self, Record, s, ws_pk};
use shared::validate::{self, Errors, Patch};
use shared::{ApiError, ApiResult, App};
use std::collections::BTreeMap;

/// The workspace item's sort key (`keys::WORKSPACE` has no placeholder).
pub const WORKSPACE_SK: &str = keys::WORKSPACE.kind.table.sk;

/// The workspace item, with its version.
pub async fn load(app: &App, ws: &WorkspaceId) -> ApiResult<(Workspace, i64)> {
    app.db.get_object(ws, WORKSPACE_SK).await?.ok_or_else(|| ApiError::not_found("workspace"))
}

pub fn slug_pk(slug: &str) -> String {
    keys::SLUG_CLAIM.pk(slug)
}

/// The workspace that holds `slug` (the portal's pages are addressed by it), and the slug it
/// uses now when this one is a former slug of it. A slug a workspace gave up stays reserved for
/// it for good: links and bookmarks its customers kept never open another workspace's pages.
pub async fn by_slug(app: &App, slug: &str) -> ApiResult<Option<(WorkspaceId, Option<String>)>> {
    if !valid_slug(slug) {
        return Ok(None);
    }
    let item = app.db.get(&slug_pk(slug), &keys::SLUG_CLAIM.sk(())).await?;
    Ok(item.and_then(|i| {
        let ws = store::get_str(&i, "workspace_id").map(WorkspaceId::trusted)?;
        Some((ws, store::get_str(&i, "moved_to").map(String::from)))
    }))
}

/// The claim that makes a slug one workspace's across the platform.
pub fn slug_item(slug: &str, ws: &str) -> store::Item {
    store::Item::from([("pk".into(), s(slug_pk(slug))), ("sk".into(), s(keys::SLUG_CLAIM.sk(()))), ("workspace_id".into(), s(ws))])
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
        let moved = shared::store::Update::new(slug_pk(old_slug), keys::SLUG_CLAIM.sk(()), "SET moved_to = :to")
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
        .gsi1(keys::MEMBER.gsi1_pk(&member.subject), keys::MEMBER.gsi1_sk(ws));
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

/// The effect `RevokeApiKey`, asked of `grant` for the key as it is: requests with the key get
/// 403 from then on (other containers may accept it for up to `auth::KEY_CACHE_TTL` more).
/// Revoking a revoked key changes nothing and asks nothing.
pub async fn revoke_api_key(grant: &Grant, app: &App, ws: &WorkspaceId, id: &ApiKeyId) -> ApiResult<ApiKey> {
    let sk = keys::API_KEY.sk(id);
    let item = app.db.get(&ws_pk(ws), &sk).await?.ok_or_else(|| ApiError::not_found("api key"))?;
    let hash = store::get_str(&item, "hash").unwrap_or_default().to_string();
    let version = store::get_i64(&item, "version").unwrap_or(0);
    let mut key: ApiKey = store::from_item(item)?;
    if key.revoked_at.is_some() {
        return Ok(key);
    }
    let value = super::Revoking {
        key_id: key.id.clone(),
        name: key.name.clone(),
        prefix: key.prefix.clone(),
        scopes: key.scopes.clone(),
        created_by: key.created_by.clone(),
    };
    let auth = grant.authorize_value::<RevokeApiKey>(&value)?;
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
    let rec = Record::new(ws_pk(ws), auth::member_sk(subject), &member)?.gsi1(keys::MEMBER.gsi1_pk(subject), keys::MEMBER.gsi1_sk(ws));
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
    let listing = Record::new(ws_pk(ws), keys::API_KEY.sk(&key.id), &key)?.attr("hash", s(&hash)).version(1).item;
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

/// Change the settings (the effect `UpdateWorkspace`, asked of `grant` for the fields that
/// change); the workspace as it now is.
pub async fn update(grant: &Grant, app: &App, ws_id: &WorkspaceId, input: UpdateWorkspace) -> ApiResult<Workspace> {
    let (mut ws, version) = load(app, ws_id).await?;
    let before = ws.clone();
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
    let auth = grant.authorize_value::<fx::UpdateWorkspace>(&super::Resetting::between(&before, &ws)?)?;
    ws.updated_at = shared::ids::Timestamp::now();
    save_settings(&auth, app, &ws, version, &before.slug).await?;
    Ok(ws)
}

/// The workspaces an OAuth subject is a member of, after `after`; the page and the key to go
/// on from.
pub async fn of_subject(app: &App, subject: &str, after: Option<String>, limit: usize) -> ApiResult<(Vec<Workspace>, Option<String>)> {
    let spec = keys::MEMBERSHIPS.query(subject, after, limit);
    let out = app.db.query_page(spec).await?;
    let ids: Vec<WorkspaceId> = out.items.iter().filter_map(|i| store::get_str(i, "workspace_id").map(WorkspaceId::trusted)).collect();
    // batch_get keeps the order and retries keys DynamoDB leaves unprocessed.
    let keys: Vec<(String, String)> = ids.iter().map(|id| (ws_pk(id), WORKSPACE_SK.to_string())).collect();
    let workspaces: Vec<Workspace> = app.db.batch_get(&keys).await?.into_iter().map(store::from_item).collect::<ApiResult<_>>()?;
    Ok((workspaces, out.next_after))
}

/// Add a member or change a member's role (the effect `ChangeMember`, asked of `grant` once the
/// change is allowed). Only an owner grants `owner` or changes another owner's role, and never
/// their own.
pub async fn change_member(
    grant: &Grant,
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
    let (current, caller_role) = if matches!(by.credential, Credential::OAuth(_)) && caller != &subject {
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
    let value = super::Membership { subject: subject.clone(), old_role: old_role.clone(), new_role: input.role.clone() };
    let auth = grant.authorize_value::<ChangeMember>(&value)?;
    set_member(&auth, app, &member, old_role.as_deref(), acting_owner).await?;
    Ok(member)
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
    let value = super::NewKey { name: input.name.clone(), scopes: scopes.clone(), requires_confirmation: requires_confirmation.clone() };
    let authority = grant.authorize_value::<fx::CreateApiKey>(&value)?;
    let (key, secret, items) = new_api_key(ws, &input.name, scopes, requires_confirmation, Some(&by.subject))?;
    create_api_key(&authority, app, ws, &key, items).await?;
    let shown = ApiKey { secret: Some(secret), ..key.clone() };
    Ok((shown, key))
}

/// One page of the workspace's API keys (secrets are stored apart, as hashes).
pub async fn api_keys(app: &App, ws: &WorkspaceId, after: Option<String>, limit: usize) -> ApiResult<(Vec<ApiKey>, Option<String>)> {
    shared::request::page(app, keys::API_KEYS.query(ws, after, limit)).await
}

/// One page of the workspace's members.
pub async fn members(app: &App, ws: &WorkspaceId, after: Option<String>, limit: usize) -> ApiResult<(Vec<Member>, Option<String>)> {
    shared::request::page(app, keys::MEMBERS.query(ws, after, limit)).await
}
