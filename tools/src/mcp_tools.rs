//! `functions/mcp/src/tools.json`: one MCP tool per operation of the contract, written by
//! `make generate` beside the contract so a new route is a new tool with no hand edit (the
//! contract test fails when the committed file drifts).
//!
//! A tool's input is one object: the operation's path and query parameters by name, its JSON
//! body as `body`, and `idempotency_key` on writes. Schemas the operation references are
//! copied into the input schema's `$defs`, so each tool stands alone.

use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// The catalog, from the finished contract.
pub fn generate(doc: &Value) -> String {
    let schemas = doc["components"]["schemas"].as_object().cloned().unwrap_or_default();
    let mut tools = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in METHODS {
            let Some(op) = item.get(method) else { continue };
            // Approving is a person's, on the hosted page: an agent holding a token with the
            // `confirm` scope must not find a tool that approves (its own requests or another
            // agent's) or mints a confirmation.
            if op["x-access"]["scope"] == "confirm" {
                continue;
            }
            tools.push(tool(path, method, op, &schemas));
        }
    }
    tools.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let mut s = serde_json::to_string_pretty(&tools).expect("tools serialize");
    s.push('\n');
    s
}

fn tool(path: &str, method: &str, op: &Value, schemas: &Map<String, Value>) -> Value {
    let name = op["operationId"].as_str().expect("every operation has an operationId");
    let write = method != "get";
    let mut properties = Map::new();
    let mut required = Vec::new();
    let (mut path_params, mut query_params) = (Vec::new(), Vec::new());
    for p in op["parameters"].as_array().into_iter().flatten() {
        let (pname, place) = (p["name"].as_str().unwrap_or_default(), p["in"].as_str().unwrap_or_default());
        // Headers are the server's to send: the credential and workspace come from the MCP
        // request, the idempotency key is `idempotency_key`, and confirmations are never the
        // agent's (an approval is found by the key).
        match place {
            "path" => path_params.push(pname.to_string()),
            "query" => query_params.push(pname.to_string()),
            _ => continue,
        }
        let mut schema = p["schema"].clone();
        if let Some(d) = p["description"].as_str() {
            schema["description"] = json!(d);
        }
        properties.insert(pname.to_string(), schema);
        if p["required"] == true {
            required.push(pname.to_string());
        }
    }
    let body = op["requestBody"]["content"]["application/json"]["schema"].clone();
    let has_body = !body.is_null();
    if has_body {
        properties.insert("body".into(), body);
        if op["requestBody"]["required"] == true {
            required.push("body".into());
        }
    }
    if write {
        properties.insert(
            "idempotency_key".into(),
            json!({"type": "string", "minLength": 1, "maxLength": 255,
                "description": "Sent as Idempotency-Key. Without it the server derives one from the tool and its arguments, so the same call repeated (after an approval, or a lost answer) runs once; pass a new key to do the same thing twice."}),
        );
    }
    let mut input = json!({"type": "object", "properties": properties, "additionalProperties": false});
    if !required.is_empty() {
        input["required"] = json!(required);
    }
    let defs = referenced(&input, schemas);
    if !defs.is_empty() {
        input["$defs"] = Value::Object(defs);
    }
    rewrite_refs(&mut input);

    let capabilities: Vec<String> =
        op["x-access"]["capabilities"].as_array().into_iter().flatten().filter_map(|c| c.as_str().map(str::to_string)).collect();
    let mut description = String::new();
    description.push_str(op["summary"].as_str().unwrap_or(name).trim());
    if let Some(d) = op["description"].as_str() {
        description.push_str("\n\n");
        description.push_str(d.trim());
    }
    description.push_str(&format!("\n\n{} /api/v1{path}", method.to_uppercase()));
    if let Some(scope) = op["x-access"]["scope"].as_str() {
        description.push_str(&format!(", scope `{scope}`"));
    }
    description.push('.');
    if !capabilities.is_empty() {
        description.push_str(&format!(
            " Reaches the effect {}: with a key that requires confirmation the call answers an approval request for a person; repeat the same call (or await_approval) once it is approved.",
            capabilities.join(", ")
        ));
    }
    // Reading changes nothing; deleting and reaching an effect (an email, a post, an erasure, a
    // credential) cannot be taken back; a write that only adds or edits records is neither.
    let destructive = !capabilities.is_empty() || method == "delete";
    let idempotent = matches!(method, "get" | "put" | "delete");
    json!({
        "name": name,
        "title": title(op["summary"].as_str().unwrap_or(name), name),
        "description": description,
        "inputSchema": input,
        "annotations": {
            "readOnlyHint": !write,
            "destructiveHint": write && destructive,
            "idempotentHint": idempotent,
            "openWorldHint": !capabilities.is_empty(),
        },
        "method": method.to_uppercase(),
        "path": path,
        "path_params": path_params,
        "query_params": query_params,
        "body": has_body,
        "capabilities": capabilities,
    })
}

/// The summary's first clause (up to a full stop, a semicolon, a colon or a parenthesis), as a
/// short human title.
/// A summary that is not a sentence (`pending -> confirmed`) gives way to the operation's name.
fn title(summary: &str, operation: &str) -> String {
    let joined = summary.split_whitespace().collect::<Vec<_>>().join(" ");
    let end = [". ", "; ", ": ", " ("].iter().filter_map(|p| joined.find(p)).min().unwrap_or(joined.len());
    let clause = joined[..end].trim_end_matches('.').trim();
    if clause.starts_with(|c: char| c.is_uppercase()) {
        return clause.to_string();
    }
    let words = operation.replace('_', " ");
    let mut chars = words.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

/// Every component schema `value` reaches, transitively.
pub(crate) fn referenced(value: &Value, schemas: &Map<String, Value>) -> Map<String, Value> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![value.clone()];
    while let Some(v) = stack.pop() {
        let mut refs = Vec::new();
        collect_refs(&v, &mut refs);
        for r in refs {
            if seen.insert(r.clone())
                && let Some(s) = schemas.get(&r)
            {
                stack.push(s.clone());
            }
        }
    }
    seen.into_iter().filter_map(|n| schemas.get(&n).map(|s| (n, s.clone()))).collect()
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref")
                && let Some(name) = r.strip_prefix("#/components/schemas/")
            {
                out.push(name.to_string());
            }
            m.values().for_each(|x| collect_refs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| collect_refs(x, out)),
        _ => {}
    }
}

pub(crate) fn rewrite_refs(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get_mut("$ref")
                && let Some(name) = r.strip_prefix("#/components/schemas/")
            {
                *r = format!("#/$defs/{name}");
            }
            m.values_mut().for_each(rewrite_refs);
        }
        Value::Array(a) => a.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_stands_alone_with_its_parameters_body_and_key() {
        let doc = json!({
            "paths": {"/things/{id}": {"patch": {"operationId": "update_thing", "summary": "Update a thing. More.",
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
                               {"name": "X-Capability-Confirmation", "in": "header", "schema": {"type": "string"}}],
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Patch"}}}},
                "x-access": {"capabilities": ["things.send"], "scope": "write"}}}},
            "components": {"schemas": {"Patch": {"type": "object", "properties": {"kind": {"$ref": "#/components/schemas/Kind"}}},
                                       "Kind": {"type": "string", "enum": ["a"]}, "Unused": {"type": "string"}}}
        });
        let mut with_confirm = doc.clone();
        with_confirm["paths"]["/approve"] = json!({"post": {"operationId": "approve", "x-access": {"scope": "confirm"}}});
        let tools: Value = serde_json::from_str(&generate(&with_confirm)).unwrap();
        assert_eq!(tools.as_array().unwrap().len(), 1, "no tool approves: {tools}");
        let t = &tools[0];
        assert_eq!(t["name"], "update_thing");
        assert_eq!(t["title"], "Update a thing");
        assert_eq!(title("Add a reply (sent through SES;\nthreaded) or a note.", "add_message"), "Add a reply");
        assert_eq!(title("pending -> confirmed", "confirm_booking"), "Confirm booking");
        assert_eq!(t["inputSchema"]["required"], json!(["id", "body"]));
        assert!(t["inputSchema"]["properties"].get("X-Capability-Confirmation").is_none(), "headers are not the agent's");
        assert!(t["inputSchema"]["properties"]["idempotency_key"].is_object());
        assert_eq!(t["inputSchema"]["properties"]["body"]["$ref"], "#/$defs/Patch");
        let defs = t["inputSchema"]["$defs"].as_object().unwrap();
        assert_eq!(defs.keys().collect::<Vec<_>>(), ["Kind", "Patch"], "only what it reaches, transitively");
        assert_eq!(defs["Patch"]["properties"]["kind"]["$ref"], "#/$defs/Kind");
        assert_eq!(
            t["annotations"],
            json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true})
        );
        assert_eq!(t["path_params"], json!(["id"]));
    }
}
