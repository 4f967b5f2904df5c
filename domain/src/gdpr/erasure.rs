//! Erasures (Art. 17): the worker runs every area's rule for the subject, in `rules()` order,
//! and keeps an audit record that names no one (the subject as a keyed hash, per-area counts,
//! who asked and why). The tombstone (the same hash) is written first, so nothing re-creates
//! or mails the address while, or after, it is erased.
//!
//! Idempotent and resumable: each rule finds only what is left, the job saves the next rule
//! after each one, and a run that dies is finished by the queue's next delivery. The subject
//! itself is kept sealed on the job only while it runs.

use super::jobs::{JobError, JobKind, JobStatus};
use super::{Cursor, ErasureId};
use crate::effects::{Authority, EraseSubject};
use crate::keys;
use crate::privacy::Subject;
use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::events::Event;
use shared::events::EventType;
use shared::ids::Timestamp;
use shared::outbox::{Tx, WorkQueue};
use shared::store::{self, Record, n, s, ws_pk};
use shared::{ApiError, ApiResult, App};
use std::collections::BTreeMap;
use utoipa::ToSchema;

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct Erasure {
    /// `ge_...`
    pub id: ErasureId,
    /// Always `gdpr_erasure`.
    pub object: String,
    pub status: JobStatus,
    /// HMAC-SHA256 of the address, keyed per workspace (the tombstone's value): lets an auditor
    /// who knows the address confirm it was erased, and names no one otherwise.
    pub subject_hash: String,
    pub reason: String,
    pub requested_by: String,
    /// Items erased or anonymised, per area.
    pub counts: BTreeMap<String, u64>,
    pub created_at: Timestamp,
    pub started_at: Option<Timestamp>,
    pub completed_at: Option<Timestamp>,
    pub error: Option<JobError>,
}

fn aad(ws: &WorkspaceId, id: &str) -> String {
    format!("{ws}/{id}/subject")
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateErasure {
    pub subject: super::SubjectRef,
    /// Why (kept on the audit record), e.g. `Art. 17 request received 2026-03-01`.
    #[schema(min_length = 1, max_length = 1000)]
    pub reason: String,
}

/// Validate an erasure request, find its subject, then ask `grant` for the effect on exactly
/// that subject (so a request that cannot succeed never asks a person to confirm it, and an
/// approval binds whom it erases), and start erasing (`begin`).
pub async fn request(grant: &shared::authority::Grant, app: &App, ws: &WorkspaceId, input: CreateErasure) -> ApiResult<Erasure> {
    let mut errs = shared::validate::Errors::new();
    errs.text("reason", &input.reason, 1, 1000);
    errs.finish()?;
    let subject = super::resolve(app, ws, &input.subject, "subject").await?;
    let reason = input.reason.trim();
    let auth = grant.authorize_value::<EraseSubject>(&super::Erasing { subject: super::Reach::of(&subject), reason: reason.into() })?;
    if auth.customer().is_some() {
        return Err(ApiError::internal("a customer's erasure goes through gdpr::erasure::erase_self"));
    }
    begin(app, ws, &subject, reason, &auth).await
}

/// The effect `EraseSubject` by the customer: the code from their inbox, spent once
/// (`portal::spend_erasure_code`), then the erasure as `POST /gdpr/erasures` starts it.
pub async fn erase_self(
    grant: &shared::authority::Grant,
    app: &App,
    ws: &WorkspaceId,
    session_token: &str,
    contact: &crate::contacts::Contact,
    code: &str,
) -> ApiResult<Erasure> {
    const REASON: &str = "requested by the customer in the portal, confirmed by a code sent to their address";
    let subject = super::subject_of(app, ws, contact).await?;
    let auth = grant.authorize_value::<EraseSubject>(&super::Erasing { subject: super::Reach::of(&subject), reason: REASON.into() })?;
    crate::portal::spend_erasure_code(&auth, app, session_token, contact, code).await?;
    begin(app, ws, &subject, REASON, &auth).await
}

/// Under the authority's guard on the objects the person approved (`Authority::guard`); when a
/// person approved exactly `subject` (`Authority::value_approved`), the run reaches nothing else.
async fn begin(app: &App, ws: &WorkspaceId, subject: &Subject, reason: &str, auth: &Authority<EraseSubject>) -> ApiResult<Erasure> {
    let secret = app.platform_secret().await?;
    let e = Erasure {
        id: ErasureId::generate(),
        object: "gdpr_erasure".into(),
        status: JobStatus::Pending,
        subject_hash: crate::privacy::tombstone_hash(&secret.tombstone_key, ws, &subject.email),
        reason: reason.into(),
        requested_by: auth.by().into(),
        counts: BTreeMap::new(),
        created_at: shared::ids::Timestamp::now(),
        started_at: None,
        completed_at: None,
        error: None,
    };
    let sealed = secret.seal(&aad(ws, &e.id), &serde_json::to_vec(subject).expect("serializes"));
    let record = Record::new(ws_pk(ws), keys::ERASURE.sk(&e.id), &e)?.attr("subject_sealed", s(sealed));
    auth.tx(&[])?
        .create(record.attr("approved_value", shared::store::Value::Bool(auth.value_approved())))
        .job(WorkQueue::Gdpr, &e.id, super::jobs::message(JobKind::Erasure, ws, &e.id))
        .commit(app)
        .await
        .map_err(|e| e.on_condition(|_| ApiError::conflict("the erasure exists, or what was approved changed")))?;
    Ok(e)
}

pub async fn load(app: &App, ws: &WorkspaceId, id: &ErasureId) -> ApiResult<Option<Erasure>> {
    app.db.get(&ws_pk(ws), &keys::ERASURE.sk(id)).await?.map(store::from_item).transpose()
}

/// Run (or resume) an erasure to the end.
pub async fn run(app: &App, ws: &WorkspaceId, id: &ErasureId) -> ApiResult<()> {
    let Some(item) = app.db.get(&ws_pk(ws), &keys::ERASURE.sk(id)).await? else { return Ok(()) };
    let mut e: Erasure = store::from_item(item.clone())?;
    if e.status.finished() {
        return Ok(());
    }
    let (_, stalled) = super::jobs::begin_run(app, ws, &keys::ERASURE.sk(id)).await?;
    let secret = app.platform_secret().await?;
    let sealed = store::get_str(&item, "subject_sealed").ok_or_else(|| ApiError::internal("a running erasure lacks its subject"))?;
    let mut subject: Subject = serde_json::from_slice(&secret.open(&aad(ws, id), sealed)?).map_err(|e| ApiError::internal(e))?;
    if stalled > super::jobs::MAX_RUNS {
        e.status = JobStatus::Failed;
        e.error = Some(JobError { code: "attempts_exhausted".into(), message: "the erasure failed repeatedly; start it again".into() });
        e.completed_at = Some(shared::ids::Timestamp::now());
        return finish(app, ws, &e, EventType::GdprErasureFailed, None).await;
    }
    // The contact as it is now: an address it moved to since the request is the subject's
    // too, and the one it left a former one (dropped below if another contact holds it). Not
    // for a subject a person approved as a value: a contact moved onto another address after
    // the approval would carry the erasure to someone nobody approved erasing.
    let approved = matches!(item.get("approved_value"), Some(shared::store::Value::Bool(true)));
    if !approved
        && let Some(id) = subject.contact_id.clone()
        && let Ok((c, _)) = crate::contacts::load(app, ws, &id).await
    {
        let now = super::subject_of(app, ws, &c).await?;
        let before: Vec<String> = subject.emails().map(String::from).collect();
        subject.email = now.email.clone();
        for e in now.former_emails.into_iter().chain(before) {
            if e != subject.email && !subject.former_emails.contains(&e) {
                subject.former_emails.push(e);
            }
        }
        for p in now.phones {
            if !subject.phones.contains(&p) {
                subject.phones.push(p);
            }
        }
        for n in now.names {
            if !subject.names.contains(&n) {
                subject.names.push(n);
            }
        }
    }
    // Tombstones first, for every address of the subject, so that nothing re-creates one or
    // moves a contact onto one meanwhile; then a former address another contact holds (it
    // took it since the erasure was asked for, before its tombstone) is theirs: its tombstone,
    // if this erasure wrote it, is lifted again.
    let mut tombs = vec![];
    for email in subject.emails() {
        let tomb = crate::privacy::tombstone_sk(app, ws, email).await?;
        let body = serde_json::json!({"object": "erasure_tombstone", "erasure_id": id, "created_at": e.created_at});
        tombs.push((email.to_string(), tomb.clone()));
        // An address erased before keeps its first tombstone.
        match Tx::new().put_if(Record::new(ws_pk(ws), tomb, &body)?.item, "attribute_not_exists(pk)", vec![]).commit(app).await {
            Ok(()) | Err(store::TxError::Condition(_)) => {}
            Err(store::TxError::Api(e)) => return Err(e),
        }
    }
    let before = subject.former_emails.clone();
    subject.drop_others_addresses(app, ws).await?;
    for (_, tomb) in tombs.iter().filter(|(e, _)| before.contains(e) && !subject.former_emails.contains(e)) {
        tracing::info!(erasure_id = %id, "a former address another contact holds keeps no tombstone");
        Tx::new().delete_if(ws_pk(ws), tomb.clone(), "erasure_id = :id", vec![(":id", s(id))]).commit(app).await.or_else(|e| match e {
            store::TxError::Condition(_) => Ok(()),
            store::TxError::Api(e) => Err(e),
        })?;
    }

    let rules = super::rules();
    let mut next = store::get_i64(&item, "next_rule").unwrap_or(0) as usize;
    while next < rules.len() {
        let rule = &rules[next];
        let children = super::children_of(rule);
        let mut cursor = Cursor::default();
        let mut count = 0u64;
        loop {
            let (items, more) = super::page(app, ws, rule, &subject, &cursor).await?;
            for item in items {
                for child in &children {
                    let keys = super::companion_keys(child, &item);
                    let found = if keys.is_empty() { vec![] } else { app.db.batch_get(&keys).await? };
                    for c in found {
                        super::erase_item(app, ws, child, c, &subject).await?;
                        *e.counts.entry(child.area.to_string()).or_default() += 1;
                    }
                }
                super::erase_item(app, ws, rule, item, &subject).await?;
                count += 1;
            }
            match more {
                Some(c) => cursor = c,
                None => break,
            }
        }
        *e.counts.entry(rule.area.to_string()).or_default() += count;
        next += 1;
        save(app, ws, id, next, &e.counts).await?;
    }
    // A workspace export made before (or while) this ran holds the subject: withdrawn.
    super::export::withdraw_workspace_exports(app, ws).await?;
    e.status = JobStatus::Completed;
    e.started_at = e.started_at.or_else(|| Some(shared::ids::Timestamp::now()));
    e.completed_at = Some(shared::ids::Timestamp::now());
    finish(app, ws, &e, EventType::GdprErasureCompleted, subject.contact_id.as_deref()).await
}

async fn save(app: &App, ws: &WorkspaceId, id: &ErasureId, next: usize, counts: &BTreeMap<String, u64>) -> ApiResult<()> {
    app.db
        .update(ws_pk(ws), keys::ERASURE.sk(id), "SET next_rule = :next, counts = :c, stalled = :zero")
        .when("attribute_exists(pk)")
        .value(":next", n(next as i64))
        .value(":zero", n(0))
        .value(":c", shared::store::Value::M(store::to_item(counts)?))
        .required()
        .await?;
    Ok(())
}

/// The final state, without the sealed subject, and its event (no personal data: the job, its
/// counts, and the erased contact's id so that integrations can erase their copies).
async fn finish(app: &App, ws: &WorkspaceId, e: &Erasure, event: EventType, contact_id: Option<&str>) -> ApiResult<()> {
    let update = super::set_all(ws_pk(ws), keys::ERASURE.sk(&e.id), store::to_item(e)?, &["subject_sealed"])
        .when("#status = :running")
        .name("#status", "status")
        .value(":running", s("running"));
    let ev = Event::new(
        ws,
        event,
        &serde_json::json!({"id": e.id, "object": "gdpr_erasure", "status": e.status, "contact_id": contact_id,
        "counts": e.counts, "completed_at": e.completed_at, "error": e.error}),
    );
    match Tx::new().update(update).event(ev).commit(app).await {
        Ok(()) | Err(store::TxError::Condition(_)) => Ok(()),
        Err(store::TxError::Api(e)) => Err(e),
    }
}

/// One page of the erasure audit records, newest first.
pub async fn list(app: &App, ws: &WorkspaceId, after: Option<String>, limit: usize) -> ApiResult<(Vec<Erasure>, Option<String>)> {
    shared::request::page(app, keys::ERASURES.query(ws, after, limit).descending()).await
}
