//! The calendar invite a booking email carries (RFC 5545, `text/calendar`), so a mail client
//! offers "add to calendar": `METHOD:REQUEST` when booked or moved, `METHOD:CANCEL` when
//! cancelled. A booking and the bookings it is moved to are one event to the calendar: one
//! `UID` (the first booking's id) and a `SEQUENCE` one higher with each move or cancellation
//! (`Booking::invite_uid`, `Booking::invite_sequence`). Times are the resource's local times with
//! its zone as a `VTIMEZONE` (the offset changes around the booking), so a client places them
//! right across a DST change.
//!
//! The event is built with the icalendar crate (escaping names and text, folding lines); the
//! `VTIMEZONE` is written from values the platform controls (a zone name from the tz database,
//! offsets, abbreviations) and read back by the same crate's parser, since its builder has no
//! time zone component.

use super::{Booking, Resource, Service};
use icalendar::{Calendar, Component, EventLike, EventStatus, Property};
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

fn mailto(p: &Party<'_>, key: &str) -> Property {
    let mut prop = Property::new(key, format!("mailto:{}", p.address));
    if let Some(n) = p.name.filter(|n| !n.is_empty()) {
        prop.add_parameter("CN", n);
    }
    prop
}

/// The invite of `b` (its text, CRLF lines).
pub fn invite(
    ws: &WorkspaceId,
    b: &Booking,
    svc: &Service,
    res: &Resource,
    organizer: &Party<'_>,
    attendee: &Party<'_>,
    method: Method,
) -> String {
    let (zone, tzid) = match super::tz(&res.timezone) {
        Some(z) => (z, res.timezone.as_str()),
        None => (Zone::utc(), "UTC"),
    };
    let (start, end) = (b.start.time().timestamp(), b.end.time().timestamp());
    let at = |t: i64| icalendar::CalendarDateTime::WithTimezone {
        date_time: chrono::DateTime::from_timestamp(t + i64::from(zone.offset_seconds_at(t)), 0).unwrap_or_default().naive_utc(),
        tzid: tzid.to_string(),
    };
    let skeleton = format!("BEGIN:VCALENDAR\r\nVERSION:2.0\r\n{}END:VCALENDAR\r\n", vtimezone(tzid, &zone, start));
    let mut cal: Calendar = skeleton.parse().unwrap_or_else(|_| Calendar::new());
    let mut attendee_prop = mailto(attendee, "ATTENDEE");
    attendee_prop.add_parameter("ROLE", "REQ-PARTICIPANT").add_parameter("PARTSTAT", "ACCEPTED").add_parameter("RSVP", "FALSE");
    let event = icalendar::Event::new()
        .uid(&format!("{}@{ws}", b.invite_uid.as_ref().unwrap_or(&b.id)))
        .sequence(b.invite_sequence)
        .timestamp(chrono::Utc::now())
        .starts(at(start))
        .ends(at(end))
        .summary(&format!("{} with {}", svc.name, res.name))
        .status(if method == Method::Cancel { EventStatus::Cancelled } else { EventStatus::Confirmed })
        .append_property(mailto(organizer, "ORGANIZER"))
        .append_property(attendee_prop)
        .done();
    cal.push(event);
    cal.append_property(Property::new("PRODID", "-//workspace-platform//bookings//EN"));
    cal.append_property(Property::new("METHOD", method.as_str()));
    cal.to_string()
}
