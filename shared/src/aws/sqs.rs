//! SQS in its JSON protocol (awsJson 1.0): the sends of the outbox and the work queues, and
//! the dispatcher's rescheduling of a delivery.

use super::{Aws, AwsError};
use serde_json::{Value, json};

/// The SQS client of a container (`Aws::sqs`).
pub struct Sqs<'a> {
    pub(crate) aws: &'a Aws,
    /// Another endpoint than the container's (tests point one at a closed port).
    pub(crate) endpoint: Option<&'a str>,
}

impl Sqs<'_> {
    async fn call(&self, op: &'static str, input: Value) -> Result<Value, AwsError> {
        let target = format!("AmazonSQS.{op}");
        let url = format!("{}/", self.endpoint.map_or_else(|| self.aws.endpoint("sqs"), String::from));
        let headers = vec![("content-type", "application/x-amz-json-1.0"), ("x-amz-target", target.as_str())];
        self.aws.json(("SQS", "sqs"), op, "POST", url, headers, Some(input)).await
    }

    /// Send one message, after `delay_secs` (SQS allows 0 to 900).
    pub async fn send(&self, queue_url: &str, body: &str, delay_secs: i64) -> Result<(), AwsError> {
        let mut input = json!({"QueueUrl": queue_url, "MessageBody": body});
        if delay_secs > 0 {
            input["DelaySeconds"] = json!(delay_secs.clamp(0, 900));
        }
        self.call("SendMessage", input).await.map(|_| ())
    }

    /// Send up to ten messages in one request; answers the indexes (into `bodies`) SQS took.
    pub async fn send_batch(&self, queue_url: &str, bodies: &[&str]) -> Result<Vec<usize>, AwsError> {
        let entries: Vec<Value> = bodies.iter().enumerate().map(|(i, b)| json!({"Id": i.to_string(), "MessageBody": b})).collect();
        let out = self.call("SendMessageBatch", json!({"QueueUrl": queue_url, "Entries": entries})).await?;
        let ok = out["Successful"].as_array().map(Vec::as_slice).unwrap_or_default();
        Ok(ok.iter().filter_map(|e| e["Id"].as_str()?.parse().ok()).filter(|i| *i < bodies.len()).collect())
    }

    /// Let a received message come back after `secs` (SQS allows 0 to 43,200).
    pub async fn change_visibility(&self, queue_url: &str, receipt_handle: &str, secs: i64) -> Result<(), AwsError> {
        let input = json!({"QueueUrl": queue_url, "ReceiptHandle": receipt_handle, "VisibilityTimeout": secs.clamp(0, 43_200)});
        self.call("ChangeMessageVisibility", input).await.map(|_| ())
    }
}
