//! Counts DynamoDB round trips per request, so "calls per GET/POST" is measured, not guessed.
//! An SDK interceptor bumps a task-local counter that the request pipeline scopes and logs.

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use std::cell::Cell;
use std::future::Future;

tokio::task_local! {
    static DDB_CALLS: Cell<u32>;
}

#[derive(Debug)]
pub struct DynamoCallCounter;

impl Intercept for DynamoCallCounter {
    fn name(&self) -> &'static str {
        "DynamoCallCounter"
    }
    fn read_before_transmit(
        &self,
        _ctx: &BeforeTransmitInterceptorContextRef<'_>,
        _rc: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let _ = DDB_CALLS.try_with(|c| c.set(c.get() + 1));
        Ok(())
    }
}

/// Run `fut` with a fresh counter; returns its output and the number of DynamoDB HTTP attempts it made.
pub async fn count_ddb_calls<F: Future>(fut: F) -> (F::Output, u32) {
    DDB_CALLS
        .scope(Cell::new(0), async {
            let out = fut.await;
            (out, DDB_CALLS.with(Cell::get))
        })
        .await
}
