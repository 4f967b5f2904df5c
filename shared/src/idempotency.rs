//! `Idempotency-Key` for writes. One item per workspace + key (`sk = IDEM#<sha256(key)>`),
//! reserved with a conditional PutItem before the handler runs and filled with the response
//! after it. A refused reservation returns the old item (ALL_OLD), which decides in the same
//! round trip: same request and done -> replay; in flight -> 409; different request -> 422.
//! An in-flight reservation carries a short lease so a crashed container cannot block the key.

use crate::error::{ApiError, ErrorCode, ErrorDetail};
use crate::store::{self, Db, Item, get_i64, get_str, n, s};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use sha2::{Digest, Sha256};

const RETENTION_SECS: i64 = 24 * 3600;
/// Responses up to this size are kept for replay; DynamoDB items hold at most 400 KB.
const MAX_STORED_BODY: usize = 300 * 1024;
const LEASE_MS: i64 = 30_000;

pub struct Reservation {
    pk: String,
    sk: String,
    fingerprint: String,
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
}

pub struct StoredResponse {
    pub status: u16,
    pub body: Vec<u8>,
}

pub enum Begin<R = Reservation> {
    Proceed(R),
    Replay(StoredResponse),
}

pub fn validate_key(key: &str) -> Result<(), ApiError> {
    if key.is_empty() || key.len() > 255 || !key.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(ApiError::new(ErrorCode::ValidationError, "Idempotency-Key must be 1 to 255 printable ASCII characters")
            .with_details(vec![ErrorDetail::field("Idempotency-Key", "must be 1 to 255 printable ASCII characters")]));
    }
    Ok(())
}

/// Identifies "the same request": method, route-relative path with query, and body bytes.
pub fn fingerprint(method: &str, path_and_query: &str, body: &[u8]) -> String {
    let mut h = Sha256::new();
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
    ws: &str,
    key: &str,
    fingerprint: String,
) -> (Reservation, Item, &'static str, Vec<(&'static str, AttributeValue)>) {
    let pk = store::ws_pk(ws);
    let sk = crate::keys::IDEMPOTENCY.sk(&[&crate::crypto::sha256_hex(key.as_bytes())]);
    let now_ms = crate::ids::now_ms();
    let item = Item::from([
        ("pk".into(), s(&pk)),
        ("sk".into(), s(&sk)),
        ("state".into(), s("in_flight")),
        ("fingerprint".into(), s(&fingerprint)),
        ("lease_until".into(), n(now_ms + LEASE_MS)),
        ("expires_at".into(), n(now_ms / 1000 + RETENTION_SECS)),
    ]);
    let cond = "attribute_not_exists(pk) OR expires_at < :now_s OR (#state = :in_flight AND lease_until < :now_ms AND fingerprint = :fp)";
    let values = vec![(":now_s", n(now_ms / 1000)), (":now_ms", n(now_ms)), (":in_flight", s("in_flight")), (":fp", s(&fingerprint))];
    (Reservation { pk, sk, fingerprint }, item, cond, values)
}

pub async fn begin(db: &Db, ws: &str, key: &str, fingerprint: String) -> Result<Begin, ApiError> {
    let (reservation, item, cond, values) = reservation(ws, key, fingerprint);
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
                refused(&c.item().cloned().unwrap_or_default(), &reservation.fingerprint)
            }
            _ => Err(store::ddb_error(e)),
        },
    }
}

/// What a refused reservation means, from the item that refused it: same request and done ->
/// replay; in flight -> 409; a different request -> 422.
pub(crate) fn refused(old: &Item, fingerprint: &str) -> Result<Begin, ApiError> {
    if get_str(old, "fingerprint") != Some(fingerprint) {
        return Err(ApiError::new(
            ErrorCode::IdempotencyKeyReused,
            "this Idempotency-Key was already used for a different request (method, path or body)",
        ));
    }
    if get_str(old, "state") == Some("done") && !old.contains_key("body") {
        // Completed, but its answer could not be kept: never run it a second time.
        return Err(ApiError::conflict(
            "the request with this Idempotency-Key was completed, but its response could not be kept for replay; read the result with GET",
        ));
    }
    if get_str(old, "state") == Some("done") {
        let body = old.get("body").and_then(|b| b.as_b().ok()).map(|b| b.as_ref().to_vec()).unwrap_or_default();
        let status = get_i64(old, "status").unwrap_or(200) as u16;
        return Ok(Begin::Replay(StoredResponse { status, body }));
    }
    // The first request finishes within its budget (or its lease frees the key): say when to look again.
    Err(ApiError::conflict("a request with this Idempotency-Key is still in progress; retry later").with_header("retry-after", "1"))
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
        .item("expires_at", n(chrono::Utc::now().timestamp() + RETENTION_SECS));
    if let Some(b) = body {
        put = put.item("body", AttributeValue::B(b.to_vec().into()));
    }
    put.send().await.map_err(store::ddb_error)?;
    Ok(())
}

/// Forget the reservation (the request failed with a 5xx and may be retried with the same key).
pub async fn release(db: &Db, r: &Reservation) {
    let res = db.client.delete_item().table_name(&db.table).key("pk", s(&r.pk)).key("sk", s(&r.sk)).send().await;
    if let Err(e) = res {
        tracing::warn!(error = %aws_sdk_dynamodb::error::DisplayErrorContext(e), "could not release idempotency key; its lease will expire");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_validated() {
        assert!(validate_key("abc-123").is_ok());
        assert!(validate_key("").is_err());
        assert!(validate_key(&"x".repeat(256)).is_err());
        assert!(validate_key("tab\there").is_err());
    }

    #[test]
    fn fingerprint_separates_method_path_and_body() {
        let a = fingerprint("POST", "/posts", b"{}");
        assert_eq!(a, fingerprint("POST", "/posts", b"{}"));
        assert_ne!(a, fingerprint("PATCH", "/posts", b"{}"));
        assert_ne!(a, fingerprint("POST", "/posts?x=1", b"{}"));
        assert_ne!(a, fingerprint("POST", "/posts", b"{ }"));
    }
}
