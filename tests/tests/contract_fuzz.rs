//! schemathesis over the whole contract (`openapi/openapi.json`) against the local stack: every
//! operation, in a workspace that holds data in every area (lists and look-ups see mixed item
//! kinds), through a gateway with generous rate limits. Every check schemathesis has: no 5xx,
//! every status code, content type and declared header documented and as declared, every
//! response body matching its schema, 405 with Allow for methods a path does not declare,
//! invalid data and missing required headers refused, authentication not ignored, created
//! objects found (and gone once deleted), and valid data accepted unless a rule no schema can
//! state refuses it (`tests/schemathesis_hooks.py`, listed in
//! docs/api.md). The stateful phase follows the contract's links from creates to what they
//! made. A fixed seed and a
//! bounded number of examples keep the run repeatable and within a few minutes. A second run
//! holds a key that needs a person's confirmation for everything, over every route that can
//! reach an effect, and counts the effects before and after: none.

use e2e::{Client, harness};

#[tokio::test]
async fn schemathesis_finds_nothing_wrong_with_the_contract() {
    let h = harness();
    let base = h.generous_gateway().await;
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
    domain::workspaces::add_member(&h.app().await, &shared::auth::WorkspaceId::trusted(ws.clone()), &subject, "owner").await.unwrap();
    let token = tools::admin::mint_token(&subject, "read write admin", 3600).unwrap();
    let config = config(&format!("Bearer {token}"), &ws, &sessions, &ids, &contract);
    // Every check schemathesis has, with `positive_data_within_stated_rules` (the hooks) in
    // place of `positive_data_acceptance`: data the contract allows is accepted unless a rule
    // docs/api.md lists refuses it.
    let checks = "not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance,negative_data_rejection,missing_required_header,unsupported_method,allow_header_conformance,use_after_free,ensure_resource_availability,ignored_auth,object_level_authorization,positive_data_within_stated_rules";
    let failed = schemathesis(&base, &config, "schemathesis.toml", checks, &shard_paths(&contract, shards())).await;
    assert!(failed.is_empty(), "schemathesis found failures in shards {failed:?} (output above)");
}

/// The promise confirmations make, tested the way an agent would break it: the fuzzer, holding
/// a key with every scope and `requires_confirmation: true`, sends whatever the contract allows
/// to every operation that can reach an effect, in a workspace with data in every area. Nothing
/// leaves or changes: no email, no new or revoked key or member, no changed webhook, channel,
/// sending domain or workspace setting, no erasure or export, no post published or scheduled.
#[tokio::test]
async fn a_fully_restricted_key_causes_no_effect_whatever_it_sends() {
    let h = harness();
    let base = h.generous_gateway().await;
    let (ws, key) = h.workspace("restricted fuzz").await;
    let owner = Client::new(&base, &key);
    let ids = e2e::seed_every_area(&owner, &ws).await;
    let contact = e2e::created(&owner, "/contacts", serde_json::json!({"email": "restricted-fuzz@example.org"}), 201).await;
    let sessions = vec![e2e::portal_session(&owner, contact["id"].as_str().unwrap()).await; 3];
    let r = owner
        .post(
            "/workspaces/current/api-keys",
            &serde_json::json!({"name": "agent", "scopes": ["read", "write", "admin"], "requires_confirmation": true}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    let agent = r.json["data"]["secret"].as_str().unwrap().to_string();
    let mut before = effects(&owner).await;

    let root = tools::localstack::repo_root();
    let contract: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(root.join("openapi/openapi.json")).unwrap()).unwrap();
    // Every route that can reach an effect, by its pattern (`{id}` as the contract spells it),
    // the portal's own aside (a session, not this key, acts there).
    let patterns: std::collections::BTreeSet<String> = domain::capabilities::all()
        .iter()
        .filter(|c| !c.path.starts_with("/portal/me"))
        .map(|c| format!("^{}$", c.path.replace('{', "\\{").replace('}', "\\}")))
        .collect();
    let regex = patterns.into_iter().collect::<Vec<_>>().join("|");
    let config = config(&format!("Bearer {agent}"), &ws, &sessions, &ids, &contract);
    let failed = schemathesis(&base, &config, "schemathesis-restricted.toml", "not_a_server_error", &[regex]).await;
    assert!(failed.is_empty(), "schemathesis found failures (output above)");
    let mut after = effects(&owner).await;
    // Deleting a post is no effect (it cancels one): the posts left are as they were.
    let posts = |v: &mut serde_json::Value| v.as_object_mut().unwrap().remove("posts").unwrap();
    let (was, left) = (posts(&mut before), posts(&mut after));
    for p in left.as_array().unwrap() {
        assert!(was.as_array().unwrap().contains(p), "a post was scheduled or published: {p}");
    }
    assert_eq!(after, before, "a restricted key caused an effect");
}

/// What effects change, as the workspace's owner reads it, once two readings agree (some lists
/// read an index, which DynamoDB updates a moment after the write).
async fn effects(c: &Client) -> serde_json::Value {
    let mut last = reading(c).await;
    for _ in 0..20 {
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        let next = reading(c).await;
        if next == last {
            return next;
        }
        last = next;
    }
    last
}

async fn reading(c: &Client) -> serde_json::Value {
    let list = |v: &serde_json::Value, fields: &[&str]| -> Vec<serde_json::Value> {
        let mut out: Vec<serde_json::Value> = v["data"]
            .as_array()
            .unwrap_or(&vec![])
            .iter()
            .map(|item| fields.iter().map(|f| item[*f].clone()).collect::<Vec<_>>().into())
            .collect();
        out.sort_by_key(|v| v.to_string());
        out
    };
    let get = |path: &'static str| async move { c.get(path).await.json };
    serde_json::json!({
        "emails": list(&get("/emails?limit=100").await, &["id", "status", "to"]),
        "keys": list(&get("/workspaces/current/api-keys?limit=100").await, &["id", "scopes", "revoked_at", "requires_confirmation"]),
        "members": list(&get("/workspaces/current/members?limit=100").await, &["subject", "role"]),
        "webhooks": list(&get("/webhooks?limit=100").await, &["id", "url", "events", "disabled"]),
        "channels": list(&get("/channels?limit=100").await, &["id", "name", "type"]),
        "domains": list(&get("/emails/domains?limit=100").await, &["id", "name"]),
        "erasures": list(&get("/gdpr/erasures?limit=100").await, &["id"]),
        "exports": list(&get("/gdpr/exports?limit=100").await, &["id"]),
        "posts": list(&get("/posts?limit=100").await, &["id", "status", "scheduled_at"]),
        "workspace": get("/workspaces/current").await["data"].clone(),
    })
}

/// The schemathesis configuration: every request with `auth` (and the workspace and a portal
/// session), the seeded ids for path and query parameters.
fn config(
    auth: &str,
    ws: &str,
    sessions: &[String],
    ids: &std::collections::BTreeMap<&'static str, String>,
    contract: &serde_json::Value,
) -> String {
    // Every header in the file: an operation's own headers rank above these, so those two get
    // their sessions, while `--header` on the command line would replace them all.
    let mut config = format!(
        "headers = {{ \"Authorization\" = \"{auth}\", \"X-Workspace-Id\" = \"{ws}\", \"X-Portal-Session\" = \"{}\" }}\n\n",
        sessions[0]
    );
    for (path, session) in [("/portal/logout", &sessions[1]), ("/portal/me/erasure", &sessions[2])] {
        config.push_str(&format!("[[operations]]\ninclude-path = \"{path}\"\nheaders = {{ \"X-Portal-Session\" = \"{session}\" }}\n\n"));
    }
    for (path, id) in ids {
        // The seed's portal ids are its own contact's; the fuzz acts as a contact of its own
        // (above). Its export comes from `POST /portal/me/export`, whose answer schemathesis
        // follows to `GET /portal/me/exports/{id}` (a fixed id of another contact overrode it:
        // ST302); its bookings routes see only ids it does not hold (404).
        if *path == e2e::PORTAL_SESSION || path.starts_with("/portal/me/") {
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
    config
}

fn shards() -> usize {
    std::env::var("FUZZ_SHARDS").ok().and_then(|v| v.parse().ok()).unwrap_or(2).max(1)
}

/// Run schemathesis over the path sets (one process each, at once); answers the failed ones.
async fn schemathesis(base: &str, config: &str, file: &str, default_checks: &str, paths: &[String]) -> Vec<usize> {
    let root = tools::localstack::repo_root();
    let config_file = root.join("target").join(file);
    std::fs::write(&config_file, config).unwrap();

    let examples = std::env::var("FUZZ_EXAMPLES").unwrap_or_else(|_| "5".into());
    // Shards: separate schemathesis processes over disjoint sets of paths, run at once. Not
    // its `--workers`: those are threads, and two of them building Python ASTs at once met
    // CPython 3.11's race (`SystemError: AST constructor recursion depth mismatch`), a runtime
    // error that failed the run one time in a few. Processes share no interpreter.
    let checks = std::env::var("FUZZ_CHECKS").unwrap_or_else(|_| default_checks.into());
    // The stateful phase follows the contract's links from each create to its object.
    let phases = std::env::var("FUZZ_PHASES").unwrap_or_else(|_| "examples,coverage,fuzzing,stateful".into());
    let runs = paths.iter().map(|regex| {
        tokio::process::Command::new(root.join(".venv/bin/schemathesis"))
            .current_dir(&root)
            .env("NO_COLOR", "1")
            // The positive-data check with the rules no schema can state.
            .env("SCHEMATHESIS_HOOKS", root.join("tests/schemathesis_hooks.py"))
            .args(["--config-file", config_file.to_str().unwrap(), "run", "openapi/openapi.json", "--url", base])
            .args(["--include-path-regex", regex])
            .args(["--checks", &checks])
            .args(["--phases", &phases, "--max-examples", &examples, "--seed", "20261122"])
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
    failed
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
