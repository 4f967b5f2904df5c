//! One container: SDK and HTTP clients built once, then the runtime loop over the scans queue.
//! The work is `domain::scans::scanner`.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    shared::telemetry::init();
    // Leaked on purpose: lives as long as the container, borrowed by every invocation.
    let app: &'static shared::App = Box::leak(Box::new(shared::App::from_env().await?));
    lambda_runtime::run(lambda_runtime::service_fn(move |ev: lambda_runtime::LambdaEvent<shared::sqs::SqsEvent>| async move {
        Ok::<_, lambda_runtime::Error>(domain::scans::scanner::handle_sqs(app, ev.payload).await)
    }))
    .await
}
