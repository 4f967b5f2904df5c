//! What SQS-triggered functions read and answer: the subset of Lambda's SQS event they need,
//! and the `ReportBatchItemFailures` response (the messages that stay in the queue).

use serde::{Deserialize, Serialize};

#[derive(Deserialize, Debug, Clone)]
pub struct SqsEvent {
    #[serde(rename = "Records")]
    pub records: Vec<SqsMessage>,
}

#[derive(Deserialize, Serialize, Debug, Clone)]
pub struct SqsMessage {
    #[serde(rename = "messageId")]
    pub message_id: String,
    #[serde(rename = "receiptHandle")]
    pub receipt_handle: String,
    pub body: String,
}

#[derive(Serialize, Deserialize, Debug, Default, PartialEq)]
pub struct BatchResponse {
    #[serde(rename = "batchItemFailures")]
    pub batch_item_failures: Vec<ItemFailure>,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
pub struct ItemFailure {
    #[serde(rename = "itemIdentifier")]
    pub item_identifier: String,
}

impl BatchResponse {
    /// Keep these messages (by id) for another delivery.
    pub fn keep<'a>(ids: impl IntoIterator<Item = &'a str>) -> Self {
        Self { batch_item_failures: ids.into_iter().map(|id| ItemFailure { item_identifier: id.to_string() }).collect() }
    }
}

/// The JSON an SQS body carries from SNS: the envelope's `Message` (SNS to SQS without raw
/// delivery), or the body itself (raw delivery).
pub fn sns_message(body: &str) -> Option<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    if v.get("Type").and_then(serde_json::Value::as_str) == Some("Notification") {
        return serde_json::from_str(v.get("Message")?.as_str()?).ok();
    }
    Some(v)
}

/// Send one message, after `delay_secs` (SQS allows 0 to 900). The error is the SDK's, as
/// text, for the caller to log or wrap: each queue's caller decides what a lost message costs.
pub async fn send(client: &aws_sdk_sqs::Client, queue_url: &str, body: String, delay_secs: i64) -> Result<(), String> {
    let mut req = client.send_message().queue_url(queue_url).message_body(body);
    if delay_secs > 0 {
        req = req.delay_seconds(delay_secs.clamp(0, 900) as i32);
    }
    req.send().await.map(|_| ()).map_err(|e| aws_sdk_sqs::error::DisplayErrorContext(e).to_string())
}
