//! The slot engine: which cells of a resource's day a slot takes, which are free, and
//! whether a slot may be booked now; pure functions of the service, the held cells and the
//! clock they are given.

use super::schedule;
use super::{Resource, ResourceId, Service, Slot};
use chrono::{DateTime, Duration, Utc};
use shared::ids::Timestamp;
use shared::zone::Zone;
use shared::{ApiError, ApiResult};
use std::collections::{BTreeMap, HashMap};

pub(super) type Now = DateTime<Utc>;

#[derive(Clone, Debug)]
pub(super) struct Held {
    pub(super) unit: u32,
    pub(super) holder: String,
    pub(super) expires_at: Option<i64>,
}

fn live(h: &Held, now: i64) -> bool {
    h.expires_at.is_none_or(|t| t >= now)
}

/// A unit per cell: one held by `own` (kept), else a free or expired one. None when a cell
/// is full.
pub(super) fn choose(
    needed: &[String],
    held: &HashMap<String, Vec<Held>>,
    capacity: u32,
    own: Option<&str>,
    now: i64,
) -> Option<Vec<(String, u32, bool)>> {
    needed
        .iter()
        .map(|cell| {
            let list = held.get(cell).map(Vec::as_slice).unwrap_or(&[]);
            if let Some(o) = own
                && let Some(h) = list.iter().find(|h| h.holder == o)
            {
                return Some((cell.clone(), h.unit, true));
            }
            (0..capacity).find(|u| !list.iter().any(|h| h.unit == *u && live(h, now))).map(|u| (cell.clone(), u, false))
        })
        .collect()
}

pub(super) fn taken(start: &Timestamp) -> ApiError {
    ApiError::conflict(format!("the slot at {start} is taken"))
        .with_details(vec![shared::error::ErrorDetail::field("start", "no free resource at this time")])
}

/// Is `start` a slot of this service on this resource (opening hours, interval, notice and
/// advance limits)? Errors name `start`.
pub fn check_slot(svc: &Service, res: &Resource, start: DateTime<Utc>, now: Now) -> ApiResult<()> {
    if start < now + Duration::minutes(svc.min_notice_minutes) {
        return Err(ApiError::validation("start", format!("must be at least {} minutes from now", svc.min_notice_minutes)));
    }
    if start > now + Duration::days(svc.max_advance_days) {
        return Err(ApiError::validation("start", format!("must be within {} days", svc.max_advance_days)));
    }
    let zone = res.zone();
    let date = start.with_timezone(&zone).date_naive();
    let starts = schedule::slot_starts(&zone, &res.opening_hours, &res.exceptions, date, svc.slot_interval_minutes, svc.duration_minutes);
    if !starts.contains(&start) {
        return Err(ApiError::validation("start", "is not a slot of this service: outside opening hours, or not on its interval"));
    }
    Ok(())
}

/// A bound of a range asked for: an instant, or a date meaning the whole day in `zone` (its
/// start, or for the end of a range the start of the next day).
pub fn parse_bound(field: &str, v: &str, zone: &shared::zone::Zone, end: bool) -> ApiResult<DateTime<Utc>> {
    use chrono::TimeZone;
    let Ok(date) = chrono::NaiveDate::parse_from_str(v, "%Y-%m-%d") else {
        return parse_time(field, v).map_err(|_| {
            ApiError::validation(field, "must be an RFC 3339 time such as 2026-03-15T10:00:00Z or a date such as 2026-03-15")
        });
    };
    let day = if end { date.succ_opt().unwrap_or(date) } else { date };
    // A day that starts in a DST gap starts at the gap's end.
    let midnight = day.and_hms_opt(0, 0, 0).expect("midnight exists");
    zone.from_local_datetime(&midnight)
        .earliest()
        .or_else(|| zone.from_local_datetime(&(midnight + chrono::Duration::hours(1))).earliest())
        .map(|t| t.with_timezone(&Utc))
        .ok_or_else(|| ApiError::validation(field, "is not a day of this time zone"))
}

pub fn parse_time(field: &str, v: &str) -> ApiResult<DateTime<Utc>> {
    chrono::DateTime::parse_from_rfc3339(v)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| ApiError::validation(field, "must be an RFC 3339 time such as 2026-03-15T10:00:00Z"))
}

/// What availability is asked for: starts from `from` to `to`, grouped by local date of `out`.
pub struct Window {
    pub from: Now,
    pub to: Now,
    pub out: Zone,
    pub now: Now,
}

/// The part of a window a service takes bookings in (its notice and advance limits), or
/// `None` when nothing of it is.
pub(super) fn bounds(svc: &Service, w: &Window) -> Option<(Now, Now)> {
    let lo = w.from.max(w.now + Duration::minutes(svc.min_notice_minutes));
    let hi = w.to.min(w.now + Duration::days(svc.max_advance_days));
    (lo < hi).then_some((lo, hi))
}

/// The decision, without I/O: the starts in the window where some resource is open (its hours
/// and exceptions, on the service's interval) and has a free unit in every cell the booking
/// and its buffers cover (live holds and bookings count; expired holds do not), grouped by
/// local date of `w.out`.
pub(super) fn free_slots(svc: &Service, held: &[(&Resource, HashMap<String, Vec<Held>>)], w: &Window) -> BTreeMap<String, Vec<Slot>> {
    let (dur, before, after) = svc.span();
    let mut free: BTreeMap<DateTime<Utc>, Vec<ResourceId>> = BTreeMap::new();
    if let Some((lo, hi)) = bounds(svc, w) {
        let now_s = w.now.timestamp();
        for (r, held) in held {
            let busy: HashMap<&String, usize> = held.iter().map(|(c, l)| (c, l.iter().filter(|h| live(h, now_s)).count())).collect();
            let zone = r.zone();
            for date in schedule::dates_between(lo, hi, &zone) {
                for start in schedule::slot_starts(&zone, &r.opening_hours, &r.exceptions, date, svc.slot_interval_minutes, dur) {
                    if start < lo || start >= hi {
                        continue;
                    }
                    let fits =
                        schedule::cells(start, dur, before, after).iter().all(|c| busy.get(c).copied().unwrap_or(0) < r.capacity as usize);
                    if fits {
                        free.entry(start).or_default().push(r.id.clone());
                    }
                }
            }
        }
    }
    let mut days: BTreeMap<String, Vec<Slot>> = BTreeMap::new();
    for (start, ids) in free {
        let local = start.with_timezone(&w.out);
        days.entry(local.format("%Y-%m-%d").to_string()).or_default().push(Slot { start: local.to_rfc3339(), resource_ids: ids });
    }
    days
}

/// The cells `svc`'s slot at `start` takes (buffers included), and the first and the last.
pub(super) fn slot_cells(svc: &Service, start: Now) -> (Vec<String>, String, String) {
    let (dur, before, after) = svc.span();
    let needed = schedule::cells(start, dur, before, after);
    let (first, last) = (needed[0].clone(), needed[needed.len() - 1].clone());
    (needed, first, last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(unit: u32, holder: &str, exp: Option<i64>) -> Held {
        Held { unit, holder: holder.into(), expires_at: exp }
    }

    #[test]
    fn units_are_chosen_per_cell_and_expired_holds_are_free() {
        let needed = vec!["a".to_string(), "b".to_string()];
        let mut m = HashMap::new();
        m.insert("a".to_string(), vec![held(0, "bk_1", None)]);
        m.insert("b".to_string(), vec![held(0, "hold_1", Some(10)), held(1, "bk_2", None)]);
        assert_eq!(choose(&needed, &m, 1, None, 100), None, "a is full at capacity 1");
        let plan = choose(&needed, &m, 2, None, 100).unwrap();
        assert_eq!(plan, vec![("a".into(), 1, false), ("b".into(), 0, false)], "the expired hold's unit is free");
        assert_eq!(choose(&needed, &m, 2, None, 5), None, "the hold still holds b at t=5");
        let own = choose(&needed, &m, 1, Some("bk_1"), 100).unwrap();
        assert_eq!(own, vec![("a".into(), 0, true), ("b".into(), 0, false)], "its own cell is kept, the expired hold's taken");
    }

    fn at(t: &str) -> Now {
        parse_time("t", t).unwrap()
    }

    /// A chair open 09:00 to 13:00 UTC every day, and an hour's service on it.
    fn chair_and_service(capacity: u32, svc: serde_json::Value) -> (Resource, Service) {
        let day = serde_json::json!([{"start": "09:00", "end": "13:00"}]);
        let hours = serde_json::json!({"mon": day, "tue": day, "wed": day, "thu": day, "fri": day, "sat": day, "sun": day});
        let input = serde_json::json!({"name": "Chair", "timezone": "UTC", "opening_hours": hours, "capacity": capacity});
        let r = Resource::create(serde_json::from_value(input).unwrap(), Timestamp::now()).unwrap();
        let mut base = serde_json::json!({"name": "Cut", "duration_minutes": 60, "slot_interval_minutes": 60, "resource_ids": [r.id]});
        base.as_object_mut().unwrap().extend(svc.as_object().unwrap().clone());
        let svc = Service::build(None, serde_json::from_value(base).unwrap(), Timestamp::now()).unwrap();
        (r, svc)
    }

    fn starts(days: &BTreeMap<String, Vec<Slot>>) -> Vec<String> {
        days.values().flatten().map(|s| s.start.clone()).collect()
    }

    /// Every cell of the hour from `start`, held by `holder` (until `expires`, for a hold).
    fn held_hour(start: &str, holder: &str, expires: Option<i64>) -> HashMap<String, Vec<Held>> {
        schedule::cells(at(start), 60, 0, 0).into_iter().map(|c| (c, vec![held(0, holder, expires)])).collect()
    }

    #[test]
    fn availability_keeps_to_hours_notice_advance_capacity_and_live_holds() {
        let now = at("2027-03-01T08:30:00Z");
        let w = |out: Zone| Window { from: at("2027-03-01T00:00:00Z"), to: at("2027-03-04T00:00:00Z"), out, now };
        let (r, svc) = chair_and_service(1, serde_json::json!({"min_notice_minutes": 120, "max_advance_days": 1}));
        let free = free_slots(&svc, &[(&r, HashMap::new())], &w(Zone::utc()));
        // Notice: nothing before 10:30; advance: nothing after 08:30 tomorrow; hours: none ending after 13:00.
        assert_eq!(starts(&free), ["2027-03-01T11:00:00+00:00", "2027-03-01T12:00:00+00:00"]);
        let booked = held_hour("2027-03-01T11:00:00Z", "bk_1", None);
        assert_eq!(starts(&free_slots(&svc, &[(&r, booked.clone())], &w(Zone::utc()))), ["2027-03-01T12:00:00+00:00"]);
        let expired = held_hour("2027-03-01T11:00:00Z", "hold_1", Some(now.timestamp() - 1));
        assert_eq!(free_slots(&svc, &[(&r, expired)], &w(Zone::utc())).values().flatten().count(), 2, "an expired hold holds nothing");
        let live = held_hour("2027-03-01T11:00:00Z", "hold_1", Some(now.timestamp() + 60));
        assert_eq!(free_slots(&svc, &[(&r, live)], &w(Zone::utc())).values().flatten().count(), 1, "a live hold does");
        let (r2, svc2) = chair_and_service(2, serde_json::json!({"min_notice_minutes": 120, "max_advance_days": 1}));
        assert_eq!(free_slots(&svc2, &[(&r2, booked)], &w(Zone::utc())).values().flatten().count(), 2, "a second unit is free");
        // Grouped by the asked zone's date: 11:00 UTC is midnight in Auckland (UTC+13 in March).
        let auckland = free_slots(&svc, &[(&r, HashMap::new())], &w(Zone::named("Pacific/Auckland").unwrap()));
        assert_eq!(auckland.keys().collect::<Vec<_>>(), ["2027-03-02"]);
        assert_eq!(starts(&auckland)[0], "2027-03-02T00:00:00+13:00");
        let empty = Window { from: at("2027-03-05T00:00:00Z"), to: at("2027-03-06T00:00:00Z"), out: Zone::utc(), now };
        assert!(free_slots(&svc, &[(&r, HashMap::new())], &empty).is_empty(), "beyond the advance limit");
    }

    #[test]
    fn buffers_keep_the_neighbouring_slots_free_of_a_booking() {
        let now = at("2027-03-01T00:00:00Z");
        let w = Window { from: at("2027-03-01T00:00:00Z"), to: at("2027-03-02T00:00:00Z"), out: Zone::utc(), now };
        let (r, svc) = chair_and_service(1, serde_json::json!({"buffer_after_minutes": 15}));
        let booked = held_hour("2027-03-01T10:00:00Z", "bk_1", None);
        // 09:00 needs 10:00-10:15 for its buffer, which the booking holds.
        assert_eq!(starts(&free_slots(&svc, &[(&r, booked.clone())], &w)), ["2027-03-01T11:00:00+00:00", "2027-03-01T12:00:00+00:00"]);
        let (r, svc) = chair_and_service(1, serde_json::json!({}));
        assert_eq!(free_slots(&svc, &[(&r, booked)], &w).values().flatten().count(), 3, "without the buffer 09:00 is free");
    }

    #[test]
    fn a_slot_is_checked_against_notice_advance_and_hours() {
        let now = at("2027-03-01T08:30:00Z");
        let (r, svc) = chair_and_service(1, serde_json::json!({"min_notice_minutes": 120, "max_advance_days": 1}));
        let field = |e: ApiError| e.details.first().map(|d| d.message.clone()).unwrap_or_default();
        assert!(check_slot(&svc, &r, at("2027-03-01T11:00:00Z"), now).is_ok());
        assert!(field(check_slot(&svc, &r, at("2027-03-01T10:00:00Z"), now).unwrap_err()).contains("120 minutes from now"));
        assert!(field(check_slot(&svc, &r, at("2027-03-02T11:00:00Z"), now).unwrap_err()).contains("within 1 days"));
        assert!(field(check_slot(&svc, &r, at("2027-03-01T11:30:00Z"), now).unwrap_err()).contains("not a slot"));
    }
}
