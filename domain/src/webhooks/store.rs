//! Webhooks in the table: endpoints with their sealed secrets, deliveries, the fan-out
//! markers that keep an event's deliveries single, the look-ups, and the effects that change
//! where events go.

use super::{
    Attempt, DELIVERY_TTL_SECS, Delivery, DeliveryJob, DeliveryStatus, Endpoint, MAX_ATTEMPTS_KEPT, MAX_ENDPOINTS, new_job, secret_aad,
};
use crate::effects::{Authority, CreateWebhook, DeleteWebhook, RotateWebhookSecret, UpdateWebhook};
use crate::ids::{DeliveryId, EndpointId};
use crate::keys;
use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::events::Event;
use shared::events::EventType;
use shared::ids::EventId;
use shared::outbox::Tx;
use shared::store::{self, Item, Record, n, s, ws_pk};
use shared::{ApiError, ApiResult, App};

/// What this area holds about a person: events whose body (kept once, on the event's record)
/// names them, with the deliveries of those events. Both are in the subject's export. An
/// erasure deletes the deliveries and empties the event's record rather than deleting it: the
/// record is what dedupes the event, and a late copy of it (SQS redelivery, the outbox sweep)
/// would otherwise fan the erased body out again.
pub const PRIVACY: &[crate::privacy::Rule] = {
    use crate::privacy::{Erase, Find, Rule};
    &[
        Rule {
            kind: crate::keys::FANOUT_MARKER.kind,
            area: "webhooks",
            find: Find::Mentions,
            export: true,
            erase: Erase::Custom(|a, w, i, _| Box::pin(empty_event_record(a, w, i))),
        },
        Rule {
            kind: crate::keys::WEBHOOK_DELIVERY.kind,
            area: "webhooks",
            find: Find::WithParent(crate::keys::FANOUT_MARKER.kind.name, |event| {
                listed_deliveries(event).iter().map(|(ep, d)| delivery_sk(ep, d)).collect()
            }),
            export: true,
            erase: Erase::Delete,
        },
    ]
};

/// A secret as stored: sealed with the platform key, bound to its endpoint.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct StoredSecret {
    pub sealed: String,
    /// Unix seconds after which it no longer signs (rotated-out secrets).
    pub expires_at: Option<i64>,
}

pub struct StoredEndpoint {
    pub endpoint: Endpoint,
    pub secrets: Vec<StoredSecret>,
    pub version: i64,
}

pub fn endpoint_sk(id: &EndpointId) -> String {
    keys::WEBHOOK_ENDPOINT.sk(id)
}

pub const COUNT_SK: &str = keys::WEBHOOK_COUNT.kind.table.sk;

impl StoredEndpoint {
    pub fn from_item(item: Item) -> ApiResult<Self> {
        let version = store::get_i64(&item, "version").unwrap_or(0);
        let secrets = match item.get("secrets") {
            Some(v) => store::from_attribute(v)?,
            None => vec![],
        };
        Ok(Self { endpoint: store::from_item(item)?, secrets, version })
    }

    pub fn record(&self, ws: &WorkspaceId) -> ApiResult<Record> {
        let secrets = store::to_attribute(&self.secrets)?;
        Ok(Record::new(ws_pk(ws), endpoint_sk(&self.endpoint.id), &self.endpoint)?.attr("secrets", secrets))
    }

    /// The signing keys valid now, newest first.
    pub async fn signing_keys(&self, app: &App, ws: &WorkspaceId) -> ApiResult<Vec<Vec<u8>>> {
        let platform = app.platform_secret().await?;
        let now = chrono::Utc::now().timestamp();
        let aad = secret_aad(ws, &self.endpoint.id);
        self.secrets
            .iter()
            .filter(|s| s.expires_at.is_none_or(|t| t > now))
            .map(|s| {
                let secret = String::from_utf8(platform.open(&aad, &s.sealed)?).map_err(|e| ApiError::internal(e))?;
                shared::signing::secret_key(&secret).map_err(|e| ApiError::internal(e))
            })
            .collect()
    }
}

/// Seal a new `whsec_` secret for an endpoint; returns (shown-once secret, stored form).
pub async fn new_secret(app: &App, ws: &WorkspaceId, endpoint_id: &str) -> ApiResult<(String, StoredSecret)> {
    let platform = app.platform_secret().await?;
    let secret = shared::signing::generate_secret();
    let sealed = platform.seal(&secret_aad(ws, endpoint_id), secret.as_bytes());
    Ok((secret, StoredSecret { sealed, expires_at: None }))
}

pub async fn load_endpoint(app: &App, ws: &WorkspaceId, id: &EndpointId) -> ApiResult<Option<StoredEndpoint>> {
    match app.db.get(&ws_pk(ws), &endpoint_sk(id)).await? {
        Some(item) => Ok(Some(StoredEndpoint::from_item(item)?)),
        None => Ok(None),
    }
}

/// Every endpoint of a workspace (at most `MAX_ENDPOINTS`, so one Query page).
pub async fn workspace_endpoints(app: &App, ws: &WorkspaceId) -> ApiResult<Vec<StoredEndpoint>> {
    let out = app.db.query_page(keys::WEBHOOK_ENDPOINTS.query(ws, None, 100)).await?;
    out.items.into_iter().map(StoredEndpoint::from_item).collect()
}

/// A delivery with what only the dispatcher needs.
pub struct StoredDelivery {
    pub delivery: Delivery,
    /// The signed payload, byte for byte: the event's body, stored once per event (its
    /// fan-out record), not once per delivery, so an event to many endpoints stays within a
    /// transaction's size. Empty until [`load_event_body`] fills it.
    pub body: String,
    /// Deliveries written before bodies moved to the event record carry their own.
    body_inline: bool,
    /// Automatic retries since the delivery (or its last manual retry) started.
    pub retries: u32,
    /// Only the queue message carrying this token may work on the delivery.
    pub job: String,
    pub version: i64,
}

pub fn delivery_sk(endpoint_id: &EndpointId, delivery_id: &DeliveryId) -> String {
    keys::WEBHOOK_DELIVERY.sk((endpoint_id, delivery_id))
}

pub fn deliveries_gsi1(ws: &WorkspaceId, endpoint_id: &EndpointId, status: DeliveryStatus) -> String {
    keys::WEBHOOK_DELIVERY.gsi1_pk((ws, endpoint_id, status.as_str()))
}

impl StoredDelivery {
    pub fn new(endpoint_id: &str, event: &shared::events::Event) -> Self {
        let now = shared::ids::Timestamp::now();
        Self {
            delivery: Delivery {
                id: crate::ids::DeliveryId::generate(),
                object: "webhook_delivery".into(),
                endpoint_id: crate::ids::EndpointId::trusted(endpoint_id),
                event_id: event.id.clone(),
                event_type: event.kind.clone(),
                status: DeliveryStatus::Pending,
                attempt_count: 0,
                attempts: vec![],
                next_attempt_at: Some(now),
                created_at: now,
                updated_at: now,
            },
            body: event.body(),
            body_inline: false,
            retries: 0,
            job: new_job(),
            version: 0,
        }
    }

    pub fn from_item(item: Item) -> ApiResult<Self> {
        let version = store::get_i64(&item, "version").unwrap_or(0);
        let body = store::get_str(&item, "body").unwrap_or_default().to_string();
        let job = store::get_str(&item, "job").unwrap_or_default().to_string();
        let retries = store::get_i64(&item, "retries").unwrap_or(0) as u32;
        Ok(Self { delivery: store::from_item(item)?, body_inline: !body.is_empty(), body, retries, job, version })
    }

    pub fn sk(&self) -> String {
        delivery_sk(&self.delivery.endpoint_id, &self.delivery.id)
    }

    /// The item at `version` (the caller's condition decides what it may replace).
    pub fn record(&self, ws: &WorkspaceId, version: i64) -> ApiResult<Record> {
        let created = self.delivery.created_at.timestamp();
        let rec = Record::new(ws_pk(ws), self.sk(), &self.delivery)?
            .gsi1(deliveries_gsi1(ws, &self.delivery.endpoint_id, self.delivery.status), self.sk());
        let rec = if self.body_inline { rec.attr("body", s(&self.body)) } else { rec };
        Ok(rec
            .attr("job", s(&self.job))
            .attr("retries", n(self.retries as i64))
            .attr("expires_at", n(created + DELIVERY_TTL_SECS))
            .version(version))
    }

    /// Save after an attempt: only if nobody else saved it since it was read.
    pub async fn save(&mut self, app: &App, ws: &WorkspaceId) -> ApiResult<bool> {
        let rec = self.record(ws, self.version + 1)?;
        // Never re-creates a delivery that is gone (erased, or expired) mid-attempt.
        let saved = app.db.put(rec.item).when("version = :v").value(":v", n(self.version)).apply().await?.is_some();
        if saved {
            self.version += 1;
        }
        Ok(saved)
    }

    /// The queue message allowed to work on this delivery (its current token).
    pub fn job(&self, ws: &WorkspaceId) -> DeliveryJob {
        DeliveryJob {
            workspace_id: ws.clone(),
            endpoint_id: self.delivery.endpoint_id.clone(),
            delivery_id: self.delivery.id.clone(),
            job: self.job.clone(),
            event_id: Some(self.delivery.event_id.clone()),
        }
    }

    pub fn push_attempt(&mut self, a: Attempt) {
        self.delivery.attempt_count = a.number;
        self.delivery.attempts.push(a);
        if self.delivery.attempts.len() > MAX_ATTEMPTS_KEPT {
            self.delivery.attempts.remove(0);
        }
        self.delivery.updated_at = shared::ids::Timestamp::now();
    }
}

pub async fn load_delivery(
    app: &App,
    ws: &WorkspaceId,
    endpoint_id: &EndpointId,
    delivery_id: &DeliveryId,
) -> ApiResult<Option<StoredDelivery>> {
    match app.db.get(&ws_pk(ws), &delivery_sk(endpoint_id, delivery_id)).await? {
        Some(item) => Ok(Some(StoredDelivery::from_item(item)?)),
        None => Ok(None),
    }
}

pub fn event_record_sk(event_id: &EventId) -> String {
    keys::FANOUT_MARKER.sk(event_id)
}

/// A fan-out record with neither body nor deliveries: the event counts as fanned out, so any
/// copy of it still queued sends nothing.
fn withdrawn_record(ws: &WorkspaceId, event_id: &EventId) -> Item {
    Item::from([
        ("pk".into(), s(ws_pk(ws))),
        ("sk".into(), s(event_record_sk(event_id))),
        ("withdrawn".into(), shared::store::Value::Bool(true)),
        ("expires_at".into(), n(chrono::Utc::now().timestamp() + DELIVERY_TTL_SECS + 86_400)),
    ])
}

/// Erasure of an outbox event that names the subject: its fan-out record is written first
/// without body or deliveries (if the event was not fanned out yet), so a copy still in the
/// events queue finds the event done and sends nothing; then the outbox record goes.
/// The deliveries an event's fan-out record lists (`deliveries`: `<endpoint id>/<delivery id>`,
/// written by the fan-out).
pub(crate) fn listed_deliveries(record: &Item) -> Vec<(EndpointId, DeliveryId)> {
    let Some(shared::store::Value::Ss(list)) = record.get("deliveries") else { return vec![] };
    list.iter().filter_map(|k| k.split_once('/')).map(|(ep, d)| (EndpointId::trusted(ep), DeliveryId::trusted(d))).collect()
}

pub async fn withdraw_event(app: &App, ws: &WorkspaceId, item: Item, _subject: &crate::privacy::Subject) -> ApiResult<()> {
    let (Some(pk), Some(id)) = (store::get_str(&item, "pk"), store::get_str(&item, "sk")) else { return Ok(()) };
    // An existing record (the event fanned out meanwhile) stays as it is.
    app.db.put(withdrawn_record(ws, &EventId::trusted(id))).when("attribute_not_exists(pk)").apply().await?;
    app.db.delete(pk, id).await
}

/// Erasure of an event already fanned out (its deliveries are erased before it): the record
/// keeps only its key, `withdrawn`, so it still deduplicates the event. One update removes the
/// body and the delivery list and answers the list as it was: a replay adds a delivery only
/// while the body is there, so the old list names every delivery ever added, one a replay
/// added after the deliveries were erased included, and those are deleted too.
async fn empty_event_record(app: &App, ws: &WorkspaceId, item: Item) -> ApiResult<()> {
    let Some(sk) = store::get_str(&item, "sk") else { return Ok(()) };
    let pk = ws_pk(ws);
    let old = app
        .db
        .update(&pk, sk, "REMOVE body, deliveries SET withdrawn = :t")
        .when("attribute_exists(pk)")
        .value(":t", shared::store::Value::Bool(true))
        .returning(shared::store::Returning::Old)
        .apply()
        .await?
        .unwrap_or_default();
    for (endpoint_id, delivery_id) in listed_deliveries(&old) {
        app.db.delete(&pk, &delivery_sk(&endpoint_id, &delivery_id)).await?;
    }
    Ok(())
}

/// The fan-out record of one event: its body, once, and the deliveries it created (none when
/// only a disabled endpoint was due it: kept for a replay).
pub fn event_record(ws: &WorkspaceId, ev: &shared::events::Event, deliveries: Vec<String>) -> Item {
    let mut item = Item::from([
        ("pk".into(), s(ws_pk(ws))),
        ("sk".into(), s(event_record_sk(&ev.id))),
        ("body".into(), s(ev.body())),
        // Outlives every delivery that signs it (a manual retry may come late).
        ("expires_at".into(), n(chrono::Utc::now().timestamp() + DELIVERY_TTL_SECS + 86_400)),
    ]);
    // DynamoDB has no empty sets: an event only a disabled endpoint was due has none yet.
    if !deliveries.is_empty() {
        item.insert("deliveries".into(), shared::store::Value::Ss(deliveries));
    }
    item
}

/// Read the event body of `x` unless it has one (new deliveries keep it in the event record).
pub async fn load_event_body(app: &App, ws: &WorkspaceId, x: &mut StoredDelivery) -> ApiResult<()> {
    if !x.body.is_empty() {
        return Ok(());
    }
    let item = app.db.get(&ws_pk(ws), &event_record_sk(&x.delivery.event_id)).await?;
    x.body = item.as_ref().and_then(|i| store::get_str(i, "body")).unwrap_or_default().to_string();
    if x.body.is_empty() {
        return Err(ApiError::internal(format!("event {} of delivery {} has no stored body", x.delivery.event_id, x.delivery.id)));
    }
    Ok(())
}

/// A delivery with its event's body, read in one round trip when the job names the event.
pub async fn load_delivery_for(app: &App, job: &DeliveryJob) -> ApiResult<Option<StoredDelivery>> {
    let ws = &job.workspace_id;
    let Some(event_id) = &job.event_id else {
        let Some(mut x) = load_delivery(app, ws, &job.endpoint_id, &job.delivery_id).await? else { return Ok(None) };
        load_event_body(app, ws, &mut x).await?;
        return Ok(Some(x));
    };
    let (pk, dsk, esk) = (ws_pk(ws), delivery_sk(&job.endpoint_id, &job.delivery_id), event_record_sk(event_id));
    let items = app.db.batch_get(&[(pk.clone(), dsk.clone()), (pk, esk.clone())]).await?;
    let sk_of = |i: &Item| store::get_str(i, "sk").unwrap_or_default().to_string();
    let Some(item) = items.iter().find(|i| sk_of(i) == dsk).cloned() else { return Ok(None) };
    let mut x = StoredDelivery::from_item(item)?;
    if x.body.is_empty() {
        x.body = items.iter().find(|i| sk_of(i) == esk).and_then(|i| store::get_str(i, "body")).unwrap_or_default().to_string();
    }
    load_event_body(app, ws, &mut x).await?;
    Ok(Some(x))
}

/// A `webhook.test` event for one endpoint only (whatever its event types), written as a
/// fan-out writes one (the event's body in its record, the delivery beside it) and queued.
pub async fn queue_test(app: &App, ws: &WorkspaceId, endpoint_id: &str) -> ApiResult<StoredDelivery> {
    let event =
        Event::new(ws, EventType::WebhookTest, &serde_json::json!({"endpoint_id": endpoint_id, "message": "This is a test event."}));
    let d = StoredDelivery::new(endpoint_id, &event);
    let record = event_record(ws, &event, vec![format!("{endpoint_id}/{}", d.delivery.id)]);
    Tx::new()
        .put_if(record, "attribute_not_exists(pk)", vec![])
        .create(d.record(ws, 1)?)
        .commit(app)
        .await
        .map_err(|e| e.on_condition(|_| ApiError::conflict("the delivery exists already")))?;
    enqueue(app, &d.job(ws), 0).await?;
    Ok(d)
}

/// Queue a delivery attempt after `delay_secs` (SQS allows at most 15 minutes of delay; the
/// dispatcher hides the message again until the delivery is due).
pub async fn enqueue(app: &App, job: &DeliveryJob, delay_secs: u64) -> ApiResult<()> {
    let body = serde_json::to_string(job).expect("jobs serialize");
    app.enqueue(&app.cfg.deliveries_queue_url, &body, delay_secs.min(900) as i64)
        .await
        .map_err(|e| ApiError::unavailable(format!("deliveries queue: {e}")))
}

fn count_update(ws: &WorkspaceId, delta: i64) -> shared::store::Update {
    store::capped_count(ws_pk(ws), COUNT_SK, "endpoints", delta, MAX_ENDPOINTS)
}

/// The effect `CreateWebhook`: a new destination (within the workspace's cap), with its event.
pub async fn create_endpoint(auth: &Authority<CreateWebhook>, app: &App, ws: &WorkspaceId, rec: &StoredEndpoint) -> ApiResult<()> {
    auth.tx(&[])?
        .update(count_update(ws, 1))
        .create(rec.record(ws)?.version(1))
        .event(Event::new(ws, EventType::WebhookEndpointCreated, &rec.endpoint))
        .commit(app)
        .await
        .map_err(|e| {
            e.on_condition(|i| match i {
                0 => ApiError::conflict(format!("a workspace can have at most {MAX_ENDPOINTS} webhook endpoints")),
                _ => ApiError::conflict("the endpoint was created concurrently"),
            })
        })
}

/// The effect `UpdateWebhook`: a changed destination (URL, events, state), as read at `rec.version`.
pub async fn update_endpoint(auth: &Authority<UpdateWebhook>, app: &App, ws: &WorkspaceId, rec: &StoredEndpoint) -> ApiResult<()> {
    let sk = endpoint_sk(&rec.endpoint.id);
    save_endpoint(app, ws, rec, EventType::WebhookEndpointUpdated, auth.tx(&[(&sk, rec.version)])?).await
}

/// The effect `RotateWebhookSecret`: the endpoint with its new secret list.
pub async fn rotate_endpoint_secret(
    auth: &Authority<RotateWebhookSecret>,
    app: &App,
    ws: &WorkspaceId,
    rec: &StoredEndpoint,
) -> ApiResult<()> {
    let sk = endpoint_sk(&rec.endpoint.id);
    save_endpoint(app, ws, rec, EventType::WebhookEndpointSecretRotated, auth.tx(&[(&sk, rec.version)])?).await
}

async fn save_endpoint(app: &App, ws: &WorkspaceId, rec: &StoredEndpoint, event: EventType, tx: Tx) -> ApiResult<()> {
    tx.replace(rec.record(ws)?, rec.version).event(Event::new(ws, event, &rec.endpoint)).commit(app).await.map_err(store::TxError::stale)
}

/// The effect `DeleteWebhook`.
pub async fn delete_endpoint(auth: &Authority<DeleteWebhook>, app: &App, ws: &WorkspaceId, rec: &StoredEndpoint) -> ApiResult<()> {
    let sk = endpoint_sk(&rec.endpoint.id);
    auth.tx(&[(&sk, rec.version)])?
        .delete_versioned(ws_pk(ws), sk.clone(), rec.version)
        .update(count_update(ws, -1))
        .event(Event::new(ws, EventType::WebhookEndpointDeleted, &rec.endpoint))
        .commit(app)
        .await
        .map_err(store::TxError::stale)
}
