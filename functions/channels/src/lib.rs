//! Channels: connect Bluesky accounts, Mastodon accounts and signed-webhook endpoints, check
//! them again (`verify`), rename, reconnect and delete them. The adapters, the sealed
//! credentials and the model are `domain::channels`; publishing is `functions/publisher`.

use domain::channels::{self as model, Channel, ChannelId, ChannelState, CreateChannel, Creds, Stored, UpdateChannel};
use domain::effects::{self as fx, Effect as _};
use domain::keys;
use shared::auth::WorkspaceId;
use shared::{ApiError, ApiResult, App, Reply, Req};
use std::sync::OnceLock;

shared::area! {
    tag = "channels", description = "Where posts are published: Bluesky, Mastodon and signed webhooks",
    operations = [
        list_channels, get_channel,
        create_channel [needs = Scope::Admin, effects = &[fx::ConnectChannel::INFO]],
        update_channel [needs = Scope::Admin, effects = &[fx::UpdateChannel::INFO]],
        delete_channel [needs = Scope::Admin, effects = &[fx::DeleteChannel::INFO]], verify_channel,
    ],
    schemas = [Channel, model::ChannelType, ChannelState, model::Limits, CreateChannel, UpdateChannel, model::CredentialsInput,
        model::bluesky::Credentials, model::mastodon::Credentials, model::webhook::Input],
}

/// Built once per container: the adapters' SSRF-safe client.
fn http(app: &App) -> ApiResult<&'static shared::outbound::Client> {
    static HTTP: OnceLock<shared::outbound::Client> = OnceLock::new();
    if let Some(c) = HTTP.get() {
        return Ok(c);
    }
    let c = model::http_client(app).map_err(ApiError::internal)?;
    Ok(HTTP.get_or_init(|| c))
}

async fn load(app: &App, req: &Req) -> ApiResult<Stored> {
    let id: ChannelId = req.path_id("id")?;
    model::load(app, req.ws()?, &id).await?.ok_or_else(|| ApiError::not_found("channel"))
}

/// Connect a channel (owners and admins): the credentials are checked with the network now
/// (a refusal is a 400 with the network's reason), then sealed. Webhook channels answer their
/// signing secret here, once.
#[utoipa::path(post, path = "/channels", tag = "channels", request_body = CreateChannel,
    responses((status = 201, body = shared::openapi::Data<Channel>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_channel(app: &App, req: Req) -> ApiResult<Reply> {
    let authority = req.grant.authorize::<fx::ConnectChannel>()?;
    let input: CreateChannel = req.json()?;
    let mut errs = shared::validate::Errors::new();
    if let Some(n) = &input.name {
        errs.text("name", n, 1, 100);
    }
    errs.metadata("metadata", &input.metadata);
    errs.finish()?;
    let creds = model::parse_credentials(input.kind, input.credentials, None, app.cfg.webhooks.url_policy)?;
    let connected = model::connect(http(app)?, &creds).await.map_err(model::connect_error)?;
    let ws = req.ws()?;
    let now = shared::ids::Timestamp::now();
    let id = shared::ids::new_id("ch");
    let (sealed, session) = Stored::seal(app, ws, &id, &creds, connected.session.as_ref()).await?;
    let channel = Channel {
        id: id.clone().into(),
        object: "channel".into(),
        kind: input.kind,
        name: input.name,
        masked_identity: connected.masked_identity,
        state: ChannelState::Active,
        last_error: None,
        last_verified_at: Some(now),
        limits: connected.limits,
        metadata: input.metadata,
        created_at: now,
        updated_at: now,
        secret: None,
    };
    let stored = Stored { channel, creds: sealed, session, version: 1 };
    model::connect_new(&authority, app, ws, &stored).await?;
    let mut shown = stored.channel.clone();
    if let Creds::Webhook(w) = &creds {
        shown.secret = Some(w.secret.clone());
    }
    Ok(Reply::created(&shown).replay_as(&stored.channel))
}

/// Connected channels, in creation order; credentials are never returned.
#[utoipa::path(get, path = "/channels", tag = "channels", params(shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<Channel>), shared::openapi::CommonErrors))]
pub async fn list_channels(app: &App, req: Req) -> ApiResult<Reply> {
    let page = req.page(app, "channels", &[]).await?;
    let spec = keys::CHANNELS.query(&[req.ws()?], &[], page.after.clone(), page.limit);
    shared::request::list_page::<Channel>(app, &page, spec).await
}

/// One channel with its state and masked identity.
#[utoipa::path(get, path = "/channels/{id}", tag = "channels", params(("id" = String, Path, description = "ch_...")),
    responses((status = 200, body = shared::openapi::Data<Channel>), shared::openapi::CommonErrors))]
pub async fn get_channel(app: &App, req: Req) -> ApiResult<Reply> {
    Ok(Reply::ok(&load(app, &req).await?.channel))
}

/// Check a channel against the network now, and record what it says: `active`,
/// `disconnected` (the credentials were refused) or `error`.
async fn check(app: &App, ws: &WorkspaceId, stored: &mut Stored, creds: &Creds) -> ApiResult<&'static str> {
    let now = shared::ids::Timestamp::now();
    let before = stored.channel.state;
    match model::connect(http(app)?, creds).await {
        Ok(c) => {
            let (sealed, session) = Stored::seal(app, ws, &stored.channel.id, creds, c.session.as_ref()).await?;
            (stored.creds, stored.session) = (sealed, session);
            stored.channel.masked_identity = c.masked_identity;
            stored.channel.limits = c.limits;
            stored.channel.state = ChannelState::Active;
            stored.channel.last_error = None;
            stored.channel.last_verified_at = Some(now);
        }
        Err(e) if e.category == model::network::ErrorCategory::AuthExpired => {
            stored.channel.state = ChannelState::Disconnected;
            stored.channel.last_error = Some(e.message);
        }
        Err(e) => {
            stored.channel.state = ChannelState::Error;
            stored.channel.last_error = Some(e.message);
        }
    }
    stored.channel.updated_at = now;
    Ok(match (before, stored.channel.state) {
        (_, ChannelState::Disconnected) if before != ChannelState::Disconnected => "channel.disconnected",
        (ChannelState::Active, ChannelState::Active) => "channel.updated",
        (_, ChannelState::Active) => "channel.connected",
        _ => "channel.updated",
    })
}

/// Rename, change metadata, or reconnect with new credentials (checked with the network now;
/// a refusal is a 400 and nothing changes).
#[utoipa::path(patch, path = "/channels/{id}", tag = "channels", request_body = UpdateChannel, params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Channel>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn update_channel(app: &App, req: Req) -> ApiResult<Reply> {
    let authority = req.grant.authorize::<fx::UpdateChannel>()?;
    let input: UpdateChannel = req.json()?;
    let mut errs = shared::validate::Errors::new();
    if let Some(n) = &input.name {
        errs.text("name", n, 1, 100);
    }
    if let Some(m) = &input.metadata {
        errs.metadata("metadata", m);
    }
    errs.finish()?;
    let ws = req.ws()?;
    let mut stored = load(app, &req).await?;
    let mut event = "channel.updated";
    if let Some(v) = input.credentials {
        let old = stored.open_creds(app, ws).await?;
        let keep = match &old {
            Creds::Webhook(w) => Some(w.secret.as_str()),
            _ => None,
        };
        let creds = model::parse_credentials(stored.channel.kind, v, keep, app.cfg.webhooks.url_policy)?;
        // A refusal leaves the channel as it was.
        model::connect(http(app)?, &creds).await.map_err(model::connect_error)?;
        event = check(app, ws, &mut stored, &creds).await?;
    }
    if let Some(n) = input.name {
        stored.channel.name = Some(n);
    }
    if let Some(m) = input.metadata {
        stored.channel.metadata = m;
    }
    stored.channel.updated_at = shared::ids::Timestamp::now();
    model::update(&authority, app, ws, &stored, event).await?;
    Ok(Reply::ok(&stored.channel))
}

/// Check the stored credentials with the network now.
#[utoipa::path(post, path = "/channels/{id}/verify", tag = "channels", params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Channel>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn verify_channel(app: &App, req: Req) -> ApiResult<Reply> {
    let ws = req.ws()?;
    let before = load(app, &req).await?;
    let mut stored = before.clone();
    let creds = stored.open_creds(app, ws).await?;
    let event = check(app, ws, &mut stored, &creds).await?;
    model::record_check(app, ws, &before, &stored, event).await?;
    Ok(Reply::ok(&stored.channel))
}

/// Delete a channel (owners and admins). Draft and scheduled posts lose their variant for it
/// (`post.updated`); published variants keep their remote id and permalink.
#[utoipa::path(delete, path = "/channels/{id}", tag = "channels", params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<shared::openapi::Deleted>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn delete_channel(app: &App, req: Req) -> ApiResult<Reply> {
    let authority = req.grant.authorize::<fx::DeleteChannel>()?;
    let stored = load(app, &req).await?;
    model::delete(&authority, app, req.ws()?, &stored).await?;
    Ok(Reply::deleted(&stored.channel.id, "channel"))
}
