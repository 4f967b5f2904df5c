//! One container: SDK clients and the adapters' HTTP client built once, then the runtime
//! loop. Inputs: the publish queue (posts due now) and the schedule (the tick).

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    shared::telemetry::init();
    let app = shared::App::from_env().await?;
    // Leaked on purpose: lives as long as the container, borrowed by every invocation.
    let publisher: &'static domain::publishing::Publisher = Box::leak(Box::new(domain::publishing::Publisher::new(app)?));
    lambda_runtime::run(lambda_runtime::service_fn(move |ev: lambda_runtime::LambdaEvent<serde_json::Value>| async move {
        publisher.handle(ev.payload).await.map_err(lambda_runtime::Error::from)
    }))
    .await
}
