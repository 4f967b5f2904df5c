//! Capability confirmations, the pipeline's side (docs/authority.md): a credential created with
//! `requires_confirmation` may run a confirmable write only with a single-use token a person
//! minted for exactly that request (`X-Capability-Confirmation`). The token is consumed in the
//! same DynamoDB transaction that reserves the request's `Idempotency-Key` and checks that the
//! objects the person approved are unchanged, so the write runs at most once, on what the
//! person saw, and an idempotent replay needs no new token. A confirmed write costs one read of
//! the confirmation (which effect, which objects) and no extra write round trip (the
//! reservation's PutItem becomes a TransactWriteItems).
//!
//! A token is `cct_<ULID of its confirmation><43 base62 characters>`: the ULID names the
//! item in the caller's workspace partition, so another workspace's token names nothing
//! there; only the token's SHA-256 is stored.

use crate::app::App;
use crate::auth::Principal;
use crate::error::{ApiError, ErrorCode, ErrorDetail};
use crate::events::Event;
use crate::idempotency::{self, Begin, Reservation};
use crate::keys::CAPABILITY_CONFIRMATION;
use crate::outbox::Tx;
use crate::store::{self, Item, TxError, get_i64, get_str, n, s};

pub const HEADER: &str = "x-capability-confirmation";
/// The attribute of a confirmation holding the digest of the effect's value it approves.
pub const EFFECT_DIGEST_ATTR: &str = "effect_digest";
pub const TOKEN_PREFIX: &str = "cct_";
const SECRET_LEN: usize = 43;

/// A fresh token for the confirmation `cc_<ulid>` and the hash to store.
pub fn new_token(confirmation_id: &str) -> (String, String) {
    let ulid = confirmation_id.strip_prefix("cc_").unwrap_or(confirmation_id);
    let token = format!("{TOKEN_PREFIX}{ulid}{}", crate::auth::random_base62(SECRET_LEN));
    let hash = hash(&token);
    (token, hash)
}

pub fn hash(token: &str) -> String {
    crate::crypto::sha256_hex(token.as_bytes())
}

/// The confirmation id a well-formed token names.
pub fn confirmation_id(token: &str) -> Option<String> {
    let rest = token.strip_prefix(TOKEN_PREFIX)?;
    if rest.len() != 26 + SECRET_LEN || !rest.is_ascii() || !rest[26..].bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    let id = format!("cc_{}", &rest[..26]);
    crate::ids::is_valid("cc", &id).then_some(id)
}

/// `/api/v1/webhooks/wh_1/` and `/webhooks/wh_1` name the same path: the one compared.
pub fn normalise_path(path: &str) -> String {
    let trimmed = path.split('?').next().unwrap_or("");
    let segments: Vec<&str> = trimmed.split('/').filter(|s| !s.is_empty()).collect();
    let segments = match segments.as_slice() {
        ["api", "v1", rest @ ..] => rest,
        all => all,
    };
    format!("/{}", segments.join("/"))
}

/// Why a request was refused: the `reason` of the 428's detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No `X-Capability-Confirmation` header.
    Missing,
    /// Not a token, or no confirmation of this workspace has it.
    Unknown,
    Expired,
    /// Consumed by another request, or by an earlier execution of this one.
    Used,
    /// Minted for another API key.
    Credential,
    /// Minted for another request: the field that differs (`capability` when it confirms
    /// another effect of a route that can reach several).
    Mismatch(&'static str),
    /// Something the person approved changed since: the object and its id.
    Stale {
        object: String,
        id: String,
    },
    /// The effect's value, built again at the run, is not the value the person approved (the
    /// pipeline names the fields that differ).
    Changed,
}

impl Refusal {
    fn reason(&self) -> &'static str {
        match self {
            Refusal::Missing => "missing",
            Refusal::Unknown => "unknown",
            Refusal::Expired => "expired",
            Refusal::Used => "used",
            Refusal::Credential => "credential",
            Refusal::Mismatch(_) => "mismatch",
            Refusal::Stale { .. } | Refusal::Changed => "stale",
        }
    }

    fn message(&self) -> String {
        match self {
            Refusal::Missing => "this credential needs a person's confirmation for this write: mint one at POST /capability-confirmations and send it as X-Capability-Confirmation with the confirmed Idempotency-Key".into(),
            Refusal::Unknown => "the X-Capability-Confirmation token is not a confirmation of this workspace".into(),
            Refusal::Expired => "the confirmation has expired; ask for a new one".into(),
            Refusal::Used => "the confirmation was already used (a confirmation runs one execution); ask for a new one".into(),
            Refusal::Credential => "the confirmation was minted for another API key".into(),
            Refusal::Mismatch("effect_digest") => "the confirmation names no effect value, and this effect runs only on the value a person \
                                                   approved: retry without the header for an approval request, or mint with its effect_digest"
                .into(),
            Refusal::Mismatch(field) => format!("the confirmation was minted for another request: its {field} differs"),
            Refusal::Stale { object, id } => {
                format!("the {object} {id} changed after the person approved this write; ask them to approve it as it is now")
            }
            Refusal::Changed => "what this write would do changed after the person approved it (meta.fields names what); nothing ran: \
                                 ask them to approve it as it is now, with a new Idempotency-Key"
                .into(),
        }
    }
}

/// The request a route's capability needs confirmed.
pub struct Request<'a> {
    /// The capability named in a 428 (the first the credential is restricted for).
    pub capability: &'static str,
    pub method: &'a str,
    /// From the root noun on (`/webhooks/wh_1`).
    pub path: &'a str,
    pub body: &'a [u8],
}

/// `428 CONFIRMATION_REQUIRED`, naming what to confirm so an agent can ask its person.
pub fn required(req: &Request<'_>, refusal: Refusal) -> ApiError {
    let mut meta = serde_json::json!({
        "capability": req.capability,
        "method": req.method,
        "path": req.path,
        "body_sha256": crate::crypto::sha256_hex(req.body),
        "reason": refusal.reason(),
    });
    match &refusal {
        Refusal::Mismatch(field) => meta["mismatch"] = serde_json::Value::from(*field),
        Refusal::Stale { object, id } => meta["stale"] = serde_json::json!({"object": object, "id": id}),
        Refusal::Changed => meta["stale"] = serde_json::json!({"object": "effect"}),
        _ => {}
    }
    ApiError::new(ErrorCode::ConfirmationRequired, refusal.message()).with_details(vec![ErrorDetail {
        field: Some("X-Capability-Confirmation".into()),
        message: format!("confirm the capability {} for {} {}", req.capability, req.method, req.path),
        meta: Some(meta),
    }])
}

/// The confirmation a request consumed: which effect the person approved, on which objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consumed {
    pub id: String,
    /// The capability's current name (`emails.send`).
    pub capability: String,
    /// The objects bound at approval: the effect's own transaction checks them again
    /// (`crate::authority::Authority::guard`), so a change between consuming the token and
    /// the effect is refused too.
    pub bound: Vec<BoundKey>,
    /// The digest of the effect's value a person approved (`crate::authority::Shown`), when
    /// the confirmation came from an approval request that showed one: the run must build the
    /// same value.
    pub effect_digest: Option<String>,
    /// The approval request that minted it, if any.
    pub approval_request_id: Option<String>,
}

/// `428` with reason `stale`: an object the person approved changed.
pub fn stale(capability: &str, object: &str, id: &str) -> ApiError {
    ApiError::new(ErrorCode::ConfirmationRequired, Refusal::Stale { object: object.into(), id: id.into() }.message()).with_details(vec![
        ErrorDetail {
            field: Some("X-Capability-Confirmation".into()),
            message: format!("confirm the capability {capability} again"),
            meta: Some(serde_json::json!({"capability": capability, "reason": "stale", "stale": {"object": object, "id": id}})),
        },
    ])
}

/// One object whose state the person approved (`bound` on the confirmation item, written when
/// it was minted): the write runs only while the object is still at that version.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct BoundKey {
    pub object: String,
    pub id: String,
    pub sk: String,
    pub version: i64,
}

impl BoundKey {
    /// `tx` with a condition that this object is still at its approved version (or still
    /// absent): what consuming a token, approving a request and the effect's own write check.
    pub fn still_in(&self, tx: Tx, pk: &str) -> Tx {
        match self.version {
            0 => tx.check(pk.to_string(), self.sk.clone(), "attribute_not_exists(pk)"),
            v => tx.check_if(pk.to_string(), self.sk.clone(), "version = :bound_version", vec![(":bound_version", n(v))]),
        }
    }
}

/// The item attribute holding the bound objects (JSON of `[BoundKey]`).
pub const BOUND_ATTR: &str = "bound_keys";

/// What a request brings to show a person approved it: the token a person's app minted, or
/// (found by the pipeline for this exact request) the approval of an approval request.
#[derive(Clone, Debug)]
pub enum Proof<'a> {
    Token(&'a str),
    Approval { confirmation_id: String, approval_request_id: String },
}

impl Proof<'_> {
    /// The confirmation it names, if well formed.
    fn confirmation_id(&self) -> Option<String> {
        match self {
            Proof::Token(t) => confirmation_id(t),
            Proof::Approval { confirmation_id, .. } => Some(confirmation_id.clone()),
        }
    }
    /// The confirmation item's attribute that must hold this value.
    fn attribute(&self) -> (&'static str, String) {
        match self {
            Proof::Token(t) => ("token_hash", hash(t)),
            Proof::Approval { approval_request_id, .. } => ("approval_request_id", approval_request_id.clone()),
        }
    }
}

/// Reserve the Idempotency-Key and consume the token in one transaction, with the
/// `capability.used` event and a check that every object the person approved is still at the
/// version they saw. The reservation wins: a completed request with the same key and body is
/// replayed whatever the token's state (a replay needs no new token). A token runs one
/// execution: once consumed it is never accepted again, not even by its own key after a 5xx
/// or a lost reservation (the pipeline stores a confirmed request's 5xx for replay instead).
/// `accepts` are the capabilities this route reaches for which the credential is restricted.
#[allow(clippy::too_many_arguments)]
pub async fn begin(
    app: &App,
    principal: &Principal,
    req: &Request<'_>,
    accepts: &[&'static str],
    proof: Proof<'_>,
    idempotency_key: Option<&str>,
    fingerprint: String,
    request_id: &str,
) -> Result<(Begin, Consumed), ApiError> {
    let ws = principal.workspace_or_none();
    let id = proof.confirmation_id().ok_or_else(|| required(req, Refusal::Unknown))?;
    let key = idempotency_key.ok_or_else(|| required(req, Refusal::Mismatch("idempotency_key")))?;
    let credential = match &principal.credential {
        crate::auth::Credential::ApiKey { key_id } => key_id.as_str(),
        _ => "",
    };
    let body_sha256 = crate::crypto::sha256_hex(req.body);
    let (reservation, item, cond, values) = idempotency::reservation(ws, key, fingerprint, idempotency::lease_ms(&app.cfg.timeouts));
    let now_ms = crate::ids::now_ms();
    let pk = store::ws_pk(ws);
    let sk = CAPABILITY_CONFIRMATION.sk(&crate::ids::ConfirmationId::trusted(id.as_str()));
    // One read first: which effect it confirms and which objects it binds decide the
    // transaction. A used token may still name a completed request to replay.
    let stored = app.db.get(&pk, &sk).await?.unwrap_or_default();
    let check = Check { proof: proof.attribute(), credential, req, key, body_sha256: &body_sha256, now_ms };
    match check.diagnose(&stored) {
        None | Some(Refusal::Used) => {}
        Some(refusal) => return Err(required(req, refusal)),
    }
    let capability = crate::auth::capability_name(get_str(&stored, "capability").unwrap_or_default()).to_string();
    if !accepts.contains(&capability.as_str()) {
        return Err(required(req, Refusal::Mismatch("capability")));
    }
    let bound: Vec<BoundKey> = get_str(&stored, BOUND_ATTR).and_then(|j| serde_json::from_str(j).ok()).unwrap_or_default();
    let effect_digest = get_str(&stored, EFFECT_DIGEST_ATTR).map(String::from);
    let approval_request_id = get_str(&stored, "approval_request_id").map(String::from);
    let used_at = crate::ids::now_rfc3339();
    let consume = crate::store::Update::new(&pk, &sk, "SET #state = :used, used_at = :at, used_by_request_id = :rid")
        .when(
            "#proof = :h AND api_key_id = :cred AND #method = :m AND #path = :p AND idempotency_key = :k \
             AND body_sha256 = :b AND token_expires_ms > :now AND #state = :issued",
        )
        .name("#state", "state")
        .name("#proof", check.proof.0)
        .name("#method", "method")
        .name("#path", "path")
        .value(":used", s("used"))
        .value(":issued", s("issued"))
        .value(":at", s(&used_at))
        .value(":rid", s(request_id))
        .value(":h", s(&check.proof.1))
        .value(":cred", s(credential))
        .value(":m", s(req.method))
        .value(":p", s(req.path))
        .value(":k", s(key))
        .value(":b", s(&body_sha256))
        .value(":now", n(now_ms));
    let mut tx = Tx::new().put_if_named(item, cond, &[("#state", "state")], values).update(consume);
    for b in &bound {
        tx = b.still_in(tx, &pk);
    }
    let event = Event::new(
        ws,
        crate::events::EventType::CapabilityUsed,
        &serde_json::json!({
            "id": id, "object": "capability_confirmation", "capability": capability, "method": req.method,
            "path": req.path, "idempotency_key": key, "api_key_id": credential, "used_at": used_at, "used_by_request_id": request_id,
            // The receipt: what the person approved, by digest (the effect runs only on it).
            "effect_digest": effect_digest, "approval_request_id": approval_request_id,
            "approved_by": get_str(&stored, "approved_by"),
        }),
    );
    match tx.event(event).commit(app).await {
        Ok(()) => Ok((Begin::Proceed(reservation), Consumed { id, capability, bound, effect_digest, approval_request_id })),
        Err(TxError::Condition(0)) => {
            Ok((refused_reservation(app, &reservation).await?, Consumed { id, capability, bound, effect_digest, approval_request_id }))
        }
        Err(TxError::Condition(1)) => {
            let item = app.db.get(&pk, &sk).await?.unwrap_or_default();
            Err(required(req, check.diagnose(&item).unwrap_or(Refusal::Used)))
        }
        Err(TxError::Condition(i)) => {
            let b = bound.get(i - 2).ok_or_else(|| ApiError::internal("a confirmation's transaction failed an unknown condition"))?;
            Err(required(req, Refusal::Stale { object: b.object.clone(), id: b.id.clone() }))
        }
        Err(TxError::Api(e)) => Err(e),
    }
}

async fn refused_reservation(app: &App, r: &Reservation) -> Result<Begin, ApiError> {
    match app.db.get(r.pk(), r.sk()).await? {
        Some(old) => idempotency::refused(&old, r.fingerprint()),
        // Expired between the two reads: the client's retry reserves it.
        None => Err(ApiError::conflict("a request with this Idempotency-Key is still in progress; retry later")),
    }
}

/// What a request brings, against a stored confirmation.
struct Check<'a> {
    /// The attribute the proof must match, and its value.
    proof: (&'static str, String),
    credential: &'a str,
    req: &'a Request<'a>,
    key: &'a str,
    body_sha256: &'a str,
    now_ms: i64,
}

impl Check<'_> {
    /// Why the stored confirmation does not admit this request (None: it does, if unused).
    fn diagnose(&self, item: &Item) -> Option<Refusal> {
        let (state, expires) = (get_str(item, "state"), get_i64(item, "token_expires_ms").unwrap_or(0));
        if get_str(item, self.proof.0) != Some(self.proof.1.as_str()) {
            return Some(Refusal::Unknown);
        }
        if state == Some("used") && get_str(item, "idempotency_key") != Some(self.key) {
            return Some(Refusal::Used);
        }
        if expires <= self.now_ms && state != Some("used") {
            return Some(Refusal::Expired);
        }
        if get_str(item, "api_key_id") != Some(self.credential) {
            return Some(Refusal::Credential);
        }
        let fields =
            [("method", self.req.method), ("path", self.req.path), ("idempotency_key", self.key), ("body_sha256", self.body_sha256)];
        if let Some((f, _)) = fields.into_iter().find(|(f, v)| get_str(item, f) != Some(*v)) {
            return Some(Refusal::Mismatch(f));
        }
        (state == Some("used")).then_some(Refusal::Used)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_name_their_confirmation_and_only_their_hash_is_kept() {
        let id = crate::ids::new_id("cc");
        let (token, h) = new_token(&id);
        assert_eq!(confirmation_id(&token).as_deref(), Some(id.as_str()));
        assert_eq!(h, hash(&token));
        assert_ne!(new_token(&id).0, token);
        assert_eq!(confirmation_id("cct_short"), None);
        assert_eq!(confirmation_id(&token.replace("cct_", "xyz_")), None);
        assert_eq!(confirmation_id(&format!("{token}!")), None);
    }

    #[test]
    fn paths_compare_without_the_base_and_slashes() {
        assert_eq!(normalise_path("/api/v1/webhooks/wh_1/"), "/webhooks/wh_1");
        assert_eq!(normalise_path("webhooks//wh_1"), "/webhooks/wh_1");
        assert_eq!(normalise_path("/emails?x=1"), "/emails");
    }

    #[test]
    fn the_failed_condition_is_named() {
        let req = Request { capability: "emails.send", method: "POST", path: "/emails", body: b"{}" };
        let body = crate::crypto::sha256_hex(b"{}");
        let token = new_token(&crate::ids::new_id("cc")).0;
        let item = Item::from([
            ("token_hash".into(), s(hash(&token))),
            ("state".into(), s("issued")),
            ("token_expires_ms".into(), n(2_000)),
            ("api_key_id".into(), s("key_1")),
            ("method".into(), s("POST")),
            ("path".into(), s("/emails")),
            ("idempotency_key".into(), s("k1")),
            ("body_sha256".into(), s(&body)),
        ]);
        let d = |item: &Item, credential: &str, key: &str, body_sha256: &str, now_ms: i64| {
            Check { proof: Proof::Token(&token).attribute(), credential, req: &req, key, body_sha256, now_ms }.diagnose(item)
        };
        assert_eq!(d(&Item::new(), "key_1", "k1", &body, 1_000), Some(Refusal::Unknown));
        assert_eq!(d(&item, "key_1", "k1", &body, 1_000), None);
        assert_eq!(d(&item, "key_1", "k1", &body, 3_000), Some(Refusal::Expired));
        assert_eq!(d(&item, "key_2", "k1", &body, 1_000), Some(Refusal::Credential));
        assert_eq!(d(&item, "key_1", "k2", &body, 1_000), Some(Refusal::Mismatch("idempotency_key")));
        assert_eq!(d(&item, "key_1", "k1", "00", 1_000), Some(Refusal::Mismatch("body_sha256")));
        let mut used = item.clone();
        used.insert("state".into(), s("used"));
        assert_eq!(d(&used, "key_1", "k2", &body, 1_000), Some(Refusal::Used));
        // Its own request again: used, whatever the clock (the reservation may replay it).
        assert_eq!(d(&used, "key_1", "k1", &body, 3_000), Some(Refusal::Used));
    }
}
