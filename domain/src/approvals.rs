//! Approval requests: a restricted API key's write that reached a confirmable effect without a
//! person's approval is stored with a preview of everything it will do, rendered when it was
//! asked (every recipient, the subject and the bodies as SES will get them, the object it
//! changes), and the version of every object the effect depends on then, whatever the request
//! named it in. A person who may cause the effect themselves approves or denies it; approving
//! mints the confirmation bound to those versions, and the same request again (same key, path,
//! body and Idempotency-Key) runs once on it (`shared::approvals` finds it). docs/authority.md.
//!
//! Items (pk = WS#<workspace>): `APPROVAL#<apr id>` (the request: `doc` holds what was asked and
//! shown, the other attributes its decision), `APRKEY#<hash>` (the look-up of one exact
//! request, `shared::keys::APPROVAL_LOOKUP`).

use crate::capabilities::{self, Bound};
use crate::effects;
use crate::ids::{ApiKeyId, ConfirmationId};
use crate::keys::APPROVAL_REQUEST;
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use shared::approvals::{Asked, Requested};
use shared::auth::{Credential, Principal, WorkspaceId};
use shared::confirmation::{BOUND_ATTR, BoundKey};
use shared::error::{ErrorCode, ErrorDetail};
use shared::events::EventType;
use shared::ids::Timestamp;
use shared::store::{Item, TxError, get_i64, get_str, n, s, ws_pk};
use shared::{ApiError, ApiResult, App};
use utoipa::ToSchema;

pub use crate::ids::ApprovalRequestId;

/// A request waits this long for a person.
pub const LIFETIME_SECS: i64 = 24 * 3600;
/// Once approved, the request must be sent again within this time.
pub const APPROVED_FOR_SECS: i64 = 3600;
/// A request whose stored preview would pass this is not recorded (an item holds 400 KB); the
/// 428 still names what to confirm, for an app that mints directly.
const MAX_DOC_BYTES: usize = 300 * 1024;
/// Kept for the audit, as confirmations are.
const RETENTION_SECS: i64 = capabilities::AUDIT_RETENTION_SECS;

/// The process's desk: what `shared::approvals` asks to record a 428's approval request.
pub static DESK: Desk = Desk;
pub struct Desk;

impl shared::approvals::Desk for Desk {
    fn request<'a>(&'a self, app: &'a App, principal: &'a Principal, asked: Asked<'a>) -> BoxFuture<'a, ApiResult<Requested>> {
        Box::pin(request(app, principal, asked))
    }
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    /// Waiting for a person.
    Pending,
    /// A person approved it: the same request, sent again, runs once.
    Approved,
    Denied,
    /// Nobody decided before `expires_at`.
    Expired,
    /// Something it depends on changed before a person approved it (`changed` says what):
    /// the agent asks again on what it is now.
    Stale,
}

impl ApprovalState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Expired => "expired",
            Self::Stale => "stale",
        }
    }
}

/// An email as SES will receive it.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[schema(as = ApprovalEmailPreview)]
pub struct EmailPreview {
    pub from: String,
    pub to: Vec<String>,
    pub cc: Vec<String>,
    pub bcc: Vec<String>,
    pub reply_to: Vec<String>,
    pub subject: String,
    pub html: Option<String>,
    pub text: Option<String>,
}

/// What the effect will do, rendered when the request was asked.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, Default, PartialEq)]
#[schema(as = ApprovalPreview)]
pub struct Preview {
    /// One line: what happens, to whom.
    pub summary: String,
    /// Every email it sends, as SES will receive it (subject, HTML and text bodies).
    pub emails: Vec<EmailPreview>,
    /// The request's body as sent, with credentials and secrets shown as `[hidden]` (absent
    /// for emails, shown as `emails`, and for a body without one).
    #[schema(value_type = Option<Object>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<serde_json::Value>,
    /// Why an email could not be rendered (the request will fail the same way once approved).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// An object that changed after the request was asked.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq, Eq)]
#[schema(as = ApprovalChange)]
pub struct Changed {
    pub object: String,
    pub id: String,
}

/// A restricted key's write waiting for (or decided by) a person.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct ApprovalRequest {
    /// `apr_...`
    pub id: ApprovalRequestId,
    /// Always `approval_request`.
    pub object: String,
    pub state: ApprovalState,
    /// The effect (`emails.send`).
    pub capability: String,
    /// What the effect is, in words.
    pub effect: String,
    /// The scope an approver must hold themselves (`admin`: an owner or admin of the workspace).
    pub approver_needs: String,
    pub method: String,
    /// Relative to the API base (`/webhooks/wh_...`).
    pub path: String,
    pub idempotency_key: String,
    /// Hex SHA-256 of the exact body.
    pub body_sha256: String,
    /// The key that asked.
    pub api_key_id: ApiKeyId,
    pub preview: Preview,
    /// Every object the effect depends on, at its version when the request was asked: what
    /// an approval binds.
    pub bound: Vec<Bound>,
    /// Set when `state` is `stale`.
    #[serde(default)]
    pub changed: Vec<Changed>,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    pub decided_at: Option<Timestamp>,
    /// The person (their token's subject) who approved or denied it.
    pub decided_by: Option<String>,
    /// A denial's reason.
    pub reason: Option<String>,
    /// The confirmation an approval minted (`GET /capability-confirmations/{id}`: whether and
    /// by which request it was used).
    pub confirmation_id: Option<ConfirmationId>,
}

/// What a request asked and was shown: the part of the item that never changes.
#[derive(Serialize, Deserialize)]
struct Doc {
    capability: String,
    method: String,
    path: String,
    idempotency_key: String,
    body_sha256: String,
    api_key_id: String,
    preview: Preview,
    bound: Vec<Bound>,
    created_at: Timestamp,
    expires_at: Timestamp,
}

pub use capabilities::may_approve;

// ---------- asking ----------

/// The hosted page of an approval request (`functions/capabilities/src/pages`).
pub fn page_url(origin: &str, slug: &str, id: &str) -> String {
    format!("{}/approvals/{slug}/requests/{id}", origin.trim_end_matches('/'))
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
        match app.db.get(&pk, &APPROVAL_REQUEST.sk(&[&id])).await? {
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
    let preview = Box::pin(preview(app, ws, info, &capability.path, asked.path, body.as_ref(), &bound)).await;
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
        bound: bound.iter().map(|(b, _)| b.clone()).collect(),
        created_at: now.into(),
        expires_at: expires.into(),
    };
    let doc_json = serde_json::to_string(&doc).map_err(|e| ApiError::internal(e.to_string()))?;
    if doc_json.len() > MAX_DOC_BYTES {
        return Err(ApiError::validation("body", "too large to preview for a person; mint a confirmation directly"));
    }
    let keys: Vec<BoundKey> =
        bound.iter().map(|(b, sk)| BoundKey { object: b.object.clone(), id: b.id.clone(), sk: sk.clone(), version: b.version }).collect();
    let item = Item::from([
        ("pk".into(), s(&pk)),
        ("sk".into(), s(APPROVAL_REQUEST.sk(&[id.as_str()]))),
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
        .put(shared::approvals::due_item(ws, id.as_str(), expires.timestamp_millis()))
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

/// What a webhook gets: enough to tell someone, without the bodies (read the request for them).
fn event_body(r: &ApprovalRequest) -> serde_json::Value {
    serde_json::json!({
        "id": r.id, "object": "approval_request", "state": r.state, "capability": r.capability, "effect": r.effect,
        "approver_needs": r.approver_needs, "method": r.method, "path": r.path, "api_key_id": r.api_key_id,
        "summary": r.preview.summary, "created_at": r.created_at, "expires_at": r.expires_at,
        "decided_at": r.decided_at, "decided_by": r.decided_by, "reason": r.reason,
    })
}

/// Levels of a request body a preview shows as JSON.
const MAX_SHOWN_DEPTH: usize = 16;

fn depth(v: &serde_json::Value) -> usize {
    match v {
        serde_json::Value::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        serde_json::Value::Array(l) => 1 + l.iter().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Keys whose values a preview never shows: a channel's credentials, a webhook's secret.
fn hidden(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["credentials", "secret", "password", "token", "api_key"].iter().any(|h| k.contains(h))
}

fn redact(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), if hidden(k) { Value::from("[hidden]") } else { redact(v) })).collect())
        }
        Value::Array(l) => Value::Array(l.iter().map(redact).collect()),
        other => other.clone(),
    }
}

/// The emails a request sends, as SES will get them, and the line a notification shows.
async fn preview(
    app: &App,
    ws: &WorkspaceId,
    info: &effects::EffectInfo,
    pattern: &str,
    path: &str,
    body: Option<&serde_json::Value>,
    bound: &[(Bound, String)],
) -> Preview {
    let entries: Vec<serde_json::Value> = match (pattern, body) {
        ("/emails", Some(b)) => vec![b.clone()],
        ("/emails/batch", Some(b)) => b.get("emails").and_then(|e| e.as_array()).cloned().unwrap_or_default(),
        _ => vec![],
    };
    // An email's preview is the email as rendered (an erased recipient already replaced); its
    // raw body would keep what the rendering left out. A body deeper than a person reads is
    // shown as its text, so reading the request back never meets serde's depth limit.
    let mut out = Preview::default();
    match body {
        _ if !entries.is_empty() => {}
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
    let mut built = vec![];
    for e in entries {
        built.push(match serde_json::from_value::<crate::emails::compose::SendEmail>(e) {
            Ok(input) => Box::pin(crate::emails::compose::build_one(app, ws, input, chrono::Utc::now())).await,
            Err(err) => Err(ApiError::validation("body", err.to_string())),
        });
    }
    built.extend(reply);
    for (i, built) in built.into_iter().enumerate() {
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
    out
}

// ---------- reading ----------

fn state_of(item: &Item) -> ApprovalState {
    match get_str(item, "approval_state") {
        Some("approved") => ApprovalState::Approved,
        Some("denied") => ApprovalState::Denied,
        Some("stale") => ApprovalState::Stale,
        Some("expired") => ApprovalState::Expired,
        _ if get_i64(item, "expires_ms").unwrap_or(0) <= shared::ids::now_ms() => ApprovalState::Expired,
        _ => ApprovalState::Pending,
    }
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
        bound: d.bound.clone(),
        changed: get_str(item, "changed").and_then(|j| serde_json::from_str(j).ok()).unwrap_or_default(),
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
    app.db.get(&ws_pk(ws), &APPROVAL_REQUEST.sk(&[id.as_str()])).await?.ok_or_else(|| ApiError::not_found("approval request"))
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
    let spec = crate::keys::APPROVAL_REQUESTS.query(&[ws], &[], after, limit).descending();
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

// ---------- deciding ----------

/// A person approves: the confirmation is minted bound to the versions recorded when the request
/// was asked, in one transaction that checks they are still current (else the request turns
/// `stale`, naming what changed, and nothing is minted). Two approvers at once mint one.
/// Events `approval.approved`, `capability.confirmed`.
pub async fn approve(app: &App, ws: &WorkspaceId, p: &Principal, id: &ApprovalRequestId) -> ApiResult<ApprovalRequest> {
    let item = load_item(app, ws, id).await?;
    let r = from_item(&item)?;
    may_approve(p, &r.capability)?;
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
    };
    let bound: Vec<(Bound, String)> = r.bound.iter().cloned().zip(keys.iter().map(|k| k.sk.clone())).collect();
    let mut confirmation = capabilities::item(ws, &c, &bound, &token_hash, token_expires.timestamp_millis());
    confirmation.insert("approval_request_id".into(), s(id.as_str()));
    let at = Timestamp::from(now).to_string();
    let decide = shared::store::Update::new(
        &pk,
        APPROVAL_REQUEST.sk(&[id.as_str()]),
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
    let (due_pk, due_sk) = shared::approvals::due_key(ws, id.as_str(), get_i64(&item, "expires_ms").unwrap_or(0));
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
        .update(pk, APPROVAL_REQUEST.sk(&[id.as_str()]), "SET approval_state = :stale, changed = :changed")
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

/// What a denial says.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DenyApproval {
    /// Why, for the agent and the audit (1 to 500 characters).
    #[schema(min_length = 1, max_length = 500)]
    pub reason: String,
}

/// A person denies: the request never runs. Event `approval.denied`.
pub async fn deny(app: &App, ws: &WorkspaceId, p: &Principal, id: &ApprovalRequestId, input: DenyApproval) -> ApiResult<ApprovalRequest> {
    let mut errs = shared::validate::Errors::new();
    errs.text("reason", &input.reason, 1, 500);
    errs.finish()?;
    let item = load_item(app, ws, id).await?;
    let r = from_item(&item)?;
    may_approve(p, &r.capability)?;
    if r.state != ApprovalState::Pending {
        return Err(ApiError::conflict(format!("the approval request is {}", r.state.as_str())));
    }
    let (due_pk, due_sk) = shared::approvals::due_key(ws, id.as_str(), get_i64(&item, "expires_ms").unwrap_or(0));
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
        APPROVAL_REQUEST.sk(&[id.as_str()]),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previews_hide_credentials_and_secrets() {
        let body = serde_json::json!({"type": "bluesky", "credentials": {"handle": "a", "app_password": "p"},
            "url": "https://x", "nested": [{"secret": "whsec_1", "name": "n"}]});
        let r = redact(&body);
        assert_eq!(r["credentials"], "[hidden]");
        assert_eq!(r["nested"][0]["secret"], "[hidden]");
        assert_eq!((r["url"].as_str(), r["nested"][0]["name"].as_str()), (Some("https://x"), Some("n")));
    }
}
