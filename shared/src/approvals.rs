//! Approval requests, the pipeline's side (docs/authority.md). When a restricted API key's
//! request reaches a confirmable effect without a token, the pipeline asks the [`Desk`] (the
//! domain's approval requests, installed by each function's `main`) to record the request with
//! a preview of what it will do, and names it in the 428. Once a person approved it, the same
//! request again (same key, method, path, body and Idempotency-Key) finds the approval through
//! one look-up item and consumes the confirmation the approval minted, with no token to carry:
//! the look-up is keyed by a hash of everything the approval binds, so no other request finds it.
//! A request not decided in time is announced as `approval.expired` by [`expire_due`], which the
//! dispatcher's minute sweep runs.

use crate::app::App;
use crate::auth::{Credential, Principal};
use crate::authority::Shown;
use crate::error::ApiError;
use crate::ids::{ApprovalRequestId, WorkspaceId};
use crate::keys::{APPROVAL_DUE, APPROVAL_LOOKUP, APPROVAL_REQUEST};
use crate::store::{Item, TxError, get_str, n, s, ws_pk};
use futures_util::future::BoxFuture;
use std::sync::OnceLock;

/// The request a person is asked to approve, as the pipeline saw it.
pub struct Asked<'a> {
    /// The capability the 428 names (the first the credential is restricted for).
    pub capability: &'static str,
    pub method: &'a str,
    /// From the root noun on (`/webhooks/wh_1`).
    pub path: &'a str,
    pub idempotency_key: &'a str,
    pub body: &'a [u8],
    /// Where the hosted pages are served (`crate::request::pages_origin`), for the page that
    /// shows the request to a person.
    pub origin: Option<&'a str>,
    /// The effect's value, when the effect is valued (`crate::authority::Valued`): what the
    /// person is shown whole and what the approval binds by digest.
    pub effect: Option<&'a Shown>,
}

/// The stored approval request the 428 names.
pub struct Requested {
    pub id: String,
    /// `pending`, `approved`, `denied`, `expired` or `stale`.
    pub state: String,
    /// The hosted page where a person sees and answers it.
    pub url: Option<String>,
}

/// Records approval requests (the domain's `approvals::DESK`).
pub trait Desk: Send + Sync {
    fn request<'a>(&'a self, app: &'a App, principal: &'a Principal, asked: Asked<'a>) -> BoxFuture<'a, Result<Requested, ApiError>>;
    /// An approved run whose value, built again, is not the one approved: the request turns
    /// `stale`, naming the fields that differ (JSON pointers into the value), and its look-up
    /// no longer leads to the spent confirmation. Answers the fields.
    fn changed<'a>(
        &'a self,
        app: &'a App,
        ws: &'a WorkspaceId,
        id: &'a ApprovalRequestId,
        now: &'a Shown,
    ) -> BoxFuture<'a, Result<Vec<String>, ApiError>>;
}

static DESK: OnceLock<&'static dyn Desk> = OnceLock::new();

/// Install the process's desk (each API function's `main` does, through `lambda::run_area`;
/// the local gateway does at start). Without one, a 428 names no approval request.
pub fn install(desk: &'static dyn Desk) {
    let _ = DESK.set(desk);
}

pub(crate) fn desk() -> Option<&'static dyn Desk> {
    DESK.get().copied()
}

/// The sort key of the look-up for one exact request of one key: everything an approval binds
/// is in the hash, so a request that differs in any of it finds nothing.
pub fn lookup_sk(key_id: &str, method: &str, path: &str, idempotency_key: &str, body_sha256: &str) -> String {
    let joined = [key_id, method, path, idempotency_key, body_sha256].join("\n");
    APPROVAL_LOOKUP.sk(&crate::crypto::sha256_hex(joined.as_bytes()))
}

/// What a look-up item says once a person approved: the confirmation to consume and the
/// approval request that minted it.
pub struct Approved {
    pub confirmation_id: String,
    pub approval_request_id: String,
}

/// The approval of this exact request, if a person gave one (one GetItem). Only API keys are
/// ever restricted, so only they have approvals.
pub(crate) async fn approved(app: &App, principal: &Principal, asked: &Asked<'_>) -> Result<Option<Approved>, ApiError> {
    let (Credential::ApiKey { key_id }, Some(ws)) = (&principal.credential, &principal.workspace_id) else { return Ok(None) };
    let body_sha256 = crate::crypto::sha256_hex(asked.body);
    let sk = lookup_sk(key_id, asked.method, asked.path, asked.idempotency_key, &body_sha256);
    let Some(item) = app.db.get(&ws_pk(ws), &sk).await? else { return Ok(None) };
    Ok(match (get_str(&item, "confirmation_id"), get_str(&item, "approval_request_id")) {
        (Some(c), Some(a)) => Some(Approved { confirmation_id: c.to_string(), approval_request_id: a.to_string() }),
        _ => None,
    })
}

/// A `428 CONFIRMATION_REQUIRED` with reason `missing` for a request with an Idempotency-Key:
/// recorded as an approval request (or the one already recorded for it), named in the answer's
/// `meta` (`approval_request_id`, `approval_state`, `approval_url`). A failure to record leaves the 428 as it was.
pub(crate) async fn annotate(app: &App, principal: &Principal, asked: Asked<'_>, mut e: ApiError) -> ApiError {
    let Some(desk) = desk() else { return e };
    match desk.request(app, principal, asked).await {
        Ok(r) => {
            if let Some(meta) = e.details.first_mut().and_then(|d| d.meta.as_mut()) {
                meta["approval_request_id"] = r.id.clone().into();
                meta["approval_state"] = r.state.clone().into();
                if let Some(url) = &r.url {
                    meta["approval_url"] = url.clone().into();
                }
            }
            e.message = match r.state.as_str() {
                "pending" => format!(
                    "this credential needs a person's approval for this write: approval request {} waits for them \
                     (GET /approval-requests/{}); send the same request with the same Idempotency-Key once it is approved",
                    r.id, r.id
                ),
                // Approved between this request's look-up and its effect: the next one runs.
                "approved" => format!("approval request {} was approved: send the same request again", r.id),
                state => format!("approval request {} for this write is {state}; a new Idempotency-Key asks again", r.id),
            };
            e
        }
        Err(err) => {
            tracing::warn!(error = %err, "could not record an approval request");
            e
        }
    }
}

/// A `428` with reason `stale` because the effect's value changed since a person approved it:
/// the approval request says so and the answer names the fields (`meta.fields`). A failure to
/// record leaves the 428 as it was.
pub(crate) async fn changed(app: &App, principal: &Principal, mut e: ApiError) -> ApiError {
    let (Some(desk), Some(ws), Some(now)) = (desk(), &principal.workspace_id, e.effect.take()) else { return e };
    let meta = e.details.first().and_then(|d| d.meta.as_ref());
    let Some(id) = meta.and_then(|m| m["approval_request_id"].as_str()).and_then(<ApprovalRequestId as crate::ids::PrefixedId>::parse)
    else {
        return e;
    };
    match desk.changed(app, ws, &id, &now).await {
        Ok(fields) => {
            if let Some(meta) = e.details.first_mut().and_then(|d| d.meta.as_mut()) {
                meta["fields"] = fields.clone().into();
                meta["effect_digest"] = now.digest.clone().into();
            }
            e.message = format!(
                "what this write would do changed after the person approved it ({}); nothing ran: approval request {} is stale, \
                 and a new Idempotency-Key asks again",
                fields.join(", "),
                id
            );
        }
        Err(err) => tracing::warn!(error = %err, "could not mark an approval request stale"),
    }
    e
}

/// Due entries are spread over this many partitions.
pub const DUE_SHARDS: u32 = 8;

/// The due entry of an approval request that expires at `expires_ms`.
pub fn due_key(ws: &WorkspaceId, id: &ApprovalRequestId, expires_ms: i64) -> (String, String) {
    let shard = crate::events::outbox_shard(id) % DUE_SHARDS;
    (APPROVAL_DUE.pk(&shard.to_string()), APPROVAL_DUE.sk((&format!("{expires_ms:013}"), ws, id)))
}

/// The due entry as written with its request (removed when the request is decided).
pub fn due_item(ws: &WorkspaceId, id: &ApprovalRequestId, expires_ms: i64) -> Item {
    let (pk, sk) = due_key(ws, id, expires_ms);
    Item::from([("pk".into(), s(pk)), ("sk".into(), s(sk)), ("workspace_id".into(), s(ws)), ("approval_request_id".into(), s(id))])
}

/// The attribute of an approval request holding its `approval.requested` event's body, which
/// `approval.expired` repeats with its new state.
pub const EVENT_ATTR: &str = "event";

/// Every approval request whose time ran out before `now_ms` without a decision becomes
/// `expired`, with the event `approval.expired`, in one transaction each (a decision that came
/// first wins: its entry is then stale and dropped). Answers how many expired.
pub async fn expire_due(app: &App, now_ms: i64, per_shard: usize) -> Result<usize, ApiError> {
    let upper = format!("{now_ms:013}#~");
    let mut expired = 0;
    for shard in 0..DUE_SHARDS {
        let pk = APPROVAL_DUE.pk(&shard.to_string());
        for due in app.db.query_between(&pk, "0", &upper, true, Some(per_shard)).await? {
            let (Some(sk), Some(ws), Some(id)) = (get_str(&due, "sk"), get_str(&due, "workspace_id"), get_str(&due, "approval_request_id"))
            else {
                continue;
            };
            let (ws, id) = (WorkspaceId::trusted(ws), ApprovalRequestId::trusted(id));
            let request_sk = APPROVAL_REQUEST.sk(&id);
            let request = app.db.get(&ws_pk(&ws), &request_sk).await?;
            let body =
                request.as_ref().and_then(|r| get_str(r, EVENT_ATTR)).and_then(|j| serde_json::from_str::<serde_json::Value>(j).ok());
            let Some(mut body) = body else {
                // Erased, or from before the event was kept: nothing to announce.
                app.db.delete(&pk, sk).await?;
                continue;
            };
            body["state"] = "expired".into();
            let expire = crate::store::Update::new(ws_pk(&ws), &request_sk, "SET approval_state = :expired")
                .when("approval_state = :pending AND expires_ms <= :now")
                .value(":expired", s("expired"))
                .value(":pending", s("pending"))
                .value(":now", n(now_ms));
            let tx = crate::outbox::Tx::new()
                .update(expire)
                .delete_if(pk.clone(), sk.to_string(), "", vec![])
                .event(crate::events::Event::new(&ws, crate::events::EventType::ApprovalExpired, &body));
            match tx.commit(app).await {
                Ok(()) => expired += 1,
                // Decided first: the entry is stale.
                Err(TxError::Condition(0)) => app.db.delete(&pk, sk).await?,
                Err(TxError::Condition(_)) => {}
                Err(TxError::Api(e)) => return Err(e),
            }
        }
    }
    if expired > 0 {
        tracing::info!(expired, "approval requests expired");
    }
    Ok(expired)
}
