//! A hung dependency (an emulator frozen with SIGSTOP: connections stay open, nothing answers)
//! must not hang the API: requests answer `503 UNAVAILABLE` with `Retry-After` within the
//! request budget, and recover when the dependency does. This binary has its own stack, so
//! freezing it disturbs no other test. One test: the freezes must not overlap.

use e2e::{CHANNEL_A, Client, harness};
use serde_json::json;
use std::time::{Duration, Instant};

/// The default budgets (`Timeouts::default`): 5 s per dependency call, 10 s per request.
const ANSWER_WITHIN: Duration = Duration::from_secs(12);

async fn timed(f: impl std::future::Future<Output = e2e::Resp>) -> (e2e::Resp, Duration) {
    let started = Instant::now();
    // Without the budgets these requests hang for minutes: fail instead of waiting for them.
    let r = tokio::time::timeout(Duration::from_secs(30), f).await.expect("an answer within 30 s");
    (r, started.elapsed())
}

#[tokio::test]
async fn frozen_emulators_answer_503_in_time_and_recover() {
    let h = harness();
    assert_eq!(h.config.timeouts, shared::config::Timeouts::default(), "the test measures the defaults");
    let (_, key) = h.workspace("hung dependencies").await;
    let c = Client::new(&h.base, &key).during_outage();
    // Warm: the platform secret is cached and connections are pooled.
    assert_eq!(c.get("/posts").await.status, 200);
    let post = json!({"content": "while frozen", "channel_ids": [CHANNEL_A]});

    {
        let _frozen = h.freeze(h.dynamodb_guard);
        for (r, took) in [timed(c.get("/posts")).await, timed(c.post("/posts", &post)).await] {
            assert_eq!((r.status, r.code()), (503, "UNAVAILABLE"), "{}", r.json);
            assert!(r.header("retry-after").is_some(), "503 says when to retry");
            assert!(r.json["error"]["request_id"].is_string(), "inside the envelope: {}", r.json);
            assert!(took < ANSWER_WITHIN, "answered after {took:?}");
        }
    }
    // Thawed: the same requests work again.
    let r = c.post("/posts", &post).await;
    assert_eq!(r.status, 201, "{}", r.json);

    {
        // SQS (moto) hung: the write is committed with its event in the outbox, so it succeeds
        // once publishing gives up; the sweep delivers the event later.
        let _frozen = h.freeze(h.moto_guard);
        let (r, took) = timed(c.post("/posts", &post)).await;
        assert_eq!(r.status, 201, "{}", r.json);
        assert!(took < ANSWER_WITHIN, "answered after {took:?}");
    }
    assert_eq!(c.get("/posts").await.status, 200);
}
