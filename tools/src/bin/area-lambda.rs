//! Any area as a Lambda function, chosen by `AREA`: the `shared::lambda::run_area` every area
//! function's `main` calls, built with the tools so `tools/tests/lambda.rs` can run it under
//! the local Runtime API without a separate build of each function binary.

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let area = std::env::var("AREA").unwrap_or_default();
    let routes = tools::gateway::areas()
        .into_iter()
        .find(|(name, _)| *name == area)
        .map(|(_, routes)| routes)
        .ok_or_else(|| format!("AREA={area:?} names no area function"))?;
    shared::lambda::run_area(routes, &domain::approvals::DESK).await
}
