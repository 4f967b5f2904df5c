//! Sends one email and shows how an API error reads.
//!
//! `PLATFORM_BASE_URL=... PLATFORM_API_KEY=wsp_... FROM=news@mail.example.com TO=ada@example.com cargo run -p workspace-platform-client --example send_email`

use workspace_platform_client::{Client, Error, SendEmail};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = Client::with_api_key(&std::env::var("PLATFORM_BASE_URL")?, &std::env::var("PLATFORM_API_KEY")?)?;
    let email = SendEmail {
        from: std::env::var("FROM")?,
        to: vec![std::env::var("TO")?],
        subject: Some("Your booking is confirmed".into()),
        text: Some("See you on Monday at 10:00.".into()),
        ..Default::default()
    };
    // The Idempotency-Key is generated once and reused by the client's retries; pass your own
    // (client.idempotency_key("order-1234-confirmation")) to make the send once-only across
    // restarts of your program too.
    match client.send_email(&email).await {
        Ok(sent) => println!("{} {:?}", sent.id, sent.status),
        Err(Error::Api(e)) if e.code == "VALIDATION_ERROR" => eprintln!("invalid: {:?} (request {:?})", e.details, e.request_id),
        Err(e) => return Err(e.into()),
    }
    Ok(())
}
