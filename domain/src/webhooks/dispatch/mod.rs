//! The webhook dispatcher. Triggered by
//! - the events queue: fan an event out to the workspace's enabled, subscribed endpoints (one
//!   delivery each, created once per event) and make every first attempt concurrently;
//! - the deliveries queue: make a retry (or a test / manual retry) attempt when it is due,
//!   or the next step of a replay (`super::replay`);
//! - a schedule: the outbox sweep, which re-sends events that never reached the queue.
//!
//! Retries ride on SQS: a failed attempt hides its message for the next delay (visibility
//! timeout, at most 12 h) and reports it as a batch item failure; a message that comes back
//! early is hidden again. After the schedule the delivery is `dead`.

pub mod attempt;
pub mod client;
pub mod fanout;
pub mod links;
pub mod replay;

use crate::webhooks::DeliveryJob;
use shared::App;

pub struct Dispatcher {
    pub app: App,
    pub http: client::Sender,
}

pub use shared::sqs::{BatchResponse, ItemFailure, SqsEvent, SqsMessage};

pub use shared::worker::{Budget, Outcome, WorkError};

/// The budget of an invocation with no Lambda deadline to go by (local runs, tests): the
/// function's timeout in template.yaml (60 s) less a margin.
pub const DEFAULT_BUDGET: std::time::Duration = std::time::Duration::from_secs(50);

impl Dispatcher {
    /// What one attempt may take: the receiver's timeout and a little for recording it.
    pub fn attempt_time(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.app.cfg.webhooks.timeout_secs + 2)
    }

    pub fn new(app: App) -> Result<Self, String> {
        let http = client::Sender::new(&app.cfg.webhooks)?;
        Ok(Self { app, http })
    }

    pub async fn handle(&self, payload: serde_json::Value) -> Result<serde_json::Value, String> {
        self.handle_within(payload, Budget::new(DEFAULT_BUDGET)).await
    }

    /// The Lambda entry point: an SQS batch, or a scheduled (EventBridge) event for the sweep.
    pub async fn handle_within(&self, payload: serde_json::Value, budget: Budget) -> Result<serde_json::Value, String> {
        if payload.get("Records").is_some() {
            let ev: SqsEvent = serde_json::from_value(payload).map_err(|e| format!("not an SQS event: {e}"))?;
            return Ok(serde_json::to_value(self.handle_sqs_within(ev, budget).await).expect("serializes"));
        }
        // Independent: a refusing events queue must not hold back the jobs, nor the reverse.
        // The same minute announces approval requests nobody decided in time.
        let age = self.app.cfg.webhooks.outbox_sweep_age_secs;
        let (events, jobs, expired) = tokio::join!(
            shared::outbox::sweep(&self.app, age, 100),
            shared::outbox::sweep_jobs(&self.app, age, 100),
            shared::approvals::expire_due(&self.app, shared::ids::now_ms(), 100)
        );
        let (events, jobs) = (events.map_err(|e| e.to_string())?, jobs.map_err(|e| e.to_string())?);
        let expired = expired.map_err(|e| e.to_string())?;
        Ok(serde_json::json!({ "swept": events, "jobs": jobs, "approvals_expired": expired }))
    }

    pub async fn handle_sqs(&self, ev: SqsEvent) -> BatchResponse {
        self.handle_sqs_within(ev, Budget::new(DEFAULT_BUDGET)).await
    }

    /// Every message of the batch concurrently: one slow endpoint costs its own timeout only,
    /// and attempts that would not finish within `budget` are handed back as jobs.
    pub async fn handle_sqs_within(&self, ev: SqsEvent, budget: Budget) -> BatchResponse {
        let results = futures_util::future::join_all(ev.records.iter().map(|m| self.handle_message(m, budget))).await;
        let mut resp = BatchResponse::default();
        for (m, kept) in ev.records.iter().zip(results) {
            if kept {
                resp.batch_item_failures.push(shared::sqs::failure(shared::sqs::id(m)));
            }
        }
        resp
    }

    /// True when the message must stay in the queue.
    async fn handle_message(&self, m: &SqsMessage, budget: Budget) -> bool {
        let outcome = if let Ok(job) = serde_json::from_str::<DeliveryJob>(shared::sqs::body(m)) {
            attempt::process(self, &job, attempt::Mode::Job, budget).await
        } else if let Ok(r) = serde_json::from_str::<crate::webhooks::replay::ReplayJob>(shared::sqs::body(m)) {
            replay::step(self, &r.replay, budget).await
        } else if let Ok(event) = serde_json::from_str::<shared::events::Event>(shared::sqs::body(m)) {
            fanout::fan_out(self, &event, budget).await
        } else if let Ok(batch) = serde_json::from_str::<shared::events::EventBatch>(shared::sqs::body(m)) {
            fanout::fan_out_batch(self, &batch.events, budget).await
        } else {
            // Neither kind: leave it to the dead-letter queue for a human to look at.
            tracing::error!(message_id = %shared::sqs::id(m), "unrecognised message on a dispatcher queue");
            return true;
        };
        match outcome {
            Ok(Outcome::Done) => false,
            Ok(Outcome::Later(secs)) => {
                // Only delivery jobs and replays are kept for later; events are finished or failed.
                let res = self
                    .app
                    .sqs()
                    .change_message_visibility()
                    .queue_url(&self.app.cfg.deliveries_queue_url)
                    .receipt_handle(m.receipt_handle.as_deref().unwrap_or_default())
                    .visibility_timeout((secs as i64).clamp(1, 43_200) as i32)
                    .send()
                    .await
                    .map_err(shared::aws::AwsError::from);
                if let Err(e) = res {
                    // The message comes back after the queue's default visibility instead.
                    tracing::warn!(message_id = %shared::sqs::id(m), error = %e, "could not reschedule");
                }
                true
            }
            Err(e) => {
                tracing::warn!(message_id = %shared::sqs::id(m), error = %e, "message failed; it will be received again");
                true
            }
        }
    }
}
