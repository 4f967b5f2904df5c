//! JSON logs (one object per line, as CloudWatch and the Lambda JSON log format expect). The
//! request span carries `request_id`, so every line a request logs names it.

pub fn init() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,aws_config=warn,aws_smithy_runtime=warn"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(true)
        .with_span_list(false)
        .with_target(false)
        .try_init();
}
