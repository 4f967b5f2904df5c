//! What the channel routes do: connect (the credentials checked with the network first, then
//! sealed), change, check again and delete a channel. Each validates, talks to the network
//! through the SSRF-safe client, then causes its effect (`super`).

use super::{Channel, ChannelId, ChannelState, CreateChannel, Creds, Stored, UpdateChannel};
use crate::effects::{ConnectChannel, DeleteChannel, UpdateChannel as UpdateChannelEffect};
use shared::auth::WorkspaceId;
use shared::events::EventType;
use shared::ids::Timestamp;
use shared::validate::Errors;
use shared::{ApiError, ApiResult, App};
use std::sync::OnceLock;

/// Built once per container: the adapters' SSRF-safe client.
fn http(app: &App) -> ApiResult<&'static shared::outbound::Client> {
    static HTTP: OnceLock<shared::outbound::Client> = OnceLock::new();
    if let Some(c) = HTTP.get() {
        return Ok(c);
    }
    let c = super::http_client(app).map_err(|e| ApiError::internal(e))?;
    Ok(HTTP.get_or_init(|| c))
}

/// The channel, or 404.
pub async fn load(app: &App, ws: &WorkspaceId, id: &ChannelId) -> ApiResult<Stored> {
    super::load(app, ws, id).await?.ok_or_else(|| ApiError::not_found("channel"))
}

/// Connect a channel: the channel as stored, and as shown this once (a webhook channel with
/// its signing secret). Authority is asked for the channel's value, built from the checked
/// request before the network is asked anything.
pub async fn connect(grant: &shared::authority::Grant, app: &App, ws: &WorkspaceId, input: CreateChannel) -> ApiResult<(Channel, Channel)> {
    let mut errs = Errors::new();
    if let Some(n) = &input.name {
        errs.text("name", n, 1, 100);
    }
    errs.metadata("metadata", &input.metadata);
    errs.finish()?;
    let creds = super::parse_credentials(input.kind, input.credentials, None, app.cfg.webhooks.url_policy)?;
    let value = super::Connecting {
        name: input.name.clone(),
        destination: super::Destination::of(&creds, "new"),
        metadata: input.metadata.clone(),
    };
    let auth = grant.authorize_value::<ConnectChannel>(&value)?;
    let connected = super::connect(http(app)?, &creds).await.map_err(super::connect_error)?;
    let now = Timestamp::now();
    let id = ChannelId::generate();
    let (sealed, session) = Stored::seal(app, ws, &id, &creds, connected.session.as_ref()).await?;
    let channel = Channel {
        id,
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
    super::connect_new(&auth, app, ws, &stored).await?;
    let mut shown = stored.channel.clone();
    if let Creds::Webhook(w) = &creds {
        shown.secret = Some(w.secret.clone());
    }
    Ok((stored.channel, shown))
}

/// Check a channel against the network now, and record what it says: `active`,
/// `disconnected` (the credentials were refused) or `error`. Answers the event to emit.
async fn check(app: &App, ws: &WorkspaceId, stored: &mut Stored, creds: &Creds) -> ApiResult<shared::events::EventType> {
    let now = Timestamp::now();
    let before = stored.channel.state;
    match super::connect(http(app)?, creds).await {
        Ok(c) => {
            let (sealed, session) = Stored::seal(app, ws, &stored.channel.id, creds, c.session.as_ref()).await?;
            (stored.creds, stored.session) = (sealed, session);
            stored.channel.masked_identity = c.masked_identity;
            stored.channel.limits = c.limits;
            stored.channel.state = ChannelState::Active;
            stored.channel.last_error = None;
            stored.channel.last_verified_at = Some(now);
        }
        Err(e) if e.category == super::network::ErrorCategory::AuthExpired => {
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
        (_, ChannelState::Disconnected) if before != ChannelState::Disconnected => EventType::ChannelDisconnected,
        (ChannelState::Active, ChannelState::Active) => EventType::ChannelUpdated,
        (_, ChannelState::Active) => EventType::ChannelConnected,
        _ => EventType::ChannelUpdated,
    })
}

/// Rename, change metadata, or reconnect with new credentials (checked with the network
/// first; a refusal is a 400 and nothing changes).
pub async fn update(
    grant: &shared::authority::Grant,
    app: &App,
    ws: &WorkspaceId,
    id: &ChannelId,
    input: UpdateChannel,
) -> ApiResult<Channel> {
    let mut errs = Errors::new();
    if let Some(n) = &input.name {
        errs.text("name", n, 1, 100);
    }
    if let Some(m) = &input.metadata {
        errs.metadata("metadata", m);
    }
    errs.finish()?;
    let mut stored = load(app, ws, id).await?;
    let old = stored.open_creds(app, ws).await?;
    let keep = match &old {
        Creds::Webhook(w) => Some(w.secret.clone()),
        _ => None,
    };
    let creds = input
        .credentials
        .map(|v| super::parse_credentials(stored.channel.kind, v, keep.as_deref(), app.cfg.webhooks.url_policy))
        .transpose()?;
    // The value: where it posts now and where it will, before the network is asked anything.
    let value = super::Changing {
        channel_id: stored.channel.id.clone(),
        name: stored.channel.name.clone(),
        destination: super::Destination::of(&old, "current"),
        new_destination: creds.as_ref().map(|c| super::Destination::changed(&old, c)),
        new_name: input.name.clone(),
        new_metadata: input.metadata.clone(),
    };
    let auth = grant.authorize_value::<UpdateChannelEffect>(&value)?;
    let mut event = EventType::ChannelUpdated;
    if let Some(creds) = creds {
        // A refusal leaves the channel as it was.
        super::connect(http(app)?, &creds).await.map_err(super::connect_error)?;
        event = check(app, ws, &mut stored, &creds).await?;
    }
    if let Some(n) = input.name {
        stored.channel.name = Some(n);
    }
    if let Some(m) = input.metadata {
        stored.channel.metadata = m;
    }
    stored.channel.updated_at = Timestamp::now();
    super::update(&auth, app, ws, &stored, event).await?;
    Ok(stored.channel)
}

/// Check the stored credentials with the network now, and record the answer.
pub async fn verify(app: &App, ws: &WorkspaceId, id: &ChannelId) -> ApiResult<Channel> {
    let before = load(app, ws, id).await?;
    let mut stored = before.clone();
    let creds = stored.open_creds(app, ws).await?;
    let event = check(app, ws, &mut stored, &creds).await?;
    super::record_check(app, ws, &before, &stored, event).await?;
    Ok(stored.channel)
}

/// Delete a channel; draft and scheduled posts lose their variant for it.
pub async fn delete(grant: &shared::authority::Grant, app: &App, ws: &WorkspaceId, id: &ChannelId) -> ApiResult<Channel> {
    let stored = load(app, ws, id).await?;
    let creds = stored.open_creds(app, ws).await.ok();
    let value = super::Disconnecting {
        channel_id: stored.channel.id.clone(),
        name: stored.channel.name.clone(),
        network: stored.channel.kind,
        destination: creds.map(|c| super::Destination::of(&c, "current")),
    };
    super::delete(&grant.authorize_value::<DeleteChannel>(&value)?, app, ws, &stored).await?;
    Ok(stored.channel)
}

/// One page of the connected channels, in creation order (credentials are stored apart).
pub async fn list(app: &App, ws: &WorkspaceId, after: Option<String>, limit: usize) -> ApiResult<(Vec<Channel>, Option<String>)> {
    shared::request::page(app, crate::keys::CHANNELS.query(ws, after, limit)).await
}
