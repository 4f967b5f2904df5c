#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    shared::lambda::run_area(webhooks::routes(), &domain::approvals::DESK).await
}
