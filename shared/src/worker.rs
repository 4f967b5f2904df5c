//! What a queue consumer's step ends in. `ApiError` is the HTTP boundary's type; workers
//! decide what to do with a message on these instead of on HTTP status codes.

use crate::error::{ApiError, ErrorCode};
use crate::store::TxError;

/// What became of one message (or one item of it).
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Finished with: delete it.
    Done,
    /// Look again in this many seconds (not due yet, held by another copy, or a retry).
    Later(u64),
}

#[derive(Debug)]
pub enum WorkError {
    /// The item changed since it was read (a concurrent copy of the message, a cancel): read
    /// it again shortly; nothing was done.
    Stale,
    /// A dependency failed (throttling, network, a queue): keep the message and try later.
    Retry(String),
    /// A bug or corrupt data: retrying cannot help; the message goes on to its dead-letter
    /// queue after its receives, for a human.
    Fatal(String),
}

impl WorkError {
    /// How soon another try makes sense.
    pub fn retry_after_secs(&self) -> u64 {
        match self {
            Self::Stale => 2,
            Self::Retry(_) | Self::Fatal(_) => 30,
        }
    }
}

impl std::fmt::Display for WorkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stale => f.write_str("stale: the item changed concurrently"),
            Self::Retry(m) => write!(f, "retry: {m}"),
            Self::Fatal(m) => write!(f, "fatal: {m}"),
        }
    }
}

impl From<ApiError> for WorkError {
    fn from(e: ApiError) -> Self {
        // The whole error (its cause and where it was made): the worker logs what it meets.
        match e.code {
            ErrorCode::Conflict => Self::Stale,
            ErrorCode::Unavailable | ErrorCode::RateLimited => Self::Retry(e.to_string()),
            _ => Self::Fatal(e.to_string()),
        }
    }
}

impl From<TxError> for WorkError {
    fn from(e: TxError) -> Self {
        match e {
            TxError::Condition(_) => Self::Stale,
            TxError::Api(e) => e.into(),
        }
    }
}

/// The time one invocation may still spend. A queue consumer starts slow work (a webhook
/// attempt that may take its whole timeout) only when it fits, and hands the rest back as
/// messages of their own, so one slow receiver cannot run the invocation into its timeout and
/// take every other tenant's messages in the batch down with it.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    until: std::time::Instant,
}

impl Budget {
    pub fn new(d: std::time::Duration) -> Self {
        Self { until: std::time::Instant::now() + d }
    }

    /// From the Lambda context's deadline (epoch milliseconds), less `margin` for the work
    /// after the last step (recording, answering the batch).
    pub fn until_deadline(deadline_ms: u64, margin: std::time::Duration) -> Self {
        let now_ms = chrono::Utc::now().timestamp_millis().max(0) as u64;
        Self::new(std::time::Duration::from_millis(deadline_ms.saturating_sub(now_ms)).saturating_sub(margin))
    }

    pub fn remaining(&self) -> std::time::Duration {
        self.until.saturating_duration_since(std::time::Instant::now())
    }

    /// Is there time for a step that may take `d`?
    pub fn allows(&self, d: std::time::Duration) -> bool {
        self.remaining() > d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_map_to_what_a_worker_does() {
        assert!(matches!(WorkError::from(ApiError::conflict("x")), WorkError::Stale));
        assert!(matches!(WorkError::from(TxError::Condition(1)), WorkError::Stale));
        assert!(matches!(WorkError::from(ApiError::unavailable("sqs")), WorkError::Retry(_)));
        assert!(matches!(WorkError::from(ApiError::internal("bug")), WorkError::Fatal(_)));
        assert_eq!(WorkError::Stale.retry_after_secs(), 2);
    }
}
