//! Counts DynamoDB round trips per request, so "calls per GET/POST" is measured, not guessed.
//! An SDK interceptor bumps a task-local counter that the request pipeline scopes and logs.

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use std::cell::Cell;
use std::future::Future;

tokio::task_local! {
    static DDB_CALLS: Cell<u32>;
}

#[derive(Debug)]
pub struct DynamoCallCounter;

impl Intercept for DynamoCallCounter {
    fn name(&self) -> &'static str {
        "DynamoCallCounter"
    }
    fn read_before_transmit(
        &self,
        _ctx: &BeforeTransmitInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let _ = DDB_CALLS.try_with(|c| c.set(c.get() + 1));
        Ok(())
    }
}

/// Run `fut` with a fresh counter; returns its output and the number of DynamoDB HTTP attempts it made.
pub async fn count_ddb_calls<F: Future>(fut: F) -> (F::Output, u32) {
    DDB_CALLS
        .scope(Cell::new(0), async {
            let out = fut.await;
            (out, DDB_CALLS.with(Cell::get))
        })
        .await
}

/// The stack's own metric namespace (`METRICS_NAMESPACE`, which template.yaml sets to
/// `WorkspacePlatform/<stack name>`), so two stacks in one account never mix their metrics.
pub fn namespace() -> &'static str {
    static NS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NS.get_or_init(|| std::env::var("METRICS_NAMESPACE").ok().filter(|v| !v.is_empty()).unwrap_or_else(|| "WorkspacePlatform".into()))
}

/// Count one occurrence of `metric` with one dimension of few values (a status, a reason), as
/// a CloudWatch embedded-metric log line (Lambda's log stream turns it into a metric; no API
/// call, no extra permission).
pub fn count(metric: &str, dimension: &str, value: &str) {
    let line = serde_json::json!({
        "_aws": {
            "Timestamp": chrono::Utc::now().timestamp_millis(),
            "CloudWatchMetrics": [{"Namespace": namespace(), "Dimensions": [[dimension]], "Metrics": [{"Name": metric, "Unit": "Count"}]}],
        },
        dimension: value,
        metric: 1,
    });
    println!("{line}");
}

/// One API request as CloudWatch embedded metrics for the whole API: Requests, Latency,
/// DynamoDBCalls, ClientErrors (4xx but 429), Throttled (429), ServerErrors (5xx): six custom
/// metrics per stack. The route rides along as a log property, not a dimension (a dimension per
/// route would be ~700 metrics, some $200 a month): per-route figures come from Logs Insights
/// over the same lines, per-function ones from AWS/Lambda. Written to stdout only inside Lambda
/// (`AWS_LAMBDA_FUNCTION_NAME`), where the log stream becomes metrics; the local stack and
/// tests keep their output to the request log.
pub fn request(route: &str, status: u16, duration_ms: u64, ddb_calls: u32) {
    static IN_LAMBDA: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *IN_LAMBDA.get_or_init(|| std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some()) {
        println!("{}", request_line(route, status, duration_ms, ddb_calls, chrono::Utc::now().timestamp_millis()));
    }
}

pub fn request_line(route: &str, status: u16, duration_ms: u64, ddb_calls: u32, at_ms: i64) -> serde_json::Value {
    let flag = |b: bool| u32::from(b);
    serde_json::json!({
        "_aws": {
            "Timestamp": at_ms,
            "CloudWatchMetrics": [{
                "Namespace": namespace(),
                "Dimensions": [[]],
                "Metrics": [
                    {"Name": "Requests", "Unit": "Count"},
                    {"Name": "Latency", "Unit": "Milliseconds"},
                    {"Name": "DynamoDBCalls", "Unit": "Count"},
                    {"Name": "ClientErrors", "Unit": "Count"},
                    {"Name": "Throttled", "Unit": "Count"},
                    {"Name": "ServerErrors", "Unit": "Count"},
                ],
            }],
        },
        "Route": route,
        "Requests": 1,
        "Latency": duration_ms,
        "DynamoDBCalls": ddb_calls,
        "ClientErrors": flag((400..500).contains(&status) && status != 429),
        "Throttled": flag(status == 429),
        "ServerErrors": flag(status >= 500),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_request_line_is_embedded_metric_format() {
        let line = super::request_line("GET /posts/{id}", 429, 12, 2, 1_795_000_000_000);
        let spec = &line["_aws"]["CloudWatchMetrics"][0];
        // Every metric named in the directive is a top-level number, every dimension a string.
        for m in spec["Metrics"].as_array().unwrap() {
            assert!(line[m["Name"].as_str().unwrap()].is_number(), "{m}");
        }
        assert_eq!(line["Route"], "GET /posts/{id}");
        assert_eq!(spec["Dimensions"], serde_json::json!([[]]), "no metric per route: the route is a property");
        assert_eq!((line["Throttled"].as_u64(), line["ClientErrors"].as_u64(), line["ServerErrors"].as_u64()), (Some(1), Some(0), Some(0)));
        assert_eq!(super::request_line("GET /x", 503, 1, 0, 0)["ServerErrors"], 1);
        assert_eq!(super::request_line("GET /x", 404, 1, 0, 0)["ClientErrors"], 1);
    }
}

// ---------- which AWS actions each function uses (checked against template.yaml) ----------

tokio::task_local! {
    static FUNCTION: &'static str;
}

/// Run `fut` as function `name` (a binary of template.yaml): AWS calls it makes are logged
/// under that name when `AWS_CALL_LOG` names a directory. The local stack runs every function
/// in one process, so this is how a call is attributed; `make test` then checks that each
/// function's IAM policy grants exactly the actions the end-to-end run saw it use.
pub async fn as_function<F: Future>(name: &'static str, fut: F) -> F::Output {
    FUNCTION.scope(name, fut).await
}

/// The log file and the (function, action, resource) lines already written to it.
type CallLogFile = std::sync::Mutex<(std::fs::File, std::collections::BTreeSet<(String, String, String)>)>;

fn call_log() -> Option<&'static CallLogFile> {
    static LOG: std::sync::OnceLock<Option<CallLogFile>> = std::sync::OnceLock::new();
    LOG.get_or_init(|| {
        // Set but empty is off: joined to "", the log would land in the working directory.
        let dir = std::env::var_os("AWS_CALL_LOG").filter(|d| !d.is_empty())?;
        std::fs::create_dir_all(&dir).ok()?;
        let path = std::path::Path::new(&dir).join(format!("{}.log", std::process::id()));
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path).ok()?;
        Some(std::sync::Mutex::new((file, Default::default())))
    })
    .as_ref()
}

/// The stack's queues and buckets by the value a function's configuration holds (a queue URL,
/// a bucket name) and the logical id template.yaml gives them: how a call's target is logged.
static RESOURCE_NAMES: std::sync::Mutex<Vec<(String, &'static str)>> = std::sync::Mutex::new(Vec::new());

/// Learn resource names: (the value a configuration holds, the template's logical id). Each
/// `App` tells its own, when the call log is on.
pub fn name_resources(pairs: &[(&str, &'static str)]) {
    if call_log().is_none() {
        return;
    }
    let mut names = RESOURCE_NAMES.lock().unwrap_or_else(|p| p.into_inner());
    for (value, name) in pairs {
        if !value.is_empty() && !names.iter().any(|(v, _)| v == value) {
            names.push((value.to_string(), name));
        }
    }
}

fn resource_name(value: &str) -> String {
    let names = RESOURCE_NAMES.lock().unwrap_or_else(|p| p.into_inner());
    names.iter().find(|(v, _)| v == value).map_or_else(|| format!("unknown:{value}"), |(_, n)| n.to_string())
}

/// An S3 object as template.yaml's policies name it: the bucket's logical id and the key's
/// first segment (`MailBucket/attachments/…`), or the bucket alone.
pub fn s3_resource(bucket: &str, key: &str) -> String {
    match key.split('/').next().filter(|k| !k.is_empty()) {
        Some(first) if key.contains('/') => format!("{}/{first}/…", resource_name(bucket)),
        Some(_) => format!("{}/…", resource_name(bucket)),
        None => resource_name(bucket),
    }
}

/// The target of an SDK request as the template names it.
fn target(service: &str, req: &aws_smithy_runtime_api::http::Request) -> String {
    let json = || req.body().bytes().and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok());
    match service {
        // One table; an index is a resource of its own.
        "DynamoDB" => match json().and_then(|v| v.get("IndexName").and_then(|i| i.as_str()).map(String::from)) {
            Some(index) => format!("Table/index/{index}"),
            None => "Table".into(),
        },
        "SQS" => {
            let url = json().and_then(|v| v.get("QueueUrl").and_then(|u| u.as_str()).map(String::from)).or_else(|| {
                let body = req.body().bytes()?;
                url::form_urlencoded::parse(body).find(|(k, _)| k == "QueueUrl").map(|(_, v)| v.into_owned())
            });
            url.map_or_else(|| "unknown:queue".into(), |u| resource_name(&u))
        }
        "S3" => {
            let Ok(uri) = url::Url::parse(req.uri()) else { return "unknown:s3".into() };
            let host = uri.host_str().unwrap_or_default().to_string();
            let path = uri.path().trim_start_matches('/');
            // Virtual-hosted (AWS) or path-style (moto): the bucket is the host's first label or the path's first segment.
            let names = RESOURCE_NAMES.lock().unwrap_or_else(|p| p.into_inner()).clone();
            match names.iter().find(|(v, _)| host.starts_with(&format!("{v}."))) {
                Some((bucket, _)) => s3_resource(bucket, &percent_encoding::percent_decode_str(path).decode_utf8_lossy()),
                None => {
                    let (bucket, key) = path.split_once('/').unwrap_or((path, ""));
                    s3_resource(bucket, &percent_encoding::percent_decode_str(key).decode_utf8_lossy())
                }
            }
        }
        "Secrets Manager" => "PlatformSecret".into(),
        // SES identities and configuration sets: a tag condition, not a name (see tools/src/iam.rs).
        _ => "*".into(),
    }
}

/// Note that the current function used an IAM action (`dynamodb:PutItem`) on a resource
/// (`Table`, `EmailsQueue`, `MailBucket/attachments/…`). A no-op unless `AWS_CALL_LOG` is set
/// and the call runs inside [`as_function`].
pub fn record_call(action: &str, resource: &str) {
    let Some(log) = call_log() else { return };
    let Ok(function) = FUNCTION.try_with(|f| *f) else { return };
    let mut guard = log.lock().unwrap_or_else(|p| p.into_inner());
    let (file, seen) = &mut *guard;
    if seen.insert((function.to_string(), action.to_string(), resource.to_string())) {
        use std::io::Write;
        let _ = writeln!(file, "{function} {action} {resource}");
    }
}

/// The IAM action an SDK operation needs. A transaction is authorised per item (PutItem,
/// UpdateItem, ...): those are recorded by `outbox::Tx::commit` instead.
pub fn iam_action(service: &str, operation: &str) -> Option<String> {
    let (prefix, op) = match (service, operation) {
        ("DynamoDB", "TransactWriteItems") => return None,
        ("DynamoDB", op) => ("dynamodb", op),
        ("SQS", op) => ("sqs", op.strip_suffix("Batch").unwrap_or(op)),
        ("SESv2", op) => ("ses", op),
        ("Secrets Manager", op) => ("secretsmanager", op),
        // A multipart upload is authorised as PutObject, part by part.
        ("S3", "CreateMultipartUpload" | "UploadPart" | "CompleteMultipartUpload") => ("s3", "PutObject"),
        ("S3", "HeadObject") => ("s3", "GetObject"),
        ("S3", op) => ("s3", op),
        (other, op) => return Some(format!("{}:{op}", other.to_ascii_lowercase())),
    };
    Some(format!("{prefix}:{op}"))
}

/// An SDK interceptor for every client: records the IAM action of each operation, and, while
/// [`tally_calls`] is on, each attempt's count and time.
#[derive(Debug)]
pub struct CallLog;

impl Intercept for CallLog {
    fn name(&self) -> &'static str {
        "CallLog"
    }
    fn read_before_transmit(
        &self,
        ctx: &BeforeTransmitInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if call_log().is_some()
            && let Some(m) = cfg.load::<aws_smithy_runtime_api::client::orchestrator::Metadata>()
            && let Some(action) = iam_action(m.service(), m.name())
        {
            let resource = target(m.service(), ctx.request());
            record_call(&action, &resource);
        }
        if TALLY_ON.load(std::sync::atomic::Ordering::Relaxed) {
            cfg.interceptor_state().store_put(SentAt(std::time::Instant::now()));
        }
        Ok(())
    }
    fn read_after_deserialization(
        &self,
        ctx: &aws_smithy_runtime_api::client::interceptors::context::AfterDeserializationInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let (Some(SentAt(at)), Some(m)) = (cfg.load::<SentAt>(), cfg.load::<aws_smithy_runtime_api::client::orchestrator::Metadata>()) {
            // A query's cost is the items it reads, filtered out or not.
            let scanned = match ctx.output_or_error() {
                Ok(out) => out.downcast_ref::<aws_sdk_dynamodb::operation::query::QueryOutput>().map_or(0, |q| q.scanned_count()),
                Err(_) => 0,
            };
            let key = (FUNCTION.try_with(|f| *f).unwrap_or("-"), m.service().to_string(), m.name().to_string());
            let mut t = TALLY.lock().unwrap_or_else(|p| p.into_inner());
            let e = t.entry(key).or_default();
            e.calls += 1;
            e.micros += at.elapsed().as_micros() as u64;
            e.scanned += scanned.max(0) as u64;
        }
        Ok(())
    }
}

// ---------- how many AWS calls each function makes, and how long they take (the soak) ----------

#[derive(Debug, Clone, Copy)]
struct SentAt(std::time::Instant);

impl aws_smithy_types::config_bag::Storable for SentAt {
    type Storer = aws_smithy_types::config_bag::StoreReplace<Self>;
}

static TALLY_ON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// AWS calls of one (function, service, operation).
#[derive(Debug, Clone, Copy, Default)]
pub struct Calls {
    pub calls: u64,
    /// From sending to the parsed answer, summed.
    pub micros: u64,
    /// Items a DynamoDB Query read (its `ScannedCount`), summed.
    pub scanned: u64,
}

pub type CallTally = std::collections::BTreeMap<(&'static str, String, String), Calls>;

static TALLY: std::sync::Mutex<CallTally> = std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Start counting every AWS call of this process (a soak's question is which calls grow, in
/// number or in time, when latency does). Off unless a test turns it on: a Lambda never does.
pub fn tally_calls() {
    TALLY_ON.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The calls counted since the last take.
pub fn take_call_tally() -> CallTally {
    std::mem::take(&mut *TALLY.lock().unwrap_or_else(|p| p.into_inner()))
}
