//! The GDPR worker's queue: one message per export or erasure job. A job saves its position as
//! it goes, so a failed or timed-out run is finished by the message's next delivery; after
//! [`MAX_RUNS`] runs without progress a job is failed (and its message then goes).

use serde::{Deserialize, Serialize};
use shared::sqs::{BatchResponse, SqsEvent};
use shared::{ApiError, ApiResult, App};
use utoipa::ToSchema;

pub const MAX_RUNS: i64 = 5;

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Pending,
    Running,
    Completed,
    Failed,
}

impl JobStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
        }
    }
    pub fn finished(self) -> bool {
        matches!(self, Self::Completed | Self::Failed)
    }
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct JobError {
    pub code: String,
    pub message: String,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    Export,
    Erasure,
}

#[derive(Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct JobMessage {
    pub kind: JobKind,
    pub workspace_id: String,
    pub id: String,
}

/// Count a run of a job (at `sk` in the workspace), which must be pending or running: `runs`
/// numbers the run (a fence for its saves), `stalled` counts the runs since the job last
/// saved progress (its saves reset it); too many stalled runs fail the job.
pub async fn begin_run(app: &App, ws: &str, sk: &str) -> ApiResult<(i64, i64)> {
    use shared::store::{self, n, s};
    let out = app
        .db
        .client
        .update_item()
        .table_name(&app.db.table)
        .key("pk", s(store::ws_pk(ws)))
        .key("sk", s(sk))
        .update_expression("SET #status = :running, started_at = if_not_exists(started_at, :now) ADD runs :one, stalled :one")
        .condition_expression("#status IN (:pending, :running)")
        .expression_attribute_names("#status", "status")
        .expression_attribute_values(":running", s("running"))
        .expression_attribute_values(":pending", s("pending"))
        .expression_attribute_values(":now", s(shared::ids::now_rfc3339()))
        .expression_attribute_values(":one", n(1))
        .return_values(aws_sdk_dynamodb::types::ReturnValue::UpdatedNew)
        .send()
        .await
        .map_err(store::ddb_error)?;
    let get = |k: &str| out.attributes().and_then(|a| store::get_i64(a, k)).unwrap_or(1);
    Ok((get("runs"), get("stalled")))
}

/// Queue a job for the worker.
pub async fn enqueue(app: &App, kind: JobKind, ws: &str, id: &str) -> ApiResult<()> {
    let body = serde_json::to_string(&JobMessage { kind, workspace_id: ws.into(), id: id.into() }).expect("serializes");
    app.enqueue(&app.cfg.gdpr_queue_url, &body, 0).await.map_err(|e| {
        tracing::error!(job = id, error = %e, "GDPR job not queued");
        ApiError::unavailable("the GDPR job queue is unavailable; retry")
    })
}

/// The worker's Lambda handler: a job that stops on an error keeps its message, and the next
/// delivery resumes it.
pub async fn handle_sqs(app: &App, ev: SqsEvent) -> BatchResponse {
    let mut kept = vec![];
    for m in &ev.records {
        let Ok(msg) = serde_json::from_str::<JobMessage>(shared::sqs::body(m)) else {
            tracing::error!(message_id = %shared::sqs::id(m), "not a GDPR job message; dropped");
            continue;
        };
        let res = match msg.kind {
            JobKind::Export => super::export::run(app, &msg.workspace_id, &msg.id).await,
            JobKind::Erasure => super::erasure::run(app, &msg.workspace_id, &msg.id).await,
        };
        if let Err(e) = res {
            tracing::warn!(job = %msg.id, error = %e, "GDPR job interrupted; it resumes on the next delivery");
            kept.push(shared::sqs::id(m));
        }
    }
    shared::sqs::keep(kept)
}
