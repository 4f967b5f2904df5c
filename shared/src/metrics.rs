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

/// Count one occurrence of `metric` with one dimension, as a CloudWatch embedded-metric log
/// line (Lambda's log stream turns it into a metric; no API call, no extra permission).
pub fn count(metric: &str, dimension: &str, value: &str) {
    let line = serde_json::json!({
        "_aws": {
            "Timestamp": chrono::Utc::now().timestamp_millis(),
            "CloudWatchMetrics": [{"Namespace": "WorkspacePlatform", "Dimensions": [[dimension]], "Metrics": [{"Name": metric, "Unit": "Count"}]}],
        },
        dimension: value,
        metric: 1,
    });
    println!("{line}");
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

/// The log file and the (function, action) pairs already written to it.
type CallLogFile = std::sync::Mutex<(std::fs::File, std::collections::BTreeSet<(String, String)>)>;

fn call_log() -> Option<&'static CallLogFile> {
    static LOG: std::sync::OnceLock<Option<CallLogFile>> = std::sync::OnceLock::new();
    LOG.get_or_init(|| {
        let dir = std::env::var_os("AWS_CALL_LOG")?;
        std::fs::create_dir_all(&dir).ok()?;
        let path = std::path::Path::new(&dir).join(format!("{}.log", std::process::id()));
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path).ok()?;
        Some(std::sync::Mutex::new((file, Default::default())))
    })
    .as_ref()
}

/// Note that the current function used an IAM action (`dynamodb:PutItem`). A no-op unless
/// `AWS_CALL_LOG` is set and the call runs inside [`as_function`].
pub fn record_action(action: &str) {
    let Some(log) = call_log() else { return };
    let Ok(function) = FUNCTION.try_with(|f| *f) else { return };
    let mut guard = log.lock().unwrap_or_else(|p| p.into_inner());
    let (file, seen) = &mut *guard;
    if seen.insert((function.to_string(), action.to_string())) {
        use std::io::Write;
        let _ = writeln!(file, "{function} {action}");
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

/// An SDK interceptor for every client: records the IAM action of each operation.
#[derive(Debug)]
pub struct CallLog;

impl Intercept for CallLog {
    fn name(&self) -> &'static str {
        "CallLog"
    }
    fn read_before_transmit(
        &self,
        _ctx: &BeforeTransmitInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if call_log().is_some()
            && let Some(m) = cfg.load::<aws_smithy_runtime_api::client::orchestrator::Metadata>()
            && let Some(action) = iam_action(m.service(), m.name())
        {
            record_action(&action);
        }
        Ok(())
    }
}
