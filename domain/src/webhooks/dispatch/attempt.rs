//! One attempt of one delivery: sign, send, record, and decide what comes next (done, retry
//! after a delay, dead), keeping the endpoint's health (failing since, disabled) up to date.

use super::{Budget, Dispatcher, Outcome};
use crate::ids::EndpointId;
use crate::webhooks::{self as model, Attempt, DeliveryJob, DeliveryStatus, StoredDelivery, StoredEndpoint};
use shared::ApiResult;
use shared::auth::WorkspaceId;
use shared::events::Event;
use shared::events::EventType;
use shared::outbox::Tx;
use shared::store::Value as AttributeValue;
use shared::store::{self, n, s, ws_pk};

/// Early arrivals within this many seconds of the due time are attempted at once.
const DUE_SLACK_SECS: i64 = 2;

pub enum Mode {
    /// A message from the deliveries queue: only its own token may work on the delivery.
    Job,
    /// A duplicate event: finish deliveries that never had their first attempt.
    FirstAttemptOnly,
}

/// Attempt a delivery if it is due; `Later(secs)` keeps the job's message hidden until then.
pub async fn process(d: &Dispatcher, job: &DeliveryJob, mode: Mode, budget: Budget) -> ApiResult<Outcome> {
    let app = &d.app;
    let ws = &job.workspace_id;
    let (ep, x) = tokio::join!(model::load_endpoint(app, ws, &job.endpoint_id), model::load_delivery_for(app, job));
    let Some(mut x) = x? else { return Ok(Outcome::Done) };
    let current = match mode {
        Mode::Job => x.job == job.job && matches!(x.delivery.status, DeliveryStatus::Pending | DeliveryStatus::Failed),
        Mode::FirstAttemptOnly => x.delivery.status == DeliveryStatus::Pending && x.delivery.attempt_count == 0,
    };
    if !current {
        // Finished, or superseded by a manual retry that issued a new token.
        return Ok(Outcome::Done);
    }
    let ep = match ep? {
        Some(ep) if ep.endpoint.enabled => ep,
        other => {
            let why = if other.is_some() { "endpoint_disabled" } else { "endpoint_deleted" };
            give_up(d, ws, &mut x, why).await?;
            return Ok(Outcome::Done);
        }
    };
    if let Some(due) = x.delivery.next_attempt_at.map(|t| t.time()) {
        let wait = due.timestamp() - chrono::Utc::now().timestamp();
        if wait > DUE_SLACK_SECS {
            return Ok(Outcome::Later(wait as u64));
        }
    }
    if !budget.allows(d.attempt_time()) {
        // Not enough of the invocation left: the job's message comes back in a second; a
        // resumed first attempt becomes a job of its own.
        return match mode {
            Mode::Job => Ok(Outcome::Later(1)),
            Mode::FirstAttemptOnly => {
                model::enqueue(app, &x.job(ws), 0).await?;
                Ok(Outcome::Done)
            }
        };
    }
    match (attempt_and_record(d, ws, &ep, &mut x).await?, mode) {
        (Some(delay), Mode::Job) => Ok(Outcome::Later(delay)),
        (Some(delay), Mode::FirstAttemptOnly) => {
            schedule(d, ws, &x, delay).await;
            Ok(Outcome::Done)
        }
        (None, _) => Ok(Outcome::Done),
    }
}

/// Queue the next attempt of a delivery that has no message of its own yet.
pub async fn schedule(d: &Dispatcher, ws: &WorkspaceId, x: &StoredDelivery, delay: u64) {
    if let Err(e) = model::enqueue(&d.app, &x.job(ws), delay).await {
        tracing::error!(delivery_id = %x.delivery.id, error = %e, "retry not queued");
    }
}

/// The delay before retry number `n` (0-based): the schedule's, or the receiver's
/// `Retry-After` within 1 s..12 h, with +-10 % jitter so retries of many deliveries spread out.
pub fn retry_delay(schedule: &[u64], n: usize, retry_after: Option<u64>) -> Option<u64> {
    let base = *schedule.get(n)?;
    let base = retry_after.map_or(base, |r| r.clamp(1, 43_200));
    let jitter = 0.9 + rand::random::<f64>() * 0.2;
    Some(((base as f64 * jitter).round() as u64).clamp(1, 43_200))
}

/// Send one attempt and save its outcome. Returns the delay of the next attempt, if any.
pub async fn attempt_and_record(d: &Dispatcher, ws: &WorkspaceId, ep: &StoredEndpoint, x: &mut StoredDelivery) -> ApiResult<Option<u64>> {
    let app = &d.app;
    let keys = ep.signing_keys(app, ws).await?;
    let number = x.delivery.attempt_count + 1;
    let headers = [
        ("x-service-event-id", x.delivery.event_id.as_str()),
        ("x-service-event-type", x.delivery.event_type.as_str()),
        ("x-service-delivery-id", x.delivery.id.as_str()),
    ];
    // A store that cannot answer now is retried as the attempt's job (the link is the same
    // every time); a body without a booking goes as it is.
    let body = super::links::add(d, ws, &x.delivery.event_type, &x.body).await?;
    let mut sent = d.http.send(&ep.endpoint.url, &keys, &x.delivery.event_id, &body, &headers, number).await;
    // A receiver that echoes what it got must not put a customer's link into the delivery's
    // record, which readers of the workspace see.
    if let Some(excerpt) = &mut sent.attempt.response_excerpt {
        *excerpt = shared::links::redact(excerpt).into_owned();
    }
    let (success, gone) = (sent.success, sent.gone);
    tracing::info!(delivery_id = %x.delivery.id, endpoint_id = %ep.endpoint.id, attempt = number,
        status = ?sent.attempt.status_code, error = ?sent.attempt.error, duration_ms = sent.attempt.duration_ms, "webhook attempt");
    x.push_attempt(sent.attempt);
    let mut next = None;
    if success {
        x.delivery.status = DeliveryStatus::Succeeded;
    } else if gone {
        x.delivery.status = DeliveryStatus::Dead;
    } else if let Some(delay) = retry_delay(&app.cfg.webhooks.retry_schedule, x.retries as usize, sent.retry_after) {
        x.delivery.status = DeliveryStatus::Failed;
        x.retries += 1;
        next = Some(delay);
    } else {
        x.delivery.status = DeliveryStatus::Dead;
    }
    x.delivery.next_attempt_at = next.map(|s| shared::ids::Timestamp::from(chrono::Utc::now() + chrono::Duration::seconds(s as i64)));
    let (saved, health) = tokio::join!(x.save(app, ws), health(d, ws, ep, success, gone));
    if let Err(e) = health {
        tracing::warn!(endpoint_id = %ep.endpoint.id, error = %e, "endpoint health not updated");
    }
    if !saved? {
        // Another invocation recorded this delivery meanwhile (it owns what comes next), or an
        // erasure deleted it (nothing comes next).
        return Ok(None);
    }
    Ok(next)
}

async fn give_up(d: &Dispatcher, ws: &WorkspaceId, x: &mut StoredDelivery, why: &str) -> ApiResult<()> {
    let number = x.delivery.attempt_count + 1;
    x.push_attempt(Attempt {
        number,
        at: shared::ids::Timestamp::now(),
        duration_ms: 0,
        status_code: None,
        error: Some(why.into()),
        response_excerpt: None,
    });
    x.delivery.status = DeliveryStatus::Dead;
    x.delivery.next_attempt_at = None;
    x.save(&d.app, ws).await?;
    Ok(())
}

/// An update of an endpoint that still exists (one deleted meanwhile has no health to keep).
async fn endpoint_update(
    d: &Dispatcher,
    ws: &WorkspaceId,
    endpoint_id: &EndpointId,
    expression: &str,
    values: Vec<(&str, AttributeValue)>,
) -> ApiResult<()> {
    let mut write =
        d.app.db.update(ws_pk(ws), model::endpoint_sk(endpoint_id), expression).when("attribute_exists(pk)").value(":one", n(1));
    for (k, v) in values {
        write = write.value(k, v);
    }
    write.apply().await.map(|_| ())
}

/// Keep `failing_since` current and disable an endpoint that answered 410 or has failed for
/// longer than the configured period. Writes only when the state changes.
async fn health(d: &Dispatcher, ws: &WorkspaceId, ep: &StoredEndpoint, success: bool, gone: bool) -> ApiResult<()> {
    let e = &ep.endpoint;
    let now = chrono::Utc::now();
    if success {
        if e.failing_since.is_some() {
            endpoint_update(d, ws, &e.id, "REMOVE failing_since SET version = version + :one", vec![]).await?;
        }
        return Ok(());
    }
    let failing_for = e.failing_since.map(|t| (now - t.time()).num_seconds());
    if gone {
        return disable(d, ws, ep, "gone").await;
    }
    match failing_for {
        None => {
            endpoint_update(
                d,
                ws,
                &e.id,
                "SET failing_since = :now, version = version + :one",
                vec![(":now", s(shared::ids::format_time(now)))],
            )
            .await
        }
        Some(secs) if secs >= d.app.cfg.webhooks.disable_after_secs => disable(d, ws, ep, "failing").await,
        Some(_) => Ok(()),
    }
}

/// Disable once (the condition makes concurrent attempts agree) and record the event.
async fn disable(d: &Dispatcher, ws: &WorkspaceId, ep: &StoredEndpoint, reason: &str) -> ApiResult<()> {
    let app = &d.app;
    let mut endpoint = ep.endpoint.clone();
    endpoint.enabled = false;
    endpoint.disabled_reason = Some(reason.into());
    endpoint.updated_at = shared::ids::Timestamp::now();
    let update = shared::store::Update::new(
        ws_pk(ws),
        model::endpoint_sk(&endpoint.id),
        "SET enabled = :false, disabled_reason = :reason, updated_at = :now, version = version + :one",
    )
    .when("enabled = :true")
    .value(":false", AttributeValue::Bool(false))
    .value(":true", AttributeValue::Bool(true))
    .value(":reason", s(reason))
    .value(":now", s(endpoint.updated_at.to_string()))
    .value(":one", n(1));
    match Tx::new().update(update).event(Event::new(ws, EventType::WebhookEndpointDisabled, &endpoint)).commit(app).await {
        Ok(()) => {
            tracing::warn!(endpoint_id = %endpoint.id, reason, "webhook endpoint disabled");
            Ok(())
        }
        Err(store::TxError::Condition(_)) => Ok(()),
        Err(store::TxError::Api(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_follow_the_schedule_with_jitter_and_retry_after() {
        let sched = [5, 300, 1800];
        for _ in 0..100 {
            let d = retry_delay(&sched, 1, None).unwrap();
            assert!((270..=330).contains(&d), "{d}");
            let r = retry_delay(&sched, 0, Some(120)).unwrap();
            assert!((108..=132).contains(&r), "Retry-After wins: {r}");
            assert!(retry_delay(&sched, 0, Some(10_000_000)).unwrap() <= 43_200, "bounded");
        }
        assert_eq!(retry_delay(&sched, 3, None), None, "schedule exhausted: dead");
    }
}
