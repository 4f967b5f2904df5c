//! The GDPR worker's queue: one message per export or erasure job. A job saves its position as
//! it goes, so a failed or timed-out run is finished by the message's next delivery; after
//! [`MAX_RUNS`] runs without progress a job is failed (and its message then goes).

use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::{ApiResult, App};
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
    /// A deleted contact's timeline and former identities (`id` is the contact's).
    PurgeContact,
}

#[derive(Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct JobMessage {
    pub kind: JobKind,
    #[serde(deserialize_with = "WorkspaceId::from_record")]
    pub workspace_id: WorkspaceId,
    pub id: String,
}

/// Count a run of a job (at `sk` in the workspace), which must be pending or running: `runs`
/// numbers the run (a fence for its saves), `stalled` counts the runs since the job last
/// saved progress (its saves reset it); too many stalled runs fail the job.
pub async fn begin_run(app: &App, ws: &WorkspaceId, sk: &str) -> ApiResult<(i64, i64)> {
    use shared::store::{self, n, s};
    let out = app
        .db
        .update(store::ws_pk(ws), sk, "SET #status = :running, started_at = if_not_exists(started_at, :now) ADD runs :one, stalled :one")
        .when("#status IN (:pending, :running)")
        .name("#status", "status")
        .value(":running", s("running"))
        .value(":pending", s("pending"))
        .value(":now", s(shared::ids::Timestamp::now().to_string()))
        .value(":one", n(1))
        .returning(shared::store::Returning::UpdatedNew)
        .required()
        .await?;
    let get = |k: &str| store::get_i64(&out, k).unwrap_or(1);
    Ok((get("runs"), get("stalled")))
}

/// The purge of a deleted contact's history (its emails unlinked, its timeline and former
/// identities removed), queued in the transaction that deletes it (`contacts::ops::delete`).
pub fn purge_contact(tx: shared::outbox::Tx, ws: &WorkspaceId, contact_id: &str) -> shared::outbox::Tx {
    tx.job(shared::outbox::WorkQueue::Gdpr, &format!("purge-{contact_id}"), message(JobKind::PurgeContact, ws, contact_id))
}

/// The job's message to the worker, for [`shared::outbox::Tx::job`] in the transaction that
/// creates the job.
pub fn message(kind: JobKind, ws: &WorkspaceId, id: &str) -> String {
    serde_json::to_string(&JobMessage { kind, workspace_id: ws.clone(), id: id.into() }).expect("serializes")
}
