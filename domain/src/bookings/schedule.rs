//! Time rules of bookings, as pure functions: opening hours in a resource's own time zone,
//! slot starts, and the time granules ("cells") a booking occupies.
//!
//! Local times become instants with the resource's IANA zone. Around daylight-saving changes
//! a local time can be missing (spring forward: 02:30 does not exist) or twice (fall back:
//! 02:30 happens at two instants). Deliberately: a missing local time offers no slot (the
//! opening interval is shortened by the gap, so 09:00 stays 09:00 on both sides of the
//! change), and a repeated one offers both instants, each with its own UTC offset.

use chrono::{DateTime, Datelike, Duration, LocalResult, NaiveDate, NaiveTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use shared::zone::Zone;
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// One cell of a resource's time: bookings take every cell their span touches.
pub const GRANULE_MINUTES: i64 = 5;
/// Longest span (buffer before + duration + buffer after): 36 cells, so a reschedule (release
/// 36, take 36, two bookings, events, timeline) stays inside DynamoDB's 100 actions.
pub const MAX_SPAN_MINUTES: i64 = 180;
pub const MAX_RANGE_DAYS: i64 = 31;

/// `HH:MM`-`HH:MM`, local time; `end` after `start` (no interval crosses midnight).
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Interval {
    #[schema(pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$", example = "09:00")]
    pub start: String,
    #[schema(pattern = "^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$", example = "17:00")]
    pub end: String,
}

/// Opening hours per weekday (`mon` .. `sun`), each day any number of intervals.
pub type Week = BTreeMap<String, Vec<Interval>>;

// `Week`'s name in the contract: an alias has none of its own (it would be called `BTreeMap`).
/// Opening hours per weekday (`mon` .. `sun`), each day any number of local intervals; a day
/// left out is closed.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // only the contract's shape: the days are the closed set `validate` accepts
pub struct OpeningHours {
    #[serde(default)]
    mon: Vec<Interval>,
    #[serde(default)]
    tue: Vec<Interval>,
    #[serde(default)]
    wed: Vec<Interval>,
    #[serde(default)]
    thu: Vec<Interval>,
    #[serde(default)]
    fri: Vec<Interval>,
    #[serde(default)]
    sat: Vec<Interval>,
    #[serde(default)]
    sun: Vec<Interval>,
}

pub const WEEKDAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// A date with other hours than the week says; no intervals = closed.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Exception {
    #[schema(format = Date, example = "2026-12-24")]
    pub date: String,
    #[serde(default)]
    pub intervals: Vec<Interval>,
}

/// "24:00": the day's end, kept as its last second (a `NaiveTime` has no 24:00).
fn end_of_day() -> NaiveTime {
    NaiveTime::from_hms_opt(23, 59, 59).expect("a time")
}

pub fn parse_hm(s: &str) -> Option<NaiveTime> {
    if s == "24:00" {
        return Some(end_of_day());
    }
    let (h, m) = s.split_once(':')?;
    if h.len() != 2 || m.len() != 2 {
        return None;
    }
    NaiveTime::from_hms_opt(h.parse().ok()?, m.parse().ok()?, 0)
}

/// Field errors of a week and its exceptions.
pub fn check_hours(errs: &mut shared::validate::Errors, week: &Week, exceptions: &[Exception]) {
    for (day, list) in week {
        if !WEEKDAYS.contains(&day.as_str()) {
            errs.add(format!("opening_hours.{day}"), "must be a weekday: mon, tue, wed, thu, fri, sat or sun");
        }
        check_intervals(errs, &format!("opening_hours.{day}"), list);
    }
    if exceptions.len() > 366 {
        errs.add("exceptions", "at most 366 dates");
    }
    for (i, e) in exceptions.iter().enumerate() {
        if NaiveDate::parse_from_str(&e.date, "%Y-%m-%d").is_err() {
            errs.add(format!("exceptions[{i}].date"), "must be a date such as 2026-12-24");
        }
        if exceptions[..i].iter().any(|x| x.date == e.date) {
            errs.add(format!("exceptions[{i}].date"), "is listed twice");
        }
        check_intervals(errs, &format!("exceptions[{i}].intervals"), &e.intervals);
    }
}

fn check_intervals(errs: &mut shared::validate::Errors, field: &str, list: &[Interval]) {
    if list.len() > 12 {
        errs.add(field, "at most 12 intervals a day");
    }
    let mut spans = vec![];
    for (i, iv) in list.iter().enumerate() {
        match (parse_hm(&iv.start), parse_hm(&iv.end)) {
            (Some(a), Some(b)) if a < b => spans.push((a, b)),
            (Some(_), Some(_)) => errs.add(format!("{field}[{i}]"), "end must be after start"),
            _ => errs.add(format!("{field}[{i}]"), "times are HH:MM, 00:00 to 24:00"),
        }
    }
    spans.sort();
    if spans.windows(2).any(|w| w[1].0 < w[0].1) {
        errs.add(field, "intervals overlap");
    }
}

/// The local opening intervals of a date.
pub fn intervals_on(week: &Week, exceptions: &[Exception], date: NaiveDate) -> Vec<(NaiveTime, NaiveTime)> {
    let key = date.format("%Y-%m-%d").to_string();
    let list = match exceptions.iter().find(|e| e.date == key) {
        Some(e) => e.intervals.clone(),
        None => week.get(WEEKDAYS[date.weekday().num_days_from_monday() as usize]).cloned().unwrap_or_default(),
    };
    list.iter().filter_map(|iv| Some((parse_hm(&iv.start)?, parse_hm(&iv.end)?))).collect()
}

/// Every instant a local date-time names (none in a gap, two in a repeated hour).
pub fn instants(tz: &Zone, date: NaiveDate, t: NaiveTime) -> Vec<DateTime<Utc>> {
    match tz.from_local_datetime(&date.and_time(t)) {
        LocalResult::Single(x) => vec![x.with_timezone(&Utc)],
        LocalResult::Ambiguous(a, b) => vec![a.with_timezone(&Utc), b.with_timezone(&Utc)],
        LocalResult::None => vec![],
    }
}

/// Slot starts on one local date: every `interval` minutes from each opening, whose whole
/// duration fits before the interval closes (measured in real time, so a slot across a DST
/// change is as long as any other).
pub fn slot_starts(tz: &Zone, week: &Week, exceptions: &[Exception], date: NaiveDate, interval: i64, duration: i64) -> Vec<DateTime<Utc>> {
    let mut out = vec![];
    for (open, close) in intervals_on(week, exceptions, date) {
        // The interval's real end: the last instant of its closing time (or of the gap's end).
        // "24:00" is the next date's first instant (the first, where that midnight repeats), so
        // a slot may end at midnight.
        let (end_date, close_at, midnight) = match date.succ_opt() {
            Some(next) if close == end_of_day() => (next, NaiveTime::MIN, true),
            _ => (date, close, false),
        };
        let at_close = instants(tz, end_date, close_at);
        let end = if midnight { at_close.first().copied() } else { at_close.last().copied() }
            .or_else(|| (0..180).find_map(|m| instants(tz, end_date, close_at + Duration::minutes(m)).into_iter().next()));
        let Some(end) = end else { continue };
        let mut t = open;
        while t < close {
            for s in instants(tz, date, t) {
                if s + Duration::minutes(duration) <= end && !out.contains(&s) {
                    out.push(s);
                }
            }
            let next = t + Duration::minutes(interval);
            if next <= t {
                break; // wrapped past midnight
            }
            t = next;
        }
    }
    out.sort();
    out
}

/// The cells a span occupies: from `start - before` to `end + after`, rounded out to the
/// granule. Each is the UTC minute it starts at, as `YYYYMMDDTHHMM`.
pub fn cells(start: DateTime<Utc>, duration: i64, before: i64, after: i64) -> Vec<String> {
    let from = start - Duration::minutes(before);
    let to = start + Duration::minutes(duration + after);
    let g = GRANULE_MINUTES * 60;
    let first = from.timestamp().div_euclid(g) * g;
    let last = (to.timestamp() + g - 1).div_euclid(g) * g;
    (0..)
        .map(|i| first + i * g)
        .take_while(|t| *t < last)
        .map(|t| Utc.timestamp_opt(t, 0).single().expect("in range").format("%Y%m%dT%H%M").to_string())
        .collect()
}

/// The local dates from `from` to `to` (inclusive) in `tz`, with one more on each side: a
/// resource in another zone can have slots that fall on the requested dates.
pub fn dates_between(from: DateTime<Utc>, to: DateTime<Utc>, tz: &Zone) -> Vec<NaiveDate> {
    let (a, b) = (from.with_timezone(tz).date_naive() - Duration::days(1), to.with_timezone(tz).date_naive() + Duration::days(1));
    a.iter_days().take_while(|d| *d <= b).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn week(start: &str, end: &str) -> Week {
        WEEKDAYS.iter().map(|d| (d.to_string(), vec![Interval { start: start.into(), end: end.into() }])).collect()
    }

    #[test]
    fn nine_stays_nine_local_across_dst() {
        let tz = &Zone::named("Europe/Oslo").unwrap();
        let w = week("09:00", "10:00");
        // The day before and after the spring change (2026-03-29): 09:00 local both days.
        let before = slot_starts(tz, &w, &[], NaiveDate::from_ymd_opt(2026, 3, 28).unwrap(), 60, 60);
        let after = slot_starts(tz, &w, &[], NaiveDate::from_ymd_opt(2026, 3, 30).unwrap(), 60, 60);
        assert_eq!(before[0].to_rfc3339(), "2026-03-28T08:00:00+00:00");
        assert_eq!(after[0].to_rfc3339(), "2026-03-30T07:00:00+00:00");
    }

    #[test]
    fn missing_local_times_give_no_slot_and_repeated_ones_give_two() {
        let tz = &Zone::named("America/New_York").unwrap();
        let night = week("01:00", "04:00");
        // 2026-03-08: 02:00-03:00 does not exist.
        let spring = slot_starts(tz, &night, &[], NaiveDate::from_ymd_opt(2026, 3, 8).unwrap(), 30, 30);
        let local: Vec<String> = spring.iter().map(|s| s.with_timezone(tz).format("%H:%M").to_string()).collect();
        assert_eq!(local, ["01:00", "01:30", "03:00", "03:30"]);
        // 2026-11-01: 01:00-02:00 happens twice.
        let fall = slot_starts(tz, &night, &[], NaiveDate::from_ymd_opt(2026, 11, 1).unwrap(), 30, 30);
        let local: Vec<String> = fall.iter().map(|s| s.with_timezone(tz).format("%H:%M%z").to_string()).collect();
        assert_eq!(local, ["01:00-0400", "01:30-0400", "01:00-0500", "01:30-0500", "02:00-0500", "02:30-0500", "03:00-0500", "03:30-0500"]);
    }

    #[test]
    fn a_day_open_until_24_00_has_a_slot_ending_at_midnight() {
        let day = NaiveDate::from_ymd_opt(2026, 3, 15).unwrap();
        let all = slot_starts(&Zone::utc(), &week("00:00", "24:00"), &[], day, 30, 30);
        assert_eq!(all.len(), 48);
        assert_eq!(all.last().unwrap().to_rfc3339(), "2026-03-15T23:30:00+00:00");
        // Across the spring change (Oslo, 2026-03-29): a 23 hour day.
        let tz = &Zone::named("Europe/Oslo").unwrap();
        assert_eq!(slot_starts(tz, &week("00:00", "24:00"), &[], NaiveDate::from_ymd_opt(2026, 3, 29).unwrap(), 60, 60).len(), 23);
        assert_eq!(slot_starts(&Zone::utc(), &week("22:00", "24:00"), &[], day, 60, 90).len(), 1, "22:00, not 23:00");
        // The Azores go back from 01:00 to 00:00 on 2026-10-25: Saturday's 24:00 is the first
        // midnight, so a 60-minute slot at 23:30 does not fit, and one at 23:00 does.
        let azores = &Zone::named("Atlantic/Azores").unwrap();
        let sat = slot_starts(azores, &week("22:00", "24:00"), &[], NaiveDate::from_ymd_opt(2026, 10, 24).unwrap(), 30, 60);
        let local: Vec<String> = sat.iter().map(|s| s.with_timezone(azores).format("%H:%M").to_string()).collect();
        assert_eq!(local, ["22:00", "22:30", "23:00"]);
    }

    #[test]
    fn cells_cover_buffers_and_round_out() {
        let s = Utc.with_ymd_and_hms(2026, 3, 15, 10, 2, 0).unwrap();
        assert_eq!(cells(s, 10, 0, 0), ["20260315T1000", "20260315T1005", "20260315T1010"]);
        assert_eq!(cells(s, 10, 5, 5).len(), 5);
        assert_eq!(cells(Utc.with_ymd_and_hms(2026, 3, 15, 10, 0, 0).unwrap(), 30, 0, 0).len(), 6);
    }

    #[test]
    fn hours_are_checked() {
        let mut e = shared::validate::Errors::new();
        let mut w = week("09:00", "12:00");
        w.get_mut("mon").unwrap().push(Interval { start: "11:00".into(), end: "13:00".into() });
        w.insert("funday".into(), vec![]);
        check_hours(
            &mut e,
            &w,
            &[Exception { date: "2026-02-30".into(), intervals: vec![Interval { start: "10:00".into(), end: "09:00".into() }] }],
        );
        let fields: Vec<String> = e.finish().unwrap_err().details.into_iter().filter_map(|d| d.field).collect();
        assert_eq!(fields, ["opening_hours.funday", "opening_hours.mon", "exceptions[0].date", "exceptions[0].intervals[0]"]);
    }
}
