//! JSON logs (one object per line, as CloudWatch and the Lambda JSON log format expect). The
//! request span carries `request_id`, so every line a request logs names it.

pub fn init() {
    use tracing_subscriber::{filter::Targets, layer::SubscriberExt, util::SubscriberInitExt};
    // `Targets` reads RUST_LOG's `level,target=level` syntax without EnvFilter's regex engine,
    // which every function binary would otherwise carry.
    let filter: Targets = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| "info,aws_config=warn,aws_smithy_runtime=warn".parse().expect("a valid default filter"));
    let _ =
        tracing_subscriber::fmt().json().with_current_span(true).with_span_list(false).with_target(false).finish().with(filter).try_init();
}
