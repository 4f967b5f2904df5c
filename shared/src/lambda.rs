//! The body of every area's `main`: clients built once per container, then the runtime loop.

use crate::app::App;
use crate::routing::Route;

pub async fn run_area(routes: &'static [Route]) -> Result<(), lambda_http::Error> {
    crate::telemetry::init();
    // Leaked on purpose: the state lives as long as the container, and handlers borrow it.
    let app: &'static App = Box::leak(Box::new(App::from_env().await?));
    lambda_http::run(lambda_http::service_fn(move |req| async move {
        Ok::<_, std::convert::Infallible>(crate::http::serve(app, routes, req).await)
    }))
    .await
}
