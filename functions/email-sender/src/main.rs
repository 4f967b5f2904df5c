//! One container: SDK clients (DynamoDB, SQS, SES) built once, then the runtime loop. The work
//! is `domain::sending`.
// A send's future nests deep (the SES call inside the claim, the outbox, the retries): built
// on its own (`cargo build -p email-sender`, as packaging does) the layout query passes the
// default depth of 128 that the whole workspace's unified features stay under.
#![recursion_limit = "256"]

use domain::sending::Sender;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    shared::telemetry::init();
    let app = shared::App::from_env().await?;
    // Leaked on purpose: lives as long as the container, borrowed by every invocation.
    let sender: &'static Sender = Box::leak(Box::new(Sender::new(app)));
    lambda_runtime::run(lambda_runtime::service_fn(move |ev: lambda_runtime::LambdaEvent<serde_json::Value>| async move {
        sender.handle(ev.payload).await.map_err(lambda_runtime::Error::from)
    }))
    .await
}
