//! The calendar invite a booking email carries (RFC 5545, `text/calendar`), so a mail client
//! offers "add to calendar": `METHOD:REQUEST` when booked or moved, `METHOD:CANCEL` when
//! cancelled. A booking and the bookings it is moved to are one event to the calendar: one
//! `UID` (the first booking's id) and a `SEQUENCE` one higher with each move or cancellation
//! (`Booking::invite_uid`, `Booking::invite_sequence`). Times are the resource's local times with
//! its zone as a `VTIMEZONE` (the offset changes around the booking), so a client places them
//! right across a DST change.
//!
//! The event is built with the icalendar crate (escaping text, folding lines). Its builder has
//! no time zone component, and it writes parameter values as given, so two things are ours:
//! the `VTIMEZONE` text (from values the platform controls: a zone name from the tz database,
//! offsets, abbreviations), and cleaning names before they become `CN` parameters (no quotes,
//! no control characters, always quoted), since a contact's name is anyone's input. A time in
//! the hour repeated when clocks go back is written in UTC: a local time there means its first
//! occurrence to a client (RFC 5545 3.3.5).

use super::{Booking, Resource, Service};
use icalendar::{Component, EventLike, EventStatus, Property};
use shared::auth::WorkspaceId;
use shared::zone::Zone;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Request,
    Cancel,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Request => "REQUEST",
            Method::Cancel => "CANCEL",
        }
    }
}

/// Who sends the invite and who is invited: display name (if any) and address.
pub struct Party<'a> {
    pub name: Option<&'a str>,
    pub address: &'a str,
}

/// `+0100`, `-0330`.
fn offset(seconds: i32) -> String {
    let sign = if seconds < 0 { '-' } else { '+' };
    let s = seconds.unsigned_abs();
    format!("{sign}{:02}{:02}", s / 3600, (s % 3600) / 60)
}

fn local(utc_second: i64, offset_seconds: i32) -> String {
    chrono::DateTime::from_timestamp(utc_second + i64::from(offset_seconds), 0).unwrap_or_default().format("%Y%m%dT%H%M%S").to_string()
}

/// The zone's `VTIMEZONE` around the booking's times: the change in force at its start and the
/// next one (a zone without changes: one observance at its fixed offset).
fn vtimezone(name: &str, zone: &Zone, start: i64) -> String {
    let mut out = format!("BEGIN:VTIMEZONE\r\nTZID:{name}\r\n");
    let changes = zone.changes_around(start);
    if changes.is_empty() {
        let fixed = zone.offset_seconds_at(start);
        out.push_str(&format!(
            "BEGIN:STANDARD\r\nDTSTART:19700101T000000\r\nTZOFFSETFROM:{o}\r\nTZOFFSETTO:{o}\r\nEND:STANDARD\r\n",
            o = offset(fixed)
        ));
    }
    for c in changes {
        let kind = if c.dst { "DAYLIGHT" } else { "STANDARD" };
        // The abbreviation only when it is plain text (`CET`; some zones have `+03`).
        let tzname = c.abbreviation.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '+' || ch == '-');
        out.push_str(&format!(
            "BEGIN:{kind}\r\nDTSTART:{}\r\nTZOFFSETFROM:{}\r\nTZOFFSETTO:{}\r\n{}END:{kind}\r\n",
            local(c.utc_second, c.offset_from),
            offset(c.offset_from),
            offset(c.offset_to),
            if tzname { format!("TZNAME:{}\r\n", c.abbreviation) } else { String::new() },
        ));
    }
    out.push_str("END:VTIMEZONE\r\n");
    out
}

/// A parameter value as RFC 5545 allows it: quoted, without quotes or control characters.
fn param_value(v: &str) -> String {
    let clean: String = v
        .chars()
        .map(|c| {
            if c == '"' {
                '\''
            } else if c.is_control() {
                ' '
            } else {
                c
            }
        })
        .collect();
    format!("\"{}\"", clean.trim())
}

fn mailto(p: &Party<'_>, key: &str) -> Property {
    let mut prop = Property::new(key, format!("mailto:{}", p.address));
    if let Some(n) = p.name.map(str::trim).filter(|n| !n.is_empty()) {
        prop.add_parameter("CN", &param_value(n));
    }
    prop
}

/// A time as the invite writes it: local with the zone's id, or UTC when it is the second
/// occurrence of a repeated local time.
fn when(zone: &Zone, tzid: &str, t: i64) -> icalendar::CalendarDateTime {
    use chrono::TimeZone;
    let local = chrono::DateTime::from_timestamp(t + i64::from(zone.offset_seconds_at(t)), 0).unwrap_or_default().naive_utc();
    match zone.from_local_datetime(&local) {
        chrono::MappedLocalTime::Ambiguous(first, _) if first.timestamp() != t => {
            icalendar::CalendarDateTime::Utc(chrono::DateTime::from_timestamp(t, 0).unwrap_or_default())
        }
        _ => icalendar::CalendarDateTime::WithTimezone { date_time: local, tzid: tzid.to_string() },
    }
}

/// The invite of `b` (its text, CRLF lines). `tentative`: the booking awaits confirmation.
#[allow(clippy::too_many_arguments)]
pub fn invite(
    ws: &WorkspaceId,
    b: &Booking,
    svc: &Service,
    res: &Resource,
    organizer: &Party<'_>,
    attendee: &Party<'_>,
    method: Method,
    tentative: bool,
) -> String {
    let (zone, tzid) = match super::tz(&res.timezone) {
        Some(z) => (z, res.timezone.as_str()),
        None => (Zone::utc(), "UTC"),
    };
    let (start, end) = (b.start.time().timestamp(), b.end.time().timestamp());
    let mut attendee_prop = mailto(attendee, "ATTENDEE");
    attendee_prop.add_parameter("ROLE", "REQ-PARTICIPANT").add_parameter("PARTSTAT", "ACCEPTED").add_parameter("RSVP", "FALSE");
    let status = match (method, tentative) {
        (Method::Cancel, _) => EventStatus::Cancelled,
        (Method::Request, true) => EventStatus::Tentative,
        (Method::Request, false) => EventStatus::Confirmed,
    };
    // SUMMARY is escaped by the crate, except a lone carriage return.
    let summary: String = format!("{} with {}", svc.name, res.name).chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let event = icalendar::Event::new()
        .uid(&format!("{}@{ws}", b.invite_uid.as_ref().unwrap_or(&b.id)))
        .sequence(b.invite_sequence)
        .timestamp(chrono::Utc::now())
        .starts(when(&zone, tzid, start))
        .ends(when(&zone, tzid, end))
        .summary(&summary)
        .status(status)
        .append_property(mailto(organizer, "ORGANIZER"))
        .append_property(attendee_prop)
        .done();
    let mut vevent = String::new();
    // Writing to a String cannot fail.
    let _ = event.fmt_write(&mut vevent);
    format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//workspace-platform//bookings//EN\r\nCALSCALE:GREGORIAN\r\nMETHOD:{}\r\n{}{vevent}END:VCALENDAR\r\n",
        method.as_str(),
        vtimezone(tzid, &zone, start),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_add_lines_or_parameters() {
        let evil = "x\":mailto:a@b.example\r\nURL:https://evil.example\r\nX-A:\";SENT-BY=\"mailto:e@x\"";
        let p = mailto(&Party { name: Some(evil), address: "v@example.org" }, "ATTENDEE");
        let mut out = String::new();
        icalendar::Event::new().uid("u").append_property(p).done().fmt_write(&mut out).unwrap();
        let unfolded = out.replace("\r\n ", "");
        let lines: Vec<&str> = unfolded.split("\r\n").filter(|l| !l.is_empty()).collect();
        assert_eq!(lines.len(), 5, "BEGIN, DTSTAMP, ATTENDEE, UID, END: {lines:?}");
        let attendee = lines.iter().find(|l| l.starts_with("ATTENDEE")).unwrap();
        let want = "ATTENDEE;CN=\"x':mailto:a@b.example  URL:https://evil.example  X-A:';SENT-BY='mailto:e@x'\":mailto:v@example.org";
        assert_eq!(*attendee, want);
    }

    #[test]
    fn a_repeated_hour_is_written_in_utc_the_first_one_local() {
        let oslo = Zone::named("Europe/Oslo").unwrap();
        // 2026-10-25 00:30Z and 01:30Z are both 02:30 in Oslo.
        let first = when(&oslo, "Europe/Oslo", 1_792_888_200);
        let second = when(&oslo, "Europe/Oslo", 1_792_891_800);
        assert!(matches!(first, icalendar::CalendarDateTime::WithTimezone { .. }), "{first:?}");
        assert!(matches!(second, icalendar::CalendarDateTime::Utc(_)), "{second:?}");
    }

    #[test]
    fn the_time_zone_states_the_changes_around_the_booking() {
        // St. John's, 2027-01-15: NST (-03:30) since November, NDT (-02:30) from 2027-03-14.
        let z = Zone::named("America/St_Johns").unwrap();
        let t = vtimezone("America/St_Johns", &z, 1_800_000_000);
        assert!(t.starts_with("BEGIN:VTIMEZONE\r\nTZID:America/St_Johns\r\n"), "{t}");
        assert!(t.contains("BEGIN:STANDARD\r\nDTSTART:20261101T020000\r\nTZOFFSETFROM:-0230\r\nTZOFFSETTO:-0330\r\nTZNAME:NST\r\n"), "{t}");
        assert!(t.contains("BEGIN:DAYLIGHT\r\nDTSTART:20270314T020000\r\nTZOFFSETFROM:-0330\r\nTZOFFSETTO:-0230\r\nTZNAME:NDT\r\n"), "{t}");
        // A zone that never changes: one observance at its offset.
        let k = vtimezone("Asia/Kolkata", &Zone::named("Asia/Kolkata").unwrap(), 1_800_000_000);
        assert_eq!(k.matches("BEGIN:STANDARD").count(), 1, "{k}");
        assert!(k.contains("TZOFFSETTO:+0530"), "{k}");
    }
}
