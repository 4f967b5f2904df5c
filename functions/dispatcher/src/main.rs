//! One container: SDK clients and the HTTP client are built once, then the runtime loop. The
//! work is `domain::webhooks::dispatch`.

use domain::webhooks::dispatch::{Budget, Dispatcher};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    shared::telemetry::init();
    let app = shared::App::from_env().await?;
    // Leaked on purpose: lives as long as the container, borrowed by every invocation.
    let d: &'static Dispatcher = Box::leak(Box::new(Dispatcher::new(app)?));
    lambda_runtime::run(lambda_runtime::service_fn(move |ev: lambda_runtime::LambdaEvent<serde_json::Value>| async move {
        // Keep 5 s for what follows the last step (answering the batch).
        let budget = Budget::until_deadline(ev.context.deadline, std::time::Duration::from_secs(5));
        d.handle_within(ev.payload, budget).await.map_err(lambda_runtime::Error::from)
    }))
    .await
}
