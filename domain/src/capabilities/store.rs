//! Confirmations in the table: the record, what a confirmation binds (the versions of every
//! object its effect depends on, read when it is issued), the look-up, creation and the list.

use super::{
    AUDIT_RETENTION_SECS, BODY_BOUND, Bound, Capability, Confirmation, ConfirmationStatus, CreateConfirmation, DEFAULT_LIFETIME_SECS,
    MAX_BOUND, MAX_LIFETIME_SECS, MIN_LIFETIME_SECS, all, may_approve, path_fits,
};
use crate::ids::{
    ApiKeyId, BookingId, ChannelId, ConfirmationId, ContactId, ConversationId, DomainId, EndpointId, PostId, ResourceId, ServiceId,
};
use shared::auth::{Principal, WorkspaceId};
use shared::confirmation::{BOUND_ATTR, BoundKey};
use shared::events::EventType;
use shared::keys::CAPABILITY_CONFIRMATION;
use shared::store::{Item, get_i64, get_str, n, s, ws_pk};
use shared::{ApiError, ApiResult};

/// The routes that can cause a capability.
pub fn routes_of(capability: &str) -> impl Iterator<Item = &'static Capability> {
    let name = shared::auth::capability_name(capability).to_string();
    all().iter().filter(move |c| c.capability == name)
}

/// The stored item: the object's fields, with the token's expiry in ms and state for the
/// pipeline's condition, the token's hash, and the audit's TTL in `expires_at`.
pub fn item(ws: &WorkspaceId, c: &Confirmation, bound: &[(Bound, String)], token_hash: &str, token_expires_ms: i64) -> Item {
    let mut item = Item::from([
        ("pk".into(), s(ws_pk(ws))),
        ("sk".into(), s(CAPABILITY_CONFIRMATION.sk(&c.id))),
        ("id".into(), s(&c.id)),
        ("capability".into(), s(&c.capability)),
        ("method".into(), s(&c.method)),
        ("path".into(), s(&c.path)),
        ("idempotency_key".into(), s(&c.idempotency_key)),
        ("body_sha256".into(), s(&c.body_sha256)),
        ("preview_summary".into(), s(&c.preview_summary)),
        ("approved_by".into(), s(&c.approved_by)),
        ("confirmed_by".into(), s(&c.confirmed_by)),
        ("api_key_id".into(), s(&c.api_key_id)),
        ("state".into(), s("issued")),
        ("token_hash".into(), s(token_hash)),
        ("token_expires_ms".into(), n(token_expires_ms)),
        ("token_expires_at".into(), s(c.expires_at.to_string())),
        ("created_at".into(), s(c.created_at.to_string())),
    ]);
    item.insert("expires_at".into(), n(token_expires_ms / 1000 + AUDIT_RETENTION_SECS));
    if let Some(d) = &c.effect_digest {
        item.insert(shared::confirmation::EFFECT_DIGEST_ATTR.into(), s(d));
    }
    if !bound.is_empty() {
        // The pipeline checks the keys (shared::confirmation); the object shows the previews.
        let previews = bound.iter().map(|(b, _)| b.clone()).collect::<Vec<_>>();
        let keys = bound.iter().map(|(b, sk)| BoundKey { object: b.object.clone(), id: b.id.clone(), sk: sk.clone(), version: b.version });
        item.insert("bound".into(), s(serde_json::to_string(&previews).expect("bound serializes")));
        item.insert(BOUND_ATTR.into(), s(serde_json::to_string(&keys.collect::<Vec<_>>()).expect("keys serialize")));
    }
    item
}

/// The objects whose state decides the effect of the confirmed request, each with its sort key:
/// the object the path names (the post to publish, the webhook to change, the conversation to
/// reply in and its contact, the booking to confirm with its contact, service, resource and
/// templates), and what the body names: contacts (`contact_id`, `subject.contact_id`, the owner
/// of `subject.email` or that nobody owns it), services, resources and templates (for each
/// email of a batch). `path` is the request's path as routed: without percent-escapes (a
/// caller refuses them, as an escaped id would name nothing here and bind nothing). An object that does not exist is bound
/// as absent: creating it before the token is used makes the approval stale too.
pub async fn bind(
    app: &shared::App,
    ws: &WorkspaceId,
    pattern: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> ApiResult<Vec<(Bound, String)>> {
    use crate::{bookings, contacts, emails, helpdesk, webhooks};
    let mut out = Bindings { app, ws, bound: vec![] };
    let id = path.split('/').nth(pattern.split('/').position(|p| p == "{id}").unwrap_or(usize::MAX)).unwrap_or_default();
    let contact = |item: &Item| text(item, "contact_id");
    let area = pattern.split('/').nth(1).unwrap_or_default();
    // The path's id, when it is one of the kind the route names: a malformed one reaches no
    // object (the route answers 404), so nothing is read or bound for it.
    match area {
        // Past this guard the id is well-formed and of the kind the route names: the arms take it as that kind.
        _ if !super::path_id_kind(pattern).is_some_and(|kind| shared::ids::is_valid(kind, id)) => {}
        "posts" => {
            out.add("post", id, crate::keys::POST.sk(&PostId::trusted(id)), |i| text(i, "content")).await?;
        }
        "webhooks" => {
            out.add("webhook_endpoint", id, webhooks::endpoint_sk(&EndpointId::trusted(id)), |i| text(i, "url")).await?;
        }
        "channels" => {
            out.add("channel", id, crate::keys::CHANNEL.sk(&ChannelId::trusted(id)), |i| text(i, "name")).await?;
        }
        "emails" if pattern.starts_with("/emails/domains/") => {
            out.add("sending_domain", id, crate::keys::SENDING_DOMAIN.sk(&DomainId::trusted(id)), |i| text(i, "name")).await?;
        }
        "bookings" => {
            // The notice goes to the booking's contact, from the service's sender, in its
            // template. The booking itself is not bound: confirming it is the write that
            // changes it (and its times change only by a reschedule, itself an effect).
            if let Some(b) = app.db.get(&ws_pk(ws), &bookings::booking_sk(&BookingId::trusted(id))).await? {
                let (c, s, r) = (contact(&b), text(&b, "service_id"), text(&b, "resource_id"));
                out.add("contact", &c, contacts::contact_sk(&ContactId::trusted(&c)), |i| text(i, "email")).await?;
                out.booking_service(&ServiceId::trusted(s)).await?;
                // The notice names the resource and shows times in its zone.
                out.add("resource", &r, bookings::resource_sk(&ResourceId::trusted(&r)), |i| text(i, "name")).await?;
            }
        }
        "helpdesk" => {
            if let Some(c) =
                out.add("conversation", id, helpdesk::conversation_sk(&ConversationId::trusted(id)), |i| text(i, "subject")).await?
            {
                let c = ContactId::trusted(contact(&c));
                out.add("contact", &c, contacts::contact_sk(&c), |i| text(i, "email")).await?;
            }
        }
        _ => {}
    }
    // Only routes whose bodies name contacts, templates or services bind from the body.
    let Some(body) = body.filter(|_| BODY_BOUND.contains(&pattern)) else { return Ok(out.bound) };
    let entries: Vec<&serde_json::Value> = match body.get("emails").and_then(|e| e.as_array()) {
        Some(list) => list.iter().collect(),
        None => vec![body],
    };
    for e in entries {
        // An email goes to its `to` (in the hashed body); its `contact_id` only files it on a
        // timeline. Elsewhere the contact is whom the effect reaches (a portal link, an erasure).
        let named = [e.get("contact_id"), e.get("subject").and_then(|s| s.get("contact_id"))];
        for c in named.into_iter().flatten().filter_map(|c| c.as_str()).filter(|_| e.get("to").is_none()) {
            if let Some(c) = ContactId::parse(c) {
                out.add("contact", &c, contacts::contact_sk(&c), |i| text(i, "email")).await?;
            }
        }
        // A subject named by address is whoever owns the address when the effect runs: bind the
        // owner at its version, or that nobody owns it (a contact taking it makes it stale).
        if let Some(addr) =
            e.get("subject").and_then(|s| s.get("email")).and_then(|a| a.as_str()).and_then(shared::validate::normalise_email)
        {
            out.address(&addr).await?;
        }
        if let Some(svc) = e.get("service_id").and_then(|c| c.as_str()).and_then(ServiceId::parse) {
            out.booking_service(&svc).await?;
        }
        if let Some(r) = e.get("resource_id").and_then(|c| c.as_str()).and_then(ResourceId::parse) {
            out.add("resource", &r, crate::bookings::resource_sk(&r), |i| text(i, "name")).await?;
        }
        if let Some(slug) = e.get("template_slug").and_then(|c| c.as_str()).filter(|s| emails::templates::valid_slug(s)) {
            let vars = e.get("variables").and_then(|v| v.as_object()).cloned().unwrap_or_default();
            let locale = e.get("locale").and_then(|v| v.as_str()).map(String::from);
            out.add("email_template", slug, crate::keys::EMAIL_TEMPLATE.sk(slug), move |i| {
                shared::store::from_item::<emails::templates::Template>(i.clone())
                    .map(|t| emails::templates::render(&emails::templates::pick(&t, locale.as_deref()).1.subject, &vars, false))
                    .unwrap_or_default()
            })
            .await?;
        }
    }
    Ok(out.bound)
}

fn text(item: &Item, name: &str) -> String {
    get_str(item, name).unwrap_or_default().chars().take(200).collect()
}

struct Bindings<'a> {
    app: &'a shared::App,
    ws: &'a WorkspaceId,
    bound: Vec<(Bound, String)>,
}

impl Bindings<'_> {
    /// A booking's notices: the service (its sender) and the templates they are written in.
    async fn booking_service(&mut self, service: &ServiceId) -> ApiResult<()> {
        self.add("service", service, crate::bookings::service_sk(service), |i| text(i, "name")).await?;
        for slug in ["booking_confirmation", "booking_reminder", "booking_rescheduled", "booking_cancelled"] {
            self.add("email_template", slug, crate::keys::EMAIL_TEMPLATE.sk(slug), |i| text(i, "subject")).await?;
        }
        Ok(())
    }

    /// The contact that owns an address, at its version; or, when none does, the address's
    /// claim as absent.
    async fn address(&mut self, addr: &str) -> ApiResult<()> {
        let claim = crate::contacts::email_sk(addr);
        match self.app.db.get(&ws_pk(self.ws), &claim).await?.and_then(|i| get_str(&i, "contact_id").map(String::from)) {
            Some(owner) => {
                self.add("contact", &owner, crate::contacts::contact_sk(&ContactId::trusted(&owner)), |i| text(i, "email")).await?;
            }
            None if !self.bound.iter().any(|(_, k)| *k == claim) => {
                if self.bound.len() == MAX_BOUND {
                    return Err(ApiError::validation("body", format!("the request names more than {MAX_BOUND} objects to bind")));
                }
                let b =
                    Bound { object: "email_address".into(), id: addr.into(), version: 0, preview: "(no contact has this address)".into() };
                self.bound.push((b, claim));
            }
            None => {}
        }
        Ok(())
    }

    /// Bind the object at `sk` (once): at its version, or as absent (version 0) when it does
    /// not exist. Answers its item.
    async fn add(&mut self, object: &str, id: &str, sk: String, preview: impl FnOnce(&Item) -> String) -> ApiResult<Option<Item>> {
        if id.is_empty() || self.bound.iter().any(|(_, k)| *k == sk) {
            return Ok(None);
        }
        let item = self.app.db.get(&ws_pk(self.ws), &sk).await?;
        if self.bound.len() == MAX_BOUND {
            return Err(ApiError::validation(
                "body",
                format!("the request names more than {MAX_BOUND} objects to bind; confirm it in smaller requests"),
            ));
        }
        let (version, preview) = match &item {
            Some(i) => (get_i64(i, "version").unwrap_or(0).max(1), preview(i)),
            None => (0, "(does not exist)".to_string()),
        };
        self.bound.push((Bound { object: object.into(), id: id.into(), version, preview }, sk));
        Ok(item)
    }
}

/// The object of a stored item (an erased preview reads as empty).
pub fn from_item(item: &Item) -> ApiResult<Confirmation> {
    let text = |k: &str| get_str(item, k).unwrap_or_default().to_string();
    let time = |k: &str| get_str(item, k).and_then(shared::ids::Timestamp::parse);
    let at = |k: &str| time(k).ok_or_else(|| ApiError::internal(format!("capability confirmation item without {k}")));
    let id = get_str(item, "id").ok_or_else(|| ApiError::internal("capability confirmation item without id"))?;
    let status = ConfirmationStatus::at(get_str(item, "state"), get_i64(item, "token_expires_ms").unwrap_or(0), shared::ids::now_ms());
    Ok(Confirmation {
        id: ConfirmationId::trusted(id),
        object: "capability_confirmation".into(),
        capability: text("capability"),
        method: text("method"),
        path: text("path"),
        idempotency_key: text("idempotency_key"),
        body_sha256: text("body_sha256"),
        preview_summary: text("preview_summary"),
        approved_by: text("approved_by"),
        confirmed_by: text("confirmed_by"),
        api_key_id: ApiKeyId::trusted(text("api_key_id")),
        status,
        created_at: at("created_at")?,
        expires_at: at("token_expires_at")?,
        used_at: time("used_at"),
        used_by_request_id: get_str(item, "used_by_request_id").map(String::from),
        confirmation_token: None,
        bound: get_str(item, "bound").and_then(|j| serde_json::from_str(j).ok()).unwrap_or_default(),
        effect_digest: get_str(item, shared::confirmation::EFFECT_DIGEST_ATTR).map(String::from),
    })
}

/// Load one confirmation of the workspace.
pub async fn load(app: &shared::App, ws: &WorkspaceId, id: &ConfirmationId) -> ApiResult<Confirmation> {
    let item =
        app.db.get(&ws_pk(ws), &CAPABILITY_CONFIRMATION.sk(id)).await?.ok_or_else(|| ApiError::not_found("capability confirmation"))?;
    from_item(&item)
}

/// Validate and store a confirmation (`capability.confirmed`): the one shown with its token,
/// once, and the one kept (without it) for replays and the audit.
pub async fn create(
    app: &shared::App,
    ws: &WorkspaceId,
    by: &Principal,
    input: CreateConfirmation,
) -> ApiResult<(Confirmation, Confirmation)> {
    let confirmed_by = by.subject.as_str();
    let mut errs = shared::validate::Errors::new();
    let path = shared::confirmation::normalise_path(&input.path);
    let routes: Vec<_> = routes_of(&input.capability).collect();
    let capability = routes.iter().find(|c| input.method == c.method && path_fits(&c.path, &path)).copied();
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
    if !shared::validate::is_sha256_hex(&input.body_sha256) {
        errs.add("body_sha256", "must be the lower-case hex SHA-256 of the request body (64 characters)");
    }
    match &input.effect_digest {
        Some(d) if !shared::validate::is_sha256_hex(d) => {
            errs.add("effect_digest", "must be the lower-case hex SHA-256 an approval request shows as effect_value.digest")
        }
        Some(_) if !super::valued(&input.capability) => errs.add("effect_digest", "this capability's effect is not described by a value"),
        _ => {}
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
    if let Some(c) = capability
        && BODY_BOUND.contains(&c.path.as_str())
        && input.body.is_none()
        && input.body_sha256 != shared::crypto::sha256_hex(b"")
    {
        errs.add(
            "body",
            format!("required for {} {}: the confirmation binds the contacts, templates and services the body names", c.method, c.path),
        );
    }
    let key_id = ApiKeyId::parse(&input.api_key_id);
    if key_id.is_none() {
        errs.add("api_key_id", "not an API key id (key_...)");
    }
    errs.finish()?;
    // Who approves, after what they sent is known good: a member cannot approve an admin's effect.
    may_approve(by, &input.capability, app.cfg.oauth.as_ref(), chrono::Utc::now().timestamp())?;
    let (Some(capability), Some(key_id), now) = (capability, key_id, chrono::Utc::now()) else {
        return Err(ApiError::internal("validated above"));
    };
    let id = shared::ids::new_id("cc");
    let (token, token_hash) = shared::confirmation::new_token(&id);
    let expires = now + chrono::Duration::seconds(lifetime);
    let c = Confirmation {
        id: ConfirmationId::trusted(id),
        object: "capability_confirmation".into(),
        capability: capability.capability.clone(),
        method: capability.method.clone(),
        path,
        idempotency_key: input.idempotency_key,
        body_sha256: input.body_sha256,
        preview_summary: input.preview_summary,
        approved_by: input.approved_by.trim().to_string(),
        confirmed_by: confirmed_by.to_string(),
        api_key_id: key_id.clone(),
        status: ConfirmationStatus::Issued,
        created_at: shared::ids::Timestamp::from(now),
        expires_at: shared::ids::Timestamp::from(expires),
        used_at: None,
        used_by_request_id: None,
        confirmation_token: None,
        bound: vec![],
        effect_digest: input.effect_digest,
    };
    let key = app.db.get(&ws_pk(ws), &crate::keys::API_KEY.sk(&key_id)).await?;
    let live = key.as_ref().is_some_and(|k| get_str(k, "revoked_at").is_none());
    if !live {
        return Err(ApiError::validation("api_key_id", "no live API key of this workspace has this id"));
    }
    let bound = bind(app, ws, &capability.path, &c.path, body.as_ref()).await?;
    let c = Confirmation { bound: bound.iter().map(|(b, _)| b.clone()).collect(), ..c };
    shared::outbox::Tx::new()
        .create(shared::store::Record { item: item(ws, &c, &bound, &token_hash, expires.timestamp_millis()) })
        .event(shared::events::Event::new(ws, EventType::CapabilityConfirmed, &c))
        .commit(app)
        .await
        .map_err(shared::store::TxError::stale)?;
    let shown = Confirmation { confirmation_token: Some(token), ..c.clone() };
    Ok((shown, c))
}

/// The audit trail, oldest first, filtered by capability and key; the page and its next key.
pub async fn list(
    app: &shared::App,
    ws: &WorkspaceId,
    capability: Option<&str>,
    api_key_id: Option<&str>,
    after: Option<String>,
    limit: usize,
) -> ApiResult<(Vec<Confirmation>, Option<String>)> {
    let mut spec = crate::keys::CAPABILITY_CONFIRMATIONS.query(ws, after, limit);
    spec = match (capability, api_key_id) {
        (Some(c), Some(k)) => spec.filter("capability = :c AND api_key_id = :k", vec![(":c", s(c)), (":k", s(k))]),
        (Some(c), None) => spec.filter("capability = :c", vec![(":c", s(c))]),
        (None, Some(k)) => spec.filter("api_key_id = :k", vec![(":k", s(k))]),
        (None, None) => spec,
    };
    let out = app.db.query_page(spec).await?;
    let items = out.items.iter().map(from_item).collect::<ApiResult<Vec<_>>>()?;
    Ok((items, out.next_after))
}
