//! schemathesis over the whole contract (`openapi/openapi.json`) against the local stack: every
//! operation, in a workspace that holds data in every area (lists and look-ups see mixed item
//! kinds), through a gateway with generous rate limits. Checks: no 5xx, every status code
//! and content type documented, every response body matching its schema, and 405 with Allow
//! for methods a path does not declare. A fixed seed and a
//! bounded number of examples keep the run repeatable and within a few minutes.

use e2e::{Client, harness};
use shared::ratelimit::{Class, Limit};

#[tokio::test]
async fn schemathesis_finds_nothing_wrong_with_the_contract() {
    let h = harness();
    let mut cfg = h.config.clone();
    for class in Class::ALL {
        cfg.limits.insert(class, Limit::parse("1000/s:1000").unwrap());
    }
    let base = h.gateway_with(cfg).await;
    let (ws, key) = h.workspace("contract fuzz").await;
    let ids = e2e::seed_every_area(&Client::new(&base, &key), &ws).await;
    // The seeded ids, so that look-ups by id reach the handlers' logic and not only 404.
    let root = tools::localstack::repo_root();
    let contract: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(root.join("openapi/openapi.json")).unwrap()).unwrap();
    let mut config = String::new();
    for (path, id) in &ids {
        if *path == e2e::PORTAL_SESSION {
            continue;
        }
        if let Some(op) = path.strip_prefix('?') {
            // Required query parameters of an operation, as the seed gives them.
            let params: Vec<String> =
                id.split('&').filter_map(|kv| kv.split_once('=')).map(|(k, v)| format!("\"query.{k}\" = \"{v}\"")).collect();
            config.push_str(&format!("[[operations]]\ninclude-path = \"{op}\"\nparameters = {{ {} }}\n\n", params.join(", ")));
            continue;
        }
        let param = &path[path.rfind('{').unwrap() + 1..path.len() - 1];
        for p in [
            path.to_string(),
            format!("{path}/activities"),
            format!("{path}/notes"),
            format!("{path}/messages"),
            format!("{path}/errors"),
            format!("{path}/cancel"),
            format!("{path}/schedule"),
            format!("{path}/unschedule"),
            format!("{path}/deliveries"),
            format!("{path}/rotate-secret"),
            format!("{path}/test"),
            format!("{path}/publish"),
            format!("{path}/verify"),
            format!("{path}/confirm"),
            format!("{path}/reschedule"),
            format!("{path}/complete"),
            format!("{path}/no-show"),
        ] {
            if contract["paths"].get(p.as_str()).is_none() {
                continue;
            }
            config.push_str(&format!("[[operations]]\ninclude-path = \"{p}\"\nparameters = {{ \"path.{param}\" = \"{id}\" }}\n\n"));
        }
    }
    let config_file = root.join("target/schemathesis.toml");
    std::fs::write(&config_file, config).unwrap();
    // An owner's access token rather than an API key: the fuzzer reuses ids it finds in
    // responses, and it would revoke an API key it is using (403 for the rest of the run).
    let subject = format!("fuzzer-{}", shared::ids::new_id("u"));
    workspaces::add_member(&h.app().await, &ws, &subject, "owner").await.unwrap();
    let token = tools::admin::mint_token(&subject, "read write admin", 3600).unwrap();

    let examples = std::env::var("FUZZ_EXAMPLES").unwrap_or_else(|_| "5".into());
    // One worker: schemathesis's workers are threads, and two of them building Python ASTs at
    // once met CPython 3.11's race (`SystemError: AST constructor recursion depth mismatch`), a
    // runtime error that failed the run one time in a few. Two were ~40 s faster (111 s
    // against 153 s for the coverage phase's ~6,200 cases).
    let workers = std::env::var("FUZZ_WORKERS").unwrap_or_else(|_| "1".into());
    let checks = std::env::var("FUZZ_CHECKS").unwrap_or_else(|_| {
        "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,unsupported_method".into()
    });
    let out = tokio::process::Command::new(root.join(".venv/bin/schemathesis"))
        .current_dir(&root)
        .env("NO_COLOR", "1")
        .args(["--config-file", config_file.to_str().unwrap(), "run", "openapi/openapi.json", "--url", &base])
        .args(["--header", &format!("Authorization: Bearer {token}"), "--header", &format!("X-Workspace-Id: {ws}")])
        // The portal routes' credential: the seeded contact's session (the fuzzer may log it out
        // or erase the contact; then those routes answer 401, which the contract documents).
        .args(["--header", &format!("X-Portal-Session: {}", ids[e2e::PORTAL_SESSION])])
        .args(["--checks", &checks])
        .args(["--phases", "examples,coverage,fuzzing", "--max-examples", &examples, "--seed", "20261122"])
        .args(["--workers", &workers, "--request-timeout", "20"])
        .output()
        .await
        .expect("run .venv/bin/schemathesis (make deps installs it)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "schemathesis found failures (output above)");
}
