//! Scans in the table: the record with its host and status indexes, the request that claims
//! a URL for the dedup window, the per-host slots the scanner leases, the queue, the list.

use super::{DEDUP_SECS, ListScans, Requested, SLOT_LEASE_MS, SLOTS_PER_HOST, Scan, ScanStatus, message, summary};
use crate::ids::ScanId;
use crate::keys;
use shared::auth::WorkspaceId;
use shared::events::Event;
use shared::events::EventType;
use shared::outbox::{Tx, WorkQueue};
use shared::store::{Item, Record, n, s, ws_pk};
use shared::{ApiError, ApiResult, App};

pub fn record(ws: &WorkspaceId, scan: &Scan) -> ApiResult<Record> {
    Ok(Record::new(ws_pk(ws), keys::SCAN.sk(&scan.id), scan)?
        .gsi1(keys::SCAN.gsi1_pk((ws, &scan.host)), keys::SCAN.gsi1_sk(&scan.id))
        .gsi2(keys::SCAN.gsi2_pk((ws, scan.status.as_str())), keys::SCAN.gsi2_sk(&scan.id)))
}

fn url_claim_sk(url: &str) -> String {
    keys::SCAN_URL_CLAIM.sk(&shared::crypto::sha256_hex(url.as_bytes()))
}

/// Create a scan (and claim its URL for the dedup window), or answer the URL's recent one.
/// `force` takes the claim over. The caller queues a created scan.
pub async fn request(app: &App, ws: &WorkspaceId, url: &url::Url, force: bool) -> ApiResult<Requested> {
    let now = chrono::Utc::now();
    let scan = Scan {
        id: crate::ids::ScanId::generate(),
        object: "scan".into(),
        url: url.to_string(),
        host: url.host_str().unwrap_or_default().to_ascii_lowercase(),
        final_url: None,
        status: ScanStatus::Queued,
        error: None,
        score: None,
        grade: None,
        categories: None,
        findings: vec![],
        scoring_version: None,
        attempts: 0,
        created_at: shared::ids::Timestamp::from(now),
        started_at: None,
        completed_at: None,
        updated_at: shared::ids::Timestamp::from(now),
    };
    let claim_sk = url_claim_sk(&scan.url);
    let claim = Item::from([
        ("pk".into(), s(ws_pk(ws))),
        ("sk".into(), s(&claim_sk)),
        ("scan_id".into(), s(&scan.id)),
        ("expires_at".into(), n(now.timestamp() + DEDUP_SECS)),
    ]);
    let tx = Tx::new().create(record(ws, &scan)?.version(1));
    let tx = if force {
        tx.put(claim)
    } else {
        tx.put_if(claim, "attribute_not_exists(pk) OR expires_at < :now", vec![(":now", n(now.timestamp()))])
    };
    // After the claim: its condition is write 1.
    let tx = tx.job(WorkQueue::Scans, &scan.id, message(ws, &scan.id)?);
    match tx.commit(app).await {
        Ok(()) => Ok(Requested::Created(scan)),
        Err(shared::store::TxError::Condition(1)) => {
            let held = app.db.get(&ws_pk(ws), &claim_sk).await?;
            let id = held.as_ref().and_then(|i| shared::store::get_str(i, "scan_id")).unwrap_or_default();
            match load(app, ws, &ScanId::trusted(id)).await? {
                Some((existing, _)) => Ok(Requested::Existing(existing)),
                None => Err(ApiError::conflict("a scan of this URL is being created; retry")),
            }
        }
        Err(e) => Err(e.stale()),
    }
}

pub async fn load(app: &App, ws: &WorkspaceId, id: &ScanId) -> ApiResult<Option<(Scan, i64)>> {
    app.db.get_object::<Scan>(ws, &keys::SCAN.sk(id)).await
}

/// Take one of the host's slots for this scan (a conditional put per slot: free, expired, or
/// already this scan's); `None` when every slot is busy.
pub async fn take_host_slot(app: &App, host: &str, scan_id: &str) -> ApiResult<Option<usize>> {
    let now = shared::ids::now_ms();
    for slot in 0..SLOTS_PER_HOST {
        let item = Item::from([
            ("pk".to_string(), s(keys::SCAN_HOST_SLOT.pk(host))),
            ("sk".to_string(), s(keys::SCAN_HOST_SLOT.sk(&slot.to_string()))),
            ("scan_id".to_string(), s(scan_id)),
            ("lease_until".to_string(), n(now + SLOT_LEASE_MS)),
            ("expires_at".to_string(), n((now + SLOT_LEASE_MS) / 1000 + 60)),
        ]);
        let taken = app
            .db
            .put(item)
            .when("attribute_not_exists(pk) OR lease_until < :now OR scan_id = :me")
            .value(":now", n(now))
            .value(":me", s(scan_id))
            .apply()
            .await?;
        if taken.is_some() {
            return Ok(Some(slot));
        }
    }
    Ok(None)
}

/// Give the slot back (only if it is still this scan's).
pub async fn release_host_slot(app: &App, host: &str, slot: usize, scan_id: &str) {
    let res = app
        .db
        .delete_when(keys::SCAN_HOST_SLOT.pk(host), keys::SCAN_HOST_SLOT.sk(&slot.to_string()), "scan_id = :me")
        .value(":me", s(scan_id))
        .apply()
        .await;
    if let Err(e) = res {
        tracing::warn!(error = %e, "could not release a scan host slot; its lease will end");
    }
}

/// Queue the job again in `delay_secs` (its host was busy). If the queue refuses, the job is
/// parked in the outbox for the sweep (a message kept for redelivery instead could end in the
/// DLQ during a long outage, and the scan with it).
pub async fn enqueue_after(app: &App, ws: &WorkspaceId, scan_id: &str, delay_secs: i64) -> ApiResult<()> {
    let body = message(ws, scan_id)?;
    if let Err(e) = app.enqueue(&app.cfg.scans_queue_url, &body, delay_secs).await {
        tracing::warn!(scan_id, error = %e, "scan not queued again; parked in the outbox");
        shared::outbox::park(app, WorkQueue::Scans, scan_id, &body).await?;
    }
    Ok(())
}

/// Save a scan at `version` with its new state, and its event when it ended.
pub async fn save(app: &App, ws: &WorkspaceId, scan: &Scan, version: i64) -> ApiResult<()> {
    let mut tx = Tx::new().replace(record(ws, scan)?, version);
    match scan.status {
        ScanStatus::Completed => tx = tx.event(Event::new(ws, EventType::ScanCompleted, &summary(scan))),
        ScanStatus::Failed => tx = tx.event(Event::new(ws, EventType::ScanFailed, &summary(scan))),
        _ => {}
    }
    tx.commit(app).await.map_err(shared::store::TxError::stale)
}

/// One page of scans in creation order after `after`, by `host` or `status` (each an index,
/// O(page); the status index holds keys only, so its page is read by key after), and the key
/// to go on from.
pub async fn list(
    app: &App,
    ws: &WorkspaceId,
    q: &ListScans,
    after: Option<String>,
    limit: usize,
) -> ApiResult<(Vec<Scan>, Option<String>)> {
    let status = q.status.map(ScanStatus::as_str);
    let mut spec = match (&q.host, status) {
        (Some(h), _) => keys::SCANS_BY_HOST.query((ws, h), after, limit),
        (None, Some(st)) => keys::SCANS_BY_STATUS.query((ws, st), after, limit),
        (None, None) => keys::SCANS.query(ws, after, limit),
    };
    if let (Some(_), Some(st)) = (&q.host, status) {
        // Both filters: the host's index, and the status read from the item's status index key.
        spec = spec.filter("gsi2pk = :st", vec![(":st", s(keys::SCAN.gsi2_pk((ws, st))))]);
    }
    if q.host.is_none() && status.is_some() {
        return shared::request::keyed_page::<Scan>(app, spec).await;
    }
    shared::request::page::<Scan>(app, spec).await
}
