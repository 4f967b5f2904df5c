//! Token buckets as GCRA in DynamoDB. One item per workspace and class holds the theoretical
//! arrival time `tat` (epoch ms). Admission is one conditional UpdateItem:
//!   busy bucket:  SET tat = tat + T   IF tat BETWEEN now - T AND now + cap - T
//!   idle bucket:  SET tat = now + T   IF tat absent OR tat < now
//! where T = period / rate and cap = burst * T. The busy branch also takes a bucket idle for
//! less than one interval (crediting that moment, at most one token beyond the burst): a key
//! running near its refill rate hovers around `tat = now`, and without the overlap racing
//! requests split between the branches and lose conditional writes to each other (2.6 to 2.9
//! calls per request in `make bench` at 16 and 64 clients); the busy branch's `tat + T`
//! commutes, so they all succeed at the first call. A refused condition returns the old item
//! (ReturnValuesOnConditionCheckFailure=ALL_OLD), which tells us whether the bucket is empty
//! (answer 429, no second read) or we picked the wrong branch (retry the other one). The
//! container remembers the last `tat` it saw to pick the right branch first, and since `tat`
//! only ever grows, a remembered "empty until X" can answer 429 without any call.
//! Conditional writes are atomic, so racing containers can never admit more than burst + refill.

use crate::error::{ApiError, ErrorCode};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    Read,
    Write,
    EmailSend,
    EmailBatch,
    ContactImport,
    GdprExport,
    /// Every `/portal/me...` route, per portal session (and the exchange, per source address).
    Portal,
    /// Signing in to the portal without a credential (asking for a link, giving the code, using
    /// the link), per network address.
    PortalSignIn,
    /// Asking for a portal sign-in link, per address asked for: mail to one inbox is bounded
    /// whoever asks.
    PortalSignInAddress,
    /// An emailed unsubscribe link, per network address: mail providers post their users'
    /// one-click unsubscribes from a few shared addresses.
    Unsubscribe,
}

impl Class {
    pub const ALL: [Class; 10] = [
        Class::Read,
        Class::Write,
        Class::EmailSend,
        Class::EmailBatch,
        Class::ContactImport,
        Class::GdprExport,
        Class::Portal,
        Class::PortalSignIn,
        Class::PortalSignInAddress,
        Class::Unsubscribe,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Class::Read => "read",
            Class::Write => "write",
            Class::EmailSend => "email_send",
            Class::EmailBatch => "email_batch",
            Class::ContactImport => "contact_import",
            Class::GdprExport => "gdpr_export",
            Class::Portal => "portal",
            Class::PortalSignIn => "portal_sign_in",
            Class::PortalSignInAddress => "portal_sign_in_address",
            Class::Unsubscribe => "unsubscribe",
        }
    }

    /// The table of docs/api.md.
    pub fn defaults() -> HashMap<Class, Limit> {
        const MIN: i64 = 60_000;
        const HOUR: i64 = 3_600_000;
        HashMap::from([
            (Class::Read, Limit { rate: 300, period_ms: MIN, burst: 100 }),
            (Class::Write, Limit { rate: 60, period_ms: MIN, burst: 30 }),
            (Class::EmailSend, Limit { rate: 100, period_ms: MIN, burst: 50 }),
            (Class::EmailBatch, Limit { rate: 10, period_ms: MIN, burst: 5 }),
            (Class::ContactImport, Limit { rate: 5, period_ms: MIN, burst: 3 }),
            (Class::GdprExport, Limit { rate: 5, period_ms: HOUR, burst: 2 }),
            (Class::Portal, Limit { rate: 60, period_ms: MIN, burst: 20 }),
            (Class::PortalSignIn, Limit { rate: 30, period_ms: HOUR, burst: 10 }),
            (Class::PortalSignInAddress, Limit { rate: 10, period_ms: HOUR, burst: 5 }),
            (Class::Unsubscribe, Limit { rate: 600, period_ms: MIN, burst: 300 }),
        ])
    }
}

/// `rate` tokens per `period_ms`, at most `burst` banked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    pub rate: i64,
    pub period_ms: i64,
    pub burst: i64,
}

impl Limit {
    /// `"60/min:30"`, `"5/hour:2"`, `"10/s:10"`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let err = || format!("expected RATE/PERIOD:BURST such as 60/min:30, got {s:?}");
        let (rate, rest) = s.split_once('/').ok_or_else(err)?;
        let (period, burst) = rest.split_once(':').ok_or_else(err)?;
        let period_ms = match period {
            "s" | "sec" | "second" => 1_000,
            "min" | "minute" => 60_000,
            "h" | "hour" => 3_600_000,
            _ => return Err(err()),
        };
        let rate: i64 = rate.trim().parse().map_err(|_| err())?;
        let burst: i64 = burst.trim().parse().map_err(|_| err())?;
        if rate < 1 || burst < 1 || rate > period_ms {
            return Err(err());
        }
        Ok(Self { rate, period_ms, burst })
    }

    /// Emission interval: ms per token.
    pub fn interval_ms(&self) -> i64 {
        self.period_ms / self.rate
    }
    pub fn capacity_ms(&self) -> i64 {
        self.burst * self.interval_ms()
    }
}

/// What the limiter decided, with what the headers need.
#[derive(Clone, Debug)]
pub struct Decision {
    pub class: Class,
    pub limit: Limit,
    pub allowed: bool,
    pub remaining: i64,
    /// ms until the bucket is full again (allowed) or until one token is back (refused).
    pub wait_ms: i64,
}

impl Decision {
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let name = self.class.name();
        let window = (self.limit.capacity_ms() + 999) / 1000;
        let mut h = vec![
            ("ratelimit-policy", format!("\"{name}\";q={};w={window}", self.limit.burst)),
            ("ratelimit", format!("\"{name}\";r={};t={}", self.remaining.max(0), (self.wait_ms.max(0) + 999) / 1000)),
        ];
        if !self.allowed {
            h.push(("retry-after", self.retry_after_secs().to_string()));
        }
        h
    }
    pub fn retry_after_secs(&self) -> i64 {
        ((self.wait_ms + 999) / 1000).max(1)
    }
    pub fn into_error(self) -> ApiError {
        let mut e = ApiError::new(
            ErrorCode::RateLimited,
            format!("rate limit for class {} exceeded; retry after {} s", self.class.name(), self.retry_after_secs()),
        );
        e.headers = self.headers();
        e
    }
}

pub struct RateLimiter {
    limits: HashMap<Class, Limit>,
    /// Last `tat` seen per bucket in this container.
    seen: Mutex<HashMap<String, i64>>,
}

enum Branch {
    Busy,
    Idle,
}

impl RateLimiter {
    pub fn new(limits: HashMap<Class, Limit>) -> Self {
        Self { limits, seen: Mutex::new(HashMap::new()) }
    }

    pub fn limit(&self, class: Class) -> Limit {
        self.limits.get(&class).copied().unwrap_or_else(|| Class::defaults()[&class])
    }

    /// Take one token from `scope`'s bucket of `class`.
    pub async fn acquire(&self, db: &crate::store::Db, scope: &str, class: Class) -> Result<Decision, ApiError> {
        self.acquire_at(db, scope, class, crate::ids::now_ms()).await
    }

    pub async fn acquire_at(&self, db: &crate::store::Db, scope: &str, class: Class, now: i64) -> Result<Decision, ApiError> {
        let limit = self.limit(class);
        let (t, cap) = (limit.interval_ms(), limit.capacity_ms());
        let max_tat = now + cap - t;
        let busy_from = now - t;
        let pk = crate::keys::RATE_BUCKET.pk((scope, class.name()));
        let refuse = |tat: i64| Decision { class, limit, allowed: false, remaining: 0, wait_ms: tat - max_tat };
        let admit = |tat: i64| Decision { class, limit, allowed: true, remaining: (now + cap - tat) / t, wait_ms: tat - now };

        let cached = self.seen.lock().unwrap().get(&pk).copied();
        let mut branch = match cached {
            Some(tat) if tat > max_tat => return Ok(refuse(tat)),
            Some(tat) if tat >= busy_from => Branch::Busy,
            _ => Branch::Idle,
        };
        for _ in 0..3 {
            let req = db
                .client
                .update_item()
                .table_name(&db.table)
                .key("pk", AttributeValue::S(pk.clone()))
                .key("sk", AttributeValue::S(crate::keys::RATE_BUCKET.table.sk.into()))
                .expression_attribute_values(":t", num(t))
                .expression_attribute_values(":ttl", num(now / 1000 + 86_400 + cap / 1000))
                .return_values(ReturnValue::UpdatedNew)
                .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
            let req = match branch {
                Branch::Busy => req
                    .update_expression("SET tat = tat + :t, expires_at = :ttl")
                    .condition_expression("tat BETWEEN :from AND :max")
                    .expression_attribute_values(":from", num(busy_from))
                    .expression_attribute_values(":max", num(max_tat)),
                Branch::Idle => req
                    .update_expression("SET tat = :now + :t, expires_at = :ttl")
                    .condition_expression("attribute_not_exists(tat) OR tat < :now")
                    .expression_attribute_values(":now", num(now)),
            };
            match req.send().await {
                Ok(out) => {
                    let tat = out.attributes().and_then(|a| a.get("tat")).and_then(as_i64).unwrap_or(now + t);
                    self.remember(&pk, tat);
                    return Ok(admit(tat));
                }
                Err(e) => {
                    let old = match e.as_service_error() {
                        Some(aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(c)) => {
                            c.item().and_then(|i| i.get("tat")).and_then(as_i64)
                        }
                        _ => return Err(crate::store::ddb_error(e)),
                    };
                    match old {
                        Some(tat) if tat > max_tat => {
                            self.remember(&pk, tat);
                            return Ok(refuse(tat));
                        }
                        Some(tat) if tat >= busy_from => branch = Branch::Busy,
                        _ => branch = Branch::Idle,
                    }
                }
            }
        }
        // Three lost races in a row means heavy contention: refusing briefly is the safe answer.
        Ok(refuse(max_tat + t))
    }

    fn remember(&self, pk: &str, tat: i64) {
        let mut seen = self.seen.lock().unwrap();
        let e = seen.entry(pk.to_string()).or_insert(tat);
        *e = (*e).max(tat);
    }
}

fn num(n: i64) -> AttributeValue {
    AttributeValue::N(n.to_string())
}

fn as_i64(v: &AttributeValue) -> Option<i64> {
    v.as_n().ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_contract() {
        let d = Class::defaults();
        assert_eq!(d.len(), 10);
        assert_eq!(d[&Class::Unsubscribe], Limit::parse("600/min:300").unwrap());
        assert_eq!(d[&Class::PortalSignIn], Limit::parse("30/hour:10").unwrap());
        assert_eq!(d[&Class::PortalSignInAddress], Limit::parse("10/hour:5").unwrap());
        assert_eq!(d[&Class::Write], Limit::parse("60/min:30").unwrap());
        assert_eq!(d[&Class::Read], Limit::parse("300/min:100").unwrap());
        assert_eq!(d[&Class::EmailSend], Limit::parse("100/min:50").unwrap());
        assert_eq!(d[&Class::EmailBatch], Limit::parse("10/min:5").unwrap());
        assert_eq!(d[&Class::ContactImport], Limit::parse("5/min:3").unwrap());
        assert_eq!(d[&Class::GdprExport], Limit::parse("5/hour:2").unwrap());
        assert_eq!(d[&Class::Portal], Limit::parse("60/min:20").unwrap());
        assert!(Limit::parse("0/min:1").is_err());
        assert!(Limit::parse("60/day:1").is_err());
        assert!(Limit::parse("sixty").is_err());
    }

    #[test]
    fn headers_follow_the_draft_syntax() {
        let limit = Class::defaults()[&Class::Write];
        let d = Decision { class: Class::Write, limit, allowed: false, remaining: 0, wait_ms: 1500 };
        let h = d.headers();
        assert_eq!(h[0], ("ratelimit-policy", "\"write\";q=30;w=30".to_string()));
        assert_eq!(h[1], ("ratelimit", "\"write\";r=0;t=2".to_string()));
        assert_eq!(h[2], ("retry-after", "2".to_string()));
        let e = d.into_error();
        assert_eq!(e.status(), 429);
    }

    #[tokio::test]
    async fn cached_refusal_needs_no_call() {
        // A client pointed at a closed port: any call would fail, so success proves no call was made.
        let conf = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
            .endpoint_url("http://127.0.0.1:9")
            .http_client(crate::sdk_http::client())
            .build();
        let db = crate::store::Db { client: aws_sdk_dynamodb::Client::from_conf(conf), table: "t".into() };
        let rl = RateLimiter::new(Class::defaults());
        let now = 1_000_000;
        rl.remember("RL#ws_x#write", now + 40_000);
        let d = rl.acquire_at(&db, "ws_x", Class::Write, now).await.unwrap();
        assert!(!d.allowed);
        assert_eq!(d.wait_ms, 40_000 - (30_000 - 1_000));
    }
}
