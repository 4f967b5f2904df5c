#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    shared::lambda::run_area_with_pages(capabilities::routes(), &capabilities::pages::SITE, &domain::approvals::DESK).await
}
