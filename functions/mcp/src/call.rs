//! A tool call as a request to the API, and its answer as a tool result.

use crate::Caller;
use crate::catalog::Operation;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, ErrorCode, JsonObject};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// What a path segment or query value keeps as it is (RFC 3986 unreserved).
const ENCODE: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

/// The 2025-11-25 error a client that declared URL elicitation opens for its user.
const URL_ELICITATION_REQUIRED: ErrorCode = ErrorCode(-32042);

/// The API's answer to one request.
pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub replayed: bool,
    pub request_id: Option<String>,
    pub retry_after: Option<String>,
}

/// Run `op` with `args`; `url_elicitation` says whether the client opens URLs for its user.
pub async fn run(caller: &Caller, op: &Operation, args: JsonObject, url_elicitation: bool) -> Result<CallToolResult, McpError> {
    let write = op.method != "GET";
    let request = match Request::build(op, &args, write) {
        Ok(r) => r,
        Err(message) => return Ok(invalid(&message)),
    };
    let key = write.then(|| match args.get("idempotency_key").and_then(Value::as_str) {
        Some(k) => k.to_string(),
        None => derived_key(caller, &op.name, &args),
    });
    let answer = match send(caller, &op.method, &request.path_and_query, request.body.as_ref(), key.as_deref()).await {
        Ok(a) => a,
        Err(message) => return Ok(error_result(json!({"code": "UPSTREAM_UNAVAILABLE", "message": message}), key.as_deref(), None)),
    };
    if (200..300).contains(&answer.status) {
        let structured = if answer.body.is_object() { answer.body.clone() } else { json!({"data": answer.body}) };
        let mut meta = json!({"status": answer.status, "replayed": answer.replayed});
        if let Some(k) = &key {
            meta["idempotency_key"] = json!(k);
        }
        if let Some(r) = &answer.request_id {
            meta["request_id"] = json!(r);
        }
        return Ok(result(false, structured, meta));
    }
    let error = answer.body.get("error").cloned().unwrap_or_else(|| json!({"code": "UPSTREAM_ERROR", "message": answer.body}));
    let meta = error.pointer("/details/0/meta").cloned().unwrap_or(Value::Null);
    if let Some(id) = meta.get("approval_request_id").and_then(Value::as_str) {
        let approval = approval(caller, id, &meta).await;
        let url = approval.get("approval_url").and_then(Value::as_str);
        if url_elicitation && approval["state"] == "pending" && url.is_some() {
            let message = format!("Approve in your browser: {}", approval["summary"].as_str().unwrap_or("this write"));
            let data = json!({"elicitations": [{"mode": "url", "elicitationId": id, "url": url, "message": message}],
                              "approval_request": approval, "idempotency_key": key});
            return Err(McpError::new(URL_ELICITATION_REQUIRED, "this write waits for a person's approval", Some(data)));
        }
        return Ok(error_result(error, key.as_deref(), Some(approval)));
    }
    let mut error = error;
    if let Some(r) = answer.retry_after {
        error["retry_after_seconds"] = json!(r);
    }
    Ok(error_result(error, key.as_deref(), None))
}

/// The approval request a 428 named, in words a person reads: what the effect is and what
/// it will do (the stored preview's summary). The 428's own fields stand when the key may
/// not read approval requests.
async fn approval(caller: &Caller, id: &str, meta: &Value) -> Value {
    let mut out = json!({
        "id": id, "state": meta["approval_state"], "capability": meta["capability"],
        "approval_url": meta.get("approval_url"),
    });
    let time_left = caller.deadline.saturating_duration_since(tokio::time::Instant::now()) > std::time::Duration::from_secs(3);
    if time_left
        && let Ok(a) = send(caller, "GET", &format!("/approval-requests/{id}"), None, None).await
        && a.status == 200
    {
        let d = &a.body["data"];
        out["state"] = d["state"].clone();
        out["effect"] = d["effect"].clone();
        out["summary"] = d["preview"]["summary"].clone();
        out["expires_at"] = d["expires_at"].clone();
        if d["changed"].as_array().is_some_and(|c| !c.is_empty()) {
            out["changed"] = d["changed"].clone();
        }
    }
    out["next"] = json!(match out["state"].as_str() {
        Some("pending") => "a person approves or denies it at approval_url; then repeat this call unchanged, or call await_approval",
        Some("approved") => "approved: repeat this call unchanged to run it once",
        _ => "this request will not run; a new idempotency_key asks for a new approval",
    });
    out
}

/// `await_approval`: the request's state once it is decided, or when the wait ends.
pub async fn await_approval(caller: &Caller, args: JsonObject) -> Result<CallToolResult, McpError> {
    let Some(id) = args.get("approval_request_id").and_then(Value::as_str) else {
        return Ok(invalid("approval_request_id is required"));
    };
    if !id.starts_with("apr_") || id.len() > 40 || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Ok(invalid("approval_request_id must be an apr_ id"));
    }
    let wait = args.get("wait_seconds").and_then(Value::as_u64).unwrap_or(20).min(20);
    // Within the request's own budget, with room for the last look.
    let deadline =
        (tokio::time::Instant::now() + std::time::Duration::from_secs(wait)).min(caller.deadline - std::time::Duration::from_secs(2));
    let mut pause = std::time::Duration::from_millis(500);
    loop {
        let a = match send(caller, "GET", &format!("/approval-requests/{id}"), None, None).await {
            Ok(a) => a,
            Err(message) => return Ok(error_result(json!({"code": "UPSTREAM_UNAVAILABLE", "message": message}), None, None)),
        };
        if a.status != 200 {
            let error = a.body.get("error").cloned().unwrap_or(a.body);
            return Ok(error_result(error, None, None));
        }
        let state = a.body["data"]["state"].as_str().unwrap_or_default().to_string();
        if state != "pending" || tokio::time::Instant::now() >= deadline {
            let d = &a.body["data"];
            let next = match state.as_str() {
                "approved" => "repeat the original tool call unchanged: it runs once, with this approval",
                "pending" => "still waiting for a person; call await_approval again",
                _ => "this request will not run; a new idempotency_key asks for a new approval",
            };
            let out = json!({"approval_request_id": id, "state": state, "effect": d["effect"], "summary": d["preview"]["summary"],
                             "decided_by": d.get("decided_by"), "changed": d.get("changed"), "next": next});
            return Ok(result(false, out, json!({})));
        }
        // Half a second, then one, then two: a person takes seconds, and each look is a read
        // against the caller's rate limit.
        tokio::time::sleep(pause.min(deadline.saturating_duration_since(tokio::time::Instant::now()))).await;
        pause = (pause * 2).min(std::time::Duration::from_secs(2));
    }
}

struct Request {
    path_and_query: String,
    body: Option<Vec<u8>>,
}

impl Request {
    /// The path with its parameters, the query, and the body, from the tool's arguments.
    fn build(op: &Operation, args: &JsonObject, write: bool) -> Result<Self, String> {
        for k in args.keys() {
            let known =
                op.path_params.contains(k) || op.query_params.contains(k) || (op.body && k == "body") || (write && k == "idempotency_key");
            if !known {
                return Err(format!("unknown argument `{k}`"));
            }
        }
        let mut path = String::new();
        for segment in op.path.split('/').filter(|s| !s.is_empty()) {
            path.push('/');
            match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(name) => {
                    let v = scalar(args.get(name)).ok_or_else(|| format!("`{name}` is required"))?;
                    // `.` and `..` are dot-segments to every URL parser (escaped too): the path would
                    // climb to another route than the tool's.
                    if v.is_empty() || v == "." || v == ".." {
                        return Err(format!("`{name}` must be a name or id, not `{v}`"));
                    }
                    path.extend(utf8_percent_encode(&v, ENCODE));
                }
                None => path.push_str(segment),
            }
        }
        let mut query = Vec::new();
        for name in &op.query_params {
            match args.get(name) {
                None | Some(Value::Null) => {}
                v => query.push(format!(
                    "{name}={}",
                    utf8_percent_encode(&scalar(v).ok_or_else(|| format!("`{name}` must be a string, number or boolean"))?, ENCODE)
                )),
            }
        }
        if !query.is_empty() {
            path.push('?');
            path.push_str(&query.join("&"));
        }
        let body = args.get("body").map(|b| serde_json::to_vec(b).unwrap_or_default());
        Ok(Self { path_and_query: path, body })
    }
}

fn scalar(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The same call (credential, workspace, tool, arguments) gets the same key, so a repeat
/// after an approval, or after a lost answer, is the same request to the API.
fn derived_key(caller: &Caller, tool: &str, args: &JsonObject) -> String {
    let mut h = Sha256::new();
    h.update(caller.authorization.as_bytes());
    h.update([0]);
    h.update(caller.workspace.as_ref().map_or(&b""[..], |w| w.as_bytes()));
    h.update([0]);
    h.update(tool.as_bytes());
    h.update([0]);
    h.update(canonical(&Value::Object(args.clone())).as_bytes());
    format!("mcp_{}", &shared::crypto::hex(&h.finalize())[..40])
}

/// JSON with every object's keys sorted, whatever order the client sent them in.
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys.iter().map(|k| format!("{}:{}", Value::String((*k).clone()), canonical(&m[*k]))).collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(canonical).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

async fn send(caller: &Caller, method: &str, path_and_query: &str, body: Option<&Vec<u8>>, key: Option<&str>) -> Result<Answer, String> {
    let left = caller.deadline.saturating_duration_since(tokio::time::Instant::now());
    if left < std::time::Duration::from_millis(500) {
        return Err("this request's time ran out before the API was asked".into());
    }
    let url = format!("{}/api/v1{path_and_query}", caller.upstream.origin);
    let method = reqwest::Method::from_bytes(method.as_bytes()).map_err(|e| e.to_string())?;
    let mut req = caller.upstream.client.request(method, &url).map_err(|e| format!("the API's address: {e}"))?;
    req = req.timeout(left).header(http::header::AUTHORIZATION, caller.authorization.clone());
    if let Some(w) = &caller.workspace {
        req = req.header("x-workspace-id", w.clone());
    }
    if let Some(k) = key {
        req = req.header("idempotency-key", k);
    }
    if let Some(b) = body {
        req = req.header(http::header::CONTENT_TYPE, "application/json").body(b.clone());
    }
    let resp = req.send().await.map_err(|e| format!("the API did not answer ({})", shared::outbound::error_kind(&e)))?;
    let header = |n: &str| resp.headers().get(n).and_then(|v| v.to_str().ok()).map(str::to_string);
    let (status, replayed, request_id, retry_after) =
        (resp.status().as_u16(), header("idempotent-replayed").is_some(), header("request-id"), header("retry-after"));
    let bytes = resp.bytes().await.map_err(|e| format!("the API's answer was cut off ({})", shared::outbound::error_kind(&e)))?;
    let body = if bytes.is_empty() {
        json!({})
    } else {
        serde_json::from_slice(&bytes).unwrap_or_else(|_| json!({"text": String::from_utf8_lossy(&bytes)}))
    };
    Ok(Answer { status, body, replayed, request_id, retry_after })
}

fn invalid(message: &str) -> CallToolResult {
    error_result(json!({"code": "VALIDATION_ERROR", "message": message}), None, None)
}

/// A tool error carrying the API's error envelope (code, message, details) as structured
/// content, and the approval request when the write waits for one.
fn error_result(error: Value, key: Option<&str>, approval: Option<Value>) -> CallToolResult {
    let mut structured = Map::new();
    structured.insert("error".into(), error);
    if let Some(a) = approval {
        structured.insert("approval_request".into(), a);
    }
    let mut meta = json!({});
    if let Some(k) = key {
        structured.insert("idempotency_key".into(), json!(k));
        meta["idempotency_key"] = json!(k);
    }
    result(true, Value::Object(structured), meta)
}

fn result(is_error: bool, structured: Value, meta: Value) -> CallToolResult {
    let text = serde_json::to_string_pretty(&structured).unwrap_or_default();
    let mut doc = json!({"resultType": "complete", "content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": is_error});
    if meta.as_object().is_some_and(|m| !m.is_empty()) {
        doc["_meta"] = meta;
    }
    serde_json::from_value(doc).expect("a tool result")
}
