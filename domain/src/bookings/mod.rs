//! Bookings: resources (a person, a room, a chair) with opening hours in their own time zone,
//! services that any of their resources can serve, availability, holds and bookings.
//!
//! No overlap, ever: a booking or a hold takes every 5-minute cell of its span (buffers
//! included) on its resource, one item per cell and capacity unit
//! (`BCELL#<resource>#<cell>#<unit>`), each written with a condition (free, or a hold that
//! has expired, by time) in the same transaction as the booking. Two requests for
//! overlapping times cannot both commit; the loser re-reads and tries another unit or
//! resource, and answers 409 when none is free.

pub mod booking;
pub mod invite;
pub mod list;
pub mod manage;
pub mod notify;
pub mod schedule;
pub mod slots;
mod store;

pub use crate::ids::{BookingId, HoldId, ResourceId, ServiceId};
use crate::ids::{ContactId, EmailId};
use schedule::{Exception, GRANULE_MINUTES, MAX_SPAN_MINUTES, Week};
use serde::{Deserialize, Serialize};
use shared::ApiResult;
use shared::ids::Timestamp;
use shared::validate::Errors;
use shared::zone::Zone;
use std::collections::BTreeMap;
pub use store::{
    Guard, PRIVACY, Party, PartyInput, Prefetched, Request, StoredBooking, availability, book, booking_sk, create_resource, create_service,
    delete_resource, delete_service, hold, hold_sk, load_booking, load_hold, load_resource, load_service, of_contact, prefetch,
    resource_sk, resources_of, service_sk, update_resource, update_service,
};
use utoipa::ToSchema;

pub const MAX_CAPACITY: u32 = 20;

pub const DEFAULT_HOLD_SECS: i64 = 300;

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct Resource {
    /// `res_...`
    pub id: ResourceId,
    /// Always `booking_resource`.
    pub object: String,
    pub name: String,
    /// IANA time zone of the opening hours, e.g. `Europe/Oslo`.
    pub timezone: String,
    #[schema(value_type = schedule::OpeningHours)]
    pub opening_hours: Week,
    pub exceptions: Vec<Exception>,
    /// Bookings it can hold at once.
    pub capacity: u32,
    pub metadata: BTreeMap<String, String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateResource {
    #[schema(min_length = 1, max_length = 200, pattern = "\\S")]
    pub name: String,
    #[schema(example = "Europe/Oslo")]
    pub timezone: String,
    /// `{"mon": [{"start": "09:00", "end": "12:00"}, {"start": "13:00", "end": "17:00"}], ...}`
    #[serde(default)]
    #[schema(value_type = schedule::OpeningHours)]
    pub opening_hours: Week,
    #[serde(default)]
    pub exceptions: Vec<Exception>,
    /// 1 to 20, default 1.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 20)]
    pub capacity: Option<u32>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct UpdateResource {
    #[schema(min_length = 1, max_length = 200, pattern = "\\S")]
    pub name: Option<String>,
    pub timezone: Option<String>,
    #[schema(value_type = Option<schedule::OpeningHours>)]
    pub opening_hours: Option<Week>,
    pub exceptions: Option<Vec<Exception>>,
    #[schema(minimum = 1, maximum = 20)]
    pub capacity: Option<u32>,
    pub metadata: Option<BTreeMap<String, String>>,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Minor units (cents), at most 10^11.
    #[schema(minimum = 0, maximum = 100000000000_i64)]
    pub amount: i64,
    #[schema(pattern = "^[A-Z]{3}$", example = "EUR")]
    pub currency: String,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct Service {
    /// `svc_...`
    pub id: ServiceId,
    /// Always `booking_service`.
    pub object: String,
    pub name: String,
    pub duration_minutes: i64,
    pub buffer_before_minutes: i64,
    pub buffer_after_minutes: i64,
    /// Any one of them can serve it.
    pub resource_ids: Vec<ResourceId>,
    pub price: Option<Price>,
    pub min_notice_minutes: i64,
    pub max_advance_days: i64,
    pub slot_interval_minutes: i64,
    /// Customers cannot cancel later than this before the start.
    pub cancellation_window_minutes: i64,
    /// Bookings start `pending` until confirmed.
    pub requires_confirmation: bool,
    /// Emails to the booking's contact; none when absent (the default).
    #[serde(default)]
    pub notifications: Option<Notifications>,
    pub metadata: BTreeMap<String, String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// Emails sent through the emails area when a booking is confirmed, and before it starts. The
/// workspace's templates `booking_confirmation` and `booking_reminder` are used when they exist
/// (variables `service`, `start`, `end`, `resource`, `booking_id`), a plain text otherwise.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Notifications {
    /// A sender at one of the workspace's verified sending domains.
    #[schema(max_length = 320, example = "Acme Salon <hello@acme.com>")]
    pub from: String,
    /// Send a confirmation when a booking is confirmed (default true).
    #[serde(default = "yes")]
    pub confirmation: bool,
    /// Send a reminder this long before the start (30 to 10080 minutes); none when absent.
    #[schema(minimum = 30, maximum = 10080)]
    pub reminder_minutes_before: Option<i64>,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct ServiceInput {
    #[schema(min_length = 1, max_length = 200, pattern = "\\S")]
    pub name: Option<String>,
    /// 5 to 180 minutes, a multiple of 5; with the buffers at most 180.
    #[schema(minimum = 5, maximum = 180, multiple_of = 5)]
    pub duration_minutes: Option<i64>,
    #[schema(minimum = 0, maximum = 120)]
    pub buffer_before_minutes: Option<i64>,
    #[schema(minimum = 0, maximum = 120)]
    pub buffer_after_minutes: Option<i64>,
    #[schema(min_items = 1, max_items = 20)]
    pub resource_ids: Option<Vec<ResourceId>>,
    pub price: Option<Price>,
    #[schema(minimum = 0, maximum = 525600)]
    pub min_notice_minutes: Option<i64>,
    #[schema(minimum = 1, maximum = 730)]
    pub max_advance_days: Option<i64>,
    /// Default: the duration. 5 to 240, a multiple of 5.
    #[schema(minimum = 5, maximum = 240, multiple_of = 5)]
    pub slot_interval_minutes: Option<i64>,
    #[schema(minimum = 0, maximum = 525600)]
    pub cancellation_window_minutes: Option<i64>,
    pub requires_confirmation: Option<bool>,
    /// Confirmation and reminder emails; off unless set.
    pub notifications: Option<Notifications>,
    pub metadata: Option<BTreeMap<String, String>>,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum BookingStatus {
    Pending,
    Confirmed,
    Completed,
    Cancelled,
    NoShow,
}

impl BookingStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Confirmed => "confirmed",
            Self::Completed => "completed",
            Self::Cancelled => "cancelled",
            Self::NoShow => "no_show",
        }
    }
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CancelledBy {
    Staff,
    Customer,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct Booking {
    /// `bk_...`
    pub id: BookingId,
    /// Always `booking`.
    pub object: String,
    pub status: BookingStatus,
    pub service_id: ServiceId,
    pub resource_id: ResourceId,
    /// Empty once an erasure has removed the person.
    #[serde(default = "ContactId::erased", deserialize_with = "ContactId::or_erased")]
    #[schema(value_type = String, pattern = "^(ct_[0-7][0-9A-HJKMNP-TV-Z]{25})?$")]
    pub contact_id: ContactId,
    /// RFC 3339 UTC.
    pub start: Timestamp,
    pub end: Timestamp,
    pub notes: Option<String>,
    /// Empty once an erasure has removed the person (it may name them).
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    pub cancelled_by: Option<CancelledBy>,
    pub cancel_reason: Option<String>,
    pub cancelled_at: Option<Timestamp>,
    pub rescheduled_from: Option<BookingId>,
    pub rescheduled_to: Option<BookingId>,
    /// The scheduled reminder (`em_...`), cancelled with the booking.
    #[serde(default)]
    pub reminder_email_id: Option<EmailId>,
    /// The calendar invite's event: the first booking of the chain this one was moved along
    /// (absent: this booking itself). Its invites share one `UID`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invite_uid: Option<BookingId>,
    /// The invite's `SEQUENCE`: 0 when booked, one more with each move and the cancellation.
    #[serde(default)]
    pub invite_sequence: u32,
    /// The customer's manage link (`/p/<slug>/booking?token=...`: this booking's page, where it
    /// can be cancelled or moved without a sign-in, until its end). Only in `booking.*` webhook
    /// deliveries, added as they are signed when the pages have an address; never in an API
    /// answer or a stored event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = "uri")]
    pub manage_url: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl Booking {
    /// Still ahead and undecided: the states a cancel or a move acts on.
    pub fn open(&self) -> bool {
        matches!(self.status, BookingStatus::Pending | BookingStatus::Confirmed)
    }

    /// Until when a customer may change (`cancel`, `move`) this booking: the start less the
    /// service's cancellation window (`window_minutes`). Staff always may.
    pub fn customer_change_until(&self, window_minutes: i64) -> chrono::DateTime<chrono::Utc> {
        self.start.time() - chrono::Duration::minutes(window_minutes)
    }

    /// 409 once the customer may no longer change this booking (the clock is not cut to the
    /// second, so the pages that offer the change and this agree).
    pub fn customer_may(&self, action: &str, svc: &Service, now: chrono::DateTime<chrono::Utc>) -> shared::ApiResult<()> {
        if now > self.customer_change_until(svc.cancellation_window_minutes) {
            return Err(shared::ApiError::conflict(format!(
                "customers cannot {action} a booking later than {} minutes before its start",
                svc.cancellation_window_minutes
            )));
        }
        Ok(())
    }

    /// This booking cancelled at `now` (its invite's next sequence); 409 unless it is open.
    pub fn cancelled(&self, by: CancelledBy, reason: Option<String>, now: Timestamp) -> shared::ApiResult<Booking> {
        if !self.open() {
            return Err(shared::ApiError::conflict(format!("a {} booking cannot be cancelled", self.status.as_str())));
        }
        Ok(Booking {
            status: BookingStatus::Cancelled,
            cancelled_by: Some(by),
            cancel_reason: reason,
            cancelled_at: Some(now),
            updated_at: now,
            invite_sequence: self.invite_sequence + 1,
            ..self.clone()
        })
    }

    /// A new booking of `svc` at `start` (its resource is set when it is booked): `confirmed`,
    /// or `pending` when the service requires confirmation.
    pub fn new(svc: &Service, contact_id: ContactId, start: chrono::DateTime<chrono::Utc>, now: Timestamp) -> Booking {
        Booking {
            id: crate::ids::BookingId::generate(),
            object: "booking".into(),
            status: if svc.requires_confirmation { BookingStatus::Pending } else { BookingStatus::Confirmed },
            service_id: svc.id.clone(),
            resource_id: ResourceId::trusted(String::new()),
            contact_id,
            start: Timestamp::from(start),
            end: Timestamp::from(start + chrono::Duration::minutes(svc.duration_minutes)),
            notes: None,
            manage_url: None,
            metadata: BTreeMap::new(),
            cancelled_by: None,
            cancel_reason: None,
            cancelled_at: None,
            rescheduled_from: None,
            rescheduled_to: None,
            reminder_email_id: None,
            invite_uid: None,
            invite_sequence: 0,
            created_at: now,
            updated_at: now,
        }
    }
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContactInput {
    #[schema(format = Email, max_length = 254)]
    pub email: String,
    #[schema(max_length = 200)]
    pub name: Option<String>,
    /// E.164, e.g. `+4930123456`.
    #[schema(max_length = 16, pattern = "^(\\+[1-9][0-9]{1,14})?$")]
    pub phone: Option<String>,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateBooking {
    pub service_id: ServiceId,
    /// A slot start from `GET /bookings/availability` (RFC 3339).
    pub start: Timestamp,
    // Exactly one of the two: `tools` says so in the contract (a typed field's reference
    // carries no extension).
    /// An existing contact, or `contact` to find or create one by email.
    pub contact_id: Option<ContactId>,
    pub contact: Option<ContactInput>,
    /// Default: the first free resource of the service.
    pub resource_id: Option<ResourceId>,
    /// Converts this hold (same service and start) into the booking.
    pub hold_id: Option<HoldId>,
    #[schema(max_length = 2000)]
    pub notes: Option<String>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct Hold {
    /// `hold_...`
    pub id: HoldId,
    /// Always `booking_hold`.
    pub object: String,
    pub service_id: ServiceId,
    pub resource_id: ResourceId,
    pub start: Timestamp,
    pub end: Timestamp,
    pub expires_at: Timestamp,
    pub created_at: Timestamp,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateHold {
    pub service_id: ServiceId,
    pub start: Timestamp,
    pub resource_id: Option<ResourceId>,
    /// How long the hold lasts: 5 to 1800 seconds, default 300.
    #[schema(minimum = 5, maximum = 1800)]
    pub hold_seconds: Option<i64>,
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct CancelBooking {
    #[schema(max_length = 500)]
    pub reason: Option<String>,
    /// Default `staff`. A customer cannot cancel inside the service's cancellation window.
    pub cancelled_by: Option<CancelledBy>,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RescheduleBooking {
    pub start: Timestamp,
}

/// `GET /bookings/availability`: free starts per local date of `timezone`.
#[derive(Serialize, ToSchema)]
pub struct Slot {
    /// RFC 3339 in the requested time zone.
    #[schema(format = DateTime)]
    pub start: String,
    pub resource_ids: Vec<ResourceId>,
}

/// Free starts by local date (`YYYY-MM-DD`), each with the resources free then.
#[derive(Serialize, ToSchema)]
pub struct Availability(pub BTreeMap<String, Vec<Slot>>);

/// A resource's or a customer's IANA time zone, by name.
pub fn tz(name: &str) -> Option<shared::zone::Zone> {
    shared::zone::Zone::named(name)
}

fn check_capacity(errs: &mut Errors, c: u32) {
    if !(1..=MAX_CAPACITY).contains(&c) {
        errs.add("capacity", format!("must be 1 to {MAX_CAPACITY}"));
    }
}

impl Resource {
    pub fn create(input: CreateResource, now: Timestamp) -> ApiResult<Resource> {
        let mut errs = Errors::new();
        errs.text("name", &input.name, 1, 200);
        if tz(&input.timezone).is_none() {
            errs.add("timezone", "must be an IANA time zone such as Europe/Oslo");
        }
        schedule::check_hours(&mut errs, &input.opening_hours, &input.exceptions);
        let capacity = input.capacity.unwrap_or(1);
        check_capacity(&mut errs, capacity);
        errs.metadata("metadata", &input.metadata);
        errs.finish()?;
        Ok(Resource {
            id: crate::ids::ResourceId::generate(),
            object: "booking_resource".into(),
            name: input.name,
            timezone: input.timezone,
            opening_hours: input.opening_hours,
            exceptions: input.exceptions,
            capacity,
            metadata: input.metadata,
            created_at: now,
            updated_at: now,
        })
    }

    pub fn apply(&self, p: UpdateResource, now: Timestamp) -> ApiResult<Resource> {
        let mut r = self.clone();
        let mut errs = Errors::new();
        if let Some(v) = p.name {
            errs.text("name", &v, 1, 200);
            r.name = v;
        }
        if let Some(v) = p.timezone {
            if tz(&v).is_none() {
                errs.add("timezone", "must be an IANA time zone such as Europe/Oslo");
            }
            r.timezone = v;
        }
        if let Some(v) = p.opening_hours {
            r.opening_hours = v;
        }
        if let Some(v) = p.exceptions {
            r.exceptions = v;
        }
        schedule::check_hours(&mut errs, &r.opening_hours, &r.exceptions);
        if let Some(v) = p.capacity {
            check_capacity(&mut errs, v);
            r.capacity = v;
        }
        if let Some(v) = p.metadata {
            errs.metadata("metadata", &v);
            r.metadata = v;
        }
        errs.finish()?;
        r.updated_at = now;
        Ok(r)
    }

    fn zone(&self) -> Zone {
        tz(&self.timezone).unwrap_or_else(Zone::utc)
    }
}

fn range(errs: &mut Errors, field: &str, v: i64, lo: i64, hi: i64) {
    if !(lo..=hi).contains(&v) {
        errs.add(field, format!("must be {lo} to {hi}"));
    }
}

impl Service {
    /// A new service (`base` None) or a change of one; the rules hold either way.
    pub fn build(base: Option<&Service>, input: ServiceInput, now: Timestamp) -> ApiResult<Service> {
        let mut errs = Errors::new();
        let mut svc = base.cloned().unwrap_or(Service {
            id: crate::ids::ServiceId::generate(),
            object: "booking_service".into(),
            name: String::new(),
            duration_minutes: 0,
            buffer_before_minutes: 0,
            buffer_after_minutes: 0,
            resource_ids: vec![],
            price: None,
            min_notice_minutes: 0,
            max_advance_days: 90,
            slot_interval_minutes: 0,
            cancellation_window_minutes: 0,
            requires_confirmation: false,
            notifications: None,
            metadata: BTreeMap::new(),
            created_at: now,
            updated_at: now,
        });
        // A missing duration is "is required", not also out of range.
        let has_duration = base.is_some() || input.duration_minutes.is_some();
        if base.is_none() {
            for (f, missing) in [
                ("name", input.name.is_none()),
                ("duration_minutes", input.duration_minutes.is_none()),
                ("resource_ids", input.resource_ids.is_none()),
            ] {
                if missing {
                    errs.add(f, "is required");
                }
            }
        }
        if let Some(v) = input.name {
            errs.text("name", &v, 1, 200);
            svc.name = v;
        }
        let interval_was_duration = svc.slot_interval_minutes == svc.duration_minutes;
        if let Some(v) = input.duration_minutes {
            svc.duration_minutes = v;
        }
        if let Some(v) = input.buffer_before_minutes {
            svc.buffer_before_minutes = v;
        }
        if let Some(v) = input.buffer_after_minutes {
            svc.buffer_after_minutes = v;
        }
        match input.slot_interval_minutes {
            Some(v) => svc.slot_interval_minutes = v,
            None if interval_was_duration => svc.slot_interval_minutes = svc.duration_minutes,
            None => {}
        }
        if let Some(v) = input.resource_ids {
            for (i, id) in v.iter().enumerate() {
                if v[..i].contains(id) {
                    errs.add(format!("resource_ids[{i}]"), "is listed twice");
                }
            }
            if v.is_empty() || v.len() > 20 {
                errs.add("resource_ids", "1 to 20 resources");
            }
            svc.resource_ids = v;
        }
        if let Some(p) = input.price {
            if p.amount < 0 || p.amount > 100_000_000_000 {
                errs.add("price.amount", "must be 0 to 10^11 (minor units)");
            }
            if p.currency.len() != 3 || !p.currency.chars().all(|c| c.is_ascii_uppercase()) {
                errs.add("price.currency", "must be an ISO 4217 code such as EUR");
            }
            svc.price = Some(p);
        }
        if let Some(v) = input.min_notice_minutes {
            svc.min_notice_minutes = v;
        }
        if let Some(v) = input.max_advance_days {
            svc.max_advance_days = v;
        }
        if let Some(v) = input.cancellation_window_minutes {
            svc.cancellation_window_minutes = v;
        }
        if let Some(v) = input.requires_confirmation {
            svc.requires_confirmation = v;
        }
        if let Some(n) = input.notifications {
            if shared::validate::parse_mailbox(&n.from).is_none() {
                errs.add("notifications.from", "must be an address such as hello@acme.com or Acme <hello@acme.com>");
            }
            if let Some(m) = n.reminder_minutes_before {
                range(&mut errs, "notifications.reminder_minutes_before", m, 30, 10_080);
            }
            svc.notifications = Some(n);
        }
        if let Some(v) = input.metadata {
            errs.metadata("metadata", &v);
            svc.metadata = v;
        }
        if !svc.name.is_empty() || base.is_some() {
            if has_duration {
                range(&mut errs, "duration_minutes", svc.duration_minutes, 5, MAX_SPAN_MINUTES);
                if svc.duration_minutes % GRANULE_MINUTES != 0 {
                    errs.add("duration_minutes", "must be a multiple of 5");
                }
            }
            range(&mut errs, "buffer_before_minutes", svc.buffer_before_minutes, 0, 120);
            range(&mut errs, "buffer_after_minutes", svc.buffer_after_minutes, 0, 120);
            if svc.buffer_before_minutes + svc.duration_minutes + svc.buffer_after_minutes > MAX_SPAN_MINUTES {
                errs.add("duration_minutes", format!("with its buffers at most {MAX_SPAN_MINUTES} minutes"));
            }
            if has_duration {
                range(&mut errs, "slot_interval_minutes", svc.slot_interval_minutes, 5, 240);
            }
            if svc.slot_interval_minutes % GRANULE_MINUTES != 0 {
                errs.add("slot_interval_minutes", "must be a multiple of 5");
            }
            range(&mut errs, "min_notice_minutes", svc.min_notice_minutes, 0, 525_600);
            range(&mut errs, "max_advance_days", svc.max_advance_days, 1, 730);
            range(&mut errs, "cancellation_window_minutes", svc.cancellation_window_minutes, 0, 525_600);
        }
        errs.finish()?;
        svc.updated_at = now;
        Ok(svc)
    }

    pub(super) fn span(&self) -> (i64, i64, i64) {
        (self.duration_minutes, self.buffer_before_minutes, self.buffer_after_minutes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        Timestamp::parse(s).unwrap()
    }

    /// An hour's service that customers may change until two hours before the start.
    fn service() -> Service {
        serde_json::from_value(serde_json::json!({
            "id": ServiceId::generate(), "object": "booking_service", "name": "Cut", "duration_minutes": 60,
            "buffer_before_minutes": 0, "buffer_after_minutes": 0, "resource_ids": [ResourceId::generate()], "price": null,
            "min_notice_minutes": 0, "max_advance_days": 365, "slot_interval_minutes": 60, "cancellation_window_minutes": 120,
            "requires_confirmation": false, "metadata": {}, "created_at": "2027-01-01T00:00:00Z", "updated_at": "2027-01-01T00:00:00Z"
        }))
        .expect("a service")
    }

    fn booking(status: BookingStatus) -> Booking {
        Booking { status, ..Booking::new(&service(), ContactId::generate(), t("2027-03-01T10:00:00Z").time(), t("2027-01-01T00:00:00Z")) }
    }

    #[test]
    fn only_an_open_booking_is_cancelled_once() {
        let now = t("2027-03-01T08:00:00Z");
        let b = booking(BookingStatus::Confirmed);
        let c = b.cancelled(CancelledBy::Customer, Some("ill".into()), now).unwrap();
        assert_eq!(
            (c.status, c.cancelled_by, c.cancelled_at, c.updated_at, c.invite_sequence),
            (BookingStatus::Cancelled, Some(CancelledBy::Customer), Some(now), now, b.invite_sequence + 1)
        );
        assert_eq!(c.cancelled(CancelledBy::Staff, None, now).unwrap_err().status().as_u16(), 409, "not twice");
        for s in [BookingStatus::Completed, BookingStatus::NoShow] {
            assert!(booking(s).cancelled(CancelledBy::Staff, None, now).is_err(), "{s:?}");
        }
        assert!(booking(BookingStatus::Pending).cancelled(CancelledBy::Staff, None, now).is_ok());
    }

    #[test]
    fn a_customer_changes_a_booking_only_before_the_cancellation_window() {
        let (b, svc) = (booking(BookingStatus::Confirmed), service());
        let edge = t("2027-03-01T08:00:00Z").time();
        assert!(b.customer_may("cancel", &svc, edge).is_ok(), "exactly two hours before");
        let late = b.customer_may("move", &svc, edge + chrono::Duration::milliseconds(1)).unwrap_err();
        assert_eq!(late.status().as_u16(), 409);
        assert!(late.message.contains("cannot move a booking later than 120 minutes"), "{}", late.message);
    }
}
