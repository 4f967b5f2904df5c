//! Channels in the table: the record with its sealed credentials and session, the look-ups,
//! and the effects that change where the workspace's posts go.

use super::{Channel, Creds, MAX_CHANNELS};
use crate::effects::{Authority, ConnectChannel, DeleteChannel, UpdateChannel as UpdateChannelEffect};
use crate::ids::ChannelId;
use crate::keys;
use shared::auth::WorkspaceId;
use shared::events::{Event, EventType};
use shared::outbox::Tx;
use shared::store::{self, Item, Record, ws_pk};
use shared::{ApiError, ApiResult, App};

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
        let mut rec = Record::new(ws_pk(ws), keys::CHANNEL.sk(&c.id), &c)?.attr("credentials", store::s(&self.creds));
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

pub async fn load(app: &App, ws: &WorkspaceId, id: &ChannelId) -> ApiResult<Option<Stored>> {
    app.db.get(&ws_pk(ws), &keys::CHANNEL.sk(id)).await?.map(Stored::from_item).transpose()
}

/// The channels a post names, read in one batch.
pub async fn of_post(app: &App, ws: &WorkspaceId, post: &crate::posts::Post) -> ApiResult<Vec<Channel>> {
    let keys: Vec<(String, String)> = post.channel_ids.iter().map(|c| (ws_pk(ws), keys::CHANNEL.sk(c))).collect();
    if keys.is_empty() {
        return Ok(vec![]);
    }
    app.db.batch_get(&keys).await?.into_iter().map(shared::store::from_item).collect()
}

// ---------- the effects: where the workspace's posts go ----------

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
    let key = keys::CHANNEL.sk(&stored.channel.id);
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
    let key = keys::CHANNEL.sk(&stored.channel.id);
    auth.tx(&[(&key, stored.version)])?
        .delete_versioned(ws_pk(ws), key.clone(), stored.version)
        .update(count(ws, -1))
        .event(Event::new(ws, EventType::ChannelDeleted, &stored.channel))
        .commit(app)
        .await
        .map_err(store::TxError::stale)?;
    crate::posts::detach_channel(app, ws, &stored.channel.id).await
}
