//! `Idempotency-Key` for writes. One item per workspace + key (`sk = IDEM#<sha256(key)>`),
//! reserved with a conditional PutItem before the handler runs and filled with the response
//! after it. A refused reservation returns the old item (ALL_OLD), which decides in the same
//! round trip: same request and done -> replay; in flight -> 409; different request -> 422.
//! An in-flight reservation carries a short lease so a crashed container cannot block the key.
//!
//! The reservation is also the request's commit witness: while the handler runs, every
//! transaction it commits ([`crate::outbox::Tx::commit`]) also sets `last_tx` on the
//! reservation, on condition that the reservation is still this request's. So a transaction
//! whose answer was lost can be told apart: the witness says whether it was applied (then the
//! request goes on as if the answer had come), and a key whose request wrote anything is never
//! freed for a second run, only marked done.

use crate::error::{ApiError, ErrorCode, ErrorDetail};
use crate::store::TxError;
use crate::store::{self, Db, Item, get_i64, get_str, n, s};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem};
use sha2::{Digest, Sha256};
use std::sync::Arc;

const RETENTION_SECS: i64 = WINDOW_HOURS as i64 * 3600;
/// Responses up to this size are kept for replay; DynamoDB items hold at most 400 KB.
const MAX_STORED_BODY: usize = 300 * 1024;

/// How long a reservation holds its key against a container that stopped: past what a live
/// request can take (its budget, `REQUEST_TIMEOUT_MS`, then the release, one dependency call of
/// `DEPENDENCY_TIMEOUT_MS`), with room: the larger of three budgets, a budget and two
/// dependency calls, and 30 s. A live request never loses its key to a takeover.
pub fn lease_ms(t: &crate::config::Timeouts) -> i64 {
    let ms = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let (request, dependency) = (ms(t.request_ms), ms(t.dependency_ms));
    request.saturating_mul(3).max(request.saturating_add(dependency.saturating_mul(2))).max(30_000)
}

pub struct Reservation {
    pk: String,
    sk: String,
    fingerprint: String,
    /// Names this request's hold on the key (a lease taken over after a crash is another's).
    owner: String,
    /// When the key's first run began (a resumed run keeps it): the time of derived ids.
    started_ms: i64,
    commits: Arc<tokio::sync::Mutex<Commits>>,
}

/// What a request knows of its own writes.
#[derive(Default)]
struct Commits {
    /// A transaction of it is known applied, or writes outside transactions began: a retry
    /// would write again, so the key is never freed.
    wrote: bool,
    /// It began writes that a run of the same request repeats harmlessly (under ids derived
    /// from the key, skipping what exists): on failure its key is paused, not kept done, so the
    /// client's retry resumes it.
    resumable: bool,
}

impl Reservation {
    pub(crate) fn pk(&self) -> &str {
        &self.pk
    }
    pub(crate) fn sk(&self) -> &str {
        &self.sk
    }
    pub(crate) fn fingerprint(&self) -> &str {
        &self.fingerprint
    }
    fn witness(&self) -> Witness {
        Witness {
            pk: self.pk.clone(),
            sk: self.sk.clone(),
            owner: self.owner.clone(),
            started_ms: self.started_ms,
            commits: self.commits.clone(),
        }
    }
}

/// What a request's transactions write to show they were applied (see the module's doc).
#[derive(Clone)]
pub struct Witness {
    pk: String,
    sk: String,
    owner: String,
    started_ms: i64,
    commits: Arc<tokio::sync::Mutex<Commits>>,
}

tokio::task_local! {
    static WITNESS: Witness;
}

/// Run a handler with its reservation as the witness of its transactions.
pub async fn witnessed<F: std::future::Future>(r: Option<&Reservation>, f: F) -> F::Output {
    match r {
        Some(r) => WITNESS.scope(r.witness(), f).await,
        None => f.await,
    }
}

impl Witness {
    /// The running request's witness, if it has an `Idempotency-Key`.
    pub(crate) fn current() -> Option<Witness> {
        WITNESS.try_with(Witness::clone).ok()
    }

    /// The write a transaction adds: `last_tx = tx`, while the key is still this request's.
    fn update(&self, tx: &str, table: &str) -> Result<TransactWriteItem, ApiError> {
        let u = aws_sdk_dynamodb::types::Update::builder()
            .table_name(table)
            .key("pk", s(&self.pk))
            .key("sk", s(&self.sk))
            .update_expression("SET last_tx = :tx")
            .condition_expression("#owner = :owner AND #state = :in_flight")
            .expression_attribute_names("#owner", "owner")
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":tx", s(tx))
            .expression_attribute_values(":owner", s(&self.owner))
            .expression_attribute_values(":in_flight", s("in_flight"))
            .build()
            .map_err(|e| ApiError::internal(e))?;
        Ok(TransactWriteItem::builder().update(u).build())
    }

    /// Mark the reservation resumable before writes a rerun repeats harmlessly.
    async fn before_resumable_writes(&self, db: &Db) -> Result<(), ApiError> {
        let done = db
            .update(self.pk.clone(), &self.sk, "SET resumable = :t")
            .when("#owner = :owner AND #state = :in_flight")
            .name("#owner", "owner")
            .name("#state", "state")
            .value(":t", AttributeValue::Bool(true))
            .value(":owner", s(&self.owner))
            .value(":in_flight", s("in_flight"))
            .apply()
            .await?;
        if done.is_none() {
            return Err(ApiError::conflict("this request's hold on its Idempotency-Key ended before it wrote; retry with a new key"));
        }
        self.commits.lock().await.resumable = true;
        Ok(())
    }

    /// The witness's write alone, before writes no transaction holds: a transaction of
    /// nothing else, so its lost answer is read back as any transaction's.
    pub(crate) async fn before_plain_writes(&self, db: &Db) -> Result<(), ApiError> {
        self.commit(db, vec![]).await.map_err(TxError::stale)
    }

    /// Commit `items` with the witness's own write. One request's transactions go one at a
    /// time (concurrent ones on the witness would cancel each other). A transaction that
    /// failed with a server-side or network error is read back: applied, it is a success.
    pub(crate) async fn commit(&self, db: &Db, mut items: Vec<TransactWriteItem>) -> Result<(), TxError> {
        let mut commits = self.commits.lock().await;
        let tx = crate::ids::new_id("tx");
        let fenced = items.len();
        items.push(self.update(&tx, &db.table)?);
        crate::metrics::record_call("dynamodb:UpdateItem", "Table");
        let e = match db.transact(items).await {
            Ok(()) => {
                commits.wrote = true;
                return Ok(());
            }
            // Only if the request outlived its key's lease (never within its budget).
            Err(TxError::Condition(i)) if i == fenced => {
                return Err(TxError::Api(ApiError::conflict(
                    "this request's hold on its Idempotency-Key ended before it wrote; retry with a new key",
                )));
            }
            // A refused transaction was not applied (the SDK's retries carry one
            // ClientRequestToken, so a retry of an applied one answers success).
            Err(TxError::Api(e)) if e.status().is_server_error() => e,
            Err(e) => return Err(e),
        };
        match db.get(&self.pk, &self.sk).await {
            Ok(item) if item.as_ref().and_then(|i| get_str(i, "last_tx")) == Some(tx.as_str()) => {
                tracing::warn!(error = %e, "a transaction's answer was lost; its witness shows it applied");
                commits.wrote = true;
                Ok(())
            }
            // Not applied, or not yet, or not known (the read-back failed): it may still land.
            // `release` sees whether `last_tx` appeared (and after the release, the witness's
            // condition refuses it).
            _ => Err(TxError::Api(e)),
        }
    }
}

pub struct StoredResponse {
    pub status: u16,
    pub body: Vec<u8>,
}

pub enum Begin<R = Reservation> {
    Proceed(R),
    Replay(StoredResponse),
}

/// The request header, and what a key may be: what the pipeline checks and what the contract
/// declares (`components.parameters.IdempotencyKey`, from these).
pub const HEADER: &str = "Idempotency-Key";
pub const KEY_MAX_LEN: usize = 255;
/// Printable ASCII, as a JSON Schema pattern.
pub const KEY_PATTERN: &str = "^[\\x20-\\x7E]+$";
/// How long a completed answer is kept and replayed.
pub const WINDOW_HOURS: u32 = 24;

pub fn validate_key(key: &str) -> Result<(), ApiError> {
    if key.is_empty() || key.len() > KEY_MAX_LEN || !key.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(ApiError::new(ErrorCode::ValidationError, "Idempotency-Key must be 1 to 255 printable ASCII characters")
            .with_details(vec![ErrorDetail::field("Idempotency-Key", "must be 1 to 255 printable ASCII characters")]));
    }
    Ok(())
}

/// Identifies "the same request": who sent it (the credential's subject: another key of the
/// workspace reusing a key it read in an approval request is refused, never replayed the
/// first caller's answer), method, route-relative path with query, and body bytes.
pub fn fingerprint(caller: &str, method: &str, path_and_query: &str, body: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(caller.as_bytes());
    h.update(b"\n");
    h.update(method.as_bytes());
    h.update(b"\n");
    h.update(path_and_query.as_bytes());
    h.update(b"\n");
    h.update(body);
    crate::crypto::hex(&h.finalize())
}

/// The reservation's item and condition: free, expired, or in flight past its lease for this
/// same request (a crashed container).
pub(crate) fn reservation(
    ws: &crate::ids::WorkspaceId,
    key: &str,
    fingerprint: String,
    lease_ms: i64,
) -> (Reservation, Item, &'static str, Vec<(&'static str, AttributeValue)>) {
    let pk = store::ws_pk(ws);
    let sk = crate::keys::IDEMPOTENCY.sk(&crate::crypto::sha256_hex(key.as_bytes()));
    let now_ms = crate::ids::now_ms();
    let owner = crate::ids::new_id("req");
    let item = Item::from([
        ("pk".into(), s(&pk)),
        ("sk".into(), s(&sk)),
        ("state".into(), s("in_flight")),
        ("fingerprint".into(), s(&fingerprint)),
        ("owner".into(), s(&owner)),
        ("lease_until".into(), n(now_ms.saturating_add(lease_ms))),
        ("started_ms".into(), n(now_ms)),
        ("expires_at".into(), n(now_ms / 1000 + RETENTION_SECS)),
    ]);
    // A crashed request that wrote something (`last_tx`) never frees its key for a second run;
    // a resumable one is taken over in place (`resume`), keeping when it started.
    let cond = "attribute_not_exists(pk) OR expires_at < :now_s \
                OR (#state = :in_flight AND lease_until < :now_ms AND fingerprint = :fp AND attribute_not_exists(last_tx) \
                    AND attribute_not_exists(resumable))";
    let values = vec![(":now_s", n(now_ms / 1000)), (":now_ms", n(now_ms)), (":in_flight", s("in_flight")), (":fp", s(&fingerprint))];
    (Reservation { pk, sk, fingerprint, owner, started_ms: now_ms, commits: Arc::default() }, item, cond, values)
}

pub async fn begin(db: &Db, ws: &crate::ids::WorkspaceId, key: &str, fingerprint: String, lease_ms: i64) -> Result<Begin, ApiError> {
    let (reservation, item, cond, values) = reservation(ws, key, fingerprint, lease_ms);
    let res = db
        .client
        .put_item()
        .table_name(&db.table)
        .set_item(Some(item))
        .condition_expression(cond)
        .expression_attribute_names("#state", "state")
        .set_expression_attribute_values(Some(values.into_iter().map(|(k, v)| (k.to_string(), v)).collect()))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .send()
        .await;
    match res {
        Ok(_) => Ok(Begin::Proceed(reservation)),
        Err(e) => match e.as_service_error() {
            Some(PutItemError::ConditionalCheckFailedException(c)) => {
                let old = c.item().cloned().unwrap_or_default();
                match resume(db, reservation, &old, lease_ms).await? {
                    Ok(r) => Ok(Begin::Proceed(r)),
                    Err(reservation) => refused(&old, &reservation.fingerprint),
                }
            }
            // The first request's transaction is writing its witness right now.
            Some(PutItemError::TransactionConflictException(_)) => Err(in_progress()),
            _ => Err(store::ddb_error(e)),
        },
    }
}

/// A paused resumable run of the same request (its lease over, no transaction of it applied):
/// taken over in place, keeping when it started, so the rerun derives the same ids. Answers
/// the reservation back when the old item is not one.
async fn resume(db: &Db, r: Reservation, old: &Item, lease_ms: i64) -> Result<Result<Reservation, Reservation>, ApiError> {
    let now_ms = crate::ids::now_ms();
    let resumable = matches!(old.get("resumable"), Some(AttributeValue::Bool(true)));
    let (Some(old_owner), Some(started_ms)) = (get_str(old, "owner"), get_i64(old, "started_ms")) else { return Ok(Err(r)) };
    if !resumable
        || get_str(old, "state") != Some("in_flight")
        || get_str(old, "fingerprint") != Some(r.fingerprint.as_str())
        || old.contains_key("last_tx")
        || get_i64(old, "lease_until").is_none_or(|t| t >= now_ms)
    {
        return Ok(Err(r));
    }
    let taken = db
        .update(r.pk.clone(), &r.sk, "SET #owner = :owner, lease_until = :lease")
        .when("#owner = :old AND lease_until < :now AND attribute_not_exists(last_tx)")
        .name("#owner", "owner")
        .value(":owner", s(&r.owner))
        .value(":lease", n(now_ms.saturating_add(lease_ms)))
        .value(":old", s(old_owner))
        .value(":now", n(now_ms))
        .apply()
        .await?;
    if taken.is_none() {
        return Err(in_progress());
    }
    tracing::info!("resuming a request whose Idempotency-Key run stopped part-way");
    Ok(Ok(Reservation { started_ms, ..r }))
}

/// An id for the running request that its rerun under the same `Idempotency-Key` derives
/// again (the key's start time, and 80 bits of a hash of the key and `salt`); None without a key.
pub fn derived_id(prefix: &str, salt: &str) -> Option<String> {
    let w = Witness::current()?;
    let mut h = Sha256::new();
    for part in [w.pk.as_str(), w.sk.as_str(), salt] {
        h.update(part.as_bytes());
        h.update(b"\n");
    }
    let digest = h.finalize();
    let mut random = [0u8; 16];
    random[6..].copy_from_slice(&digest[..10]);
    let ulid = ulid::Ulid::from_parts(w.started_ms.max(0) as u64, u128::from_be_bytes(random));
    Some(format!("{prefix}_{ulid}"))
}

/// Does the running request carry an `Idempotency-Key`?
pub fn keyed() -> bool {
    Witness::current().is_some()
}

/// Before writes that a rerun of the same request repeats harmlessly: the reservation is
/// marked resumable, so a failure pauses the key (its lease ends) instead of keeping it done,
/// and the client's retry with the same key runs again, deriving the same ids. Without a
/// key, nothing.
pub async fn before_resumable_writes(db: &Db) -> Result<(), ApiError> {
    match Witness::current() {
        Some(w) => w.before_resumable_writes(db).await,
        None => Ok(()),
    }
}

/// What a refused reservation means, from the item that refused it: same request and done ->
/// replay; in flight -> 409; a different request -> 422.
pub(crate) fn refused(old: &Item, fingerprint: &str) -> Result<Begin, ApiError> {
    if get_str(old, "fingerprint") != Some(fingerprint) {
        return Err(ApiError::new(
            ErrorCode::IdempotencyKeyReused,
            "this Idempotency-Key was already used for a different request (method, path, body or credential)",
        ));
    }
    if get_str(old, "state") == Some("done") && !old.contains_key("body") {
        // Completed, but its answer could not be kept: never run it a second time.
        return Err(ApiError::conflict(
            "the request with this Idempotency-Key was completed, but its response could not be kept for replay; read the result with GET",
        ));
    }
    let lease_over = get_i64(old, "lease_until").is_some_and(|t| t < crate::ids::now_ms());
    if lease_over && old.contains_key("last_tx") {
        // It wrote, then stopped before its end (a crashed container): running it again
        // could write twice.
        return Err(ApiError::conflict(
            "the request with this Idempotency-Key stopped after writing and may be partly applied; read the result with GET",
        ));
    }
    if get_str(old, "state") == Some("done") {
        let body = old.get("body").and_then(|b| b.as_b().ok()).map(|b| b.as_ref().to_vec()).unwrap_or_default();
        let status = get_i64(old, "status").unwrap_or(200) as u16;
        return Ok(Begin::Replay(StoredResponse { status, body }));
    }
    // The first request finishes within its budget (or its lease frees the key): say when to look again.
    Err(in_progress())
}

fn in_progress() -> ApiError {
    ApiError::conflict("a request with this Idempotency-Key is still in progress; retry later").with_header("retry-after", "1")
}

/// Before writes that no transaction holds (a batch of emails, written with BatchWriteItem
/// in parts of 25, some of which may land before a failure): in a request with an
/// `Idempotency-Key`, its reservation is marked as written first (`last_tx`, as a transaction
/// would), so from here a failure keeps the key (the retry is told the request may have
/// been applied and to read the result) and a crashed container's lease is never taken over.
/// Without a key, nothing.
pub async fn before_plain_writes(db: &Db) -> Result<(), ApiError> {
    match Witness::current() {
        Some(w) => w.before_plain_writes(db).await,
        None => Ok(()),
    }
}

/// Store the completed response for replay. A response too large to keep, or one whose
/// write fails, still leaves the key `done` (without a body): a retry then gets a 409 instead
/// of running the request again once the lease runs out.
pub async fn complete(db: &Db, r: &Reservation, status: u16, body: &[u8]) -> Result<(), ApiError> {
    if body.len() <= MAX_STORED_BODY && put_done(db, r, status, Some(body)).await.is_ok() {
        return Ok(());
    }
    if body.len() > MAX_STORED_BODY {
        tracing::warn!(bytes = body.len(), "idempotent response too large to keep; the key is marked done without it");
    }
    mark_done(db, r, status).await
}

/// The key done without an answer to replay (retried: a key left in flight could run again).
async fn mark_done(db: &Db, r: &Reservation, status: u16) -> Result<(), ApiError> {
    let mut last = Ok(());
    for wait_ms in [0, 100, 400, 1_000] {
        tokio::time::sleep(std::time::Duration::from_millis(wait_ms)).await;
        last = put_done(db, r, status, None).await;
        if last.is_ok() {
            break;
        }
    }
    last
}

async fn put_done(db: &Db, r: &Reservation, status: u16, body: Option<&[u8]>) -> Result<(), ApiError> {
    let mut put = db
        .client
        .put_item()
        .table_name(&db.table)
        .item("pk", s(&r.pk))
        .item("sk", s(&r.sk))
        .item("state", s("done"))
        .item("fingerprint", s(&r.fingerprint))
        .item("status", n(status as i64))
        .item("owner", s(&r.owner))
        .item("expires_at", n(chrono::Utc::now().timestamp() + RETENTION_SECS))
        // Never over another request's hold (this one outlived its lease).
        .condition_expression("#owner = :owner")
        .expression_attribute_names("#owner", "owner")
        .expression_attribute_values(":owner", s(&r.owner));
    if let Some(b) = body {
        put = put.item("body", AttributeValue::B(b.to_vec().into()));
    }
    match put.send().await {
        Ok(_) => Ok(()),
        Err(e) if e.as_service_error().is_some_and(|e| e.is_conditional_check_failed_exception()) => {
            tracing::warn!("the Idempotency-Key is another request's now; its answer is not kept");
            Ok(())
        }
        Err(e) => Err(store::ddb_error(e)),
    }
}

/// Forget the reservation after a 5xx, so the client's retry runs the request again, if
/// the request wrote nothing: none of its transactions is known applied, it began no writes
/// outside transactions, and the reservation shows no `last_tx` (a transaction whose answer
/// and read-back were lost may have landed). A request that wrote keeps its key, marked done
/// without an answer: its retry is told to read the result, never to write again. At most
/// once, as a committed write followed by a failed queue hand-off or a budget that ran out
/// cannot be told apart from a half-done request.
pub async fn release(db: &Db, r: &Reservation, status: u16) {
    use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
    let commits = r.commits.lock().await;
    if commits.wrote {
        return keep_done(db, r, status).await;
    }
    if commits.resumable {
        // Its writes are repeatable: the lease ends now, and the retry resumes the run.
        let paused = db
            .update(r.pk.clone(), &r.sk, "SET lease_until = :zero")
            .when("#owner = :owner AND attribute_not_exists(last_tx)")
            .name("#owner", "owner")
            .value(":zero", n(0))
            .value(":owner", s(&r.owner))
            .apply()
            .await;
        match paused {
            Ok(Some(_)) => {}
            Ok(None) => keep_done(db, r, status).await,
            Err(e) => tracing::warn!(error = %e, "could not pause a resumable Idempotency-Key; its lease will expire"),
        }
        return;
    }
    let delete = db
        .client
        .delete_item()
        .table_name(&db.table)
        .key("pk", s(&r.pk))
        .key("sk", s(&r.sk))
        .condition_expression("#owner = :owner AND attribute_not_exists(last_tx)")
        .expression_attribute_names("#owner", "owner")
        .expression_attribute_values(":owner", s(&r.owner))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
    let Err(e) = delete.send().await else { return };
    if let Some(DeleteItemError::ConditionalCheckFailedException(c)) = e.as_service_error() {
        // Still ours: a transaction this request saw fail landed after all.
        if c.item().and_then(|old| get_str(old, "owner")) == Some(&r.owner) {
            keep_done(db, r, status).await;
        }
        return;
    }
    // Held until the lease ends, and kept for good if a transaction landed (`last_tx`).
    tracing::warn!(error = %aws_sdk_dynamodb::error::DisplayErrorContext(e), "could not release idempotency key; its lease will expire");
}

async fn keep_done(db: &Db, r: &Reservation, status: u16) {
    tracing::warn!("the failed request wrote, or may have; its Idempotency-Key is kept, done without an answer");
    if let Err(e) = mark_done(db, r, status).await {
        tracing::warn!(error = %e, "could not mark the Idempotency-Key done; it stays held");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keys_hold_outlasts_the_request_budget() {
        let t = |request_ms, dependency_ms| crate::config::Timeouts { request_ms, dependency_ms };
        assert_eq!(lease_ms(&t(10_000, 5_000)), 30_000);
        assert_eq!(lease_ms(&t(25_000, 5_000)), 75_000);
        assert_eq!(lease_ms(&t(10_000, 25_000)), 60_000);
        assert_eq!(lease_ms(&t(u64::MAX, 1)), i64::MAX);
    }

    #[test]
    fn keys_are_validated() {
        assert!(validate_key("abc-123").is_ok());
        assert!(validate_key("").is_err());
        assert!(validate_key(&"x".repeat(256)).is_err());
        assert!(validate_key("tab\there").is_err());
    }

    #[test]
    fn fingerprint_separates_method_path_and_body() {
        let a = fingerprint("key:a", "POST", "/posts", b"{}");
        assert_eq!(a, fingerprint("key:a", "POST", "/posts", b"{}"));
        assert_ne!(a, fingerprint("key:b", "POST", "/posts", b"{}"));
        assert_ne!(a, fingerprint("key:a", "PATCH", "/posts", b"{}"));
        assert_ne!(a, fingerprint("key:a", "POST", "/posts?x=1", b"{}"));
        assert_ne!(a, fingerprint("key:a", "POST", "/posts", b"{ }"));
    }
}
