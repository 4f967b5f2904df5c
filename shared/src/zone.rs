//! IANA time zones (opening hours, local dates, the times in notifications) as chrono
//! [`TimeZone`]s, read by jiff from the tzdb's TZif data, which the build script deflates into
//! the binary (`build.rs`): the container inflates it (about 0.2 MB, a millisecond) when it
//! first names a zone. chrono-tz compiled every zone's history into pointer-rich tables, 2.5 MB
//! of the bookings binary, and the loader relocating them made bookings the slowest cold start.

use chrono::{Datelike, FixedOffset, MappedLocalTime, NaiveDate, NaiveDateTime, Offset, TimeZone, Timelike};
use jiff::tz::AmbiguousOffset;

/// A named time zone.
#[derive(Clone, Debug)]
pub struct Zone(jiff::tz::TimeZone);

impl Zone {
    pub fn utc() -> Self {
        Self(jiff::tz::TimeZone::UTC)
    }

    /// The zone of an IANA name exactly as the database spells it (`Europe/Oslo`, `UTC`); none
    /// for other spellings, POSIX rules or paths, so a stored name is always canonical.
    pub fn named(name: &str) -> Option<Self> {
        let db = tzdb();
        let at = db.zones.binary_search_by(|(n, _)| (*n).cmp(name)).ok()?;
        let (name, range) = &db.zones[at];
        // Parsed once per zone and container (the data is a zone's whole history).
        let mut parsed = db.parsed.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, tz)) = parsed.iter().find(|(n, _)| n == name) {
            return Some(Self(tz.clone()));
        }
        let tz = jiff::tz::TimeZone::tzif(name, &db.data[range.clone()]).ok()?;
        parsed.push((name, tz.clone()));
        Some(Self(tz))
    }

    /// The zone's rules around an instant, as an iCalendar `VTIMEZONE` states them: the last
    /// change of offset at or before it and the next one after it (none for a zone that never
    /// changes). Enough for a client to place times near that instant, across a DST change.
    pub fn changes_around(&self, utc_second: i64) -> Vec<Change> {
        let Ok(at) = jiff::Timestamp::from_second(utc_second) else { return vec![] };
        let change = |t: jiff::tz::TimeZoneTransition| {
            let when = t.timestamp();
            let before = when.checked_sub(jiff::SignedDuration::from_secs(1)).map(|b| self.0.to_offset(b)).unwrap_or(t.offset());
            Change {
                utc_second: when.as_second(),
                offset_from: before.seconds(),
                offset_to: t.offset().seconds(),
                dst: t.dst().is_dst(),
                abbreviation: t.abbreviation().to_string(),
            }
        };
        let next_instant = at.checked_add(jiff::SignedDuration::from_secs(1)).unwrap_or(at);
        let last = self.0.preceding(next_instant).next().map(change);
        let next = self.0.following(at).next().map(change);
        last.into_iter().chain(next).collect()
    }

    /// The zone's offset from UTC at an instant, in seconds.
    pub fn offset_seconds_at(&self, utc_second: i64) -> i32 {
        jiff::Timestamp::from_second(utc_second).map(|t| self.0.to_offset(t).seconds()).unwrap_or(0)
    }

    fn offset(&self, seconds: i32, utc_second: i64) -> ZoneOffset {
        let fix = FixedOffset::east_opt(seconds).unwrap_or(chrono::Utc.fix());
        ZoneOffset { zone: self.clone(), fix, utc_second }
    }
}

/// One change of a zone's offset from UTC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// When, in UTC (Unix seconds).
    pub utc_second: i64,
    pub offset_from: i32,
    pub offset_to: i32,
    /// Whether the offset it changes to is daylight saving time.
    pub dst: bool,
    /// The abbreviation from then on (`CEST`).
    pub abbreviation: String,
}

/// The inflated database: names (sorted) with the range of their TZif data.
struct Tzdb {
    zones: Vec<(&'static str, std::ops::Range<usize>)>,
    data: &'static [u8],
    parsed: std::sync::Mutex<Vec<(&'static str, jiff::tz::TimeZone)>>,
}

fn tzdb() -> &'static Tzdb {
    static DB: std::sync::OnceLock<Tzdb> = std::sync::OnceLock::new();
    DB.get_or_init(|| {
        use std::io::Read;
        static DEFLATED: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/tzdb.deflate"));
        let mut all = vec![];
        flate2::read::DeflateDecoder::new(DEFLATED).read_to_end(&mut all).expect("the build script deflated it");
        // Kept for the container's life, like the bundled data it replaces.
        let all: &'static [u8] = Box::leak(all.into_boxed_slice());
        let split = all.windows(2).position(|w| w == b"\n\n").expect("index, blank line, data");
        let index = std::str::from_utf8(&all[..split]).expect("the index is text");
        let zones = index
            .lines()
            .filter_map(|l| {
                let mut f = l.split(' ');
                let (name, offset, len) = (f.next()?, f.next()?.parse::<usize>().ok()?, f.next()?.parse::<usize>().ok()?);
                Some((name, offset..offset + len))
            })
            .collect();
        Tzdb { zones, data: &all[split + 2..], parsed: Default::default() }
    })
}

/// The offset of a [`Zone`] at one instant; displays as the zone's abbreviation there (`%Z`:
/// `CET`, `EDT`).
#[derive(Clone, Debug)]
pub struct ZoneOffset {
    zone: Zone,
    fix: FixedOffset,
    utc_second: i64,
}

impl Offset for ZoneOffset {
    fn fix(&self) -> FixedOffset {
        self.fix
    }
}

impl std::fmt::Display for ZoneOffset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match jiff::Timestamp::from_second(self.utc_second) {
            Ok(at) => f.write_str(self.zone.0.to_offset_info(at).abbreviation()),
            Err(_) => write!(f, "{}", self.fix),
        }
    }
}

impl TimeZone for Zone {
    type Offset = ZoneOffset;

    fn from_offset(offset: &ZoneOffset) -> Self {
        offset.zone.clone()
    }

    fn offset_from_local_date(&self, local: &NaiveDate) -> MappedLocalTime<ZoneOffset> {
        self.offset_from_local_datetime(&local.and_time(chrono::NaiveTime::MIN))
    }

    /// One offset, two in a repeated hour (earlier instant first), none in a skipped one.
    fn offset_from_local_datetime(&self, local: &NaiveDateTime) -> MappedLocalTime<ZoneOffset> {
        let civil = jiff::civil::DateTime::new(
            i16::try_from(local.year()).unwrap_or(i16::MAX),
            local.month() as i8,
            local.day() as i8,
            local.hour() as i8,
            local.minute() as i8,
            local.second() as i8,
            0,
        );
        let Ok(civil) = civil else { return MappedLocalTime::None };
        let local_second = local.and_utc().timestamp();
        let at = |o: jiff::tz::Offset| self.offset(o.seconds(), local_second - i64::from(o.seconds()));
        match self.0.to_ambiguous_timestamp(civil).offset() {
            AmbiguousOffset::Unambiguous { offset } => MappedLocalTime::Single(at(offset)),
            AmbiguousOffset::Fold { before, after } => MappedLocalTime::Ambiguous(at(before), at(after)),
            AmbiguousOffset::Gap { .. } => MappedLocalTime::None,
        }
    }

    fn offset_from_utc_date(&self, utc: &NaiveDate) -> ZoneOffset {
        self.offset_from_utc_datetime(&utc.and_time(chrono::NaiveTime::MIN))
    }

    fn offset_from_utc_datetime(&self, utc: &NaiveDateTime) -> ZoneOffset {
        let second = utc.and_utc().timestamp();
        let seconds = jiff::Timestamp::from_second(second).map(|at| self.0.to_offset(at).seconds()).unwrap_or(0);
        self.offset(seconds, second)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_around_a_dst_start() {
        let oslo = Zone::named("Europe/Oslo").unwrap();
        // 2027-03-27 09:00Z, the day before summer time starts (2027-03-28 01:00Z).
        let c = oslo.changes_around(1_806_138_000);
        assert_eq!(c.len(), 2, "{c:?}");
        assert_eq!((c[0].offset_to, c[0].dst, c[0].abbreviation.as_str()), (3600, false, "CET"));
        assert_eq!((c[1].utc_second, c[1].offset_from, c[1].offset_to, c[1].dst), (1_806_195_600, 3600, 7200, true));
        assert!(Zone::utc().changes_around(1_806_138_000).is_empty());
    }
    use chrono::Utc;

    #[test]
    fn names_are_the_database_spelling() {
        assert!(Zone::named("Europe/Berlin").is_some() && Zone::named("UTC").is_some());
        for bad in ["Mars/Base", "europe/berlin", "", "EST5EDT,M3.2.0,M11.1.0", "/etc/localtime", "Europe/../UTC"] {
            assert!(Zone::named(bad).is_none(), "{bad}");
        }
        // Every zone of the database parses, links (`US/Eastern`) too.
        assert!(tzdb().zones.len() > 500);
        for (name, _) in &tzdb().zones {
            assert!(Zone::named(name).is_some_and(|z| z.0.iana_name() == Some(*name)), "{name}");
        }
    }

    #[test]
    fn local_times_map_to_instants_across_changes() {
        let ny = Zone::named("America/New_York").unwrap();
        let at = |d: u32, h: u32, m: u32| NaiveDate::from_ymd_opt(2026, 11, d).unwrap().and_hms_opt(h, m, 0).unwrap();
        // 2026-11-01 01:30 happens twice (EDT, then EST): earlier first.
        match ny.from_local_datetime(&at(1, 1, 30)) {
            MappedLocalTime::Ambiguous(a, b) => {
                assert_eq!(a.with_timezone(&Utc).to_rfc3339(), "2026-11-01T05:30:00+00:00");
                assert_eq!(b.with_timezone(&Utc).to_rfc3339(), "2026-11-01T06:30:00+00:00");
                assert_eq!((a.format("%Z").to_string(), b.format("%Z").to_string()), ("EDT".into(), "EST".into()));
            }
            other => panic!("{other:?}"),
        }
        // 2026-03-08 02:30 does not exist.
        let spring = NaiveDate::from_ymd_opt(2026, 3, 8).unwrap().and_hms_opt(2, 30, 0).unwrap();
        assert!(matches!(ny.from_local_datetime(&spring), MappedLocalTime::None));
        let oslo = Zone::named("Europe/Oslo").unwrap();
        let summer = Utc.with_ymd_and_hms(2026, 7, 1, 12, 0, 0).unwrap().with_timezone(&oslo);
        assert_eq!((summer.to_rfc3339(), summer.format("%H:%M %Z").to_string()), ("2026-07-01T14:00:00+02:00".into(), "14:00 CEST".into()));
        assert_eq!(summer.date_naive(), NaiveDate::from_ymd_opt(2026, 7, 1).unwrap());
    }
}
