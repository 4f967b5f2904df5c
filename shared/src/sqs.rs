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
