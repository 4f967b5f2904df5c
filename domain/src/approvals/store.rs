//! Approval requests in the table: recording a request with its preview and bound versions,
//! the look-ups and list, approving (minting the confirmation), denying, marking stale, and
//! the erasure of a person's requests.

use super::{
    APPROVED_FOR_SECS, ApprovalRequest, ApprovalState, Changed, DenyApproval, Desk, Doc, EffectValue, EmailPreview, LIFETIME_SECS,
    MAX_DOC_BYTES, MAX_SHOWN_DEPTH, Preview, RETENTION_SECS, depth, event_body, page_url, redact,
};
use crate::capabilities::{self, Bound};
use crate::effects;
use crate::ids::{ApiKeyId, ApprovalRequestId, ConfirmationId};
use crate::keys::APPROVAL_REQUEST;
use capabilities::may_approve;
use futures_util::future::BoxFuture;
use shared::approvals::{Asked, Requested};
use shared::auth::{Credential, Principal, WorkspaceId};
use shared::authority::Shown;
use shared::confirmation::{BOUND_ATTR, BoundKey};
use shared::error::{ErrorCode, ErrorDetail};
use shared::events::EventType;
use shared::ids::Timestamp;
use shared::store::{Item, TxError, get_i64, get_str, n, s, ws_pk};
use shared::{ApiError, ApiResult, App};

impl shared::approvals::Desk for Desk {
    fn request<'a>(&'a self, app: &'a App, principal: &'a Principal, asked: Asked<'a>) -> BoxFuture<'a, ApiResult<Requested>> {
        Box::pin(request(app, principal, asked))
    }
    fn changed<'a>(
        &'a self,
        app: &'a App,
        ws: &'a WorkspaceId,
        id: &'a ApprovalRequestId,
        now: &'a Shown,
    ) -> BoxFuture<'a, ApiResult<Vec<String>>> {
        Box::pin(changed(app, ws, id, now))
    }
}

/// An approved run built another value than the one approved: name the fields that differ,
/// turn the request `stale` (its confirmation is spent; nothing ran) and point its look-up at
/// no confirmation, so the same request again reads the state instead of `used`.
async fn changed(app: &App, ws: &WorkspaceId, id: &ApprovalRequestId, now: &Shown) -> ApiResult<Vec<String>> {
    let item = load_item(app, ws, id).await?;
    let r = from_item(&item)?;
    let fields = match &r.effect_value {
        Some(approved) => shared::authority::differences(&approved.value, &now.value),
        None => vec!["/".into()],
    };
    let pk = ws_pk(ws);
    let lookup = shared::approvals::lookup_sk(&r.api_key_id, &r.method, &r.path, &r.idempotency_key, &r.body_sha256);
    let mark = shared::store::Update::new(&pk, APPROVAL_REQUEST.sk(id), "SET approval_state = :stale, changed_fields = :f")
        .when("approval_state = :approved")
        .value(":stale", s("stale"))
        .value(":approved", s("approved"))
        .value(":f", s(serde_json::to_string(&fields).map_err(|e| ApiError::internal(e.to_string()))?));
    let detach =
        shared::store::Update::new(&pk, &lookup, "REMOVE confirmation_id").when("approval_request_id = :apr").value(":apr", s(id.as_str()));
    let mut shown = r.clone();
    shown.state = ApprovalState::Stale;
    shown.changed_fields = fields.clone();
    let committed = shared::outbox::Tx::new()
        .update(mark)
        .update(detach)
        .event(shared::events::Event::new(ws, EventType::ApprovalStale, &event_body(&shown)))
        .commit(app)
        .await;
    match committed {
        // Marked by a run racing this one, or the look-up erased: the fields are still these.
        Ok(()) | Err(TxError::Condition(_)) => Ok(fields),
        Err(TxError::Api(e)) => Err(e),
    }
}

/// Record the approval request of a 428 (or answer the one recorded for this exact request),
/// with the address of its page.
async fn request(app: &App, principal: &Principal, asked: Asked<'_>) -> ApiResult<Requested> {
    let origin = asked.origin.map(String::from);
    let mut r = record(app, principal, asked).await?;
    if let (Some(origin), Some(ws)) = (origin, &principal.workspace_id) {
        let (w, _) = crate::workspaces::load(app, ws).await?;
        r.url = Some(page_url(&origin, &w.slug, &r.id));
    }
    Ok(r)
}

async fn record(app: &App, principal: &Principal, asked: Asked<'_>) -> ApiResult<Requested> {
    let (Credential::ApiKey { key_id }, Some(ws)) = (&principal.credential, &principal.workspace_id) else {
        return Err(ApiError::internal("only API keys are restricted"));
    };
    let body_sha256 = shared::crypto::sha256_hex(asked.body);
    let lookup = shared::approvals::lookup_sk(key_id, asked.method, asked.path, asked.idempotency_key, &body_sha256);
    let pk = ws_pk(ws);
    let mut replaces = None;
    if let Some(l) = app.db.get(&pk, &lookup).await? {
        let id = get_str(&l, "approval_request_id").unwrap_or_default().to_string();
        match app.db.get(&pk, &APPROVAL_REQUEST.sk(&ApprovalRequestId::trusted(&id))).await? {
            Some(item) if state_of(&item) != ApprovalState::Expired => {
                return Ok(Requested { id, state: state_of(&item).as_str().into(), url: None });
            }
            // Expired (or erased): this request asks again.
            _ => replaces = Some(id),
        }
    }
    // Ids never need escaping; an escaped one would name the object differently from the route
    // that decodes it, and bind nothing (as minting directly refuses).
    if asked.path.contains('%') {
        return Err(ApiError::validation("path", "percent-escaped paths are not approved; send the id as it is"));
    }
    let capability = capabilities::routes_of(asked.capability)
        .find(|c| c.method == asked.method && capabilities::path_fits(&c.path, asked.path))
        .ok_or_else(|| ApiError::internal("a 428 for a route the capability list does not hold"))?;
    let body: Option<serde_json::Value> = if asked.body.is_empty() { None } else { serde_json::from_slice(asked.body).ok() };
    let bound = capabilities::bind(app, ws, &capability.path, asked.path, body.as_ref()).await?;
    let info = capabilities::effect(&capability.capability)?;
    // A valued effect's preview is its value; the others' a rendering of the request.
    let (preview, effect) = match asked.effect {
        Some(shown) => {
            (of_value(info, asked.path, shown, &bound), Some(EffectValue { digest: shown.digest.clone(), value: shown.value.clone() }))
        }
        None => (Box::pin(preview(app, ws, info, &capability.path, asked.path, body.as_ref(), &bound)).await, None),
    };
    let now = chrono::Utc::now();
    let expires = now + chrono::Duration::seconds(LIFETIME_SECS);
    let id = ApprovalRequestId::generate();
    let doc = Doc {
        capability: capability.capability.clone(),
        method: asked.method.to_string(),
        path: asked.path.to_string(),
        idempotency_key: asked.idempotency_key.to_string(),
        body_sha256,
        api_key_id: key_id.clone(),
        preview,
        effect,
        bound: bound.iter().map(|(b, _)| b.clone()).collect(),
        created_at: now.into(),
        expires_at: expires.into(),
    };
    let doc_json = serde_json::to_string(&doc).map_err(|e| ApiError::internal(e.to_string()))?;
    if doc_json.len() > MAX_DOC_BYTES {
        // No approval request can hold it, so no person can approve it: the request is refused.
        return Err(ApiError::validation(
            "body",
            format!("what this request would do is too large for a person to review (at most {} KB); send less", MAX_DOC_BYTES / 1000),
        ));
    }
    let keys: Vec<BoundKey> =
        bound.iter().map(|(b, sk)| BoundKey { object: b.object.clone(), id: b.id.clone(), sk: sk.clone(), version: b.version }).collect();
    let item = Item::from([
        ("pk".into(), s(&pk)),
        ("sk".into(), s(APPROVAL_REQUEST.sk(&id))),
        ("id".into(), s(id.as_str())),
        ("doc".into(), s(doc_json)),
        ("approval_state".into(), s("pending")),
        ("expires_ms".into(), n(expires.timestamp_millis())),
        (BOUND_ATTR.into(), s(serde_json::to_string(&keys).map_err(|e| ApiError::internal(e.to_string()))?)),
        ("expires_at".into(), n(expires.timestamp() + RETENTION_SECS)),
    ]);
    let lookup_item = Item::from([
        ("pk".into(), s(&pk)),
        ("sk".into(), s(&lookup)),
        ("approval_request_id".into(), s(id.as_str())),
        ("expires_at".into(), n(expires.timestamp() + APPROVED_FOR_SECS)),
    ]);
    let (cond, vals) = match &replaces {
        Some(old) => ("approval_request_id = :old", vec![(":old", s(old))]),
        None => ("attribute_not_exists(pk)", vec![]),
    };
    let shown = to_object(&id, &doc, &Item::new());
    let announced = event_body(&shown);
    let mut item = item;
    item.insert(shared::approvals::EVENT_ATTR.into(), s(announced.to_string()));
    let committed = shared::outbox::Tx::new()
        .put_if(item, "attribute_not_exists(pk)", vec![])
        .put_if(lookup_item, cond, vals)
        // Announced as `approval.expired` if nobody decides in time (`shared::approvals::expire_due`).
        .put(shared::approvals::due_item(ws, &id, expires.timestamp_millis()))
        .event(shared::events::Event::new(ws, EventType::ApprovalRequested, &announced))
        .commit(app)
        .await;
    match committed {
        Ok(()) => Ok(Requested { id: id.to_string(), state: "pending".into(), url: None }),
        // The same request asked at the same moment: the other one's request is this one's.
        Err(TxError::Condition(1)) => {
            let l = app.db.get(&pk, &lookup).await?.ok_or_else(|| ApiError::conflict("retry"))?;
            Ok(Requested { id: get_str(&l, "approval_request_id").unwrap_or_default().into(), state: "pending".into(), url: None })
        }
        Err(e) => Err(e.stale()),
    }
}

/// The preview of a valued effect: its value (the messages of an email, as SES will get them),
/// and the line a notification shows.
fn of_value(info: &effects::EffectInfo, path: &str, shown: &Shown, bound: &[(Bound, String)]) -> Preview {
    let mut out = Preview::default();
    if let Some(messages) = shown.value.get("messages").and_then(|m| m.as_array()) {
        out.emails = messages.iter().filter_map(|m| serde_json::from_value::<EmailPreview>(m.clone()).ok()).collect();
    }
    summarise(&mut out, info, path, bound);
    out
}

/// The preview of an unvalued effect (or a notice, docs/authority.md): the request's body
/// (secrets hidden), a staff reply's email as the reply would send it, and the summary line.
async fn preview(
    app: &App,
    ws: &WorkspaceId,
    info: &effects::EffectInfo,
    pattern: &str,
    path: &str,
    body: Option<&serde_json::Value>,
    bound: &[(Bound, String)],
) -> Preview {
    // A body deeper than a person reads is shown as its text, so reading the request back
    // never meets serde's depth limit.
    let mut out = Preview::default();
    match body {
        Some(b) if depth(b) > MAX_SHOWN_DEPTH => out.problems.push("the request's body is nested too deeply to show".into()),
        Some(b) if b.is_object() => out.request = Some(redact(b)),
        _ => {}
    }
    // A staff reply in a conversation: the email as the reply would send it.
    let reply = match (pattern, body) {
        ("/helpdesk/conversations/{id}/messages", Some(b)) if b.get("type").and_then(|t| t.as_str()) == Some("reply") => {
            let id = path.split('/').nth(3).and_then(<crate::ids::ConversationId as shared::ids::PrefixedId>::parse);
            match (id, serde_json::from_value::<crate::helpdesk::ops::AddMessage>(b.clone())) {
                (Some(id), Ok(input)) => Some(Box::pin(crate::helpdesk::ops::preview_reply(app, ws, &id, input)).await),
                (_, Err(err)) => Some(Err(ApiError::validation("body", err.to_string()))),
                (None, _) => None,
            }
        }
        _ => None,
    };
    for (i, built) in reply.into_iter().enumerate() {
        match built {
            Ok(e) => out.emails.push(EmailPreview {
                from: e.from,
                to: e.to,
                cc: e.cc,
                bcc: e.bcc,
                reply_to: e.reply_to,
                subject: e.subject,
                html: e.html,
                text: e.text,
            }),
            Err(err) => {
                let why =
                    err.details.iter().map(|d| format!("{}: {}", d.field.as_deref().unwrap_or("body"), d.message)).collect::<Vec<_>>();
                out.problems.push(format!("email {i}: {} {}", err.message, why.join("; ")));
            }
        }
    }
    summarise(&mut out, info, path, bound);
    out
}

/// The one line a notification shows: what happens, to whom.
fn summarise(out: &mut Preview, info: &effects::EffectInfo, path: &str, bound: &[(Bound, String)]) {
    let whom: Vec<String> = out.emails.iter().flat_map(|e| e.to.iter().chain(&e.cc).chain(&e.bcc).cloned()).collect();
    let objects: Vec<String> =
        bound.iter().filter(|(b, _)| b.version > 0).map(|(b, _)| format!("{} {} ({})", b.object, b.id, b.preview)).collect();
    out.summary = match out.emails.as_slice() {
        [one] => format!("{}: \u{201c}{}\u{201d} from {} to {}", info.summary, one.subject, one.from, whom.join(", ")),
        [] if objects.is_empty() => format!("{} ({path})", info.summary),
        [] => format!("{}: {}", info.summary, objects.join("; ")),
        many => format!("{}: {} emails to {} recipients", info.summary, many.len(), whom.len()),
    };
    out.summary = out.summary.chars().take(500).collect();
}

fn state_of(item: &Item) -> ApprovalState {
    ApprovalState::at(get_str(item, "approval_state"), get_i64(item, "expires_ms").unwrap_or(0), shared::ids::now_ms())
}

fn to_object(id: &ApprovalRequestId, d: &Doc, item: &Item) -> ApprovalRequest {
    let info = capabilities::effect(&d.capability).ok();
    ApprovalRequest {
        id: id.clone(),
        object: "approval_request".into(),
        state: if item.is_empty() { ApprovalState::Pending } else { state_of(item) },
        capability: d.capability.clone(),
        effect: info.map(|i| i.summary.to_string()).unwrap_or_default(),
        approver_needs: info.map(|i| i.needs.name().to_string()).unwrap_or_default(),
        method: d.method.clone(),
        path: d.path.clone(),
        idempotency_key: d.idempotency_key.clone(),
        body_sha256: d.body_sha256.clone(),
        api_key_id: ApiKeyId::trusted(d.api_key_id.clone()),
        preview: d.preview.clone(),
        effect_value: d.effect.clone(),
        bound: d.bound.clone(),
        changed: get_str(item, "changed").and_then(|j| serde_json::from_str(j).ok()).unwrap_or_default(),
        changed_fields: get_str(item, "changed_fields").and_then(|j| serde_json::from_str(j).ok()).unwrap_or_default(),
        created_at: d.created_at,
        expires_at: d.expires_at,
        decided_at: get_str(item, "decided_at").and_then(Timestamp::parse),
        decided_by: get_str(item, "decided_by").map(String::from),
        reason: get_str(item, "reason").map(String::from),
        confirmation_id: get_str(item, "confirmation_id").map(ConfirmationId::trusted),
    }
}

pub fn from_item(item: &Item) -> ApiResult<ApprovalRequest> {
    let id = get_str(item, "id").ok_or_else(|| ApiError::internal("approval request item without id"))?;
    // An erasure removes what the request showed; what is left reads as empty.
    let doc: Doc = match get_str(item, "doc") {
        Some(j) => serde_json::from_str(j).map_err(|e| ApiError::internal(format!("approval request doc: {e}")))?,
        None => return Err(ApiError::not_found("approval request")),
    };
    Ok(to_object(&ApprovalRequestId::trusted(id), &doc, item))
}

async fn load_item(app: &App, ws: &WorkspaceId, id: &ApprovalRequestId) -> ApiResult<Item> {
    app.db.get(&ws_pk(ws), &APPROVAL_REQUEST.sk(id)).await?.ok_or_else(|| ApiError::not_found("approval request"))
}

/// An erasure of someone an approval request names: the request and its look-up go, so its
/// approval (if any) can never run, and the agent's same request asks anew.
pub async fn erase(app: &App, ws: &WorkspaceId, item: Item) -> ApiResult<()> {
    let pk = ws_pk(ws);
    if let Some(d) = get_str(&item, "doc").and_then(|j| serde_json::from_str::<Doc>(j).ok()) {
        let lookup = shared::approvals::lookup_sk(&d.api_key_id, &d.method, &d.path, &d.idempotency_key, &d.body_sha256);
        app.db.delete(&pk, &lookup).await?;
    }
    if let Some(sk) = get_str(&item, "sk") {
        app.db.delete(&pk, sk).await?;
    }
    Ok(())
}

pub async fn load(app: &App, ws: &WorkspaceId, id: &ApprovalRequestId) -> ApiResult<ApprovalRequest> {
    from_item(&load_item(app, ws, id).await?)
}

/// Newest first, optionally in one state; the page and its next key.
pub async fn list(
    app: &App,
    ws: &WorkspaceId,
    state: Option<ApprovalState>,
    after: Option<String>,
    limit: usize,
) -> ApiResult<(Vec<ApprovalRequest>, Option<String>)> {
    let now = shared::ids::now_ms();
    let spec = crate::keys::APPROVAL_REQUESTS.query(ws, after, limit).descending();
    let spec = match state {
        None => spec,
        Some(ApprovalState::Pending) => {
            spec.filter("approval_state = :s AND expires_ms > :now", vec![(":s", s("pending")), (":now", n(now))])
        }
        Some(ApprovalState::Expired) => spec.filter(
            "approval_state = :e OR (approval_state = :s AND expires_ms <= :now)",
            vec![(":e", s("expired")), (":s", s("pending")), (":now", n(now))],
        ),
        Some(other) => spec.filter("approval_state = :s", vec![(":s", s(other.as_str()))]),
    };
    let out = app.db.query_page(spec).await?;
    // One unreadable item (none should be) costs its row, not the page.
    let items = out
        .items
        .iter()
        .filter(|i| get_str(i, "doc").is_some())
        .filter_map(|i| from_item(i).inspect_err(|e| tracing::error!(error = %e, "unreadable approval request")).ok())
        .collect();
    Ok((items, out.next_after))
}

/// A person approves: the confirmation is minted bound to the versions recorded when the request
/// was asked, in one transaction that checks they are still current (else the request turns
/// `stale`, naming what changed, and nothing is minted). Two approvers at once mint one.
/// Events `approval.approved`, `capability.confirmed`.
pub async fn approve(app: &App, ws: &WorkspaceId, p: &Principal, id: &ApprovalRequestId) -> ApiResult<ApprovalRequest> {
    let item = load_item(app, ws, id).await?;
    let r = from_item(&item)?;
    may_approve(p, &r.capability, app.cfg.oauth.as_ref(), chrono::Utc::now().timestamp())?;
    if r.state != ApprovalState::Pending {
        return Err(ApiError::conflict(format!("the approval request is {}", r.state.as_str())));
    }
    let keys: Vec<BoundKey> = get_str(&item, BOUND_ATTR).and_then(|j| serde_json::from_str(j).ok()).unwrap_or_default();
    let pk = ws_pk(ws);
    let now = chrono::Utc::now();
    let cc_id = ConfirmationId::generate();
    // The confirmation has a token nobody is shown: only this approval's look-up uses it.
    let (_, token_hash) = shared::confirmation::new_token(cc_id.as_str());
    let token_expires = now + chrono::Duration::seconds(APPROVED_FOR_SECS);
    let c = capabilities::Confirmation {
        id: cc_id.clone(),
        object: "capability_confirmation".into(),
        capability: r.capability.clone(),
        method: r.method.clone(),
        path: r.path.clone(),
        idempotency_key: r.idempotency_key.clone(),
        body_sha256: r.body_sha256.clone(),
        preview_summary: r.preview.summary.clone(),
        approved_by: p.subject.clone(),
        confirmed_by: p.subject.clone(),
        api_key_id: r.api_key_id.clone(),
        status: capabilities::ConfirmationStatus::Issued,
        created_at: now.into(),
        expires_at: token_expires.into(),
        used_at: None,
        used_by_request_id: None,
        confirmation_token: None,
        bound: r.bound.clone(),
        effect_digest: r.effect_value.as_ref().map(|e| e.digest.clone()),
    };
    let bound: Vec<(Bound, String)> = r.bound.iter().cloned().zip(keys.iter().map(|k| k.sk.clone())).collect();
    let mut confirmation = capabilities::item(ws, &c, &bound, &token_hash, token_expires.timestamp_millis());
    confirmation.insert("approval_request_id".into(), s(id.as_str()));
    let at = Timestamp::from(now).to_string();
    let decide = shared::store::Update::new(
        &pk,
        APPROVAL_REQUEST.sk(id),
        "SET approval_state = :approved, decided_at = :at, decided_by = :by, confirmation_id = :cc",
    )
    .when("approval_state = :pending AND expires_ms > :now")
    .value(":approved", s("approved"))
    .value(":pending", s("pending"))
    .value(":at", s(&at))
    .value(":by", s(&p.subject))
    .value(":cc", s(cc_id.as_str()))
    .value(":now", n(now.timestamp_millis()));
    let lookup = shared::approvals::lookup_sk(&r.api_key_id, &r.method, &r.path, &r.idempotency_key, &r.body_sha256);
    let point = shared::store::Update::new(&pk, &lookup, "SET confirmation_id = :cc")
        .when("approval_request_id = :apr")
        .value(":cc", s(cc_id.as_str()))
        .value(":apr", s(id.as_str()));
    let mut tx = shared::outbox::Tx::new().update(decide).put_if(confirmation, "attribute_not_exists(pk)", vec![]).update(point);
    for k in &keys {
        tx = k.still_in(tx, &pk);
    }
    let approved = ApprovalRequest {
        state: ApprovalState::Approved,
        decided_at: Some(now.into()),
        decided_by: Some(p.subject.clone()),
        confirmation_id: Some(cc_id.clone()),
        ..r.clone()
    };
    let (due_pk, due_sk) = shared::approvals::due_key(ws, id, get_i64(&item, "expires_ms").unwrap_or(0));
    let committed = tx
        .delete_if(due_pk, due_sk, "", vec![])
        .event(shared::events::Event::new(ws, EventType::ApprovalApproved, &event_body(&approved)))
        .event(shared::events::Event::new(ws, EventType::CapabilityConfirmed, &c))
        .commit(app)
        .await;
    match committed {
        Ok(()) => Ok(approved),
        Err(TxError::Condition(0)) => {
            let now = from_item(&load_item(app, ws, id).await?)?;
            Err(ApiError::conflict(format!("the approval request is {}", now.state.as_str())))
        }
        // The request's look-up is gone (an erasure): nothing could use the approval.
        Err(TxError::Condition(1 | 2)) => Err(ApiError::conflict("the approval request can no longer be used; the agent asks again")),
        Err(TxError::Condition(_)) => Err(mark_stale(app, ws, id, &keys).await),
        Err(e) => Err(e.stale()),
    }
}

/// Record what changed since the request was asked (every bound object read again), turn the
/// request `stale`, and answer why the approval was refused.
async fn mark_stale(app: &App, ws: &WorkspaceId, id: &ApprovalRequestId, keys: &[BoundKey]) -> ApiError {
    let pk = ws_pk(ws);
    let read = app.db.batch_get(&keys.iter().map(|k| (pk.clone(), k.sk.clone())).collect::<Vec<_>>()).await;
    let Ok(items) = read else { return ApiError::conflict("something this request depends on changed; the agent asks again") };
    let version_of =
        |sk: &str| items.iter().find(|i| get_str(i, "sk") == Some(sk)).map(|i| get_i64(i, "version").unwrap_or(0).max(1)).unwrap_or(0);
    let changed: Vec<Changed> =
        keys.iter().filter(|k| version_of(&k.sk) != k.version).map(|k| Changed { object: k.object.clone(), id: k.id.clone() }).collect();
    let marked = app
        .db
        .update(pk, APPROVAL_REQUEST.sk(id), "SET approval_state = :stale, changed = :changed")
        .when("approval_state = :pending")
        .value(":stale", s("stale"))
        .value(":pending", s("pending"))
        .value(":changed", s(serde_json::to_string(&changed).unwrap_or_default()))
        .apply()
        .await;
    if let Err(e) = marked {
        tracing::warn!(error = %e, "could not mark an approval request stale");
    }
    let what = changed.iter().map(|c| format!("{} {}", c.object, c.id)).collect::<Vec<_>>().join(", ");
    ApiError::new(ErrorCode::Conflict, format!("what this request depends on changed since it was asked ({what}); the agent asks again"))
        .with_details(vec![ErrorDetail {
            field: None,
            message: "stale".into(),
            meta: Some(serde_json::json!({"reason": "stale", "changed": changed})),
        }])
}

/// A person denies: the request never runs. Event `approval.denied`.
pub async fn deny(app: &App, ws: &WorkspaceId, p: &Principal, id: &ApprovalRequestId, input: DenyApproval) -> ApiResult<ApprovalRequest> {
    let mut errs = shared::validate::Errors::new();
    errs.text("reason", &input.reason, 1, 500);
    errs.finish()?;
    let item = load_item(app, ws, id).await?;
    let r = from_item(&item)?;
    may_approve(p, &r.capability, app.cfg.oauth.as_ref(), chrono::Utc::now().timestamp())?;
    if r.state != ApprovalState::Pending {
        return Err(ApiError::conflict(format!("the approval request is {}", r.state.as_str())));
    }
    let (due_pk, due_sk) = shared::approvals::due_key(ws, id, get_i64(&item, "expires_ms").unwrap_or(0));
    let now = chrono::Utc::now();
    let denied = ApprovalRequest {
        state: ApprovalState::Denied,
        decided_at: Some(now.into()),
        decided_by: Some(p.subject.clone()),
        reason: Some(input.reason.trim().to_string()),
        ..r
    };
    let decide = shared::store::Update::new(
        ws_pk(ws),
        APPROVAL_REQUEST.sk(id),
        "SET approval_state = :denied, decided_at = :at, decided_by = :by, reason = :why",
    )
    .when("approval_state = :pending AND expires_ms > :now")
    .value(":denied", s("denied"))
    .value(":pending", s("pending"))
    .value(":at", s(Timestamp::from(now).to_string()))
    .value(":by", s(&p.subject))
    .value(":why", s(denied.reason.clone().unwrap_or_default()))
    .value(":now", n(now.timestamp_millis()));
    shared::outbox::Tx::new()
        .update(decide)
        .delete_if(due_pk, due_sk, "", vec![])
        .event(shared::events::Event::new(ws, EventType::ApprovalDenied, &event_body(&denied)))
        .commit(app)
        .await
        .map_err(|e| e.on_condition(|_| ApiError::conflict("the approval request was decided or expired meanwhile")))?;
    Ok(denied)
}
