//! One step of a replay (`crate::webhooks::replay`, a message on the deliveries queue): the
//! next page of the window's events, each the endpoint was due resent as a new delivery whose
//! first attempt is made here, one after another in event order, while the budget allows.

use super::{Budget, Dispatcher, attempt};
use crate::webhooks::replay::{Replay, ReplayRef, ReplayStatus, finish, hold_on, load, queue_step};
use crate::webhooks::{DELIVERY_TTL_SECS, DeliveryJob, Endpoint, EndpointId, StoredDelivery, event_record_sk, load_endpoint};
use shared::auth::WorkspaceId;
use shared::events::Event;
use shared::ids::Timestamp;
use shared::outbox::Tx;
use shared::store::{self, TxError, n, ws_pk};
use shared::worker::Outcome;
use shared::{ApiResult, App};

/// Events a replay reads per step: one step is one Query and one small transaction per event.
const PAGE: usize = 25;

/// The sort key range of the fan-out records of events created in `[since, until]`: event
/// ids are ULIDs, whose first ten characters are the creation time in milliseconds.
fn window(since: Timestamp, until: Timestamp) -> (String, String) {
    // The least id of that millisecond: its time, then no randomness at all.
    let at = |t: Timestamp| {
        shared::ids::EventId::trusted(format!("evt_{}", ulid::Ulid::from_parts(u64::try_from(t.timestamp_millis()).unwrap_or(0), 0)))
    };
    (event_record_sk(&at(since)), event_record_sk(&at(Timestamp::from(until.time() + chrono::Duration::seconds(1)))))
}

/// The delivery id of `event_id` in replay `replay_id`: a ULID of the event's time whose
/// random part is a digest of both, so every copy of a step names the same delivery.
fn delivery_id(replay_id: &str, event_id: &str) -> crate::ids::DeliveryId {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{replay_id}/{event_id}").as_bytes());
    let random = u128::from_be_bytes(digest[..16].try_into().expect("a SHA-256 digest has 16 bytes and more"));
    let ms = event_id.strip_prefix("evt_").and_then(|u| ulid::Ulid::from_string(u).ok()).map_or(0, |u| u.timestamp_ms());
    crate::ids::DeliveryId::trusted(format!("whd_{}", ulid::Ulid::from_parts(ms, random)))
}

/// One step. While more of the window remains, the cursor is saved and a fresh message queued
/// for the next step (the same message kept would meet the queue's receive limit on a long
/// window); `Done` either way.
pub async fn step(d: &Dispatcher, job: &ReplayRef, budget: Budget) -> ApiResult<Outcome> {
    let app = &d.app;
    let ws = &job.workspace_id;
    let Some(mut st) = load(app, ws, &job.endpoint_id, &job.replay_id).await? else { return Ok(Outcome::Done) };
    if st.replay.status != ReplayStatus::Running {
        return Ok(Outcome::Done);
    }
    let Some(ep) = load_endpoint(app, ws, &job.endpoint_id).await?.filter(|e| e.endpoint.enabled) else {
        finish(app, ws, st, ReplayStatus::Failed).await?;
        return Ok(Outcome::Done);
    };
    let (lo, hi) = window(st.replay.since, st.replay.until);
    // Strictly after the cursor: the least key above it.
    let from = st.cursor.as_ref().map_or(lo, |c| format!("{c}\u{0}"));
    let page = app.db.query_between(&ws_pk(ws), &from, &hi, true, Some(PAGE)).await?;
    let full = page.len() == PAGE;
    for item in &page {
        let Some(key) = store::get_str(item, "sk") else { continue };
        st.cursor = Some(key.to_string());
        // Withdrawn by an erasure: no body, nothing to resend.
        let Some(event) = store::get_str(item, "body").and_then(|b| serde_json::from_str::<Event>(b).ok()) else { continue };
        if !due(&st.replay, &ep.endpoint, &event) {
            continue;
        }
        // Made here, or by another copy of this step (which may have stopped before attempting
        // it): resent by this replay either way, so every copy counts it and whichever copy
        // saves the progress saves the true count.
        let Some(delivery_id) = resend(app, ws, &job.replay_id, &ep.endpoint.id, &event).await? else { continue };
        st.replay.resent += 1;
        // The first attempt, in event order while the budget allows (else a job of its own);
        // the delivery and its body are read afresh, so an erasure meanwhile stops it.
        let first = DeliveryJob {
            workspace_id: ws.clone(),
            endpoint_id: ep.endpoint.id.clone(),
            delivery_id,
            job: String::new(),
            event_id: Some(event.id.clone()),
        };
        if let Err(e) = attempt::process(d, &first, attempt::Mode::FirstAttemptOnly, budget).await {
            tracing::warn!(replay_id = %job.replay_id, event_id = %event.id, error = %e, "replayed delivery not attempted; it stays pending");
        }
    }
    if !full {
        finish(app, ws, st, ReplayStatus::Completed).await?;
        return Ok(Outcome::Done);
    }
    st.replay.updated_at = Timestamp::now();
    let version = st.version;
    st.version += 1;
    // A copy that lost the race stops here; the winner carries on.
    if app.db.put(st.record(ws)?.item).when("version = :v").value(":v", n(version)).apply().await?.is_none() {
        return Ok(Outcome::Done);
    }
    hold_on(app, ws, &st.replay).await;
    queue_step(app, job).await?;
    Ok(Outcome::Done)
}

/// Was the endpoint due this event, and does the replay ask for it? Not before the endpoint
/// existed (nobody sent it those), and never another endpoint's test event.
fn due(replay: &Replay, endpoint: &Endpoint, event: &Event) -> bool {
    event.created_at >= replay.since
        && event.created_at <= replay.until
        && event.created_at >= endpoint.created_at
        && event.kind != "webhook.test"
        && shared::events::subscribed(&endpoint.event_types, &event.kind)
        && shared::events::subscribed(&replay.event_types, &event.kind)
}

/// A new delivery of `event` to the endpoint, listed on the event's record (where an erasure
/// finds it) while the record still has its body, whose expiry moves to outlive the delivery.
/// Its id, made now or by another copy of the step; `None` when the event was erased.
async fn resend(
    app: &App,
    ws: &WorkspaceId,
    replay_id: &str,
    endpoint_id: &EndpointId,
    event: &Event,
) -> ApiResult<Option<crate::ids::DeliveryId>> {
    let mut d = StoredDelivery::new(endpoint_id, event);
    d.delivery.id = delivery_id(replay_id, &event.id);
    let listed = format!("{endpoint_id}/{}", d.delivery.id);
    let expires = chrono::Utc::now().timestamp() + DELIVERY_TTL_SECS + 86_400;
    let add = shared::store::Update::new(ws_pk(ws), event_record_sk(&event.id), "ADD deliveries :d SET expires_at = :e")
        .when("attribute_exists(body)")
        .value(":d", shared::store::Value::Ss(vec![listed]))
        .value(":e", n(expires));
    match Tx::new().create(d.record(ws, 1)?).update(add).commit(app).await {
        Ok(()) | Err(TxError::Condition(0)) => Ok(Some(d.delivery.id)),
        Err(TxError::Condition(_)) => Ok(None),
        Err(TxError::Api(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_covers_the_events_of_its_seconds_and_no_others() {
        let t = |s: &str| Timestamp::parse(s).unwrap();
        let (lo, hi) = window(t("2026-11-01T10:00:00Z"), t("2026-11-01T11:00:00Z"));
        let at = |s: &str, random: u128| {
            let ms = t(s).timestamp_millis() as u64;
            event_record_sk(&shared::ids::EventId::trusted(format!("evt_{}", ulid::Ulid::from_parts(ms, random))))
        };
        for inside in ["2026-11-01T10:00:00Z", "2026-11-01T10:30:00Z", "2026-11-01T11:00:00Z"] {
            for random in [0, u128::MAX] {
                let k = at(inside, random);
                assert!(lo <= k && k <= hi, "{inside}: {lo} <= {k} <= {hi}");
            }
        }
        for outside in ["2026-11-01T09:59:59Z", "2026-11-01T11:00:02Z"] {
            let k = at(outside, 0);
            assert!(k < lo || k > hi, "{outside} is outside");
        }
    }

    #[test]
    fn a_replayed_delivery_id_is_the_same_for_the_same_event_and_replay_only() {
        let ev = format!("evt_{}", ulid::Ulid::generate());
        let a = delivery_id("whr_1", &ev);
        assert_eq!(a, delivery_id("whr_1", &ev));
        assert_ne!(a, delivery_id("whr_2", &ev));
        assert!(<crate::ids::DeliveryId as shared::ids::PrefixedId>::parse(a.as_str()).is_some(), "{a} is a delivery id");
        assert_eq!(&a.as_str()[4..14], &ev[4..14], "ordered by the event's time");
    }
}
