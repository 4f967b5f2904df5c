//! Capability confirmations: a person approves one exact write before an agent's API key may
//! perform it. A key created with `requires_confirmation` must send, on a confirmable route,
//! `X-Capability-Confirmation` with a token minted here by a credential with the `confirm`
//! scope (a person's OAuth token), plus the confirmed `Idempotency-Key` and body; the shared
//! pipeline consumes the token (`shared::confirmation`).
//!
//! Items (pk = WS#<workspace>, sk = CAPCONF#<cc id>): the confirmation, its token's hash and
//! state; kept 90 days for the audit.

use domain::capabilities::{
    Capability, Confirmation, ConfirmationId, ConfirmationStatus, DEFAULT_LIFETIME_SECS, MAX_LIFETIME_SECS, MIN_LIFETIME_SECS,
};
use domain::keys;
use serde::Deserialize;
use shared::events::Event;
use shared::outbox::Tx;
use shared::store::{self, s, ws_pk};
use shared::validate::Errors;
use shared::{ApiError, ApiResult, App, Reply, Req};
use utoipa::ToSchema;

shared::area! {
    tag = "capabilities", description = "Capability confirmations: a person approves the exact write before an agent's key may perform it",
    operations = [
        list_capabilities,
        create_confirmation [needs = Scope::Confirm],
        list_confirmations, get_confirmation,
    ],
    schemas = [Capability, Confirmation, ConfirmationStatus, CreateConfirmation, domain::capabilities::Bound],
}

/// Every confirmable write: each capability with every method and path that can cause it.
#[utoipa::path(get, path = "/capabilities", tag = "capabilities",
    responses((status = 200, body = shared::openapi::ListOf<Capability>), shared::openapi::CommonErrors))]
pub async fn list_capabilities(_app: &App, _req: Req) -> ApiResult<Reply> {
    Ok(Reply::list(domain::capabilities::all(), None))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateConfirmation {
    /// One of `GET /capabilities`.
    #[schema(min_length = 1, max_length = 100)]
    pub capability: String,
    /// The capability's method.
    #[schema(min_length = 1, max_length = 10)]
    pub method: String,
    /// The concrete path of the request, relative to the API base or with it
    /// (`/webhooks/wh_...` or `/api/v1/webhooks/wh_...`), fitting the capability's path.
    #[schema(min_length = 1, max_length = 1000)]
    pub path: String,
    /// The `Idempotency-Key` the request will carry.
    #[schema(min_length = 1, max_length = 255)]
    pub idempotency_key: String,
    /// Hex SHA-256 of the exact request body bytes (of the empty body for a DELETE).
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub body_sha256: String,
    /// What the person saw and approved, kept for the audit.
    #[schema(min_length = 1, max_length = 4000)]
    pub preview_summary: String,
    /// The person, as the approving app names them.
    #[schema(min_length = 1, max_length = 200)]
    pub approved_by: String,
    /// The API key (`key_...`) that will send the request.
    #[schema(pattern = "^key_[0-7][0-9A-HJKMNP-TV-Z]{25}$")]
    pub api_key_id: String,
    /// Seconds the token lives, 60 to 900 (default 300).
    #[schema(minimum = 60, maximum = 900)]
    pub expires_in: Option<i64>,
    /// The exact request body (its SHA-256 must be `body_sha256`). With it, the confirmation
    /// also binds the contacts and templates the body names and answers what they resolve to
    /// (`bound`): the address the email goes to, the subject it renders. Objects named by the
    /// path (the post, the conversation and its contact, the webhook) are bound in any case.
    #[schema(max_length = 1048576)]
    pub body: Option<String>,
}

/// Confirm one exact write (capability, method, path, idempotency key, body) for one API key,
/// on the state it was approved on (`bound`). Needs the `confirm` scope (a person's OAuth
/// token). The token in the answer is shown once and runs one execution. Event
/// `capability.confirmed`.
#[utoipa::path(post, path = "/capability-confirmations", tag = "capabilities", request_body = CreateConfirmation,
    responses((status = 201, body = shared::openapi::Data<Confirmation>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_confirmation(app: &App, req: Req) -> ApiResult<Reply> {
    let input: CreateConfirmation = req.json()?;
    let mut errs = Errors::new();
    let path = shared::confirmation::normalise_path(&input.path);
    let routes: Vec<_> = domain::capabilities::routes_of(&input.capability).collect();
    let capability = routes.iter().find(|c| input.method == c.method && domain::capabilities::path_fits(&c.path, &path)).copied();
    if routes.is_empty() {
        errs.add("capability", "not a capability (see GET /capabilities)");
    } else if input.path.len() > 1000 || input.path.contains('%') {
        // Ids never need escaping; an escaped path would name the object differently from the
        // route that decodes it, and bind nothing.
        errs.add("path", "must be at most 1000 characters, without percent-escapes");
    } else if capability.is_none() || input.path.contains('?') {
        let forms: Vec<String> = routes.iter().map(|c| format!("{} {}", c.method, c.path)).collect();
        let field = if routes.iter().any(|c| c.method == input.method) { "path" } else { "method" };
        errs.add(field, format!("{} is confirmed for requests of the form {} (no query)", routes[0].capability, forms.join(", ")));
    }
    if shared::idempotency::validate_key(&input.idempotency_key).is_err() {
        errs.add("idempotency_key", "must be 1 to 255 printable ASCII characters");
    }
    if input.body_sha256.len() != 64 || !input.body_sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        errs.add("body_sha256", "must be the lower-case hex SHA-256 of the request body (64 characters)");
    }
    errs.text("preview_summary", &input.preview_summary, 1, 4000);
    errs.text("approved_by", &input.approved_by, 1, 200);
    let lifetime = input.expires_in.unwrap_or(DEFAULT_LIFETIME_SECS);
    if !(MIN_LIFETIME_SECS..=MAX_LIFETIME_SECS).contains(&lifetime) {
        errs.add("expires_in", format!("must be {MIN_LIFETIME_SECS} to {MAX_LIFETIME_SECS} seconds"));
    }
    let body = match &input.body {
        Some(b) if shared::crypto::sha256_hex(b.as_bytes()) != input.body_sha256 => {
            errs.add("body", "its SHA-256 is not body_sha256");
            None
        }
        Some(b) if b.is_empty() => None,
        Some(b) => match serde_json::from_str::<serde_json::Value>(b) {
            Ok(v) => Some(v),
            Err(_) => {
                errs.add("body", "must be the JSON body the request will send");
                None
            }
        },
        None => None,
    };
    let key_id = shared::ids::is_valid("key", &input.api_key_id).then_some(input.api_key_id.as_str());
    if key_id.is_none() {
        errs.add("api_key_id", "not an API key id (key_...)");
    }
    errs.finish()?;
    let (ws, key_id) = (req.ws(), key_id.unwrap_or_default());
    let (Some(capability), now) = (capability, chrono::Utc::now()) else { return Err(ApiError::internal("validated above")) };
    let id = shared::ids::new_id("cc");
    let (token, token_hash) = shared::confirmation::new_token(&id);
    let expires = now + chrono::Duration::seconds(lifetime);
    let c = Confirmation {
        id,
        object: "capability_confirmation".into(),
        capability: capability.capability.clone(),
        method: capability.method.clone(),
        path,
        idempotency_key: input.idempotency_key,
        body_sha256: input.body_sha256,
        preview_summary: input.preview_summary,
        approved_by: input.approved_by.trim().to_string(),
        confirmed_by: req.principal.subject.clone(),
        api_key_id: key_id.to_string(),
        status: ConfirmationStatus::Issued,
        created_at: shared::ids::format_time(now),
        expires_at: shared::ids::format_time(expires),
        used_at: None,
        used_by_request_id: None,
        confirmation_token: None,
        bound: vec![],
    };
    let key = app.db.get(&ws_pk(ws), &keys::API_KEY.sk(&[key_id])).await?;
    let live = key.as_ref().is_some_and(|k| store::get_str(k, "revoked_at").is_none());
    if !live {
        return Err(ApiError::validation("api_key_id", "no live API key of this workspace has this id"));
    }
    let bound = domain::capabilities::bind(app, ws, &capability.path, &c.path, body.as_ref()).await?;
    let c = Confirmation { bound: bound.iter().map(|(b, _)| b.clone()).collect(), ..c };
    Tx::new()
        .create(store::Record { item: domain::capabilities::item(ws, &c, &bound, &token_hash, expires.timestamp_millis()) })
        .event(Event::new(ws, "capability.confirmed", &c))
        .commit(app)
        .await
        .map_err(store::TxError::stale)?;
    let shown = Confirmation { confirmation_token: Some(token), ..c.clone() };
    Ok(Reply::created(&shown).replay_as(&c))
}

/// The filters of `GET /capability-confirmations` (`limit` and `cursor` are the page's).
#[derive(Deserialize)]
struct ListConfirmations {
    capability: Option<String>,
    api_key_id: Option<String>,
}

/// The audit trail, oldest first: who approved what, for which request, and its use.
#[utoipa::path(get, path = "/capability-confirmations", tag = "capabilities",
    params(shared::openapi::PageParams, ("capability" = Option<String>, Query), ("api_key_id" = Option<String>, Query)),
    responses((status = 200, body = shared::openapi::ListOf<Confirmation>), shared::openapi::CommonErrors))]
pub async fn list_confirmations(app: &App, req: Req) -> ApiResult<Reply> {
    let q: ListConfirmations = req.query_as()?;
    let page = req
        .page(app, "capability_confirmations", &[("capability", q.capability.as_deref()), ("api_key_id", q.api_key_id.as_deref())])
        .await?;
    let mut spec = keys::CAPABILITY_CONFIRMATIONS.query(&[req.ws()], &[], page.after.clone(), page.limit);
    spec = match (&q.capability, &q.api_key_id) {
        (Some(c), Some(k)) => spec.filter("capability = :c AND api_key_id = :k", vec![(":c", s(c)), (":k", s(k))]),
        (Some(c), None) => spec.filter("capability = :c", vec![(":c", s(c))]),
        (None, Some(k)) => spec.filter("api_key_id = :k", vec![(":k", s(k))]),
        (None, None) => spec,
    };
    let out = app.db.query_page(spec).await?;
    let items = out.items.iter().map(domain::capabilities::from_item).collect::<ApiResult<Vec<_>>>()?;
    Ok(Reply::list(&items, out.next_after.map(|a| page.cursor_for(&a))))
}

/// One capability confirmation and its audit trail (never the token).
#[utoipa::path(get, path = "/capability-confirmations/{id}", tag = "capabilities", params(("id" = String, Path, description = "cc_...")),
    responses((status = 200, body = shared::openapi::Data<Confirmation>), shared::openapi::CommonErrors))]
pub async fn get_confirmation(app: &App, req: Req) -> ApiResult<Reply> {
    let id: ConfirmationId = req.path_id("id")?;
    Ok(Reply::ok(&domain::capabilities::load(app, req.ws(), &id).await?))
}
