//! The scanner: runs the scans `POST /scans` queued. For each job it claims the scan
//! (queued -> running, a versioned write, so a duplicate delivery finds it taken or done),
//! collects what the rules read (`fetch`, through the SSRF-safe client: public addresses only,
//! checked on every connection and redirect; 5 MB of HTML at most; 10 s per request; 60 s per
//! scan), scores it (`domain::scans::rules`) and saves the result with its event. A scan whose
//! worker died comes back with the message and is tried again, `failed` after three attempts;
//! the queue's DLQ keeps what still fails.

pub mod dns;
pub mod fetch;

use crate::scans::{Job, ScanStatus};
use shared::App;
use shared::auth::WorkspaceId;
use shared::sqs::{BatchResponse, SqsEvent};
use std::sync::OnceLock;
use std::time::Duration;

/// A whole scan's budget.
pub const SCAN_BUDGET: Duration = Duration::from_secs(60);

/// The scanner's clients, built once per container.
fn http(app: &App) -> Result<&'static fetch::Http, String> {
    static HTTP: OnceLock<fetch::Http> = OnceLock::new();
    if let Some(h) = HTTP.get() {
        return Ok(h);
    }
    let made = fetch::Http::new(app.cfg.webhooks.url_policy)?;
    Ok(HTTP.get_or_init(|| made))
}

/// One SQS batch: a job that failed for a reason that may pass (a DynamoDB error) stays in the
/// queue; a site that fails is a `failed` scan, not a failed message.
pub async fn handle_sqs(app: &App, ev: SqsEvent) -> BatchResponse {
    let mut kept = vec![];
    for m in &ev.records {
        let Ok(job) = serde_json::from_str::<Job>(shared::sqs::body(m)) else {
            tracing::error!(message_id = %shared::sqs::id(m), "not a scan job; dropped");
            continue;
        };
        if let Err(e) = run(app, &job).await {
            tracing::warn!(scan_id = %job.scan_id, error = %e, "scan kept for another try");
            kept.push(shared::sqs::id(m));
        }
    }
    shared::sqs::keep(kept)
}

pub async fn run(app: &App, job: &Job) -> Result<(), String> {
    let ws = &job.workspace_id;
    let Some((mut scan, version)) = crate::scans::load(app, ws, &job.scan_id).await.map_err(|e| e.to_string())? else {
        return Ok(());
    };
    if matches!(scan.status, ScanStatus::Completed | ScanStatus::Failed) {
        return Ok(());
    }
    // Another delivery's claim still holds (a copy of the message): keep this one, whose
    // redelivery finds the scan done, or its run dead and the claim over.
    let claimed = scan.started_at.as_ref().map(|t| t.time().timestamp() + app.cfg.scan_lease_secs);
    if scan.status == ScanStatus::Running && claimed.is_some_and(|until| chrono::Utc::now().timestamp() < until) {
        return Err(format!("scan {} is being run by another delivery", scan.id));
    }
    if scan.attempts >= crate::scans::MAX_ATTEMPTS {
        let message = format!("the scanner stopped {} times on this site", scan.attempts);
        crate::scans::fail(&mut scan, "internal", message, shared::ids::Timestamp::now());
        return crate::scans::save(app, ws, &scan, version).await.map_err(|e| e.to_string());
    }
    // At most SLOTS_PER_HOST scans hit one host at once; the others wait in the queue.
    let Some(slot) = crate::scans::take_host_slot(app, &scan.host, &scan.id).await.map_err(|e| e.to_string())? else {
        return crate::scans::enqueue_after(app, ws, &scan.id, HOST_BUSY_DELAY_SECS).await.map_err(|e| e.to_string());
    };
    let host = scan.host.clone();
    let result = scan_with_slot(app, ws, scan, version).await;
    crate::scans::release_host_slot(app, &host, slot, &job.scan_id).await;
    result
}

/// How long a job whose host is busy waits before it comes back.
pub const HOST_BUSY_DELAY_SECS: i64 = 5;

/// Claim, scan and save.
async fn scan_with_slot(app: &App, ws: &WorkspaceId, mut scan: crate::scans::Scan, version: i64) -> Result<(), String> {
    scan.status = ScanStatus::Running;
    scan.attempts += 1;
    scan.started_at = Some(shared::ids::Timestamp::now());
    scan.updated_at = shared::ids::Timestamp::now();
    if let Err(e) = crate::scans::save(app, ws, &scan, version).await {
        // Another delivery took it (or finished it) meanwhile, or the table is unreachable:
        // the message comes back either way, and the scan's state decides.
        tracing::info!(scan_id = %scan.id, error = %e, "scan not claimed");
        return Err(e.to_string());
    }
    let url = url::Url::parse(&scan.url).map_err(|e| e.to_string())?;
    match tokio::time::timeout(SCAN_BUDGET, fetch::site(http(app)?, &url)).await {
        Ok(Ok(site)) => {
            let findings = crate::scans::rules::evaluate(&site);
            crate::scans::complete(&mut scan, site.final_url, findings, shared::ids::Timestamp::now());
        }
        Ok(Err(f)) => crate::scans::fail(&mut scan, f.code, f.message, shared::ids::Timestamp::now()),
        Err(_) => crate::scans::fail(
            &mut scan,
            "timeout",
            format!("the scan ran past {} s", SCAN_BUDGET.as_secs()),
            shared::ids::Timestamp::now(),
        ),
    }
    shared::metrics::count("ScansFinished", "Status", scan.status.as_str());
    crate::scans::save(app, ws, &scan, version + 1).await.map_err(|e| e.to_string())
}
