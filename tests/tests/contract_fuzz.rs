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
    let client = Client::new(&base, &key);
    let ids = e2e::seed_every_area(&client, &ws).await;
    // The portal routes' credential: a session of a contact of its own, which no configured id
    // names, so the fuzzer's `DELETE /contacts/{id}` of the seeded contact does not end it.
    // The two operations that end sessions get sessions of another contact: run first,
    // `POST /portal/logout` or `POST /portal/me/erasure` would end the shared one.
    let mut sessions = vec![];
    for (email, n) in [("portal-fuzz@example.org", 1), ("portal-fuzz-ended@example.org", 2)] {
        let contact = e2e::created(&client, "/contacts", serde_json::json!({ "email": email }), 201).await;
        for _ in 0..n {
            sessions.push(e2e::portal_session(&client, contact["id"].as_str().unwrap()).await);
        }
    }
    // The seeded ids, so that look-ups by id reach the handlers' logic and not only 404.
    let root = tools::localstack::repo_root();
    let contract: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(root.join("openapi/openapi.json")).unwrap()).unwrap();
    // An owner's access token rather than an API key: the fuzzer reuses ids it finds in
    // responses, and it would revoke an API key it is using (403 for the rest of the run).
    let subject = format!("fuzzer-{}", shared::ids::new_id("u"));
    workspaces::add_member(&h.app().await, &ws, &subject, "owner").await.unwrap();
    let token = tools::admin::mint_token(&subject, "read write admin", 3600).unwrap();
    // Every header in the file: an operation's own headers rank above these, so those two get
    // their sessions, while `--header` on the command line would replace them all.
    let mut config = format!(
        "headers = {{ \"Authorization\" = \"Bearer {token}\", \"X-Workspace-Id\" = \"{ws}\", \"X-Portal-Session\" = \"{}\" }}\n\n",
        sessions[0]
    );
    for (path, session) in [("/portal/logout", &sessions[1]), ("/portal/me/erasure", &sessions[2])] {
        config.push_str(&format!("[[operations]]\ninclude-path = \"{path}\"\nheaders = {{ \"X-Portal-Session\" = \"{session}\" }}\n\n"));
    }
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

    let examples = std::env::var("FUZZ_EXAMPLES").unwrap_or_else(|_| "5".into());
    // Shards: separate schemathesis processes over disjoint sets of paths, run at once. Not
    // its `--workers`: those are threads, and two of them building Python ASTs at once met
    // CPython 3.11's race (`SystemError: AST constructor recursion depth mismatch`), a runtime
    // error that failed the run one time in a few. Processes share no interpreter.
    let shards: usize = std::env::var("FUZZ_SHARDS").ok().and_then(|v| v.parse().ok()).unwrap_or(2).max(1);
    let checks = std::env::var("FUZZ_CHECKS").unwrap_or_else(|_| {
        "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,unsupported_method".into()
    });
    let runs = shard_paths(&contract, shards).into_iter().map(|regex| {
        tokio::process::Command::new(root.join(".venv/bin/schemathesis"))
            .current_dir(&root)
            .env("NO_COLOR", "1")
            .args(["--config-file", config_file.to_str().unwrap(), "run", "openapi/openapi.json", "--url", &base])
            .args(["--include-path-regex", &regex])
            .args(["--checks", &checks])
            .args(["--phases", "examples,coverage,fuzzing", "--max-examples", &examples, "--seed", "20261122"])
            .args(["--workers", "1", "--request-timeout", "20"])
            .output()
    });
    let mut failed = vec![];
    for (i, out) in futures_util::future::join_all(runs).await.into_iter().enumerate() {
        let out = out.expect("run .venv/bin/schemathesis (make deps installs it)");
        println!("--- shard {i}\n{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        if !out.status.success() {
            failed.push(i);
        }
    }
    assert!(failed.is_empty(), "schemathesis found failures in shards {failed:?} (output above)");
}

/// `n` regular expressions over the contract's paths, one per shard: whole resource areas
/// (the first path segment), dealt by operation count to the lightest shard, so the shards
/// take about as long and every operation is in exactly one.
fn shard_paths(contract: &serde_json::Value, n: usize) -> Vec<String> {
    let mut areas: std::collections::BTreeMap<&str, usize> = Default::default();
    for (path, item) in contract["paths"].as_object().expect("paths") {
        let area = path.trim_start_matches('/').split('/').next().unwrap_or_default();
        *areas.entry(area).or_default() += item.as_object().map_or(0, |o| o.len());
    }
    let mut by_size: Vec<(&str, usize)> = areas.into_iter().collect();
    by_size.sort_by_key(|(a, ops)| (std::cmp::Reverse(*ops), *a));
    let mut shards: Vec<(usize, Vec<&str>)> = vec![(0, vec![]); n];
    for (area, ops) in by_size {
        let lightest = shards.iter_mut().min_by_key(|(total, _)| *total).expect("n >= 1");
        lightest.0 += ops;
        lightest.1.push(area);
    }
    shards.into_iter().filter(|(_, a)| !a.is_empty()).map(|(_, a)| format!("^/({})(/|$)", a.join("|"))).collect()
}
