//! Deals: an amount in minor units with its currency, a free-text stage while open, an
//! optional contact, and the lifecycle open -> won | lost (lost needs a reason), with
//! reopening allowed and recorded. Keys: `keys::DEAL` (GSI1 serves the status filter; GSI2,
//! only while linked, a contact's deals). State changes are [`Deal::apply`], a pure function.

use crate::ids::ContactId;
use crate::keys;
use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::events::Event;
use shared::events::EventType;
use shared::ids::Timestamp;
use shared::outbox::Tx;
use shared::store::{self, Record, TxError, n, s, ws_pk};
use shared::validate::{Errors, Patch};
use shared::{ApiResult, App};
use std::collections::BTreeMap;
use utoipa::ToSchema;

pub use crate::ids::DealId;

pub const MAX_VALUE: i64 = 1_000_000_000_000_000;

/// What this area holds about a person: deals linked to their contact. An erasure keeps the
/// deal (its value is the business's) and removes the link.
pub const PRIVACY: &[crate::privacy::Rule] = &[crate::privacy::Rule {
    kind: keys::DEAL,
    area: "deals",
    find: crate::privacy::Find::ContactIndex(keys::DEALS_OF_CONTACT),
    export: true,
    erase: crate::privacy::Erase::Remove(&["contact_id", "gsi2pk", "gsi2sk"]),
}];

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DealStatus {
    Open,
    Won,
    Lost,
}

impl DealStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Won => "won",
            Self::Lost => "lost",
        }
    }
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct Deal {
    /// `deal_...`
    pub id: DealId,
    /// Always `deal`.
    pub object: String,
    pub title: String,
    /// In minor units of `currency` (cents for EUR), 0 or more.
    pub value: i64,
    /// ISO 4217, e.g. `EUR`.
    pub currency: String,
    pub stage: String,
    pub status: DealStatus,
    /// `ct_...`; null when unlinked (also when the contact was deleted).
    pub contact_id: Option<ContactId>,
    /// `YYYY-MM-DD`.
    #[schema(format = Date)]
    pub expected_close_date: Option<String>,
    /// Required when lost.
    pub lost_reason: Option<String>,
    /// Set when the deal is won or lost, cleared when reopened.
    pub closed_at: Option<Timestamp>,
    /// The last time a closed deal was reopened.
    pub reopened_at: Option<Timestamp>,
    pub metadata: BTreeMap<String, String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

pub fn record(ws: &WorkspaceId, d: &Deal) -> ApiResult<Record> {
    let mut rec = Record::new(ws_pk(ws), keys::DEAL.sk(&[&d.id]), d)?
        .gsi1(keys::DEAL.gsi1_pk(&[ws, d.status.as_str()]), keys::DEAL.gsi1_sk(&[&d.id]));
    if let Some(c) = &d.contact_id {
        rec = rec.gsi2(keys::DEAL.gsi2_pk(&[ws, c]), keys::DEAL.gsi2_sk(&[&d.id]));
    }
    Ok(rec)
}

pub fn check_common(errs: &mut Errors, d: &Deal) {
    errs.text("title", &d.title, 1, 200);
    errs.text("stage", &d.stage, 1, 100);
    if !(0..=MAX_VALUE).contains(&d.value) {
        errs.add("value", "must be 0 or more (minor units), at most 10^15");
    }
    if !shared::validate::is_currency(&d.currency) {
        errs.add("currency", "must be an ISO 4217 code like EUR");
    }
    if let Some(date) = &d.expected_close_date
        && chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").is_err()
    {
        errs.add("expected_close_date", "must be a date like 2026-12-31");
    }
    if let Some(r) = &d.lost_reason {
        errs.text("lost_reason", r, 1, 500);
    }
    if d.status == DealStatus::Lost && d.lost_reason.is_none() {
        errs.add("lost_reason", "is required when a deal is lost");
    }
    errs.metadata("metadata", &d.metadata);
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct UpdateDeal {
    #[serde(default)]
    #[schema(value_type = String, min_length = 1, max_length = 200, pattern = "\\S")]
    pub title: Patch<String>,
    #[serde(default)]
    #[schema(value_type = i64, minimum = 0, maximum = 1000000000000000_i64)]
    pub value: Patch<i64>,
    #[serde(default)]
    #[schema(value_type = String, pattern = "^\\s*[A-Za-z]{3}\\s*$")]
    pub currency: Patch<String>,
    /// Only while open.
    #[serde(default)]
    #[schema(value_type = String, min_length = 1, max_length = 100, pattern = "\\S")]
    pub stage: Patch<String>,
    /// `won`, `lost` (needs `lost_reason`) or `open` (reopen).
    #[serde(default)]
    #[schema(value_type = DealStatus)]
    pub status: Patch<DealStatus>,
    /// `null` unlinks.
    #[serde(default)]
    #[schema(value_type = Option<ContactId>)]
    pub contact_id: Patch<ContactId>,
    #[serde(default)]
    #[schema(value_type = Option<String>, format = Date)]
    pub expected_close_date: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub lost_reason: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    pub metadata: Patch<BTreeMap<String, String>>,
}

/// What an update did to a deal's lifecycle; it names the event and the timeline entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    Won,
    Lost,
    Reopened,
    Updated,
}

impl Transition {
    fn between(old: DealStatus, new: DealStatus) -> Self {
        match (old, new) {
            (DealStatus::Open | DealStatus::Lost, DealStatus::Won) => Self::Won,
            (DealStatus::Open | DealStatus::Won, DealStatus::Lost) => Self::Lost,
            (DealStatus::Won | DealStatus::Lost, DealStatus::Open) => Self::Reopened,
            _ => Self::Updated,
        }
    }
    pub fn event_type(self) -> EventType {
        match self {
            Self::Won => EventType::DealWon,
            Self::Lost => EventType::DealLost,
            Self::Reopened => EventType::DealReopened,
            Self::Updated => EventType::DealUpdated,
        }
    }
    pub fn summary(self, d: &Deal) -> String {
        match self {
            Self::Won => format!("Deal won: {}", d.title),
            Self::Lost => format!("Deal lost: {} ({})", d.title, d.lost_reason.as_deref().unwrap_or_default()),
            Self::Reopened => format!("Deal reopened: {}", d.title),
            Self::Updated => format!("Deal updated: {}", d.title),
        }
    }
}

/// A changed deal and how it changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub deal: Deal,
    pub transition: Transition,
}

impl Deal {
    /// Apply a patch at time `now`: `Ok(None)` when nothing changes, field errors as
    /// `VALIDATION_ERROR`. Closing sets `closed_at`, reopening clears it and sets `reopened_at`;
    /// the stage is frozen while the deal stays closed.
    pub fn apply(&self, input: UpdateDeal, now: shared::ids::Timestamp) -> ApiResult<Option<Change>> {
        let old = self;
        let mut d = old.clone();
        let mut errs = Errors::new();
        if let Some(t) = input.title.required(&mut errs, "title") {
            d.title = t.trim().to_string();
        }
        if let Some(v) = input.value.required(&mut errs, "value") {
            d.value = v;
        }
        if let Some(c) = input.currency.required(&mut errs, "currency") {
            d.currency = c.trim().to_ascii_uppercase();
        }
        if let Some(s) = input.status.required(&mut errs, "status") {
            d.status = s;
        }
        match input.stage.required(&mut errs, "stage") {
            None => {}
            // Frozen only while the deal stays closed: closing or reopening may set it.
            Some(st) if st.trim() != d.stage && d.status != DealStatus::Open && old.status != DealStatus::Open => {
                errs.add("stage", "can change only while the deal is open; reopen it first")
            }
            Some(st) => d.stage = st.trim().to_string(),
        }
        input.contact_id.apply_to(&mut d.contact_id);
        input.expected_close_date.apply_to(&mut d.expected_close_date);
        input.lost_reason.apply_to(&mut d.lost_reason);
        errs.patch_metadata("metadata", input.metadata, &mut d.metadata);
        let transition = Transition::between(old.status, d.status);
        match d.status {
            DealStatus::Open => {
                d.closed_at = None;
                d.lost_reason = None;
                if transition == Transition::Reopened {
                    d.reopened_at = Some(now);
                }
            }
            DealStatus::Won => {
                d.lost_reason = None;
                if old.status != DealStatus::Won {
                    d.closed_at = Some(now);
                }
            }
            DealStatus::Lost if old.status != DealStatus::Lost => d.closed_at = Some(now),
            DealStatus::Lost => {}
        }
        check_common(&mut errs, &d);
        errs.finish()?;
        if &d == old {
            return Ok(None);
        }
        d.updated_at = now;
        Ok(Some(Change { deal: d, transition }))
    }
}

// ---------- operations ----------

/// A new open deal.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDeal {
    #[schema(min_length = 1, max_length = 200, pattern = "\\S")]
    pub title: String,
    /// Minor units; default 0.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 1000000000000000_i64)]
    pub value: i64,
    /// ISO 4217, e.g. `EUR`.
    #[schema(pattern = "^\\s*[A-Za-z]{3}\\s*$")]
    pub currency: String,
    /// Default `new`.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 100, pattern = "\\S")]
    pub stage: Option<String>,
    #[serde(default)]
    pub contact_id: Option<ContactId>,
    #[serde(default)]
    #[schema(format = Date)]
    pub expected_close_date: Option<String>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
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
    app.db.get_object(ws, &keys::DEAL.sk(&[id])).await?.ok_or_else(|| shared::ApiError::not_found("deal"))
}

/// Validate and write a new open deal with `deal.created`.
pub async fn create(app: &App, ws: &WorkspaceId, input: CreateDeal) -> ApiResult<Deal> {
    let now = shared::ids::Timestamp::now();
    let d = Deal {
        id: DealId::generate(),
        object: "deal".into(),
        title: input.title.trim().to_string(),
        value: input.value,
        currency: input.currency.trim().to_ascii_uppercase(),
        stage: input.stage.map(|s| s.trim().to_string()).unwrap_or_else(|| "new".into()),
        status: DealStatus::Open,
        contact_id: input.contact_id,
        expected_close_date: input.expected_close_date,
        lost_reason: None,
        closed_at: None,
        reopened_at: None,
        metadata: input.metadata,
        created_at: now,
        updated_at: now,
    };
    let mut errs = Errors::new();
    check_common(&mut errs, &d);
    errs.finish()?;
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
        .delete_versioned(ws_pk(ws), keys::DEAL.sk(&[&d.id]), version)
        .event(Event::new(ws, EventType::DealDeleted, d))
        .commit(app)
        .await
        .map_err(TxError::stale)
}

/// A deleted contact's deals stay, unlinked (`contact_id` null, out of GSI2), each in its own
/// transaction with its `deal.updated` event.
pub async fn unlink_contact(app: &App, ws: &WorkspaceId, contact_id: &str) -> ApiResult<()> {
    let mut after = None;
    loop {
        let spec = keys::DEALS_OF_CONTACT.query(&[ws, contact_id], &[], after, 100);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A distinct time per name: t0, t1, ... are seconds after 2026-01-01.
    fn at(name: &str) -> shared::ids::Timestamp {
        shared::ids::Timestamp::from_unix(1_767_225_600 + name[1..].parse::<i64>().unwrap()).unwrap()
    }

    fn deal() -> Deal {
        Deal {
            id: DealId::trusted("deal_1"),
            object: "deal".into(),
            title: "Plan".into(),
            value: 100,
            currency: "EUR".into(),
            stage: "new".into(),
            status: DealStatus::Open,
            contact_id: None,
            expected_close_date: None,
            lost_reason: None,
            closed_at: None,
            reopened_at: None,
            metadata: BTreeMap::new(),
            created_at: at("t0"),
            updated_at: at("t0"),
        }
    }

    fn patch(v: serde_json::Value) -> UpdateDeal {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn lifecycle_transitions_and_their_events() {
        let lost = deal().apply(patch(serde_json::json!({"status": "lost", "lost_reason": "budget"})), at("t1")).unwrap().unwrap();
        assert_eq!((lost.transition.event_type(), lost.deal.closed_at), (EventType::DealLost, Some(at("t1"))));
        let won = lost.deal.apply(patch(serde_json::json!({"status": "won"})), at("t2")).unwrap().unwrap();
        assert_eq!((won.transition, won.deal.lost_reason.clone(), won.deal.closed_at), (Transition::Won, None, Some(at("t2"))));
        let reopened = won.deal.apply(patch(serde_json::json!({"status": "open"})), at("t3")).unwrap().unwrap();
        assert_eq!(reopened.transition, Transition::Reopened);
        assert_eq!((reopened.deal.closed_at, reopened.deal.reopened_at), (None, Some(at("t3"))));
        assert_eq!(reopened.transition.summary(&reopened.deal), "Deal reopened: Plan");
    }

    #[test]
    fn refusals_and_no_ops() {
        let e = deal().apply(patch(serde_json::json!({"status": "lost"})), at("t1")).unwrap_err();
        assert_eq!(e.details[0].field.as_deref(), Some("lost_reason"));
        assert!(deal().apply(patch(serde_json::json!({"title": "Plan"})), at("t1")).unwrap().is_none(), "same values: no change");
        let won = deal().apply(patch(serde_json::json!({"status": "won"})), at("t1")).unwrap().unwrap().deal;
        let e = won.apply(patch(serde_json::json!({"stage": "other"})), at("t2")).unwrap_err();
        assert_eq!(e.details[0].field.as_deref(), Some("stage"));
        assert!(deal().apply(patch(serde_json::json!({"title": null})), at("t1")).is_err(), "title cannot be null");
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
        let spec = keys::DEALS_OF_CONTACT.query(&[ws, c.as_str()], &[], after, limit);
        let (deals, next) = shared::request::keyed_page::<Deal>(app, spec).await?;
        let keep = |d: &Deal| q.status.is_none_or(|p| d.status == p) && q.stage.as_deref().is_none_or(|st| d.stage == st);
        return Ok((deals.into_iter().filter(keep).collect(), next));
    }
    let mut spec = match q.status {
        Some(st) => keys::DEALS_BY_STATUS.query(&[ws, st.as_str()], &[], after, limit),
        None => keys::DEALS.query(&[ws], &[], after, limit),
    };
    if let Some(st) = &q.stage {
        spec = spec.filter("stage = :stage", vec![(":stage", s(st))]);
    }
    shared::request::page::<Deal>(app, spec).await
}
