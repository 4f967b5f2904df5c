//! A container's short memory of what it read (a workspace's slug or settings): a value is
//! trusted for a fixed time, so a request costs its own reads and no more, and a change made
//! elsewhere shows within that time. Few entries, kept in a list: a function serves few
//! workspaces at a time, and the oldest goes first when it is full.

use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct Ttl<T> {
    ttl: Duration,
    kept: usize,
    entries: Mutex<Vec<(String, Instant, T)>>,
}

impl<T: Clone> Ttl<T> {
    /// Values trusted for `ttl`, at most `kept` of them.
    pub const fn new(ttl: Duration, kept: usize) -> Self {
        Self { ttl, kept, entries: Mutex::new(Vec::new()) }
    }

    /// The value kept for `key`, while it is fresh.
    pub fn get(&self, key: &str) -> Option<T> {
        let c = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        c.iter().find(|(k, at, _)| k == key && at.elapsed() < self.ttl).map(|(_, _, v)| v.clone())
    }

    /// Keep `value` for `key`, dropping stale entries and, when full, the oldest.
    pub fn put(&self, key: &str, value: T) {
        let mut c = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        c.retain(|(k, at, _)| k != key && at.elapsed() < self.ttl);
        if c.len() >= self.kept {
            c.remove(0);
        }
        c.push((key.to_string(), Instant::now(), value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_kept_while_fresh_and_the_oldest_goes_when_full() {
        let c = Ttl::new(Duration::from_secs(60), 2);
        c.put("a", 1);
        c.put("b", 2);
        c.put("a", 3);
        assert_eq!((c.get("a"), c.get("b")), (Some(3), Some(2)));
        c.put("c", 4);
        assert_eq!((c.get("a"), c.get("b"), c.get("c")), (Some(3), None, Some(4)), "b was the oldest");
        let stale = Ttl::new(Duration::ZERO, 2);
        stale.put("a", 1);
        assert_eq!(stale.get("a"), None);
    }
}
