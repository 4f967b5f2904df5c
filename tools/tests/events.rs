//! Every sample in events/ is a valid HTTP API v2 event that reaches a real route, or (in
//! events/dispatcher, events/contact-import, events/email-sender, events/publisher, events/gdpr-worker, events/inbound-mail) an SQS batch or schedule input
//! the queue-driven function understands.

use lambda_http::aws_lambda_events::apigw::ApiGatewayV2httpRequest;

#[test]
fn sample_events_parse_and_route() {
    let dir = tools::localstack::repo_root().join("events");
    let mut n = 0;
    for area in std::fs::read_dir(&dir).unwrap().filter_map(Result::ok).filter(|e| {
        e.path().is_dir()
            && !["dispatcher", "contact-import", "email-sender", "publisher", "gdpr-worker", "inbound-mail"]
                .iter()
                .any(|n| e.file_name() == *n)
    }) {
        for f in std::fs::read_dir(area.path()).unwrap().filter_map(Result::ok) {
            let text = std::fs::read_to_string(f.path()).unwrap();
            let ev: ApiGatewayV2httpRequest = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", f.path().display()));
            let path = ev.raw_path.clone().unwrap();
            let m = shared::routing::match_route(tools::gateway::all_routes(), &ev.request_context.http.method, &path)
                .unwrap_or_else(|e| panic!("{}: {e}", f.path().display()));
            let area_name = area.file_name().into_string().unwrap();
            assert!(m.relative_path.starts_with(&format!("/{area_name}")), "{} belongs to {area_name}", f.path().display());
            n += 1;
        }
    }
    assert!(n >= 8, "found {n} samples");
}

#[test]
fn dispatcher_samples_are_sqs_batches_or_schedule_inputs() {
    let dir = tools::localstack::repo_root().join("events/dispatcher");
    let mut kinds = vec![];
    for f in std::fs::read_dir(&dir).unwrap().filter_map(Result::ok) {
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(f.path()).unwrap()).unwrap();
        if v.get("Records").is_some() {
            let ev: domain::webhooks::dispatch::SqsEvent = serde_json::from_value(v).unwrap();
            for m in &ev.records {
                let job = serde_json::from_str::<domain::webhooks::DeliveryJob>(shared::sqs::body(m)).is_ok();
                let event = serde_json::from_str::<shared::events::Event>(shared::sqs::body(m)).is_ok();
                assert!(job ^ event, "{}: a delivery job or an event", f.path().display());
                kinds.push(if job { "job" } else { "event" });
            }
        } else {
            kinds.push("schedule");
        }
    }
    kinds.sort();
    assert_eq!(kinds, ["event", "job", "schedule"]);
}

#[test]
fn import_worker_samples_are_sqs_batches_of_jobs() {
    let dir = tools::localstack::repo_root().join("events/contact-import");
    for f in std::fs::read_dir(&dir).unwrap().filter_map(Result::ok) {
        let ev: shared::sqs::SqsEvent = serde_json::from_str(&std::fs::read_to_string(f.path()).unwrap()).unwrap();
        for m in &ev.records {
            let v: serde_json::Value = serde_json::from_str(shared::sqs::body(m)).unwrap();
            assert!(v["workspace_id"].is_string() && v["import_id"].as_str().unwrap().starts_with("imp_"), "{}", f.path().display());
        }
    }
}

#[test]
fn gdpr_worker_samples_are_sqs_batches_of_jobs() {
    let dir = tools::localstack::repo_root().join("events/gdpr-worker");
    for f in std::fs::read_dir(&dir).unwrap().filter_map(Result::ok) {
        let ev: shared::sqs::SqsEvent = serde_json::from_str(&std::fs::read_to_string(f.path()).unwrap()).unwrap();
        for m in &ev.records {
            serde_json::from_str::<domain::gdpr::jobs::JobMessage>(shared::sqs::body(m))
                .unwrap_or_else(|e| panic!("{}: {e}", f.path().display()));
        }
    }
}

#[test]
fn inbound_mail_samples_are_ses_receipts_or_the_tick() {
    let dir = tools::localstack::repo_root().join("events/inbound-mail");
    let (mut receipts, mut ticks) = (0, 0);
    for f in std::fs::read_dir(&dir).unwrap().filter_map(Result::ok) {
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(f.path()).unwrap()).unwrap();
        if v.get("Records").is_none() {
            ticks += 1;
            continue;
        }
        let ev: shared::sqs::SqsEvent = serde_json::from_value(v).unwrap();
        for m in &ev.records {
            let r =
                domain::helpdesk::mail::receipt(shared::sqs::body(m)).unwrap_or_else(|| panic!("{}: not a receipt", f.path().display()));
            assert!(r.key.starts_with("inbound/") && !r.recipients.is_empty());
            receipts += 1;
        }
    }
    assert_eq!((receipts, ticks), (1, 1));
}

#[test]
fn email_sender_samples_are_send_jobs_ses_notifications_or_the_tick() {
    let dir = tools::localstack::repo_root().join("events/email-sender");
    let mut kinds = vec![];
    for f in std::fs::read_dir(&dir).unwrap().filter_map(Result::ok) {
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(f.path()).unwrap()).unwrap();
        if v.get("Records").is_none() {
            kinds.push("schedule");
            continue;
        }
        let ev: shared::sqs::SqsEvent = serde_json::from_value(v).unwrap();
        for m in &ev.records {
            if serde_json::from_str::<domain::emails::SendJob>(shared::sqs::body(m)).is_ok() {
                kinds.push("job");
            } else {
                let n = domain::sending::feedback::parse(shared::sqs::body(m))
                    .unwrap_or_else(|| panic!("{}: not a notification", f.path().display()));
                assert_eq!(n.kind, "Bounce");
                kinds.push("notification");
            }
        }
    }
    kinds.sort();
    assert_eq!(kinds, ["job", "notification", "schedule"]);
}

#[test]
fn publisher_samples_are_publish_jobs_or_the_tick() {
    let dir = tools::localstack::repo_root().join("events/publisher");
    let mut kinds = vec![];
    for f in std::fs::read_dir(&dir).unwrap().filter_map(Result::ok) {
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(f.path()).unwrap()).unwrap();
        if v.get("Records").is_some() {
            let ev: shared::sqs::SqsEvent = serde_json::from_value(v).unwrap();
            for m in &ev.records {
                serde_json::from_str::<domain::publishing::PublishJob>(shared::sqs::body(m))
                    .unwrap_or_else(|e| panic!("{}: {e}", f.path().display()));
                kinds.push("job");
            }
        } else {
            kinds.push("schedule");
        }
    }
    kinds.sort();
    assert_eq!(kinds, ["job", "schedule"]);
}
