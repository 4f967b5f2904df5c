//! A hung dependency (an emulator frozen with SIGSTOP: connections stay open, nothing answers)
//! must not hang the API: requests answer `503 UNAVAILABLE` with `Retry-After` within the
//! request budget, and recover when the dependency does. This binary has its own stack, so
//! freezing it disturbs no other test. One test: the freezes must not overlap.

use e2e::{Client, harness};
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
    // The production budgets, not the harness's (`e2e::EMULATOR_TIMEOUTS`).
    let mut cfg = h.config.clone();
    cfg.timeouts = shared::config::Timeouts::default();
    let base = h.gateway_with(cfg.clone()).await;
    let (ws, key) = h.workspace("hung dependencies").await;
    let c = Client::new(&base, &key).during_outage();
    // Warm: the platform secret is cached and connections are pooled.
    assert_eq!(c.get("/posts").await.status, 200);
    let post = json!({"content": "while frozen", "channel_ids": [e2e::channel(&c, "a").await]});

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
        // S3 (moto too) hung: a call gives up within the dependency budget, retries included,
        // as the SDK clients do.
        let app = h.app_with(cfg.clone()).await;
        let started = Instant::now();
        let put = app.s3().put_object().bucket(&h.resources.mail_bucket).key("hung/probe").body(b"x".to_vec().into()).send().await;
        let budget = Duration::from_millis(cfg.timeouts.dependency_ms);
        assert_eq!(put.map(|_| ()).map_err(|e| shared::aws::AwsError::from(e).code), Err("Timeout".to_string()));
        assert!(started.elapsed() < budget + Duration::from_millis(500), "took {:?}", started.elapsed());
    }
    assert_eq!(c.get("/posts").await.status, 200);

    // SES hangs while it has the email: the send's outcome is unknown, so it is recorded as
    // `failed` / `outcome_unknown` and never sent again (SES does take it once it wakes).
    let sending = e2e::verified_domain(&c, &ws).await;
    let subject = format!("hung {}", shared::ids::new_id("t"));
    let due = chrono::Utc::now() + chrono::Duration::seconds(4);
    let r = c
        .post(
            "/emails",
            // Transactional: no sealed unsubscribe link, so the frozen secret store (which the
            // sender would read to open it) is not what this waits on, SES is.
            &json!({"from": format!("hung@{sending}"), "to": ["reader@example.org"], "subject": subject, "text": "once",
                    "scheduled_at": shared::ids::format_time(due), "transactional": true}),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.json);
    let id = r.json["data"]["id"].as_str().unwrap().to_string();
    let sender = domain::sending::Sender::new(h.app_with(cfg).await);
    {
        let _frozen = h.freeze(h.moto_guard);
        tokio::time::sleep((due - chrono::Utc::now()).to_std().unwrap_or_default() + Duration::from_millis(600)).await;
        let started = Instant::now();
        let outcome = tokio::time::timeout(
            Duration::from_secs(30),
            domain::sending::send::send_one(
                &sender,
                &shared::auth::WorkspaceId::trusted(ws.clone()),
                &domain::ids::EmailId::trusted(id.as_str()),
            ),
        )
        .await;
        assert!(matches!(outcome, Ok(Ok(domain::sending::send::Outcome::Done))), "{outcome:?}");
        // SES and the two event publications each wait out their 5 s: well inside the claim.
        assert!(started.elapsed() < Duration::from_secs(30), "took {:?}", started.elapsed());
    }
    let e = c.get(&format!("/emails/{id}")).await;
    assert_eq!(
        (e.json["data"]["status"].as_str(), e.json["data"]["error"]["code"].as_str()),
        (Some("failed"), Some("outcome_unknown")),
        "{}",
        e.json
    );
    // The thawed SES records the one send it was holding; the queue's copies of the job find
    // the email failed and send nothing more.
    let deadline = Instant::now() + Duration::from_secs(20);
    let count = || async { h.ses_sent().await.into_iter().filter(|m| m["subject"] == subject.as_str()).count() };
    while count().await == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(count().await, 1, "sent exactly once");
}
