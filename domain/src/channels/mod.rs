//! Channels: the accounts and endpoints posts are published to. Each type is one adapter
//! module behind [`network::Network`]; connecting checks the credentials with the network,
//! which are then sealed at rest (as webhook secrets are) and never returned or logged.
//!
//! Items (pk = WS#<workspace>): `CHANNEL#<ch id>` (the channel, `credentials` and `session`
//! sealed, `version`), `CHANNELCOUNT` (the cap).

pub mod bluesky;
pub mod mastodon;
pub mod media;
pub mod network;
pub mod ops;
pub mod webhook;

use crate::keys;
use network::{Connected, NetError, Network, Outgoing, Published};
use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::events::EventType;
use shared::store::{self, Item, Record, ws_pk};
use shared::{ApiError, ApiResult, App};
use std::collections::BTreeMap;
use utoipa::ToSchema;

pub use crate::posts::ChannelId;

pub const MAX_CHANNELS: i64 = 50;

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ChannelType {
    Bluesky,
    Mastodon,
    Webhook,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ChannelState {
    Connecting,
    Active,
    /// The network refused the credentials: reconnect (PATCH new credentials, then verify).
    Disconnected,
    /// The last check failed for another reason (`last_error`).
    Error,
}

/// What a channel accepts, read from the network when it connects.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct Limits {
    /// Longest text (Bluesky counts graphemes, Mastodon characters with links as 23).
    pub max_characters: u32,
    pub max_media: u32,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct Channel {
    /// `ch_...`
    pub id: ChannelId,
    /// Always `channel`.
    pub object: String,
    #[serde(rename = "type")]
    pub kind: ChannelType,
    pub name: Option<String>,
    /// Who posts appear as, e.g. `@ada.bsky.social`; credentials are never shown.
    pub masked_identity: String,
    pub state: ChannelState,
    pub last_error: Option<String>,
    pub last_verified_at: Option<Timestamp>,
    pub limits: Limits,
    pub metadata: BTreeMap<String, String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Webhook channels: the `whsec_` signing secret, in the create response only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

/// Credentials as stored (sealed), by type.
#[derive(Serialize, Deserialize, Clone)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Creds {
    Bluesky(bluesky::Credentials),
    Mastodon(mastodon::Credentials),
    Webhook(webhook::Credentials),
}

impl Creds {
    pub fn kind(&self) -> ChannelType {
        match self {
            Self::Bluesky(_) => ChannelType::Bluesky,
            Self::Mastodon(_) => ChannelType::Mastodon,
            Self::Webhook(_) => ChannelType::Webhook,
        }
    }
}

/// The credentials a client sends, by `type` (the webhook secret is generated).
#[derive(Deserialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // the contract's shape; `CreateChannel::credentials` parses by `type`
pub enum CredentialsInput {
    Bluesky(bluesky::Credentials),
    Mastodon(mastodon::Credentials),
    Webhook(webhook::Input),
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateChannel {
    #[serde(rename = "type")]
    pub kind: ChannelType,
    #[schema(min_length = 1, max_length = 100)]
    pub name: Option<String>,
    /// bluesky: `handle`, `app_password`, optional `service_url`; mastodon: `instance_url`,
    /// `access_token`; webhook: `url`.
    #[schema(value_type = CredentialsInput)]
    pub credentials: serde_json::Value,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct UpdateChannel {
    #[schema(min_length = 1, max_length = 100)]
    pub name: Option<String>,
    /// New credentials of the channel's type (reconnects: checked with the network now).
    #[schema(value_type = Option<CredentialsInput>)]
    pub credentials: Option<serde_json::Value>,
    pub metadata: Option<BTreeMap<String, String>>,
}

/// A channel as stored, with its sealed credentials and session.
#[derive(Clone)]
pub struct Stored {
    pub channel: Channel,
    pub creds: String,
    pub session: Option<String>,
    pub version: i64,
}

fn aad(ws: &WorkspaceId, id: &str, what: &str) -> String {
    format!("{ws}/{id}/{what}")
}

impl Stored {
    pub fn from_item(item: Item) -> ApiResult<Self> {
        let version = store::get_i64(&item, "version").unwrap_or(0);
        let creds = store::get_str(&item, "credentials").unwrap_or_default().to_string();
        let session = store::get_str(&item, "session").map(String::from);
        Ok(Self { channel: store::from_item(item)?, creds, session, version })
    }

    pub fn record(&self, ws: &WorkspaceId) -> ApiResult<Record> {
        let mut c = self.channel.clone();
        c.secret = None;
        let mut rec = Record::new(ws_pk(ws), keys::CHANNEL.sk(&[&c.id]), &c)?.attr("credentials", store::s(&self.creds));
        if let Some(s) = &self.session {
            rec = rec.attr("session", store::s(s));
        }
        Ok(rec)
    }

    pub async fn open_creds(&self, app: &App, ws: &WorkspaceId) -> ApiResult<Creds> {
        let raw = app.platform_secret().await?.open(&aad(ws, &self.channel.id, "credentials"), &self.creds)?;
        serde_json::from_slice(&raw).map_err(|e| ApiError::internal(e))
    }

    pub async fn open_session(&self, app: &App, ws: &WorkspaceId) -> ApiResult<Option<serde_json::Value>> {
        let Some(sealed) = &self.session else { return Ok(None) };
        let raw = app.platform_secret().await?.open(&aad(ws, &self.channel.id, "session"), sealed)?;
        Ok(serde_json::from_slice(&raw).ok())
    }

    pub async fn seal(
        app: &App,
        ws: &WorkspaceId,
        id: &str,
        creds: &Creds,
        session: Option<&serde_json::Value>,
    ) -> ApiResult<(String, Option<String>)> {
        let secret = app.platform_secret().await?;
        let c = secret.seal(&aad(ws, id, "credentials"), &serde_json::to_vec(creds).map_err(|e| ApiError::internal(e))?);
        let s = session.map(|s| secret.seal(&aad(ws, id, "session"), s.to_string().as_bytes()));
        Ok((c, s))
    }
}

pub async fn load(app: &App, ws: &WorkspaceId, id: &str) -> ApiResult<Option<Stored>> {
    app.db.get(&ws_pk(ws), &keys::CHANNEL.sk(&[id])).await?.map(Stored::from_item).transpose()
}

/// Parse a client's credentials for `kind`; errors name `credentials.<field>`. A webhook
/// channel gets a new signing secret here (`keep_secret` keeps the old one on reconnect).
pub fn parse_credentials(
    kind: ChannelType,
    v: serde_json::Value,
    keep_secret: Option<&str>,
    policy: shared::outbound::UrlPolicy,
) -> ApiResult<Creds> {
    fn parse<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> ApiResult<T> {
        serde_path_to_error::deserialize(v).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." { "credentials".to_string() } else { format!("credentials.{path}") };
            shared::validate::validation_error(vec![shared::error::ErrorDetail::field(field, e.inner().to_string())])
        })
    }
    let mut errs = shared::validate::Errors::new();
    let creds = match kind {
        ChannelType::Bluesky => {
            let mut c: bluesky::Credentials = parse(v)?;
            c.validate(&mut errs, policy);
            Creds::Bluesky(c)
        }
        ChannelType::Mastodon => {
            let c: mastodon::Credentials = parse(v)?;
            c.validate(&mut errs, policy);
            Creds::Mastodon(c)
        }
        ChannelType::Webhook => {
            let i: webhook::Input = parse(v)?;
            check_url(&mut errs, "credentials.url", &i.url, policy);
            let secret = keep_secret.map(String::from).unwrap_or_else(shared::signing::generate_secret);
            Creds::Webhook(webhook::Credentials { url: i.url, secret })
        }
    };
    errs.finish()?;
    Ok(creds)
}

/// A URL the adapters will call: https (http only where loopback is allowed), no
/// credentials, not a private address literal; its DNS answer is checked when called.
pub fn check_url(errs: &mut shared::validate::Errors, field: &str, url: &str, policy: shared::outbound::UrlPolicy) {
    if let Err(e) = shared::outbound::check_url(url, policy) {
        errs.add(field, e.to_string());
    }
}

/// The one outbound client of the channel adapters (SSRF-safe; loopback only where the
/// deployment allows it, as for webhooks).
pub fn http_client(app: &App) -> Result<shared::outbound::Client, String> {
    shared::outbound::Client::new(
        app.cfg.webhooks.url_policy,
        std::time::Duration::from_secs(app.cfg.webhooks.timeout_secs.max(5)),
        "workspace-platform-channels/1",
    )
}

/// Check credentials with the network now.
pub async fn connect(http: &shared::outbound::Client, creds: &Creds) -> Result<Connected, NetError> {
    match creds {
        Creds::Bluesky(c) => bluesky::Bluesky.connect(http, c).await,
        Creds::Mastodon(c) => mastodon::Mastodon.connect(http, c).await,
        Creds::Webhook(c) => webhook::Webhook.connect(http, c).await,
    }
}

/// Publish one variant (exactly once per `out.idempotency_key`, see [`Network`]).
pub async fn publish(
    http: &shared::outbound::Client,
    creds: &Creds,
    session: Option<serde_json::Value>,
    out: &Outgoing,
) -> Result<Published, NetError> {
    match creds {
        Creds::Bluesky(c) => bluesky::Bluesky.publish(http, c, session, out).await,
        Creds::Mastodon(c) => mastodon::Mastodon.publish(http, c, session, out).await,
        Creds::Webhook(c) => webhook::Webhook.publish(http, c, session, out).await,
    }
}

/// How long a text is for this channel's limit.
pub fn text_length(kind: ChannelType, text: &str) -> usize {
    match kind {
        ChannelType::Bluesky => bluesky::graphemes(text),
        ChannelType::Mastodon => mastodon::characters(text),
        ChannelType::Webhook => text.chars().count(),
    }
}

/// The answer to a refused connect: the network's reason as a 400 on `credentials`, or 503
/// when the network could not be reached. An address that does not resolve, or resolves where
/// this platform may not go, is the caller's: 400.
pub fn connect_error(e: NetError) -> ApiError {
    use network::ErrorCategory as C;
    if matches!(e.cause, Some("dns" | "blocked_address")) {
        return ApiError::validation("credentials", "the network's address does not resolve to one this platform may reach");
    }
    match e.category {
        C::Network | C::PlatformError | C::RateLimited => {
            ApiError::new(shared::error::ErrorCode::Unavailable, format!("the network did not answer: {}", e.message))
        }
        _ => ApiError::validation("credentials", e.message),
    }
}

/// Check each variant of a post against its channel: the channel is one of the workspace's and
/// active, and the text fits its limit (`variants[i].content` names the one that does
/// not). `channels` are the workspace's channels the post names, as loaded.
pub fn check_post(post: &crate::posts::Post, channels: &[Channel]) -> ApiResult<()> {
    let mut errs = shared::validate::Errors::new();
    for (i, v) in post.variants.iter().enumerate() {
        let Some(ch) = channels.iter().find(|c| c.id == v.channel_id) else {
            errs.add(format!("channel_ids[{i}]"), "no such channel in this workspace");
            continue;
        };
        if ch.state != ChannelState::Active {
            errs.add(format!("channel_ids[{i}]"), "the channel is not active (verify or reconnect it)");
            continue;
        }
        let images = post.media_for(v).len();
        // The variant is what does not fit, whether its text is its own or the post's.
        if images > ch.limits.max_media as usize {
            errs.add(
                format!("variants[{i}].media"),
                format!("{images} images; this channel ({}) takes at most {}", ch.masked_identity, ch.limits.max_media),
            );
        }
        let len = text_length(ch.kind, &post.text_for(v));
        if len > ch.limits.max_characters as usize {
            // The variant is what does not fit, whether its text is its own or the post's.
            errs.add(
                format!("variants[{i}].content"),
                format!("{len} characters; this channel ({}) takes at most {}", ch.masked_identity, ch.limits.max_characters),
            );
        }
    }
    errs.finish()
}

/// The channels a post names, read in one batch.
pub async fn of_post(app: &App, ws: &WorkspaceId, post: &crate::posts::Post) -> ApiResult<Vec<Channel>> {
    let keys: Vec<(String, String)> = post.channel_ids.iter().map(|c| (ws_pk(ws), keys::CHANNEL.sk(&[c]))).collect();
    if keys.is_empty() {
        return Ok(vec![]);
    }
    app.db.batch_get(&keys).await?.into_iter().map(shared::store::from_item).collect()
}

// ---------- the effects: where the workspace's posts go ----------

use crate::effects::{Authority, ConnectChannel, DeleteChannel, UpdateChannel as UpdateChannelEffect};
use shared::events::Event;
use shared::ids::Timestamp;
use shared::outbox::Tx;

fn count(ws: &WorkspaceId, delta: i64) -> shared::store::Update {
    store::capped_count(ws_pk(ws), keys::CHANNEL_COUNT.table.sk, "channels", delta, MAX_CHANNELS)
}

/// The effect `ConnectChannel`: a new destination (within the workspace's cap), its sealed
/// credentials checked with the network by the caller, and its event.
pub async fn connect_new(auth: &Authority<ConnectChannel>, app: &App, ws: &WorkspaceId, stored: &Stored) -> ApiResult<()> {
    auth.tx(&[])?
        .update(count(ws, 1))
        .create(stored.record(ws)?.version(1))
        .event(Event::new(ws, EventType::ChannelConnected, &stored.channel))
        .commit(app)
        .await
        .map_err(|e| e.on_condition(|_| ApiError::conflict(format!("a workspace has at most {MAX_CHANNELS} channels"))))
}

/// The effect `UpdateChannel`: the channel as changed (new credentials, name, metadata), read
/// at `stored.version`, with `event`.
pub async fn update(
    auth: &Authority<UpdateChannelEffect>,
    app: &App,
    ws: &WorkspaceId,
    stored: &Stored,
    event: EventType,
) -> ApiResult<()> {
    let key = keys::CHANNEL.sk(&[&stored.channel.id]);
    save(app, ws, stored, event, auth.tx(&[(&key, stored.version)])?).await
}

/// Record what a check with the network found (state, identity, limits, a refreshed session)
/// on the credentials the channel already has: no destination changes, so no authority.
pub async fn record_check(app: &App, ws: &WorkspaceId, before: &Stored, checked: &Stored, event: EventType) -> ApiResult<()> {
    let same = before.channel.id == checked.channel.id
        && before.channel.kind == checked.channel.kind
        && serde_json::to_value(before.open_creds(app, ws).await?).ok() == serde_json::to_value(checked.open_creds(app, ws).await?).ok();
    if !same {
        return Err(ApiError::internal("a verification may not change where a channel posts"));
    }
    save(app, ws, checked, event, Tx::new()).await
}

async fn save(app: &App, ws: &WorkspaceId, stored: &Stored, event: EventType, tx: Tx) -> ApiResult<()> {
    tx.replace(stored.record(ws)?, stored.version)
        .event(Event::new(ws, event, &stored.channel))
        .commit(app)
        .await
        .map_err(store::TxError::stale)
}

/// The effect `DeleteChannel`: draft and scheduled posts lose their variant for it.
pub async fn delete(auth: &Authority<DeleteChannel>, app: &App, ws: &WorkspaceId, stored: &Stored) -> ApiResult<()> {
    let key = keys::CHANNEL.sk(&[&stored.channel.id]);
    auth.tx(&[(&key, stored.version)])?
        .delete_versioned(ws_pk(ws), key.clone(), stored.version)
        .update(count(ws, -1))
        .event(Event::new(ws, EventType::ChannelDeleted, &stored.channel))
        .commit(app)
        .await
        .map_err(store::TxError::stale)?;
    crate::posts::detach_channel(app, ws, &stored.channel.id).await
}
