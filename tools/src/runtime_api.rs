//! A local Lambda Runtime API for cold starts: a freshly started function process polls
//! `GET /2018-06-01/runtime/invocation/next`, gets one event, and posts its answer, as it
//! does under the real runtime. What it measures: process start -> the first poll (init),
//! process start -> the answer (first response), and the process's peak RSS.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

const PREFIX: &str = "/2018-06-01/runtime";

#[derive(Debug, Clone)]
pub struct ColdStart {
    /// Process start -> first `GET .../invocation/next`.
    pub init: Duration,
    /// Process start -> the answer to the one event.
    pub first_response: Duration,
    /// The answer: the function's response document, or the error it reported.
    pub answer: Result<serde_json::Value, String>,
    /// VmHWM of the process once it has answered.
    pub peak_rss_kib: u64,
}

#[derive(Default)]
struct State {
    first_poll: Option<Instant>,
    answered: Option<(Instant, Result<serde_json::Value, String>)>,
}

/// The environment the real runtime gives every function, for a process of 128 MB.
fn runtime_env(api: &str, name: &str) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_LAMBDA_RUNTIME_API", api.to_string()),
        ("AWS_LAMBDA_FUNCTION_NAME", name.to_string()),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128".into()),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".into()),
        ("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{name}")),
        ("AWS_LAMBDA_LOG_STREAM_NAME", "local".into()),
        ("LAMBDA_TASK_ROOT", "/var/task".into()),
        ("TZ", ":UTC".into()),
    ]
}

/// Start `binary` with `env` under a fresh Runtime API, serve it `event`, and measure.
/// The process is killed once it has answered (or after 15 s).
pub async fn cold_start(binary: &Path, env: &[(&str, String)], event: &serde_json::Value) -> Result<ColdStart, String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let api = listener.local_addr().map_err(|e| e.to_string())?.to_string();
    let state = Arc::new(Mutex::new(State::default()));
    let done = Arc::new(Notify::new());
    let event = Bytes::from(serde_json::to_vec(event).map_err(|e| e.to_string())?);
    let server = {
        let (state, done) = (state.clone(), done.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let (state, done, event) = (state.clone(), done.clone(), event.clone());
                tokio::spawn(async move {
                    let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let (state, done, event) = (state.clone(), done.clone(), event.clone());
                        async move { Ok::<_, Infallible>(runtime(req, &state, &done, event).await) }
                    });
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
                });
            }
        })
    };
    let name = binary.file_name().and_then(|n| n.to_str()).unwrap_or("function").to_string();
    let mut cmd = tokio::process::Command::new(binary);
    cmd.env_clear().env("PATH", "/usr/bin:/bin").envs(runtime_env(&api, &name)).envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    cmd.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).kill_on_drop(true);
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("{}: {e}", binary.display()))?;
    let pid = child.id().unwrap_or(0);
    let waited = tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            // Registered before the check, so an answer between the two is not missed.
            let notified = done.notified();
            if state.lock().unwrap().answered.is_some() {
                return;
            }
            tokio::select! {
                _ = notified => {}
                _ = child.wait() => return,
            }
        }
    })
    .await;
    let peak_rss_kib = proc_status_kib(&pid.to_string(), "VmHWM");
    let _ = child.kill().await;
    server.abort();
    let s = std::mem::take(&mut *state.lock().unwrap());
    let first_poll = s.first_poll.ok_or_else(|| format!("{name} never polled for an event"))?;
    let (answered_at, answer) = match (waited, s.answered) {
        (_, Some(a)) => a,
        (Err(_), None) => return Err(format!("{name} did not answer within 15 s")),
        (Ok(()), None) => return Err(format!("{name} exited without answering")),
    };
    Ok(ColdStart { init: first_poll - started, first_response: answered_at - started, answer, peak_rss_kib })
}

async fn runtime(
    req: http::Request<hyper::body::Incoming>,
    state: &Mutex<State>,
    done: &Notify,
    event: Bytes,
) -> http::Response<Full<Bytes>> {
    let now = Instant::now();
    let path = req.uri().path().strip_prefix(PREFIX).unwrap_or("").to_string();
    let reply = |status: u16, body: Bytes| http::Response::builder().status(status).body(Full::new(body)).unwrap();
    match (req.method().as_str(), path.as_str()) {
        ("GET", "/invocation/next") => {
            let first = {
                let mut s = state.lock().unwrap();
                let first = s.first_poll.is_none();
                s.first_poll.get_or_insert(now);
                first
            };
            if !first {
                // One event per process: the next poll waits until the process is killed.
                std::future::pending::<()>().await;
            }
            let deadline = chrono::Utc::now().timestamp_millis() + 30_000;
            http::Response::builder()
                .status(200)
                .header("lambda-runtime-aws-request-id", "cold-start-1")
                .header("lambda-runtime-deadline-ms", deadline.to_string())
                .header("lambda-runtime-invoked-function-arn", "arn:aws:lambda:us-east-1:123456789012:function:local")
                .header("lambda-runtime-trace-id", "Root=1-00000000-000000000000000000000000;Sampled=0")
                .body(Full::new(event))
                .unwrap()
        }
        ("POST", p) => {
            let ok = p.ends_with("/response");
            let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            let answer = if ok {
                serde_json::from_slice(&body).map_err(|e| format!("response is not JSON: {e}"))
            } else {
                Err(format!("{p}: {}", String::from_utf8_lossy(&body)))
            };
            state.lock().unwrap().answered.get_or_insert((now, answer));
            done.notify_waiters();
            reply(202, Bytes::from_static(b"{\"status\":\"OK\"}"))
        }
        _ => reply(404, Bytes::new()),
    }
}

/// A `/proc/<process>/status` size field (`VmHWM`, `VmRSS`) in KiB; `process` is a pid or `self`.
pub fn proc_status_kib(process: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{process}/status"))
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix(field)?.strip_prefix(':')?.split_whitespace().next()?.parse().ok()))
        .unwrap_or(0)
}

/// An API Gateway HTTP API (payload 2.0) event for `method path?query` with a bearer credential.
pub fn http_event(method: &str, path_and_query: &str, bearer: &str, body: Option<&serde_json::Value>) -> serde_json::Value {
    let (path, query) = path_and_query.split_once('?').unwrap_or((path_and_query, ""));
    let mut event = serde_json::json!({
        "version": "2.0",
        "routeKey": "ANY /api/v1/{proxy+}",
        "rawPath": path,
        "rawQueryString": query,
        "headers": {"authorization": format!("Bearer {bearer}"), "host": "localhost", "content-type": "application/json"},
        "requestContext": {
            "accountId": "123456789012", "apiId": "local", "domainName": "localhost", "domainPrefix": "localhost",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "cold-start"},
            "requestId": "cold-start-1", "routeKey": "ANY /api/v1/{proxy+}", "stage": "$default",
            "time": "25/Nov/2026:10:00:00 +0000", "timeEpoch": 1795600800000u64
        },
        "isBase64Encoded": false
    });
    if let Some(b) = body {
        event["body"] = serde_json::Value::String(b.to_string());
    }
    event
}
