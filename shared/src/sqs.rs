//! What SQS-triggered functions read and answer: Lambda's SQS event and its
//! `ReportBatchItemFailures` response (the messages that stay in the queue), as
//! `aws_lambda_events` defines them, with the few helpers their optional fields want.

pub use aws_lambda_events::sqs::{BatchItemFailure as ItemFailure, SqsBatchResponse as BatchResponse, SqsEvent, SqsMessage};

/// Keep these messages (by id) for another delivery.
pub fn keep<'a>(ids: impl IntoIterator<Item = &'a str>) -> BatchResponse {
    let mut r = BatchResponse::default();
    r.batch_item_failures = ids.into_iter().map(failure).collect();
    r
}

/// One message kept for another delivery.
pub fn failure(id: &str) -> ItemFailure {
    let mut f = ItemFailure::default();
    f.item_identifier = id.to_string();
    f
}

/// A message's id ("" when Lambda gave none).
pub fn id(m: &SqsMessage) -> &str {
    m.message_id.as_deref().unwrap_or_default()
}

/// A message's body ("" when it has none).
pub fn body(m: &SqsMessage) -> &str {
    m.body.as_deref().unwrap_or_default()
}

/// A message as Lambda delivers it (tests and the local worker build them).
pub fn message(id: &str, receipt_handle: &str, body: &str) -> SqsMessage {
    let mut m = SqsMessage::default();
    m.message_id = Some(id.to_string());
    m.receipt_handle = Some(receipt_handle.to_string());
    m.body = Some(body.to_string());
    m
}

/// An event of these messages.
pub fn event(records: Vec<SqsMessage>) -> SqsEvent {
    let mut e = SqsEvent::default();
    e.records = records;
    e
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
