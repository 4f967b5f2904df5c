#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    shared::lambda::run_area(channels::routes(), &domain::approvals::DESK).await
}
