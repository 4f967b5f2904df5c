#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    shared::lambda::run_area(gdpr::routes(), &domain::approvals::DESK).await
}
