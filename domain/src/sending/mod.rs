//! The email sender: one Lambda with three inputs.
//! - The emails queue: `SendJob`s (emails of one workspace). Each email is claimed, checked
//!   for suppression again, sent through SES v2 and recorded (`send`).
//! - The feedback queue: SES delivery, bounce and complaint notifications (SNS-over-SQS),
//!   which move sent emails on and mark contacts bounced or complained (`feedback`).
//! - A schedule: the tick enqueues scheduled emails whose time is near and re-enqueues queued
//!   ones whose message was lost (`tick`).

pub mod feedback;
pub mod send;
pub mod tick;

use shared::App;
use shared::sqs::{BatchResponse, SqsEvent, SqsMessage};

pub struct Sender {
    pub app: App,
    pub ses: aws_sdk_sesv2::Client,
}

impl Sender {
    /// SES calls get the container's dependency deadline, well inside the claim an email is
    /// sent under, and no automatic retry: a SendEmail retried after a timeout could deliver
    /// the email twice (send.rs decides what a failure means).
    pub fn new(app: App) -> Self {
        let ms = std::time::Duration::from_millis(app.cfg.timeouts.dependency_ms);
        let conf = aws_sdk_sesv2::config::Builder::from(app.sdk())
            .interceptor(shared::metrics::CallLog)
            .retry_config(aws_config::retry::RetryConfig::disabled())
            .timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .connect_timeout(ms.min(std::time::Duration::from_secs(1)))
                    .operation_timeout(ms)
                    .operation_attempt_timeout(ms)
                    .build(),
            )
            .build();
        Self { app, ses: aws_sdk_sesv2::Client::from_conf(conf) }
    }

    /// The Lambda entry point: an SQS batch, or the schedule's event for the tick.
    pub async fn handle(&self, payload: serde_json::Value) -> Result<serde_json::Value, String> {
        if payload.get("Records").is_some() {
            let ev: SqsEvent = serde_json::from_value(payload).map_err(|e| format!("not an SQS event: {e}"))?;
            return Ok(serde_json::to_value(self.handle_sqs(ev).await).expect("serializes"));
        }
        let enqueued = tick::tick(self).await.map_err(|e| e.to_string())?;
        Ok(serde_json::json!({ "enqueued": enqueued }))
    }

    /// Every message of the batch concurrently; failed ones stay in their queue.
    pub async fn handle_sqs(&self, ev: SqsEvent) -> BatchResponse {
        let results = futures_util::future::join_all(ev.records.iter().map(|m| self.handle_message(m))).await;
        let mut resp = BatchResponse::default();
        for (m, result) in ev.records.iter().zip(results) {
            if let Err(e) = result {
                tracing::warn!(message_id = %shared::sqs::id(m), error = %e, "message kept for another try");
                resp.batch_item_failures.push(shared::sqs::failure(shared::sqs::id(m)));
            }
        }
        resp
    }

    async fn handle_message(&self, m: &SqsMessage) -> Result<(), String> {
        if let Ok(job) = serde_json::from_str::<crate::emails::SendJob>(shared::sqs::body(m)) {
            return send::run_job(self, &job).await.map_err(|e| e.to_string());
        }
        if let Some(n) = feedback::parse(shared::sqs::body(m)) {
            return feedback::apply(self, &n).await;
        }
        // Neither kind: the dead-letter queue keeps it for a human to look at.
        Err("unrecognised message on an email queue".into())
    }
}
