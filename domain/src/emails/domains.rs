//! Sending domains: each one an SES identity (Easy DKIM) that one workspace owns. Emails are
//! accepted, and sent, only from a verified domain of the calling workspace (or a subdomain
//! of one), so no tenant can send as another's domain.
//!
//! Creating one writes the domain, its platform-wide claim (`keys::SENDING_DOMAIN_CLAIM`) and
//! the workspace's count in one transaction before SES is asked, so two workspaces racing for
//! a name cannot both get it; if SES then refuses, the three are removed again.
//!
//! A claim is `pending` until the domain verifies, and a pending claim expires
//! ([`CLAIM_PENDING_SECS`]): a name nobody proves within three days is free for the next
//! workspace, which takes the identity over (the former claimant's domain reads `failed` and
//! its deletion leaves the identity alone); the table's TTL removes it. A verified domain owns
//! its subdomains, whatever was claimed first: another workspace cannot claim one (SES is asked
//! when the parent's flag is not yet set), one claimed before reads `failed` from then on, and
//! inbound mail goes to the outermost verified domain. Identities are tagged with the workspace they were made for: one whose creation
//! answer was lost (the create is retried and SES says it exists) is recognised by the tag and
//! taken over; one without it was made outside the API and is not handed to a workspace.
//! Status is refreshed from SES when one domain is read.

use crate::effects::{CreateSendingDomain, DeleteSendingDomain};
use crate::keys;
use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::authority::Grant;
use shared::aws::AwsError;
use shared::events::Event;
use shared::events::EventType;
use shared::ids::Timestamp;
use shared::outbox::Tx;
use shared::store::{self, Item, Record, s, ws_pk};
use shared::{ApiError, ApiResult, App};
use utoipa::ToSchema;

pub use crate::ids::DomainId;

/// Per workspace (a counter item keeps the cap under concurrent creates).
pub const MAX_DOMAINS: i64 = 50;
/// How long an unverified claim holds a name against other workspaces.
pub const CLAIM_PENDING_SECS: i64 = 72 * 3600;

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DomainStatus {
    /// The DNS records are not (yet) seen by SES.
    Pending,
    /// Emails may be sent from it and its subdomains.
    Verified,
    /// SES gave up on the records, or the identity is gone; delete and add it again.
    Failed,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct DnsRecord {
    /// Always `CNAME` (Easy DKIM).
    #[serde(rename = "type")]
    pub record_type: String,
    pub name: String,
    pub value: String,
}

/// The value of `CreateSendingDomain` and `DeleteSendingDomain`: the name mail may leave from
/// (or may no longer), normalised; the domain's id once it exists.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Naming {
    pub domain_id: Option<DomainId>,
    pub name: String,
}

impl crate::effects::Valued for CreateSendingDomain {
    type Value = Naming;
}

impl crate::effects::Valued for DeleteSendingDomain {
    type Value = Naming;
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct SendingDomain {
    /// `dom_...`
    pub id: DomainId,
    /// Always `email_domain`.
    pub object: String,
    /// Lower-cased, without a trailing dot.
    pub name: String,
    pub status: DomainStatus,
    /// The records to publish in the domain's DNS for SES to verify it.
    pub dns_records: Vec<DnsRecord>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub verified_at: Option<Timestamp>,
}

fn record(ws: &WorkspaceId, d: &SendingDomain) -> ApiResult<Record> {
    Record::new(ws_pk(ws), keys::SENDING_DOMAIN.sk(&d.id), d)
}

fn claim_pk(name: &str) -> String {
    keys::SENDING_DOMAIN_CLAIM.pk(name)
}

fn claim_item(ws: &WorkspaceId, d: &SendingDomain) -> Item {
    Item::from([
        ("pk".into(), s(claim_pk(&d.name))),
        ("sk".into(), s(keys::SENDING_DOMAIN_CLAIM.sk(()))),
        ("workspace_id".into(), s(ws)),
        ("domain_id".into(), s(&d.id)),
        ("verified".into(), shared::store::Value::Bool(false)),
        ("pending_until".into(), store::n(chrono::Utc::now().timestamp() + CLAIM_PENDING_SECS)),
        // The table's TTL removes a claim nobody proved (reads treat it as gone once expired).
        ("expires_at".into(), store::n(chrono::Utc::now().timestamp() + CLAIM_PENDING_SECS)),
    ])
}

/// The claim of a name, as stored.
struct Claim {
    workspace_id: WorkspaceId,
    domain_id: DomainId,
    /// Claims from before claims expired carry no state and count as verified.
    verified: bool,
    pending_until: Option<i64>,
}

impl Claim {
    fn of(i: &Item) -> Option<Self> {
        Some(Self {
            workspace_id: WorkspaceId::trusted(store::get_str(i, "workspace_id")?),
            domain_id: DomainId::trusted(store::get_str(i, "domain_id")?),
            verified: !matches!(i.get("verified"), Some(shared::store::Value::Bool(false))),
            pending_until: store::get_i64(i, "pending_until"),
        })
    }
    fn holds(&self, ws: &WorkspaceId, d: &SendingDomain) -> bool {
        self.workspace_id == *ws && self.domain_id == d.id
    }
    /// Verified, or pending within its time.
    fn live(&self, now: i64) -> bool {
        self.verified || self.pending_until.is_none_or(|t| t >= now)
    }
}

/// Mark a name's claim verified (it stops expiring), if `ws`'s domain `id` still holds it.
fn verify_claim(name: &str, ws: &WorkspaceId, id: &str) -> shared::store::Update {
    shared::store::Update::new(claim_pk(name), keys::SENDING_DOMAIN_CLAIM.table.sk, "SET verified = :t REMOVE pending_until, expires_at")
        .when("workspace_id = :ws AND domain_id = :id")
        .value(":t", shared::store::Value::Bool(true))
        .value(":ws", s(ws))
        .value(":id", s(id))
}

fn is_verified(i: &Identity) -> bool {
    status_of(i.verification_status.as_deref(), i.verified_for_sending) == DomainStatus::Verified
}

async fn claim_of(app: &App, name: &str) -> ApiResult<Option<Claim>> {
    Ok(app.db.get(&claim_pk(name), keys::SENDING_DOMAIN_CLAIM.table.sk).await?.as_ref().and_then(Claim::of))
}

/// The parents of a name (`a.b.example.com` -> `b.example.com`, `example.com`).
fn parents(name: &str) -> Vec<String> {
    let labels: Vec<&str> = name.split('.').collect();
    (1..labels.len().saturating_sub(1)).map(|i| labels[i..].join(".")).collect()
}

fn count(ws: &WorkspaceId, delta: i64) -> shared::store::Update {
    store::capped_count(ws_pk(ws), keys::SENDING_DOMAIN_COUNT.table.sk, "domains", delta, MAX_DOMAINS)
}

/// Easy DKIM: three CNAMEs from the tokens SES hands out.
pub fn dkim_records(name: &str, tokens: &[String]) -> Vec<DnsRecord> {
    tokens
        .iter()
        .map(|t| DnsRecord {
            record_type: "CNAME".into(),
            name: format!("{t}._domainkey.{name}"),
            value: format!("{t}.dkim.amazonses.com"),
        })
        .collect()
}

fn status_of(v: Option<&str>, verified_for_sending: bool) -> DomainStatus {
    match v {
        Some("SUCCESS") => DomainStatus::Verified,
        Some("FAILED") => DomainStatus::Failed,
        _ if verified_for_sending => DomainStatus::Verified,
        _ => DomainStatus::Pending,
    }
}

/// What SES says about an identity.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Identity {
    /// Email may be sent from it.
    pub verified_for_sending: bool,
    /// `PENDING`, `SUCCESS`, `FAILED`, `TEMPORARY_FAILURE` or `NOT_STARTED` (absent on create).
    pub verification_status: Option<String>,
    /// The Easy DKIM tokens to publish as CNAME records.
    pub dkim_tokens: Vec<String>,
    /// Its tags (GetEmailIdentity answers them; CreateEmailIdentity does not).
    pub tags: Vec<(String, String)>,
}

fn tokens(d: Option<&aws_sdk_sesv2::types::DkimAttributes>) -> Vec<String> {
    d.map(|d| d.tokens().to_vec()).unwrap_or_default()
}

/// Create a domain identity with Easy DKIM and these tags (`platform-stack` is what the stack's
/// policy lets it manage).
pub async fn create_identity(app: &App, name: &str, tags: &[(&str, &str)]) -> Result<Identity, AwsError> {
    let tags = tags
        .iter()
        .map(|(k, v)| aws_sdk_sesv2::types::Tag::builder().key(*k).value(*v).build())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| AwsError { code: "InvalidTag".into(), message: e.to_string() })?;
    let out = app.ses().create_email_identity().email_identity(name).set_tags((!tags.is_empty()).then_some(tags)).send().await?;
    Ok(Identity { verified_for_sending: out.verified_for_sending_status, dkim_tokens: tokens(out.dkim_attributes()), ..Default::default() })
}

/// The identity's state (`NotFoundException` when there is none).
pub async fn get_identity(app: &App, name: &str) -> Result<Identity, AwsError> {
    let out = app.ses().get_email_identity().email_identity(name).send().await?;
    Ok(Identity {
        verified_for_sending: out.verified_for_sending_status,
        verification_status: out.verification_status().map(|s| s.as_str().to_string()),
        dkim_tokens: tokens(out.dkim_attributes()),
        tags: out.tags().iter().map(|t| (t.key().to_string(), t.value().to_string())).collect(),
    })
}

pub async fn delete_identity(app: &App, name: &str) -> Result<(), AwsError> {
    app.ses().delete_email_identity().email_identity(name).send().await?;
    Ok(())
}

#[track_caller]
fn ses_error(e: AwsError) -> ApiError {
    ApiError::unavailable(format!("SES {e}"))
}

pub async fn load(app: &App, ws: &WorkspaceId, id: &DomainId) -> ApiResult<(SendingDomain, i64)> {
    app.db.get_object(ws, &keys::SENDING_DOMAIN.sk(id)).await?.ok_or_else(|| ApiError::not_found("sending domain"))
}

/// Add a domain: validate, claim, create the SES identity, store its DNS records.
pub async fn create(grant: &Grant, app: &App, ws: &WorkspaceId, raw_name: &str) -> ApiResult<SendingDomain> {
    let name = allowed_name(app, raw_name)?;
    let mut d = SendingDomain::pending(name, shared::ids::Timestamp::now());
    refuse_foreign(app, ws, &d.name).await?;
    grant.authorize_value::<CreateSendingDomain>(&Naming { domain_id: None, name: d.name.clone() })?;
    claim(app, ws, &d).await?;
    let out = match provide_identity(app, ws, &d.name).await {
        Ok(out) => out,
        Err(e) => {
            release(app, ws, &d, 1).await;
            return Err(identity_refused(&d.name, e));
        }
    };
    d.dns_records = dkim_records(&d.name, &out.dkim_tokens);
    d.status = if is_verified(&out) { DomainStatus::Verified } else { DomainStatus::Pending };
    let mut tx = Tx::new().replace(record(ws, &d)?, 1).event(Event::new(ws, EventType::EmailDomainCreated, &d));
    if d.status == DomainStatus::Verified {
        d.verified_at = Some(d.updated_at);
        tx = tx.update(verify_claim(&d.name, ws, &d.id));
    }
    tx.commit(app).await.map_err(store::TxError::stale)?;
    Ok(d)
}

/// The name, normalised, when it is a domain name this deployment may send from.
fn allowed_name(app: &App, raw_name: &str) -> ApiResult<String> {
    let Some(name) = shared::validate::domain_name(raw_name) else {
        return Err(ApiError::validation("name", "must be a domain name such as mail.example.com"));
    };
    if !app.cfg.email.allows_domain(&name) {
        return Err(ApiError::validation("name", "is not under a domain this deployment allows (ALLOWED_SENDING_DOMAINS)"));
    }
    Ok(name)
}

impl SendingDomain {
    /// A new domain, before SES has answered: pending, without DNS records.
    fn pending(name: String, now: shared::ids::Timestamp) -> Self {
        SendingDomain {
            id: DomainId::generate(),
            object: "email_domain".into(),
            name,
            status: DomainStatus::Pending,
            dns_records: vec![],
            created_at: now,
            updated_at: now,
            verified_at: None,
        }
    }
}

fn taken(name: &str) -> ApiError {
    ApiError::conflict(format!("{name} is already a sending domain of a workspace"))
        .with_details(vec![shared::error::ErrorDetail::field("name", "is taken")])
}

/// Refuse a name another workspace holds by verification: under a domain it verified, or its
/// own domain whose claim lapsed while SES verified it.
async fn refuse_foreign(app: &App, ws: &WorkspaceId, name: &str) -> ApiResult<()> {
    // A subdomain of another workspace's verified domain is theirs (it would take their
    // inbound mail, and SES may count it verified through the parent).
    if let Some(parent) = foreign_verified_parent(app, ws, name).await? {
        return Err(ApiError::conflict(format!("{name} is under {parent}, a domain another workspace has verified"))
            .with_details(vec![shared::error::ErrorDetail::field("name", "is a subdomain of another workspace's domain")]));
    }
    // An expired claim of another workspace is taken only if SES has not verified its domain
    // meanwhile (its flag is set when the domain is next read; SES is the truth).
    if let Some(c) = claim_of(app, name).await?
        && c.workspace_id != *ws
        && !c.verified
        && c.pending_until.is_some_and(|t| t < chrono::Utc::now().timestamp())
        && get_identity(app, name).await.is_ok_and(|i| is_verified(&i))
    {
        if let Err(e) = Tx::new().update(verify_claim(name, &c.workspace_id, &c.domain_id)).commit(app).await {
            tracing::info!(domain = %name, error = ?e, "claim not marked verified");
        }
        return Err(taken(name));
    }
    Ok(())
}

/// The domain, its claim (free, or another workspace's lapsed unverified one) and the count,
/// in one transaction: the name's uniqueness and the cap hold under races.
async fn claim(app: &App, ws: &WorkspaceId, d: &SendingDomain) -> ApiResult<()> {
    Tx::new()
        .create(record(ws, d)?.version(1))
        .put_if(
            claim_item(ws, d),
            "attribute_not_exists(pk) OR (verified = :unverified AND pending_until < :now)",
            vec![(":unverified", shared::store::Value::Bool(false)), (":now", store::n(chrono::Utc::now().timestamp()))],
        )
        .update(count(ws, 1))
        .commit(app)
        .await
        .map_err(|e| {
            e.on_condition(|i| match i {
                1 => taken(&d.name),
                2 => ApiError::conflict(format!("a workspace can have at most {MAX_DOMAINS} sending domains")),
                _ => ApiError::conflict("the domain was created concurrently"),
            })
        })
}

/// The SES identity for a claimed name, tagged with its workspace: a new one; this
/// workspace's own, whose creation answer was lost; or, in place of another workspace's that
/// lapsed unverified, a new one (so DKIM records the former claimant published or will
/// publish verify nothing for anyone).
async fn provide_identity(app: &App, ws: &WorkspaceId, name: &str) -> Result<Identity, AwsError> {
    let mut tags = vec![(shared::aws::WORKSPACE_TAG_KEY, &**ws)];
    if let Some(stack) = app.cfg.email.identity_tag.as_deref() {
        tags.push((shared::aws::IDENTITY_TAG_KEY, stack));
    }
    match create_identity(app, name, &tags).await {
        Err(e) if e.code == "AlreadyExistsException" => match get_identity(app, name).await {
            Ok(existing) if made_for(app, &existing) == Some(ws) => Ok(existing),
            Ok(existing) if made_for(app, &existing).is_some() && !is_verified(&existing) => {
                delete_identity(app, name).await?;
                create_identity(app, name, &tags).await
            }
            _ => Err(e),
        },
        other => other,
    }
}

/// What a request is told when SES refused the identity.
fn identity_refused(name: &str, e: AwsError) -> ApiError {
    match e.code.as_str() {
        "AlreadyExistsException" => ApiError::conflict(format!(
            "{name} exists as an SES identity of this AWS account outside the API; an operator must delete it first"
        ))
        .with_details(vec![shared::error::ErrorDetail::field("name", "is an identity the API does not manage")]),
        "LimitExceededException" => ApiError::conflict("the AWS account's SES identity limit is reached"),
        _ => ses_error(e),
    }
}

/// The closest parent of `name` that another workspace has verified: by its claim's flag, or
/// else by asking SES (the flag is set when a domain is next read, and a lapsed claim may be
/// gone while its identity is verified): an identity this stack made for another workspace,
/// verified, owns its subdomains. One BatchGetItem, and one SES call per parent without a
/// flagged claim.
async fn foreign_verified_parent(app: &App, ws: &WorkspaceId, name: &str) -> ApiResult<Option<String>> {
    let names = parents(name);
    if names.is_empty() {
        return Ok(None);
    }
    let keys_: Vec<(String, String)> = names.iter().map(|p| (claim_pk(p), keys::SENDING_DOMAIN_CLAIM.table.sk.to_string())).collect();
    let found = app.db.batch_get(&keys_).await?;
    for p in &names {
        let claim = found.iter().find(|i| store::get_str(i, "pk") == Some(claim_pk(p).as_str())).and_then(Claim::of);
        match &claim {
            Some(c) if c.workspace_id == *ws => continue,
            Some(c) if c.verified => return Ok(Some(p.clone())),
            _ => {}
        }
        let Ok(identity) = get_identity(app, p).await else { continue };
        let Some(owner) = made_for(app, &identity).filter(|o| *o != &**ws).map(String::from) else { continue };
        if !is_verified(&identity) {
            continue;
        }
        if let Some(c) = claim.filter(|c| c.workspace_id == owner)
            && let Err(e) = Tx::new().update(verify_claim(p, &c.workspace_id, &c.domain_id)).commit(app).await
        {
            tracing::info!(domain = %p, error = ?e, "claim not marked verified");
        }
        return Ok(Some(p.clone()));
    }
    Ok(None)
}

/// The workspace this stack's API created the identity for (its tags say so); None for an
/// identity made outside the API.
fn made_for<'a>(app: &App, i: &'a Identity) -> Option<&'a str> {
    let tag = |k: &str| i.tags.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    if tag(shared::aws::IDENTITY_TAG_KEY) != app.cfg.email.identity_tag.as_deref() {
        return None;
    }
    tag(shared::aws::WORKSPACE_TAG_KEY)
}

/// Undo a create whose SES identity could not be made (best effort: a leftover claim is
/// released by deleting the domain).
async fn release(app: &App, ws: &WorkspaceId, d: &SendingDomain, version: i64) {
    let undone = Tx::new()
        .delete_versioned(ws_pk(ws), keys::SENDING_DOMAIN.sk(&d.id), version)
        .delete_if(claim_pk(&d.name), keys::SENDING_DOMAIN_CLAIM.sk(()), "workspace_id = :ws", vec![(":ws", s(ws))])
        .update(count(ws, -1))
        .commit(app)
        .await;
    if let Err(e) = undone {
        tracing::error!(domain = %d.name, error = ?e, "could not release a sending domain after SES refused it");
    }
}

/// Ask SES for the domain's state; store and announce a change.
pub async fn refresh(app: &App, ws: &WorkspaceId, d: SendingDomain, version: i64) -> ApiResult<SendingDomain> {
    let mut claim = claim_of(app, &d.name).await?;
    if claim.is_none() {
        // Its claim expired unproved and was removed, and nobody claimed the name since: it is
        // claimed again, unless the name's identity is another workspace's now (one that took
        // the name over, whose own claim lapsed since) or was made outside the API.
        let ours = match get_identity(app, &d.name).await {
            Ok(i) => made_for(app, &i) == Some(&**ws),
            Err(e) => e.code == "NotFoundException",
        };
        let fresh = claim_item(ws, &d);
        if ours && Tx::new().put_if(fresh.clone(), "attribute_not_exists(pk)", vec![]).commit(app).await.is_ok() {
            claim = Claim::of(&fresh);
        }
    }
    let (status, tokens) = if !claim.as_ref().is_some_and(|c| c.holds(ws, &d)) {
        // Its claim expired unverified and another workspace took the name.
        (DomainStatus::Failed, vec![])
    } else if foreign_verified_parent(app, ws, &d.name).await?.is_some() {
        // Another workspace verified a parent: the subdomain is theirs, whatever SES says of it.
        (DomainStatus::Failed, vec![])
    } else {
        match get_identity(app, &d.name).await {
            Ok(out) => (status_of(out.verification_status.as_deref(), out.verified_for_sending), out.dkim_tokens),
            Err(e) if e.code == "NotFoundException" => (DomainStatus::Failed, vec![]),
            Err(e) => {
                tracing::warn!(domain = %d.name, error = %e, "SES status unavailable; answering the stored one");
                return Ok(d);
            }
        }
    };
    // Verified, the claim stops expiring (also for a domain verified before claims did).
    if status == DomainStatus::Verified
        && let Some(c) = &claim
        && !c.verified
        && let Err(e) = Tx::new().update(verify_claim(&d.name, ws, &d.id)).commit(app).await
    {
        tracing::info!(domain = %d.name, error = ?e, "claim not marked verified (taken meanwhile); the next read retries");
        return Ok(d);
    }
    let mut next = d.clone();
    next.status = status;
    if !tokens.is_empty() {
        next.dns_records = dkim_records(&d.name, &tokens);
    }
    if next == d {
        return Ok(d);
    }
    next.updated_at = shared::ids::Timestamp::now();
    if status == DomainStatus::Verified && d.status != DomainStatus::Verified {
        next.verified_at = Some(next.updated_at);
    }
    let mut tx = Tx::new().replace(record(ws, &next)?, version);
    if status != d.status {
        let kind = match status {
            DomainStatus::Verified => Some(EventType::EmailDomainVerified),
            DomainStatus::Failed => Some(EventType::EmailDomainFailed),
            DomainStatus::Pending => None,
        };
        if let Some(kind) = kind {
            tx = tx.event(Event::new(ws, kind, &next));
        }
    }
    // A concurrent refresh wrote the same news; answer what SES said either way.
    if let Err(e) = tx.commit(app).await {
        tracing::info!(domain = %d.name, error = ?e, "domain refreshed concurrently");
    }
    Ok(next)
}

/// Remove the domain, its claim and its count, then the SES identity.
pub async fn delete(grant: &Grant, app: &App, ws: &WorkspaceId, id: &DomainId) -> ApiResult<SendingDomain> {
    let (d, version) = load(app, ws, id).await?;
    let auth = grant.authorize_value::<DeleteSendingDomain>(&Naming { domain_id: Some(d.id.clone()), name: d.name.clone() })?;
    // Checked before the identity goes: it is the domain the person approved removing.
    auth.approved(&keys::SENDING_DOMAIN.sk(&d.id), version)?;
    // A domain whose expired claim another workspace took leaves that workspace's identity.
    let holds = claim_of(app, &d.name).await?.is_some_and(|c| c.holds(ws, &d));
    let mut tx = Tx::new().delete_versioned(ws_pk(ws), keys::SENDING_DOMAIN.sk(&d.id), version);
    if holds {
        tx = tx.delete_if(
            claim_pk(&d.name),
            keys::SENDING_DOMAIN_CLAIM.sk(()),
            "workspace_id = :ws AND domain_id = :id",
            vec![(":ws", s(ws)), (":id", s(&d.id))],
        );
    }
    tx.update(count(ws, -1)).event(Event::new(ws, EventType::EmailDomainDeleted, &d)).commit(app).await.map_err(store::TxError::stale)?;
    // The identity goes after the claim, and only while nobody has claimed the name since: a
    // workspace that claims it in between gets (and may rebuild) the identity instead. One left
    // behind when SES is unreachable is tagged, so the name's next claimant replaces it.
    if holds && claim_of(app, &d.name).await?.is_none() {
        match delete_identity(app, &d.name).await {
            Ok(()) => {}
            Err(e) if e.code == "NotFoundException" => {}
            Err(e) => tracing::warn!(domain = %d.name, error = %e, "SES identity left behind; the name's next claimant replaces it"),
        }
    }
    Ok(d)
}

/// The names of the workspace's verified domains (one Query: at most `MAX_DOMAINS` items).
pub async fn verified_names(app: &App, ws: &WorkspaceId) -> ApiResult<Vec<String>> {
    let out = app.db.query_page(keys::SENDING_DOMAINS.query(ws, None, MAX_DOMAINS as usize)).await?;
    let all = out.items.into_iter().map(store::from_item::<SendingDomain>).collect::<ApiResult<Vec<_>>>()?;
    Ok(all.into_iter().filter(|d| d.status == DomainStatus::Verified).map(|d| d.name).collect())
}

/// The workspace whose verified sending domain covers this address, with the mailbox (the
/// address less any `+tag`) and the tag. A verified domain owns its subdomains, so the
/// outermost verified domain wins, whoever claimed a subdomain first; expired pending claims
/// count for nothing. Two calls: the claims of the domain and its parents in one read, then
/// their domains' states in another.
pub async fn mailbox_owner(app: &App, address: &str) -> ApiResult<Option<(String, String, Option<String>)>> {
    let Some(addr) = shared::validate::normalise_email(address) else { return Ok(None) };
    let (local, domain) = addr.rsplit_once('@').expect("a normalised address has an @");
    let labels: Vec<&str> = domain.split('.').collect();
    let names: Vec<String> = (0..labels.len().saturating_sub(1)).map(|i| labels[i..].join(".")).collect();
    let keys_: Vec<(String, String)> = names.iter().map(|n| (claim_pk(n), keys::SENDING_DOMAIN_CLAIM.sk(()))).collect();
    let found = app.db.batch_get(&keys_).await?;
    let now = chrono::Utc::now().timestamp();
    // Outermost first (names run from the full domain to its parents).
    let claims: Vec<Claim> = names
        .iter()
        .rev()
        .filter_map(|n| found.iter().find(|i| store::get_str(i, "pk") == Some(claim_pk(n).as_str())).and_then(Claim::of))
        .filter(|c| c.live(now))
        .collect();
    if claims.is_empty() {
        return Ok(None);
    }
    let domain_keys: Vec<(String, String)> =
        claims.iter().map(|c| (ws_pk(&c.workspace_id), keys::SENDING_DOMAIN.sk(&c.domain_id))).collect();
    let domains = app.db.batch_get(&domain_keys).await?;
    let verified = |c: &Claim| {
        domains.iter().any(|i| {
            store::get_str(i, "sk") == Some(keys::SENDING_DOMAIN.sk(&c.domain_id).as_str())
                && store::from_item::<SendingDomain>(i.clone()).is_ok_and(|d| d.status == DomainStatus::Verified)
        })
    };
    let Some(owner) = claims.iter().find(|c| verified(c)) else { return Ok(None) };
    let (mailbox_local, tag) = match local.split_once('+') {
        Some((l, t)) if !l.is_empty() && !t.is_empty() => (l, Some(t.to_string())),
        _ => (local, None),
    };
    Ok(Some((owner.workspace_id.to_string(), format!("{mailbox_local}@{domain}"), tag)))
}

/// May `from` (an address) be sent from one of these verified domains?
pub fn covers(verified: &[String], from: &str) -> bool {
    let domain = from.rsplit_once('@').map_or("", |(_, d)| d).to_ascii_lowercase();
    verified.iter().any(|v| shared::validate::within_domain(&domain, v))
}

/// One page of the sending domains.
pub async fn list(app: &App, ws: &WorkspaceId, after: Option<String>, limit: usize) -> ApiResult<(Vec<SendingDomain>, Option<String>)> {
    shared::request::page(app, keys::SENDING_DOMAINS.query(ws, after, limit)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_status_and_coverage() {
        let r = dkim_records("acme.com", &["abc".into()]);
        assert_eq!(
            r[0],
            DnsRecord { record_type: "CNAME".into(), name: "abc._domainkey.acme.com".into(), value: "abc.dkim.amazonses.com".into() }
        );
        assert_eq!(status_of(Some("SUCCESS"), false), DomainStatus::Verified);
        assert_eq!(status_of(Some("TEMPORARY_FAILURE"), false), DomainStatus::Pending);
        assert_eq!(status_of(Some("FAILED"), false), DomainStatus::Failed);
        assert_eq!(status_of(None, true), DomainStatus::Verified);
        let v = vec!["acme.com".to_string()];
        assert!(covers(&v, "a@acme.com") && covers(&v, "a@Mail.Acme.com"));
        assert!(!covers(&v, "a@notacme.com") && !covers(&v, "acme.com") && !covers(&[], "a@acme.com"));
    }
}
