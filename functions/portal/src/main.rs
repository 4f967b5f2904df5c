#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    shared::lambda::run_area_with_pages(portal::routes(), &portal::pages::SITE, &domain::approvals::DESK).await
}
