//! Prefixed, time-ordered ids (`post_01J...`): a ULID sorts by creation time, so a workspace's
//! items of one kind come back from one Query in creation order, and paging by id is stable.

use std::sync::Mutex;
use ulid::{Generator, Ulid};

/// Monotonic within the process: two ids made in the same millisecond still sort in order.
static GENERATOR: Mutex<Generator> = Mutex::new(Generator::new());

pub fn new_id(prefix: &str) -> String {
    let ulid = GENERATOR.lock().map(|mut g| g.generate().ok()).ok().flatten().unwrap_or_else(Ulid::generate);
    format!("{prefix}_{ulid}")
}

/// True when `id` is `<prefix>_<26 Crockford base32 chars>`; used to reject garbage ids before any I/O.
pub fn is_valid(prefix: &str, id: &str) -> bool {
    id.strip_prefix(prefix).and_then(|rest| rest.strip_prefix('_')).is_some_and(|u| u.len() == 26 && Ulid::from_string(u).is_ok())
}

/// Current time as RFC 3339 UTC with second precision, the contract's time format.
pub fn now_rfc3339() -> String {
    format_time(chrono::Utc::now())
}

pub fn format_time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_valid_and_ordered() {
        let a = new_id("post");
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = new_id("post");
        assert!(a.starts_with("post_"));
        assert!(is_valid("post", &a));
        assert!(a < b);
        assert!(!is_valid("ct", &a));
        assert!(!is_valid("post", "post_123"));
        assert!(!is_valid("post", "post_../../etc"));
    }

    #[test]
    fn time_is_rfc3339_utc_seconds() {
        let t = now_rfc3339();
        assert!(t.ends_with('Z') && t.len() == 20, "{t}");
    }
}
