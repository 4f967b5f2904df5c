//! Plays the SQS event source mappings and the schedule locally: polls a queue and hands each
//! batch to the same handler the Lambda runs (the dispatcher's, the import worker's), deletes
//! what it finished (as Lambda does with `ReportBatchItemFailures`), and ticks the outbox sweep.

use domain::webhooks::dispatch::Dispatcher;
use futures_util::future::BoxFuture;
use shared::sqs::{BatchResponse, SqsEvent, SqsMessage};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// Batches handled at once per queue, as Lambda runs several invocations for a busy queue.
const CONCURRENT_BATCHES: usize = 4;

/// A function's SQS entry point.
pub type Handler = Arc<dyn Fn(SqsEvent) -> BoxFuture<'static, BatchResponse> + Send + Sync>;

/// Poll one queue until the task is aborted.
pub fn poll(sqs: aws_sdk_sqs::Client, queue_url: String, handler: Handler) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let slots = Arc::new(tokio::sync::Semaphore::new(CONCURRENT_BATCHES));
        loop {
            let Ok(slot) = slots.clone().acquire_owned().await else { return };
            let out = sqs.receive_message().queue_url(&queue_url).max_number_of_messages(10).wait_time_seconds(1).send().await;
            let messages = match out {
                Ok(o) => o.messages.unwrap_or_default(),
                Err(e) => {
                    tracing::warn!(error = %aws_sdk_sqs::error::DisplayErrorContext(e), "receive failed");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            if messages.is_empty() {
                continue;
            }
            let records: Vec<SqsMessage> = messages
                .iter()
                .map(|m| {
                    shared::sqs::message(
                        m.message_id().unwrap_or_default(),
                        m.receipt_handle().unwrap_or_default(),
                        m.body().unwrap_or_default(),
                    )
                })
                .collect();
            let (sqs, queue_url, handler) = (sqs.clone(), queue_url.clone(), handler.clone());
            tokio::spawn(async move {
                let resp = handler(shared::sqs::event(records.clone())).await;
                let kept: HashSet<&str> = resp.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
                let done: Vec<_> = records
                    .iter()
                    .filter(|r| !kept.contains(shared::sqs::id(r)))
                    .map(|r| {
                        aws_sdk_sqs::types::DeleteMessageBatchRequestEntry::builder()
                            .id(shared::sqs::id(r))
                            .receipt_handle(r.receipt_handle.as_deref().unwrap_or_default())
                            .build()
                            .expect("id and handle set")
                    })
                    .collect();
                if !done.is_empty() {
                    let _ = sqs.delete_message_batch().queue_url(&queue_url).set_entries(Some(done)).send().await;
                }
                drop(slot);
            });
        }
    })
}

/// Run the outbox sweep every `every` until aborted.
pub fn sweep(d: Arc<Dispatcher>, every: Duration) -> tokio::task::JoinHandle<()> {
    tick("outbox sweep", every, move || {
        let d = d.clone();
        Box::pin(shared::metrics::as_function("dispatcher", async move {
            d.handle(serde_json::json!({"source": "aws.events", "detail-type": "Scheduled Event"})).await.map(|_| ())
        }))
    })
}

/// Run a scheduled job every `every` until aborted (EventBridge Scheduler on AWS).
pub fn tick<F>(name: &'static str, every: Duration, job: F) -> tokio::task::JoinHandle<()>
where
    F: Fn() -> BoxFuture<'static, Result<(), String>> + Send + 'static,
{
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            if let Err(e) = job().await {
                tracing::warn!(error = %e, job = name, "scheduled job failed");
            }
        }
    })
}
