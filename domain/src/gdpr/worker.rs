//! The GDPR worker's entry: each queued job runs its kind's code (`export`, `erasure`, and the
//! purge of a deleted contact's history).

use super::jobs::{JobKind, JobMessage};
use shared::App;
use shared::sqs::{BatchResponse, SqsEvent};

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
            JobKind::Export => super::export::run(app, &msg.workspace_id, &crate::ids::ExportId::trusted(&msg.id)).await,
            JobKind::Erasure => super::erasure::run(app, &msg.workspace_id, &crate::ids::ErasureId::trusted(&msg.id)).await,
            JobKind::PurgeContact => match crate::contacts::ContactId::parse(&msg.id) {
                // Its emails first (they would write on its timeline again), then the history.
                Some(id) => match crate::emails::unlink_contact(app, &msg.workspace_id, &id).await {
                    Ok(()) => crate::contacts::purge_history(app, &msg.workspace_id, &id).await,
                    Err(e) => Err(e),
                },
                None => Ok(()),
            },
        };
        if let Err(e) = res {
            tracing::warn!(job = %msg.id, error = %e, "GDPR job interrupted; it resumes on the next delivery");
            kept.push(shared::sqs::id(m));
        }
    }
    shared::sqs::keep(kept)
}
