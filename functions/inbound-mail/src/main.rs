//! One container: SDK clients built once, then the runtime loop. Inputs: the inbound-mail
//! queue (SES receipt notifications through SNS) and the minute schedule (snooze wake-up).
//! The work is `domain::helpdesk::mail`.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    shared::telemetry::init();
    // Leaked on purpose: lives as long as the container, borrowed by every invocation.
    let app: &'static shared::App = Box::leak(Box::new(shared::App::from_env().await?));
    lambda_runtime::run(lambda_runtime::service_fn(move |ev: lambda_runtime::LambdaEvent<serde_json::Value>| async move {
        domain::helpdesk::mail::handle_event(app, ev.payload).await.map_err(lambda_runtime::Error::from)
    }))
    .await
}
