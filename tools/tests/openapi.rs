//! The committed contract must be what the code generates, and must cover exactly the routes
//! the functions serve.

use std::collections::BTreeSet;

#[test]
fn committed_openapi_matches_the_code() {
    let root = tools::localstack::repo_root();
    let json = std::fs::read_to_string(root.join("openapi/openapi.json")).unwrap_or_default();
    let yaml = std::fs::read_to_string(root.join("openapi/openapi.yaml")).unwrap_or_default();
    assert!(json == tools::openapi_json(), "openapi/openapi.json is stale: run `make generate`");
    assert!(yaml == tools::openapi_yaml(), "openapi/openapi.yaml is stale: run `make generate`");
    let capabilities = std::fs::read_to_string(root.join("domain/src/capabilities/capabilities.json")).unwrap_or_default();
    assert!(capabilities == tools::capabilities_json(), "domain/src/capabilities/capabilities.json is stale: run `make generate`");
    let catalog = std::fs::read_to_string(root.join("functions/webhooks/src/event_types.json")).unwrap_or_default();
    assert!(catalog == tools::event_types_json(), "functions/webhooks/src/event_types.json is stale: run `make generate`");
    let tools = std::fs::read_to_string(root.join("functions/mcp/src/tools.json")).unwrap_or_default();
    assert!(tools == tools::mcp_tools_json(), "functions/mcp/src/tools.json is stale: run `make generate`");
    let scoring = std::fs::read_to_string(root.join("docs/scan-scoring.md")).unwrap_or_default();
    assert!(scoring == domain::scans::rules::scoring_doc(), "docs/scan-scoring.md is stale: run `make generate`");
}

#[test]
fn every_route_is_documented_and_nothing_else() {
    let doc = tools::openapi_doc();
    let documented: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .filter(|k| ["get", "post", "patch", "put", "delete"].contains(&k.as_str()))
                .map(|m| (m.to_uppercase(), path.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    let served: BTreeSet<(String, String)> =
        tools::gateway::all_routes().iter().map(|r| (r.method.to_string(), r.path.to_string())).collect();
    assert_eq!(documented, served);
}

/// Merging the areas' documents keeps one schema per name: two areas that name different
/// schemas alike would silently lose one (webhooks' and the helpdesk's `DeliveryStatus` did).
#[test]
fn no_two_areas_name_different_schemas_alike() {
    let mut seen: std::collections::BTreeMap<String, (&str, serde_json::Value)> = Default::default();
    for (area, doc) in tools::area_docs() {
        for (name, schema) in doc.components.map(|c| c.schemas).unwrap_or_default() {
            let json = serde_json::to_value(&schema).unwrap();
            if let Some((other, prev)) = seen.get(&name) {
                assert_eq!(prev, &json, "schema {name} differs between {other} and {area}: rename one (#[schema(as = ...)])");
            } else {
                seen.insert(name, (area, json));
            }
        }
    }
}

/// Every time in the contract says so (`format: date-time`), and the opening hours' days are the
/// closed set of weekdays: generated clients get typed values, not free strings.
#[test]
fn every_timestamp_is_a_date_time_and_weekdays_are_a_closed_set() {
    let doc = tools::openapi_doc();
    let mut missing = vec![];
    for (name, schema) in doc["components"]["schemas"].as_object().expect("schemas") {
        for (prop, v) in schema["properties"].as_object().into_iter().flatten() {
            let named_as_time = prop == "at" || ["_at", "_until", "_since"].iter().any(|s| prop.ends_with(s));
            // Opening hours' intervals are local `HH:MM` (their own pattern), not instants.
            let time = named_as_time || (name != "Interval" && ["start", "end"].contains(&prop.as_str()));
            if time && v["format"] != "date-time" {
                missing.push(format!("{name}.{prop}"));
            }
        }
    }
    assert!(missing.is_empty(), "times without format: date-time: {missing:?}");
    let hours = &doc["components"]["schemas"]["OpeningHours"];
    assert_eq!(hours["additionalProperties"], false, "{hours}");
    let days: Vec<&String> = hours["properties"].as_object().expect("days").keys().collect();
    assert_eq!(days.len(), 7, "{days:?}");
}

/// Every id of ours has its pattern (`<prefix>_<ULID>`) in the contract; what is left out is
/// someone else's identifier or any object's.
#[test]
fn every_id_of_ours_has_its_pattern() {
    // Identifiers made elsewhere (SES, a network, a Message-ID header, a scan rule, a request id)
    // or naming any kind of object.
    const OTHERS: &[&str] = &[
        "HelpdeskAttachment.content_id",
        "HelpdeskDeliveryUpdate.message_id",
        "Message.message_id",
        "Email.provider_message_id",
        "Variant.remote_id",
        "ErrorBody.request_id",
        "CapabilityConfirmation.used_by_request_id",
        "CapabilityUsedData.used_by_request_id",
        "ScanFinding.rule_id",
        "ConsentPortalProof.session_id",
        "CapabilityConfirmationBound.id",
        // Any bound object's id (a template's slug among them).
        "ApprovalChange.id",
        "Deleted.id",
    ];
    let doc = tools::openapi_doc();
    let mut missing = vec![];
    for (name, schema) in doc["components"]["schemas"].as_object().expect("schemas") {
        for (prop, v) in schema["properties"].as_object().into_iter().flatten() {
            let id = prop == "id" || prop.ends_with("_id") || prop.ends_with("_ids");
            let pattern = v.get("pattern").or_else(|| v["items"].get("pattern"));
            let key = format!("{name}.{prop}");
            if id && pattern.is_none() && !OTHERS.contains(&key.as_str()) {
                missing.push(key);
            }
        }
    }
    assert!(missing.is_empty(), "ids without their pattern: {missing:?}");
}

/// What a generated client needs is in the contract (docs/api.md, "Headers in the contract"):
/// the Idempotency-Key on every write, as the pipeline checks it; Retry-After on 429 and 503;
/// the replay marker on a write's success; every operation described; `object` a constant;
/// path ids with their pattern; open enums marked.
#[test]
fn the_contract_states_what_clients_read() {
    let doc: serde_json::Value = serde_json::from_str(&tools::openapi_json()).unwrap();
    let key = &doc["components"]["parameters"]["IdempotencyKey"];
    assert_eq!(key["name"], shared::idempotency::HEADER);
    assert_eq!(key["schema"]["maxLength"], shared::idempotency::KEY_MAX_LEN);
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let refs: Vec<&str> = op["parameters"].as_array().into_iter().flatten().filter_map(|p| p["$ref"].as_str()).collect();
            let public = op["security"] == serde_json::json!([{}]);
            assert_eq!(refs.contains(&"#/components/parameters/IdempotencyKey"), method != "get" && !public, "{method} {path}");
            assert!(
                op["description"].as_str().is_some_and(|d| d.contains("scope") || d.contains("credential") || d.contains("portal session")),
                "{method} {path}"
            );
            for (status, r) in op["responses"].as_object().unwrap() {
                if status == "429" || status == "503" {
                    assert!(r["headers"]["Retry-After"].is_object(), "{method} {path} {status}");
                }
                if method != "get" && !public && status.starts_with('2') {
                    assert!(r["headers"]["Idempotent-Replayed"].is_object(), "{method} {path} {status}");
                }
            }
            // Every id in a path carries its kind's pattern (names and addresses are not ids).
            for p in op["parameters"].as_array().into_iter().flatten().filter(|p| p["in"] == "path") {
                let name = p["name"].as_str().unwrap();
                if name == "id" || name.ends_with("_id") {
                    assert!(p["schema"]["pattern"].is_string(), "{method} {path}: {name}");
                }
            }
        }
    }
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    assert_eq!(schemas["Contact"]["properties"]["object"]["enum"], serde_json::json!(["contact"]));
    assert_eq!(schemas["ContactStatus"]["x-extensible-enum"], true);
    assert!(schemas["Delimiter"].get("x-extensible-enum").is_none(), "a request's closed set stays closed");
}
