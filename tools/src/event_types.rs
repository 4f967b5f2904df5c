//! The catalog of webhook event types, from the contract: the contract's `webhooks` section (one
//! entry per type, its body the event envelope with the type's `data` schema) is made from
//! `domain::webhooks::catalog`, and `functions/webhooks/src/event_types.json` (what
//! `GET /webhooks/event-types` serves) from that section, each type's schema standing alone
//! with its `$defs` and an example made from the schema.

use serde_json::{Map, Value, json};

/// The event envelope of one type, as deliveries carry it.
fn envelope(kind: &str, data: &Value) -> Value {
    json!({
        "type": "object",
        "required": ["id", "type", "created_at", "workspace_id", "data"],
        "properties": {
            "id": {"type": "string", "pattern": shared::ids::id_pattern("evt"), "description": "The event's id: the same on every delivery of it (and its `webhook-id`)."},
            "type": {"type": "string", "enum": [kind]},
            "created_at": {"type": "string", "format": "date-time"},
            "workspace_id": id("ws"),
            "data": data,
        },
        "additionalProperties": false,
    })
}

fn id(prefix: &str) -> Value {
    json!({"type": "string", "pattern": shared::ids::id_pattern(prefix)})
}

fn object(about: &str, props: Value) -> Value {
    let required: Vec<&String> = props.as_object().expect("properties").keys().collect();
    json!({"type": "object", "description": about, "required": required, "properties": props, "additionalProperties": false})
}

/// The `data` of the events whose payload is not one of the API's objects: what the emitting
/// code writes (every key always there, `null` when empty), stated here for the contract; the
/// end-to-end suite checks real deliveries against them.
fn payload_schemas() -> Vec<(&'static str, Value)> {
    let time = json!({"type": "string", "format": "date-time"});
    let time_or_null = json!({"type": ["string", "null"], "format": "date-time"});
    let text = json!({"type": "string"});
    let text_or_null = json!({"type": ["string", "null"]});
    let r = |name: &str| json!({"$ref": format!("#/components/schemas/{name}")});
    let r_or_null = |name: &str| json!({"oneOf": [{"$ref": format!("#/components/schemas/{name}")}, {"type": "null"}]});
    vec![
        (
            "ApprovalEventData",
            object(
                "An approval request as its events carry it: the request's state and what it asks for, with its summary in words.",
                json!({
                    "id": id("apr"), "object": {"type": "string", "enum": ["approval_request"]}, "state": r("ApprovalState"),
                    "capability": text, "effect": text, "approver_needs": text, "method": text, "path": text, "api_key_id": id("key"),
                    "summary": text, "created_at": time, "expires_at": time, "decided_at": time_or_null, "decided_by": text_or_null, "reason": text_or_null,
                    "effect_digest": {"type": ["string", "null"], "description": "The digest of the effect's value the request showed (null for an effect approved by its request): what an approval binds."},
                    "confirmation_id": {"type": ["string", "null"], "pattern": shared::ids::id_pattern("cc")},
                }),
            ),
        ),
        (
            "BookingRescheduledData",
            object("A booking moved: the cancelled original and the new booking.", json!({"from": r("Booking"), "to": r("Booking")})),
        ),
        (
            "CapabilityUsedData",
            object(
                "A capability confirmation as the request it confirmed used it.",
                json!({
                    "id": id("cc"), "object": {"type": "string", "enum": ["capability_confirmation"]}, "capability": text, "method": text, "path": text,
                    "idempotency_key": text, "api_key_id": id("key"), "used_at": time, "used_by_request_id": text,
                    "effect_digest": {"type": ["string", "null"], "description": "The digest of the effect's value the person approved: the run is refused unless it builds the same value."},
                    "approval_request_id": {"type": ["string", "null"], "pattern": shared::ids::id_pattern("apr")},
                    "approved_by": text_or_null,
                }),
            ),
        ),
        (
            "ContactUnsubscribedData",
            object(
                "An address unsubscribed from the workspace's marketing mail through an email's unsubscribe link or mailto address.",
                json!({
                    "object": {"type": "string", "enum": ["unsubscribe"]}, "email": text,
                    "contact_id": {"type": ["string", "null"], "pattern": shared::ids::id_pattern("ct")},
                    "email_id": id("em"), "via": {"type": "string", "enum": ["one_click", "page", "mail"]}, "consent_id": id("cons"),
                }),
            ),
        ),
        (
            "SuppressionRemovedData",
            object(
                "An address taken off the suppression list, and why.",
                json!({
                    "address": text, "previous_reason": text, "reason": text, "removed_by": text,
                }),
            ),
        ),
        (
            "ExportEventData",
            object(
                "A GDPR export's outcome (read the export for its download link).",
                json!({
                    "id": id("gx"), "object": {"type": "string", "enum": ["gdpr_export"]}, "scope": r("ExportScope"), "status": r("JobStatus"),
                    "completed_at": time_or_null, "expires_at": time_or_null, "error": r_or_null("JobError"),
                }),
            ),
        ),
        (
            "ErasureEventData",
            object(
                "A GDPR erasure's outcome: the erased contact (when there was one) and the items erased per area.",
                json!({
                    "id": id("ge"), "object": {"type": "string", "enum": ["gdpr_erasure"]}, "status": r("JobStatus"),
                    "contact_id": {"type": ["string", "null"], "pattern": shared::ids::id_pattern("ct")},
                    "counts": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
                    "completed_at": time_or_null, "error": r_or_null("JobError"),
                }),
            ),
        ),
        (
            "PortalSessionCreatedData",
            object(
                "A customer's portal session, without its token.",
                json!({
                    "id": id("psess"), "object": {"type": "string", "enum": ["portal_session"]}, "contact_id": id("ct"), "expires_at": time,
                }),
            ),
        ),
        (
            "VariantEventData",
            object("One channel's variant of a post, published or failed.", json!({"post_id": id("post"), "variant": r("Variant")})),
        ),
        (
            "ScanEventData",
            object(
                "A website scan's outcome (read the scan for its findings).",
                json!({
                    "id": id("scan"), "object": {"type": "string", "enum": ["scan"]}, "url": text, "final_url": text_or_null, "status": r("ScanStatus"),
                    "error": r_or_null("ScanError"), "score": {"type": ["integer", "null"], "minimum": 0, "maximum": 100}, "grade": text_or_null,
                    "categories": r_or_null("ScanCategories"), "scoring_version": text_or_null, "completed_at": time_or_null,
                }),
            ),
        ),
        ("TestEventData", object("A test event's data.", json!({"endpoint_id": id("wh"), "message": text}))),
    ]
}

/// The contract's `webhooks` section: every event type the catalog declares.
pub fn add_to_contract(v: &mut Value) {
    for (name, schema) in payload_schemas() {
        assert!(v["components"]["schemas"].get(name).is_none(), "{name} is a component already");
        v["components"]["schemas"][name] = schema;
    }
    let schemas = v["components"]["schemas"].as_object().cloned().unwrap_or_default();
    let mut webhooks = Map::new();
    for t in domain::webhooks::catalog::EVENT_CATALOG {
        assert!(schemas.contains_key(t.data), "event {}: its data schema {} is not in the contract", t.name, t.data);
        let data = json!({"$ref": format!("#/components/schemas/{}", t.data)});
        let body = envelope(t.name, &data);
        let example = example(&body, &schemas, 0);
        webhooks.insert(
            t.name.into(),
            json!({"post": {
                "operationId": format!("event_{}", t.name.replace('.', "_")),
                "summary": t.name,
                "description": format!("{} Signed and retried as docs/api.md (Webhooks) says; `data` is a {}.", t.about, t.data),
                "tags": ["webhooks"],
                "requestBody": {"required": true, "content": {"application/json": {"schema": body, "example": example}}},
                "responses": {"2XX": {"description": "Received: any 2xx ends the delivery's retries."}},
            }}),
        );
    }
    v["webhooks"] = Value::Object(webhooks);
}

/// `functions/webhooks/src/event_types.json`: per type its description, its schema standing
/// alone (`$defs`) and an example, in the catalog's order.
pub fn catalog_json(doc: &Value) -> String {
    let schemas = doc["components"]["schemas"].as_object().cloned().unwrap_or_default();
    let mut out = vec![];
    for t in domain::webhooks::catalog::EVENT_CATALOG {
        let op = &doc["webhooks"][t.name]["post"];
        let mut schema = op["requestBody"]["content"]["application/json"]["schema"].clone();
        let example = op["requestBody"]["content"]["application/json"]["example"].clone();
        let defs = crate::mcp_tools::referenced(&schema, &schemas);
        if !defs.is_empty() {
            schema["$defs"] = Value::Object(defs);
        }
        crate::mcp_tools::rewrite_refs(&mut schema);
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema".into();
        out.push(json!({"object": "event_type", "type": t.name, "description": t.about, "data_schema": t.data, "schema": schema, "example": example}));
    }
    let mut s = serde_json::to_string(&out).expect("serializes");
    s.push('\n');
    s
}

/// A value the schema accepts, from its own rules: the first enum value, a pattern's id, a
/// format's form, one item of a list that needs one, every required property.
fn example(s: &Value, schemas: &Map<String, Value>, depth: usize) -> Value {
    if depth > 12 {
        return Value::Null;
    }
    if let Some(name) = s["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/schemas/")) {
        return schemas.get(name).map_or(Value::Null, |t| example(t, schemas, depth + 1));
    }
    if let Some(e) = s["enum"].as_array().and_then(|e| e.first()) {
        return e.clone();
    }
    if let Some(e) = s.get("example") {
        return e.clone();
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        if let Some(first) = s[key].as_array().and_then(|b| b.iter().find(|b| b["type"] != "null")) {
            return example(first, schemas, depth + 1);
        }
    }
    let ty = match &s["type"] {
        Value::String(t) => t.as_str(),
        Value::Array(ts) => ts.iter().filter_map(|t| t.as_str()).find(|t| *t != "null").unwrap_or("null"),
        _ if s.get("properties").is_some() => "object",
        _ => "null",
    };
    match ty {
        "object" => {
            let mut m = Map::new();
            for (k, p) in s["properties"].as_object().into_iter().flatten() {
                m.insert(k.clone(), example(p, schemas, depth + 1));
            }
            Value::Object(m)
        }
        "array" => {
            let n = s["minItems"].as_u64().unwrap_or(0).max(1) as usize;
            Value::Array((0..n.min(1)).map(|_| example(&s["items"], schemas, depth + 1)).collect())
        }
        "string" => json!(string_example(s)),
        "integer" => json!(s["minimum"].as_i64().unwrap_or(0).max(0)),
        "number" => json!(s["minimum"].as_f64().unwrap_or(0.0).max(0.0)),
        "boolean" => json!(false),
        _ => Value::Null,
    }
}

fn string_example(s: &Value) -> String {
    // An id of ours (`^ct_[0-7]...`, or `^(ct_[0-7]...)?$` where empty is allowed too).
    if let Some((before, _)) = s["pattern"].as_str().and_then(|p| p.split_once("_[0-7]")) {
        let prefix: String = before.chars().rev().take_while(|c| c.is_ascii_lowercase()).collect::<Vec<_>>().into_iter().rev().collect();
        return format!("{prefix}_01JCZ4S8QAF3M9W7N2K5T6V8XB");
    }
    // The contract's other patterns, each with a value of its own.
    const PATTERNS: [(&str, &str); 4] = [
        ("^([01][0-9]|2[0-3]):[0-5][0-9]$", "09:00"),
        ("^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$", "17:30"),
        ("^[A-Z]{3}$", "EUR"),
        ("^#[0-9a-fA-F]{6}$", "#1F4E79"),
    ];
    if let Some((_, v)) = PATTERNS.iter().find(|(p, _)| s["pattern"] == *p) {
        return (*v).into();
    }
    match s["format"].as_str() {
        Some("date-time") => "2026-11-28T09:30:00Z".into(),
        Some("date") => "2026-12-01".into(),
        Some("email") => "ada@example.com".into(),
        Some("uri") => "https://example.com/".into(),
        _ => {
            let n = s["minLength"].as_u64().unwrap_or(1).max(1) as usize;
            "x".repeat(n.min(8))
        }
    }
}
