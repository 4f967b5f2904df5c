//! Replay: resend to one endpoint what it was due in a window of time, after it was down or
//! disabled. A replay is a job: `POST /webhooks/{id}/replay` records it and queues its message;
//! the dispatcher works through the window a page of events at a time, oldest first, and the
//! replay's record shows the progress.
//!
//! The worker's step is `dispatch::replay`. What is resent is read from the events' fan-out records (`WHEVENT#<evt id>`, kept as long
//! as deliveries): ids are time-ordered, so a window is one key range. An erased subject's
//! events have no body left there, so they are never resent. Each resent event is a new
//! delivery whose id is derived from the replay and the event, created only if absent and
//! added to the event's record in the same transaction: a message received twice resends
//! nothing twice, and an erasure finds the new delivery as it finds the others.

use super::{EndpointId, load_endpoint};
use crate::keys;
use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::events::Event;
use shared::events::EventType;
use shared::ids::Timestamp;
use shared::outbox::Tx;
use shared::store::{self, Item, Record, TxError, n, s, ws_pk};
use shared::validate::Errors;
use shared::{ApiError, ApiResult, App};
use utoipa::ToSchema;

pub use crate::ids::ReplayId;

/// How far back a replay may reach: events are kept as long as their deliveries.
pub const WINDOW_SECS: i64 = super::DELIVERY_TTL_SECS;
/// A running replay holds its endpoint this long at most (a worker that stopped frees it).
const HOLD_SECS: i64 = 3600;

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ReplayStatus {
    Running,
    Completed,
    /// The endpoint was deleted or disabled during the replay.
    Failed,
}

/// A replay of an endpoint's events: its window and its progress.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct Replay {
    /// `whr_...`
    pub id: ReplayId,
    /// Always `webhook_replay`.
    pub object: String,
    pub endpoint_id: EndpointId,
    pub since: Timestamp,
    pub until: Timestamp,
    /// Only these types (within the endpoint's own); empty: every type the endpoint takes.
    pub event_types: Vec<String>,
    pub status: ReplayStatus,
    /// Events resent so far (a new delivery each, listed with the endpoint's deliveries).
    pub resent: u64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub completed_at: Option<Timestamp>,
}

/// `POST /webhooks/{id}/replay`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateReplay {
    /// The window's start: at most 30 days ago (events are kept as long as their deliveries).
    pub since: Timestamp,
    /// The window's end, not before `since`; default (and at most) now.
    #[serde(default)]
    pub until: Option<Timestamp>,
    /// Only these types or `<noun>.*` patterns; empty or absent: every type the endpoint takes.
    #[serde(default)]
    pub event_types: Vec<String>,
}

/// The queue message of a replay (on the deliveries queue, which the dispatcher reads).
#[derive(Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct ReplayJob {
    pub replay: ReplayRef,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct ReplayRef {
    #[serde(deserialize_with = "WorkspaceId::from_record")]
    pub workspace_id: WorkspaceId,
    pub endpoint_id: EndpointId,
    pub replay_id: ReplayId,
}

pub(crate) struct Stored {
    pub(crate) replay: Replay,
    /// The fan-out record's sort key the replay has read up to (inclusive).
    pub(crate) cursor: Option<String>,
    pub(crate) version: i64,
}

fn sk(endpoint_id: &EndpointId, replay_id: &ReplayId) -> String {
    keys::WEBHOOK_REPLAY.sk((endpoint_id, replay_id))
}

fn hold_sk(endpoint_id: &EndpointId) -> String {
    keys::WEBHOOK_REPLAY_HOLD.sk(endpoint_id)
}

impl Stored {
    pub(crate) fn record(&self, ws: &WorkspaceId) -> ApiResult<Record> {
        let rec = Record::new(ws_pk(ws), sk(&self.replay.endpoint_id, &self.replay.id), &self.replay)?
            .attr("expires_at", n(self.replay.created_at.timestamp() + WINDOW_SECS))
            .version(self.version);
        Ok(match &self.cursor {
            Some(c) => rec.attr("cursor", s(c)),
            None => rec,
        })
    }

    fn from_item(item: Item) -> ApiResult<Self> {
        let cursor = store::get_str(&item, "cursor").map(String::from);
        let version = store::get_i64(&item, "version").unwrap_or(0);
        Ok(Self { replay: store::from_item(item)?, cursor, version })
    }
}

pub(crate) async fn load(app: &App, ws: &WorkspaceId, endpoint_id: &EndpointId, replay_id: &ReplayId) -> ApiResult<Option<Stored>> {
    app.db.get(&ws_pk(ws), &sk(endpoint_id, replay_id)).await?.map(Stored::from_item).transpose()
}

/// One replay of the endpoint, or 404.
pub async fn get(app: &App, ws: &WorkspaceId, endpoint_id: &EndpointId, replay_id: &ReplayId) -> ApiResult<Replay> {
    Ok(load(app, ws, endpoint_id, replay_id).await?.ok_or_else(|| ApiError::not_found("webhook replay"))?.replay)
}

/// Record a replay and queue its first step. One replay runs per endpoint at a time (409
/// otherwise); the endpoint must be enabled.
pub async fn start(app: &App, ws: &WorkspaceId, endpoint_id: &EndpointId, input: CreateReplay) -> ApiResult<Replay> {
    let now = Timestamp::now();
    // A client's clock a little ahead of ours: its "now" is ours.
    let until = input.until.map_or(now, |u| u.min(now));
    let mut errs = Errors::new();
    if input.since.timestamp() < now.timestamp() - WINDOW_SECS {
        errs.add("since", format!("at most {} days ago: events are kept as long as their deliveries", WINDOW_SECS / 86_400));
    }
    if input.since > now {
        errs.add("since", "must not be in the future");
    } else if until < input.since {
        errs.add("until", "must not be before since");
    }
    super::ops::check_event_types(&mut errs, &input.event_types);
    errs.finish()?;
    let ep = load_endpoint(app, ws, endpoint_id).await?.ok_or_else(|| ApiError::not_found("webhook endpoint"))?;
    if !ep.endpoint.enabled {
        return Err(ApiError::conflict("the endpoint is disabled; enable it first"));
    }
    let replay = Replay {
        id: ReplayId::generate(),
        object: "webhook_replay".into(),
        endpoint_id: endpoint_id.clone(),
        since: input.since,
        until,
        event_types: input.event_types,
        status: ReplayStatus::Running,
        resent: 0,
        created_at: now,
        updated_at: now,
        completed_at: None,
    };
    let answer = replay.clone();
    let stored = Stored { replay, cursor: None, version: 1 };
    // The hold: one running replay per endpoint, freed when it ends or after HOLD_SECS.
    let hold = Item::from([
        ("pk".into(), s(ws_pk(ws))),
        ("sk".into(), s(hold_sk(endpoint_id))),
        ("replay_id".into(), s(&stored.replay.id)),
        ("expires_at".into(), n(now.timestamp() + HOLD_SECS)),
    ]);
    Tx::new()
        .put_if(hold, "attribute_not_exists(pk) OR expires_at < :now", vec![(":now", n(now.timestamp()))])
        .create(stored.record(ws)?)
        .commit(app)
        .await
        .map_err(|e| e.on_condition(|_| ApiError::conflict("a replay of this endpoint is running; wait for it to complete")))?;
    let job = ReplayRef { workspace_id: ws.clone(), endpoint_id: endpoint_id.clone(), replay_id: stored.replay.id.clone() };
    if let Err(e) = queue_step(app, &job).await {
        // Nothing will work on it: end it now rather than leave it running (the queue's error
        // is the answer either way).
        if let Err(f) = finish(app, ws, stored, ReplayStatus::Failed).await {
            tracing::warn!(replay_id = %job.replay_id, error = %f, "a replay that could not be queued is left running");
        }
        return Err(e);
    }
    Ok(answer)
}

/// Queue a replay's next step (on the deliveries queue, which the dispatcher reads).
pub(crate) async fn queue_step(app: &App, job: &ReplayRef) -> ApiResult<()> {
    let message = ReplayJob { replay: job.clone() };
    let body = serde_json::to_string(&message).map_err(|e| ApiError::internal(e))?;
    app.enqueue(&app.cfg.deliveries_queue_url, &body, 0).await.map_err(|e| ApiError::unavailable(format!("deliveries queue: {e}")))
}

/// Keep the endpoint's hold while the replay runs (best effort: a lost hold only lets another
/// replay start alongside).
pub(crate) async fn hold_on(app: &App, ws: &WorkspaceId, replay: &Replay) {
    let at = Timestamp::now().timestamp() + HOLD_SECS;
    let kept = app
        .db
        .update(ws_pk(ws), hold_sk(&replay.endpoint_id), "SET expires_at = :e")
        .when("replay_id = :r")
        .value(":e", n(at))
        .value(":r", s(&replay.id))
        .apply()
        .await;
    if let Err(e) = kept {
        tracing::warn!(replay_id = %replay.id, error = %e, "the replay's hold was not renewed");
    }
}

/// End a replay: its status, and the endpoint's hold released.
pub(crate) async fn finish(app: &App, ws: &WorkspaceId, mut st: Stored, status: ReplayStatus) -> ApiResult<Replay> {
    let now = Timestamp::now();
    st.replay.status = status;
    st.replay.updated_at = now;
    st.replay.completed_at = Some(now);
    let version = st.version;
    st.version += 1;
    let event = || Event::new(ws, EventType::WebhookReplayCompleted, &st.replay);
    let released = Tx::new()
        .replace(st.record(ws)?, version)
        .delete_if(ws_pk(ws), hold_sk(&st.replay.endpoint_id), "replay_id = :r", vec![(":r", s(&st.replay.id))])
        .event(event())
        .commit(app)
        .await;
    match released {
        Ok(()) => Ok(st.replay),
        // Another copy of the message finished it first.
        Err(TxError::Condition(0)) => Ok(st.replay),
        // The hold is gone (expired, perhaps taken by a newer replay): the record and its event.
        Err(TxError::Condition(_)) => match Tx::new().replace(st.record(ws)?, version).event(event()).commit(app).await {
            Ok(()) | Err(TxError::Condition(_)) => Ok(st.replay),
            Err(TxError::Api(e)) => Err(e),
        },
        Err(TxError::Api(e)) => Err(e),
    }
}
