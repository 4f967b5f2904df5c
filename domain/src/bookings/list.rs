//! `GET /bookings`: its filters, checked once, bound to the page's cursor, and the queries
//! that answer them (by creation through the status or workspace index, by start through the
//! start index).

use super::slots::parse_time;
use super::{Booking, BookingStatus, ResourceId};
use crate::ids::ContactId;
use crate::keys;
use serde::Deserialize;
use shared::auth::WorkspaceId;
use shared::store::s;
use shared::{ApiResult, App};

/// The filters of a booking list, as the query string gives them; they combine.
#[derive(Deserialize)]
pub struct ListBookings {
    pub status: Option<BookingStatus>,
    #[serde(default)]
    pub contact_id: Option<ContactId>,
    #[serde(default)]
    pub resource_id: Option<ResourceId>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub order: Option<Order>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// By creation, newest first.
    #[default]
    Newest,
    Oldest,
    /// By start time, earliest first.
    Soonest,
}

impl Order {
    fn as_str(self) -> &'static str {
        match self {
            Order::Newest => "newest",
            Order::Oldest => "oldest",
            Order::Soonest => "soonest",
        }
    }
}

/// The filters, checked: times in the stored form (`from` inclusive, `to` exclusive).
pub struct Filters {
    status: Option<BookingStatus>,
    contact_id: Option<ContactId>,
    resource_id: Option<ResourceId>,
    from: Option<String>,
    to: Option<String>,
    order: Order,
}

impl ListBookings {
    /// A bad time is a 400 that names its parameter.
    pub fn check(self) -> ApiResult<Filters> {
        let time = |field: &str, v: Option<String>| v.map(|v| parse_time(field, &v).map(shared::ids::format_time)).transpose();
        Ok(Filters {
            from: time("from", self.from)?,
            to: time("to", self.to)?,
            status: self.status,
            contact_id: self.contact_id,
            resource_id: self.resource_id,
            order: self.order.unwrap_or_default(),
        })
    }
}

impl Filters {
    /// The filters as a page's cursor binds them.
    pub fn bound(&self) -> [(&'static str, Option<String>); 6] {
        [
            ("status", self.status.map(|s| s.as_str().to_string())),
            ("contact_id", self.contact_id.as_ref().map(String::from)),
            ("resource_id", self.resource_id.as_ref().map(String::from)),
            ("from", self.from.clone()),
            ("to", self.to.clone()),
            ("order", Some(self.order.as_str().to_string())),
        ]
    }

    fn keeps(&self, b: &Booking) -> bool {
        self.status.is_none_or(|s| b.status == s)
            && self.contact_id.as_ref().is_none_or(|c| b.contact_id == *c)
            && self.resource_id.as_ref().is_none_or(|r| b.resource_id == *r)
    }
}

/// One page of bookings after `after`, and the key to go on from. By start time the start
/// index gives the order and the other filters apply within the page (a page can be short);
/// by creation they are the query's filter expression.
pub async fn list(
    app: &App,
    ws: &WorkspaceId,
    f: &Filters,
    after: Option<String>,
    limit: usize,
) -> ApiResult<(Vec<Booking>, Option<String>)> {
    if f.order == Order::Soonest {
        let after = after.or_else(|| f.from.as_ref().map(|from| format!("{}{from}", keys::BOOKINGS_BY_START.prefix())));
        let (bookings, mut next) = shared::request::keyed_page::<Booking>(app, keys::BOOKINGS_BY_START.query(ws, after, limit)).await?;
        let mut list = vec![];
        for b in bookings {
            if f.to.as_ref().is_some_and(|t| b.start.to_string() >= *t) {
                next = None;
                break;
            }
            if f.keeps(&b) {
                list.push(b);
            }
        }
        return Ok((list, next));
    }
    let mut spec = match f.status {
        Some(st) => keys::BOOKINGS_BY_STATUS.query((ws, st.as_str()), after, limit),
        None => keys::BOOKINGS.query(ws, after, limit),
    };
    if f.order == Order::Newest {
        spec = spec.descending();
    }
    let mut conds = vec![];
    let mut vals = vec![];
    if let Some(c) = &f.contact_id {
        conds.push("contact_id = :c");
        vals.push((":c", s(c)));
    }
    if let Some(r) = &f.resource_id {
        conds.push("resource_id = :r");
        vals.push((":r", s(r)));
    }
    if let Some(from) = &f.from {
        conds.push("starts_at >= :from");
        vals.push((":from", s(from)));
    }
    if let Some(t) = &f.to {
        conds.push("starts_at < :to");
        vals.push((":to", s(t)));
    }
    let expr = conds.join(" AND ");
    if !conds.is_empty() {
        spec = spec.filter(&expr, vals);
    }
    shared::request::page::<Booking>(app, spec).await
}

/// One page of the bookable resources, in creation order.
pub async fn resources(
    app: &App,
    ws: &WorkspaceId,
    after: Option<String>,
    limit: usize,
) -> ApiResult<(Vec<super::Resource>, Option<String>)> {
    shared::request::page(app, keys::BOOKING_RESOURCES.query(ws, after, limit)).await
}

/// One page of the bookable services, in creation order.
pub async fn services(
    app: &App,
    ws: &WorkspaceId,
    after: Option<String>,
    limit: usize,
) -> ApiResult<(Vec<super::Service>, Option<String>)> {
    shared::request::page(app, keys::BOOKING_SERVICES.query(ws, after, limit)).await
}
