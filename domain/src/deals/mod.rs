//! Deals: an amount in minor units with its currency, a free-text stage while open, an
//! optional contact, and the lifecycle open -> won | lost (lost needs a reason), with
//! reopening allowed and recorded. This file is the model: new deals ([`Deal::open`]) and
//! state changes ([`Deal::apply`]) are pure functions of the request and the time; `store`
//! writes them (`keys::DEAL`: GSI1 serves the status filter; GSI2, only while linked, a
//! contact's deals).

mod store;
pub use store::{ListDeals, PRIVACY, create, delete, list, load, record, unlink_contact, update};

use crate::ids::ContactId;
use serde::{Deserialize, Serialize};
use shared::ApiResult;
use shared::events::EventType;
use shared::ids::Timestamp;
use shared::validate::{Errors, Patch};
use std::collections::BTreeMap;
use utoipa::ToSchema;

pub use crate::ids::DealId;

pub const MAX_VALUE: i64 = 1_000_000_000_000_000;

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
    /// A new open deal from a create request, checked (every problem at once).
    pub fn open(input: CreateDeal, now: Timestamp) -> ApiResult<Deal> {
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
        Ok(d)
    }

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
