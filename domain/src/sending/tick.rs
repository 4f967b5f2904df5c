//! The schedule tick (every minute on AWS): reads the due entries of every shard whose time is
//! within SQS's 15-minute delay and whose `next_check` has passed, enqueues those emails (with
//! a delay until their time), and pushes `next_check` past the time they should have left. An
//! email whose message was lost, or whose sender died, is thereby enqueued again; the sender
//! drops copies of emails that already left.

use super::Sender;
use crate::emails::{self as model, DUE_SHARDS, ENQUEUE_AHEAD_SECS};
use crate::ids::EmailId;
use shared::auth::WorkspaceId;
use shared::store::{self, n};
use shared::{ApiError, ApiResult};
use std::collections::BTreeMap;

/// Due entries evaluated per page, and pages per shard and tick; the rest wait for the next tick.
const PAGE: i32 = 500;
const PAGES: usize = 10;

struct Due {
    pk: String,
    sk: String,
    ws: String,
    email_id: String,
    due_secs: i64,
}

pub async fn tick(sd: &Sender) -> ApiResult<usize> {
    let app = &sd.app;
    let now = chrono::Utc::now().timestamp();
    let horizon = format!("{:013}#~", (now + ENQUEUE_AHEAD_SECS) * 1000);
    let scans = (0..DUE_SHARDS).map(|shard| scan_shard(sd, shard, &horizon, now));
    let mut due = vec![];
    for found in futures_util::future::join_all(scans).await {
        due.extend(found?);
    }
    // One message per workspace and delay.
    let mut jobs: BTreeMap<(WorkspaceId, i64), Vec<EmailId>> = BTreeMap::new();
    for d in &due {
        jobs.entry((WorkspaceId::trusted(d.ws.clone()), (d.due_secs - now).max(0)))
            .or_default()
            .push(EmailId::trusted(d.email_id.as_str()));
    }
    for ((ws, delay), ids) in &jobs {
        if !model::enqueue(app, ws, ids, *delay).await {
            return Err(ApiError::unavailable("emails queue"));
        }
    }
    for chunk in due.chunks(25) {
        // An entry deleted meanwhile (the email left) stays deleted.
        let marks = chunk
            .iter()
            .map(|d| app.db.mark(d.pk.clone(), d.sk.clone(), "next_check", n(d.due_secs.max(now) + app.cfg.email.requeue_after_secs)));
        futures_util::future::join_all(marks).await;
    }
    if !due.is_empty() {
        tracing::info!(enqueued = due.len(), "email tick enqueued due emails");
    }
    Ok(due.len())
}

/// The entries of one shard that are near their time and unchecked for a while. Entries still
/// in flight are skipped by the filter; paging goes on past them, within a budget.
async fn scan_shard(sd: &Sender, shard: u32, horizon: &str, now: i64) -> ApiResult<Vec<Due>> {
    let filter = ("next_check <= :now", vec![(":now", n(now))]);
    let items = sd.app.db.scan_range(&model::due_shard_pk(shard), horizon, filter, PAGE, PAGES, usize::MAX).await?;
    let mut out = vec![];
    for item in &items {
        let (Some(pk), Some(sk), Some(ws), Some(id)) = (
            store::get_str(item, "pk"),
            store::get_str(item, "sk"),
            store::get_str(item, "workspace_id"),
            store::get_str(item, "email_id"),
        ) else {
            continue;
        };
        let due_ms: i64 = sk.split('#').next().and_then(|d| d.parse().ok()).unwrap_or(0);
        out.push(Due { pk: pk.into(), sk: sk.into(), ws: ws.into(), email_id: id.into(), due_secs: due_ms / 1000 });
    }
    Ok(out)
}
