//! A hello-world `lambda_http` function: what a Rust Lambda costs before it does any work.

use lambda_http::{Body, Error, Request, Response, run, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    run(service_fn(|_req: Request| async { Ok::<_, Error>(Response::builder().status(200).body(Body::from("hello"))?) })).await
}
