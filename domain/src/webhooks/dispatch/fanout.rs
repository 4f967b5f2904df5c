//! An event from the events queue becomes one delivery per enabled, subscribed endpoint.

use super::{Budget, Dispatcher, Outcome, attempt};
use crate::webhooks::{self as model, DeliveryJob, StoredDelivery, StoredEndpoint};
use shared::ApiResult;
use shared::auth::WorkspaceId;
use shared::events::Event;
use shared::outbox::Tx;
use shared::store::{TxError, ws_pk};

pub async fn fan_out(d: &Dispatcher, ev: &Event, budget: Budget) -> ApiResult<Outcome> {
    let ws = WorkspaceId::trusted(ev.workspace_id.clone());
    let endpoints = model::workspace_endpoints(&d.app, &ws).await?;
    fan_out_to(d, &ws, ev, &endpoints, budget).await
}

/// Many events in one message: the endpoints of each workspace are read once, events nobody
/// subscribes to are acknowledged together, the rest fan out as single events do.
pub async fn fan_out_batch(d: &Dispatcher, events: &[Event], budget: Budget) -> ApiResult<Outcome> {
    let mut by_ws: std::collections::BTreeMap<WorkspaceId, Vec<&Event>> = Default::default();
    for ev in events {
        by_ws.entry(WorkspaceId::trusted(ev.workspace_id.clone())).or_default().push(ev);
    }
    for (ws, evs) in by_ws {
        let endpoints = model::workspace_endpoints(&d.app, &ws).await?;
        // An event a disabled endpoint subscribes to is kept too: a replay may resend it.
        let (quiet, busy): (Vec<&Event>, Vec<&Event>) =
            evs.into_iter().partition(|ev| !endpoints.iter().any(|e| shared::events::subscribed(&e.endpoint.event_types, &ev.kind)));
        let ids: Vec<&str> = quiet.iter().map(|e| e.id.as_str()).collect();
        if let Err(e) = shared::outbox::ack_many(&d.app, &ids).await {
            tracing::warn!(error = %e, "outbox acks failed; the sweep re-sends those events");
        }
        for group in busy.chunks(16) {
            for r in futures_util::future::join_all(group.iter().map(|ev| fan_out_to(d, &ws, ev, &endpoints, budget))).await {
                r?;
            }
        }
    }
    Ok(Outcome::Done)
}

/// `ws` is the event's own workspace.
async fn fan_out_to(d: &Dispatcher, ws: &WorkspaceId, ev: &Event, endpoints: &[StoredEndpoint], budget: Budget) -> ApiResult<Outcome> {
    let app = &d.app;
    let targets: Vec<&StoredEndpoint> =
        endpoints.iter().filter(|e| e.endpoint.enabled && shared::events::subscribed(&e.endpoint.event_types, &ev.kind)).collect();
    if targets.is_empty() {
        // Due to a disabled endpoint only: its record, without deliveries, for a replay later.
        if endpoints.iter().any(|e| shared::events::subscribed(&e.endpoint.event_types, &ev.kind)) {
            let marker = model::event_record(ws, ev, vec![]);
            match Tx::new().put_if(marker, "attribute_not_exists(pk)", vec![]).commit(app).await {
                Ok(()) | Err(TxError::Condition(_)) => {}
                Err(TxError::Api(e)) => return Err(e),
            }
        }
        ack(d, ev).await;
        return Ok(Outcome::Done);
    }
    let mut deliveries: Vec<StoredDelivery> = targets.iter().map(|t| StoredDelivery::new(&t.endpoint.id, ev)).collect();
    let keys: Vec<String> = deliveries.iter().map(|x| format!("{}/{}", x.delivery.endpoint_id, x.delivery.id)).collect();
    let marker = model::event_record(ws, ev, keys);
    // The event record (the marker) and the deliveries commit together: an event received
    // twice (the sweep, or SQS's at-least-once) creates its deliveries once. The body is in
    // the record only, so many endpoints do not multiply it past the transaction's 4 MB.
    let mut tx = Tx::new().put_if(marker, "attribute_not_exists(pk)", vec![]);
    for x in &deliveries {
        tx = tx.create(x.record(ws, 1)?);
    }
    match tx.commit(app).await {
        Ok(()) => {}
        Err(TxError::Condition(0)) => return resume(d, ws, ev, budget).await,
        Err(TxError::Condition(_)) => return Ok(Outcome::Done),
        Err(TxError::Api(e)) => return Err(e),
    }
    if !budget.allows(d.attempt_time()) {
        // No time for the first attempts: each delivery becomes a job of its own. Should that
        // fail, the event stays unacknowledged and its next copy resumes them.
        for x in &deliveries {
            model::enqueue(app, &x.job(ws), 0).await?;
        }
        ack(d, ev).await;
        return Ok(Outcome::Done);
    }
    ack(d, ev).await;
    let work = deliveries.iter_mut().zip(&targets).map(|(x, ep)| async move {
        x.version = 1;
        match attempt::attempt_and_record(d, ws, ep, x).await {
            Ok(Some(delay)) => attempt::schedule(d, ws, x, delay).await,
            Ok(None) => {}
            Err(e) => tracing::error!(delivery_id = %x.delivery.id, error = %e, "attempt not recorded"),
        }
    });
    futures_util::future::join_all(work).await;
    Ok(Outcome::Done)
}

/// The event was fanned out before (this is a duplicate): finish any delivery still waiting
/// for its first attempt, in case the earlier run stopped between commit and attempt.
async fn resume(d: &Dispatcher, ws: &WorkspaceId, ev: &Event, budget: Budget) -> ApiResult<Outcome> {
    let marker = d.app.db.get(&ws_pk(ws), &model::event_record_sk(&ev.id)).await?;
    let listed = marker.as_ref().map(model::listed_deliveries).unwrap_or_default();
    let work = listed.into_iter().map(|(endpoint_id, delivery_id)| async move {
        let job = DeliveryJob { workspace_id: ws.clone(), endpoint_id, delivery_id, job: String::new(), event_id: Some(ev.id.clone()) };
        if let Err(e) = attempt::process(d, &job, attempt::Mode::FirstAttemptOnly, budget).await {
            tracing::warn!(delivery_id = %job.delivery_id, error = %e, "resumed delivery failed");
        }
    });
    futures_util::future::join_all(work).await;
    ack(d, ev).await;
    Ok(Outcome::Done)
}

/// The outbox item has served its purpose once the deliveries exist.
async fn ack(d: &Dispatcher, ev: &Event) {
    if let Err(e) = shared::outbox::ack(&d.app, &ev.id).await {
        // Harmless: the sweep re-sends it and the marker dedupes.
        tracing::warn!(event_id = %ev.id, error = %e, "outbox ack failed");
    }
}
