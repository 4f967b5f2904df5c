//! Channels: connect Bluesky accounts, Mastodon accounts and signed-webhook endpoints, check
//! them again (`verify`), rename, reconnect and delete them. The adapters, the sealed
//! credentials and the model are `domain::channels`; publishing is `functions/publisher`.

use domain::channels::{self as model, Channel, ChannelState, CreateChannel, UpdateChannel, ops};
use domain::effects::{self as fx, Effect as _};
use shared::{ApiResult, App, Reply, WsReq};

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

/// Connect a channel (owners and admins): the credentials are checked with the network now
/// (a refusal is a 400 with the network's reason), then sealed. Webhook channels answer their
/// signing secret here, once.
#[utoipa::path(post, path = "/channels", tag = "channels", request_body = CreateChannel,
    responses((status = 201, body = shared::openapi::Data<Channel>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_channel(app: &App, req: WsReq) -> ApiResult<Reply> {
    let (stored, shown) = ops::connect(&req.grant, app, &req.ws, req.json()?).await?;
    Ok(Reply::created(&shown).replay_as(&stored))
}

/// Connected channels, in creation order; credentials are never returned.
#[utoipa::path(get, path = "/channels", tag = "channels", params(shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<Channel>), shared::openapi::CommonErrors))]
pub async fn list_channels(app: &App, req: WsReq) -> ApiResult<Reply> {
    let page = req.page(app, "channels", &[]).await?;
    Ok(Reply::page(&page, ops::list(app, &req.ws, page.after.clone(), page.limit).await?))
}

/// One channel with its state and masked identity.
#[utoipa::path(get, path = "/channels/{id}", tag = "channels", params(("id" = String, Path, description = "ch_...")),
    responses((status = 200, body = shared::openapi::Data<Channel>), shared::openapi::CommonErrors))]
pub async fn get_channel(app: &App, req: WsReq) -> ApiResult<Reply> {
    Ok(Reply::ok(&ops::load(app, &req.ws, &req.path_id("id")?).await?.channel))
}

/// Rename, change metadata, or reconnect with new credentials (checked with the network now;
/// a refusal is a 400 and nothing changes).
#[utoipa::path(patch, path = "/channels/{id}", tag = "channels", request_body = UpdateChannel, params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Channel>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn update_channel(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: UpdateChannel = req.json()?;
    Ok(Reply::ok(&ops::update(&req.grant, app, &req.ws, &req.path_id("id")?, input).await?))
}

/// Check the stored credentials with the network now.
#[utoipa::path(post, path = "/channels/{id}/verify", tag = "channels", params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Channel>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn verify_channel(app: &App, req: WsReq) -> ApiResult<Reply> {
    Ok(Reply::ok(&ops::verify(app, &req.ws, &req.path_id("id")?).await?))
}

/// Delete a channel (owners and admins). Draft and scheduled posts lose their variant for it
/// (`post.updated`); published variants keep their remote id and permalink.
#[utoipa::path(delete, path = "/channels/{id}", tag = "channels", params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<shared::openapi::Deleted>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn delete_channel(app: &App, req: WsReq) -> ApiResult<Reply> {
    let gone = ops::delete(&req.grant, app, &req.ws, &req.path_id("id")?).await?;
    Ok(Reply::deleted(&gone.id, "channel"))
}
