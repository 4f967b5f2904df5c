//! Workspaces: the tenant itself, its API keys and its members.
//!
//! Items (pk = WS#<workspace>):
//! - `WORKSPACE`: the workspace; `SLUG#<slug>` (own partition) keeps slugs unique platform-wide.
//! - `APIKEY#<key id>`: the key as listed; its secret is only in the look-up item
//!   `APIKEY#<sha256>` (own partition), which authentication reads.
//! - `MEMBER#<subject>`: an OAuth subject's role; GSI1 `MEMBERSHIP#<subject>` lists a subject's workspaces.

use domain::effects::{self as fx, Effect as _};
use domain::workspaces::{ApiKey, CreateApiKey, Member, SetMember, UpdateWorkspace, Workspace};
use shared::auth::{Credential, RequiresConfirmation, Scope};
use shared::{ApiResult, App, Reply, Req, WsReq};

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

// ---------- routes ----------

/// The workspace of the calling credential.
#[utoipa::path(get, path = "/workspaces/current", tag = "workspaces",
    responses((status = 200, body = shared::openapi::Data<Workspace>), shared::openapi::CommonErrors))]
pub async fn get_current(app: &App, req: WsReq) -> ApiResult<Reply> {
    Ok(Reply::ok(&domain::workspaces::load(app, &req.ws).await?.0))
}

/// Change name, slug, time zone, locale, default currency, portal origins or metadata. (Sending domains are
/// their own resource: `/emails/domains`.)
#[utoipa::path(patch, path = "/workspaces/current", tag = "workspaces", request_body = UpdateWorkspace,
    responses((status = 200, body = shared::openapi::Data<Workspace>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn update_current(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: UpdateWorkspace = req.json()?;
    Ok(Reply::ok(&domain::workspaces::update(&req.grant, app, &req.ws, input).await?))
}

/// The workspaces the caller can use: with an OAuth token, every workspace its subject is a
/// member of; with an API key, the key's workspace.
#[utoipa::path(get, path = "/workspaces", tag = "workspaces",
    params(shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<Workspace>), shared::openapi::CommonErrors))]
pub async fn list_workspaces(app: &App, req: Req) -> ApiResult<Reply> {
    let page = req.page(app, "workspaces", &[]).await?;
    if !matches!(req.principal.credential, Credential::OAuth(_)) {
        // Cursors are honoured (and validated) even though a key has exactly one workspace.
        let items = match (&req.principal.workspace_id, &page.after) {
            (Some(ws), None) => vec![domain::workspaces::load(app, ws).await?.0],
            _ => vec![],
        };
        return Ok(Reply::list(&items, None));
    }
    Ok(Reply::page(&page, domain::workspaces::of_subject(app, &req.principal.subject, page.after.clone(), page.limit).await?))
}

/// API keys of this workspace (secrets are never listed).
#[utoipa::path(get, path = "/workspaces/current/api-keys", tag = "workspaces",
    params(shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<ApiKey>), shared::openapi::CommonErrors))]
pub async fn list_api_keys(app: &App, req: WsReq) -> ApiResult<Reply> {
    let page = req.page(app, "api_keys", &[]).await?;
    Ok(Reply::page(&page, domain::workspaces::api_keys(app, &req.ws, page.after.clone(), page.limit).await?))
}

/// Members (OAuth subjects) of this workspace.
#[utoipa::path(get, path = "/workspaces/current/members", tag = "workspaces",
    params(shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<Member>), shared::openapi::CommonErrors))]
pub async fn list_members(app: &App, req: WsReq) -> ApiResult<Reply> {
    let page = req.page(app, "members", &[]).await?;
    Ok(Reply::page(&page, domain::workspaces::members(app, &req.ws, page.after.clone(), page.limit).await?))
}

/// Add a member or change a member's role (owners and admins). Only an owner grants `owner` or
/// changes another owner's role, and never their own: the owner who demotes another stays one
/// (checked in the same transaction), so a workspace always keeps an owner. Events
/// `workspace.member.added` / `workspace.member.updated`.
#[utoipa::path(put, path = "/workspaces/current/members/{subject}", tag = "workspaces", request_body = SetMember,
    params(("subject" = String, Path, description = "the identity provider's subject (`sub`), percent-encoded")),
    responses((status = 200, body = shared::openapi::Data<Member>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn set_member(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: SetMember = req.json()?;
    Ok(Reply::ok(&domain::workspaces::change_member(&req.grant, app, &req.ws, &req.principal, req.param("subject"), input).await?))
}

/// Create an API key. The response's `secret` is the only time the key is shown.
#[utoipa::path(post, path = "/workspaces/current/api-keys", tag = "workspaces", request_body = CreateApiKey,
    responses((status = 201, body = shared::openapi::Data<ApiKey>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_api_key(app: &App, req: WsReq) -> ApiResult<Reply> {
    let (shown, key) = domain::workspaces::issue_api_key(app, &req.ws, &req.grant, &req.principal, req.json()?).await?;
    Ok(Reply::with_status(http::StatusCode::CREATED, &shown).replay_as(&key))
}

/// Revoke an API key; requests with it get 403 from then on (other Lambda containers may
/// accept it for up to 5 s more).
#[utoipa::path(delete, path = "/workspaces/current/api-keys/{id}", tag = "workspaces",
    params(("id" = String, Path, description = "key_...")),
    responses((status = 200, body = shared::openapi::Data<ApiKey>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn revoke_api_key(app: &App, req: WsReq) -> ApiResult<Reply> {
    let id: domain::workspaces::ApiKeyId = req.path_id("id")?;
    let key = domain::workspaces::revoke_api_key(&req.grant, app, &req.ws, &id).await?;
    Ok(Reply::ok(&key))
}
