//! Deals in the table: the record and keys, the writes of a deal's life with their events
//! and timeline entries, the look-up and the list.

use super::{Change, CreateDeal, Deal, DealId, DealStatus, UpdateDeal};
use crate::ids::ContactId;
use crate::keys;
use serde::Deserialize;
use shared::auth::WorkspaceId;
use shared::events::{Event, EventType};
use shared::ids::Timestamp;
use shared::outbox::Tx;
use shared::store::{self, Record, TxError, n, s, ws_pk};
use shared::{ApiResult, App};

/// What this area holds about a person: deals linked to their contact. An erasure keeps the
/// deal (its value is the business's) and removes the link.
pub const PRIVACY: &[crate::privacy::Rule] = &[crate::privacy::Rule {
    kind: keys::DEAL.kind,
    area: "deals",
    find: crate::privacy::Find::ContactIndex(keys::DEALS_OF_CONTACT.whole()),
    export: true,
    erase: crate::privacy::Erase::Remove(&["contact_id", "gsi2pk", "gsi2sk"]),
}];

pub fn record(ws: &WorkspaceId, d: &Deal) -> ApiResult<Record> {
    let mut rec =
        Record::new(ws_pk(ws), keys::DEAL.sk(&d.id), d)?.gsi1(keys::DEAL.gsi1_pk((ws, d.status.as_str())), keys::DEAL.gsi1_sk(&d.id));
    if let Some(c) = &d.contact_id {
        rec = rec.gsi2(keys::DEAL.gsi2_pk((ws, c)), keys::DEAL.gsi2_sk(&d.id));
    }
    Ok(rec)
}

/// The contact must exist when the deal is written (the transaction's first item), and its
/// timeline records the change.
fn with_contact(ws: &WorkspaceId, d: &Deal, kind: &str, summary: String, mut tx: Tx) -> ApiResult<Tx> {
    if let Some(c) = &d.contact_id {
        tx = tx.check(ws_pk(ws), crate::contacts::contact_sk(c), "attribute_exists(pk)");
        tx = tx.put(crate::contacts::activity(
            ws,
            c,
            kind,
            summary,
            serde_json::json!({"deal_id": d.id, "title": d.title, "status": d.status}),
        )?);
    }
    Ok(tx)
}

fn no_contact() -> shared::ApiError {
    shared::ApiError::validation("contact_id", "no such contact in this workspace")
}

/// A deal of the workspace with its version; 404 when there is none.
pub async fn load(app: &App, ws: &WorkspaceId, id: &DealId) -> ApiResult<(Deal, i64)> {
    app.db.get_object(ws, &keys::DEAL.sk(id)).await?.ok_or_else(|| shared::ApiError::not_found("deal"))
}

/// Validate and write a new open deal with `deal.created`.
pub async fn create(app: &App, ws: &WorkspaceId, input: CreateDeal) -> ApiResult<Deal> {
    let d = Deal::open(input, Timestamp::now())?;
    let tx = with_contact(ws, &d, "deal.created", format!("Deal created: {}", d.title), Tx::new())?;
    let has_contact = d.contact_id.is_some();
    tx.create(record(ws, &d)?.version(1)).event(Event::new(ws, EventType::DealCreated, &d)).commit(app).await.map_err(|e| {
        e.on_condition(|i| if has_contact && i == 0 { no_contact() } else { shared::ApiError::conflict("the deal exists") })
    })?;
    Ok(d)
}

/// Apply a patch to a loaded deal and write it with its transition's event; the deal as it
/// now is (unchanged when the patch changes nothing).
pub async fn update(app: &App, ws: &WorkspaceId, old: Deal, version: i64, input: UpdateDeal) -> ApiResult<Deal> {
    let Some(Change { deal: d, transition }) = old.apply(input, shared::ids::Timestamp::now())? else { return Ok(old) };
    let has_contact = d.contact_id.is_some();
    let tx = with_contact(ws, &d, transition.event_type().as_str(), transition.summary(&d), Tx::new())?;
    tx.replace(record(ws, &d)?, version).event(Event::new(ws, transition.event_type(), &d)).commit(app).await.map_err(|e| match e {
        TxError::Condition(0) if has_contact => no_contact(),
        other => other.stale(),
    })?;
    Ok(d)
}

/// Delete a deal with `deal.deleted`.
pub async fn delete(app: &App, ws: &WorkspaceId, d: &Deal, version: i64) -> ApiResult<()> {
    Tx::new()
        .delete_versioned(ws_pk(ws), keys::DEAL.sk(&d.id), version)
        .event(Event::new(ws, EventType::DealDeleted, d))
        .commit(app)
        .await
        .map_err(TxError::stale)
}

/// A deleted contact's deals stay, unlinked (`contact_id` null, out of GSI2), each in its own
/// transaction with its `deal.updated` event.
pub async fn unlink_contact(app: &App, ws: &WorkspaceId, contact_id: &ContactId) -> ApiResult<()> {
    let mut after = None;
    loop {
        let spec = keys::DEALS_OF_CONTACT.query((ws, contact_id), after, 100);
        let out = app.db.query_keys_then_get(spec).await?;
        let work = out.items.into_iter().map(|item| async move {
            let mut deal = store::item_json(item.clone());
            let now = shared::ids::Timestamp::now();
            deal["contact_id"] = serde_json::Value::Null;
            deal["updated_at"] = serde_json::Value::String(now.to_string());
            let sk = store::get_str(&item, "sk").unwrap_or_default().to_string();
            let u = shared::store::Update::new(
                ws_pk(ws),
                &sk,
                "SET contact_id = :null, updated_at = :now, version = version + :one REMOVE gsi2pk, gsi2sk",
            )
            .when("contact_id = :cid")
            .value(":null", shared::store::Value::Null(true))
            .value(":now", s(now.to_string()))
            .value(":one", n(1))
            .value(":cid", s(contact_id));
            if let Some(o) = deal.as_object_mut() {
                o.retain(|k, _| !matches!(k.as_str(), "pk" | "sk" | "version" | "gsi1pk" | "gsi1sk" | "gsi2pk" | "gsi2sk"));
            }
            match Tx::new().update(u).event(Event::new(ws, EventType::DealUpdated, &deal)).commit(app).await {
                Ok(()) | Err(TxError::Condition(_)) => Ok(()),
                Err(TxError::Api(e)) => Err(e),
            }
        });
        futures_util::future::try_join_all(work).await?;
        match out.next_after {
            Some(a) => after = Some(a),
            None => return Ok(()),
        }
    }
}

/// The filters of `GET /deals` (`limit` and `cursor` are the page's); they combine.
#[derive(Deserialize)]
pub struct ListDeals {
    pub status: Option<DealStatus>,
    pub stage: Option<String>,
    #[serde(default)]
    pub contact_id: Option<ContactId>,
}

impl ListDeals {
    /// The filters as a page's cursor binds them.
    pub fn bound(&self) -> [(&'static str, Option<&str>); 3] {
        [("status", self.status.map(DealStatus::as_str)), ("stage", self.stage.as_deref()), ("contact_id", self.contact_id.as_deref())]
    }
}

/// One page of deals in creation order after `after`, and the key to go on from: a contact's
/// deals by its index (keys, then the deals by key; the other filters apply to the page), or
/// the deals (by status when asked) with the stage as the query's filter.
pub async fn list(
    app: &App,
    ws: &WorkspaceId,
    q: &ListDeals,
    after: Option<String>,
    limit: usize,
) -> ApiResult<(Vec<Deal>, Option<String>)> {
    if let Some(c) = &q.contact_id {
        let spec = keys::DEALS_OF_CONTACT.query((ws, c), after, limit);
        let (deals, next) = shared::request::keyed_page::<Deal>(app, spec).await?;
        let keep = |d: &Deal| q.status.is_none_or(|p| d.status == p) && q.stage.as_deref().is_none_or(|st| d.stage == st);
        return Ok((deals.into_iter().filter(keep).collect(), next));
    }
    let mut spec = match q.status {
        Some(st) => keys::DEALS_BY_STATUS.query((ws, st.as_str()), after, limit),
        None => keys::DEALS.query(ws, after, limit),
    };
    if let Some(st) = &q.stage {
        spec = spec.filter("stage = :stage", vec![(":stage", s(st))]);
    }
    shared::request::page::<Deal>(app, spec).await
}
